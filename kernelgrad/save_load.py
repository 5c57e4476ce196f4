"""``kg.save`` / ``kg.load``: PyTorch's ``torch.save`` / ``torch.load`` without pickle.

``kg.save(obj, f)`` stores a tensor, or nested dicts, lists and tuples of tensors and
plain Python values (a ``state_dict()``, an optimizer's state, a training checkpoint
dict), as a safetensors file: every tensor is one safetensors entry, and the structure
around them (containers, numbers, strings, which entry goes where) is JSON in the
file's metadata. A flat dict of tensors, such as a ``state_dict()``, keeps its keys as
the entry names, so other safetensors readers see the usual names.

``kg.load(f)`` reads such files, any other safetensors file (a flat dict of its
tensors) and files written by ``torch.save`` (a zip archive of a pickle and the tensor
bytes; see :mod:`kernelgrad.torch_format`). Loading never runs code from the file: the
safetensors structure is JSON, and PyTorch pickles go through an unpickler that knows
only tensors, plain containers and values, and refuses everything else.

Where a tensor goes (``map_location``), as in PyTorch:

* ``None``: the device it was saved from (a CUDA tensor on a machine without CUDA is an
  error that suggests ``map_location="cpu"``);
* a device or its name (``"cpu"``, ``kg.device("cuda:1")``): every tensor goes there;
* a dict from saved to wanted location (``{"cuda:1": "cuda:0"}``); others stay;
* a function ``fn(tensor, location)`` that receives each tensor on the CPU and the name
  of the device it was saved from, and returns the tensor to use (or None: default).

>>> import os, tempfile
>>> import kernelgrad as kg
>>> model = kg.nn.Linear(3, 2)
>>> path = os.path.join(tempfile.mkdtemp(), "model.pt")
>>> kg.save({"model": model.state_dict(), "epoch": 3}, path)
>>> checkpoint = kg.load(path)
>>> checkpoint["epoch"], sorted(checkpoint["model"])
(3, ['bias', 'weight'])
>>> model.load_state_dict(checkpoint["model"])
IncompatibleKeys(missing_keys=[], unexpected_keys=[])
"""

from __future__ import annotations

import base64
import collections
import io
import json
import math
import os
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np

from . import serialization
from .device import Device, as_device
from .dtypes import DType, as_dtype
from .serialization import CheckpointError
from .tensor import Tensor
from .torch_format import UnsafePickleError, is_torch_file, read_torch_file

__all__ = ["save", "load", "CheckpointError", "UnsafePickleError", "OBJECT_FORMAT"]

OBJECT_FORMAT = "kernelgrad.object/1"
_STRUCTURE_KEY = "kernelgrad.structure"

FileLike = str | os.PathLike | BinaryIO


# =========================================================================================
# saving
# =========================================================================================
class _Encoder:
    """Turns an object into (JSON structure, {entry name: tensor or array})."""

    def __init__(self) -> None:
        self.tensors: dict[str, Any] = {}
        self.names: dict[int, str] = {}  # id(tensor) -> entry name (shared tensors once)
        self.keep_alive: list[Any] = []  # ids stay unique while encoding

    def entry_name(self, path: list[str]) -> str:
        base = ".".join(path) or "tensor"
        name, number = base, 1
        while name in self.tensors or name == "__metadata__":
            name, number = f"{base}#{number}", number + 1
        return name

    def tensor(self, value: Tensor, path: list[str]) -> dict[str, Any]:
        name = self.names.get(id(value))
        if name is None:
            name = self.names[id(value)] = self.entry_name(path)
            self.tensors[name] = value
            self.keep_alive.append(value)
        reference: dict[str, Any] = {"tensor": name}
        if value.device.type != "cpu":
            reference["device"] = str(value.device)
        if value.requires_grad:
            reference["requires_grad"] = True
        if _is_parameter(value):
            reference["parameter"] = True
        return reference

    def array(self, value: np.ndarray, path: list[str]) -> dict[str, Any]:
        try:
            dtype = as_dtype(value.dtype)
        except TypeError:
            raise TypeError(
                f"kg.save: the NumPy array at {_where(path)} has dtype {value.dtype}, which "
                "kernelgrad cannot store (numbers and booleans only)"
            ) from None
        name = self.entry_name(path)
        self.tensors[name] = np.asarray(value, dtype=dtype.numpy)
        return {"ndarray": name, "dtype": str(value.dtype)}

    def encode(self, value: Any, path: list[str]) -> Any:
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, Tensor):
            return self.tensor(value, path)
        if isinstance(value, int | np.integer):
            return int(value)
        if isinstance(value, float | np.floating):
            value = float(value)
            return value if math.isfinite(value) else {"float": repr(value)}
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.ndarray):
            return self.array(value, path)
        if isinstance(value, list):
            return [self.encode(item, [*path, str(i)]) for i, item in enumerate(value)]
        if isinstance(value, tuple):
            return {"tuple": [self.encode(item, [*path, str(i)]) for i, item in enumerate(value)]}
        if isinstance(value, dict):
            kind = "ordered_dict" if isinstance(value, collections.OrderedDict) else "dict"
            items = [
                [self.encode(key, [*path, "<key>"]), self.encode(item, [*path, str(key)])]
                for key, item in value.items()
            ]
            return {kind: items}
        if isinstance(value, set | frozenset):
            kind = "frozenset" if isinstance(value, frozenset) else "set"
            return {kind: [self.encode(item, [*path, "<item>"]) for item in value]}
        if isinstance(value, bytes | bytearray):
            return {"bytes": base64.b64encode(bytes(value)).decode("ascii")}
        if isinstance(value, complex):
            return {"complex": [self.encode(value.real, path), self.encode(value.imag, path)]}
        if isinstance(value, DType):
            return {"dtype": value.name}
        if isinstance(value, Device):
            return {"device": str(value)}
        raise TypeError(_unsupported_message(value, path))


