"""Elementwise primitives for PyTorch's special functions and integer bit operations.

Each is one scalar function (compiled by every backend, as in ``ops/elementwise.py``)
with a dtype rule and a VJP in Tensor ops:

* ``lgamma``, ``digamma``, ``polygamma`` (n >= 1, through the Hurwitz zeta function),
  ``erfc``, ``erfinv``, ``i0`` and ``i1`` (modified Bessel functions, i1 for i0's
  gradient), ``igamma`` (the regularised incomplete gamma functions, lower or upper by a
  flag; no gradient with respect to ``a``, as in PyTorch), ``frexp``'s mantissa and
  exponent and ``nextafter``: float results, integers promoted to the default float;
* ``bitwise_and`` / ``or`` / ``xor`` / ``not``, ``bitwise_left_shift`` /
  ``right_shift`` and ``gcd``: integer (and, except the shifts and gcd, bool) tensors only.

The scalar functions use series, recurrences and continued fractions with iteration
bounds, written once for float32 and float64 (literals are narrowed to float32 in float32
kernels, so the loops' thresholds are ones both precisions reach).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..dtypes import DType, result_type
from ..errors import DTypeError, UnsupportedError
from ..tensor import Tensor
from .elementwise import _grad_if, _zero_gradient, defop, to_float, where


# --- dtype rules --------------------------------------------------------------------------------
def _integral(name: str, allow_bool: bool) -> Any:
    def rule(operands: Sequence[Any]) -> tuple[list[DType], DType]:
        dtype = result_type(*operands)
        if dtype.is_floating_point or (dtype.is_bool and not allow_bool):
            kinds = "integer or bool" if allow_bool else "integer"
            raise DTypeError(
                f"{name} is only defined for {kinds} tensors (PyTorch refuses {dtype} too); "
                "convert first, e.g. `x.long()`"
            )
        return [dtype] * len(operands), dtype

    return rule


def _shift_rule(operands: Sequence[Any]) -> tuple[list[DType], DType]:
    compute, dtype = _integral("a bit shift", False)(operands[:2])
    return [*compute, dtype], dtype


def _float_with_int(operands: Sequence[Any]) -> tuple[list[DType], DType]:
    """(float, float, int, float): nextafter's operands (x, y, mantissa bits, tiny)."""
    from ..dtypes import int64

    dtype = result_type(operands[0], operands[1])
    if not dtype.is_floating_point:
        raise DTypeError(
            f"nextafter is only defined for floating point tensors (got {dtype}); convert "
            "first, e.g. `x.float()`"
        )
    return [dtype, dtype, int64, dtype], dtype


def _exponent_rule(operands: Sequence[Any]) -> tuple[list[DType], DType]:
    from ..dtypes import int32

    compute, _ = _float_only("frexp")(operands)
    return compute, int32


def _float_only(name: str) -> Any:
    def rule(operands: Sequence[Any]) -> tuple[list[DType], DType]:
        dtype = result_type(*operands)
        if not dtype.is_floating_point:
            raise DTypeError(
                f"{name} is only defined for floating point tensors (got {dtype}); convert "
                "first, e.g. `x.float()`"
            )
        return [dtype] * len(operands), dtype

    return rule


# --- scalar functions ---------------------------------------------------------------------------
def lgamma(x):
    if x <= 0 and x % 1.0 == 0.0:
        return math.inf
    return math.lgamma(x)


def digamma(x):
    if x != x or x == -math.inf:
        return math.nan
    if x == math.inf:
        return math.inf
    if x == 0:
        return -math.inf if math.copysign(1.0, x) > 0 else math.inf
    result = 0.0
    if x < 0:
        if x % 1.0 == 0.0:
            return math.nan
        # reflection: psi(x) = psi(1 - x) - pi / tan(pi x)
        result = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < 10.0:
        result = result - 1.0 / x
        x = x + 1.0
    f = 1.0 / (x * x)
    series = f * (
        -1.0 / 12 + f * (1.0 / 120 + f * (-1.0 / 252 + f * (1.0 / 240 + f * (-1.0 / 132))))
    )
    return result + math.log(x) - 0.5 / x + series


