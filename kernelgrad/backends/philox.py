"""Counter-based random numbers, written once for every backend: Philox4x32-10 and its
transforms to uniform floats, normal floats and integers.

Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011)
turns a 128-bit counter and a 64-bit key into 128 random bits. Element ``j`` of a fill
is a pure function of (seed, counter + j), so the numbers depend on neither the launch
configuration nor the device: the CPU backend (a Numba loop over ``j``, in parallel)
and the CUDA backend (a grid-stride kernel) compile the functions below and give the
same bits for one seed. ``kg.manual_seed(0)`` then builds the same model on both.

**Bit for bit on every device.** Only operations that IEEE 754 rounds exactly are used:
integer arithmetic, ``+``, ``-``, ``/``, ``math.sqrt`` and conversions, and every
floating-point product goes through :func:`mul`. The CUDA compiler contracts a product
that feeds a sum into one fused multiply-add (one rounding instead of two) unless told
otherwise, the CPU compiler does not; CUDA's :func:`mul` is ``libdevice.dmul_rn``, a
product the compiler never fuses (``mul.rn.f64`` in the PTX, which a test checks).
``math.log`` and ``math.cos`` differ in the last bit between glibc and CUDA's libdevice,
so the normal transform carries its own logarithm and cosine (FreeBSD's msun
polynomials, accurate to about one unit in the last place).

The functions run as plain Python too (slowly): the tests use them as the reference.

>>> import numpy as np
>>> words = philox4x32(*(np.uint64(0),) * 6)  # the Random123 known-answer vector
>>> [f"{int(w):08x}" for w in words]
['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']
"""

from __future__ import annotations

import inspect
import math
import secrets
import warnings

import numpy as np

MASK32 = np.uint64(0xFFFFFFFF)
MASK64 = (1 << 64) - 1
SHIFT32 = np.uint64(32)
PHILOX_M0 = np.uint64(0xD2511F53)
PHILOX_M1 = np.uint64(0xCD9E8D57)
PHILOX_W0 = np.uint64(0x9E3779B9)
PHILOX_W1 = np.uint64(0xBB67AE85)
TWO_53 = np.uint64(1 << 53)
INV_2_24 = 1.0 / 16777216.0
INV_2_53 = 1.0 / 9007199254740992.0
TWO_PI = 2.0 * math.pi
SQRT2 = math.sqrt(2.0)
# log(1 + f) = f - (f*f/2 - s*(f*f/2 + R(s*s))), s = f / (2 + f) (msun e_log.c)
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
LG1 = 6.666666666666735130e-01
LG2 = 3.999999999940941908e-01
LG3 = 2.857142874366239149e-01
LG4 = 2.222219843214978396e-01
LG5 = 1.818357216161805012e-01
LG6 = 1.531383769920937332e-01
LG7 = 1.479819860511658591e-01
# cos and sin on [-pi/4, pi/4] (msun k_cos.c, k_sin.c)
C1 = 4.16666666666666019037e-02
C2 = -1.38888888888741095749e-03
C3 = 2.48015872894767294178e-05
C4 = -2.75573143513906633035e-07
C5 = 2.08757232129817482790e-09
C6 = -1.13596475577881948265e-11
S1 = -1.66666666666666324348e-01
S2 = 8.33333333332248946124e-03
S3 = -1.98412698298579493134e-04
S4 = 2.75573137070700676789e-06
S5 = -2.50507602534068634195e-08
S6 = 1.58969099521155010221e-10

CONSTANTS = (
    "MASK32", "SHIFT32", "PHILOX_M0", "PHILOX_M1", "PHILOX_W0", "PHILOX_W1", "TWO_53",
    "INV_2_24", "INV_2_53", "TWO_PI", "SQRT2", "LN2_HI", "LN2_LO", "LG1", "LG2", "LG3",
    "LG4", "LG5", "LG6", "LG7", "C1", "C2", "C3", "C4", "C5", "C6", "S1", "S2", "S3",
    "S4", "S5", "S6",
)  # fmt: skip


