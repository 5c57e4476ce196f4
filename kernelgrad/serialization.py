"""Saving and loading tensors, models and training checkpoints in the safetensors format.

The format (https://github.com/huggingface/safetensors) is simple: an 8-byte
little-endian header length ``n``, ``n`` bytes of JSON header, then the raw bytes of
every tensor. The header maps each tensor name to its dtype, shape and byte range, and
may hold a ``"__metadata__"`` dict of strings. kernelgrad reads and writes it itself
(no dependency); files are interchangeable with the ``safetensors`` package.

* :func:`save_file` / :func:`load_file`: a dict of tensors (e.g. ``model.state_dict()``).
* :func:`save_checkpoint` / :func:`load_checkpoint`: model, optimizer, scheduler and
  extra values (epoch, metrics) in one file.

**Atomic saves.** Every save writes a temporary file in the target's folder (named
``.<name>.kg-<pid>-<host>-<random>.tmp``, with the permissions ``open()`` would give:
0o666 less the umask, or those of the file it replaces), flushes it to disk (``fsync``)
and renames it over the target, so an interrupted save leaves the previous file intact.
A process killed during a save (``kill -9``, a power cut) leaves its temporary file
behind; the next save into that folder deletes such files when their writer is gone
(a process of this machine and process namespace that no longer runs) or when they are
older than a day, and never a live writer's.

**Integrity.** Loading validates the whole header against the file size. A checkpoint
records the SHA-256 of the entire file (``file_sha256``, computed with its own 64
characters written as zeros), so any changed byte is detected: tensor data, names,
shapes and the stored settings alike. Before anything is written into a model,
optimizer or scheduler, every stored value is checked (types, ranges such as
``lr >= 0`` and ``betas`` in [0, 1), parameter indices) and compared with the objects
it is loaded into; every problem raises :class:`CheckpointError` naming the file, and
mismatches are listed together in one :class:`CheckpointMismatchError`.

Checkpoint layout (names of tensors, metadata keys):

=================================  =========================================================
``model.<name>``                   each entry of ``model.state_dict()``
``optimizer.state.<i>.<key>``      tensor state of parameter ``i`` (e.g. ``exp_avg``, and
                                   Adam's 0-d ``step``)
metadata ``format``                ``"kernelgrad.checkpoint/2"``
metadata ``optimizer``             JSON: class name, ``param_groups`` and the non-tensor
                                   state by parameter index (Adam's ``step`` was a number
                                   here in older checkpoints; they still load)
metadata ``scheduler``             JSON: class name and ``scheduler.state_dict()``
metadata ``extra``                 JSON: the keyword arguments given to ``save_checkpoint``
metadata ``file_sha256``           hex SHA-256 of the whole file, these 64 digits as zeros
=================================  =========================================================

Checkpoints of format 1 (``"kernelgrad.checkpoint/1"``, whose ``sha256`` covers the
tensor bytes only) still load, with the same checks of every stored value; saving them
again writes format 2.

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
import copy
import functools
import hashlib
import json
import math
import os
import platform
import re
import secrets
import stat
import struct
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from . import autograd
from .dtypes import bool_, float32, float64, int32, int64
from .tensor import Tensor

__all__ = [
    "CheckpointError",
    "CheckpointMismatchError",
    "save_file",
    "load_file",
    "read_metadata",
    "save_checkpoint",
    "load_checkpoint",
    "remove_stale_temporaries",
]

FORMAT = "kernelgrad.checkpoint/2"
_FORMAT_PREFIX = "kernelgrad.checkpoint/"
_FORMAT_1 = "kernelgrad.checkpoint/1"  # digest over the tensor bytes only; still loads
_DIGEST_KEY = "file_sha256"
_DIGEST_FIELD = b'"file_sha256":"'
_DIGEST_PLACEHOLDER = b"0" * 64
_MAX_HEADER = 100 * 1024 * 1024
_TEMPORARY_MAX_AGE = 24 * 3600  # seconds after which any temporary file of ours is stale
_TO_CODE = {float32: "F32", float64: "F64", int32: "I32", int64: "I64", bool_: "BOOL"}
_FROM_CODE = {code: dtype for dtype, code in _TO_CODE.items()}
_NUMPY = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "BOOL": "|b1"}


class CheckpointError(ValueError):
    """A file that is not a valid safetensors file or checkpoint (truncated, corrupted,
    holding invalid values, or not one at all)."""


class CheckpointMismatchError(CheckpointError):
    """A valid checkpoint that does not fit the model or optimizer it is loaded into."""


# =========================================================================================
# atomic writes
# =========================================================================================
_TEMPORARY_NAME = re.compile(r"\..*\.kg-([0-9]+)-([0-9a-f]{8})-[0-9a-f]{8}\.tmp")
# What tempfile.mkstemp named the temporary files of earlier versions (removed by age).
_EARLIER_TEMPORARY_NAME = re.compile(r"\..+\.safetensors\.[a-z0-9_]{8}\.tmp")


@functools.cache
def _host_tag() -> str:
    """Names this machine and its process-id namespace: only a writer with the same tag
    can be looked up by its process id (containers that share a folder and a host name
    have their own process ids)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # Linux
    except OSError:
        namespace = ""
    return hashlib.sha256(f"{platform.node()} {namespace}".encode()).hexdigest()[:8]


