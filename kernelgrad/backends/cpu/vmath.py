"""Vectorisable math functions for the CPU backend's generated kernels.

Numba compiles ``math.exp``, ``math.log``, ``math.tanh``, ... to LLVM intrinsics that
become one libm call per element: the llvmlite wheels are built without a vector math
library (no Intel SVML, and LLVM's ``-vector-library`` option has no effect on the pass
pipeline llvmlite runs), so a loop over ``math.exp`` runs 3-20x slower than NumPy's SIMD
loops. The functions here compute the same results with plain floating-point arithmetic,
selects and a few bit casts, which LLVM's loop vectoriser turns into SIMD code when they
are called inside a Numba loop.

``exp``, ``expm1``, ``log``, ``log1p``, ``tanh``, ``sin``, ``cos`` and ``erf`` are stubs
with a Numba overload per argument type: float32 arguments are computed in float32 (or
in float64 where that is cheaper for the same accuracy) and return float32, float64
arguments return float64, integer and bool arguments are converted to float64 (as
``math.exp`` does in Numba). Called from plain Python they fall back to NumPy.

Accuracy (measured against float64 or extended-precision references, see
``docs/cpu-math.md``): within 2 ulp for both dtypes over the whole domain, except
``sin``/``cos``, whose bound holds for ``|x| <= 4.2e8`` (float32) and ``|x| <= 1.6e6``
(float64); beyond those the absolute error grows like ``|x| * 1e-16``. Special values
follow C99/IEEE: ``exp(-inf) = 0``, ``log(0) = -inf``, ``log(x < 0) = nan``,
``tanh(+-inf) = +-1``, NaN in gives NaN out, overflow gives ``inf`` and underflow gives
denormals or zero at the thresholds of the correctly rounded functions.

The generated elementwise kernels (``codegen.py``) call these functions in place of the
``math`` ones: :func:`vectorise_math_calls` rewrites a scalar function's source.

Coefficients: ``exp``/``expm1`` use Taylor coefficients and ``tanh`` a polynomial fitted
here (mpmath's Chebyshev fit); the others come from FreeBSD's msun library (Sun
Microsystems' fdlibm, "permission to use, copy, modify, and distribute this software is
freely granted"): e_log.c/e_logf.c, k_sin.c/k_cos.c, k_sinf.c/k_cosf.c,
e_rem_pio2.c/e_rem_pio2f.c, e_exp.c/e_expf.c (the ln 2 splits) and s_erf.c. The code is
written here for branch-free evaluation; the source file is named beside each constant.

>>> import numpy as np
>>> from numba import njit
>>> from kernelgrad.backends.cpu import vmath
>>> @njit
... def softplus(x, out):
...     for i in range(x.size):
...         out[i] = vmath.log1p(vmath.exp(x[i]))
>>> x = np.linspace(-3, 3, 7, dtype=np.float32)
>>> out = np.empty_like(x)
>>> softplus(x, out)
>>> bool(np.allclose(out, np.log1p(np.exp(x))))
True
"""

from __future__ import annotations

import ast
import hashlib
import math
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload, register_jitable

__all__ = [
    "FUNCTIONS",
    "SOURCE_DIGEST",
    "cos",
    "erf",
    "exp",
    "expm1",
    "log",
    "log1p",
    "sin",
    "tanh",
    "vectorise_math_calls",
]

# The ``math`` functions this module replaces in generated kernels.
FUNCTIONS = ("exp", "expm1", "log", "log1p", "tanh", "sin", "cos", "erf")

# Digest of this file: generated kernel modules that use it include it in their text, so
# a change here gives them new content-hashed file names (Numba's on-disk cache does not
# track dependencies between modules).
SOURCE_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

# fastmath 'contract' lets LLVM fuse a*b+c into FMA instructions where the CPU has them
# (faster, and never less accurate for these algorithms); error_model 'numpy' keeps
# divisions free of zero checks, which would stop vectorisation.
_JIT_OPTIONS = {"fastmath": {"contract"}, "error_model": "numpy", "forceinline": True}


# --- bit-level helpers -----------------------------------------------------------------
# Numba types integer arithmetic on int32 as int64 and has no float<->int bit cast, so the
# few operations on the bits of a float are written directly in LLVM IR.


def _int_layout(float_type: types.Float) -> tuple[ir.IntType, int, int]:
    """(integer type of the same width, mantissa bits, exponent bias)."""
    if float_type.bitwidth == 32:
        return ir.IntType(32), 23, 127
    return ir.IntType(64), 52, 1023


def _is_float(value: types.Type) -> bool:
    return isinstance(value, types.Float) and value.bitwidth in (32, 64)


@intrinsic
def _rint(typingctx, x):
    """x rounded to the nearest integer (ties to even), as a float."""
    if not _is_float(x):
        return None

    def codegen(context, builder, signature, args):
        function = builder.module.declare_intrinsic("llvm.rint", [args[0].type])
        return builder.call(function, args)

    return x(x), codegen


@intrinsic
def _copysign(typingctx, magnitude, sign):
    """|magnitude| with the sign bit of ``sign``."""
    if not _is_float(magnitude) or magnitude != sign:
        return None

    def codegen(context, builder, signature, args):
        float_type = args[0].type
        function_type = ir.FunctionType(float_type, [float_type, float_type])
        function = builder.module.declare_intrinsic("llvm.copysign", [float_type], function_type)
        return builder.call(function, args)

    return magnitude(magnitude, sign), codegen


