"""Reading files written by ``torch.save``, without PyTorch and without running code.

``torch.save`` writes a zip archive: ``<name>/data.pkl`` (a pickle of the object, in
which every tensor refers to a storage by key), ``<name>/data/<key>`` (the raw bytes of
each storage), ``<name>/byteorder`` and a few version records. A pickle can make the
unpickler call any importable function (``os.system`` included), so this module reads
it with :class:`RestrictedUnpickler`, which resolves a short list of names to functions
of its own, like PyTorch's ``weights_only=True`` loader:

* tensors and parameters (``torch._utils._rebuild_tensor_v2`` and friends, the typed
  storages ``torch.FloatStorage`` ... and ``torch.UntypedStorage``): rebuilt from the
  storage bytes after checking that every view lies inside its storage;
* ``collections.OrderedDict``, ``torch.Size`` (a tuple), ``torch.device``, the dtypes
  ``torch.float32`` ..., ``_codecs.encode`` (how protocol 2 stores bytes), ``set``,
  ``frozenset``, ``bytearray``, ``complex``, NumPy number scalars and their dtypes.

Any other name raises :class:`UnsafePickleError` before anything is called. Storages of
types kernelgrad does not have are widened as in ``kg.tensor``: float16 and bfloat16 to
float32, int8, int16 and uint8 to int32 (exactly; a warning lists the conversions).
Views of one storage load as separate tensors. Files of the legacy (pre-1.6) format and
TorchScript archives are refused with an explanation.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import re
import warnings
import zipfile
from collections.abc import Callable
from math import prod
from typing import Any, ClassVar

import numpy as np

from .dtypes import as_dtype, bool_, float32, float64, int32, int64
from .serialization import CheckpointError
from .tensor import Tensor

__all__ = ["RestrictedUnpickler", "UnsafePickleError", "is_torch_file", "read_torch_file"]

_ZIP_MAGIC = b"PK\x03\x04"
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a"  # pickle protocol 2, then a 10-byte magic number
_MAX_DIMS = 64


class UnsafePickleError(pickle.UnpicklingError):
    """A PyTorch file whose pickle needs something other than tensors and plain data
    (a class, a function, a module): refused without running any of it."""


# --- storages and tensors ----------------------------------------------------------------
class _StorageType:
    """What ``torch.FloatStorage`` and friends resolve to: the element type."""

    def __init__(self, name: str, numpy_dtype: str) -> None:
        self.name = name
        self.numpy = np.dtype(numpy_dtype)

    def __repr__(self) -> str:
        return f"torch.{self.name}"


_STORAGE_TYPES = {
    name: _StorageType(name, dtype)
    for name, dtype in {
        "FloatStorage": "<f4",
        "DoubleStorage": "<f8",
        "HalfStorage": "<f2",
        "BFloat16Storage": "<u2",  # widened to float32 by bit shifting
        "LongStorage": "<i8",
        "IntStorage": "<i4",
        "ShortStorage": "<i2",
        "CharStorage": "i1",
        "ByteStorage": "u1",
        "BoolStorage": "?",
        "UntypedStorage": "u1",
    }.items()
}


class _Storage:
    """One storage of the file: its elements as a 1-D NumPy array and its location."""

    def __init__(self, kind: _StorageType, values: np.ndarray, location: str) -> None:
        self.kind = kind
        self.values = values
        self.location = location


class _Marker:
    """What ``torch.Tensor`` and ``torch.nn.Parameter`` resolve to (only compared)."""

    def __init__(self, name: str) -> None:
        self.name = name


_TENSOR = _Marker("torch.Tensor")
_PARAMETER = _Marker("torch.nn.parameter.Parameter")


def _checked_ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple | list) or len(value) > _MAX_DIMS:
        raise UnsafePickleError(f"a tensor's {what} is {value!r}, not a tuple of integers")
    if not all(type(item) is int for item in value):
        raise UnsafePickleError(f"a tensor's {what} is {value!r}, not a tuple of integers")
    return tuple(value)


def _widened(values: np.ndarray, kind: _StorageType) -> tuple[np.ndarray, str | None]:
    """(values in a kernelgrad dtype, the conversion made or None)."""
    if kind.name == "BFloat16Storage":
        widened = (values.astype(np.uint32) << 16).view(np.float32)
        return widened, "bfloat16 -> float32"
    dtype = as_dtype(values.dtype)
    if np.dtype(dtype.numpy) != values.dtype.newbyteorder("="):
        return values.astype(dtype.numpy), f"{values.dtype.name} -> {dtype.name}"
    return values, None


class _TensorBuilder:
    """The functions the unpickler hands out for PyTorch's tensor rebuild names."""

    def __init__(self, place: Callable[[Tensor, str], Tensor]) -> None:
        self.place = place
        self.conversions: set[str] = set()

    def tensor(
        self,
        storage: Any,
        storage_offset: Any,
        size: Any,
        stride: Any,
        requires_grad: Any = False,
        backward_hooks: Any = None,
        metadata: Any = None,
    ) -> Tensor:
        from .ops.creation import tensor as make_tensor

        if not isinstance(storage, _Storage):
            raise UnsafePickleError(f"a tensor's storage is a {type(storage).__name__}")
        if storage.kind.name == "UntypedStorage":
            raise UnsafePickleError(
                "a tensor refers to an untyped storage without an element type; kernelgrad "
                "reads the typed storages that torch.save writes for tensors"
            )
        shape = _checked_ints(size, "size")
        strides = _checked_ints(stride, "stride")
        if type(storage_offset) is not int or len(strides) != len(shape):
            raise UnsafePickleError(
                f"a tensor has offset {storage_offset!r}, size {shape} and stride {strides}"
            )
        if backward_hooks:
            raise UnsafePickleError("a tensor carries backward hooks (code); refused")
        count = storage.values.shape[0]
        if prod(shape) != 0:
            lowest = storage_offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
            highest = storage_offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
            if lowest < 0 or highest >= count:
                raise CheckpointError(
                    f"a tensor of size {shape}, stride {strides} and offset {storage_offset} "
                    f"reaches outside its storage of {count} elements; the file is damaged"
                )
            itemsize = storage.values.itemsize
            view = np.lib.stride_tricks.as_strided(
                storage.values[storage_offset:],
                shape=shape,
                strides=[s * itemsize for s in strides],
                writeable=False,
            )
        else:
            view = np.zeros(shape, dtype=storage.values.dtype)
        values, conversion = _widened(np.array(view, copy=True), storage.kind)
        if conversion is not None:
            self.conversions.add(conversion)
        result = self.place(make_tensor(values), storage.location)
        if requires_grad is True:
            result.requires_grad_(True)
        return result

    def tensor_v1(self, storage: Any, storage_offset: Any, size: Any, stride: Any) -> Tensor:
        return self.tensor(storage, storage_offset, size, stride)

    def tensor_v3(
        self,
        storage: Any,
        storage_offset: Any,
        size: Any,
        stride: Any,
        requires_grad: Any,
        backward_hooks: Any,
        dtype: Any,
        metadata: Any = None,
    ) -> Tensor:
        return self.tensor(storage, storage_offset, size, stride, requires_grad, backward_hooks)

    def parameter(self, data: Any, requires_grad: Any = True, backward_hooks: Any = None) -> Any:
        from .nn.module import Parameter

        if not isinstance(data, Tensor):
            raise UnsafePickleError(f"a parameter's data is a {type(data).__name__}")
        if backward_hooks:
            raise UnsafePickleError("a parameter carries backward hooks (code); refused")
        return Parameter(data, requires_grad=bool(requires_grad))

    def parameter_with_state(
        self, data: Any, requires_grad: Any, backward_hooks: Any, state: Any
    ) -> Any:
        if state:
            raise UnsafePickleError(
                f"a parameter carries extra Python attributes {sorted(state)!r}; kernelgrad "
                "reads plain parameters only"
            )
        return self.parameter(data, requires_grad, backward_hooks)

    def from_type(self, function: Any, new_type: Any, args: Any, state: Any) -> Any:
        """``torch._tensor._rebuild_from_type_v2``: a tensor (subclass) with attributes."""
        allowed = (self.tensor, self.tensor_v1, self.tensor_v3, self.parameter)
        if function not in allowed or not isinstance(args, tuple):
            raise UnsafePickleError("a tensor is rebuilt by a function kernelgrad does not know")
        if new_type is not _TENSOR and new_type is not _PARAMETER:
            raise UnsafePickleError("a tensor of a subclass of torch.Tensor; refused")
        if state:
            raise UnsafePickleError(
                f"a tensor carries extra Python attributes {sorted(state)!r}; refused"
            )
        return function(*args)


