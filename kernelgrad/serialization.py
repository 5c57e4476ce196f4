"""Saving and loading tensors, models and training checkpoints in the safetensors format.

The format (https://github.com/huggingface/safetensors) is simple: an 8-byte
little-endian header length ``n``, ``n`` bytes of JSON header, then the raw bytes of
every tensor. The header maps each tensor name to its dtype, shape and byte range, and
may hold a ``"__metadata__"`` dict of strings. kernelgrad reads and writes it itself
(no dependency); files are interchangeable with the ``safetensors`` package.

* :func:`save_file` / :func:`load_file`: a dict of tensors (e.g. ``model.state_dict()``).
* :func:`save_checkpoint` / :func:`load_checkpoint`: model, optimizer, scheduler and
  extra values (epoch, metrics) in one file.

Every save is atomic: the file is written to a temporary file in the same folder,
flushed to disk (``fsync``) and renamed over the target, so an interrupted save leaves
the previous file intact. Loading validates the whole header against the file size, and
checkpoints written here carry a SHA-256 of the tensor bytes: a truncated or corrupted
file raises :class:`CheckpointError` naming the file and what is wrong. Loading into a
model checks names, shapes and dtypes and reports every mismatch at once
(:class:`CheckpointMismatchError`).

Checkpoint layout (names of tensors, metadata keys):

=================================  =========================================================
``model.<name>``                   each entry of ``model.state_dict()``
``optimizer.state.<i>.<key>``      tensor state of parameter ``i`` (e.g. ``exp_avg``, and
                                   Adam's 0-d ``step``)
metadata ``format``                ``"kernelgrad.checkpoint/1"``
metadata ``optimizer``             JSON: class name, ``param_groups`` and the non-tensor
                                   state by parameter index (Adam's ``step`` was a number
                                   here in older checkpoints; they still load)
metadata ``scheduler``             JSON: class name and ``scheduler.state_dict()``
metadata ``extra``                 JSON: the keyword arguments given to ``save_checkpoint``
metadata ``sha256``                hex digest of the tensor bytes
=================================  =========================================================

>>> import os, tempfile
>>> import kernelgrad as kg
>>> from kernelgrad.serialization import save_checkpoint, load_checkpoint
>>> model = kg.nn.Linear(3, 2)
>>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
>>> save_checkpoint(path, model, epoch=3)
>>> load_checkpoint(path, kg.nn.Linear(3, 2))["epoch"]
3
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Iterable, Mapping
from math import prod
from typing import Any

import numpy as np

from . import autograd
from .dtypes import DType, bool_, float32, float64, int32, int64
from .tensor import Tensor

__all__ = [
    "CheckpointError",
    "CheckpointMismatchError",
    "save_file",
    "load_file",
    "read_metadata",
    "save_checkpoint",
    "load_checkpoint",
]

FORMAT = "kernelgrad.checkpoint/1"
_MAX_HEADER = 100 * 1024 * 1024
_TO_CODE = {float32: "F32", float64: "F64", int32: "I32", int64: "I64", bool_: "BOOL"}
_FROM_CODE = {code: dtype for dtype, code in _TO_CODE.items()}
_NUMPY = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "BOOL": "|b1"}


class CheckpointError(ValueError):
    """A file that is not a valid safetensors file (truncated, corrupted, or not one)."""


class CheckpointMismatchError(CheckpointError):
    """A valid checkpoint that does not fit the model or optimizer it is loaded into."""


# =========================================================================================
# the file format
# =========================================================================================
def _as_array(name: str, value: Any) -> tuple[np.ndarray, str]:
    if isinstance(value, Tensor):
        dtype = value.dtype
        array = value.detach().cpu().numpy() if value.device.type != "cpu" else value.numpy()
    else:
        array = np.asarray(value)
        from .dtypes import as_dtype

        try:
            dtype = as_dtype(array.dtype)
        except TypeError:
            raise TypeError(
                f"save_file: tensor {name!r} has unsupported dtype {array.dtype}"
            ) from None
    code = _TO_CODE[dtype]
    # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    array = np.asarray(array, dtype=_NUMPY[code])
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    return array, code


def _prepare(tensors: Mapping[str, Any]) -> list[tuple[str, np.ndarray, str]]:
    """(name, little-endian contiguous host array, dtype code) for every tensor."""
    prepared = []
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"save_file: tensor names must be strings, got {name!r}")
        if name == "__metadata__":
            raise ValueError("save_file: '__metadata__' is reserved and cannot name a tensor")
        array, code = _as_array(name, value)
        prepared.append((name, array, code))
    return prepared


def _header(
    prepared: list[tuple[str, np.ndarray, str]], metadata: Mapping[str, str] | None
) -> bytes:
    """The header (with its length prefix), padded so the data starts 8-byte aligned."""
    header: dict[str, Any] = {}
    if metadata:
        for key, value in metadata.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(
                    f"save_file: metadata must map strings to strings, got {key!r}: {value!r}"
                )
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, array, code in prepared:
        header[name] = {
            "dtype": code,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def _bytes(array: np.ndarray) -> memoryview:
    return memoryview(array.reshape(-1).view(np.uint8))


def _atomic_write(path: str | os.PathLike, chunks: Iterable[bytes | np.ndarray]) -> None:
    """Write to a temporary file beside ``path``, fsync, then rename over ``path``."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            for chunk in chunks:
                handle.write(_bytes(chunk) if isinstance(chunk, np.ndarray) else chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    try:  # make the rename itself durable (POSIX; best effort elsewhere)
        directory_handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(directory_handle)
    except OSError:
        pass
    finally:
        os.close(directory_handle)


def save_file(
    tensors: Mapping[str, Any],
    path: str | os.PathLike,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write ``tensors`` (name -> Tensor or NumPy array) to a safetensors file, atomically.

    >>> import os, tempfile
    >>> import kernelgrad as kg
    >>> path = os.path.join(tempfile.mkdtemp(), "weights.safetensors")
    >>> kg.serialization.save_file({"w": kg.ones(2, 2)}, path)
    >>> kg.serialization.load_file(path)["w"].tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    prepared = _prepare(tensors)
    _atomic_write(path, [_header(prepared, metadata), *(array for _, array, _ in prepared)])


def _damaged(path: Any, reason: str) -> CheckpointError:
    return CheckpointError(f"{os.fspath(path)!r} is damaged or is not a safetensors file: {reason}")


def _read(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, str], bytes]:
    """(tensor entries, metadata, data bytes) after validating the whole layout."""
    with open(path, "rb") as handle:
        content = handle.read()
    size = len(content)
    if size < 8:
        raise _damaged(path, f"it is {size} bytes long, shorter than the 8-byte header length")
    (header_length,) = struct.unpack("<Q", content[:8])
    if header_length > min(size - 8, _MAX_HEADER):
        raise _damaged(
            path,
            f"the header length field says {header_length} bytes but only {size - 8} bytes "
            "follow (the file is truncated)",
        )
    try:
        header = json.loads(content[8 : 8 + header_length].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _damaged(path, f"its header is not valid JSON ({error})") from None
    if not isinstance(header, dict):
        raise _damaged(path, "its header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict):
        raise _damaged(path, "its '__metadata__' entry is not an object")
    data = content[8 + header_length :]
    spans = []
    for name, entry in header.items():
        try:
            code, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise _damaged(path, f"the header entry of tensor {name!r} is malformed") from None
        if code not in _FROM_CODE:
            raise CheckpointError(
                f"{os.fspath(path)!r}: tensor {name!r} has dtype {code!r}, which kernelgrad does "
                f"not support (supported: {', '.join(_FROM_CODE)})"
            )
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
            raise _damaged(path, f"tensor {name!r} has an invalid shape {shape!r}")
        itemsize = np.dtype(_NUMPY[code]).itemsize
        if (
            not (isinstance(begin, int) and isinstance(end, int))
            or end - begin != prod(shape) * itemsize
        ):
            raise _damaged(
                path,
                f"tensor {name!r} of shape {tuple(shape)} and dtype {code} needs "
                f"{prod(shape) * itemsize} bytes but its byte range is [{begin}, {end})",
            )
        spans.append((begin, end, name))
    spans.sort()
    position = 0
    for begin, end, name in spans:
        if begin != position:
            raise _damaged(
                path, f"the byte range of tensor {name!r} overlaps another or leaves a gap"
            )
        position = end
    if position != len(data):
        raise _damaged(
            path,
            f"the header describes {position} bytes of tensor data but the file holds "
            f"{len(data)} ({'truncated' if len(data) < position else 'extra bytes at the end'})",
        )
    expected_digest = metadata.get("sha256")
    if expected_digest is not None and hashlib.sha256(data).hexdigest() != expected_digest:
        raise _damaged(path, "its tensor bytes do not match the SHA-256 checksum in its metadata")
    return header, metadata, data


def _tensor(entry: dict[str, Any], data: bytes, device: Any) -> Tensor:
    from .ops.creation import tensor

    begin, end = entry["data_offsets"]
    code = entry["dtype"]
    array = np.frombuffer(
        data,
        dtype=_NUMPY[code],
        count=(end - begin) // np.dtype(_NUMPY[code]).itemsize,
        offset=begin,
    )
    native = array.reshape(entry["shape"]).astype(_FROM_CODE[code].numpy, copy=True)
    return tensor(native, dtype=_FROM_CODE[code], device=device)


def load_file(path: str | os.PathLike, device: Any = "cpu") -> dict[str, Tensor]:
    """Read every tensor of a safetensors file (onto ``device``)."""
    header, _, data = _read(path)
    return {name: _tensor(entry, data, device) for name, entry in header.items()}


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``__metadata__`` strings of a safetensors file (after validating it)."""
    return _read(path)[1]


# =========================================================================================
# checkpoints
# =========================================================================================
def _json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, default=_json_default)
    except TypeError as error:
        raise TypeError(f"save_checkpoint: the {what} cannot be stored as JSON: {error}") from None


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def save_checkpoint(
    path: str | os.PathLike,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    **extra: Any,
) -> None:
    """Save a model's state, an optimizer's and a scheduler's (each optional), and
    ``extra`` JSON values (``epoch=3``, ``best_accuracy=0.91``), atomically, in one
    safetensors file. See the module docstring for the layout."""
    tensors: dict[str, Any] = {}
    metadata = {"format": FORMAT}
    if model is not None:
        for name, value in model.state_dict().items():
            tensors[f"model.{name}"] = value
    if optimizer is not None:
        state = optimizer.state_dict()
        numbers: dict[str, dict[str, Any]] = {}
        for index, values in state["state"].items():
            for key, value in values.items():
                if isinstance(value, Tensor):
                    tensors[f"optimizer.state.{index}.{key}"] = value
                else:
                    numbers.setdefault(str(index), {})[key] = value
        metadata["optimizer"] = _json(
            {
                "class": type(optimizer).__name__,
                "param_groups": state["param_groups"],
                "state": numbers,
            },
            "optimizer state",
        )
    if scheduler is not None:
        metadata["scheduler"] = _json(
            {"class": type(scheduler).__name__, "state": scheduler.state_dict()},
            "scheduler state",
        )
    metadata["extra"] = _json(extra, "extra values")
    prepared = _prepare(tensors)
    digest = hashlib.sha256()
    for _, array, _ in prepared:
        digest.update(_bytes(array))
    metadata["sha256"] = digest.hexdigest()
    _atomic_write(path, [_header(prepared, metadata), *(array for _, array, _ in prepared)])


def _describe(dtype: DType | str) -> str:
    return dtype if isinstance(dtype, str) else dtype.name


def load_checkpoint(
    path: str | os.PathLike,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    strict: bool = True,
) -> dict[str, Any]:
    """Restore what :func:`save_checkpoint` saved into ``model``, ``optimizer`` and
    ``scheduler`` (each optional) and return the extra values.

    Before anything is changed, every entry is checked: missing and unexpected names
    (``strict=False`` tolerates them), wrong shapes and wrong dtypes are all listed in
    one :class:`CheckpointMismatchError`."""
    header, metadata, data = _read(path)
    where = os.fspath(path)
    problems: list[str] = []
    if metadata.get("format") != FORMAT:
        problems.append(
            f"it is not a kernelgrad checkpoint (metadata format {metadata.get('format')!r}); "
            "use kg.serialization.load_file for plain tensor files"
        )
        raise CheckpointMismatchError(f"cannot load {where!r}: " + "; ".join(problems))

    model_entries = {k[len("model.") :]: v for k, v in header.items() if k.startswith("model.")}
    if model is not None:
        own = model.state_dict()
        missing = [name for name in own if name not in model_entries]
        unexpected = [name for name in model_entries if name not in own]
        if strict and missing:
            problems.append("missing from the file: " + ", ".join(f"model.{n}" for n in missing))
        if strict and unexpected:
            problems.append("not in the model: " + ", ".join(f"model.{n}" for n in unexpected))
        for name, target in own.items():
            entry = model_entries.get(name)
            if entry is None:
                continue
            if tuple(entry["shape"]) != target.shape:
                problems.append(
                    f"model.{name}: shape {tuple(entry['shape'])} in the file, "
                    f"{target.shape} in the model"
                )
            if _FROM_CODE[entry["dtype"]] is not target.dtype:
                problems.append(
                    f"model.{name}: dtype {_FROM_CODE[entry['dtype']].name} in the file, "
                    f"{target.dtype.name} in the model"
                )

    optimizer_meta = json.loads(metadata["optimizer"]) if "optimizer" in metadata else None
    # "optimizer.state.{index}.{key}" entries, by name: (parameter index, state key, entry)
    state_entries: dict[str, tuple[int, str, dict[str, Any]]] = {}
    for name, entry in header.items() if optimizer is not None else ():
        if name.startswith("optimizer.state."):
            index_text, _, key = name[len("optimizer.state.") :].partition(".")
            state_entries[name] = (int(index_text), key, entry)
    if optimizer is not None:
        if optimizer_meta is None:
            problems.append("the file holds no optimizer state")
        else:
            if optimizer_meta.get("class") != type(optimizer).__name__:
                problems.append(
                    f"optimizer: saved from {optimizer_meta.get('class')}, loading into "
                    f"{type(optimizer).__name__}"
                )
            params = [p for group in optimizer.param_groups for p in group["params"]]
            saved_groups = optimizer_meta["param_groups"]
            saved_counts = [len(g["params"]) for g in saved_groups]
            own_counts = [len(g["params"]) for g in optimizer.param_groups]
            if saved_counts != own_counts:
                problems.append(
                    f"optimizer: parameter groups of sizes {saved_counts} in the file, "
                    f"{own_counts} in the optimizer"
                )
            for name, (index, _, entry) in state_entries.items():
                if index >= len(params):
                    problems.append(f"{name}: the optimizer has only {len(params)} parameters")
                    continue
                p = params[index]
                if tuple(entry["shape"]) not in (p.shape, ()):
                    problems.append(
                        f"{name}: shape {tuple(entry['shape'])} in the file, parameter {index} "
                        f"has shape {p.shape}"
                    )
                dtype = _FROM_CODE[entry["dtype"]]
                if dtype.is_floating_point and dtype is not p.dtype:
                    problems.append(
                        f"{name}: dtype {dtype.name} in the file, parameter {index} is "
                        f"{p.dtype.name}"
                    )
    scheduler_meta = json.loads(metadata["scheduler"]) if "scheduler" in metadata else None
    if scheduler is not None and scheduler_meta is None:
        problems.append("the file holds no scheduler state")
    if problems:
        raise CheckpointMismatchError(
            f"cannot load {where!r}: {len(problems)} problem(s):\n  " + "\n  ".join(problems)
        )

    if model is not None:
        with autograd.no_grad():
            own = model.state_dict()
            for name, entry in model_entries.items():
                if name in own:
                    own[name].copy_(_tensor(entry, data, own[name].device))
    if optimizer is not None and optimizer_meta is not None:
        state: dict[int, dict[str, Any]] = {}
        for index_text, values in optimizer_meta["state"].items():
            state.setdefault(int(index_text), {}).update(values)
        for index, key, entry in state_entries.values():
            state.setdefault(index, {})[key] = _tensor(entry, data, "cpu")
        groups = optimizer_meta["param_groups"]
        for saved, own_group in zip(groups, optimizer.param_groups):
            for key, value in list(saved.items()):
                if isinstance(own_group.get(key), tuple) and isinstance(value, list):
                    saved[key] = tuple(value)
        optimizer.load_state_dict({"state": state, "param_groups": groups})
    if scheduler is not None and scheduler_meta is not None:
        scheduler.load_state_dict(scheduler_meta["state"])
    return json.loads(metadata.get("extra", "{}"))
