"""``KG_DEBUG`` messages: a kernel compiled in this process is told apart from one
loaded from the disk cache."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import kernelgrad as kg

    @kg.kernel
    def double_(x):
        i = kg.index()
        x[i] = x[i] * 2.0

    x = kg.ones(8)
    double_(x, ndrange=8)
    print(x.sum().item())
    """
)


def test_debug_level_one_says_whether_a_kernel_was_compiled_or_loaded(tmp_path):
    env = dict(os.environ, KERNELGRAD_CACHE_DIR=str(tmp_path), KG_DEBUG="1", PYTHONPATH=str(ROOT))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    script = tmp_path / "double.py"  # a kernel's source must be in a file
    script.write_text(SCRIPT)
    runs = [
        subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
        )
        for _ in range(2)
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "16.0"
    first, second = (run.stderr.splitlines() for run in runs)
    assert next(line for line in first if "double_" in line).startswith(
        "[kernelgrad] kernel double_ (cpu) compiled in "
    )
    assert next(line for line in second if "double_" in line).startswith(
        "[kernelgrad] kernel double_ (cpu) loaded from the disk cache in "
    )
    assert not [line for line in second if "compiled" in line], second