def mul(a, b):
    """``a * b`` rounded once, never fused with a following sum (see the module
    docstring; the CUDA backend replaces this body with ``libdevice.dmul_rn``)."""
    return a * b


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of the counter (c0, c1, c2, c3) under the key (k0, k1). Every word is
    a uint64 below 2**32; products are 32 x 32 -> 64 bits and never overflow."""
    for _ in range(10):
        product0 = PHILOX_M0 * c0
        product1 = PHILOX_M1 * c2
        high0 = product0 >> SHIFT32
        low0 = product0 & MASK32
        high1 = product1 >> SHIFT32
        low1 = product1 & MASK32
        c0 = high1 ^ c1 ^ k0
        c1 = low1
        c2 = high0 ^ c3 ^ k1
        c3 = low0
        k0 = (k0 + PHILOX_W0) & MASK32
        k1 = (k1 + PHILOX_W1) & MASK32
    return c0, c1, c2, c3


def counter_words(seed_low, seed_high, counter):
    """The four random words of element ``counter`` (a non-negative int64)."""
    c = np.uint64(counter)
    zero = np.uint64(0)
    return philox4x32(c & MASK32, c >> SHIFT32, zero, zero, seed_low, seed_high)


def bits53(word0, word1):
    """53 random bits (27 from ``word0``, 26 from ``word1``) as an integer."""
    return ((word0 >> np.uint64(5)) << np.uint64(26)) | (word1 >> np.uint64(6))


def unit_float(word0, word1, wide):
    """A uniform float in [0, 1): 53 random bits when ``wide`` (float64 results), else 24,
    so that the largest value, 1 - 2**-24, still rounds below 1 in float32. Exact."""
    if wide:
        return mul(np.float64(bits53(word0, word1)), INV_2_53)
    return mul(np.float64(word0 >> np.uint64(8)), INV_2_24)


def _split_bits(v, e, scale, bits, factor):
    """One step of a binary search for the highest set bit of ``v``: if ``v`` has more
    than ``bits`` bits, shift them out, count them in ``e`` and scale by ``factor``
    (2**-bits). Selects, not branches, so that the CPU's loops vectorise."""
    above = v >= (np.uint64(1) << np.uint64(bits))
    v = (v >> np.uint64(bits)) if above else v
    e += bits if above else 0
    return v, e, mul(scale, factor if above else 1.0)


def log_fraction(k):
    """``ln(k / 2**53)`` for an integer ``1 <= k <= 2**53`` (msun's logarithm)."""
    # k = m * 2**e with m in [1, 2): e by a binary search over the bits
    v, e, scale = _split_bits(k, 0, 1.0, 32, 2.0**-32)
    v, e, scale = _split_bits(v, e, scale, 16, 2.0**-16)
    v, e, scale = _split_bits(v, e, scale, 8, 2.0**-8)
    v, e, scale = _split_bits(v, e, scale, 4, 2.0**-4)
    v, e, scale = _split_bits(v, e, scale, 2, 0.25)
    v, e, scale = _split_bits(v, e, scale, 1, 0.5)
    m = mul(np.float64(k), scale)
    above = m > SQRT2  # then halve m, so that f = m - 1 stays within [-0.3, 0.42]
    m = mul(m, 0.5 if above else 1.0)
    e += 1 if above else 0
    f = m - 1.0
    exponent = np.float64(e - 53)
    s = f / (2.0 + f)
    z = mul(s, s)
    w = mul(z, z)
    t1 = mul(w, LG2 + mul(w, LG4 + mul(w, LG6)))
    t2 = mul(z, LG1 + mul(w, LG3 + mul(w, LG5 + mul(w, LG7))))
    r = t2 + t1
    hfsq = mul(mul(0.5, f), f)
    inner = hfsq - (mul(s, hfsq + r) + mul(exponent, LN2_LO))
    return mul(exponent, LN2_HI) - (inner - f)


def cos_turn(t):
    """``cos(2 pi t)`` for ``0 <= t < 1`` (a quarter turn is split off exactly)."""
    quarter = np.int64(mul(t, 4.0) + 0.5)  # the nearest multiple of a quarter turn
    x = mul(TWO_PI, t - mul(np.float64(quarter), 0.25))  # |x| <= pi / 4
    z = mul(x, x)
    w = mul(z, z)
    r = mul(z, C1 + mul(z, C2 + mul(z, C3))) + mul(mul(w, w), C4 + mul(z, C5 + mul(z, C6)))
    half = mul(0.5, z)
    near = 1.0 - half
    cosine = near + (((1.0 - near) - half) + mul(z, r))
    r = S2 + mul(z, S3 + mul(z, S4)) + mul(mul(z, w), S5 + mul(z, S6))
    sine = x + mul(mul(z, x), S1 + mul(z, r))
    # cos(x + q pi / 2) for q = 0, 1, 2, 3: cos x, -sin x, -cos x, sin x
    value = sine if (quarter & 1) == 1 else cosine
    return -value if ((quarter + 1) & 2) != 0 else value


