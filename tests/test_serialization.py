"""safetensors files and checkpoints: round trips, interoperability with the
``safetensors`` package, atomic writes, damaged and mismatched files."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from kernelgrad.serialization import (
    CheckpointError,
    CheckpointMismatchError,
    load_checkpoint,
    load_file,
    read_metadata,
    save_checkpoint,
    save_file,
)
from tests.helpers import as_numpy

RNG = np.random.default_rng(5)


def sample_tensors():
    return {
        "float32": kg.tensor(RNG.standard_normal((3, 4)), dtype=kg.float32),
        "float64": kg.tensor(2.5, dtype=kg.float64),  # 0-d
        "int64": kg.tensor([1, -2, 3]),
        "int32": kg.arange(6, dtype=kg.int32).reshape(2, 3).T,  # not contiguous
        "bool": kg.tensor([True, False, True]),
        "empty": kg.zeros(0, 3),
    }


def test_save_and_load_round_trip(tmp_path):
    tensors = sample_tensors()
    path = tmp_path / "tensors.safetensors"
    save_file(tensors, path, metadata={"note": "hello"})
    loaded = load_file(path)
    assert list(loaded) == list(tensors)
    for name, value in tensors.items():
        assert loaded[name].dtype is value.dtype and loaded[name].shape == value.shape, name
        np.testing.assert_array_equal(as_numpy(loaded[name]), as_numpy(value))
    assert read_metadata(path) == {"note": "hello"}
    header_length = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert header_length % 8 == 0  # tensor data starts 8-byte aligned


def test_files_are_interchangeable_with_the_safetensors_package(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tensors = sample_tensors()
    ours = tmp_path / "ours.safetensors"
    save_file(tensors, ours)
    read_by_them = safetensors_numpy.load_file(str(ours))
    for name, value in tensors.items():
        np.testing.assert_array_equal(read_by_them[name], as_numpy(value))
        assert read_by_them[name].shape == value.shape
    theirs = tmp_path / "theirs.safetensors"
    arrays = {name: np.ascontiguousarray(as_numpy(v)) for name, v in tensors.items()}
    safetensors_numpy.save_file(arrays, str(theirs), metadata={"source": "safetensors"})
    read_by_us = load_file(theirs)
    for name, value in arrays.items():
        np.testing.assert_array_equal(as_numpy(read_by_us[name]), value)
    assert read_metadata(theirs) == {"source": "safetensors"}


def test_load_onto_a_device(tmp_path, device):
    path = tmp_path / "t.safetensors"
    save_file({"x": kg.ones(2, device=device)}, path)
    loaded = load_file(path, device=device)
    assert loaded["x"].device == device


def test_save_file_rejects_bad_input(tmp_path):
    with pytest.raises(TypeError, match="strings"):
        save_file({"x": kg.ones(1)}, tmp_path / "a", metadata={"epoch": 3})
    with pytest.raises(ValueError, match="reserved"):
        save_file({"__metadata__": kg.ones(1)}, tmp_path / "a")
    with pytest.raises(TypeError, match="unsupported dtype"):
        save_file({"x": np.zeros(2, dtype=np.complex64)}, tmp_path / "a")


def trained_setup(device, steps=2):
    kg.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).to(device)
    optimizer = kg.optim.Adam(model.parameters(), lr=0.01)
    scheduler = kg.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    x = kg.tensor(RNG.standard_normal((8, 3)), dtype=kg.float32, device=device)
    for _ in range(steps):
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
        scheduler.step()
    return model, optimizer, scheduler, x


def fresh_setup(device):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2)).to(device)
    optimizer = kg.optim.Adam(model.parameters(), lr=0.01)
    scheduler = kg.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    return model, optimizer, scheduler


def test_checkpoint_round_trip_resumes_training_exactly(tmp_path, device):
    model, optimizer, scheduler, x = trained_setup(device)
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, model, optimizer, scheduler, epoch=2, best_accuracy=0.5)

    restored, restored_optimizer, restored_scheduler = fresh_setup(device)
    extra = load_checkpoint(path, restored, restored_optimizer, restored_scheduler)
    assert extra == {"epoch": 2, "best_accuracy": 0.5}
    for (name, a), (_, b) in zip(
        model.state_dict().items(), restored.state_dict().items(), strict=True
    ):
        np.testing.assert_array_equal(as_numpy(a), as_numpy(b), err_msg=name)
    assert restored_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"] == 0.0025
    assert restored_optimizer.param_groups[0]["betas"] == (0.9, 0.999)
    assert restored_scheduler.last_epoch == 2

    for m, opt in ((model, optimizer), (restored, restored_optimizer)):
        opt.zero_grad()
        m(x).pow(2).mean().backward()
        opt.step()
    for (name, a), (_, b) in zip(
        model.state_dict().items(), restored.state_dict().items(), strict=True
    ):
        np.testing.assert_array_equal(as_numpy(a), as_numpy(b), err_msg=name)


def test_checkpoint_layout_is_documented_and_readable_by_safetensors(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    model, optimizer, scheduler, _ = trained_setup("cpu")
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, model, optimizer, scheduler, epoch=2)
    names = set(safetensors_numpy.load_file(str(path)))
    assert "model.0.weight" in names and "model.1.running_mean" in names
    assert "optimizer.state.0.exp_avg" in names and "optimizer.state.5.exp_avg_sq" in names
    metadata = read_metadata(path)
    assert metadata["format"] == "kernelgrad.checkpoint/1"
    optimizer_meta = json.loads(metadata["optimizer"])
    assert optimizer_meta["class"] == "Adam"
    assert optimizer_meta["state"] == {}  # Adam's step count is a 0-d tensor
    assert safetensors_numpy.load_file(str(path))["optimizer.state.0.step"].tolist() == 2.0
    assert json.loads(metadata["scheduler"])["class"] == "StepLR"
    assert len(metadata["sha256"]) == 64


def test_an_interrupted_save_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    model, optimizer, _, _ = trained_setup("cpu")
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, model, optimizer, epoch=1)
    before = path.read_bytes()

    def failing_replace(source, target):
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="simulated"):
        save_checkpoint(path, model, optimizer, epoch=2)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["checkpoint.safetensors"]  # no temporary file left
    assert load_checkpoint(path, fresh_setup("cpu")[0])["epoch"] == 1


def test_a_crash_in_the_middle_of_writing_leaves_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "weights.safetensors"
    save_file({"x": kg.ones(4)}, path)
    real_fsync = os.fsync
    calls = []

    def crash_on_fsync(descriptor):
        calls.append(descriptor)
        raise KeyboardInterrupt  # e.g. the user pressed Ctrl-C during the save

    monkeypatch.setattr(os, "fsync", crash_on_fsync)
    with pytest.raises(KeyboardInterrupt):
        save_file({"x": kg.zeros(1000)}, path)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert calls  # the data is flushed to disk before the rename
    assert as_numpy(load_file(path)["x"]).tolist() == [1.0, 1.0, 1.0, 1.0]
    assert os.listdir(tmp_path) == ["weights.safetensors"]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda data: data[:5], "shorter than the 8-byte header length"),
        (lambda data: data[:40], "truncated"),
        (lambda data: data[:-3], "truncated"),
        (lambda data: data + b"junk", "extra bytes"),
        (lambda data: data[:8] + b"[" + data[9:], "not valid JSON"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 0xFF]), "SHA-256"),
        (lambda data: b"\xff" * 8 + data[8:], "header length"),
    ],
)
def test_damaged_files_name_the_file_and_the_problem(tmp_path, damage, message):
    model, optimizer, _, _ = trained_setup("cpu")
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, model, optimizer)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError, match=message) as error:
        load_checkpoint(path, fresh_setup("cpu")[0])
    assert "checkpoint.safetensors" in str(error.value) and "damaged" in str(error.value)


def test_inconsistent_headers_are_reported(tmp_path):
    def write(header: dict, data: bytes) -> str:
        text = json.dumps(header).encode()
        path = tmp_path / "bad.safetensors"
        path.write_bytes(struct.pack("<Q", len(text)) + text + data)
        return str(path)

    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}
    with pytest.raises(CheckpointError, match="needs 8 bytes"):
        load_file(write({"x": entry}, bytes(4)))
    with pytest.raises(CheckpointError, match="overlaps"):
        overlapping = {
            "x": dict(entry, data_offsets=[0, 8]),
            "y": dict(entry, data_offsets=[4, 12]),
        }
        load_file(write(overlapping, bytes(12)))
    with pytest.raises(CheckpointError, match="F16"):
        load_file(write({"x": dict(entry, dtype="F16", data_offsets=[0, 4])}, bytes(4)))
    with pytest.raises(CheckpointError, match="malformed"):
        load_file(write({"x": {"dtype": "F32"}}, b""))


def test_mismatches_are_all_reported_at_once(tmp_path):
    model, optimizer, _, _ = trained_setup("cpu")
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, model, optimizer)

    other = nn.Sequential(
        nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2, bias=False)
    )
    other[0].to(kg.float64)
    with pytest.raises(CheckpointMismatchError) as error:
        load_checkpoint(path, other)
    message = str(error.value)
    assert "not in the model: model.3.bias" in message
    assert "model.0.weight: shape (4, 3) in the file, (5, 3) in the model" in message
    assert "model.0.weight: dtype float32 in the file, float64 in the model" in message
    assert "model.1.running_mean: shape (4,) in the file, (5,) in the model" in message

    missing = nn.Sequential(
        nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2), nn.Linear(2, 2)
    )
    with pytest.raises(CheckpointMismatchError, match=r"missing from the file: model\.4\.weight"):
        load_checkpoint(path, missing)
    load_checkpoint(path, missing, strict=False)  # tolerated on request
    np.testing.assert_array_equal(as_numpy(missing[0].weight), as_numpy(model[0].weight))

    fresh_model, _, fresh_scheduler = fresh_setup("cpu")
    sgd = kg.optim.SGD(fresh_model.parameters(), lr=0.1)
    with pytest.raises(CheckpointMismatchError, match="saved from Adam, loading into SGD"):
        load_checkpoint(path, fresh_model, sgd)
    with pytest.raises(CheckpointMismatchError, match="no scheduler state"):
        load_checkpoint(path, fresh_model, scheduler=fresh_scheduler)

    plain = tmp_path / "plain.safetensors"
    save_file(model.state_dict(), plain)
    with pytest.raises(CheckpointMismatchError, match="not a kernelgrad checkpoint"):
        load_checkpoint(plain, fresh_model)


def test_nothing_is_changed_when_loading_fails(tmp_path):
    model, _, _, _ = trained_setup("cpu")
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, model)
    target = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 3))
    before = as_numpy(target[0].weight).copy()
    with pytest.raises(CheckpointMismatchError):
        load_checkpoint(path, target)
    np.testing.assert_array_equal(as_numpy(target[0].weight), before)


def test_extra_values_must_be_json(tmp_path):
    with pytest.raises(TypeError, match="extra values"):
        save_checkpoint(tmp_path / "c", nn.Linear(1, 1), note=object())


# --- integrity: everything is checked before anything changes --------------------------------


def split_file(path) -> tuple[dict, dict, bytes]:
    """(tensor entries, metadata, data bytes) of a safetensors file, read independently."""
    content = path.read_bytes()
    (length,) = struct.unpack("<Q", content[:8])
    header = json.loads(content[8 : 8 + length])
    return header, header.pop("__metadata__"), content[8 + length :]


def write_signed(path, header: dict, metadata: dict, data: bytes) -> None:
    """Write a checkpoint with a valid whole-file digest, following the documented format:
    ``file_sha256`` is the SHA-256 of the file with the digest's 64 characters as zeros."""
    placeholder = b'"file_sha256":"' + b"0" * 64 + b'"'
    metadata = dict(metadata, file_sha256="0" * 64)
    text = json.dumps({"__metadata__": metadata, **header}, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    content = struct.pack("<Q", len(text)) + text + data
    digest = hashlib.sha256(content).hexdigest().encode()
    assert content.count(placeholder) == 1
    path.write_bytes(content.replace(placeholder, b'"file_sha256":"' + digest + b'"'))


def write_format_1(path, header: dict, metadata: dict, data: bytes) -> None:
    """Write a checkpoint as kernelgrad wrote them before format 2: the SHA-256 covers the
    tensor bytes only."""
    metadata = {key: value for key, value in metadata.items() if key != "file_sha256"}
    metadata.update(format="kernelgrad.checkpoint/1", sha256=hashlib.sha256(data).hexdigest())
    text = json.dumps({"__metadata__": metadata, **header}, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def snapshot(model, optimizer, scheduler) -> tuple:
    """Everything load_checkpoint may write, as plain values."""
    weights = {name: as_numpy(value).copy() for name, value in model.state_dict().items()}
    groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    state = [
        {key: as_numpy(value).copy() if isinstance(value, kg.Tensor) else value}
        for values in optimizer.state.values()
        for key, value in values.items()
    ]
    return weights, groups, state, dict(scheduler.state_dict())


def assert_same_snapshot(before: tuple, after: tuple) -> None:
    for name in before[0]:
        np.testing.assert_array_equal(after[0][name], before[0][name], err_msg=name)
    assert after[1] == before[1] and after[3] == before[3]
    assert len(after[2]) == len(before[2])
    for one, two in zip(before[2], after[2]):
        for key in one:
            np.testing.assert_array_equal(np.asarray(two[key]), np.asarray(one[key]))


def _set_group(key, value):
    def change(optimizer_meta):
        optimizer_meta["param_groups"][0][key] = value

    return change


def _set_scheduler(key, value):
    def change(scheduler_meta):
        scheduler_meta["state"][key] = value

    return change


@pytest.mark.parametrize(
    "key, change, message",
    [
        ("extra", "{not json", "'extra' entry is not valid JSON"),
        ("extra", "[1, 2]", "'extra' entry is not a JSON object"),
        ("optimizer", "garbage", "'optimizer' entry is not valid JSON"),
        ("optimizer", _set_group("lr", -0.5), r"lr = -0.5.*must be a number >= 0"),
        ("optimizer", _set_group("lr", float("nan")), r"lr = nan.*must be a number >= 0"),
        ("optimizer", _set_group("lr", "fast"), r"lr = 'fast'.*must be a number"),
        ("optimizer", _set_group("betas", [1.5, 0.9]), r"betas = \[1.5, 0.9\].*\[0, 1\)"),
        ("optimizer", _set_group("amsgrad", 3), r"amsgrad = 3.*true or false"),
        ("optimizer", _set_group("params", ["a"]), "parameter indices"),
        ("optimizer", lambda meta: meta.pop("param_groups"), "param_groups"),
        ("scheduler", "{", "'scheduler' entry is not valid JSON"),
        ("scheduler", _set_scheduler("last_epoch", "x"), "last_epoch"),
        ("scheduler", _set_scheduler("gamma", [1]), "gamma"),
        ("scheduler", _set_scheduler("unknown", 1), "unknown"),
    ],
)
def test_invalid_stored_values_are_refused_before_anything_changes(tmp_path, key, change, message):
    """Even in a file whose digest is intact (written by other software, or edited and
    signed again), a stored value that does not fit raises CheckpointError naming the
    file, and neither the model nor the optimizer nor the scheduler is touched."""
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, *trained_setup("cpu")[:3], epoch=2)
    header, metadata, data = split_file(path)
    if callable(change):
        value = json.loads(metadata[key])
        change(value)
        metadata[key] = json.dumps(value)
    else:
        metadata[key] = change
    write_signed(path, header, metadata, data)

    model, optimizer, scheduler = fresh_setup("cpu")
    optimizer.step()  # no gradients: nothing changes, but the state is there
    before = snapshot(model, optimizer, scheduler)
    with pytest.raises(CheckpointError, match=message) as error:
        load_checkpoint(path, model, optimizer, scheduler)
    assert "checkpoint.safetensors" in str(error.value)
    assert_same_snapshot(before, snapshot(model, optimizer, scheduler))


def test_a_changed_learning_rate_is_detected(tmp_path):
    """The digest covers the whole file, metadata included: a corrupted hyperparameter
    is not loaded as if it were the saved one."""
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, *trained_setup("cpu")[:2])
    content = path.read_bytes()
    assert content.count(b'\\"lr\\": 0.0025') == 1
    path.write_bytes(content.replace(b'\\"lr\\": 0.0025', b'\\"lr\\": 0.0035'))
    model, optimizer, _ = fresh_setup("cpu")
    with pytest.raises(CheckpointError, match="does not match the SHA-256") as error:
        load_checkpoint(path, model, optimizer)
    assert "checkpoint.safetensors" in str(error.value)
    assert optimizer.param_groups[0]["lr"] == 0.01


