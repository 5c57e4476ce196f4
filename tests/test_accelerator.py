"""The device-selection idioms of PyTorch programs: kg.accelerator and
kg.cuda.is_available() on a machine without a GPU (fast, no flags) and under the
CUDA simulator."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import kernelgrad as kg
from tests.helpers import ROOT

IDIOMS = """
import sys
import kernelgrad as torch
first = "cuda" if torch.cuda.is_available() else "cpu"
second = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
driver_imported = "numba.cuda" in sys.modules
x = torch.ones(2, device=second) * 2
print(first, second, x.device.type, torch.accelerator.device_count(), driver_imported)
"""


def run_idioms(simulate: bool) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulate:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", IDIOMS], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_without_a_gpu_the_idioms_pick_the_cpu_without_importing_numba_cuda():
    from kernelgrad.cuda import _driver_library_loads

    if _driver_library_loads():
        pytest.skip("this machine has a CUDA driver library")
    assert run_idioms(simulate=False) == ["cpu", "cpu", "cpu", "0", "False"]


def test_under_the_simulator_the_idioms_pick_cuda():
    assert run_idioms(simulate=True) == ["cuda", "cuda", "cuda", "1", "True"]


def test_accelerator_functions_in_this_process():
    if kg.cuda.is_available():
        assert kg.accelerator.current_accelerator() == kg.device("cuda:0")
        assert kg.accelerator.device_count() >= 1
    else:
        assert kg.accelerator.current_accelerator() is None
        assert kg.accelerator.current_accelerator(check_available=True) is None
        assert kg.accelerator.device_count() == 0
        kg.accelerator.synchronize()  # nothing to wait for
    assert kg.accelerator.current_device_index() == 0