# --- plain values --------------------------------------------------------------------------
def _encode(text: Any, encoding: Any = "latin1") -> bytes:
    """``_codecs.encode``: pickle protocol 2 stores ``bytes`` as a latin-1 string."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"_codecs.encode({text!r:.40}, {encoding!r}) is not plain bytes")
    return text.encode("latin1")


def _device(spec: Any, index: Any = None) -> Any:
    from .device import as_device

    text = spec if index is None else f"{spec}:{index}"
    if not isinstance(text, str):
        raise UnsafePickleError(f"torch.device({spec!r}) is not a device name")
    try:
        return as_device(text)
    except (ValueError, TypeError):
        return text  # a device kernelgrad does not have ('mps'): kept as its name


def _numpy_dtype(name: Any, align: Any = False, copy: Any = False) -> np.dtype:
    """``numpy.dtype(name, align, copy)``: always a new copy, so that the ``BUILD`` after
    it (the byte order) cannot change NumPy's shared descriptors."""
    dtype = np.dtype(name, copy=True) if isinstance(name, str) else None
    if dtype is None or dtype.kind not in "biuf":
        raise UnsafePickleError(f"numpy dtype {name!r}: only number dtypes are read")
    return dtype


def _numpy_scalar(dtype: Any, data: Any = None) -> Any:
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf" or dtype.fields:
        raise UnsafePickleError(f"a NumPy scalar of dtype {dtype!r}: only numbers are read")
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise UnsafePickleError("a NumPy scalar whose bytes do not match its dtype")
    return np.frombuffer(data, dtype=dtype)[0]