def test_format_1_checkpoints_still_load_and_are_validated(tmp_path):
    """Checkpoints of format 1 (digest over the tensor bytes only) load; their metadata,
    which no digest covers, is validated field by field."""
    model, optimizer, scheduler, _ = trained_setup("cpu")
    path = tmp_path / "old.safetensors"
    save_checkpoint(path, model, optimizer, scheduler, epoch=2)
    header, metadata, data = split_file(path)
    write_format_1(path, header, metadata, data)
    restored, restored_optimizer, restored_scheduler = fresh_setup("cpu")
    assert load_checkpoint(path, restored, restored_optimizer, restored_scheduler) == {"epoch": 2}
    np.testing.assert_array_equal(as_numpy(restored[0].weight), as_numpy(model[0].weight))
    assert restored_optimizer.param_groups[0]["lr"] == 0.0025

    metadata["optimizer"] = metadata["optimizer"].replace('"lr": 0.0025', '"lr": -0.0025')
    write_format_1(path, header, metadata, data)
    target, target_optimizer, _ = fresh_setup("cpu")
    weights = as_numpy(target[0].weight).copy()
    with pytest.raises(CheckpointError, match=r"lr = -0.0025"):
        load_checkpoint(path, target, target_optimizer)
    np.testing.assert_array_equal(as_numpy(target[0].weight), weights)
    assert target_optimizer.param_groups[0]["lr"] == 0.01


