"""Dataset, TensorDataset, Subset and DataLoader behaviour."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.data import DataLoader, Dataset, Subset, TensorDataset, load_dataset


def _dataset(count: int = 23) -> TensorDataset:
    features = np.arange(count * 3, dtype=np.float32).reshape(count, 3)
    return TensorDataset(features, np.arange(count))


def _ids(loader: DataLoader) -> list[list[int]]:
    return [labels.tolist() for _, labels in loader]


def test_batches_in_order_without_shuffle():
    loader = DataLoader(_dataset(10), batch_size=4)
    assert len(loader) == 3
    assert _ids(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    features, labels = next(iter(loader))
    assert isinstance(features, kg.Tensor) and features.dtype == kg.float32
    assert labels.dtype == kg.int64
    np.testing.assert_array_equal(features.numpy(), np.arange(12).reshape(4, 3))


def test_drop_last():
    loader = DataLoader(_dataset(10), batch_size=4, drop_last=True)
    assert len(loader) == 2
    assert [len(batch) for batch in _ids(loader)] == [4, 4]
    exact = DataLoader(_dataset(8), batch_size=4, drop_last=True)
    assert len(exact) == 2 and len(_ids(exact)) == 2


def test_shuffle_visits_every_sample_once_per_epoch():
    loader = DataLoader(_dataset(23), batch_size=5, shuffle=True, seed=3)
    first = [i for batch in _ids(loader) for i in batch]
    second = [i for batch in _ids(loader) for i in batch]
    assert sorted(first) == list(range(23)) and sorted(second) == list(range(23))
    assert first != list(range(23))
    assert first != second  # a new order every epoch


def test_same_seed_same_batches_and_different_seed_differs():
    runs = [_ids(DataLoader(_dataset(), batch_size=4, shuffle=True, seed=7)) for _ in range(2)]
    assert runs[0] == runs[1]
    other = _ids(DataLoader(_dataset(), batch_size=4, shuffle=True, seed=8))
    assert other != runs[0]


def test_state_dict_resumes_the_order_of_later_epochs():
    reference = DataLoader(_dataset(), batch_size=4, shuffle=True, seed=11)
    epochs = [_ids(reference) for _ in range(3)]
    first = DataLoader(_dataset(), batch_size=4, shuffle=True, seed=11)
    assert _ids(first) == epochs[0]
    state = first.state_dict()
    resumed = DataLoader(_dataset(), batch_size=4, shuffle=True)  # a different seed at first
    resumed.load_state_dict(state)
    assert [_ids(resumed), _ids(resumed)] == epochs[1:]
    resumed.set_epoch(0)
    assert _ids(resumed) == epochs[0]


def test_seed_comes_from_generator_or_manual_seed():
    a = DataLoader(_dataset(), shuffle=True, generator=np.random.default_rng(5))
    b = DataLoader(_dataset(), shuffle=True, generator=np.random.default_rng(5))
    assert a.seed == b.seed
    kg.manual_seed(1234)
    assert DataLoader(_dataset(), shuffle=True).seed == 1234


def test_batches_are_gathered_in_bulk():
    class CountingDataset(Dataset):
        def __init__(self):
            self.single = 0
            self.bulk = 0

        def __len__(self):
            return 10

        def __getitem__(self, index):
            self.single += 1
            return np.float32(index), index

        def get_batch(self, indices):
            self.bulk += 1
            return indices.astype(np.float32), indices

    dataset = CountingDataset()
    assert len(_ids(DataLoader(dataset, batch_size=4))) == 3
    assert (dataset.single, dataset.bulk) == (0, 3)


def test_plain_sequences_are_collated_per_sample():
    samples = [(np.full(2, i, dtype=np.float32), i) for i in range(5)]
    batches = list(DataLoader(samples, batch_size=2))
    assert [labels.tolist() for _, labels in batches] == [[0, 1], [2, 3], [4]]
    assert batches[1][0].numpy().tolist() == [[2.0, 2.0], [3.0, 3.0]]


def test_tensor_dataset_of_kernelgrad_tensors(device):
    features = kg.arange(12, dtype=kg.float32, device=device).reshape(6, 2)
    labels = kg.tensor([0, 1, 2, 3, 4, 5], device=device)
    dataset = TensorDataset(features, labels)
    assert dataset[2][1].device == kg.device(device)
    batch_features, batch_labels = next(
        iter(DataLoader(dataset, batch_size=3, shuffle=True, seed=0))
    )
    assert batch_features.device == kg.device(device)
    order = batch_labels.cpu().numpy()
    np.testing.assert_array_equal(batch_features.cpu().numpy(), features.cpu().numpy()[order])


def test_device_argument_moves_batches(device):
    loader = DataLoader(_dataset(6), batch_size=3, device=device)
    features, labels = next(iter(loader))
    assert features.device == kg.device(device) and labels.device == kg.device(device)


def test_tensor_dataset_rejects_different_lengths():
    with pytest.raises(ValueError, match=r"same first dimension.*\(3, 2\), \(4,\)"):
        TensorDataset(np.zeros((3, 2)), np.zeros(4))


def test_subset_keeps_bulk_gathering_and_attributes():
    digits = load_dataset("digits", train=False)
    subset = Subset(digits, np.arange(10, 20))
    assert len(subset) == 10 and subset.classes == digits.classes
    images, labels = next(iter(DataLoader(subset, batch_size=10)))
    assert tuple(images.shape) == (10, 1, 28, 28)
    np.testing.assert_array_equal(labels.numpy(), digits.labels[10:20])


def test_image_dataset_normalises_pixels():
    digits = load_dataset("digits", train=True)
    image, label = digits[0]
    assert tuple(image.shape) == (1, 28, 28) and isinstance(label, int)
    expected = (digits.images[0] / 255.0 - digits.mean) / digits.std
    np.testing.assert_allclose(image.numpy()[0], expected, rtol=1e-6, atol=1e-6)
    pixels = digits.get_batch(np.arange(len(digits)))[0]
    # The normalisation constants are those of the training split.
    assert abs(float(pixels.mean())) < 0.01 and abs(float(pixels.std()) - 1) < 0.01


def test_batch_size_must_be_positive():
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(_dataset(), batch_size=0)


Point = collections.namedtuple("Point", ["image", "label"])


def test_named_tuple_samples_come_back_as_named_tuples(device):
    samples = [Point(np.full(2, i, np.float32), i) for i in range(4)]
    for loader, expected in (
        (DataLoader(samples, batch_size=2), "cpu"),
        (DataLoader(samples, batch_size=2, device=device), kg.device(device).type),
        (DataLoader(samples, batch_size=None, device=device), kg.device(device).type),
    ):
        batches = list(loader)
        assert all(type(batch) is Point for batch in batches)
        assert batches[0].image.device.type == expected
    assert batches[1].image.cpu().tolist() == [1.0, 1.0] and batches[1].label == 1
    batch = next(iter(DataLoader(samples, batch_size=2)))
    assert batch.image.shape == (2, 2) and batch.label.tolist() == [0, 1]
    nested = kg.utils.data.default_convert(Point(np.zeros(2), [np.ones(1)]))
    assert type(nested) is Point and isinstance(nested.label[0], kg.Tensor)


def test_default_convert_shares_memory_as_torch_as_tensor():
    convert = kg.utils.data.default_convert
    results = {}
    for name, make in (
        ("contiguous", lambda: np.zeros((2, 3), np.float32)),
        ("strided", lambda: np.zeros((2, 6), np.float64)[:, ::2]),
        ("transposed", lambda: np.zeros((3, 2), np.int64).T),
    ):
        array = make()
        converted = convert(array)
        array[0, 0] = 5
        results[name] = converted[0, 0].item()
    assert results == {"contiguous": 5.0, "strided": 5.0, "transposed": 5}
    scalar = convert(np.float32(1.5))
    assert scalar.shape == () and scalar.item() == 1.5
    torch = pytest.importorskip("torch")
    for name, make in (("contiguous", np.zeros), ("strided", lambda s: np.zeros((2, 6))[:, ::2])):
        array = make((2, 3))
        converted = torch.utils.data.default_convert(array)
        array[0, 0] = 5
        assert converted[0, 0].item() == results[name] == 5


def _move_to_cpu(array: np.ndarray) -> kg.Tensor:
    from kernelgrad.data.loader import _to_device

    return _to_device(array, "cpu")


_CONVERTERS = {
    "as_tensor": kg.as_tensor,
    "default_convert": kg.utils.data.default_convert,
    "device_move": _move_to_cpu,
}


@pytest.mark.parametrize("convert", list(_CONVERTERS.values()), ids=list(_CONVERTERS))
def test_numpy_arrays_become_tensors_by_as_tensors_rule(convert):
    """One rule for kg.as_tensor, default_convert and the loader's device move: a
    writable array of a tensor dtype with non-negative strides is shared; a read-only
    array, a converted dtype, a negative stride or a stride that is not a multiple of
    the item size gives a copy."""
    for array in (
        np.zeros((2, 3), np.float32),
        np.zeros((2, 6))[:, ::2],
        np.zeros((3, 2), np.int64).T,
        np.zeros((2, 3), bool),
    ):
        t = convert(array)
        array[0, 1] = 1
        assert t[0, 1].item() == 1 and t.dtype.numpy == array.dtype
        t[1, 0] = 1
        assert array[1, 0] == 1
    base = np.zeros((2, 6), np.float32)
    frozen = base[:, ::2]
    frozen.flags.writeable = False
    t = convert(frozen)
    base[0, 2] = 5.0  # the array changes through a writable view: the tensor does not
    assert t.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]] and t.dtype == kg.float32
    t.add_(1.0)  # a copy, so written in place freely
    assert frozen.tolist() == [[0.0, 5.0, 0.0], [0.0, 0.0, 0.0]]
    for array, dtype in (
        (np.arange(3, dtype=np.uint8), kg.int32),
        (np.arange(3.0)[::-1], kg.float64),
        (np.zeros(3, [("a", "<f4"), ("b", "u1")])["a"], kg.float32),
    ):
        t = convert(array)
        expected = array.tolist()
        array[1] = 9
        assert t.tolist() == expected and t.dtype == dtype


def test_batches_moved_to_the_device_share_host_memory_on_the_cpu():
    from kernelgrad.data.loader import _to_device

    array = np.zeros((2, 4), np.float32)[:, ::2]
    moved = _to_device(Point(array, [array]), "cpu")
    array[1, 1] = 3.0
    assert moved.image[1, 1].item() == 3.0 and moved.label[0][1, 1].item() == 3.0
    reversed_rows = np.arange(3.0)[::-1]  # a negative stride: copied (PyTorch refuses it)
    assert _to_device(reversed_rows, "cpu").tolist() == [2.0, 1.0, 0.0]
