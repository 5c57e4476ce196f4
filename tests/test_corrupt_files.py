"""Every byte of a small checkpoint and of small IDX files flipped, and every prefix of
them: each damaged copy either loads correctly (only where the format cannot tell, see
below) or raises the format's error naming the file; never another exception, and a
checkpoint that fails to load leaves its model, optimizer and scheduler as they were.

When a damaged copy can still load:

* a checkpoint of format 2: never (its SHA-256 covers every byte);
* a checkpoint of format 1 (digest over the tensor bytes only): a change in the
  metadata that keeps every value valid (an epoch 1 -> 3, a learning rate's digit);
* a raw IDX file: a changed pixel or label value (the format has no checksum), or a type
  code uint8 -> int8 when every value is below 128;
* a gzipped IDX file: a change in the gzip header's flags, time stamp or OS byte, which
  the CRC does not cover, or in the unused bits of the compressed stream's last byte;
  the data is then identical.

Files are changed in place (``os.pwrite``/``os.ftruncate``) rather than written anew
for each case, which keeps the thousands of cases to a second or two.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from kernelgrad.data import DatasetSpec, IDXError, load_dataset, write_idx
from kernelgrad.data.datasets import DatasetLocation
from kernelgrad.serialization import CheckpointError, load_checkpoint, save_checkpoint


class Damage:
    """Damaged versions of one file, made in place; the file is restored afterwards."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.original = path.read_bytes()

    def flips(self, masks: tuple[int, ...]) -> Iterator[tuple[int, int]]:
        """Each byte XOR each mask in turn: yields (position, mask)."""
        descriptor = os.open(self.path, os.O_RDWR)
        try:
            for position, value in enumerate(self.original):
                for mask in masks:
                    os.pwrite(descriptor, bytes([value ^ mask]), position)
                    yield position, mask
                os.pwrite(descriptor, bytes([value]), position)
        finally:
            os.close(descriptor)

    def truncations(self) -> Iterator[int]:
        """Every proper prefix, longest first: yields its length."""
        descriptor = os.open(self.path, os.O_RDWR)
        try:
            for length in range(len(self.original) - 1, -1, -1):
                os.ftruncate(descriptor, length)
                yield length
            os.pwrite(descriptor, self.original, 0)
        finally:
            os.close(descriptor)


# --- checkpoints ----------------------------------------------------------------------------


def training_objects() -> tuple:
    model = nn.Linear(2, 2)
    optimizer = kg.optim.Adam(model.parameters(), lr=0.01)
    return model, optimizer, kg.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)


def small_checkpoint(path: Path) -> None:
    """Model tensors, optimizer tensors and settings, scheduler state and extra values:
    every region of the format, in about 1.3 KB."""
    kg.manual_seed(0)
    model, optimizer, scheduler = training_objects()
    model(kg.ones(1, 2)).sum().backward()
    optimizer.step()
    scheduler.step()
    save_checkpoint(path, model, optimizer, scheduler, epoch=1)