def _open_temporary(directory: str, basename: str) -> tuple[int, str]:
    """Create a new temporary file as ``open()`` would (mode 0o666 less the umask, where
    ``mkstemp`` gives 0o600): (descriptor, path)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    owner = f"kg-{os.getpid()}-{_host_tag()}"
    while True:
        name = f".{basename[:100]}.{owner}-{secrets.token_hex(4)}.tmp"
        temporary = os.path.join(directory, name)
        try:
            return os.open(temporary, flags, 0o666), temporary
        except FileExistsError:
            continue


def _writer_is_gone(pid: int, host: str) -> bool:
    """Whether the process that named a temporary file has certainly exited."""
    if host != _host_tag() or os.name != "posix":
        return False  # another machine's or container's file: only its age tells
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False  # alive but another user's, or not a possible process id
    return False


def remove_stale_temporaries(directory: str | os.PathLike) -> list[str]:
    """Delete the temporary files that interrupted saves left in ``directory`` and return
    their names: those whose writer (a process on this machine) is gone, and any older
    than a day. A live writer's file is never touched. Saves call this themselves.

    >>> import tempfile
    >>> remove_stale_temporaries(tempfile.mkdtemp())
    []
    """
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        ours = _TEMPORARY_NAME.fullmatch(entry.name)
        if ours is None and _EARLIER_TEMPORARY_NAME.fullmatch(entry.name) is None:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            old = now - entry.stat(follow_symlinks=False).st_mtime > _TEMPORARY_MAX_AGE
            if old or (ours is not None and _writer_is_gone(int(ours[1]), ours[2])):
                os.unlink(entry.path)
                removed.append(entry.name)
        except OSError:
            continue  # removed meanwhile, or not ours to remove
    return removed


def _keep_mode(descriptor: int, path: str) -> None:
    """Give the new file the permissions of the file it replaces (as writing into that
    file with ``open()`` would keep them)."""
    with contextlib.suppress(OSError, AttributeError):  # no such file; no fchmod here
        os.fchmod(descriptor, stat.S_IMODE(os.stat(path).st_mode))


def _atomic_write(path: str | os.PathLike, chunks: Iterable[bytes | np.ndarray]) -> None:
    """Write to a temporary file beside ``path``, fsync, then rename over ``path``."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temporaries(directory)
    descriptor, temporary = _open_temporary(directory, os.path.basename(path))
    try:
        _keep_mode(descriptor, path)
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
    if metadata and _DIGEST_KEY in metadata:
        raise ValueError(f"save_file: the metadata key {_DIGEST_KEY!r} is reserved")
    prepared = _prepare(tensors)
    _atomic_write(path, [_header(prepared, metadata), *(array for _, array, _ in prepared)])


