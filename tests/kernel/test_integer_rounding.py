"""``math.floor``, ``math.ceil`` and ``math.trunc`` inside ``@kg.kernel`` give an int64 on
every backend, as in Python and on the CPU (Numba).

numba-cuda types them as float (``floor(float32) -> float32``); the CUDA modules call
device functions with the CPU's result instead (``codegen.integer_rounding``), so a
kernel that stores the result, does integer arithmetic with it or indexes with it does
the same on both devices. Infinities, NaN and magnitudes of 2**63 and more give -2**63
on CUDA, what the CPU's conversion gives on x86-64.
"""

from __future__ import annotations

import math
import platform

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends.cuda import codegen
from tests.helpers import as_numpy

INT64_MIN = -(2**63)
# Negative values, .5 cases, -0.0, and integers past float32's 24-bit mantissa and int32.
VALUES = [-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, -3.7, 3.7, 3.0, -7.0, 2.0**33, -(2.0**33)]
SMALL = 8  # rows whose results index `table` (|value| < 4)


@kg.kernel
def rounded(out, x, table):
    i = kg.index()
    v = x[i]
    f = math.floor(v)
    c = math.ceil(v)
    t = math.trunc(v)
    out[i, 0] = f
    out[i, 1] = c
    out[i, 2] = t
    # bitwise operators exist for integers only: a float result neither compiles on a GPU
    # nor runs in the simulator
    out[i, 3] = (f & 1) + (c << 2) - (t ^ 5)
    out[i, 4] = f * 3 + c - t + (f // 2) + (c % 3)
    if i < SMALL:
        out[i, 5] = table[t + 4] + table[f + 4] - table[c + 4]  # as indices


def _expected(values: list[float]) -> np.ndarray:
    rows = []
    for k, v in enumerate(values):
        f, c, t = math.floor(v), math.ceil(v), math.trunc(v)
        looked_up = 10 * (t + 4) + 10 * (f + 4) - 10 * (c + 4) if k < SMALL else 0
        rows.append([f, c, t, (f & 1) + (c << 2) - (t ^ 5), f * 3 + c - t + f // 2 + c % 3,
                     looked_up])  # fmt: skip
    return np.array(rows, dtype=np.int64)


def _run(device: str, dtype, values: list[float]) -> np.ndarray:
    out = kg.zeros(len(values), 6, dtype=kg.int64, device=device)
    table = kg.arange(0, 100, 10, dtype=kg.int64, device=device)
    rounded(out, kg.tensor(values, dtype=dtype, device=device), table, ndrange=len(values))
    return as_numpy(out)


@pytest.mark.parametrize("dtype", [kg.float32, kg.float64], ids=["float32", "float64"])
def test_floor_ceil_trunc_are_int64_on_every_backend(device, dtype):
    got = _run(device, dtype, VALUES)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, _expected(VALUES))
    if device != "cpu":
        np.testing.assert_array_equal(got, _run("cpu", dtype, VALUES))


@kg.kernel
def rounded_only(out, x):
    i = kg.index()
    out[i, 0] = math.floor(x[i])
    out[i, 1] = math.ceil(x[i])
    out[i, 2] = math.trunc(x[i])


SPECIAL = [math.inf, -math.inf, math.nan, 1e30, -1e30]


@pytest.mark.parametrize("dtype", [kg.float32, kg.float64], ids=["float32", "float64"])
def test_infinities_nan_and_overflow_agree(device, dtype):
    """Undefined in Python (it raises); -2**63 from the CPU's x86-64 conversion, and from
    the CUDA helpers by construction."""
    out = kg.zeros(len(SPECIAL), 3, dtype=kg.int64, device=device)
    rounded_only(out, kg.tensor(SPECIAL, dtype=dtype, device=device), ndrange=len(SPECIAL))
    got = as_numpy(out)
    if device != "cpu" or platform.machine().lower() in ("x86_64", "amd64"):
        np.testing.assert_array_equal(got, np.full((len(SPECIAL), 3), INT64_MIN))


@kg.elementwise
def floor_elementwise(x):
    return math.floor(x)


@kg.elementwise
def ceil_twice(x):
    return math.ceil(x) * 2.0


@pytest.mark.parametrize("dtype", [kg.float32, kg.float64], ids=["float32", "float64"])
def test_elementwise_floor_and_ceil_of_floats_stay_floats(device, dtype):
    """An ``@kg.elementwise`` function's float result is a float: floor and ceil of
    infinities, NaN and huge values are themselves (as ``torch.floor`` and ``kg.floor``),
    not the int64 conversion's -2**63 that a kernel's ``math.floor`` gives."""
    values = [1.5, -1.5, -0.0, 2.0**33 + 0.5, 1e30, -1e30, math.inf, -math.inf, math.nan]
    x = kg.tensor(values, dtype=dtype, device=device)
    expected = np.array(values, dtype=np.float64 if dtype is kg.float64 else np.float32)
    np.testing.assert_array_equal(as_numpy(floor_elementwise(x)), np.floor(expected))
    np.testing.assert_array_equal(as_numpy(ceil_twice(x)), np.ceil(expected) * 2)
    assert floor_elementwise(x).dtype is dtype


@kg.kernel
def from_integers(out, n):
    i = kg.index()
    out[i] = math.floor(n[i]) + math.ceil(n[i] + 1) + math.trunc(-n[i])


def test_integer_arguments(device):
    n = kg.tensor([-5, 0, 7, 2**40], dtype=kg.int64, device=device)
    out = kg.zeros(4, dtype=kg.int64, device=device)
    from_integers(out, n, ndrange=4)
    np.testing.assert_array_equal(as_numpy(out), [-5 + -4 + 5, 1, 7 + 8 - 7, 2**40 + 1])


# --- the rewrite ------------------------------------------------------------------------------
def test_the_cuda_form_calls_int64_helpers():
    source = (
        "import math\nimport math as m\nKIND = 'kernel'  # kept\n\n"
        "def f(x, y):\n    return m.floor(x) + math.ceil(y) * np.floor(x) + math.trunc(x * 2)\n"
    )
    text = codegen.integer_rounding(source)
    assert "return _kg_floor(x) + _kg_ceil(y) * np.floor(x) + _kg_trunc(x * 2)\n" in text
    assert "KIND = 'kernel'  # kept" in text
    for name in ("floor", "ceil", "trunc"):
        assert f"def _kg_{name}(x):" in text
    namespace: dict = {}
    exec(compile(codegen.for_simulator(text), "<test>", "exec"), namespace)
    assert namespace["_kg_floor"].py_func(np.float32(-2.5)) == -3
    assert type(namespace["_kg_floor"].py_func(np.float32(-2.5))) is np.int64


def test_modules_without_rounding_are_unchanged():
    source = "import math\n\ndef f(x):\n    return math.exp(x) + np.floor(x)\n"
    assert codegen.integer_rounding(source) is source
    assert "_kg_floor" not in codegen.integer_rounding("def f(x):\n    return x.floor(1)\n")


def test_the_cuda_kernel_source_uses_the_helpers():
    from kernelgrad.backends.cuda import kernel_module

    text = kernel_module.kernel_source(rounded.info, 1, False, narrow=True)
    assert "math.floor" not in text.split("# math.floor/ceil/trunc")[0]
    assert "_kg_floor(v)" in text and "_kg_ceil(v)" in text and "_kg_trunc(v)" in text
    compile(text, "<cuda kernel>", "exec")