def polygamma(n, x):
    # psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1 (Hurwitz zeta by Euler-Maclaurin)
    if x != x or x == -math.inf:
        return math.nan
    if x <= 0 and x % 1.0 == 0.0:
        return math.inf if n % 2 == 1 else math.nan
    if x < -1e6:
        return math.nan  # beyond the recurrence's reach (PyTorch's series would not end)
    s = n + 1.0
    total = 0.0
    while x < 12.0:
        total = total + (1.0 / x) ** s
        x = x + 1.0
    # the tail: x^(1-s)/(s-1) + x^-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2) x^(-s-2j+1)
    total = total + x ** (1.0 - s) / (s - 1.0) + 0.5 * (1.0 / x) ** s
    factor = s / x ** (s + 1.0)
    inv2 = 1.0 / (x * x)
    total = total + factor / 12.0
    factor = factor * (s + 1.0) * (s + 2.0) * inv2
    total = total - factor / 30.0 / 24.0
    factor = factor * (s + 3.0) * (s + 4.0) * inv2
    total = total + factor / 42.0 / 720.0
    factor = factor * (s + 5.0) * (s + 6.0) * inv2
    total = total - factor / 30.0 / 40320.0
    factor = factor * (s + 7.0) * (s + 8.0) * inv2
    total = total + factor * 5.0 / 66.0 / 3628800.0
    factorial = 1.0
    k = 2.0
    while k <= n:
        factorial = factorial * k
        k = k + 1.0
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * factorial * total


def erfc(x):
    return math.erfc(x)


def erfinv(x):
    if x != x or x < -1.0 or x > 1.0:
        return math.nan
    if x == 1.0:
        return math.inf
    if x == -1.0:
        return -math.inf
    # M. Giles' single-precision approximation, then Newton steps that are kept only
    # where they reduce the residual (they refine float64; float32 is already as close)
    w = -math.log((1.0 - x) * (1.0 + x))
    if w < 5.0:
        w = w - 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
    y = p * x
    step = 0
    while step < 2:
        residual = math.erf(y) - x
        z = y - residual / (1.1283791670955126 * math.exp(-y * y))
        if abs(math.erf(z) - x) < abs(residual):
            y = z
        step = step + 1
    return y


def i0(x):
    q = 0.25 * x * x
    term = 1.0
    total = 1.0
    k = 1.0
    while term > total * 1e-17 and k < 2000.0:
        term = term * q / (k * k)
        total = total + term
        k = k + 1.0
    return total


def i1(x):
    q = 0.25 * x * x
    term = 0.5 * x
    total = term
    k = 1.0
    while abs(term) > abs(total) * 1e-17 and k < 2000.0:
        term = term * q / (k * (k + 1.0))
        total = total + term
        k = k + 1.0
    return total


def erfcx(x):
    # exp(x*x) * erfc(x) where neither factor overflows nor underflows and x*x's rounding
    # error costs at most a few ulp; from 2 on the continued fraction
    # erfc(x) = exp(-x*x) / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))),
    # evaluated backward (60 terms reach float64 rounding at x = 2)
    if x != x:
        return x
    if x < 2.0:
        return math.exp(x * x) * math.erfc(x)
    if x > 1e8:
        return 0.5641895835477563 / x
    t = x
    k = 60.0
    while k > 0.0:
        t = x + 0.5 * k / t
        k = k - 1.0
    return 0.5641895835477563 / t


def i0e(x):
    # exp(-|x|) i0(x): the power series up to |x| = 25, then the asymptotic expansion
    # exp(-x) I0(x) ~ (1 + 1/(8x) + 9/(2! (8x)^2) + ...) / sqrt(2 pi x), whose smallest
    # term at 25 is below float64 rounding; 0 at +-inf
    a = abs(x)
    if a != a:
        return x
    if a <= 25.0:
        q = 0.25 * a * a
        term = 1.0
        total = 1.0
        k = 1.0
        while term > total * 1e-17 and k < 2000.0:
            term = term * q / (k * k)
            total = total + term
            k = k + 1.0
        return total * math.exp(-a)
    term = 1.0
    total = 1.0
    k = 1.0
    while abs(term) > total * 1e-17 and k < 60.0:
        term = term * (2.0 * k - 1.0) * (2.0 * k - 1.0) / (8.0 * k * a)
        total = total + term
        k = k + 1.0
    return total / (math.sqrt(a) * 2.5066282746310002)


def i1e(x):
    # exp(-|x|) i1(x), as i0e: exp(-x) I1(x) ~ (1 - 3/(8x) - 15/(2! (8x)^2) ...) / sqrt(2 pi x)
    a = abs(x)
    if a != a or a == 0.0:
        return a  # NaN, or +0 at -0 (as PyTorch)
    if a <= 25.0:
        q = 0.25 * x * x
        term = 0.5 * x
        total = term
        k = 1.0
        while abs(term) > abs(total) * 1e-17 and k < 2000.0:
            term = term * q / (k * (k + 1.0))
            total = total + term
            k = k + 1.0
        return total * math.exp(-a)
    term = 1.0
    total = 1.0
    k = 1.0
    while abs(term) > total * 1e-17 and k < 60.0:
        term = term * ((2.0 * k - 1.0) * (2.0 * k - 1.0) - 4.0) / (8.0 * k * a)
        total = total + term
        k = k + 1.0
    return math.copysign(total / (math.sqrt(a) * 2.5066282746310002), x)