def _damaged(path: Any, reason: str) -> CheckpointError:
    return CheckpointError(f"{os.fspath(path)!r} is damaged or is not a safetensors file: {reason}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys must be distinct (a repeated key hides an entry)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"the key {key!r} appears twice")
        result[key] = value
    return result


def _file_digest(content: bytes, digest_at: int) -> str:
    """SHA-256 of ``content`` with the 64 digest characters at ``digest_at`` as zeros."""
    view = memoryview(content)
    digest = hashlib.sha256(view[:digest_at])
    digest.update(_DIGEST_PLACEHOLDER)
    digest.update(view[digest_at + 64 :])
    return digest.hexdigest()


def _check_file_digest(path: Any, content: bytes, header_length: int, digest: Any) -> None:
    if not (isinstance(digest, str) and re.fullmatch("[0-9a-f]{64}", digest)):
        raise _damaged(path, f"its {_DIGEST_KEY} entry {digest!r} is not a SHA-256 hex digest")
    entry = _DIGEST_FIELD + digest.encode() + b'"'
    header = content[8 : 8 + header_length]
    position = header.find(entry)
    if position < 0 or header.find(entry, position + 1) >= 0:
        raise _damaged(path, f"its {_DIGEST_KEY} entry is not written the way kernelgrad writes it")
    if _file_digest(content, 8 + position + len(_DIGEST_FIELD)) != digest:
        raise _damaged(
            path,
            "the file does not match the SHA-256 recorded in it (some bytes changed after it "
            "was written)",
        )


def _read(
    path: str | os.PathLike, content: bytes | None = None
) -> tuple[dict[str, Any], dict[str, str], bytes]:
    """(tensor entries, metadata, data bytes) after validating the whole layout and,
    where the file records them, its digests. ``content``: the file's bytes when the
    caller has read them already (from a file object); ``path`` then names it in errors."""
    if content is None:
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
        text = content[8 : 8 + header_length].decode("utf-8")
        header = json.loads(text, object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise _damaged(path, f"its header is not valid JSON ({error})") from None
    if not isinstance(header, dict):
        raise _damaged(path, "its header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(value, str) for value in metadata.values()
    ):
        raise _damaged(path, "its '__metadata__' entry is not an object of strings")
    data = content[8 + header_length :]
    spans = []
    for name, entry in header.items():
        try:
            code, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise _damaged(path, f"the header entry of tensor {name!r} is malformed") from None
        if not (isinstance(code, str) and code in _FROM_CODE):
            raise CheckpointError(
                f"{os.fspath(path)!r}: tensor {name!r} has dtype {code!r}, which kernelgrad does "
                f"not support (supported: {', '.join(_FROM_CODE)})"
            )
        if not (isinstance(shape, list) and all(type(s) is int and s >= 0 for s in shape)):
            raise _damaged(path, f"tensor {name!r} has an invalid shape {shape!r}")
        itemsize = np.dtype(_NUMPY[code]).itemsize
        if not (type(begin) is int and type(end) is int) or end - begin != prod(shape) * itemsize:
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
    if _DIGEST_KEY in metadata:
        _check_file_digest(path, content, header_length, metadata[_DIGEST_KEY])
    tensor_digest = metadata.get("sha256")  # format 1: the tensor bytes only
    if tensor_digest is not None and hashlib.sha256(data).hexdigest() != tensor_digest:
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
# checkpoints: saving
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
    safetensors file whose SHA-256 it records. See the module docstring for the layout."""
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
    metadata[_DIGEST_KEY] = _DIGEST_PLACEHOLDER.decode()
    prepared = _prepare(tensors)
    header = _header(prepared, metadata)
    # The digest covers the whole file; its own 64 characters count as zeros.
    digest_at = header.index(_DIGEST_FIELD + _DIGEST_PLACEHOLDER) + len(_DIGEST_FIELD)
    digest = hashlib.sha256(header)
    for _, array, _ in prepared:
        digest.update(_bytes(array))
    signed = header[:digest_at] + digest.hexdigest().encode() + header[digest_at + 64 :]
    _atomic_write(path, [signed, *(array for _, array, _ in prepared)])


# =========================================================================================
# checkpoints: reading and checking every stored value
# =========================================================================================
# Settings of kernelgrad's optimizers that their constructors require to be >= 0.
_NON_NEGATIVE_SETTINGS = frozenset({"lr", "initial_lr", "eps", "weight_decay", "momentum"})
# Scheduler attributes that hold one learning rate per parameter group.
_RATE_LISTS = frozenset({"base_lrs", "_last_lr"})


@dataclass
class _Stored:
    """What a checkpoint holds, parsed and checked on its own (before any target)."""

    model: dict[str, dict[str, Any]] = field(default_factory=dict)
    # "optimizer.state.{index}.{key}" entries, by name: (parameter index, state key, entry)
    optimizer_tensors: dict[str, tuple[int, str, dict[str, Any]]] = field(default_factory=dict)
    optimizer: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _describe_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind_problem(value: Any, like: Any) -> str | None:
    """Why ``value`` (read from JSON) cannot stand for ``like`` (the value it replaces),
    or None when it can. Numbers must be finite unless ``like`` is not."""
    if isinstance(like, bool):
        return None if isinstance(value, bool) else "must be true or false"
    if _is_number(like):
        if not _is_number(value):
            return "must be a number"
        if math.isfinite(like) and not math.isfinite(value):
            return "must be a finite number"
        return None
    if isinstance(like, str):
        return None if isinstance(value, str) else "must be a string"
    if isinstance(like, (list, tuple)):
        if not isinstance(value, list) or len(value) != len(like):
            return f"must be a list of {len(like)} values"
        for item, like_item in zip(value, like):
            problem = _kind_problem(item, like_item)
            if problem is not None:
                return f"must be a list of {len(like)} values, each of which {problem}"
        return None
    if isinstance(like, dict):
        return None if isinstance(value, dict) else "must be an object"
    return None  # None or another kind: anything JSON can hold


def _scalar_problem(value: Any) -> str | None:
    """A value with nothing to compare to: a JSON scalar, numbers finite."""
    if value is None or isinstance(value, (bool, str)):
        return None
    if _is_number(value):
        return None if math.isfinite(value) else "must be a finite number"
    return "must be a number, a string, true, false or null"


def _setting_problem(key: str, value: Any) -> str | None:
    """Range checks of the optimizer settings whose meaning kernelgrad knows."""
    if key in _NON_NEGATIVE_SETTINGS and not (
        _is_number(value) and math.isfinite(value) and value >= 0
    ):
        return "must be a number >= 0"
    if key == "betas" and not (
        isinstance(value, list)
        and len(value) == 2
        and all(_is_number(beta) and 0 <= beta < 1 for beta in value)
    ):
        return "must be two numbers in [0, 1)"
    return None


def _stored_json(path: str, metadata: dict[str, str], key: str) -> dict[str, Any] | None:
    if key not in metadata:
        return None
    try:
        value = json.loads(metadata[key], object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as error:
        raise _damaged(path, f"its {key!r} entry is not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise _damaged(path, f"its {key!r} entry is not a JSON object")
    return value


def _check_format(path: str, metadata: dict[str, str]) -> None:
    stored = metadata.get("format")
    if stored in (FORMAT, _FORMAT_1):
        if stored == FORMAT and _DIGEST_KEY not in metadata:
            raise _damaged(
                path,
                f"it says it is a {FORMAT} file but holds no whole-file SHA-256 "
                f"({_DIGEST_KEY}); its metadata was damaged or edited",
            )
        return
    version = stored.removeprefix(_FORMAT_PREFIX) if isinstance(stored, str) else ""
    if stored != version and re.fullmatch("[0-9]+", version) and int(version) > 2:
        raise CheckpointError(
            f"{path!r} is a checkpoint of format {version}, written by a newer version of "
            "kernelgrad (this one reads formats 1 and 2); upgrade kernelgrad to load it"
        )
    raise CheckpointMismatchError(
        f"cannot load {path!r}: it is not a kernelgrad checkpoint (metadata format "
        f"{stored!r}); use kg.serialization.load_file for plain tensor files"
    )


def _key_problems(what: str, entry: dict[str, Any], keys: set[str]) -> list[str]:
    return [f"{what}: unknown entry {key!r}" for key in entry if key not in keys] + [
        f"{what}: no {key!r} entry" for key in sorted(keys) if key not in entry
    ]


def _optimizer_problems(meta: dict[str, Any]) -> list[str]:
    """Problems of a stored optimizer entry on its own (structure, indices, ranges)."""
    problems = _key_problems("optimizer", meta, {"class", "param_groups", "state"})
    if not isinstance(meta.get("class", ""), str):
        problems.append("optimizer: its class is not a name")
    groups = meta.get("param_groups", [])
    if not (isinstance(groups, list) and all(isinstance(g, dict) for g in groups)):
        return problems + ["optimizer: param_groups is not a list of objects"]
    indices: list[Any] = []
    for number, group in enumerate(groups):
        params = group.get("params")
        if not (isinstance(params, list) and all(type(i) is int and i >= 0 for i in params)):
            problems.append(
                f"optimizer: param_groups[{number}] params = {_describe_value(params)}: must "
                "be a list of parameter indices (integers >= 0)"
            )
            continue
        indices += params
        for key, value in group.items():
            problem = None if key == "params" else _setting_problem(key, value)
            if problem is not None:
                problems.append(
                    f"optimizer: param_groups[{number}] {key} = {_describe_value(value)}: {problem}"
                )
    if len(set(indices)) != len(indices):
        problems.append("optimizer: a parameter index appears in more than one place")
    state = meta.get("state", {})
    if not isinstance(state, dict):
        return problems + ["optimizer: state is not an object"]
    for index_text, values in state.items():
        if not (re.fullmatch("[0-9]+", index_text) and int(index_text) in indices):
            problems.append(f"optimizer: state of unknown parameter {index_text!r}")
        elif not isinstance(values, dict):
            problems.append(f"optimizer: state of parameter {index_text} is not an object")
        else:
            for key, value in values.items():
                problem = _scalar_problem(value)
                if problem is not None:
                    problems.append(
                        f"optimizer: state {index_text}.{key} = {_describe_value(value)}: {problem}"
                    )
    return problems


def _parse_checkpoint(path: str, header: dict[str, Any], metadata: dict[str, str]) -> _Stored:
    """Every stored value, checked on its own; raises CheckpointError naming the file."""
    _check_format(path, metadata)
    stored = _Stored()
    for name, entry in header.items():
        if name.startswith("model."):
            stored.model[name[len("model.") :]] = entry
            continue
        index_text, _, key = name.removeprefix("optimizer.state.").partition(".")
        if not (name.startswith("optimizer.state.") and re.fullmatch("[0-9]+", index_text)):
            raise _damaged(
                path,
                f"tensor {name!r} is neither a model entry (model.<name>) nor optimizer state "
                "(optimizer.state.<parameter index>.<name>)",
            )
        stored.optimizer_tensors[name] = (int(index_text), key, entry)
    stored.optimizer = _stored_json(path, metadata, "optimizer")
    stored.scheduler = _stored_json(path, metadata, "scheduler")
    stored.extra = _stored_json(path, metadata, "extra") or {}
    problems = _optimizer_problems(stored.optimizer) if stored.optimizer is not None else []
    if stored.optimizer_tensors and stored.optimizer is None:
        problems.append("it holds optimizer state tensors but no 'optimizer' entry")
    elif stored.optimizer_tensors and not problems:
        indices = {i for group in stored.optimizer["param_groups"] for i in group["params"]}
        problems += [
            f"{name}: no parameter {index} in the stored parameter groups"
            for name, (index, _, _) in stored.optimizer_tensors.items()
            if index not in indices
        ]
    if stored.scheduler is not None:
        problems += _key_problems("scheduler", stored.scheduler, {"class", "state"})
        if not isinstance(stored.scheduler.get("class", ""), str):
            problems.append("scheduler: its class is not a name")
        if not isinstance(stored.scheduler.get("state", {}), dict):
            problems.append("scheduler: state is not an object")
        else:
            last_epoch = stored.scheduler.get("state", {}).get("last_epoch", 0)
            if not (type(last_epoch) is int and last_epoch >= -1):
                problems.append(
                    f"scheduler: last_epoch = {_describe_value(last_epoch)}: must be an "
                    "integer >= -1"
                )
    if problems:
        raise _invalid(path, problems)
    return stored


def _invalid(path: str, problems: list[str]) -> CheckpointError:
    return CheckpointError(
        f"cannot load {path!r}: it holds invalid stored values (the file was damaged or "
        f"written by other software):\n  " + "\n  ".join(problems)
    )


def _saved_to_own(stored_groups: list[dict[str, Any]], optimizer: Any) -> dict[int, Tensor]:
    """Stored parameter index -> the optimizer's parameter (matched group by group, in
    order, as ``Optimizer.load_state_dict`` does)."""
    return {
        index: parameter
        for saved, own in zip(stored_groups, optimizer.param_groups)
        for index, parameter in zip(saved["params"], own["params"])
    }


def _model_mismatches(stored: _Stored, model: Any, strict: bool) -> list[str]:
    problems = []
    own = model.state_dict()
    missing = [name for name in own if name not in stored.model]
    unexpected = [name for name in stored.model if name not in own]
    if strict and missing:
        problems.append("missing from the file: " + ", ".join(f"model.{n}" for n in missing))
    if strict and unexpected:
        problems.append("not in the model: " + ", ".join(f"model.{n}" for n in unexpected))
    for name, target in own.items():
        entry = stored.model.get(name)
        if entry is None:
            continue
        if tuple(entry["shape"]) != target.shape:
            problems.append(
                f"model.{name}: shape {tuple(entry['shape'])} in the file, "
                f"{tuple(target.shape)} in the model"
            )
        if _FROM_CODE[entry["dtype"]] is not target.dtype:
            problems.append(
                f"model.{name}: dtype {_FROM_CODE[entry['dtype']].name} in the file, "
                f"{target.dtype.name} in the model"
            )
    return problems


def _other_class(what: str, meta: dict[str, Any] | None, target: Any) -> list[str]:
    """The mismatch when the file holds no state for ``target`` or another class's."""
    if meta is None:
        return [f"the file holds no {what} state"]
    if meta["class"] != type(target).__name__:
        return [f"{what}: saved from {meta['class']}, loading into {type(target).__name__}"]
    return []


def _optimizer_mismatches(stored: _Stored, optimizer: Any) -> tuple[list[str], list[str]]:
    """(mismatches, invalid values) of the stored optimizer against ``optimizer``."""
    meta = stored.optimizer
    other = _other_class("optimizer", meta, optimizer)
    if other:
        return other, []
    saved_counts = [len(g["params"]) for g in meta["param_groups"]]
    own_counts = [len(g["params"]) for g in optimizer.param_groups]
    if saved_counts != own_counts:
        return [
            f"optimizer: parameter groups of sizes {saved_counts} in the file, "
            f"{own_counts} in the optimizer"
        ], []
    mismatches, invalid = [], []
    for number, (saved, own) in enumerate(zip(meta["param_groups"], optimizer.param_groups)):
        for key, value in saved.items():
            if key == "params":
                continue
            problem = _kind_problem(value, own[key]) if key in own else _scalar_problem(value)
            if problem is not None:
                invalid.append(
                    f"optimizer: param_groups[{number}] {key} = {_describe_value(value)}: {problem}"
                )
    by_index = _saved_to_own(meta["param_groups"], optimizer)
    for name, (index, _, entry) in stored.optimizer_tensors.items():
        p = by_index[index]
        if tuple(entry["shape"]) not in (p.shape, ()):
            mismatches.append(
                f"{name}: shape {tuple(entry['shape'])} in the file, parameter {index} "
                f"has shape {tuple(p.shape)}"
            )
        dtype = _FROM_CODE[entry["dtype"]]
        if dtype.is_floating_point and dtype is not p.dtype:
            mismatches.append(
                f"{name}: dtype {dtype.name} in the file, parameter {index} is {p.dtype.name}"
            )
    return mismatches, invalid


def _scheduler_mismatches(stored: _Stored, scheduler: Any) -> tuple[list[str], list[str]]:
    """(mismatches, invalid values) of the stored scheduler against ``scheduler``."""
    meta = stored.scheduler
    other = _other_class("scheduler", meta, scheduler)
    if other:
        return other, []
    own = scheduler.state_dict()
    invalid = []
    for key, value in meta["state"].items():
        if key not in own:
            invalid.append(f"scheduler: {key} is not a setting of {type(scheduler).__name__}")
            continue
        problem = _kind_problem(value, own[key])
        if problem is None and key in _RATE_LISTS and any(rate < 0 for rate in value):
            problem = "learning rates must be >= 0"
        if problem is not None:
            invalid.append(f"scheduler: {key} = {_describe_value(value)}: {problem}")
    return [], invalid


def _like(value: Any, like: Any) -> Any:
    """A stored JSON value in the container types of the value it replaces (tuples)."""
    if isinstance(like, tuple) and isinstance(value, list):
        return tuple(_like(item, like_item) for item, like_item in zip(value, like))
    return value


@contextlib.contextmanager
def _restored_on_failure(path: str, optimizers: list[Any], schedulers: list[Any]) -> Any:
    """Put the optimizers' state and settings and the schedulers' attributes back if
    the block fails; a failure that is not an interruption becomes a CheckpointError."""
    saved_optimizers = [
        (optimizer.state, [dict(group) for group in optimizer.param_groups])
        for optimizer in optimizers
    ]
    saved_schedulers = [dict(scheduler.__dict__) for scheduler in schedulers]
    try:
        yield
    except BaseException as error:
        for optimizer, (state, groups) in zip(optimizers, saved_optimizers):
            optimizer.state = state
            for group, saved in zip(optimizer.param_groups, groups):
                group.clear()
                group.update(saved)
        for scheduler, saved in zip(schedulers, saved_schedulers):
            scheduler.__dict__.clear()
            scheduler.__dict__.update(saved)
        if isinstance(error, Exception) and not isinstance(error, CheckpointError):
            raise CheckpointError(
                f"cannot load {path!r}: restoring the stored state failed "
                f"({type(error).__name__}: {error}); nothing was changed"
            ) from error
        raise


def load_checkpoint(
    path: str | os.PathLike,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    strict: bool = True,
) -> dict[str, Any]:
    """Restore what :func:`save_checkpoint` saved into ``model``, ``optimizer`` and
    ``scheduler`` (each optional) and return the extra values.

    Nothing is changed unless everything can be loaded: the file's digest, every stored
    value (settings such as ``lr`` are checked for type and range) and the fit with the
    targets are checked first. Missing and unexpected names (``strict=False`` tolerates
    them), wrong shapes and wrong dtypes are all listed in one
    :class:`CheckpointMismatchError`; a damaged file raises :class:`CheckpointError`.
    Called without targets it checks the whole file and returns its extra values."""
    where = os.fspath(path)
    header, metadata, data = _read(path)
    stored = _parse_checkpoint(where, header, metadata)
    mismatches: list[str] = []
    invalid: list[str] = []
    if model is not None:
        mismatches += _model_mismatches(stored, model, strict)
    if optimizer is not None:
        found, bad = _optimizer_mismatches(stored, optimizer)
        mismatches += found
        invalid += bad
    if scheduler is not None:
        found, bad = _scheduler_mismatches(stored, scheduler)
        mismatches += found
        invalid += bad
    if invalid:
        raise _invalid(where, invalid)
    if mismatches:
        raise CheckpointMismatchError(
            f"cannot load {where!r}: {len(mismatches)} problem(s):\n  " + "\n  ".join(mismatches)
        )

    optimizer_state = None
    if optimizer is not None:
        state: dict[int, dict[str, Any]] = {}
        for index_text, values in stored.optimizer["state"].items():
            state.setdefault(int(index_text), {}).update(copy.deepcopy(values))
        for index, key, entry in stored.optimizer_tensors.values():
            state.setdefault(index, {})[key] = _tensor(entry, data, "cpu")
        groups = copy.deepcopy(stored.optimizer["param_groups"])
        for saved, own_group in zip(groups, optimizer.param_groups):
            for key, value in saved.items():
                saved[key] = _like(value, own_group.get(key))
        optimizer_state = {"state": state, "param_groups": groups}
    scheduler_state = None
    if scheduler is not None:
        own = scheduler.state_dict()
        scheduler_state = {
            key: _like(copy.deepcopy(value), own[key])
            for key, value in stored.scheduler["state"].items()
        }
    optimizers = [optimizer] if optimizer is not None else []
    if scheduler is not None and getattr(scheduler, "optimizer", None) not in optimizers:
        optimizers.append(scheduler.optimizer)  # its load sets the groups' learning rates
    with _restored_on_failure(where, optimizers, [scheduler] if scheduler is not None else []):
        if optimizer is not None:
            optimizer.load_state_dict(optimizer_state)
        if scheduler is not None:
            scheduler.load_state_dict(scheduler_state)
    # The model's tensors come last: every check has passed and their shapes and dtypes
    # match, so only running out of memory on the device can interrupt the copies.
    if model is not None:
        with autograd.no_grad():
            own = model.state_dict()
            for name, entry in stored.model.items():
                if name in own:
                    own[name].copy_(_tensor(entry, data, own[name].device))
    return stored.extra