def _is_parameter(value: Tensor) -> bool:
    from .nn.module import Parameter

    return isinstance(value, Parameter)


def _where(path: list[str]) -> str:
    return "obj" + "".join(f"[{part!r}]" for part in path)


def _unsupported_message(value: Any, path: list[str]) -> str:
    kind = type(value).__name__
    message = (
        f"kg.save cannot store the {kind} at {_where(path)}: files hold tensors, NumPy "
        "arrays, and dicts, lists, tuples and sets of them and of None, bool, int, float, "
        "str, bytes, dtypes and devices (no pickled objects, so that loading a file can "
        "never run code from it)."
    )
    from .nn.module import Module

    if isinstance(value, Module):
        message += f" Save the model's weights instead: kg.save({kind.lower()}.state_dict(), f)."
    elif hasattr(value, "state_dict"):
        message += " Save its state_dict() instead."
    return message


def save(obj: Any, f: FileLike) -> None:
    """Save ``obj`` (a tensor, or containers of tensors and plain values) to ``f``.

    ``f`` is a path (written atomically: a temporary file renamed over the target) or a
    binary file object. The file is a safetensors file whatever its name (``.pt`` is
    fine); :func:`load` reads it back. Tensors on another device are copied to the host
    and remember their device. A tensor that appears twice in ``obj`` is stored once and
    loads as one tensor again; separate views of one tensor load as separate tensors.

    >>> import io
    >>> import kernelgrad as kg
    >>> buffer = io.BytesIO()
    >>> kg.save({"step": 10, "weights": [kg.ones(2), kg.zeros(1)]}, buffer)
    >>> _ = buffer.seek(0)
    >>> loaded = kg.load(buffer)
    >>> loaded["step"], [w.tolist() for w in loaded["weights"]]
    (10, [[1.0, 1.0], [0.0]])
    """
    encoder = _Encoder()
    structure = encoder.encode(obj, [])
    metadata = {
        "format": OBJECT_FORMAT,
        _STRUCTURE_KEY: json.dumps(structure, separators=(",", ":"), allow_nan=False),
    }
    if isinstance(f, str | os.PathLike):
        serialization.save_file(encoder.tensors, f, metadata)
        return
    if not hasattr(f, "write"):
        raise TypeError(
            f"kg.save: f must be a path or a binary file object with write(), got "
            f"{type(f).__name__}"
        )
    prepared = serialization._prepare(encoder.tensors)
    f.write(serialization._header(prepared, metadata))
    for _, array, _ in prepared:
        f.write(serialization._bytes(array))


# =========================================================================================
# loading
# =========================================================================================
def _placement(map_location: Any) -> Callable[[Tensor, str], Tensor]:
    """A function (tensor on the CPU, saved location) -> tensor where it belongs."""

    def move(tensor: Tensor, location: Any) -> Tensor:
        device = as_device(location)
        if device.type == "cuda":
            from . import cuda

            if not cuda.is_available():
                raise RuntimeError(
                    f"the file holds a tensor saved from {location}, but CUDA is not "
                    "available on this machine. Load it onto the CPU with "
                    "kg.load(f, map_location='cpu')."
                )
        return tensor.to(device)

    if map_location is None:
        return move
    if isinstance(map_location, str | Device):
        target = as_device(map_location)
        return lambda tensor, location: move(tensor, target)
    if isinstance(map_location, dict):
        return lambda tensor, location: move(tensor, map_location.get(location, location))
    if callable(map_location):

        def call(tensor: Tensor, location: Any) -> Tensor:
            result = map_location(tensor, location)
            return move(tensor, location) if result is None else result

        return call
    raise TypeError(
        "kg.load: map_location must be None, a device ('cpu', 'cuda:0', kg.device(...)), "
        f"a dict of saved -> wanted locations, or a function; got {type(map_location).__name__}"
    )


