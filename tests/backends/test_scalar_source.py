"""backends/scalar_source.narrow_literals: what a float32 kernel's scalar source computes in.

The compile check (tests/backends/test_compile_check.py, .ci/run-cuda-compile) finds
float64 arithmetic in compiled float32 kernels; these tests pin the source transform."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from kernelgrad.backends.scalar_source import narrow_literals
from kernelgrad.dtypes import float32, float64, int64

SOURCE = """\
def f(x):
    if not abs(x) < 4503599627370496.0:
        return x * math.inf
    t = float(int(x))
    return t + 0.5 * math.pi
"""


def _compiled(source: str):
    namespace = {"math": math, "np": np}
    exec(source, namespace)
    return njit(namespace["f"])


def test_float32_kernels_narrow_literals_math_constants_and_float_calls():
    narrowed = narrow_literals(SOURCE, [float32])
    assert "np.float32(math.inf)" in narrowed and "np.float32(math.pi)" in narrowed
    assert "np.float32(int(x))" in narrowed and "float(" not in narrowed.replace("float32(", "")
    f = _compiled(narrowed)
    x = np.float32(2.75)
    result = f(x)
    assert str(f.nopython_signatures[0].return_type) == "float32"
    assert result == np.float32(2.0) + np.float32(0.5) * np.float32(math.pi)
    assert result != 2.0 + 0.5 * math.pi  # the float64 value
    assert f(np.float32(1e30)) == np.float32(np.inf)


def test_float64_and_integer_kernels_are_left_alone():
    assert narrow_literals(SOURCE, [float64]) == SOURCE
    assert narrow_literals(SOURCE, [int64]) == SOURCE
    assert narrow_literals(SOURCE, [float32, float64]) == SOURCE
