"""The scalar math operations are named in several tables; this file checks that they
agree, by name and by value at sample points.

* ``ops/elementwise.py``: the primitives' scalar functions (the definition), and the
  ``library`` name of those that equal a standard math function;
* ``kernel/symbolic.py``: what ``@kg.elementwise`` traces (``SYMBOLIC``), the source it
  generates for each node (``_TEMPLATES``) and its result types (``_FLOAT_RESULT``);
* ``kernel/transform.py``'s ``_KG_MATH``: what ``kg.exp(...)`` and friends become inside
  ``@kg.kernel`` bodies (and untraceable ``@kg.elementwise`` functions);
* the CPU backend's ``_NUMPY_UFUNCS``: the NumPy loop that runs a ``library`` op;
* ``backends/cpu/vmath.py``'s ``FUNCTIONS``: the ``math`` calls the CPU's generated
  kernels replace with vectorisable versions;
* ``backends/cuda/simmath.py``: IEEE versions of the ``math`` functions that would
  raise in Python, for kernels run by the CUDA simulator.
"""

from __future__ import annotations

import ast
import math
import re

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends.cpu import _NUMPY_UFUNCS, vmath
from kernelgrad.backends.cuda import simmath
from kernelgrad.kernel import symbolic
from kernelgrad.kernel.transform import _KG_MATH, nan_propagating_helper
from kernelgrad.ops.elementwise import OPS

# The unary operations with a scalar definition that more than one table restates.
UNARY = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh", "erf", "sigmoid",
         "relu", "abs", "neg"]  # fmt: skip
# Sample points: ordinary values, both sides of every guard (0, -1) and large magnitudes.
POINTS = [-800.0, -30.0, -3.7, -1.0, -0.5, -1e-3, -0.0, 0.0, 1e-3, 0.5, 1.0, 2.0, 20.0, 800.0]
# What @kg.elementwise traces but @kg.kernel refuses (with an error naming the functions
# it knows): the kernel rewrite knows only standard math functions and max/min/abs, and
# not floor/ceil, whose math versions give integers where kg.floor keeps the float type.
KERNEL_REFUSES = {"sigmoid", "relu", "where", "pow", "floor", "ceil"}


# The names a float's repr needs (nan, inf) besides the math module.
PYTHON_NAMES = {"math": math, "nan": math.nan, "inf": math.inf}


def _math_calls(source: str) -> set[str]:
    return set(re.findall(r"\bmath\.(\w+)\(", source))


def _definition(name: str):
    """The primitive's own scalar function, run as plain Python."""
    scalar = OPS[name].scalar
    namespace = {"math": math, "np": np}
    exec(scalar.source, namespace)
    return namespace[scalar.name]


def _template(name: str):
    text = symbolic._TEMPLATES[name]
    return lambda *xs: eval(text.format(*(repr(float(x)) for x in xs)), PYTHON_NAMES)


def _python(fn, *xs):
    """``fn(*xs)`` as a float, or None where plain Python raises (math.log(0.0), ...)."""
    try:
        with np.errstate(all="ignore"):  # NumPy's ufuncs give the IEEE values silently
            return float(fn(*xs))
    except (ValueError, OverflowError):
        return None


def test_library_names_and_numpy_ufuncs_agree():
    library = {op.scalar.library for op in OPS.values() if op.scalar.library}
    assert library == set(_NUMPY_UFUNCS)
    for name in library:
        assert OPS[name].scalar.library == name  # each is the op of the same name
        assert name in symbolic._TEMPLATES and name in symbolic._FLOAT_RESULT


# The math functions of primitives that the CPU's generated kernels call from libm, one
# call per element: the trigonometric and hyperbolic functions PyTorch programs use
# rarely in hot loops (vmath has vectorisable versions of the common ones).
LIBM_PER_ELEMENT = {"tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"}
# ... and what the special functions of ops/special.py call (lgamma, erfc, the bit-level
# frexp/ldexp/copysign), rarely in hot loops too
LIBM_PER_ELEMENT |= {"lgamma", "erfc", "frexp", "ldexp", "copysign"}
# ... and the functions PyTorch takes from the C library too, for their exact results
# (log2, log10 at the powers) or their range (hypot, atan2)
LIBM_PER_ELEMENT |= {"log2", "log10", "hypot", "atan2"}
# the second argument given to the math functions of two arguments below
SECOND_ARGUMENT = {"copysign": -1.0, "ldexp": 3, "hypot": -1.0, "atan2": -1.0}


def test_vmath_replaces_every_math_call_of_the_primitives_but_sqrt():
    # sqrt is already one vector instruction; everything else would be a libm call per
    # element (docs/cpu-math.md), except the rarely hot functions listed above
    calls = set().union(*(_math_calls(op.scalar.source) for op in OPS.values()))
    assert calls - {"sqrt"} - LIBM_PER_ELEMENT == set(vmath.FUNCTIONS)
    assert calls >= LIBM_PER_ELEMENT  # the list names only functions primitives call
    templates = set().union(*(_math_calls(text) for text in symbolic._TEMPLATES.values()))
    # @kg.elementwise may call a few more (tan, floor, ceil), compiled as Numba's own
    assert set(vmath.FUNCTIONS) <= templates


