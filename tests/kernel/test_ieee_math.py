"""IEEE special values inside ``@kg.kernel``: ``log(0.0)`` is ``-inf``, ``exp(1000.0)``
is ``inf``, ``sqrt(-1.0)`` is NaN and ``1.0 / 0.0`` is ``inf`` on every backend.

Compiled code (the CPU's Numba with ``error_model='numpy'``, a GPU) gives these values;
Numba's CUDA simulator runs kernels as Python, whose ``math`` and operators raise
instead. Under the simulator, ``@kg.kernel`` modules, like the backend's own kernels,
import ``backends/cuda/simmath.py`` as ``math`` and call its IEEE ``/`` and ``**``
(``codegen.for_simulator``). The tests without a device fixture check simmath itself
against every ``math`` function numba-cuda compiles and the C99/CUDA values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends.cuda import codegen, simmath
from tests.helpers import as_numpy

INF, NAN = math.inf, math.nan
# Inputs on both sides of every domain boundary, and overflowing magnitudes.
POINTS = [0.0, -0.0, -1.0, 0.5, 1000.0, -1000.0, INF, -INF, NAN]


@kg.kernel
def special_values(out, x):
    i = kg.index()
    w = float(x[i])  # a Python number in the simulator, as the values of Python code
    out[i, 0] = kg.log(w)
    out[i, 1] = kg.exp(w)
    out[i, 2] = kg.sqrt(w)
    out[i, 3] = kg.log1p(w)
    out[i, 4] = kg.expm1(w)
    out[i, 5] = math.log2(w)
    out[i, 6] = math.log10(w)
    out[i, 7] = math.cosh(w)
    out[i, 8] = math.sinh(w)
    out[i, 9] = math.asin(w)
    out[i, 10] = math.acos(w)
    out[i, 11] = math.atanh(w)
    out[i, 12] = math.acosh(w)
    out[i, 13] = math.gamma(w)
    out[i, 14] = math.lgamma(w)


# NumPy's IEEE functions per column; gamma and lgamma (no NumPy function) by value
_COLUMNS = [np.log, np.exp, np.sqrt, np.log1p, np.expm1, np.log2, np.log10, np.cosh,
            np.sinh, np.arcsin, np.arccos, np.arctanh, np.arccosh]  # fmt: skip
_GAMMA = [INF, -INF, NAN, math.sqrt(math.pi), INF, NAN, INF, NAN, NAN]
_LGAMMA = [INF, INF, INF, math.log(math.sqrt(math.pi)), math.lgamma(1000.0), INF, INF, INF, NAN]


def _expected_special_values() -> np.ndarray:
    x = np.array(POINTS)
    with np.errstate(all="ignore"):
        columns = [f(x) for f in _COLUMNS]
    return np.stack([*columns, _GAMMA, _LGAMMA], axis=1)


def _special_values(device) -> np.ndarray:
    out = kg.zeros(len(POINTS), 15, dtype=kg.float64, device=device)
    special_values(out, kg.tensor(POINTS, dtype=kg.float64, device=device), ndrange=len(POINTS))
    return as_numpy(out)


def test_math_functions_give_ieee_values(device):
    got = _special_values(device)
    assert got[0, 0] == -INF and got[4, 1] == INF and np.isnan(got[2, 2])  # log 0, exp, sqrt
    np.testing.assert_allclose(got, _expected_special_values(), rtol=1e-13, equal_nan=True)
    if device != "cpu":  # the simulated GPU computes what the CPU backend computes
        cpu = _special_values("cpu")
        np.testing.assert_allclose(got, cpu, rtol=1e-13, equal_nan=True)


@kg.kernel
def quotients(out, x, zero, zero_int):
    i = kg.index()
    w = float(x[i])
    out[i, 0] = w / zero
    out[i, 1] = 1.0 / w
    out[i, 2] = w**-1.0
    out[i, 3] = w**0.5
    out[i, 4] = w**2.0
    acc = w
    acc /= zero
    out[i, 5] = acc
    out[i, 6] = x[i] / zero  # an array element divided by a number
    out[i, 7] = i / zero_int  # integers divide as floats: 0 / 0 is NaN


QUOTIENT_POINTS = [1.0, -1.0, 0.0, -0.0, 1e300, NAN]


def _quotients(device) -> np.ndarray:
    n = len(QUOTIENT_POINTS)
    out = kg.zeros(n, 8, dtype=kg.float64, device=device)
    x = kg.tensor(QUOTIENT_POINTS, dtype=kg.float64, device=device)
    quotients(out, x, 0.0, 0, ndrange=n)
    return as_numpy(out)


def test_division_and_powers_give_ieee_values(device):
    x = np.array(QUOTIENT_POINTS)
    with np.errstate(all="ignore"):
        by_zero = x / 0.0
        expected = [by_zero, 1.0 / x, x**-1.0, x**0.5, x**2.0, by_zero, by_zero]
        expected.append(np.arange(len(x)) / 0.0)
    expected = np.stack(expected, axis=1)
    got = _quotients(device)
    assert got[0, 0] == INF and got[1, 0] == -INF and np.isnan(got[2, 0])
    assert got[3, 1] == -INF and np.isnan(got[1, 3]) and got[4, 4] == INF
    np.testing.assert_allclose(got, expected, rtol=1e-15, equal_nan=True)
    if device != "cpu":
        np.testing.assert_allclose(got, _quotients("cpu"), rtol=1e-15, equal_nan=True)


@kg.kernel
def float32_overflow(out, x):
    i = kg.index()
    out[i] = kg.exp(x[i]) - kg.exp(x[i])


def test_float32_kernels_overflow_in_float32(device):
    # exp(100) overflows float32 (not float64): inf - inf is NaN, as compiled code gives
    x = kg.tensor([1.0, 100.0], dtype=kg.float32, device=device)
    out = kg.zeros(2, dtype=kg.float32, device=device)
    float32_overflow(out, x, ndrange=2)
    got = as_numpy(out)
    assert got[0] == 0.0 and np.isnan(got[1])


# --- simmath itself --------------------------------------------------------------------
def _cuda_math_functions() -> list[str]:
    """The ``math`` functions numba-cuda compiles (its typing registry)."""
    from numba.cuda import cudamath

    names = {getattr(f, "__name__", "") for f, _ in cudamath.registry.globals}
    return sorted(name for name in names if getattr(math, name, None) is not None)


_UNARY_POINTS = [0.0, -0.0, -1.0, 1.0, 0.5, 2.0, -2.5, 1e-320, 1000.0, -1000.0, 1e308]
_UNARY_POINTS += [INF, -INF, NAN, 3, -1]  # integers too: numba-cuda takes int64
_BINARY = {
    "atan2": [(0.0, 0.0), (INF, INF), (-1.0, -INF)],
    "copysign": [(1.0, -0.0), (NAN, -1.0)],
    "fmod": [(1.0, 0.0), (INF, 1.0), (5.5, 2.0), (1, 0)],
    "hypot": [(1e308, 1e308), (INF, NAN)],
    "ldexp": [(1.0, 2000), (1.0, -2000), (INF, 1)],
    "nextafter": [(1.0, 2.0), (0.0, -1.0)],
    "pow": [(0.0, -1.0), (-8.0, 1 / 3), (10.0, 400.0), (2, -1), (-INF, 0.5)],
    "remainder": [(1.0, 0.0), (INF, 1.0), (5.0, 3.0)],
}
_NUMPY = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
          "acosh": np.arccosh, "atanh": np.arctanh, "atan2": np.arctan2,
          "pow": np.power}  # fmt: skip


def _arguments(name: str) -> list[tuple]:
    return _BINARY.get(name, [(x,) for x in _UNARY_POINTS])


def test_simmath_has_every_math_function_numba_cuda_compiles():
    names = _cuda_math_functions()
    assert {"exp", "log", "gamma", "remainder", "floor"} <= set(names)
    assert set(_BINARY) <= set(names)  # the table names only real functions
    for name in names:
        fn = getattr(simmath, name)
        for args in _arguments(name):
            try:
                with np.errstate(all="raise"):  # ... and NumPy's warnings stay inside
                    got = fn(*args)
            except Exception as error:
                pytest.fail(f"simmath.{name}{args} raised {type(error).__name__}: {error}")
            reference = _NUMPY.get(name, getattr(np, name, None))
            if reference is None or name in ("frexp", "modf", "remainder"):
                continue
            with np.errstate(all="ignore"):
                want = reference(*(np.float64(a) if name != "ldexp" else a for a in args))
            np.testing.assert_allclose(
                float(got), float(want), rtol=1e-15, equal_nan=True, err_msg=f"{name}{args}"
            )


@pytest.mark.parametrize(
    "call, expected",
    [
        # what C99 and CUDA's libdevice define where Python's math raises
        ((simmath.gamma, 0.0), INF),
        ((simmath.gamma, -0.0), -INF),
        ((simmath.gamma, -1.0), NAN),
        ((simmath.gamma, -INF), NAN),
        ((simmath.gamma, 200.0), INF),
        ((simmath.gamma, -1e-320), -INF),
        ((simmath.lgamma, 0.0), INF),
        ((simmath.lgamma, -2.0), INF),
        ((simmath.lgamma, 1e308), INF),
        ((simmath.remainder, 1.0, 0.0), NAN),
        ((simmath.remainder, INF, 1.0), NAN),
        ((simmath.remainder, 5.0, 3.0), -1.0),
        ((simmath.fmod, 1.0, 0.0), NAN),
        ((simmath.floor, INF), INF),
        ((simmath.ceil, NAN), NAN),
        ((simmath.trunc, -INF), -INF),
        ((simmath.exp2, 2000.0), INF),
        ((simmath.ldexp, 1.0, 2000), INF),
        ((simmath.degrees, 1e308), INF),
        ((simmath.cosh, -1000.0), INF),
        ((simmath.atanh, -1.0), -INF),
        ((simmath.acosh, 0.5), NAN),
        ((simmath.pow, 0.0, -1.0), INF),
        ((simmath.pow, -8.0, 1 / 3), NAN),
        ((simmath.truediv, 1.0, 0.0), INF),
        ((simmath.truediv, -1, 0), -INF),
        ((simmath.truediv, 0.0, 0.0), NAN),
        ((simmath.power, -0.0, -1.0), -INF),
        ((simmath.power, 10.0, 400), INF),
        ((simmath.power, -8.0, 0.5), NAN),  # Python: a complex number
    ],
)
def test_simmath_gives_the_ieee_values(call, expected):
    fn, *args = call
    got = fn(*args)
    np.testing.assert_equal(float(got), expected)
    if not math.isnan(expected):  # (a NaN's sign is the hardware's choice)
        assert np.signbit(got) == np.signbit(expected)


def test_simmath_keeps_compiled_codes_types():
    # floats, not Python's integers; float32 stays float32 (the GPU's float32 functions)
    assert type(simmath.floor(2.5)) is np.float64 and simmath.floor(2.5) == 2.0
    assert type(simmath.ceil(3)) is np.float64  # int64 -> float64, as numba-cuda
    assert type(simmath.exp(np.float32(1.0))) is np.float32
    assert simmath.nextafter(np.float32(1.0), np.float32(2.0)) == np.nextafter(
        np.float32(1.0), np.float32(2.0)
    )
    assert type(simmath.pow(np.float32(2.0), 3)) is np.float32
    assert simmath.pow(2, -1) == 0.5
    assert simmath.power(2, 3) == 8 and type(simmath.power(2, 3)) is int
    with pytest.raises(ZeroDivisionError):  # integer powers stay Python's
        simmath.power(0, -1)


def test_for_simulator_rewrites_math_imports_and_ieee_operators():
    source = (
        '"""A generated module."""\n'
        "import math\n"
        "import math as m, numpy as np\n"
        "def f(a, b):\n"
        "    c = [a / b]\n"
        "    c[0] **= 2.0\n"
        "    c[0] /= b\n"
        "    return math.log(b), m.exp(1000.0), c[0], a // 1\n"
    )
    adapted = codegen.for_simulator(source)
    assert "import math" not in adapted.split("DEVICE_SOURCE")[0]
    namespace: dict = {}
    exec(adapted, namespace)
    assert namespace["DEVICE_SOURCE"] == source  # what a GPU compiles is unchanged
    assert namespace["math"] is simmath and namespace["m"] is simmath
    assert namespace["np"] is np and namespace["__doc__"] == "A generated module."
    assert namespace["f"](2.0, 0.0) == (-INF, INF, INF, 2.0)  # // is Python's
