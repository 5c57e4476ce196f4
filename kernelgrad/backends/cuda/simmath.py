"""``math`` for code running in numba's CUDA simulator.

Compiled CUDA code follows IEEE semantics: ``math.exp(1000.0)`` is ``inf``,
``math.log(0.0)`` is ``-inf`` and ``math.sqrt(-1.0)`` is ``nan``. The simulator runs
kernels as Python, where the same calls raise ``OverflowError`` or ``ValueError``.
Modules generated for the simulator (the backend's kernels and ``@kg.kernel`` modules,
see ``codegen.for_simulator``) import this module in place of ``math``.

Every function numba-cuda's ``math`` support types (``numba.cuda.cudamath``) that Python's
``math`` can raise for, or that returns another type than compiled code, is defined here
with the GPU's result; the others (``erf``, ``tanh``, ``isnan``, ...) are the real
``math`` module's. Like compiled code, the NumPy versions keep float32 arguments in
float32, and integer arguments compute in float64 (numba-cuda's ``int64 -> float64``
signatures): ``floor(2.5)`` is ``2.0``, not Python's ``2``.

:func:`truediv` and :func:`power` are the IEEE ``/`` and ``**`` of Python numbers, where
Python raises ``ZeroDivisionError`` (``1.0 / 0.0``) or ``OverflowError`` (``10.0 ** 400``)
or gives a complex number (``(-8.0) ** 0.5``); ``for_simulator`` rewrites the operators
into calls of them. NumPy scalars (what kernels read from arrays) already divide as IEEE.
"""

from __future__ import annotations

import math as _math
from typing import Any

import numpy as _np

_INTEGERS = (int, _np.integer, _np.bool_)  # bool is an int


def _float(x: Any) -> Any:
    """An integer argument as float64 (numba-cuda converts ``int64`` to ``float64``)."""
    return _np.float64(x) if isinstance(x, _INTEGERS) else x


def _ieee(ufunc: Any, name: str | None = None) -> Any:
    def function(*args: Any) -> Any:
        with _np.errstate(all="ignore"):
            return ufunc(*map(_float, args))

    function.__name__ = name or ufunc.__name__
    return function


exp = _ieee(_np.exp)
exp2 = _ieee(_np.exp2)
expm1 = _ieee(_np.expm1)
log = _ieee(_np.log)
log1p = _ieee(_np.log1p)
log2 = _ieee(_np.log2)
log10 = _ieee(_np.log10)
sqrt = _ieee(_np.sqrt)
sin = _ieee(_np.sin)
cos = _ieee(_np.cos)
tan = _ieee(_np.tan)
sinh = _ieee(_np.sinh)
cosh = _ieee(_np.cosh)
asin = _ieee(_np.arcsin, "asin")
acos = _ieee(_np.arccos, "acos")
acosh = _ieee(_np.arccosh, "acosh")
atanh = _ieee(_np.arctanh, "atanh")
degrees = _ieee(_np.degrees)
radians = _ieee(_np.radians)
hypot = _ieee(_np.hypot)
fmod = _ieee(_np.fmod)
copysign = _ieee(_np.copysign)
nextafter = _ieee(_np.nextafter)  # of float32 arguments: the next float32
# float results, as compiled code gives (Python's are integers, and raise for inf, NaN)
floor = _ieee(_np.floor)
ceil = _ieee(_np.ceil)
trunc = _ieee(_np.trunc)
fabs = _ieee(_np.fabs)
erfc = _math.erfc  # never raises


def pow(x: Any, y: Any) -> Any:  # noqa: A001
    """``math.pow``: IEEE, float32 for a float32 base (the exponent is not converted:
    numba-cuda's ``pow(float32, int32)`` is float32)."""
    with _np.errstate(all="ignore"):
        return _np.power(_float(x), y)


def ldexp(x: Any, i: Any) -> Any:
    """``x * 2**i``: ``inf`` where Python's raises OverflowError."""
    with _np.errstate(all="ignore"):
        return _np.ldexp(_float(x), i)


def gamma(x: Any) -> Any:
    """``±inf`` at ±0 and where the result overflows, NaN at the negative integers and
    -inf (Python's raises ValueError or OverflowError)."""
    try:
        return _math.gamma(x)
    except OverflowError:  # large x, or x within 1e-308 of 0
        return _math.copysign(_math.inf, x)
    except ValueError:  # poles and -inf
        return _math.copysign(_math.inf, x) if x == 0 else _math.nan


def lgamma(x: Any) -> Any:
    """``inf`` at the poles and where the result overflows (Python's raises)."""
    try:
        return _math.lgamma(x)
    except (ValueError, OverflowError):
        return _math.inf


def remainder(x: Any, y: Any) -> Any:
    """IEEE remainder: NaN for ``y == 0`` or infinite ``x`` (Python's raises)."""
    try:
        return _math.remainder(x, y)
    except ValueError:
        return _math.nan


# --- operators ---------------------------------------------------------------------------
def truediv(a: Any, b: Any) -> Any:
    """``a / b``; by zero ``±inf`` or NaN where Python numbers raise ZeroDivisionError
    (integers divide as float64, as numba's ``int / int``)."""
    try:
        return a / b
    except ZeroDivisionError:
        with _np.errstate(all="ignore"):
            return _np.divide(_float(a), _float(b))


def power(a: Any, b: Any) -> Any:
    """``a ** b``; ``±inf`` for ``0.0 ** -1`` and on overflow, NaN for a negative base
    with a fractional exponent (Python gives a complex number). Integer powers are
    Python's (``0 ** -1`` still raises)."""
    try:
        result = a**b
    except (ZeroDivisionError, OverflowError):
        if isinstance(a, _INTEGERS) and isinstance(b, _INTEGERS):
            raise
        with _np.errstate(all="ignore"):
            return _np.power(_float(a), _float(b))
    if type(result) is complex and not isinstance(a, complex) and not isinstance(b, complex):
        return _math.nan
    return result


def __getattr__(name: str) -> Any:
    return getattr(_math, name)
