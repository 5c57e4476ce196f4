"""``math`` for scalar functions running in numba's CUDA simulator.

Compiled CUDA code follows IEEE semantics: ``math.exp(1000.0)`` is ``inf`` and
``math.log(-1.0)`` is ``nan``. The simulator runs kernels as Python, where the same calls
raise ``OverflowError`` or ``ValueError``. Generated kernel modules for the simulator
import this module as ``math``: the functions below compute with NumPy (IEEE results,
no exceptions); everything else is the real ``math`` module's.
"""

from __future__ import annotations

import math as _math
from typing import Any

import numpy as _np


def _ieee(ufunc: Any) -> Any:
    def function(*args: Any) -> Any:
        with _np.errstate(all="ignore"):
            return ufunc(*args)

    function.__name__ = ufunc.__name__
    return function


exp = _ieee(_np.exp)
expm1 = _ieee(_np.expm1)
log = _ieee(_np.log)
log1p = _ieee(_np.log1p)
log2 = _ieee(_np.log2)
log10 = _ieee(_np.log10)
sqrt = _ieee(_np.sqrt)
pow = _ieee(_np.power)  # noqa: A001
sin = _ieee(_np.sin)
cos = _ieee(_np.cos)
tan = _ieee(_np.tan)
sinh = _ieee(_np.sinh)
cosh = _ieee(_np.cosh)
asin = _ieee(_np.arcsin)
acos = _ieee(_np.arccos)
acosh = _ieee(_np.arccosh)
atanh = _ieee(_np.arctanh)
fmod = _ieee(_np.fmod)
copysign = _ieee(_np.copysign)
erfc = _math.erfc  # never raises


def lgamma(x: Any) -> Any:
    """``inf`` at the poles (Python's raises ValueError), NaN for NaN."""
    try:
        return _math.lgamma(x)
    except (ValueError, OverflowError):
        return _math.inf


def __getattr__(name: str) -> Any:
    return getattr(_math, name)