@intrinsic
def _pow2(typingctx, k):
    """2**k for an integral float k inside the normal exponent range (no checks)."""
    if not _is_float(k):
        return None
    int_type, mantissa_bits, bias = _int_layout(k)

    def codegen(context, builder, signature, args):
        biased = builder.add(builder.fptosi(args[0], int_type), ir.Constant(int_type, bias))
        return builder.bitcast(
            builder.shl(biased, ir.Constant(int_type, mantissa_bits)), args[0].type
        )

    return k(k), codegen


def _log_split(builder: ir.IRBuilder, value: ir.Value, float_type: types.Float):
    """Integer exponent k (as an int) and mantissa bits m of a positive normal float, with
    value = m * 2**k and m in [sqrt(1/2), sqrt(2)): offsetting the bits by
    (bits(1) - bits(sqrt(1/2))) moves the exponent boundary from 1 to sqrt(1/2)."""
    int_type, mantissa_bits, bias = _int_layout(float_type)
    if float_type.bitwidth == 32:
        one_bits, sqrt_half_bits = 0x3F800000, 0x3F3504F3
    else:
        one_bits, sqrt_half_bits = 0x3FF0000000000000, 0x3FE6A09E667F3BCD
    bits = builder.bitcast(value, int_type)
    shifted = builder.add(bits, ir.Constant(int_type, one_bits - sqrt_half_bits))
    exponent = builder.sub(
        builder.ashr(shifted, ir.Constant(int_type, mantissa_bits)), ir.Constant(int_type, bias)
    )
    mantissa_mask = ir.Constant(int_type, (1 << mantissa_bits) - 1)
    mantissa = builder.add(
        builder.and_(shifted, mantissa_mask), ir.Constant(int_type, sqrt_half_bits)
    )
    return exponent, builder.bitcast(mantissa, value.type)


@intrinsic
def _log_exponent(typingctx, x):
    """k (as a float) such that x * 2**-k lies in [sqrt(1/2), sqrt(2)); x positive normal."""
    if not _is_float(x):
        return None

    def codegen(context, builder, signature, args):
        exponent, _ = _log_split(builder, args[0], signature.args[0])
        return builder.sitofp(exponent, args[0].type)

    return x(x), codegen


@intrinsic
def _log_mantissa(typingctx, x):
    """x * 2**-k in [sqrt(1/2), sqrt(2)) for the k of ``_log_exponent``."""
    if not _is_float(x):
        return None

    def codegen(context, builder, signature, args):
        _, mantissa = _log_split(builder, args[0], signature.args[0])
        return mantissa

    return x(x), codegen


@intrinsic
def _clear_low_bits(typingctx, x):
    """x with the low 32 (float64) or 12 (float32) mantissa bits cleared: its square is
    exact."""
    if not _is_float(x):
        return None
    int_type, _, _ = _int_layout(x)
    mask = 0xFFFFFFFF00000000 if x.bitwidth == 64 else 0xFFFFF000

    def codegen(context, builder, signature, args):
        bits = builder.and_(builder.bitcast(args[0], int_type), ir.Constant(int_type, mask))
        return builder.bitcast(bits, args[0].type)

    return x(x), codegen


# --- constants -------------------------------------------------------------------------
# Numba types Python float literals as float64, which would turn float32 arithmetic into
# float64: every constant used in float32 code is a named np.float32.
F32, F64 = np.float32, np.float64
_INF32, _INF64 = F32(np.inf), F64(np.inf)
_NAN32, _NAN64 = F32(np.nan), F64(np.nan)
_ZERO32, _HALF32, _ONE32, _TWO32 = F32(0.0), F32(0.5), F32(1.0), F32(2.0)
_ZERO64, _HALF64, _ONE64, _TWO64 = F64(0.0), F64(0.5), F64(1.0), F64(2.0)

_LOG2E32, _LOG2E64 = F32(1.4426950408889634), F64(1.4426950408889634)
# ln 2 = HI + LO where k * HI is exact for every k used (e_expf.c, e_exp.c).
_LN2_HI32, _LN2_LO32 = F32(float.fromhex("0x1.62e4p-1")), F32(1.4286067653e-06)
_LN2_HI64 = F64(float.fromhex("0x1.62e42fee00000p-1"))
_LN2_LO64 = F64(float.fromhex("0x1.a39ef35793c76p-33"))

# Taylor coefficients 1/n! for exp and expm1 on |r| <= ln(2)/2 (truncation error below
# 2**-27 for float32 with degree 7, below 2**-57 for float64 with degree 13).
_E32 = [F32(1.0 / math.factorial(n)) for n in range(8)]
_E64 = [F64(1.0 / math.factorial(n)) for n in range(14)]
(_E32_2, _E32_3, _E32_4, _E32_5, _E32_6, _E32_7) = _E32[2:]
(
    _E64_2,
    _E64_3,
    _E64_4,
    _E64_5,
    _E64_6,
    _E64_7,
    _E64_8,
    _E64_9,
    _E64_10,
    _E64_11,
    _E64_12,
    _E64_13,
) = _E64[2:]


# --- exp -------------------------------------------------------------------------------
def exp(x):
    """e**x. Vectorises inside Numba loops; plain Python calls use NumPy."""
    with np.errstate(all="ignore"):
        return np.exp(x)


# exp(x) overflows above ln(max float) and is 0 below ln(min denormal / 2). Clamping to
# slightly wider bounds keeps 2**k representable as two normal factors; the product
# then overflows or underflows exactly as the true result does.
_EXP_LOW32, _EXP_HIGH32 = F32(-104.0), F32(89.0)
_EXP_LOW64, _EXP_HIGH64 = F64(-746.0), F64(710.0)


