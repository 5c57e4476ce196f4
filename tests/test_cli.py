"""The `kernelgrad` command end to end, on tiny generated IDX datasets."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from kernelgrad.cli import Progress, main, read_run_checkpoint, resolve_device
from kernelgrad.codecache import cache_dir
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
    # The kernel cache stays where it is (it would follow XDG_CACHE_HOME otherwise).
    monkeypatch.setenv("KERNELGRAD_CACHE_DIR", str(cache_dir()))
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
    assert main(["train", "--epochs", "0"]) == 2  # argparse's exit, returned by main()
    assert "expected a positive integer, got 0" in capsys.readouterr().err
    assert main(["--version"]) == 0


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


# --- end to end: train, resume, evaluate ----------------------------------------------------


@pytest.fixture
def models():
    """The reference models the CLI trains (kernelgrad.models)."""
    import kernelgrad.models

    return kernelgrad.models


SMALL = ["--batch-size", "32", "--limit-train", "128", "--limit-test", "64", "--device", "cpu"]


def read_png(path: Path) -> tuple[int, int, bytes]:
    """Check a PNG's signature and chunk CRCs; return width, height and the raw rows."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks = 8, {}
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length : position + 12 + length])
        assert zlib.crc32(kind + body) == crc
        chunks[kind] = chunks.get(kind, b"") + body
        position += 12 + length
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    return width, height, zlib.decompress(chunks[b"IDAT"])


