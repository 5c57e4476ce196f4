"""The CPU backend: generated kernels, the disk cache across processes, debug output."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

import kernelgrad as kg
from kernelgrad.backends.base import ScalarFunction, View
from kernelgrad.backends.cpu import codegen
from kernelgrad.dtypes import float32, int64
from tests.helpers import assert_close


def test_generated_kernel_source_is_readable_python():
    fn = ScalarFunction("mul_add", "def mul_add(x0, x1, x2):\n    return x0 * x1 + x2\n", 3)
    source = codegen.elementwise_source(
        fn.name, fn.source, 1, ("array", "array", "scalar"), [float32] * 3, [float32]
    )
    compile(source, "<generated>", "exec")
    assert "prange" in source and "def mul_add" in source
    reduce_source = codegen.reduce_source("argmax", float32, float32, int64)
    compile(reduce_source, "<generated>", "exec")


def test_backend_elementwise_with_several_outputs_and_strided_output():
    backend = kg.ones(1)._backend
    fn = ScalarFunction("split", "def split(x0):\n    return x0 * 2, x0 - 1\n", 1, nout=2)
    x = np.arange(6, dtype=np.float32)
    doubled = np.zeros(12, dtype=np.float32)  # written with stride 2
    shifted = np.zeros(6, dtype=np.int64)
    backend.elementwise(
        fn,
        [View(doubled, (6,), (2,), 0, float32), View(shifted, (6,), (1,), 0, int64)],
        [View(x, (6,), (1,), 0, float32)],
        [float32],
    )
    assert_close(doubled[::2], x * 2)
    assert_close(doubled[1::2], np.zeros(6))
    assert_close(shifted, (x - 1).astype(np.int64))


def test_kernels_load_from_the_disk_cache_in_a_new_process(tmp_path):
    """A second process finds the compiled machine code and does not recompile."""
    script = textwrap.dedent(
        """
        import kernelgrad as kg
        from kernelgrad.debug import set_debug_level
        set_debug_level(1)
        x = kg.arange(10.0)
        y = (x * 2 + 1).exp().sum()
        print(round(y.item(), 3))
        """
    )
    env = dict(os.environ, KERNELGRAD_CACHE_DIR=str(tmp_path))
    first = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    second = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert first.stdout == second.stdout
    assert "compiled" in first.stderr
    assert "compiled" not in second.stderr
    generated = list((tmp_path / "kernels").glob("kg_cpu_*.py"))
    assert generated, "generated kernel modules are written to the cache folder"


def test_debug_level_two_prints_one_line_per_launch(capsys):
    from kernelgrad.debug import set_debug_level

    x = kg.ones(4)
    (x + 1).sum()  # compile or load first: those calls log a different line
    set_debug_level(2)
    try:
        (x + 1).sum()
    finally:
        set_debug_level(0)
    lines = [line for line in capsys.readouterr().err.splitlines() if "[kernelgrad] cpu" in line]
    assert len(lines) == 2
    assert "add" in lines[0] and "reduce_sum" in lines[1]


def test_wide_broadcast_and_transposed_inputs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal(257).astype(np.float32)
    assert_close(kg.tensor(a) + kg.tensor(b), a + b)
    assert_close(kg.tensor(a).T * 2, a.T * 2)
    c = rng.standard_normal((3, 40_000)).astype(np.float32)
    assert_close(kg.tensor(c)[:, ::-3] - 1, c[:, ::-3] - 1)