def as_format_1(path: Path) -> None:
    """Rewrite a checkpoint as format 1 wrote it (digest over the tensor bytes only)."""
    content = path.read_bytes()
    (length,) = struct.unpack("<Q", content[:8])
    header = json.loads(content[8 : 8 + length])
    metadata, data = header.pop("__metadata__"), content[8 + length :]
    del metadata["file_sha256"]
    metadata.update(format="kernelgrad.checkpoint/1", sha256=hashlib.sha256(data).hexdigest())
    text = json.dumps({"__metadata__": metadata, **header}, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


class Target:
    """What a checkpoint is loaded into, and a cheap test that it is as it was."""

    def __init__(self) -> None:
        self.model, self.optimizer, self.scheduler = training_objects()
        self.weights = [value.numpy().copy() for value in self.model.state_dict().values()]
        self.groups = repr(self.optimizer.param_groups)

    def load(self, path: Path) -> None:
        load_checkpoint(path, self.model, self.optimizer, self.scheduler)

    def unchanged(self) -> bool:
        return (
            all(
                np.array_equal(value.numpy(), before)
                for value, before in zip(self.model.state_dict().values(), self.weights)
            )
            and repr(self.optimizer.param_groups) == self.groups
            and not self.optimizer.state
            and self.scheduler.last_epoch == 0
        )


def attempt(target: Target, path: Path, case: str) -> bool:
    """Load a damaged copy: True if it loaded; a CheckpointError must name the file and
    leave the target unchanged; any other exception fails the test."""
    try:
        target.load(path)
    except CheckpointError as error:
        assert str(path) in str(error), (case, str(error))
        assert target.unchanged(), (case, str(error))
        return False
    return True


def test_every_damaged_byte_of_a_checkpoint_is_detected(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    small_checkpoint(path)
    damage = Damage(path)
    target = Target()
    loaded = [
        f"byte {p} ^ {m:#x}" for p, m in damage.flips((0x01, 0xFF)) if attempt(target, path, f"{p}")
    ]
    loaded += [f"first {n} bytes" for n in damage.truncations() if attempt(target, path, f"{n}")]
    assert loaded == []
    target.load(path)  # the undamaged file still loads
    assert not target.unchanged()


def test_damaged_format_1_checkpoints_raise_checkpoint_errors_only(tmp_path):
    """Format 1 cannot detect every change in its metadata, but a damaged copy still
    raises nothing but CheckpointError, and never half-loads."""
    path = tmp_path / "checkpoint.safetensors"
    small_checkpoint(path)
    as_format_1(path)
    target = Target()
    loaded = 0
    for position, _ in Damage(path).flips((0xFF, 0x01)):
        if attempt(target, path, f"byte {position}"):
            loaded += 1
            target = Target()
    load_checkpoint(path, *training_objects())  # the undamaged file loads
    assert 0 < loaded < len(Damage(path).original)  # some metadata changes go unnoticed


# --- IDX files ------------------------------------------------------------------------------

IMAGES = np.random.default_rng(0).integers(0, 256, (3, 4, 4), dtype=np.uint8)
LABELS = np.array([3, 1, 9], dtype=np.uint8)
SPEC = DatasetSpec(
    name="tiny", title="Tiny", classes=tuple("abcdefghij"), mean=0.5, std=0.25, native_size=4
)


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "gzip"])
@pytest.mark.parametrize(
    "role, label_type", [("images", np.uint8), ("labels", np.uint8), ("labels", np.int8)]
)
def test_every_damaged_byte_of_an_idx_file_is_detected_or_harmless(
    tmp_path, compressed, role, label_type
):
    suffix = ".gz" if compressed else ""
    files = {
        "train_images": tmp_path / f"train-images-idx3-ubyte{suffix}",
        "train_labels": tmp_path / f"train-labels-idx1-ubyte{suffix}",
    }
    write_idx(files["train_images"], IMAGES, compress=compressed)
    write_idx(files["train_labels"], LABELS.astype(label_type), compress=compressed)
    location = DatasetLocation(SPEC, tmp_path, files, "test")
    original = IMAGES if role == "images" else LABELS.astype(label_type)
    header_size = 4 + 4 * original.ndim
    path = files[f"train_{role}"]

    def check(position: int | None, mask: int) -> None:
        try:
            dataset = load_dataset(SPEC, train=True, location=location)
        except IDXError as error:
            assert str(path) in str(error), str(error)
            return
        loaded = dataset.images if role == "images" else dataset.labels
        expected = original.copy().reshape(-1)
        if not compressed and position is not None and position >= header_size:
            expected[position - header_size] ^= np.array(mask).astype(original.dtype)
        np.testing.assert_array_equal(loaded.reshape(-1), expected, err_msg=f"{position}")
        loads.append(position)
        other = dataset.labels if role == "images" else dataset.images
        np.testing.assert_array_equal(other, LABELS if role == "images" else IMAGES)

    loads: list[int | None] = []
    damage = Damage(path)
    for position, mask in damage.flips((0x01, 0x04, 0x80, 0xFF)):
        check(position, mask)
    for _ in damage.truncations():
        check(None, 0)
    assert None not in loads  # no truncated file loads
    if compressed:  # the gzip header's flags, time stamp and OS byte (bytes 3-9), and
        # the unused bits after the end of the compressed data, in its last byte
        assert loads and set(loads) <= {*range(3, 10), len(damage.original) - 9}