def uniform_value(seed_low, seed_high, counter, low, high, wide):
    """Element ``counter`` of U(low, high)."""
    w0, w1, _w2, _w3 = counter_words(seed_low, seed_high, counter)
    return low + mul(high - low, unit_float(w0, w1, wide))


def normal_value(seed_low, seed_high, counter, mean, std):
    """Element ``counter`` of N(mean, std**2), by Box-Muller from one Philox call: a
    radius from 53 bits of (0, 1] and an angle from 53 bits of [0, 1)."""
    w0, w1, w2, w3 = counter_words(seed_low, seed_high, counter)
    radius = math.sqrt(mul(-2.0, log_fraction(TWO_53 - bits53(w0, w1))))
    angle = mul(np.float64(bits53(w2, w3)), INV_2_53)
    return mean + mul(std, mul(radius, cos_turn(angle)))


def integer_value(seed_low, seed_high, counter, low, span):
    """Element ``counter`` of the integers in [low, low + span): a 64-bit word mod span."""
    w0, w1, _w2, _w3 = counter_words(seed_low, seed_high, counter)
    word = w0 | (w1 << SHIFT32)
    return low + np.int64(word % span)


FUNCTIONS = (
    philox4x32, counter_words, bits53, unit_float, _split_bits, log_fraction, cos_turn,
    uniform_value, normal_value, integer_value,
)  # fmt: skip


class Stream:
    """A backend's generator state: a 64-bit seed and the count of numbers drawn (a
    counter-based generator needs nothing else). Unseeded, the seed is random."""

    def __init__(self) -> None:
        self.seed = secrets.randbits(63)
        self.counter = 0

    def manual_seed(self, seed: int) -> None:
        self.seed = int(seed) & MASK64
        self.counter = 0

    def get_state(self) -> dict[str, int]:
        return {"seed": self.seed, "counter": self.counter}

    def set_state(self, state: dict[str, int]) -> None:
        """Restore :meth:`get_state`'s dictionary. A state of NumPy's PCG64 generator
        (which the CPU backend used before) seeds the stream from its numbers, with a
        warning: the numbers drawn after it differ from the run that saved it."""
        if "seed" not in state and state.get("bit_generator") == "PCG64":
            warnings.warn(
                "this random-number state comes from NumPy's PCG64 generator, which "
                "kernelgrad's CPU backend no longer uses (it draws from Philox4x32-10, as "
                "CUDA does): the stream is seeded from the state instead, so the numbers "
                "that follow differ from those of the run that saved it",
                RuntimeWarning,
                stacklevel=3,
            )
            self.manual_seed(int(state["state"]["state"]))
            return
        self.seed = int(state["seed"]) & MASK64
        self.counter = int(state["counter"])

    def take(self, count: int) -> tuple[np.uint64, np.uint64, int]:
        """The key words and the first counter of the next ``count`` numbers."""
        counter = self.counter
        self.counter += count
        return np.uint64(self.seed & 0xFFFFFFFF), np.uint64(self.seed >> 32), counter


def device_source(decorator: str, mul_body: str) -> str:
    """The constants and functions above as module source: each function decorated with
    ``decorator`` (e.g. ``@njit(inline="always")``), :func:`mul` returning ``mul_body``."""
    lines = ["import math", "import numpy as np", ""]
    lines += [f"{name} = {_literal(globals()[name])}" for name in CONSTANTS]
    lines += ["", "", decorator, "def mul(a, b):", f"    return {mul_body}", ""]
    for function in FUNCTIONS:
        body = inspect.getsource(function)
        lines += ["", decorator, body]
    return "\n".join(lines) + "\n"


def _literal(value: object) -> str:
    if isinstance(value, np.uint64):
        return f"np.uint64({int(value)})"
    return repr(float(value))