def test_train_resume_evaluate(models, tmp_path, tiny_data, capsys):
    run = tmp_path / "run"
    code, out, err = run_cli(
        capsys,
        "train", "--dataset", "mnist", "--data", str(tiny_data), "--model", "lenet",
        "--epochs", "1", "--out", str(run), *SMALL,
    )  # fmt: skip
    assert code == 0, err
    assert "lenet on mnist (128 train / 64 test samples" in out
    assert "epoch 1/1: train loss" in out and "test loss" in out and "samples/s" in out
    assert "epoch 1/1 [" in err and "samples/s" in err and "loss " in err
    assert "first training step done" in err
    for name in (
        "checkpoint.safetensors",
        "checkpoint-epoch-001.safetensors",
        "metrics.json",
        "metrics.csv",
    ):
        assert (run / name).is_file(), name
    width, height, _ = read_png(run / "curves.png")
    assert width > 200 and height > 100
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["config"]["model"] == "lenet" and metrics["config"]["dataset"] == "mnist"
    assert metrics["history"]["epoch"] == [1]
    accuracy = metrics["history"]["test_accuracy"][0]
    assert 0.0 <= accuracy <= 1.0 and accuracy * 64 == round(accuracy * 64)
    assert metrics["first_step_seconds"] > 0
    rows = list(csv.reader((run / "metrics.csv").read_text().splitlines()))
    assert rows[0][:5] == ["epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy"]
    assert len(rows) == 2 and rows[1][0] == "1"

    code, out, err = run_cli(capsys, "train", "--resume", str(run), "--epochs", "2")
    assert code == 0, err
    assert "epoch 1/" not in out and "epoch 2/2: train loss" in out
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["history"]["epoch"] == [1, 2]
    assert (run / "checkpoint-epoch-002.safetensors").is_file()
    assert len((run / "metrics.csv").read_text().splitlines()) == 3

    code, out, err = run_cli(
        capsys, "evaluate", str(run), "--data", str(tiny_data), "--limit-test", "64", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["samples"] == 64 and result["model"] == "lenet"
    assert result["accuracy"] == pytest.approx(metrics["history"]["test_accuracy"][-1])
    assert result["loss"] == pytest.approx(metrics["history"]["test_loss"][-1], rel=1e-5)
    assert [entry["class"] for entry in result["per_class"]] == list(range(10))
    assert sum(entry["samples"] for entry in result["per_class"]) == 64

    code, out, _ = run_cli(
        capsys, "evaluate", str(run / "checkpoint-epoch-001.safetensors"), "--data", str(tiny_data)
    )
    assert code == 0
    assert "trained 1 epoch(s)" in out and "test accuracy" in out and "per-class accuracy" in out
    assert len([line for line in out.splitlines() if "samples)" in line]) == 10


def _state(path: Path) -> dict[str, np.ndarray]:
    from kernelgrad.serialization import load_file

    return {name: value.numpy() for name, value in load_file(path).items()}


def _assert_same_run(straight: Path, split: Path, rtol: float = 1e-6, atol: float = 1e-7) -> None:
    one = json.loads((straight / "metrics.json").read_text())["history"]
    two = json.loads((split / "metrics.json").read_text())["history"]
    for key in ("train_loss", "train_accuracy", "test_loss", "test_accuracy"):
        assert two[key] == pytest.approx(one[key], rel=rtol, abs=atol), key
    first = _state(straight / "checkpoint.safetensors")
    second = _state(split / "checkpoint.safetensors")
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_allclose(second[name], first[name], rtol=rtol, atol=atol)


def test_extended_run_equals_an_uninterrupted_one(models, tmp_path, tiny_data, capsys):
    """A constant-rate run trained for 1 epoch and resumed to 2 equals 2 epochs straight."""
    common = ["--dataset", "mnist", "--data", str(tiny_data), "--model", "mlp", *SMALL]
    common += ["--schedule", "constant"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert run_cli(capsys, "train", *common, "--epochs", "2", "--out", str(straight))[0] == 0
    assert run_cli(capsys, "train", *common, "--epochs", "1", "--out", str(split))[0] == 0
    assert run_cli(capsys, "train", "--resume", str(split), "--epochs", "2")[0] == 0
    _assert_same_run(straight, split)


def test_interrupted_cosine_run_resumes_exactly(models, tmp_path, tiny_data, capsys):
    """Resuming the epoch-1 checkpoint of a 2-epoch run (as after an interruption)
    reproduces the uninterrupted run, learning-rate schedule included."""
    common = ["--dataset", "mnist", "--data", str(tiny_data), "--model", "mlp", *SMALL]
    common += ["--schedule", "cosine"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert run_cli(capsys, "train", *common, "--epochs", "2", "--out", str(straight))[0] == 0
    epoch_one = straight / "checkpoint-epoch-001.safetensors"
    assert run_cli(capsys, "train", "--resume", str(epoch_one), "--out", str(split))[0] == 0
    _assert_same_run(straight, split)


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_compiled_training_equals_eager_training(
    models, tmp_path, tiny_data, capsys, monkeypatch, schedule
):
    """--compile runs the same steps as fused replays: 2 epochs of 4 batches (the first
    call eager, the second traced, the rest replayed) end where eager training ends; a
    cosine schedule's new rate every step is fed to the replays, not traced again."""
    import kernelgrad.compile as compile_package

    real_compile, python_runs = compile_package.compile, []

    def counting_compile(fn):
        def counted(*args):
            python_runs.append(1)
            return fn(*args)

        return real_compile(counted)

    monkeypatch.setattr(compile_package, "compile", counting_compile)
    common = ["--dataset", "mnist", "--data", str(tiny_data), "--model", "lenet", *SMALL]
    common += ["--schedule", schedule]
    eager, compiled = tmp_path / "eager", tmp_path / "compiled"
    assert run_cli(capsys, "train", *common, "--epochs", "2", "--out", str(eager))[0] == 0
    assert python_runs == []  # eager training does not compile
    code, _, err = run_cli(
        capsys, "train", *common, "--epochs", "2", "--out", str(compiled), "--compile"
    )
    assert code == 0, err
    assert len(python_runs) == 2  # 8 steps: one eager, one traced, six replays
    _assert_same_run(eager, compiled, rtol=1e-4, atol=1e-5)  # fused kernels round differently


def test_resume_refuses_another_model_or_changed_options(models, tmp_path, tiny_data, capsys):
    run = tmp_path / "run"
    common = ["--dataset", "mnist", "--data", str(tiny_data), *SMALL]
    assert (
        run_cli(capsys, "train", *common, "--model", "mlp", "--epochs", "1", "--out", str(run))[0]
        == 0
    )
    code, _, err = run_cli(
        capsys, "train", "--resume", str(run), "--model", "lenet", "--epochs", "2"
    )
    assert code == 2
    assert "was trained with --model mlp, but --model lenet was given" in err
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--epochs", "2", "--lr", "0.5")
    assert code == 2 and "cannot change --lr 0.5 (the run used 0.002)" in err
    code, _, err = run_cli(capsys, "train", "--resume", str(run))
    assert code == 2 and "already trained 1 of 1 epochs" in err
    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "nothing"))
    assert code == 2 and "no such checkpoint file" in err


def test_checkpoint_of_another_model_or_no_checkpoint(models, tmp_path, tiny_data, capsys):
    from kernelgrad.serialization import save_checkpoint, save_file

    run = tmp_path / "run"
    common = ["--dataset", "mnist", "--data", str(tiny_data), *SMALL]
    code = run_cli(capsys, "train", *common, "--model", "mlp", "--epochs", "1", "--out", str(run))[
        0
    ]
    assert code == 0
    _, stored = read_run_checkpoint(run)
    stored["config"]["model"] = "lenet"  # the weights of an MLP, labelled as LeNet-5
    mlp = models.build_model("mlp")
    save_checkpoint(tmp_path / "mislabelled.safetensors", mlp, **stored)
    code, _, err = run_cli(
        capsys, "evaluate", str(tmp_path / "mislabelled.safetensors"), "--data", str(tiny_data)
    )
    assert code == 2 and "Traceback" not in err
    assert "does not fit the 'lenet' model" in err and "not in the model" in err

    save_file(mlp.state_dict(), tmp_path / "weights.safetensors")  # a plain tensor file
    code, _, err = run_cli(capsys, "evaluate", str(tmp_path / "weights.safetensors"))
    assert code == 2 and "is not a kernelgrad checkpoint" in err

    save_checkpoint(tmp_path / "bare.safetensors", mlp, epoch=1)  # no run configuration
    code, _, err = run_cli(capsys, "evaluate", str(tmp_path / "bare.safetensors"))
    assert code == 2 and "is not a `kernelgrad train` checkpoint" in err

    (tmp_path / "garbage.safetensors").write_bytes(b"not a checkpoint at all")
    code, _, err = run_cli(capsys, "evaluate", str(tmp_path / "garbage.safetensors"))
    assert code == 2 and "cannot read the checkpoint" in err

    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes((run / "checkpoint.safetensors").read_bytes()[:-100])
    code, _, err = run_cli(capsys, "train", "--resume", str(truncated), "--epochs", "3")
    assert code == 2 and "cannot read the checkpoint" in err and "truncated" in err


def test_default_dataset_missing_falls_back_to_embedded_digits(models, tmp_path, capsys):
    run = tmp_path / "run"
    code, out, err = run_cli(
        capsys, "train", "--model", "mlp", "--epochs", "1", "--out", str(run), *SMALL
    )
    assert code == 0, err
    assert (
        "Fashion-MNIST was not found" in err and "sudo apt-get install dataset-fashion-mnist" in err
    )
    assert "Falling back to the small dataset embedded in kernelgrad" in err
    assert "mlp on digits (128 train / 64 test samples" in out
    assert json.loads((run / "metrics.json").read_text())["config"]["dataset"] == "digits"


def test_builtin_plot_when_matplotlib_is_missing(tmp_path, monkeypatch):
    from kernelgrad.plotting import save_training_plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    history = {
        "epoch": [1, 2, 3],
        "train_loss": [1.2, 0.8, 0.6],
        "test_loss": [1.0, 0.9, 0.85],
        "train_accuracy": [0.6, 0.7, 0.8],
        "test_accuracy": [0.65, 0.7, 0.72],
        "step_epoch": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
        "step_loss": [2.0, 1.2, 0.9, 0.8, 0.7, 0.6],
    }
    assert save_training_plot(tmp_path / "curves.png", history) == "builtin"
    width, height, rows = read_png(tmp_path / "curves.png")
    pixels = np.frombuffer(rows, dtype=np.uint8).reshape(height, width * 3 + 1)[:, 1:]
    pixels = pixels.reshape(height, width, 3)
    # Both curve colours are drawn, on a white background.
    assert (pixels == 255).all(axis=2).mean() > 0.5
    for colour in ((31, 119, 180), (255, 127, 14)):
        assert (pixels == colour).all(axis=2).sum() > 50
    with pytest.raises(ImportError):
        save_training_plot(tmp_path / "other.png", history, engine="matplotlib")


def test_default_device_is_cpu_unless_a_real_gpu(monkeypatch):
    import kernelgrad.cuda

    monkeypatch.setattr(kernelgrad.cuda, "is_available", lambda: True)
    monkeypatch.setattr(kernelgrad.cuda, "is_simulated", lambda: True)
    monkeypatch.setattr(kernelgrad.cuda, "device_count", lambda: 1)
    assert resolve_device(None).type == "cpu"  # the simulator is far too slow to train on
    assert resolve_device("cuda").type == "cuda"  # ... but can be asked for
    monkeypatch.setattr(kernelgrad.cuda, "is_simulated", lambda: False)
    assert resolve_device(None).type == "cuda"
    monkeypatch.setattr(kernelgrad.cuda, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"


def test_too_many_threads(capsys):
    code, _, err = run_cli(capsys, "train", "--threads", "100000", "--device", "cpu")
    assert code == 2 and "--threads 100000: at most" in err
