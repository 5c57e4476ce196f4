"""Integer-array and mask indexing (gather), index_add (scatter-add), setitem."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close, check_grad

COVERED = {"take", "index_add"}


@pytest.fixture
def values():
    return np.arange(60.0).reshape(3, 4, 5)


def test_integer_array_indexing_matches_numpy(values, device):
    t = kg.tensor(values, device=device)
    index = np.array([2, 0, 2, -1])
    assert_close(t[kg.tensor(index, device=device)], values[index])
    assert_close(t[:, [1, 3]], values[:, [1, 3]])
    # an integer selects its dim first (PyTorch's rule; NumPy would put the index dims first)
    assert_close(t[1, :, [[0, 4], [2, 2]]], values[1][:, [[0, 4], [2, 2]]])
    assert_close(
        t[kg.arange(3, device=device), kg.tensor([0, 3, 1], device=device)],
        values[np.arange(3), [0, 3, 1]],
    )
    assert_close(t[:, [0, 2], [1, 4]], values[:, [0, 2], [1, 4]])
    # Non-adjacent advanced indices move to the front, as in NumPy.
    assert_close(t[[0, 2], :, [1, 4]], values[[0, 2], :, [1, 4]])
    assert_close(t.T[[1, 0]], values.T[[1, 0]])


def test_an_integer_is_no_advanced_index_as_in_pytorch(values, device):
    """`x[1, :, [1, 3]]` of a (3, 4, 5) tensor had NumPy's shape (2, 4): the integer was
    taken as an advanced index, not adjacent to the list, so the index dims went first.
    PyTorch selects the integer's dim first: (4, 2). The same for a 0-d integer tensor
    and with a boolean mask in place of the list; assignments follow the same rule."""
    t = kg.tensor(values, device=device)
    assert_close(t[1, :, [1, 3]], values[1][:, [1, 3]])
    assert_close(t[kg.tensor(1, device=device), :, [1, 3]], values[1][:, [1, 3]])
    assert_close(t[-1, None, [1, 3]], values[-1][None, [1, 3]])
    assert_close(t[:, 2, ..., [0, 4]], values[:, 2][..., [0, 4]])
    assert_close(t[1, :, kg.tensor([True, False, True, False, True])], values[1][:, [0, 2, 4]])
    assert_close(t[[0, 2], :, 1, None], values[:, :, 1][[0, 2], :, None])
    # separated by a slice, two index tensors still put their dims first
    assert_close(t[[0, 2], 1:, [1, 4]], values[[0, 2], 1:, [1, 4]])
    written = kg.zeros(3, 4, 5, device=device)
    written[1, :, [1, 3]] = kg.arange(8.0, device=device).reshape(4, 2)
    expected = np.zeros((3, 4, 5))
    expected[1][:, [1, 3]] = np.arange(8.0).reshape(4, 2)
    assert_close(written, expected)
    source = kg.tensor(values, device=device, requires_grad=True)
    (source[1, :, [1, 3]] * kg.arange(8.0, device=device).reshape(4, 2)).sum().backward()
    assert_close(source.grad, expected)


INDEX_KEYS = {
    "int, slice, list": lambda m: (1, slice(None), [1, 3]),
    "int, slice, list, slice": lambda m: (1, slice(None), [0, 2], slice(None)),
    "list, slice, int": lambda m: ([0, 1], slice(None), 1),
    "slice, list, slice, int": lambda m: (slice(None), [0, 2], slice(None), 1),
    "slice, int, slice, list": lambda m: (slice(None), 1, slice(None), [1, 3]),
    "list, slice, list": lambda m: ([0, 1], slice(None), [1, 3]),
    "int, list, slice, list": lambda m: (1, [0, 2], slice(None), [1, 3]),
    "int, slice, int, list": lambda m: (1, slice(None), 2, [1, 3]),
    "int, None, list": lambda m: (1, None, [1, 2]),
    "int, ..., list": lambda m: (1, Ellipsis, [1, 3]),
    "int, slice, 2-d, slice": lambda m: (1, slice(None), m.tensor([[0, 1], [2, 3]]), slice(None)),
    "0-d, slice, list": lambda m: (m.tensor(1), slice(None), [1, 3]),
    "list, slice, 0-d, list": lambda m: ([0, 1], slice(None), m.tensor(2), [1, 3]),
    "slice, 0-d, slice, list": lambda m: (slice(None), m.tensor(2), slice(None), [1, 3]),
    "int, slice, mask": lambda m: (1, slice(None), m.tensor([True, False, True, True])),
    "slice, int, slice, mask": lambda m: (
        slice(None),
        1,
        slice(None),
        m.tensor([True, False, True, False, True]),
    ),
    "mask, slice, int, list": lambda m: (m.tensor([True, True]), slice(None), 1, [1, 3]),
}


@pytest.mark.parametrize("name", sorted(INDEX_KEYS))
def test_mixed_indices_match_pytorch(name, device):
    """Reads, writes and gradients of keys mixing integers, slices, lists, masks and 0-d
    tensors against PyTorch (shape and values)."""
    torch = pytest.importorskip("torch")
    key_kg, key_torch = INDEX_KEYS[name](kg), INDEX_KEYS[name](torch)
    key_kg = tuple(k.to(device) if isinstance(k, kg.Tensor) else k for k in key_kg)
    x = kg.arange(120, device=device).reshape(2, 3, 4, 5)
    want = torch.arange(120).reshape(2, 3, 4, 5)[key_torch]
    assert_close(x[key_kg], want.numpy())
    value = torch.arange(1.0, want.numel() + 1.0).reshape(want.shape)
    written, expected = kg.zeros(2, 3, 4, 5, device=device), torch.zeros(2, 3, 4, 5)
    written[key_kg] = kg.tensor(value.numpy(), device=device)
    expected[key_torch] = value
    assert_close(written, expected.numpy())


def test_boolean_mask_indexing(values, device):
    t = kg.tensor(values, device=device)
    mask = values > 30
    assert_close(t[t > 30], values[mask])
    row_mask = np.array([True, False, True])
    assert_close(t[kg.tensor(row_mask, device=device)], values[row_mask])


def test_out_of_range_indices_raise(values, device):
    t = kg.tensor(values, device=device)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        t[kg.tensor([0, 3], device=device)].cpu()  # CUDA reports it at the next read
    with pytest.raises(IndexError, match="out of bounds"):
        t[kg.arange(3, device=device), kg.tensor([0, 9, 1], device=device)]
    with pytest.raises(TypeError, match="integer"):
        t[kg.tensor([0.0, 1.0], device=device)]


def test_take_and_index_select(device):
    values = np.arange(12.0).reshape(3, 4)
    t = kg.tensor(values, device=device)
    index = kg.tensor([[2, 0], [1, 1]], device=device)
    assert_close(kg.take(t, 1, index), values[:, [[2, 0], [1, 1]]])
    assert_close(t.index_select(0, kg.tensor([2, 2, 0], device=device)), values[[2, 2, 0]])


def test_gather_matches_torch_semantics(device):
    values = np.arange(12.0).reshape(3, 4)
    index = np.array([[0, 3], [2, 2], [1, 0]])
    t = kg.tensor(values, device=device)
    assert_close(t.gather(1, kg.tensor(index, device=device)), np.take_along_axis(values, index, 1))
    index0 = np.array([[2, 1, 0, 0]])
    assert_close(
        t.gather(0, kg.tensor(index0, device=device)), np.take_along_axis(values, index0, 0)
    )
    with pytest.raises(IndexError, match="out of bounds"):
        t.gather(1, kg.tensor([[4]], device=device))


def test_index_add_accumulates_repeated_indices(device):
    target = kg.zeros(4, 2, device=device)
    source = kg.ones(3, 2, device=device)
    result = kg.index_add(target, 0, kg.tensor([1, 1, 3], device=device), source)
    assert_close(result, [[0, 0], [2, 2], [0, 0], [1, 1]])
    with pytest.raises(kg.ShapeError, match="expected"):
        kg.index_add(target, 0, kg.tensor([1], device=device), source)


def test_gather_gradients_accumulate(device):
    index = kg.tensor([0, 2, 0, 0], device=device)
    check_grad(
        lambda x: x[index] * 2, np.random.default_rng(5).standard_normal((3, 2)), device=device
    )
    rows = kg.arange(3, device=device)
    cols = kg.tensor([1, 0, 1], device=device)
    check_grad(
        lambda x: x[rows, cols], np.random.default_rng(6).standard_normal((3, 2)), device=device
    )
    check_grad(
        lambda x: x.gather(1, kg.tensor([[1, 1], [0, 1], [0, 0]], device=device)),
        np.random.default_rng(7).standard_normal((3, 2)),
        device=device,
    )
    check_grad(
        lambda t, s: kg.index_add(t, 1, kg.tensor([0, 0, 2], device=device), s),
        np.random.default_rng(8).standard_normal((2, 3)),
        np.random.default_rng(9).standard_normal((2, 3)),
        device=device,
    )


def test_setitem_basic(device):
    values = np.zeros((3, 4))
    t = kg.tensor(values, device=device)
    t[1] = 5.0
    t[:, 2] = kg.tensor([1.0, 2.0, 3.0], device=device)
    t[2, ::2] = kg.tensor([7.0, 8.0], device=device)
    values[1] = 5.0
    values[:, 2] = [1, 2, 3]
    values[2, ::2] = [7, 8]
    assert_close(t, values)
    version = t._storage.version
    t[0] = 1.0
    assert t._storage.version > version


def test_setitem_advanced_on_cpu():
    t = kg.zeros(5)
    t[kg.tensor([1, 3])] = 2.0
    t[t > 1.5] = 4.0
    assert_close(t, [0, 4, 0, 4, 0])


def test_setitem_refuses_leaves_that_need_grad(device):
    w = kg.zeros(3, requires_grad=True, device=device)
    with pytest.raises(kg.InplaceError, match="no_grad"):
        w[0] = 1.0
    with kg.no_grad():
        w[0:1] = 1.0
    assert_close(w.detach(), [1.0, 0.0, 0.0])


def test_setitem_into_a_tensor_in_a_graph_is_recorded(device):
    # as PyTorch: the overwritten region passes no gradient back, the value gets its own
    x = kg.tensor([[1.0, -2.0], [3.0, 4.0]], requires_grad=True, device=device)
    value = kg.tensor([10.0, 20.0], requires_grad=True, device=device)
    y = x * 2
    y[0] = value
    y[1:, :1] = 0.0
    (y * kg.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)).sum().backward()
    assert_close(y.detach(), [[10.0, 20.0], [0.0, 8.0]])
    assert_close(x.grad, [[0.0, 0.0], [0.0, 8.0]])
    assert_close(value.grad, [1.0, 2.0])


def test_overlapping_copy_is_safe(device):
    t = kg.arange(6.0, device=device)
    t[1:] = t[:-1].clone()
    assert_close(t, [0, 0, 1, 2, 3, 4])
    u = kg.arange(6.0, device=device)
    u[1:] = u[:-1]  # overlapping source and target: computed before writing
    assert_close(u, [0, 0, 1, 2, 3, 4])


def test_boolean_mask_must_match_the_indexed_dims(device):
    """A mask shorter (or longer) than its dim used to select from its first rows only:
    `kg.arange(5)[kg.tensor([True, False])]` gave `[0]`. NumPy and PyTorch raise."""
    t = kg.arange(5, device=device)
    short = kg.tensor([True, False], device=device)
    with pytest.raises(IndexError, match=r"mask of shape \(2,\).*tensor of shape \(5,\)"):
        t[short]
    with pytest.raises(kg.errors.IndexingError, match="dimension 1 has size 4"):
        kg.zeros(3, 4, device=device)[:, kg.tensor([True, False, True], device=device)]
    with pytest.raises(IndexError, match=r"mask dimension 1 has size 2"):
        kg.zeros(3, 4, device=device)[kg.ones(3, 2, device=device) > 0]
    # After an ellipsis the mask indexes the last dims.
    grid = np.arange(24).reshape(2, 3, 4)
    mask = np.array([True, False, False, True])
    assert_close(
        kg.tensor(grid, device=device)[..., kg.tensor(mask, device=device)], grid[..., mask]
    )
    with pytest.raises(IndexError, match="does not match"):
        kg.tensor(grid, device=device)[..., kg.tensor(mask[:3], device=device)]


def test_setitem_with_a_wrong_mask_writes_nothing():
    t = kg.arange(5)
    with pytest.raises(IndexError, match="does not match"):
        t[kg.tensor([True, False])] = 9
    assert t.tolist() == [0, 1, 2, 3, 4]


def test_advanced_setitem_checks_indices_and_values():
    t = kg.zeros(2, 3)
    with pytest.raises(kg.errors.IndexingError, match="indexing: index 5 is out of bounds"):
        t[kg.tensor([5])] = 1.0
    with pytest.raises(kg.errors.DTypeError, match="integer"):
        t[kg.tensor([0.0])] = 1.0
    with pytest.raises(kg.ShapeError, match=r"\(2,\)"):
        t[kg.tensor([1])] = kg.ones(2)
    t[:, kg.tensor([-1])] = kg.tensor([[8.0], [9.0]])
    assert t.tolist() == [[0, 0, 8], [0, 0, 9]]
    assert kg.arange(3)[[]].shape == (0,)


# --- regressions found by the fuzz campaign (tests/fuzz) -------------------------------------
def test_indices_are_checked_even_when_nothing_is_selected(device):
    """`kg.zeros(0, 0)[[0]]` returned an empty tensor (no element to gather, so no
    check ran); PyTorch 2.13 raises "index 0 is out of bounds for dimension 0 with size
    0". Same for index_add with an empty source."""
    empty = kg.zeros(0, 0, device=device)
    with pytest.raises(IndexError, match="index 0 is out of bounds for dimension 0 with size 0"):
        empty[kg.tensor([0], device=device)]
    with pytest.raises(IndexError, match="take: index 0 is out of bounds"):
        kg.take(empty, 0, kg.tensor(0, device=device))
    with pytest.raises(IndexError, match="index_add: index 0 is out of bounds"):
        kg.index_add(empty, 0, kg.tensor([0], device=device), kg.zeros(1, 0, device=device))
    assert kg.zeros(2, 0, device=device)[kg.tensor([1], device=device)].shape == (1, 0)