def test_kernel_math_and_elementwise_tracing_know_the_same_functions():
    for name, target in _KG_MATH.items():
        assert callable(getattr(kg, name)), f"kg.{name} does not exist"
        assert name in symbolic.SYMBOLIC, f"@kg.elementwise cannot trace kg.{name}"
        assert target in (f"math.{name}", "abs", f"_kg_{name}"), (name, target)
    traced_kg_functions = {name for name in symbolic.SYMBOLIC if callable(getattr(kg, name, None))}
    assert traced_kg_functions - set(_KG_MATH) == KERNEL_REFUSES


@pytest.mark.parametrize("name", UNARY)
def test_unary_tables_agree_at_sample_points(name):
    definition = _definition(name)
    tables = {"symbolic template": _template(name)}
    if name in symbolic.SYMBOLIC:
        tables["symbolic numbers"] = symbolic.SYMBOLIC[name]
    if name in _KG_MATH:
        tables["kernel rewrite"] = _kernel_rewrite(name)
    if name in _NUMPY_UFUNCS:
        tables["numpy ufunc"] = _NUMPY_UFUNCS[name]
    for x in POINTS:
        expected = _python(definition, x)
        if expected is None:  # plain Python overflows; the kernels' values are below
            continue
        for table, fn in tables.items():
            got = _python(fn, x)
            if got is None and table in ("symbolic numbers", "kernel rewrite"):
                continue  # math.log(0.0) raises where the guarded definition gives -inf
            assert got is not None, f"{table} raised for {name}({x})"
            np.testing.assert_allclose(
                got, expected, rtol=4e-16, atol=0, equal_nan=True, err_msg=f"{table} {name}({x})"
            )


@pytest.mark.parametrize("name", UNARY)
def test_the_tensor_op_agrees_with_its_definition(name):
    points = POINTS + [700.0, -700.0, math.inf, -math.inf, math.nan]
    definition = _definition(name)
    expected = []
    with np.errstate(all="ignore"):
        for x in points:
            value = _python(definition, x)
            if value is None:  # overflow in plain Python: the IEEE value NumPy gives
                value = float(_NUMPY_UFUNCS[name](np.float64(x)))
            expected.append(value)
    got = getattr(kg.tensor(points, dtype=kg.float64), name)().numpy()
    # the CPU computes library ops with NumPy and others with vmath (within 2 ulp)
    np.testing.assert_allclose(got, expected, rtol=5e-16, atol=0, equal_nan=True, err_msg=name)


@pytest.mark.parametrize(
    "name",
    sorted(_math_calls("".join(op.scalar.source for op in OPS.values()))),
)
def test_math_calls_are_ieee_under_the_cuda_simulator(name):
    """Every math function a primitive calls returns the IEEE value for special inputs
    when the simulator runs it as Python (simmath's version where plain math raises)."""
    fn = getattr(simmath, name)
    with np.errstate(all="ignore"):
        for x in (math.inf, -math.inf, math.nan, 1e300, -1e300, 0.0, -1.0):
            args = (x,) if name not in SECOND_ARGUMENT else (x, SECOND_ARGUMENT[name])
            try:
                got = fn(*args)
            except (ValueError, OverflowError) as error:
                pytest.fail(f"simmath.{name}({x}) raised {type(error).__name__}")
            want = getattr(np, name)(np.float64(x), *args[1:]) if hasattr(np, name) else None
            if isinstance(got, tuple):  # frexp: compare the mantissas
                got, want = got[0], None if want is None else want[0]
            got, want = float(got), None if want is None else float(want)
            if want is not None:
                np.testing.assert_allclose(got, want, rtol=1e-15, equal_nan=True)


def _kernel_rewrite(name: str):
    """What ``kg.<name>(x, y)`` becomes inside ``@kg.kernel``, run as plain Python (with
    the helper functions the rewrite adds to the kernel's module)."""
    namespace = dict(PYTHON_NAMES)
    target = _KG_MATH[name]
    if target.startswith("_kg_"):
        tree = nan_propagating_helper(name)
        tree.name = target
        exec(ast.unparse(tree), namespace)
    return lambda *xs: eval(f"{target}({', '.join(map(repr, xs))})", namespace)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
@pytest.mark.parametrize("table", ["symbolic template", "kernel rewrite"])
def test_maximum_and_minimum_tables_agree_with_nan(name, table):
    definition = _definition(name)
    if table == "symbolic template":
        fn = _template(name[:3])
    else:
        fn = _kernel_rewrite(name)
    for x, y in [(1.0, 2.0), (2.0, 1.0), (math.nan, 1.0), (1.0, math.nan), (-0.0, 0.0)]:
        np.testing.assert_equal(fn(x, y), definition(x, y), err_msg=f"{table} {name}({x}, {y})")
