"""Compile the CUDA backend's kernels to PTX for compute capability 9.0, without a GPU.

The simulator runs kernels as Python and cannot catch numba-cuda typing errors; this
test compiles the real kernels with NVVM (``python -m kernelgrad.backends.cuda.ptxcheck``)
in a subprocess without the simulator. It needs numba-cuda's compiler libraries
(``pip install "numba-cuda[cu13]"``) and is skipped where they are missing.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernelgrad.backends.cuda.ptxcheck import NO_COMPILER


@pytest.mark.slow
def test_generated_kernels_compile_to_ptx_for_sm90(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    environment["KERNELGRAD_CACHE_DIR"] = str(tmp_path)
    completed = subprocess.run(
        [sys.executable, "-m", "kernelgrad.backends.cuda.ptxcheck", "--cc", "9.0"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if completed.returncode == NO_COMPILER:
        pytest.skip(f"numba-cuda has no compiler here: {completed.stderr.strip()[-300:]}")
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    assert "compiled" in completed.stdout
