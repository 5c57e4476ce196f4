"""The CUDA code of user kernels, elementwise functions and fused kernels compiles to PTX
(skipped where numba-cuda's compiler libraries or the CUDA backend are missing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_generated_cuda_code_compiles_to_ptx(tmp_path):
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, KERNELGRAD_CACHE_DIR=str(tmp_path), PYTHONPATH=path)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    done = subprocess.run(
        [sys.executable, "-m", "kernelgrad.compile.ptxcheck"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if done.returncode == 77:
        pytest.skip(done.stderr.strip() or "no CUDA compiler")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "kernels to PTX" in done.stdout