@register_jitable(**_JIT_OPTIONS)
def _exp_finite32(y):
    """e**y for |y| <= 87 (no overflow, underflow or NaN to handle)."""
    k = _rint(y * _LOG2E32)
    r = (y - k * _LN2_HI32) - k * _LN2_LO32
    p = r * (_E32_3 + r * (_E32_4 + r * (_E32_5 + r * (_E32_6 + r * _E32_7))))
    return (_ONE32 + r * (_ONE32 + r * (_E32_2 + p))) * _pow2(k)


@register_jitable(**_JIT_OPTIONS)
def _exp_finite64(y):
    """e**y for |y| <= 708."""
    k = _rint(y * _LOG2E64)
    r = (y - k * _LN2_HI64) - k * _LN2_LO64
    p = _E64_9 + r * (_E64_10 + r * (_E64_11 + r * (_E64_12 + r * _E64_13)))
    p = _E64_5 + r * (_E64_6 + r * (_E64_7 + r * (_E64_8 + r * p)))
    return (_ONE64 + r * (_ONE64 + r * (_E64_2 + r * (_E64_3 + r * (_E64_4 + r * p))))) * _pow2(k)


@register_jitable(**_JIT_OPTIONS)
def _exp32(x):
    # x = k ln2 + r with |r| <= ln2/2; e**x = 2**k e**r; 2**k = 2**k1 * 2**(k-k1) so that
    # results near overflow and in the denormal range need no special case.
    clamped = x if x < _EXP_HIGH32 else _EXP_HIGH32  # NaN becomes the upper bound here
    clamped = clamped if clamped > _EXP_LOW32 else _EXP_LOW32
    k = _rint(clamped * _LOG2E32)
    r = (clamped - k * _LN2_HI32) - k * _LN2_LO32
    p = r * (_E32_3 + r * (_E32_4 + r * (_E32_5 + r * (_E32_6 + r * _E32_7))))
    p = _ONE32 + r * (_ONE32 + r * (_E32_2 + p))
    k1 = np.floor(k * _HALF32)
    result = p * _pow2(k1) * _pow2(k - k1)
    return result if x == x else x


@register_jitable(**_JIT_OPTIONS)
def _exp64(x):
    clamped = x if x < _EXP_HIGH64 else _EXP_HIGH64
    clamped = clamped if clamped > _EXP_LOW64 else _EXP_LOW64
    k = _rint(clamped * _LOG2E64)
    r = (clamped - k * _LN2_HI64) - k * _LN2_LO64
    p = _E64_9 + r * (_E64_10 + r * (_E64_11 + r * (_E64_12 + r * _E64_13)))
    p = _E64_5 + r * (_E64_6 + r * (_E64_7 + r * (_E64_8 + r * p)))
    p = _ONE64 + r * (_ONE64 + r * (_E64_2 + r * (_E64_3 + r * (_E64_4 + r * p))))
    k1 = np.floor(k * _HALF64)
    result = p * _pow2(k1) * _pow2(k - k1)
    return result if x == x else x


# --- expm1 -----------------------------------------------------------------------------
def expm1(x):
    """e**x - 1, accurate for small x. Vectorises inside Numba loops."""
    with np.errstate(all="ignore"):
        return np.expm1(x)


# Below these expm1 rounds to -1; the clamp keeps 2**(k-1) a normal number.
_EXPM1_LOW32, _EXPM1_LOW64 = F32(-30.0), F64(-40.0)
# Below these expm1(x) rounds to x (and -0.0 stays -0.0).
_EXPM1_TINY32, _EXPM1_TINY64 = F32(2.0**-25), F64(2.0**-54)


@register_jitable(**_JIT_OPTIONS)
def _expm1_32(x):
    # e**x - 1 = 2**k (e**r - 1) + (2**k - 1) = 2 (s (e**r - 1) + (s - 1/2)) with
    # s = 2**(k-1): the products by powers of two are exact and s - 1/2 is exact
    # whenever it matters, so the only rounding errors are those of e**r - 1 and of one
    # addition (the result is wrong by at most 2**(k-1) ulp when 2**k exceeds 2**24 or
    # 2**53, where that is below half an ulp of the result).
    clamped = x if x < _EXP_HIGH32 else _EXP_HIGH32
    clamped = clamped if clamped > _EXPM1_LOW32 else _EXPM1_LOW32
    k = _rint(clamped * _LOG2E32)
    r = (clamped - k * _LN2_HI32) - k * _LN2_LO32
    p = _E32_2 + r * (_E32_3 + r * (_E32_4 + r * (_E32_5 + r * (_E32_6 + r * _E32_7))))
    q = (r * r) * p  # e**r - 1 = r + q
    s = _pow2(k - _ONE32)
    # For k = 1 and r < 0 the sum cancels: r + 1/2 is exact there, so add q last.
    inner = (r + _HALF32) + q if k == _ONE32 else s * (r + q) + (s - _HALF32)
    result = inner * _TWO32
    return result if abs(x) >= _EXPM1_TINY32 else x  # also passes NaN through