_DTYPES = {
    "float32": float32,
    "float": float32,
    "float64": float64,
    "double": float64,
    "int32": int32,
    "int": int32,
    "int64": int64,
    "long": int64,
    "bool": bool_,
}


def _bytearray(data: Any = b"") -> bytearray:
    if not isinstance(data, bytes | bytearray | str):
        raise UnsafePickleError(f"bytearray({type(data).__name__}): only bytes are read")
    return bytearray(data, "latin1") if isinstance(data, str) else bytearray(data)


class RestrictedUnpickler(pickle._Unpickler):
    """An unpickler that resolves only the names of tensors and plain data.

    ``find_class`` is the only way a pickle reaches Python callables (``GLOBAL``,
    ``STACK_GLOBAL``, ``INST``, ``OBJ`` and the extension registry all go through it), so
    a name missing from its table can never be called. ``BUILD`` (which sets attributes
    or calls ``__setstate__``) is allowed only on an ``OrderedDict`` (a ``state_dict``'s
    ``_metadata``) and on the fresh NumPy dtype of a scalar, so a pickle cannot change
    the objects the table hands out.
    ``persistent_load`` hands out the archive's storages, checking their sizes. It is
    the pure-Python unpickler (the file's pickle is small: tensor bytes are separate),
    whose opcode table can be changed.

    >>> import io, os, pickle
    >>> class Exploit:
    ...     def __reduce__(self):
    ...         return (os.system, ("echo pwned",))
    >>> RestrictedUnpickler(io.BytesIO(pickle.dumps(Exploit())), None).load()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kernelgrad.torch_format.UnsafePickleError: the file's pickle needs 'posix.system' (...
    """

    dispatch: ClassVar[dict] = dict(pickle._Unpickler.dispatch)

    def _restricted_build(self) -> None:
        state = self.stack.pop()
        instance = self.stack[-1]
        if (
            type(instance) is collections.OrderedDict
            and isinstance(state, dict)
            and all(isinstance(key, str) for key in state)
        ):
            instance.__dict__.update(state)
            return
        if isinstance(instance, np.dtype) and isinstance(state, tuple):
            instance.__setstate__(state)  # a fresh copy (see _numpy_dtype); checked by its user
            return
        raise UnsafePickleError(
            f"the file's pickle sets the state of a {type(instance).__name__}, which "
            "kernelgrad does not allow (only a state_dict's OrderedDict metadata)"
        )

    dispatch[pickle.BUILD[0]] = _restricted_build

    def __init__(
        self,
        file: Any,
        builder: _TensorBuilder | None,
        storages: Callable[[str, _StorageType, str, int], _Storage] | None = None,
    ) -> None:
        super().__init__(file)
        self._storages = storages
        self._names: dict[tuple[str, str], Any] = {
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("builtins", "set"): set,
            ("builtins", "frozenset"): frozenset,
            ("builtins", "bytearray"): _bytearray,
            ("builtins", "complex"): complex,
            ("_codecs", "encode"): _encode,
            ("torch", "Size"): lambda dims=(): tuple(_checked_ints(dims, "Size")),
            ("torch", "device"): _device,
            ("torch", "Tensor"): _TENSOR,
            ("torch.nn.parameter", "Parameter"): _PARAMETER,
        }
        for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            self._names[(module, "scalar")] = _numpy_scalar
        self._names[("numpy", "dtype")] = _numpy_dtype
        for name, dtype in _DTYPES.items():
            self._names[("torch", name)] = dtype
        for name, kind in _STORAGE_TYPES.items():
            self._names[("torch", name)] = kind
        if builder is not None:
            self._names.update(
                {
                    ("torch._utils", "_rebuild_tensor"): builder.tensor_v1,
                    ("torch._utils", "_rebuild_tensor_v2"): builder.tensor,
                    ("torch._utils", "_rebuild_tensor_v3"): builder.tensor_v3,
                    ("torch._utils", "_rebuild_parameter"): builder.parameter,
                    ("torch._utils", "_rebuild_parameter_with_state"): (
                        builder.parameter_with_state
                    ),
                    ("torch._tensor", "_rebuild_from_type_v2"): builder.from_type,
                }
            )

    def find_class(self, module: str, name: str) -> Any:
        if module == "__builtin__":  # protocol 2 writes Python 2's name (torch.save uses it)
            module = "builtins"
        found = self._names.get((module, name))
        if found is None:
            raise UnsafePickleError(
                f"the file's pickle needs '{module}.{name}' ({_what_it_is(module, name)}), "
                "and kernelgrad loads only tensors, parameters, containers (dict, list, "
                "tuple, set, OrderedDict) and plain values (numbers, strings, bytes, "
                "None, dtypes, devices), without running code from the file. If you trust "
                "the file, load it with PyTorch and save the plain data instead, e.g. "
                "torch.save(model.state_dict(), path) rather than torch.save(model, path)."
            )
        return found

    def persistent_load(self, pid: Any) -> Any:
        if (
            not isinstance(pid, tuple)
            or len(pid) != 5
            or pid[0] not in ("storage", b"storage")
            or not isinstance(pid[1], _StorageType)
        ):
            raise UnsafePickleError(f"unknown persistent reference {pid!r:.80}")
        if self._storages is None:
            raise UnsafePickleError("a tensor storage outside a PyTorch archive")
        _, kind, key, location, count = pid
        key = key.decode("ascii") if isinstance(key, bytes) else key
        location = location.decode("ascii") if isinstance(location, bytes) else location
        if not (isinstance(key, str) and isinstance(location, str) and type(count) is int):
            raise UnsafePickleError(f"malformed storage reference {pid!r:.80}")
        return self._storages(key, kind, location, count)