def test_checkpoint_formats_other_than_known_ones_are_named(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, nn.Linear(2, 2))
    header, metadata, data = split_file(path)
    write_signed(path, header, dict(metadata, format="kernelgrad.checkpoint/9"), data)
    with pytest.raises(CheckpointError, match=r"format 9.*newer version of kernelgrad"):
        load_checkpoint(path, nn.Linear(2, 2))
    del metadata["file_sha256"]  # format 2 without its digest
    text = json.dumps({"__metadata__": metadata, **header}).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    with pytest.raises(CheckpointError, match="no whole-file SHA-256"):
        load_checkpoint(path, nn.Linear(2, 2))


def test_tensor_names_are_checked(tmp_path):
    model, optimizer, _, _ = trained_setup("cpu")
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, model, optimizer)
    header, metadata, data = split_file(path)
    header["optimizer.state.x.exp_avg"] = header.pop("optimizer.state.0.exp_avg")
    write_signed(path, header, metadata, data)
    fresh_model, fresh_optimizer, _ = fresh_setup("cpu")
    with pytest.raises(CheckpointError, match=r"optimizer\.state\.x\.exp_avg"):
        load_checkpoint(path, fresh_model, fresh_optimizer)


def test_checkpoints_get_the_usual_file_mode(tmp_path):
    """Like a file made by open(): 0o666 less the umask (mkstemp would give 0o600); an
    existing checkpoint keeps its mode."""
    path = tmp_path / "checkpoint.safetensors"
    previous = os.umask(0o022)
    try:
        save_checkpoint(path, nn.Linear(2, 2))
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        os.umask(0o077)
        save_file({"x": kg.ones(1)}, tmp_path / "other.safetensors")
        assert stat.S_IMODE((tmp_path / "other.safetensors").stat().st_mode) == 0o600
        path.chmod(0o640)
        save_checkpoint(path, nn.Linear(2, 2))
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
    finally:
        os.umask(previous)