@register_jitable(**_JIT_OPTIONS)
def _expm1_64(x):
    clamped = x if x < _EXP_HIGH64 else _EXP_HIGH64
    clamped = clamped if clamped > _EXPM1_LOW64 else _EXPM1_LOW64
    k = _rint(clamped * _LOG2E64)
    r = (clamped - k * _LN2_HI64) - k * _LN2_LO64
    p = _E64_9 + r * (_E64_10 + r * (_E64_11 + r * (_E64_12 + r * _E64_13)))
    p = _E64_4 + r * (_E64_5 + r * (_E64_6 + r * (_E64_7 + r * (_E64_8 + r * p))))
    p = _E64_2 + r * (_E64_3 + r * p)
    q = (r * r) * p
    s = _pow2(k - _ONE64)
    inner = (r + _HALF64) + q if k == _ONE64 else s * (r + q) + (s - _HALF64)
    result = inner * _TWO64
    return result if abs(x) >= _EXPM1_TINY64 else x


# --- log and log1p ---------------------------------------------------------------------
def log(x):
    """Natural logarithm: -inf at 0, nan below. Vectorises inside Numba loops."""
    with np.errstate(all="ignore"):
        return np.log(x)


def log1p(x):
    """log(1 + x), accurate for small x. Vectorises inside Numba loops."""
    with np.errstate(all="ignore"):
        return np.log1p(x)


# ln 2 = HI + LO with k * HI exact (e_logf.c, e_log.c).
_LOG_LN2_HI32, _LOG_LN2_LO32 = F32(6.9313812256e-01), F32(9.0580006145e-06)
_LOG_LN2_HI64, _LOG_LN2_LO64 = _LN2_HI64, _LN2_LO64
# log(1+f) = log(1+s) - log(1-s) = 2s + s R(s*s), s = f/(2+f): minimax coefficients of R
# on |s| <= 0.1716 from e_logf.c (error < 2**-34.24) and e_log.c (error < 2**-58.45).
_LG1_32 = F32(float.fromhex("0xaaaaaa.0p-24"))
_LG2_32 = F32(float.fromhex("0xccce13.0p-25"))
_LG3_32 = F32(float.fromhex("0x91e9ee.0p-25"))
_LG4_32 = F32(float.fromhex("0xf89e26.0p-26"))
_LG1_64 = F64(6.666666666666735130e-01)
_LG2_64 = F64(3.999999999940941908e-01)
_LG3_64 = F64(2.857142874366239149e-01)
_LG4_64 = F64(2.222219843214978396e-01)
_LG5_64 = F64(1.818357216161805012e-01)
_LG6_64 = F64(1.531383769920937332e-01)
_LG7_64 = F64(1.479819860511658591e-01)
# Denormal inputs are scaled into the normal range first.
_MIN_NORMAL32, _DENORMAL_SCALE32, _DENORMAL_SHIFT32 = F32(2.0**-126), F32(2.0**25), F32(25.0)
_MIN_NORMAL64, _DENORMAL_SCALE64, _DENORMAL_SHIFT64 = F64(2.0**-1022), F64(2.0**54), F64(54.0)


@register_jitable(**_JIT_OPTIONS)
def _log_core32(u, c, k_offset):
    """log(u * 2**k_offset) + c for a positive normal u and a small correction c."""
    k = _log_exponent(u) + k_offset
    f = _log_mantissa(u) - _ONE32  # exact
    s = f / (_TWO32 + f)
    z = s * s
    w = z * z
    r = z * (_LG1_32 + w * _LG3_32) + w * (_LG2_32 + w * _LG4_32)
    half_f2 = _HALF32 * f * f
    # k ln2 + log(1+f), summed so that the large terms (k*HI and f) come last.
    return k * _LOG_LN2_HI32 - ((half_f2 - (s * (half_f2 + r) + (k * _LOG_LN2_LO32 + c))) - f)


@register_jitable(**_JIT_OPTIONS)
def _log_core64(u, c, k_offset):
    k = _log_exponent(u) + k_offset
    f = _log_mantissa(u) - _ONE64
    s = f / (_TWO64 + f)
    z = s * s
    w = z * z
    r = z * (_LG1_64 + w * (_LG3_64 + w * (_LG5_64 + w * _LG7_64)))
    r += w * (_LG2_64 + w * (_LG4_64 + w * _LG6_64))
    half_f2 = _HALF64 * f * f
    return k * _LOG_LN2_HI64 - ((half_f2 - (s * (half_f2 + r) + (k * _LOG_LN2_LO64 + c))) - f)


@register_jitable(**_JIT_OPTIONS)
def _log32(x):
    denormal = x < _MIN_NORMAL32
    scaled = x * _DENORMAL_SCALE32 if denormal else x
    result = _log_core32(scaled, _ZERO32, -_DENORMAL_SHIFT32 if denormal else _ZERO32)
    result = result if x < _INF32 else x  # +inf and NaN
    result = result if x != _ZERO32 else -_INF32
    return result if x >= _ZERO32 else _NAN32  # also x = -inf


@register_jitable(**_JIT_OPTIONS)
def _log64(x):
    denormal = x < _MIN_NORMAL64
    scaled = x * _DENORMAL_SCALE64 if denormal else x
    result = _log_core64(scaled, _ZERO64, -_DENORMAL_SHIFT64 if denormal else _ZERO64)
    result = result if x < _INF64 else x
    result = result if x != _ZERO64 else -_INF64
    return result if x >= _ZERO64 else _NAN64


