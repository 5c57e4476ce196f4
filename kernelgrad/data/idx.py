"""Reading and writing IDX files, the format of MNIST and Fashion-MNIST.

An IDX file is a header followed by big-endian data::

    bytes 0-1   zero
    byte  2     type code: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
                0x0D float32, 0x0E float64
    byte  3     number of dimensions
    then        one big-endian uint32 per dimension
    then        the values, row-major

Files may be gzip-compressed (recognised by their first bytes, whatever their name).
Every check names the file and what is wrong, so that a broken download is recognised
as one rather than failing later inside a reshape.

>>> import numpy as np, tempfile, os
>>> from kernelgrad.data import read_idx, write_idx
>>> path = os.path.join(tempfile.mkdtemp(), "labels-idx1-ubyte.gz")
>>> write_idx(path, np.array([3, 1, 4], dtype=np.uint8))
>>> read_idx(path).tolist()
[3, 1, 4]
"""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from ._files import atomic_write_bytes
from .errors import IDXError

__all__ = ["IDX_TYPES", "read_idx", "write_idx"]

# Type code -> big-endian NumPy dtype.
IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CODES = {dtype.newbyteorder("="): code for code, dtype in IDX_TYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise IDXError(f"{path}: is a folder, not an IDX file") from None
    if not raw.startswith(_GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except EOFError:
        raise IDXError(
            f"{path}: truncated gzip stream (the file ends before the compressed data does; "
            "an interrupted download?). Delete it and download it again."
        ) from None
    except (gzip.BadGzipFile, zlib.error) as error:
        raise IDXError(
            f"{path}: corrupt gzip data ({error}). Delete it and download it again."
        ) from None


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file (raw or gzipped) into a NumPy array in native byte order.

    Raises :class:`~kernelgrad.data.IDXError` naming the file when the magic number,
    the type code or the sizes are wrong, or when the gzip stream is truncated.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4:
        raise IDXError(
            f"{path}: too short for an IDX header ({len(data)} bytes; an IDX file starts "
            "with 4 header bytes)"
        )
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0:
        raise IDXError(
            f"{path}: bad magic number 0x{data[:4].hex().upper()} (an IDX file starts with "
            "two zero bytes, a type code and a dimension count); is this an IDX file?"
        )
    if code not in IDX_TYPES:
        known = ", ".join(f"0x{c:02X} ({d.name})" for c, d in IDX_TYPES.items())
        raise IDXError(f"{path}: unknown IDX type code 0x{code:02X}; known codes: {known}")
    if ndim == 0:
        raise IDXError(f"{path}: the header declares 0 dimensions")
    header_size = 4 + 4 * ndim
    if len(data) < header_size:
        raise IDXError(
            f"{path}: truncated header: {ndim} dimensions need {header_size} header bytes, "
            f"the file has {len(data)}"
        )
    shape = struct.unpack(f">{ndim}I", data[4:header_size])
    dtype = IDX_TYPES[code]
    dims = "x".join(str(d) for d in shape)
    # Python integers: 64-bit arithmetic wraps (65536**4 values would count as 0).
    expected = math.prod(shape) * dtype.itemsize
    if math.prod(d for d in shape if d) * dtype.itemsize > np.iinfo(np.intp).max:
        raise IDXError(
            f"{path}: the header declares {dims} values of {dtype.name}, more than an "
            "array can hold; the header is damaged"
        )
    available = len(data) - header_size
    if available < expected:
        raise IDXError(
            f"{path}: truncated data: the header declares {dims} values of {dtype.name} "
            f"({expected} bytes), but only {available} bytes follow the header"
        )
    if available > expected:
        raise IDXError(
            f"{path}: the header declares {dims} values of {dtype.name} ({expected} bytes), "
            f"but {available} bytes follow the header; the header does not match the file size"
        )
    array = np.frombuffer(data, dtype=dtype, count=expected // dtype.itemsize, offset=header_size)
    return array.astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def write_idx(
    path: str | os.PathLike[str], array: np.ndarray, compress: bool | None = None
) -> None:
    """Write ``array`` as an IDX file (gzipped when ``compress`` is true, or by default
    when the name ends in ``.gz``). The file appears atomically (written, then renamed)."""
    path = Path(path)
    array = np.asarray(array)
    native = array.dtype.newbyteorder("=")
    if native not in _CODES:
        raise TypeError(
            f"IDX cannot store dtype {array.dtype}; use uint8, int8, int16, int32, float32 "
            "or float64"
        )
    if array.ndim == 0 or array.ndim > 255:
        raise ValueError(f"IDX stores 1 to 255 dimensions, got {array.ndim}")
    code = _CODES[native]
    header = struct.pack(">HBB", 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + np.ascontiguousarray(array, dtype=IDX_TYPES[code]).tobytes()
    if compress is None:
        compress = path.name.endswith(".gz")
    if compress:
        payload = gzip.compress(payload, compresslevel=9, mtime=0)
    atomic_write_bytes(path, payload)