_HANG_IN_SAVE = """
import os, sys, time
import numpy as np
from kernelgrad.serialization import save_file

def hang(descriptor):  # every byte is written, the rename has not happened
    print("writing", flush=True)
    time.sleep(600)

os.fsync = hang
save_file({"x": np.zeros(1 << 16, dtype=np.float32)}, sys.argv[1])
"""


def temporaries(folder) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


def test_a_save_killed_mid_write_leaves_a_temporary_that_the_next_save_removes(tmp_path):
    """kill -9 during a save leaves the previous file and a temporary file; the next save
    into that folder deletes temporaries whose writer is gone, never a live writer's."""
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, nn.Linear(2, 2), epoch=1)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    writer = subprocess.Popen(
        [sys.executable, "-c", _HANG_IN_SAVE, str(path)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert writer.stdout.readline() == b"writing\n"
    finally:
        writer.kill()  # SIGKILL: no cleanup code runs
        writer.wait()
        writer.stdout.close()
    (stale,) = temporaries(tmp_path)
    assert (tmp_path / stale).stat().st_size > 1 << 18
    assert load_checkpoint(path, nn.Linear(2, 2)) == {"epoch": 1}  # the previous file

    host = stale.split(".kg-")[1].split("-")[1]
    live = f".other.safetensors.kg-{os.getpid()}-{host}-0123abcd.tmp"  # this process: alive
    recent = ".other.safetensors.kg-1-ffffffff-0123abcd.tmp"  # another machine's, recent
    old = ".other.safetensors.kg-1-ffffffff-4567cdef.tmp"  # another machine's, 2 days old
    for name in (live, recent, old):
        (tmp_path / name).write_bytes(b"partial")
    two_days_ago = time.time() - 2 * 86400
    os.utime(tmp_path / old, (two_days_ago, two_days_ago))
    save_checkpoint(path, nn.Linear(2, 2), epoch=2)
    assert temporaries(tmp_path) == sorted([live, recent])
    assert load_checkpoint(path, nn.Linear(2, 2)) == {"epoch": 2}


def test_a_failure_while_restoring_puts_everything_back(tmp_path, monkeypatch):
    """The last line of defence: if restoring fails after every check passed, the
    optimizer and scheduler are put back and the model is not touched."""
    path = tmp_path / "checkpoint.safetensors"
    save_checkpoint(path, *trained_setup("cpu")[:3])
    model, optimizer, scheduler = fresh_setup("cpu")
    optimizer.step()
    before = snapshot(model, optimizer, scheduler)

    def failing_load(state):
        scheduler.last_epoch = 99
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(scheduler, "load_state_dict", failing_load)
    with pytest.raises(CheckpointError, match=r"simulated failure.*nothing was changed"):
        load_checkpoint(path, model, optimizer, scheduler)
    assert_same_snapshot(before, snapshot(model, optimizer, scheduler))
    assert scheduler.last_epoch == before[3]["last_epoch"]