@register_jitable(**_JIT_OPTIONS)
def _log1p32(x):
    # u = fl(1 + x) and its rounding error c (two-sum: 1 + x = u + c exactly):
    # log(1 + x) = log(u) + log(1 + c/u) ~ log(u) + c/u. u is never denormal.
    u = _ONE32 + x
    x_part = u - _ONE32
    c = (_ONE32 - (u - x_part)) + (x - x_part)
    # log1p(x) has the sign of x: copysign keeps -0.0 (the core returns +0.0 there).
    result = _copysign(_log_core32(u, c / u, _ZERO32), x)
    result = result if u < _INF32 else u  # +inf and NaN
    result = result if u != _ZERO32 else -_INF32  # x = -1
    return result if u >= _ZERO32 else _NAN32  # x < -1


@register_jitable(**_JIT_OPTIONS)
def _log1p64(x):
    u = _ONE64 + x
    x_part = u - _ONE64
    c = (_ONE64 - (u - x_part)) + (x - x_part)
    result = _copysign(_log_core64(u, c / u, _ZERO64), x)
    result = result if u < _INF64 else u
    result = result if u != _ZERO64 else -_INF64
    return result if u >= _ZERO64 else _NAN64


# --- tanh ------------------------------------------------------------------------------
def tanh(x):
    """Hyperbolic tangent. Vectorises inside Numba loops."""
    return np.tanh(x)


# |x| < 0.625: tanh x = x + x z P(z), z = x*x, with P fitted to (tanh(x)/x - 1)/z on
# z in [0, 0.625**2] by Chebyshev interpolation (mpmath.chebyfit; approximation error
# 1.6e-9 with degree 5, 3.9e-18 with degree 11, small beside P ~ -1/3).
# |x| >= 0.625: tanh |x| = 1 - 2 / (e**2|x| + 1), no cancellation there.
_TANH_SPLIT32, _TANH_SPLIT64 = F32(0.625), F64(0.625)
_TANH_P32 = [
    F32(c)
    for c in (
        -0.33333333172140361638,
        0.13333303556915741766,
        -0.053959259577204542744,
        0.021768918651028210152,
        -0.008343945515839152048,
        0.0022927448161781423431,
    )
]
_TANH_P64 = [
    F64(c)
    for c in (
        -0.33333333333333332938,
        0.13333333333333041602,
        -0.05396825396789699169,
        0.021869488519008305756,
        -0.008863235103240877925,
        0.0035921217511549622695,
        -0.0014557754120478055104,
        0.0005896606577757043347,
        -0.00023759064960555619551,
        0.000092571161295567682707,
        -0.000031201101425797400033,
        6.48516348279311315e-6,
    )
]
(_T32_0, _T32_1, _T32_2, _T32_3, _T32_4, _T32_5) = _TANH_P32
(_T64_0, _T64_1, _T64_2, _T64_3, _T64_4, _T64_5) = _TANH_P64[:6]
(_T64_6, _T64_7, _T64_8, _T64_9, _T64_10, _T64_11) = _TANH_P64[6:]
# Beyond 20, tanh rounds to 1 in both precisions; the clamp keeps e**2x finite.
_TANH_CLAMP32, _TANH_CLAMP64 = F32(20.0), F64(20.0)


@register_jitable(**_JIT_OPTIONS)
def _tanh32(x):
    a = abs(x)
    z = a * a
    p = _T32_0 + z * (_T32_1 + z * (_T32_2 + z * (_T32_3 + z * (_T32_4 + z * _T32_5))))
    small = a + a * (z * p)
    clamped = a if a < _TANH_CLAMP32 else _TANH_CLAMP32  # NaN becomes the bound here
    large = _ONE32 - _TWO32 / (_exp_finite32(clamped + clamped) + _ONE32)
    result = _copysign(small if a < _TANH_SPLIT32 else large, x)
    return result if x == x else x


@register_jitable(**_JIT_OPTIONS)
def _tanh64(x):
    a = abs(x)
    z = a * a
    p = _T64_6 + z * (_T64_7 + z * (_T64_8 + z * (_T64_9 + z * (_T64_10 + z * _T64_11))))
    p = _T64_0 + z * (_T64_1 + z * (_T64_2 + z * (_T64_3 + z * (_T64_4 + z * (_T64_5 + z * p)))))
    small = a + a * (z * p)
    clamped = a if a < _TANH_CLAMP64 else _TANH_CLAMP64
    large = _ONE64 - _TWO64 / (_exp_finite64(clamped + clamped) + _ONE64)
    result = _copysign(small if a < _TANH_SPLIT64 else large, x)
    return result if x == x else x


# --- sin and cos -----------------------------------------------------------------------
def sin(x):
    """Sine (see the module docstring for the argument range of its error bound)."""
    return np.sin(x)


def cos(x):
    """Cosine (see the module docstring for the argument range of its error bound)."""
    return np.cos(x)


