"""The `kernelgrad` command end to end, on tiny generated IDX datasets."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelgrad.cli import Progress, main
from kernelgrad.data import DATASETS, write_idx

ROOT = Path(__file__).resolve().parents[1]


def make_tiny_mnist(folder: Path, train: int = 256, test: int = 96, seed: int = 0) -> Path:
    """A learnable toy problem in MNIST's file layout: class k lights up row block k."""
    rng = np.random.default_rng(seed)
    for prefix, count in (("train", train), ("t10k", test)):
        labels = rng.integers(0, 10, count).astype(np.uint8)
        images = rng.integers(0, 60, (count, 28, 28)).astype(np.uint8)
        for index, label in enumerate(labels):
            images[index, 2 + 2 * label : 4 + 2 * label, 4:24] = 250
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", labels)
    return folder


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """No real dataset locations, no network: every dataset comes from tmp_path."""
    monkeypatch.delenv("KERNELGRAD_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    for name in ("fashion-mnist", "mnist"):
        spec = DATASETS[name]
        monkeypatch.setitem(DATASETS, name, dataclasses.replace(spec, system_dirs=(), mirrors=()))


@pytest.fixture
def tiny_data(tmp_path) -> Path:
    return make_tiny_mnist(tmp_path / "tiny")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_missing_dataset_is_a_user_error(capsys):
    code, _, err = run_cli(capsys, "train", "--dataset", "fashion-mnist", "--device", "cpu")
    assert code == 2
    assert err.startswith("kernelgrad train: error: Fashion-MNIST was not found")
    assert "sudo apt-get install dataset-fashion-mnist" in err
    assert "--data FOLDER" in err and "KERNELGRAD_DATA" in err
    assert "Traceback" not in err


def test_nonexistent_data_folder(capsys, tmp_path):
    code, _, err = run_cli(capsys, "train", "--data", str(tmp_path / "typo"), "--device", "cpu")
    assert code == 2 and f"--data {tmp_path / 'typo'}: no such folder" in err


def test_corrupt_idx_file_names_the_file(capsys, tiny_data):
    images = tiny_data / "train-images-idx3-ubyte.gz"
    images.write_bytes(images.read_bytes()[:1000])
    code, _, err = run_cli(
        capsys, "train", "--dataset", "mnist", "--data", str(tiny_data), "--device", "cpu"
    )
    assert code == 2
    assert "MNIST in" in err and "is damaged" in err
    assert f"{images}: truncated gzip stream" in err and "Traceback" not in err


def test_bad_magic_number(capsys, tiny_data):
    labels = tiny_data / "t10k-labels-idx1-ubyte.gz"
    labels.unlink()
    (tiny_data / "t10k-labels-idx1-ubyte").write_bytes(b"\x1f\x00\x08\x01" + bytes(8))
    code, _, err = run_cli(
        capsys, "train", "--dataset", "mnist", "--data", str(tiny_data), "--device", "cpu"
    )
    assert code == 2 and "bad magic number 0x1F000801" in err


def test_unknown_device(capsys):
    code, _, err = run_cli(capsys, "train", "--device", "tpu")
    assert code == 2
    assert "--device tpu: unknown device type 'tpu'" in err


def test_cuda_without_a_gpu_says_what_to_do(capsys):
    from kernelgrad.cli import _cuda_available

    if _cuda_available()[0]:
        pytest.skip("a GPU is available here")
    code, _, err = run_cli(capsys, "train", "--device", "cuda")
    assert code == 2
    assert "CUDA is not available" in err and "--device cpu" in err


def test_unknown_dataset_name(capsys):
    code, _, err = run_cli(capsys, "train", "--dataset", "cifar10")
    assert code == 2 and "unknown dataset 'cifar10'" in err


def test_bad_numbers_are_argparse_errors(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--epochs", "0"])
    assert info.value.code == 2
    assert "expected a positive integer, got 0" in capsys.readouterr().err


def test_progress_in_a_log_file_writes_a_few_plain_lines():
    stream = io.StringIO()
    progress = Progress(1000, "epoch 1/1", stream=stream)
    for done in range(0, 1001, 10):
        progress.update(done, 0.5)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert 4 <= len(lines) <= 5
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()
    assert lines[-1].startswith("epoch 1/1 [") and "1000/1000" in lines[-1]
    assert "samples/s" in lines[-1] and "loss 0.5000" in lines[-1]


def test_progress_on_a_terminal_redraws_one_line():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = Progress(100, "epoch 1/1", stream=stream)
    progress.update(50, 1.0)
    progress.update(100, 0.25)
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and "100/100" in text


def test_subprocess_error_has_no_traceback(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "kernelgrad", "train", "--dataset", "mnist", "--no-download"],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "kernelgrad train: error: MNIST was not found" in result.stderr
    assert "Traceback" not in result.stderr
