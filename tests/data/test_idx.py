"""IDX reading and writing, including every kind of broken file."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from kernelgrad.data import IDXError, read_idx, write_idx


def _header(code: int, shape: tuple[int, ...]) -> bytes:
    return struct.pack(">HBB", 0, code, len(shape)) + struct.pack(f">{len(shape)}I", *shape)


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
def test_round_trip_every_type_code(tmp_path, compressed, dtype):
    rng = np.random.default_rng(1)
    array = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    path = tmp_path / ("data-idx3.gz" if compressed else "data-idx3")
    write_idx(path, array)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == compressed
    loaded = read_idx(path)
    assert loaded.dtype == np.dtype(dtype)
    assert loaded.shape == (3, 4, 5)
    np.testing.assert_array_equal(loaded, array)


def test_reads_a_hand_written_big_endian_file(tmp_path):
    # Values written big-endian by hand, as the MNIST files are.
    payload = _header(0x0B, (2, 2)) + struct.pack(">4h", 1, -2, 300, -32768)
    path = tmp_path / "short-idx2"
    path.write_bytes(payload)
    np.testing.assert_array_equal(read_idx(path), [[1, -2], [300, -32768]])


def test_gzip_is_recognised_by_content_not_name(tmp_path):
    path = tmp_path / "labels-idx1-ubyte"  # no .gz suffix, but compressed
    path.write_bytes(gzip.compress(_header(0x08, (3,)) + bytes([7, 8, 9])))
    assert read_idx(path).tolist() == [7, 8, 9]


def test_bad_magic_number_names_the_file(tmp_path):
    path = tmp_path / "broken-idx1-ubyte"
    path.write_bytes(b"\x12\x34\x08\x01" + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(IDXError, match="bad magic number 0x12340801") as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_unknown_type_code(tmp_path):
    path = tmp_path / "weird-idx1"
    path.write_bytes(_header(0x0A, (1,)) + b"\x00")
    with pytest.raises(IDXError, match="unknown IDX type code 0x0A"):
        read_idx(path)


def test_truncated_data(tmp_path):
    path = tmp_path / "images-idx3-ubyte"
    path.write_bytes(_header(0x08, (10, 28, 28)) + bytes(28 * 28 * 9))
    with pytest.raises(IDXError, match=r"truncated data.*10x28x28.*7840 bytes.*7056 bytes"):
        read_idx(path)


def test_data_longer_than_the_header_says(tmp_path):
    path = tmp_path / "labels-idx1-ubyte"
    path.write_bytes(_header(0x08, (4,)) + bytes(6))
    with pytest.raises(IDXError, match="does not match the file size"):
        read_idx(path)


def test_truncated_header(tmp_path):
    path = tmp_path / "images-idx3-ubyte"
    path.write_bytes(_header(0x08, (10, 28, 28))[:9])
    with pytest.raises(IDXError, match="truncated header"):
        read_idx(path)
    (tmp_path / "tiny").write_bytes(b"\x00\x00")
    with pytest.raises(IDXError, match="too short"):
        read_idx(tmp_path / "tiny")


def test_truncated_gzip_stream(tmp_path):
    whole = gzip.compress(_header(0x08, (100, 8)) + bytes(range(200)) * 4)
    path = tmp_path / "images-idx2-ubyte.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(IDXError, match="truncated gzip stream") as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_corrupt_gzip_stream(tmp_path):
    whole = bytearray(gzip.compress(_header(0x08, (50,)) + bytes(range(50))))
    whole[-6] ^= 0xFF  # the CRC no longer matches
    path = tmp_path / "labels-idx1-ubyte.gz"
    path.write_bytes(bytes(whole))
    with pytest.raises(IDXError, match="corrupt gzip data"):
        read_idx(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_idx(tmp_path / "absent-idx1-ubyte")


def test_write_refuses_unsupported_dtypes(tmp_path):
    with pytest.raises(TypeError, match="IDX cannot store dtype int64"):
        write_idx(tmp_path / "x", np.zeros(3, dtype=np.int64))
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "shape",
    [
        (65536, 65536, 65536, 65536),  # 2**64 values: 0 in 64-bit arithmetic
        (0, 2**32 - 1, 2**32 - 1),  # no values, but an impossible array shape
        (2**32 - 1,) * 3,
    ],
)
def test_dimensions_that_overflow_are_an_idx_error(tmp_path, shape):
    path = tmp_path / "huge-idx"
    path.write_bytes(_header(0x08, shape))
    with pytest.raises(IDXError, match="huge-idx") as info:
        read_idx(path)
    assert "x".join(map(str, shape)) in str(info.value)