# x = n pi/2 + r, |r| <= pi/4. Float32 arguments are reduced in float64 with pi/2 split
# into a 28-bit head and a 53-bit tail (e_rem_pio2f.c), exact for |n| < 2**25 and accurate
# for |x| < 2**28 pi/2; float64 arguments with pi/2 in three 33-bit pieces plus a tail
# (e_rem_pio2.c), each product exact for |n| < 2**20 (|x| < 1.6e6).
_INV_PIO2 = F64(6.36619772367581382433e-01)
_PIO2F_1 = F64(1.57079631090164184570e00)
_PIO2F_1T = F64(1.58932547735281966916e-08)
_PIO2_1 = F64(1.57079632673412561417e00)
_PIO2_2 = F64(6.07710050630396597660e-11)
_PIO2_3 = F64(2.02226624871116645580e-21)
_PIO2_3T = F64(8.47842766036889956997e-32)
_QUARTER64, _FOUR64 = F64(0.25), F64(4.0)
# sin(r)/r - 1 and cos(r) - 1 on |r| <= pi/4, evaluated in float64 for float32 results:
# k_sinf.c (error < 2**-37.5) and k_cosf.c (error < 2**-34.1).
_SINF_1 = F64(float.fromhex("-0x15555554cbac77.0p-55"))
_SINF_2 = F64(float.fromhex("0x111110896efbb2.0p-59"))
_SINF_3 = F64(float.fromhex("-0x1a00f9e2cae774.0p-65"))
_SINF_4 = F64(float.fromhex("0x16cd878c3b46a7.0p-71"))
_COSF_0 = F64(float.fromhex("-0x1ffffffd0c5e81.0p-54"))
_COSF_1 = F64(float.fromhex("0x155553e1053a42.0p-57"))
_COSF_2 = F64(float.fromhex("-0x16c087e80f1e27.0p-62"))
_COSF_3 = F64(float.fromhex("0x199342e0ee5069.0p-68"))
# Float64 kernels on |r| <= pi/4: k_sin.c and k_cos.c (error < 2**-58).
_SIN_1 = F64(-1.66666666666666324348e-01)
_SIN_2 = F64(8.33333333332248946124e-03)
_SIN_3 = F64(-1.98412698298579493134e-04)
_SIN_4 = F64(2.75573137070700676789e-06)
_SIN_5 = F64(-2.50507602534068634195e-08)
_SIN_6 = F64(1.58969099521155010221e-10)
_COS_1 = F64(4.16666666666666019037e-02)
_COS_2 = F64(-1.38888888888741095749e-03)
_COS_3 = F64(2.48015872894767294178e-05)
_COS_4 = F64(-2.75573143513906633035e-07)
_COS_5 = F64(2.08757232129817482790e-09)
_COS_6 = F64(-1.13596475577881948265e-11)
# Below these sin(x) rounds to x (keeping the sign of -0.0).
_SIN_TINY32, _SIN_TINY64 = F32(2.0**-12), F64(2.0**-27)


# Beyond those ranges the products n * pio2_1 are no longer exact; x * 2/pi is then
# reduced as rounded (bounded results, absolute error about |x| * 1e-16 for float64).
_LARGE_THRESHOLD32 = F32(2.0**28 * 1.5707963267948966)
_LARGE_THRESHOLD64 = F64(2.0**20 * 1.5707963267948966)
_PIO2 = F64(1.5707963267948966)


@register_jitable(**_JIT_OPTIONS)
def _is_odd(n):
    """Whether the integral float n is odd."""
    return n * _HALF64 != np.floor(n * _HALF64)


@register_jitable(**_JIT_OPTIONS)
def _negative_quadrant(n):
    """Whether n mod 4 is 2 or 3 for an integral float n (sin(r + n pi/2) = -sin r or
    -cos r there)."""
    return n - _FOUR64 * np.floor(n * _QUARTER64) >= _TWO64


@register_jitable(**_JIT_OPTIONS)
def _sin_cos_kernels32(x):
    """(sin r, cos r, n) for x = n pi/2 + r, in float64."""
    wide = np.float64(x)
    n = _rint(wide * _INV_PIO2)
    r = (wide - n * _PIO2F_1) - n * _PIO2F_1T
    r_large = (wide * _INV_PIO2 - n) * _PIO2
    r = r if abs(x) < _LARGE_THRESHOLD32 else r_large  # also NaN for +-inf
    z = r * r
    w = z * z
    sin_r = (r + (z * r) * (_SINF_1 + z * _SINF_2)) + (z * r) * w * (_SINF_3 + z * _SINF_4)
    cos_r = ((_ONE64 + z * _COSF_0) + w * _COSF_1) + (w * z) * (_COSF_2 + z * _COSF_3)
    return sin_r, cos_r, n


@register_jitable(**_JIT_OPTIONS)
def _sin32(x):
    sin_r, cos_r, n = _sin_cos_kernels32(x)
    # sin(r + n pi/2) = sin r, cos r, -sin r, -cos r for n mod 4 = 0, 1, 2, 3.
    value = cos_r if _is_odd(n) else sin_r
    value = -value if _negative_quadrant(n) else value
    result = np.float32(value)
    return result if abs(x) >= _SIN_TINY32 else x


@register_jitable(**_JIT_OPTIONS)
def _cos32(x):
    sin_r, cos_r, n = _sin_cos_kernels32(x)
    # cos(r + n pi/2) = sin(r + (n + 1) pi/2).
    value = sin_r if _is_odd(n) else cos_r
    value = -value if _negative_quadrant(n + _ONE64) else value
    return np.float32(value)