def ndtri(p):
    # Abramowitz & Stegun 26.2.23 (error < 4.5e-4), then Halley steps on ndtr(z) = p,
    # which square the correct digits twice over. The residual is taken where it has no
    # cancellation: erf(z / sqrt(2)) / 2 - (p - 1/2) in the middle (p - 1/2 is exact
    # there), erfc(|z| / sqrt(2)) / 2 - q in the tails, q = min(p, 1 - p) (2p - 1, as in
    # erfinv(2p - 1), would round small p away)
    if p != p or p < 0.0 or p > 1.0:
        return math.nan
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    q = p if p < 0.5 else 1.0 - p
    t = math.sqrt(-2.0 * math.log(q))
    numerator = 2.515517 + t * (0.802853 + t * 0.010328)
    denominator = 1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))
    z = t - numerator / denominator  # the quantile of 1 - q: z >= 0 (nearly)
    middle = p >= 0.25 and p <= 0.75
    if middle and p < 0.5:
        z = -z
    step = 0
    while step < 3:
        if middle:  # solve ndtr(z) = p: the residual ndtr(z) - p
            residual = 0.5 * math.erf(z * 0.7071067811865476) - (p - 0.5)
            sign = -1.0
        else:  # solve ndtr(-z) = q: the residual ndtr(-z) - q
            residual = 0.5 * math.erfc(z * 0.7071067811865476) - q
            sign = 1.0
        half = math.exp(0.25 * z * z)  # exp(z*z/2) in two factors: no early overflow
        u = sign * residual * 2.5066282746310002 * half * half
        z = z + u / (1.0 - 0.5 * z * u)
        step = step + 1
    if middle:
        return z
    return -z if p < 0.5 else z


def igamma(a, x, upper):
    # the regularised incomplete gamma function P(a, x), or Q(a, x) = 1 - P when upper
    if a != a or x != x or a < 0 or x < 0:
        return math.nan
    if a == 0:
        if x > 0:
            return 0.0 if upper else 1.0
        return math.nan
    if x == 0:
        return 1.0 if upper else 0.0
    if x == math.inf:
        return 0.0 if upper else 1.0
    if a == math.inf:
        return 1.0 if upper else 0.0
    log_prefactor = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        # the series of P
        ap = a
        term = 1.0 / a
        total = term
        n = 0
        while n < 2000 and abs(term) > abs(total) * 1e-17:
            ap = ap + 1.0
            term = term * x / ap
            total = total + term
            n = n + 1
        p = total * math.exp(log_prefactor)
        return 1.0 - p if upper else p
    # the continued fraction of Q (modified Lentz)
    b = x + 1.0 - a
    c = 1e30
    d = 1.0 / b
    h = d
    i = 1.0
    while i < 2000.0:
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        if abs(d) < 1e-30:
            d = 1e-30
        c = b + an / c
        if abs(c) < 1e-30:
            c = 1e-30
        d = 1.0 / d
        delta = d * c
        h = h * delta
        i = i + 1.0
        if abs(delta - 1.0) < 1e-15:
            break
    q = math.exp(log_prefactor) * h
    return q if upper else 1.0 - q


def frexp_mantissa(x):
    if x != x or x == math.inf or x == -math.inf:
        return x
    m, _e = math.frexp(x)
    return m


def frexp_exponent(x):
    if x != x or x == math.inf or x == -math.inf:
        return 0
    _m, e = math.frexp(x)
    return e


def nextafter(x, y, bits, tiny):
    if x != x or y != y:
        return x + y
    if x == y:
        return y
    if x == 0:
        return tiny if y > 0 else -tiny
    m, e = math.frexp(x)
    step = math.ldexp(1.0, int(e - bits))
    if abs(m) == 0.5 and (y > x) != (x > 0):
        step = step * 0.5  # below a power of two the spacing halves
    if step < tiny:
        step = tiny
    return x + step if y > x else x - step


def bitwise_and(x, y):
    return x & y


def bitwise_or(x, y):
    return x | y


def bitwise_xor(x, y):
    return x ^ y


def bitwise_not(x):
    return ~x


def bitwise_left_shift(x, y, bits):
    if y < 0 or y >= bits:
        return x * 0
    return x << y


def bitwise_right_shift(x, y, bits):
    if y < 0 or y >= bits:
        return x >> (bits - 1)
    return x >> y


def gcd(x, y):
    a = abs(x)
    b = abs(y)
    while b != 0:
        t = a % b
        a = b
        b = t
    return a


# --- VJPs -----------------------------------------------------------------------------------------
def _igamma_vjp(g, a, x, upper):
    if isinstance(a, Tensor) and a.requires_grad:
        raise UnsupportedError(
            "igamma/igammac: the derivative with respect to the first argument (a) is not "
            "implemented (PyTorch does not have it either); pass `a.detach()`"
        )

    def grad_x() -> Tensor:
        density = (LGAMMA(a) * -1 + (a - 1) * x.log() - x).exp()
        return g * density * (-1 if upper else 1)

    return None, _grad_if(x, grad_x), None


