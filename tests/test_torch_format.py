"""Reading torch.save files: values and dtypes against PyTorch, and files that must be
refused without running anything (malicious pickles, damaged archives).

The refusal tests build torch.save-shaped archives by hand (no PyTorch needed): a
pickler that writes any global name, and a zip with the records torch.save writes."""

from __future__ import annotations

import collections
import io
import os
import pickle
import warnings
import zipfile
from typing import ClassVar

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.serialization import CheckpointError
from kernelgrad.torch_format import UnsafePickleError
from tests.helpers import as_numpy


# --- building torch.save-shaped files without PyTorch ------------------------------------
class Global:
    """Pickled as the global ``module.name`` whatever Python object that names."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce wants a callable
        raise AssertionError("never called")


class Storage:
    def __init__(self, key: str, kind: str, values: np.ndarray, location: str = "cpu"):
        self.key, self.kind, self.values, self.location = key, kind, values, location


class Tensor:
    """A tensor reference as torch.save pickles it (``_rebuild_tensor_v2``)."""

    def __init__(self, storage: Storage, offset: int, size: tuple, stride: tuple, **extra):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())
        self.rebuild = extra.get("rebuild", "_rebuild_tensor_v2")


class Call:
    """Pickled as ``function(*args)`` (a REDUCE), optionally followed by BUILD(state)."""

    def __init__(self, function: Global, args: tuple, state=None) -> None:
        self.function, self.args, self.state = function, args, state


class TorchLikePickler(pickle._Pickler):
    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)

    def _save_global_name(self, obj: Global) -> None:
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())

    dispatch[Global] = _save_global_name

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", Global("torch", obj.kind), obj.key, obj.location, obj.values.size)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return (Global("torch._utils", obj.rebuild), obj.args)
        if isinstance(obj, Call):
            return (obj.function, obj.args, obj.state)
        return NotImplemented


def torch_like_file(obj, storages=(), byteorder="little", extra_records=None) -> io.BytesIO:
    data = io.BytesIO()
    TorchLikePickler(data, protocol=2).dump(obj)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", data.getvalue())
        archive.writestr("archive/byteorder", byteorder)
        archive.writestr("archive/version", "3\n")
        for storage in storages:
            values = storage.values.astype(storage.values.dtype.newbyteorder(">"))
            raw = values.tobytes() if byteorder == "big" else storage.values.tobytes()
            archive.writestr(f"archive/data/{storage.key}", raw)
        for name, content in (extra_records or {}).items():
            archive.writestr(name, content)
    buffer.seek(0)
    return buffer


class Exploit:
    """Unpickling runs ``os.system`` (creates the marker file)."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


# --- refusals ------------------------------------------------------------------------------
def test_a_malicious_pickle_in_a_torch_archive_is_refused_and_does_not_run(tmp_path):
    marker = tmp_path / "ran"
    assert os.system(f"touch {tmp_path / 'control'}") == 0  # the payload would work
    payload = {"state_dict": {"w": 1.0}, "hook": Exploit(marker)}
    path = tmp_path / "model.pt"
    path.write_bytes(torch_like_file(payload).getvalue())
    for weights_only in (True, False):  # no flag makes kernelgrad run code from a file
        with pytest.raises(UnsafePickleError, match=r"needs '(posix|nt)\.system'.*run code"):
            kg.load(path, weights_only=weights_only)
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError):  # what PyTorch users catch
        kg.load(path)


def test_a_plain_pickle_file_is_never_unpickled(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(Exploit(marker)))
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        kg.load(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (("builtins", "eval"), "run code"),
        (("builtins", "getattr"), "run code"),
        (("subprocess", "Popen"), "run code"),
        (("__main__", "MyModel"), "a class"),
        (("torch.nn.modules.linear", "Linear"), "a class"),
        (("numpy.core.multiarray", "_reconstruct"), "does not read"),
    ],
)
def test_every_other_global_is_refused_before_it_is_called(name, why):
    with pytest.raises(UnsafePickleError, match=why):
        kg.load(torch_like_file({"x": Call(Global(*name), ("1 + 1",))}))


