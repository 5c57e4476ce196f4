"""Bad values for the `kernelgrad` command's options, empty datasets and damaged run
checkpoints: each exits with status 2 and one message, without a traceback, and writes
nothing. The command runs in this process (``main()``); tests/test_cli.py has the one
subprocess test that the real command exits the same way."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.cli import CHECKPOINT_KIND, main
from kernelgrad.data import write_idx
from kernelgrad.models import build_model
from kernelgrad.serialization import save_checkpoint
from tests.test_cli import isolated, make_tiny_mnist  # noqa: F401 (isolated: autouse fixture)

# (arguments after `train`, part of the message). {file} is an existing file, {missing} a
# path that does not exist.
BAD_TRAIN_VALUES = [
    (["--epochs", "0"], "argument --epochs: expected a positive integer, got 0"),
    (["--epochs", "-3"], "argument --epochs: expected a positive integer, got -3"),
    (["--epochs", "1.5"], "argument --epochs: expected a positive integer, got '1.5'"),
    (["--batch-size", "0"], "argument --batch-size: expected a positive integer, got 0"),
    (["--batch-size", "many"], "argument --batch-size: expected a positive integer, got 'many'"),
    (["--lr", "0"], "argument --lr: expected a positive number, got 0"),
    (["--lr", "-1"], "argument --lr: expected a positive number, got -1"),
    (["--lr", "nan"], "argument --lr: expected a positive number, got nan"),
    (["--lr", "inf"], "argument --lr: expected a positive number, got inf"),
    (["--lr", "fast"], "argument --lr: expected a number, got 'fast'"),
    (["--momentum", "-1"], "argument --momentum: expected a number in [0, 1), got -1"),
    (["--momentum", "1"], "argument --momentum: expected a number in [0, 1), got 1"),
    (["--momentum", "nan"], "argument --momentum: expected a number in [0, 1), got nan"),
    (["--momentum", "x"], "argument --momentum: expected a number, got 'x'"),
    (["--seed", "-1"], "argument --seed: expected an integer from 0 to 2**64 - 1, got -1"),
    (
        ["--seed", str(2**64)],
        f"argument --seed: expected an integer from 0 to 2**64 - 1, got {2**64}",
    ),
    (["--seed", "1.5"], "argument --seed: expected an integer, got '1.5'"),
    (["--limit-train", "0"], "argument --limit-train: expected a positive integer, got 0"),
    (["--limit-test", "-2"], "argument --limit-test: expected a positive integer, got -2"),
    (["--threads", "0"], "argument --threads: expected a positive integer, got 0"),
    (["--threads", "100000"], "--threads 100000: at most"),
    (["--model", "resnet"], "argument --model: invalid choice: 'resnet'"),
    (["--optimizer", "rmsprop"], "argument --optimizer: invalid choice: 'rmsprop'"),
    (["--schedule", "linear"], "argument --schedule: invalid choice: 'linear'"),
    (["--dataset", "cifar10"], "unknown dataset 'cifar10'"),
    (["--device", "tpu"], "--device tpu: unknown device type 'tpu'"),
    (["--device", "cuda:x"], "--device cuda:x: bad device string 'cuda:x'"),
    (["--device", "cpu:1"], "--device cpu:1: the CPU has no device index"),
    (["--data", "{missing}"], "--data {missing}: no such folder"),
    (["--data", "{file}"], "--data {file}: not a folder"),
    (["--out", "{file}"], "--out {file}: this is a file, not a folder"),
    (["--out", "{file}/run"], "--out {file}/run: {file} is a file"),
    (["--resume", "{missing}"], "{missing}: no such checkpoint file"),
    (["--resume", "{file}"], "cannot read the checkpoint"),
    (["--no-such-option"], "unrecognized arguments: --no-such-option"),
]


@pytest.fixture
def tiny(tmp_path) -> Path:
    return make_tiny_mnist(tmp_path / "tiny", train=16, test=8)


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


def train_on(capsys, data: Path, run_folder: Path) -> tuple[int, str]:
    arguments = ["--dataset", "mnist", "--data", str(data), "--device", "cpu"]
    return run(capsys, "train", *arguments, "--out", str(run_folder))


def assert_refused(code: int, err: str, command: str, message: str) -> None:
    assert code == 2, err
    assert f"kernelgrad {command}: error: " in err and message in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "arguments, message", BAD_TRAIN_VALUES, ids=[" ".join(a) for a, _ in BAD_TRAIN_VALUES]
)
def test_bad_train_option_values_exit_2_with_a_message(capsys, tmp_path, tiny, arguments, message):
    places = {"file": str(tmp_path / "a-file"), "missing": str(tmp_path / "missing")}
    (tmp_path / "a-file").write_text("not a folder or a checkpoint")
    run_folder = tmp_path / "run"
    common = ["--dataset", "mnist", "--data", str(tiny), "--device", "cpu", "--epochs", "1"]
    arguments = [argument.format(**places) for argument in arguments]
    code, err = run(capsys, "train", *common, "--out", str(run_folder), *arguments)
    assert_refused(code, err, "train", message.format(**places))
    assert not run_folder.exists()


BAD_OTHER_VALUES = [
    (["evaluate", "{missing}"], "{missing}: no such checkpoint file"),
    (["evaluate", "{file}"], "cannot read the checkpoint"),
    (["evaluate", "{file}", "--batch-size", "0"], "argument --batch-size: expected a positive"),
    (["evaluate", "{file}", "--limit-test", "x"], "argument --limit-test: expected a positive"),
    (["evaluate", "{file}", "--threads", "-1"], "argument --threads: expected a positive"),
    (["download", "cifar10"], "unknown dataset 'cifar10'"),
    (["download", "digits"], "cannot be downloaded: it ships inside kernelgrad"),
]


@pytest.mark.parametrize(
    "arguments, message", BAD_OTHER_VALUES, ids=[" ".join(a) for a, _ in BAD_OTHER_VALUES]
)
def test_bad_evaluate_and_download_values_exit_2(capsys, tmp_path, arguments, message):
    places = {"file": str(tmp_path / "a-file"), "missing": str(tmp_path / "missing")}
    (tmp_path / "a-file").write_text("not a checkpoint")
    arguments = [argument.format(**places) for argument in arguments]
    code, err = run(capsys, *arguments)
    assert_refused(code, err, arguments[0], message.format(**places))


# --- empty datasets -------------------------------------------------------------------------


def empty_split(folder: Path, prefix: str) -> None:
    write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", np.zeros((0, 28, 28), dtype=np.uint8))
    write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", np.zeros(0, dtype=np.uint8))


@pytest.mark.parametrize("prefix, split", [("train", "training"), ("t10k", "test")])
def test_an_empty_dataset_is_refused_and_nothing_is_written(capsys, tmp_path, tiny, prefix, split):
    """Training on no samples printed a loss of nan, wrote a checkpoint and exited 0."""
    empty_split(tiny, prefix)
    run_folder = tmp_path / "run"
    code, err = train_on(capsys, tiny, run_folder)
    assert_refused(code, err, "train", f"the {split} split of mnist in {tiny}")
    assert "holds no samples" in err
    assert not run_folder.exists()


@pytest.mark.parametrize("defect", ["negative int8 labels", "overflowing dimensions"])
def test_a_damaged_idx_file_is_refused(capsys, tmp_path, tiny, defect):
    if defect == "negative int8 labels":
        damaged = tiny / "train-labels-idx1-ubyte.gz"
        write_idx(damaged, -np.ones(16, dtype=np.int8))
        message = "label -1 is out of range for MNIST"
    else:
        damaged = tiny / "train-images-idx3-ubyte.gz"
        header = struct.pack(">HBB4I", 0, 0x08, 4, 65536, 65536, 65536, 65536)
        damaged.write_bytes(gzip.compress(header))
        message = "the header declares 65536x65536x65536x65536 values of uint8, more than"
    run_folder = tmp_path / "run"
    code, err = train_on(capsys, tiny, run_folder)
    assert_refused(code, err, "train", f"{damaged}: {message}")
    assert not run_folder.exists()


# --- run checkpoints whose stored values are invalid ----------------------------------------


def run_checkpoint(path: Path, data: Path, **changes) -> None:
    """A `kernelgrad train` checkpoint of an untrained MLP (valid unless ``changes``
    replace some of its stored values; ``config`` entries are merged)."""
    model = build_model("mlp")
    optimizer = kg.optim.Adam(model.parameters(), lr=0.002)
    config = {
        "model": "mlp", "dataset": "mnist", "epochs": 2, "data_dir": str(data),
        "batch_size": 8, "lr": 0.002, "optimizer": "adam", "momentum": 0.9, "seed": 0,
        "schedule": "constant", "limit_train": None, "limit_test": None,
    }  # fmt: skip
    config_changes = changes.pop("config", {})
    config = {**config, **config_changes} if isinstance(config_changes, dict) else config_changes
    stored = {
        "kind": CHECKPOINT_KIND, "version": kg.__version__, "config": config, "epoch": 1,
        "loader": {"seed": 0, "epoch": 1}, "rng": {}, "history": {}, "classes": list("0123456789"),
    }  # fmt: skip
    stored.update(changes)
    save_checkpoint(path, model, optimizer, **stored)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"config": {"lr": -1}}, "--lr: expected a positive number, got -1"),
        ({"config": {"seed": -5}}, "--seed: expected an integer from 0 to 2**64 - 1, got -5"),
        ({"config": {"momentum": 7}}, "--momentum: expected a number in [0, 1), got 7"),
        ({"config": {"model": "resnet"}}, "--model: expected one of lenet, mlp, cnn"),
        ({"config": {"batch_size": True}}, "--batch-size: expected a positive integer, got True"),
        ({"config": {"dataset": 3}}, "the dataset name is missing"),
        ({"config": "lenet"}, "config is not an object"),
        ({"epoch": "one"}, "the finished epoch count 'one' is not an integer >= 1"),
        ({"loader": {"seed": -1, "epoch": 0}}, "the data loader's state"),
        ({"history": []}, "the history is not an object of lists"),
        ({"rng": {"cpu": {"state": "garbage"}}}, "its stored random-number state cannot be"),
    ],
    ids=lambda value: str(value)[:40] if isinstance(value, dict) else None,
)
def test_a_run_checkpoint_with_invalid_values_is_refused(capsys, tmp_path, tiny, changes, message):
    folder = tmp_path / "run"
    folder.mkdir()
    run_checkpoint(folder / "checkpoint.safetensors", tiny, **changes)
    code, err = run(capsys, "train", "--resume", str(folder), "--device", "cpu")
    assert_refused(code, err, "train", message)
    assert [path.name for path in folder.iterdir()] == ["checkpoint.safetensors"]
    code, err = run(capsys, "evaluate", str(folder), "--device", "cpu")
    if "rng" not in changes:  # evaluate does not restore the random state
        assert_refused(code, err, "evaluate", message)


def test_a_valid_run_checkpoint_is_accepted(capsys, tmp_path, tiny):
    """The checkpoint the table above damages is itself valid."""
    folder = tmp_path / "run"
    folder.mkdir()
    run_checkpoint(folder / "checkpoint.safetensors", tiny)
    code, err = run(capsys, "evaluate", str(folder), "--device", "cpu", "--limit-test", "4")
    assert code == 0, err