def _polygamma_vjp(g, n, x):
    return None, _grad_if(x, lambda: g * POLYGAMMA(n + 1, x))


def _i1_vjp(g, x):
    safe = where(x == 0, 1.0, x)
    return (g * where(x == 0, 0.5, I0(x) - I1(x) / safe),)


def _i1e_vjp(g, x):
    # i0e(x) - i1e(x) (sign(x) + 1/x), 1/2 at 0 (PyTorch's)
    safe = where(x == 0, 1.0, x)
    return (g * where(x == 0, 0.5, I0E(x) - I1E(x) * (x.sign() + 1 / safe)),)


LGAMMA = defop(
    lgamma, to_float, lambda g, x: (g * DIGAMMA(x),), "inputs", ("Tensor.lgamma", "kg.lgamma")
)
DIGAMMA = defop(
    digamma,
    to_float,
    lambda g, x: (g * POLYGAMMA(1, x),),
    "inputs",
    ("Tensor.digamma", "kg.digamma"),
)
POLYGAMMA = defop(
    polygamma, to_float, _polygamma_vjp, "inputs", ("Tensor.polygamma", "kg.polygamma")
)
ERFC = defop(
    erfc,
    to_float,
    lambda g, x: (g * (x * x * -1).exp() * (-2 / math.sqrt(math.pi)),),
    "inputs",
    ("Tensor.erfc", "kg.erfc"),
)
ERFINV = defop(
    erfinv,
    to_float,
    lambda g, y: (g * (y * y).exp() * (math.sqrt(math.pi) / 2),),
    "output",
    ("Tensor.erfinv", "kg.erfinv"),
)
I0 = defop(i0, to_float, lambda g, x: (g * I1(x),), "inputs", ("Tensor.i0", "kg.i0"))
I1 = defop(i1, to_float, _i1_vjp, "inputs", ("kg.special.i1",))
ERFCX = defop(
    erfcx,
    to_float,
    lambda g, x: (g * (x * ERFCX(x) * 2 - 2 / math.sqrt(math.pi)),),
    "inputs",
    ("kg.special.erfcx",),
)
I0E = defop(i0e, to_float, lambda g, x: (g * (I1E(x) - x.sign() * I0E(x)),), "inputs",
            ("kg.special.i0e",))  # fmt: skip
I1E = defop(i1e, to_float, _i1e_vjp, "inputs", ("kg.special.i1e",))
NDTRI = defop(
    ndtri,
    to_float,
    lambda g, y: (g * (y * y * 0.5).exp() * math.sqrt(2 * math.pi),),
    "output",
    ("kg.special.ndtri",),
)
IGAMMA = defop(igamma, to_float, _igamma_vjp, "inputs", ("Tensor.igamma", "kg.igamma"))
FREXP_MANTISSA = defop(
    frexp_mantissa,
    _float_only("frexp"),
    lambda g, x: (g / FREXP_EXPONENT(x).to(g.dtype).exp2(),),
    "inputs",
    ("Tensor.frexp", "kg.frexp"),
)
FREXP_EXPONENT = defop(frexp_exponent, _exponent_rule, None, bindings=("kg.frexp",))
# as PyTorch: the gradient passes to x unchanged, none to y
NEXTAFTER = defop(
    nextafter,
    _float_with_int,
    lambda g, x, y, bits, tiny: (
        _grad_if(x, lambda: g),
        _grad_if(y, lambda: _zero_gradient(g, y)[0]),
        None,
        None,
    ),
    "none",
    ("Tensor.nextafter", "kg.nextafter"),
)
BITWISE_AND = defop(bitwise_and, _integral("bitwise_and", True), None, bindings=("kg.bitwise_and",))
BITWISE_OR = defop(bitwise_or, _integral("bitwise_or", True), None, bindings=("kg.bitwise_or",))
BITWISE_XOR = defop(bitwise_xor, _integral("bitwise_xor", True), None, bindings=("kg.bitwise_xor",))
BITWISE_LEFT_SHIFT = defop(
    bitwise_left_shift, _shift_rule, None, bindings=("kg.bitwise_left_shift",)
)
BITWISE_RIGHT_SHIFT = defop(
    bitwise_right_shift, _shift_rule, None, bindings=("kg.bitwise_right_shift",)
)
GCD = defop(gcd, _integral("gcd", False), None, bindings=("Tensor.gcd", "kg.gcd"))
BITWISE_NOT = defop(
    bitwise_not, _integral("bitwise_not", False), None, bindings=("kg.bitwise_not",)
)
