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


class _FakeDispatcher:
    """Stands in for a numba-cuda dispatcher: a launch adds a signature, taken from the
    disk cache or compiled."""

    def __init__(self, from_cache: bool) -> None:
        self.overloads: dict = {}
        self.from_cache = from_cache
        self.stats = type("Stats", (), {"cache_hits": {}})()

    def __getitem__(self, configuration):
        def launch(*args):
            signature = ("float32[::1]",)
            if signature not in self.overloads:
                self.overloads[signature] = object()
                if self.from_cache:
                    self.stats.cache_hits[signature] = 1

        return launch


def test_cuda_launcher_tells_a_cache_load_from_a_compile(monkeypatch, capsys):
    import contextlib

    from kernelgrad import debug
    from kernelgrad.backends.cuda.launch import Launcher

    monkeypatch.setattr(debug, "_level", 1)
    launcher = Launcher("cuda:0", cuda=None, simulated=False, context=contextlib.nullcontext)
    for from_cache in (False, True):
        kernel = _FakeDispatcher(from_cache)
        for _ in range(2):  # the second launch finds the signature: nothing to report
            launcher.launch("scale", kernel, 1, 32, "x: float32[8]", ())
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("[kernelgrad] cuda kernel scale compiled in ")
    assert lines[1].startswith("[kernelgrad] cuda kernel scale loaded from the disk cache in ")