def _what_it_is(module: str, name: str) -> str:
    if module.split(".")[0] in ("os", "posix", "nt", "subprocess", "builtins", "sys", "shutil"):
        return "a function that can run code or commands"
    if module.startswith("torch.nn") or module.startswith("__main__") or name[:1].isupper():
        return "a class: a pickled object such as a whole model"
    return "a Python object kernelgrad does not read"


# --- the archive ------------------------------------------------------------------------------
def is_torch_file(content: bytes) -> bool:
    """Whether ``content`` looks like a ``torch.save`` file: a zip archive, or a pickle
    of the legacy format (which starts with its magic number). A safetensors file starts
    with its header's length and a ``{``, neither of which these can be."""
    if content[8:9] == b"{":
        return False
    return content[:4] == _ZIP_MAGIC or content[:4] == _LEGACY_MAGIC


class _Archive:
    def __init__(self, archive: zipfile.ZipFile, prefix: str, label: str, byteorder: str):
        self.archive = archive
        self.prefix = prefix
        self.label = label
        self.byteorder = byteorder
        self.loaded: dict[str, _Storage] = {}

    def storage(self, key: str, kind: _StorageType, location: str, count: int) -> _Storage:
        if key in self.loaded:
            return self.loaded[key]
        if not re.fullmatch(r"[0-9A-Za-z_.-]+", key):
            raise UnsafePickleError(f"a storage key {key!r:.40} is not a record name")
        record = f"{self.prefix}data/{key}"
        try:
            info = self.archive.getinfo(record)
        except KeyError:
            raise CheckpointError(
                f"{self.label}: the pickle refers to storage {key!r} but the archive has no "
                f"record {record!r}; the file is damaged"
            ) from None
        dtype = (
            kind.numpy
            if kind.numpy.itemsize == 1
            else kind.numpy.newbyteorder("<" if self.byteorder == "little" else ">")
        )
        if count < 0 or info.file_size != count * dtype.itemsize:
            raise CheckpointError(
                f"{self.label}: storage {key!r} should hold {count} elements of {kind.name} "
                f"({count * dtype.itemsize} bytes) but its record has {info.file_size} bytes"
            )
        raw = self.archive.read(record)
        values = np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="))
        self.loaded[key] = _Storage(kind, values, location)
        return self.loaded[key]