@register_jitable(**_JIT_OPTIONS)
def _sin_cos_kernels64(x):
    """(sin r, cos r, n) for x = n pi/2 + r, r held as head + tail."""
    n = _rint(x * _INV_PIO2)
    head = x - n * _PIO2_1  # exact for |n| < 2**20
    # Subtract n * (pio2_2 + pio2_3 + pio2_3t) keeping the rounding error of each step:
    # head - product = new_head + error exactly (the products are exact).
    product = n * _PIO2_2
    new_head = head - product
    error2 = (head - new_head) - product
    head = new_head
    product = n * _PIO2_3
    new_head = head - product
    error3 = (head - new_head) - product
    tail_sum = n * _PIO2_3T - error2 - error3
    r = new_head - tail_sum
    r_tail = (new_head - r) - tail_sum
    small = abs(x) < _LARGE_THRESHOLD64
    r = r if small else (x * _INV_PIO2 - n) * _PIO2  # also NaN for +-inf
    r_tail = r_tail if small else _ZERO64
    z = r * r
    w = z * z
    # sin(r + t) ~ sin r + (1 - r*r/2) t
    poly = _SIN_2 + z * (_SIN_3 + z * _SIN_4) + z * w * (_SIN_5 + z * _SIN_6)
    v = z * r
    sin_r = r - ((z * (_HALF64 * r_tail - v * poly) - r_tail) - v * _SIN_1)
    # cos(r + t) ~ cos r - r t, with 1 - z/2 split as (1 - hz) + ((1 - (1 - hz)) - hz).
    poly = z * (_COS_1 + z * (_COS_2 + z * _COS_3)) + w * w * (_COS_4 + z * (_COS_5 + z * _COS_6))
    half_z = _HALF64 * z
    one_minus = _ONE64 - half_z
    cos_r = one_minus + (((_ONE64 - one_minus) - half_z) + (z * poly - r * r_tail))
    return sin_r, cos_r, n


@register_jitable(**_JIT_OPTIONS)
def _sin64(x):
    sin_r, cos_r, n = _sin_cos_kernels64(x)
    value = cos_r if _is_odd(n) else sin_r
    value = -value if _negative_quadrant(n) else value
    return value if abs(x) >= _SIN_TINY64 else x


@register_jitable(**_JIT_OPTIONS)
def _cos64(x):
    sin_r, cos_r, n = _sin_cos_kernels64(x)
    value = sin_r if _is_odd(n) else cos_r
    return -value if _negative_quadrant(n + _ONE64) else value


# --- erf -------------------------------------------------------------------------------
def erf(x):
    """Error function. Vectorises inside Numba loops."""
    if isinstance(x, np.ndarray):
        return np.vectorize(math.erf, otypes=[x.dtype])(x)
    return type(x)(math.erf(x)) if isinstance(x, np.floating) else math.erf(x)


# s_erf.c: four intervals of |x|, each with its own rational approximation:
#   [0, 0.84375):        erf = x + x P(x^2)/Q(x^2)
#   [0.84375, 1.25):     erf = erx + P(s)/Q(s), s = |x| - 1
#   [1.25, 1/0.35) and [1/0.35, 6):
#                        erfc = exp(-x^2 - 0.5625 + R(1/x^2)/S(1/x^2)) / |x|
#   [6, inf]:            erf = 1 (to float64 precision)
_ERX = F64(8.45062911510467529297e-01)
_PP0, _PP1 = F64(1.28379167095512558561e-01), F64(-3.25042107247001499370e-01)
_PP2, _PP3 = F64(-2.84817495755985104766e-02), F64(-5.77027029648944159157e-03)
_PP4 = F64(-2.37630166566501626084e-05)
_QQ1, _QQ2 = F64(3.97917223959155352819e-01), F64(6.50222499887672944485e-02)
_QQ3, _QQ4 = F64(5.08130628187576562776e-03), F64(1.32494738004321644526e-04)
_QQ5 = F64(-3.96022827877536812320e-06)
_PA0, _PA1 = F64(-2.36211856075265944077e-03), F64(4.14856118683748331666e-01)
_PA2, _PA3 = F64(-3.72207876035701323847e-01), F64(3.18346619901161753674e-01)
_PA4, _PA5 = F64(-1.10894694282396677476e-01), F64(3.54783043256182359371e-02)
_PA6 = F64(-2.16637559486879084300e-03)
_QA1, _QA2 = F64(1.06420880400844228286e-01), F64(5.40397917702171048937e-01)
_QA3, _QA4 = F64(7.18286544141962662868e-02), F64(1.26171219808761642112e-01)
_QA5, _QA6 = F64(1.36370839120290507362e-02), F64(1.19844998467991074170e-02)
_RA0, _RA1 = F64(-9.86494403484714822705e-03), F64(-6.93858572707181764372e-01)
_RA2, _RA3 = F64(-1.05586262253232909814e01), F64(-6.23753324503260060396e01)
_RA4, _RA5 = F64(-1.62396669462573470355e02), F64(-1.84605092906711035994e02)
_RA6, _RA7 = F64(-8.12874355063065934246e01), F64(-9.81432934416914548592e00)
_SA1, _SA2 = F64(1.96512716674392571292e01), F64(1.37657754143519042600e02)
_SA3, _SA4 = F64(4.34565877475229228821e02), F64(6.45387271733267880336e02)
_SA5, _SA6 = F64(4.29008140027567833386e02), F64(1.08635005541779435134e02)
_SA7, _SA8 = F64(6.57024977031928170135e00), F64(-6.04244152148580987438e-02)
_RB0, _RB1 = F64(-9.86494292470009928597e-03), F64(-7.99283237680523006574e-01)
_RB2, _RB3 = F64(-1.77579549177547519889e01), F64(-1.60636384855821916062e02)
_RB4, _RB5 = F64(-6.37566443368389627722e02), F64(-1.02509513161107724954e03)
_RB6 = F64(-4.83519191608651397019e02)
_SB1, _SB2 = F64(3.03380607434824582924e01), F64(3.25792512996573918826e02)
_SB3, _SB4 = F64(1.53672958608443695994e03), F64(3.19985821950859553908e03)
_SB5, _SB6 = F64(2.55305040643316442583e03), F64(4.74528541206955367215e02)
_SB7 = F64(-2.24409524465858183362e01)
_ERF_SMALL, _ERF_MIDDLE = F64(0.84375), F64(1.25)
_ERF_TAIL_SPLIT, _ERF_ONE = F64(1.0 / 0.35), F64(6.0)
_ERF_EXP_SHIFT = F64(0.5625)


