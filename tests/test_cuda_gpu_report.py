"""benchmarks/gpu_report.py, the one command for a machine with a GPU: its plumbing (a
section that breaks is FAILED and the exit status says so; timeouts; diagnoses of known
toolchain failures) on any machine, and a whole dry run under the simulator."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location(
        "gpu_report", ROOT / "benchmarks" / "gpu_report.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_report"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_broken_section_is_failed_in_the_report_and_the_exit_status(
    report, tmp_path, monkeypatch
):
    def fine(ctx):
        return ["* all good"]

    def check_fails(ctx):
        raise report.SectionError("the pool grew", "step 10: 1 MB\nstep 1000: 9 MB")

    def crashes(ctx):
        raise ZeroDivisionError("oops")

    sections = [("Fine", fine), ("Check", check_fails), ("Crash", crashes)]
    sections.append(("NCCL distributed training", report.section_nccl))
    monkeypatch.setattr(report, "SECTIONS", sections)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)  # (a real run refuses it)
    out = tmp_path / "report.md"
    assert report.main(["--out", str(out)]) == 1
    text = out.read_text()
    assert "| Fine | ok |" in text
    assert "### Check (FAILED)" in text and "**the pool grew**" in text
    assert "step 1000: 9 MB" in text  # the log is in the report
    assert "### Crash (FAILED)" in text and "ZeroDivisionError: oops" in text
    assert "Traceback" in text
    assert "### NCCL distributed training (not yet implemented (hook))" in text
    monkeypatch.setattr(report, "SECTIONS", [sections[0], sections[3]])
    assert report.main(["--out", str(out)]) == 0  # the hook alone is not a failure


def test_a_command_that_runs_too_long_fails_with_its_output(report, tmp_path):
    ctx = report.Context(dry_run=False, deadline=time.monotonic() + 60, workdir=tmp_path)
    script = "import time; print('started', flush=True); time.sleep(30)"
    with pytest.raises(report.SectionError, match="timed out after 1 s") as raised:
        report.run_command([sys.executable, "-c", script], ctx, timeout=1)
    assert "started" in raised.value.log
    with pytest.raises(report.SectionError, match="exit status 3"):
        report.run_command([sys.executable, "-c", "raise SystemExit(3)"], ctx, timeout=30)


def test_the_toolchain_diagnoses_name_the_cause_and_the_fix(report):
    failure = "numba.cuda.cudadrv.driver.CudaAPIError: [222] CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
    explanation = report.diagnose_failure(failure, (13, 0))
    assert "newer than the driver" in explanation and "==13.0.*" in explanation
    assert "cuda-toolkit[" in report.diagnose_failure("libcublasLt.so.13: not found", (13, 0))
    assert report.diagnose_failure("something else", (13, 0)) is None
    assert "runs on this driver" in report.ptx_verdict((9, 0), (13, 0), "driver (cuLink)")
    assert "never compiles PTX" in report.ptx_verdict((9, 5), (13, 0), "nvJitLink")
    assert "will fail" in report.ptx_verdict((9, 5), (13, 0), "driver (cuLink)")
    assert report.pytest_summary("...\n== 3 passed, 1 skipped in 2.0s ==\n") == (
        "3 passed, 1 skipped in 2.0s"
    )


def test_the_dry_run_runs_every_section_under_the_simulator(tmp_path):
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        pytest.skip("runs in the simulated pass (.ci/run-cuda-sim)")
    out = tmp_path / "report.md"
    completed = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_report.py"),
            "--dry-run",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    text = out.read_text()
    assert "DRY RUN" in text
    for title in (
        "Environment", "First kernel", "GPU tests", "GEMM", "Memory-bound ops", "Fusion",
        "Per-op time", "Training", "First training step", "Memory over training steps",
        "Backend-parametrised suite",
    ):  # fmt: skip
        assert f"### {title}" in text and f"### {title}" + " (FAILED)" not in text
    assert "| NCCL distributed training | not yet implemented (hook) |" in text
