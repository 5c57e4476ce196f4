"""`kernelgrad info`: versions, devices, caches and datasets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import kernelgrad
from kernelgrad.cli import main
from kernelgrad.codecache import cache_dir
from kernelgrad.data import write_idx
from kernelgrad.info import collect, format_report


def test_collect_reports_versions_devices_and_caches(tmp_path, monkeypatch):
    cache_dir()  # settle this process's kernel cache before the environment changes
    monkeypatch.setenv("KERNELGRAD_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.py").write_text("x = 1\n")
    report = collect()
    assert report["kernelgrad"]["version"] == kernelgrad.__version__
    assert report["versions"]["numpy"] == np.__version__
    assert report["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert report["devices"][0] == "cpu"
    assert report["default_device"] in ("cpu", "cuda")
    assert report["kernel_cache"] == {"path": str(tmp_path / "kernels"), "files": 1, "bytes": 6}
    assert report["dataset_cache"] == str(tmp_path / "xdg" / "kernelgrad" / "datasets")
    names = {entry["name"]: entry for entry in report["datasets"]}
    assert names["digits"]["found"] and names["digits"]["source"] == "the copy inside kernelgrad"
    assert set(names) >= {"fashion-mnist", "mnist", "digits"}
    text = format_report(report)
    assert f"kernelgrad {kernelgrad.__version__}" in text
    assert f"numpy {np.__version__}" in text and "numba " in text and "numba-cuda " in text
    assert f"Kernel cache   {tmp_path / 'kernels'} (1 files" in text


def test_info_finds_a_dataset_in_the_named_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELGRAD_CACHE_DIR", str(cache_dir()))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KERNELGRAD_DATA", raising=False)
    folder = tmp_path / "mnist-files"
    for prefix in ("train", "t10k"):
        write_idx(folder / f"{prefix}-images-idx3-ubyte.gz", np.zeros((2, 28, 28), np.uint8))
        write_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", np.zeros(2, np.uint8))
    assert main(["info", "--json", "--data", str(folder)]) == 0
    report = json.loads(capsys.readouterr().out)
    mnist = next(entry for entry in report["datasets"] if entry["name"] == "mnist")
    assert mnist == {
        "name": "mnist",
        "found": True,
        "path": str(folder),
        "source": "the folder given",
    }


def test_missing_dataset_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KERNELGRAD_CACHE_DIR", str(cache_dir()))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KERNELGRAD_DATA", raising=False)
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "mnist          not found; to get it:" in text
    assert "KERNELGRAD_DATA=FOLDER" in text and "kernelgrad download mnist" in text


def test_python_dash_m_kernelgrad_info_runs(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "kernelgrad", "info"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"kernelgrad {kernelgrad.__version__}")
    assert "Datasets" in result.stdout and "digits" in result.stdout