@register_jitable(**_JIT_OPTIONS)
def _erf64(x):
    a = abs(x)
    # [0, 0.84375)
    z = a * a
    p = _PP0 + z * (_PP1 + z * (_PP2 + z * (_PP3 + z * _PP4)))
    q = _ONE64 + z * (_QQ1 + z * (_QQ2 + z * (_QQ3 + z * (_QQ4 + z * _QQ5))))
    small = a + a * (p / q)
    # [0.84375, 1.25)
    s = a - _ONE64
    p = _PA0 + s * (_PA1 + s * (_PA2 + s * (_PA3 + s * (_PA4 + s * (_PA5 + s * _PA6)))))
    q = _ONE64 + s * (_QA1 + s * (_QA2 + s * (_QA3 + s * (_QA4 + s * (_QA5 + s * _QA6)))))
    middle = _ERX + p / q
    # [1.25, 6): one evaluation with the coefficients of either sub-interval.
    b = a if a > _ERF_MIDDLE else _ERF_MIDDLE
    b = b if b < _ERF_ONE else _ERF_ONE
    t = _ONE64 / (b * b)
    near = b < _ERF_TAIL_SPLIT
    numerator = _RA7 if near else _ZERO64
    numerator = (_RA6 if near else _RB6) + t * numerator
    numerator = (_RA5 if near else _RB5) + t * numerator
    numerator = (_RA4 if near else _RB4) + t * numerator
    numerator = (_RA3 if near else _RB3) + t * numerator
    numerator = (_RA2 if near else _RB2) + t * numerator
    numerator = (_RA1 if near else _RB1) + t * numerator
    numerator = (_RA0 if near else _RB0) + t * numerator
    denominator = _SA8 if near else _ZERO64
    denominator = (_SA7 if near else _SB7) + t * denominator
    denominator = (_SA6 if near else _SB6) + t * denominator
    denominator = (_SA5 if near else _SB5) + t * denominator
    denominator = (_SA4 if near else _SB4) + t * denominator
    denominator = (_SA3 if near else _SB3) + t * denominator
    denominator = (_SA2 if near else _SB2) + t * denominator
    denominator = (_SA1 if near else _SB1) + t * denominator
    denominator = _ONE64 + t * denominator
    # exp(-b^2) = exp(-h^2) exp((h - b)(h + b)) with h^2 exact.
    h = _clear_low_bits(b)
    tail = _exp_finite64(-h * h - _ERF_EXP_SHIFT)
    tail *= _exp_finite64((h - b) * (h + b) + numerator / denominator)
    large = _ONE64 - tail / b
    result = small if a < _ERF_SMALL else (middle if a < _ERF_MIDDLE else large)
    result = result if a < _ERF_ONE else _ONE64
    result = _copysign(result, x)
    return result if x == x else x


@register_jitable(**_JIT_OPTIONS)
def _erf32(x):
    return np.float32(_erf64(np.float64(x)))


# --- typing: one stub per function, an implementation per argument type -------------------
def _register(stub, implementation32, implementation64) -> None:
    @overload(stub, jit_options=_JIT_OPTIONS)
    def _typed(x):
        if isinstance(x, types.Float):
            return implementation32 if x.bitwidth <= 32 else implementation64
        if isinstance(x, (types.Integer, types.Boolean)):
            return lambda x: implementation64(np.float64(x))
        return None


_register(exp, _exp32, _exp64)
_register(expm1, _expm1_32, _expm1_64)
_register(log, _log32, _log64)
_register(log1p, _log1p32, _log1p64)
_register(tanh, _tanh32, _tanh64)
_register(sin, _sin32, _sin64)
_register(cos, _cos32, _cos64)
_register(erf, _erf32, _erf64)


# --- generated kernels -----------------------------------------------------------------
MODULE_ALIAS = "_kg_vmath"


class _MathCalls(ast.NodeTransformer):
    def __init__(self) -> None:
        self.replaced = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        function = node.func
        if (
            isinstance(function, ast.Attribute)
            and isinstance(function.value, ast.Name)
            and function.value.id == "math"
            and function.attr in FUNCTIONS
            and len(node.args) == 1
            and not node.keywords
            and not isinstance(node.args[0], ast.Starred)
        ):
            self.replaced += 1
            function.value = ast.Name(id=MODULE_ALIAS, ctx=ast.Load())
        return node


def vectorise_math_calls(source: str) -> tuple[str, str]:
    """Rewrite ``math.X(arg)`` calls (X in :data:`FUNCTIONS`) in a scalar function's
    source to the vectorisable versions here.

    Returns ``(source, header)``: ``header`` holds the import line (and the digest of this
    file) for the generated module, or is empty when nothing was replaced, in which case
    ``source`` is returned unchanged.

    >>> source, header = vectorise_math_calls("def f(x):\\n    return math.exp(-x)\\n")
    >>> print(source, end="")
    def f(x):
        return _kg_vmath.exp(-x)
    """
    tree = ast.parse(source)
    transformer = _MathCalls()
    tree = transformer.visit(tree)
    if not transformer.replaced:
        return source, ""
    header = (
        f"# math functions: kernelgrad.backends.cpu.vmath, source digest {SOURCE_DIGEST}\n"
        f"from kernelgrad.backends.cpu import vmath as {MODULE_ALIAS}\n"
    )
    return ast.unparse(tree) + "\n", header