def test_a_pickle_cannot_change_the_objects_the_unpickler_hands_out():
    # BUILD on the dtype kernelgrad returns for torch.float32 would rename kg.float32
    # for the whole process if the unpickler allowed it.
    attack = Call(Global("torch", "Size"), ((1,),))
    build_on_dtype = (
        pickle.PROTO + b"\x02ctorch\nfloat32\nN}X\x04\x00\x00\x00nameX\x01\x00\x00\x00xs\x86b."
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", build_on_dtype)
    with pytest.raises(UnsafePickleError, match="sets the state of a DType"):
        kg.load(io.BytesIO(buffer.getvalue()))
    assert kg.float32.name == "float32"
    with pytest.raises(UnsafePickleError, match="sets the state of a tuple"):
        kg.load(torch_like_file(Call(attack.function, attack.args, {"a": 1})))


def test_tensor_references_are_checked_against_their_storage():
    values = np.arange(6, dtype=np.float32)
    storage = Storage("0", "FloatStorage", values)
    ok = torch_like_file({"t": Tensor(storage, 1, (2, 2), (1, 2))}, [storage])
    np.testing.assert_array_equal(as_numpy(kg.load(ok)["t"]), [[1, 3], [2, 4]])
    outside = torch_like_file({"t": Tensor(storage, 2, (2, 3), (3, 1))}, [storage])
    with pytest.raises(CheckpointError, match="reaches outside its storage of 6 elements"):
        kg.load(outside)
    negative = torch_like_file({"t": Tensor(storage, 0, (2,), (-1,))}, [storage])
    with pytest.raises(CheckpointError, match="reaches outside"):
        kg.load(negative)
    short = Storage("0", "FloatStorage", values)
    short_file = torch_like_file({"t": Tensor(short, 0, (6,), (1,))}, [])
    with pytest.raises(CheckpointError, match="no record 'archive/data/0'"):
        kg.load(short_file)
    wrong_size = torch_like_file({"t": Tensor(storage, 0, (6,), (1,))}, [])
    with zipfile.ZipFile(wrong_size, "a") as archive:
        archive.writestr("archive/data/0", values.tobytes()[:-4])
    with pytest.raises(CheckpointError, match=r"should hold 6 elements.*has 20 bytes"):
        kg.load(io.BytesIO(wrong_size.getvalue()))
    bad_size = torch_like_file({"t": Tensor(storage, 0, ("6",), (1,))}, [storage])
    with pytest.raises(UnsafePickleError, match="not a tuple of integers"):
        kg.load(bad_size)


def test_big_endian_archives_are_read():
    values = np.array([1.5, -2.0, 3.25], dtype=np.float64)
    storage = Storage("7", "DoubleStorage", values)
    loaded = kg.load(torch_like_file([Tensor(storage, 0, (3,), (1,))], [storage], "big"))
    assert loaded[0].dtype is kg.float64 and loaded[0].tolist() == values.tolist()


def test_damaged_legacy_and_torchscript_files_are_explained(tmp_path):
    good = torch_like_file({"x": 1}).getvalue()
    with pytest.raises(CheckpointError, match="damaged zip archive"):
        kg.load(io.BytesIO(good[: len(good) // 2]))
    legacy = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19." + b"\x00" * 16
    with pytest.raises(CheckpointError, match="legacy format"):
        kg.load(io.BytesIO(legacy))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("model/constants.pkl", b"")
        archive.writestr("model/code/__torch__.py", b"")
    with pytest.raises(CheckpointError, match="TorchScript archive"):
        kg.load(io.BytesIO(buffer.getvalue()))
    truncated_pickle = torch_like_file({"x": [1, 2, 3]})
    with zipfile.ZipFile(truncated_pickle) as archive:
        data = archive.read("archive/data.pkl")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", data[:-3])
    with pytest.raises(CheckpointError, match="its pickle could not be read"):
        kg.load(io.BytesIO(buffer.getvalue()))


def test_cuda_locations_follow_map_location():
    storage = Storage("0", "FloatStorage", np.ones(2, np.float32), location="cuda:0")
    file = torch_like_file({"w": Tensor(storage, 0, (2,), (1,))}, [storage]).getvalue()
    if not kg.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location='cpu'"):
            kg.load(io.BytesIO(file))
    loaded = kg.load(io.BytesIO(file), map_location=lambda tensor, location: tensor)
    assert loaded["w"].device == kg.device("cpu")


# --- files written by PyTorch -----------------------------------------------------------------
@pytest.mark.torch
def test_torch_save_files_load_with_their_values_dtypes_and_structure(tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    obj = {
        "float32": torch.randn(3, 4),
        "float64": torch.tensor(2.5, dtype=torch.float64),
        "int64": torch.tensor([1, -2, 3]),
        "int32": torch.tensor([7], dtype=torch.int32),
        "int16": torch.tensor([-300, 5], dtype=torch.int16),
        "int8": torch.tensor([-3, 5], dtype=torch.int8),
        "uint8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False]),
        "float16": torch.tensor([0.5, -1.25], dtype=torch.float16),
        "bfloat16": torch.tensor([1.5, 3.0], dtype=torch.bfloat16),
        "view": base[1:, ::2],
        "transposed": base.T,
        "empty": torch.zeros(0, 3),
        "parameter": torch.nn.Parameter(torch.ones(2)),
        "grad_leaf": torch.ones(2, requires_grad=True),
        "nested": [(1, "two", None), {"three": 3.0}],
        "ordered": collections.OrderedDict(b=1, a=2),
        "size": torch.Size([2, 3]),
        "device": torch.device("cpu"),
        "dtype": torch.float64,
        "bytes": b"\x00\xff",
        "set": {1, 2},
        "numpy_scalar": np.float32(1.5),
    }
    path = tmp_path / "torch.pt"
    torch.save(obj, path)
    with pytest.warns(UserWarning, match="bfloat16 -> float32.*uint8 -> int32"):
        loaded = kg.load(path)
    assert list(loaded) == list(obj)
    widened = {"int16": kg.int32, "int8": kg.int32, "uint8": kg.int32}
    widened |= {"float16": kg.float32, "bfloat16": kg.float32}
    for name, value in obj.items():
        if isinstance(value, torch.Tensor):
            got = loaded[name]
            expected = value.detach().float() if name == "bfloat16" else value.detach()
            want = expected.numpy()
            assert got.dtype is widened.get(name, kg.as_tensor(want).dtype), name
            assert got.shape == tuple(value.shape)
            np.testing.assert_array_equal(as_numpy(got), want.astype(got.dtype.numpy))
    assert isinstance(loaded["parameter"], kg.nn.Parameter) and loaded["parameter"].requires_grad
    assert loaded["grad_leaf"].requires_grad and not loaded["float32"].requires_grad
    assert loaded["nested"] == [(1, "two", None), {"three": 3.0}]
    assert type(loaded["ordered"]) is collections.OrderedDict
    assert loaded["size"] == (2, 3) and loaded["device"] == kg.device("cpu")
    assert loaded["dtype"] is kg.float64 and loaded["bytes"] == b"\x00\xff"
    assert loaded["set"] == {1, 2} and loaded["numpy_scalar"] == np.float32(1.5)


@pytest.mark.torch
def test_a_torch_checkpoint_loads_into_the_same_kernelgrad_model(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    reference = torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(12, 2)
    )
    buffer = io.BytesIO()
    torch.save({"model": reference.state_dict(), "epoch": 4}, buffer)
    buffer.seek(0)
    checkpoint = kg.load(buffer, map_location="cpu")
    model = kg.nn.Sequential(
        kg.nn.Conv2d(1, 3, 3), kg.nn.ReLU(), kg.nn.Flatten(), kg.nn.Linear(12, 2)
    )
    model.load_state_dict(checkpoint["model"])
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32)
    with torch.no_grad():
        want = reference(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(as_numpy(model(kg.tensor(x))), want, rtol=1e-5, atol=1e-6)
    assert checkpoint["epoch"] == 4


@pytest.mark.torch
def test_a_pickled_torch_module_is_refused_with_the_state_dict_advice(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "whole_model.pt"
    torch.save(torch.nn.Linear(2, 2), path)
    with pytest.raises(UnsafePickleError, match=r"torch.nn.modules.linear.Linear.*state_dict"):
        kg.load(path)


@pytest.mark.torch
def test_the_builder_matches_torch_save_for_a_plain_file():
    """The hand-built archives above have the layout torch.load expects."""
    torch = pytest.importorskip("torch")
    values = np.arange(4, dtype=np.float32)
    storage = Storage("0", "FloatStorage", values)
    file = torch_like_file({"t": Tensor(storage, 0, (2, 2), (2, 1))}, [storage])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = torch.load(file, weights_only=True)
    np.testing.assert_array_equal(loaded["t"].numpy(), values.reshape(2, 2))
