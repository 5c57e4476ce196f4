"""``kernelgrad train --nproc 2``: the same model as one process with the whole batch,
rank 0 alone prints and writes, and a run resumes on another number of processes."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from kernelgrad.cli import main
from kernelgrad.serialization import load_file

from .jobs import run

# A few steps of the MLP on 128 of the embedded digits; --schedule constant so that a
# run extended by --resume follows the uninterrupted one exactly.
OPTIONS = [
    "--dataset", "digits", "--model", "mlp", "--batch-size", "32", "--limit-train", "128",
    "--limit-test", "64", "--device", "cpu", "--schedule", "constant",
]  # fmt: skip


def train_processes(nproc: int, *arguments: str):
    command = [sys.executable, "-m", "kernelgrad", "train", "--nproc", str(nproc), *arguments]
    return run(command)


def model_tensors(folder) -> dict[str, np.ndarray]:
    tensors = load_file(folder / "checkpoint.safetensors")
    return {name: t.numpy() for name, t in tensors.items() if name.startswith("model.")}


def assert_same_model(a: dict, b: dict) -> None:
    assert a.keys() == b.keys() and a
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=2e-6, err_msg=name)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The reference: one process, 2 epochs, batch 32."""
    folder = tmp_path_factory.mktemp("one-process")
    assert main(["train", *OPTIONS, "--epochs", "2", "--out", str(folder)]) == 0
    return folder


def test_two_processes_train_the_one_process_model(mpiexec, one_process, tmp_path):
    folder = tmp_path / "two"
    job = train_processes(2, *OPTIONS, "--epochs", "2", "--compile", "--out", str(folder))
    assert job.returncode == 0, job.stdout + job.stderr
    assert_same_model(model_tensors(folder), model_tensors(one_process))
    # rank 0 alone prints and writes
    assert job.stdout.count("epoch 2/2: train loss") == 1
    assert job.stdout.count("done: test accuracy") == 1
    assert "starting 2 process(es), 1 CPU thread(s) each" in job.stderr
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkpoint-epoch-001.safetensors",
        "checkpoint-epoch-002.safetensors",
        "checkpoint.safetensors",
        "curves.png",
        "metrics.csv",
        "metrics.json",
    ]
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["processes"] == 2 and metrics["threads_per_process"] == 1
    reference = json.loads((one_process / "metrics.json").read_text())["history"]
    history = metrics["history"]
    # the figures are summed over both ranks' shards: the same as one process's
    np.testing.assert_allclose(history["train_loss"], reference["train_loss"], rtol=1e-4)
    np.testing.assert_allclose(history["test_accuracy"], reference["test_accuracy"])
    np.testing.assert_allclose(history["train_accuracy"], reference["train_accuracy"])


def test_resume_on_another_number_of_processes(mpiexec, one_process, tmp_path, capsys):
    folder = tmp_path / "resumed"
    assert main(["train", *OPTIONS, "--epochs", "1", "--out", str(folder)]) == 0
    capsys.readouterr()
    job = train_processes(2, "--resume", str(folder), "--epochs", "2")
    assert job.returncode == 0, job.stdout + job.stderr
    assert "epoch 2/2" in job.stdout and "epoch 1/2" not in job.stdout
    assert_same_model(model_tensors(folder), model_tensors(one_process))


def test_batch_size_must_divide_before_any_process_starts(capsys):
    code = main(["train", "--nproc", "3", *OPTIONS[:-2], "--batch-size", "32"])
    assert code == 2
    assert "--batch-size 32 is the number of samples of one step over all 3 processes" in (
        capsys.readouterr().err
    )
