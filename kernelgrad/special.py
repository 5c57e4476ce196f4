"""``torch.special``: PyTorch's special-function namespace over kernelgrad's operations.

>>> import kernelgrad as kg
>>> f"{kg.special.gammaln(kg.tensor([4.0])).item():.4f}"  # (this module's ``round`` is torch's)
'1.7918'
"""

from __future__ import annotations

import math
from typing import Any

from .dtypes import default_float
from .ops import composite as _composite
from .ops import elementwise as _ew
from .ops import reduce as _reduce
from .ops import special as _special
from .ops import torch_functions as _tf
from .ops import torch_math as _tm
from .ops.creation import tensor
from .tensor import Tensor

digamma = psi = _tm.digamma
polygamma = _tm.polygamma
multigammaln = _tm.mvlgamma
erfc = _tm.erfc
erfinv = _tm.erfinv
i0 = _tm.i0
i1 = _tm.i1
gammainc = _tm.igamma
gammaincc = _tm.igammac
xlogy = _tm.xlogy
logit = _tf.logit
sinc = _tf.sinc
exp2 = _composite.exp2
round = _composite.round  # noqa: A001
log_softmax = _reduce.log_softmax
softmax = _reduce.softmax


def gammaln(x: Any) -> Tensor:
    """The natural logarithm of the absolute value of the gamma function."""
    return _tm.lgamma(x)


def erf(x: Any) -> Tensor:
    return _ew.ERF(x)


def expm1(x: Any) -> Tensor:
    return _ew.EXPM1(x)


def log1p(x: Any) -> Tensor:
    return _ew.LOG1P(x)


def expit(x: Any) -> Tensor:
    """The logistic sigmoid."""
    return _ew.SIGMOID(x)


def _floating(x: Any) -> Tensor:
    x = x if isinstance(x, Tensor) else tensor(x)
    return x if x.dtype.is_floating_point else x.to(default_float())


def erfcx(x: Any) -> Tensor:
    """The scaled complementary error function ``exp(x**2) * erfc(x)`` (finite for large
    ``x``, where the two factors overflow and underflow)."""
    return _special.ERFCX(x)


def i0e(x: Any) -> Tensor:
    """``exp(-|x|) * i0(x)``."""
    return _special.I0E(x)


def i1e(x: Any) -> Tensor:
    """``exp(-|x|) * i1(x)``."""
    return _special.I1E(x)


def ndtr(x: Any) -> Tensor:
    """The standard normal cumulative distribution function."""
    return (_ew.ERF(x * (1 / math.sqrt(2))) + 1) * 0.5


def ndtri(p: Any) -> Tensor:
    """The inverse of ``ndtr`` (accurate in the tails: ``ndtri(1e-8)`` is -5.612)."""
    return _special.NDTRI(p)


def log_ndtr(x: Any) -> Tensor:
    """``log(ndtr(x))``, as PyTorch: ``log(erfcx(-x/sqrt(2)) / 2) - x**2 / 2`` below -1
    (``ndtr`` underflows there), ``log1p(-erfc(x/sqrt(2)) / 2)`` above (no rounding of
    ``ndtr`` near 1)."""
    x = _floating(x)
    below = x < -1
    # each branch sees only its own arguments (others replaced), so neither gives the
    # gradient an inf or a NaN where it is not taken
    low = _ew.where(below, x, -2.0) * (1 / math.sqrt(2))
    high = _ew.where(below, 0.0, x) * (1 / math.sqrt(2))
    tail = _ew.LOG(_special.ERFCX(low * -1) * 0.5) - low * low
    body = _ew.LOG1P(_tm.erfc(high) * -0.5)
    return _ew.where(below, tail, body)


def xlog1py(x: Any, y: Any) -> Tensor:
    """``x * log1p(y)``, 0 where ``x`` is 0."""
    return _ew.where(_ew.EQ(x, 0), 0.0, _ew.MUL(x, _ew.LOG1P(y)))


def entr(x: Any) -> Tensor:
    """``-x * log(x)`` (0 at 0, -inf below 0)."""
    value = _tm.xlogy(x, x) * -1
    return _ew.where(x < 0, -math.inf, value)


def logsumexp(x: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    return x.logsumexp(dim, keepdim)