def _open_archive(content: io.BytesIO, label: str) -> tuple[zipfile.ZipFile, str]:
    try:
        archive = zipfile.ZipFile(content)
        names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise CheckpointError(
            f"{label}: not a readable PyTorch file (a damaged zip archive: {error})"
        ) from None
    pickles = [name for name in names if name.endswith("/data.pkl") and name.count("/") == 1]
    if not pickles:
        what = "a TorchScript archive" if any(n.endswith("constants.pkl") for n in names) else ""
        raise CheckpointError(
            f"{label}: a zip archive without the data.pkl record of a torch.save file"
            + (
                f" ({what}, made by torch.jit.save: kernelgrad reads only torch.save files)"
                if what
                else ""
            )
        )
    if len(pickles) > 1:
        raise CheckpointError(f"{label}: several data.pkl records ({pickles}); damaged file")
    return archive, pickles[0][: -len("data.pkl")]


def read_torch_file(content: io.BytesIO, label: str, place: Callable[[Tensor, str], Tensor]) -> Any:
    """The object a ``torch.save`` file holds, rebuilt by :class:`RestrictedUnpickler`;
    ``place(tensor, location)`` puts each tensor where it belongs (``map_location``)."""
    if content.getbuffer()[:4] == _LEGACY_MAGIC:
        raise CheckpointError(
            f"{label}: a PyTorch file in the legacy format (torch.save before PyTorch 1.6 or "
            "with _use_new_zipfile_serialization=False), which kernelgrad does not read. "
            "Save it again with a current PyTorch: torch.save(torch.load(old), new)."
        )
    archive, prefix = _open_archive(content, label)
    with archive:
        try:
            byteorder = archive.read(f"{prefix}byteorder").decode("ascii").strip()
        except KeyError:
            byteorder = "little"  # files written before the record existed
        if byteorder not in ("little", "big"):
            raise CheckpointError(f"{label}: unknown byte order {byteorder!r}")
        storages = _Archive(archive, prefix, label, byteorder)
        builder = _TensorBuilder(place)
        unpickler = RestrictedUnpickler(
            io.BytesIO(archive.read(f"{prefix}data.pkl")), builder, storages.storage
        )
        try:
            result = unpickler.load()
        except (UnsafePickleError, CheckpointError):
            raise
        except (pickle.UnpicklingError, EOFError, TypeError, ValueError) as error:
            raise CheckpointError(
                f"{label}: its pickle could not be read ({type(error).__name__}: {error}); "
                "the file is damaged or not a torch.save file"
            ) from None
    if builder.conversions:
        warnings.warn(
            f"kg.load({os.path.basename(label)!r}): kernelgrad has no "
            f"{', '.join(sorted(c.split(' ')[0] for c in builder.conversions))} tensors; "
            f"converted exactly: {', '.join(sorted(builder.conversions))}",
            stacklevel=3,
        )
    return result