def test_gather_and_index_add_refuse_0d_tensors(device):
    """They leaked `IndexError: tuple index out of range`."""
    scalar = kg.tensor(1.0, device=device)
    with pytest.raises(kg.ShapeError, match="gather: cannot index a 0-d tensor"):
        scalar.gather(0, kg.tensor(0, device=device))
    with pytest.raises(kg.ShapeError, match="index_add: cannot index a 0-d tensor"):
        kg.index_add(scalar, 0, kg.tensor(0, device=device), scalar)


def test_zero_slice_steps_and_mismatched_assignments(device):
    """A zero slice step leaked Python's `ValueError: slice step cannot be zero`;
    assigning a (2,) value to an empty selection was accepted (PyTorch: shape mismatch)."""
    row = kg.zeros(3, device=device)
    with pytest.raises(kg.errors.IndexingError, match="indexing: slice step cannot be zero"):
        row[::0]
    with pytest.raises(IndexError, match="slice step cannot be zero"):
        row[::0] = 1.0
    with pytest.raises(kg.ShapeError, match=r"indexing \(assignment\)"):
        kg.zeros(0, device=device)[()] = kg.zeros(2, device=device)


def test_advanced_assignment_checks_every_index():
    """An out-of-range integer beside an index list, and index lists that do not
    broadcast, leaked NumPy's IndexError."""
    grid = kg.zeros(0, 2)
    with pytest.raises(kg.errors.IndexingError, match="indexing: index 0 is out of bounds"):
        grid[0, [1]] = 1.0
    with pytest.raises(kg.ShapeError, match=r"indexing: shapes \(0,\) and \(2,\)"):
        kg.zeros(2, 3)[[], [0, 0]] = 1.0