class _Decoder:
    def __init__(
        self, label: str, tensors: dict[str, Tensor], place: Callable[[Tensor, str], Tensor]
    ) -> None:
        self.label = label
        self.tensors = tensors
        self.place = place
        self.placed: dict[str, Tensor] = {}

    def fail(self, reason: str) -> CheckpointError:
        return CheckpointError(f"{self.label}: its kernelgrad structure is invalid: {reason}")

    def entry(self, name: Any) -> Tensor:
        if not isinstance(name, str) or name not in self.tensors:
            raise self.fail(f"it refers to a tensor {name!r} that the file does not hold")
        return self.tensors[name]

    def tensor(self, node: dict[str, Any]) -> Tensor:
        name = node["tensor"]
        if name in self.placed:
            return self.placed[name]
        location = node.get("device", "cpu")
        if not isinstance(location, str):
            raise self.fail(f"tensor {name!r} has the device {location!r}")
        value = self.place(self.entry(name), location)
        if node.get("parameter"):
            from .nn.module import Parameter

            value = Parameter(value, requires_grad=bool(node.get("requires_grad")))
        elif node.get("requires_grad"):
            value.requires_grad_(True)
        self.placed[name] = value
        return value

    def decode(self, node: Any) -> Any:
        if node is None or isinstance(node, bool | int | float | str):
            return node
        if isinstance(node, list):
            return [self.decode(item) for item in node]
        if not isinstance(node, dict) or len(node) == 0:
            raise self.fail(f"unexpected entry {node!r}")
        if "tensor" in node:
            return self.tensor(node)
        if len(node) == 2 and "ndarray" in node:
            array = self.entry(node["ndarray"]).numpy()
            return array.astype(np.dtype(node["dtype"]), copy=True)
        if len(node) != 1:
            raise self.fail(f"unexpected entry {node!r}")
        ((kind, body),) = node.items()
        if kind in ("dict", "ordered_dict"):
            if not all(isinstance(item, list) and len(item) == 2 for item in body):
                raise self.fail(f"a {kind} entry is not a list of [key, value] pairs")
            pairs = [(self.decode(key), self.decode(value)) for key, value in body]
            return collections.OrderedDict(pairs) if kind == "ordered_dict" else dict(pairs)
        decoders = {
            "tuple": lambda: tuple(self.decode(item) for item in body),
            "set": lambda: {self.decode(item) for item in body},
            "frozenset": lambda: frozenset(self.decode(item) for item in body),
            "float": lambda: float(body),
            "bytes": lambda: base64.b64decode(body, validate=True),
            "complex": lambda: complex(*body),
            "dtype": lambda: as_dtype(body),
            "device": lambda: as_device(body),
        }
        if kind not in decoders:
            raise self.fail(f"unknown entry kind {kind!r}")
        try:
            return decoders[kind]()
        except (TypeError, ValueError) as error:
            raise self.fail(f"bad {kind} entry {body!r} ({error})") from None


def _label(f: Any) -> str:
    if isinstance(f, str | os.PathLike):
        return os.fspath(f)
    name = getattr(f, "name", None)
    return name if isinstance(name, str) else f"<{type(f).__name__}>"


def _read_bytes(f: FileLike) -> bytes:
    if isinstance(f, str | os.PathLike):
        with open(f, "rb") as handle:
            return handle.read()
    if not hasattr(f, "read"):
        raise TypeError(
            f"kg.load: f must be a path or a binary file object with read(), got {type(f).__name__}"
        )
    content = f.read()
    if not isinstance(content, bytes | bytearray | memoryview):
        raise TypeError("kg.load: the file object must be opened in binary mode ('rb')")
    return bytes(content)


def load(
    f: FileLike,
    map_location: Any = None,
    *,
    weights_only: bool | None = True,
) -> Any:
    """Load what :func:`save` or ``torch.save`` stored in ``f`` (a path or a binary file
    object), or the tensors of any safetensors file (as a dict by entry name).

    No code from the file ever runs, whatever ``weights_only`` says (the argument is
    accepted for PyTorch's signature): files of this library hold JSON and raw tensor
    bytes, and PyTorch files are read with an unpickler that builds only tensors, plain
    containers and values and raises :class:`UnsafePickleError` for anything else (a
    pickled module, class or function). ``map_location``: see the module docstring.

    >>> import io
    >>> import kernelgrad as kg
    >>> buffer = io.BytesIO()
    >>> kg.save(kg.arange(3), buffer)
    >>> _ = buffer.seek(0)
    >>> kg.load(buffer, map_location="cpu").tolist()
    [0, 1, 2]
    """
    del weights_only  # nothing is ever unpickled beyond plain data
    place = _placement(map_location)
    label = _label(f)
    content = _read_bytes(f)
    if is_torch_file(content):
        return read_torch_file(io.BytesIO(content), label, place)
    header, metadata, data = serialization._read(label, content)
    tensors = {name: serialization._tensor(entry, data, "cpu") for name, entry in header.items()}
    if metadata.get("format") != OBJECT_FORMAT or _STRUCTURE_KEY not in metadata:
        return {name: place(tensor, "cpu") for name, tensor in tensors.items()}
    decoder = _Decoder(label, tensors, place)
    try:
        structure = json.loads(metadata[_STRUCTURE_KEY])
    except ValueError as error:
        raise decoder.fail(f"the structure is not valid JSON ({error})") from None
    return decoder.decode(structure)
