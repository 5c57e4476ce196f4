"""Hand-written numba-cuda kernels that need no code generation: gather, scatter-add and
the random number generator.

They are generic over dtypes (numba-cuda compiles one version per signature and, on a
GPU, caches it beside this file). All loops are grid-stride loops; every shape, stride
and offset is a scalar argument.

Index errors are reported through a small ``error`` array instead of a device-side
assert: ``error[0]`` receives an offending index and ``error[1]`` is set to 1.

Random numbers come from Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy
as 1, 2, 3", SC 2011), a counter-based generator: element ``j`` of a call is a pure
function of (seed, counter + j). The numbers therefore do not depend on the launch
configuration (the simulator and every GPU give the same values for the same seed) and
the generator state is two host integers (seed, counter). All products are 32 x 32 ->
64 bit in unsigned 64-bit arithmetic, which never overflows.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

MASK32 = np.uint64(0xFFFFFFFF)
SHIFT32 = np.uint64(32)
PHILOX_M0 = np.uint64(0xD2511F53)
PHILOX_M1 = np.uint64(0xCD9E8D57)
PHILOX_W0 = np.uint64(0x9E3779B9)
PHILOX_W1 = np.uint64(0xBB67AE85)
TWO_PI = 2.0 * math.pi
INV_2_24 = 1.0 / 16777216.0
INV_2_53 = 1.0 / 9007199254740992.0


# --- gather / scatter-add -------------------------------------------------------------------
@cuda.jit(cache=True)
def take_kernel(
    n, pre, n_index, post, x, x_offset, x_pre, x_dim, x_post, size, index, i_offset, i_stride,
    out, out_offset, error,
):  # fmt: skip
    """``out[p, b, q] = x[p, index[b], q]``; ``out`` contiguous from ``out_offset``."""
    for linear in range(cuda.grid(1), n, cuda.gridsize(1)):
        q = linear % post
        rest = linear // post
        b = rest % n_index
        p = rest // n_index
        raw = index[i_offset + b * i_stride]
        i = raw
        if i < 0:
            i += size
        if i < 0 or i >= size:
            error[0] = raw
            error[1] = 1
            continue
        out[out_offset + linear] = x[x_offset + p * x_pre + i * x_dim + q * x_post]


@cuda.jit(cache=True)
def index_add_kernel(
    n, pre, n_index, post, out, out_offset, o_pre, o_dim, o_post, size, index, i_offset,
    i_stride, source, s_offset, error,
):  # fmt: skip
    """``out[p, index[b], q] += source[p, b, q]`` with atomics (repeated indices add up)."""
    for linear in range(cuda.grid(1), n, cuda.gridsize(1)):
        q = linear % post
        rest = linear // post
        b = rest % n_index
        p = rest // n_index
        raw = index[i_offset + b * i_stride]
        i = raw
        if i < 0:
            i += size
        if i < 0 or i >= size:
            error[0] = raw
            error[1] = 1
            continue
        position = out_offset + p * o_pre + i * o_dim + q * o_post
        cuda.atomic.add(out, position, source[s_offset + linear])


# --- random numbers -------------------------------------------------------------------------
@cuda.jit(device=True)
def philox4x32(c0, c1, k0, k1):
    """Philox4x32-10 of the counter (c0, c1, 0, 0) under the key (k0, k1); all words are
    uint64 values below 2**32."""
    c2 = np.uint64(0)
    c3 = np.uint64(0)
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


@cuda.jit(device=True)
def _unit(word0, word1, wide):
    """A uniform float in [0, 1): 53 random bits when ``wide``, else 24 (so that the
    largest value, 1 - 2**-24, still rounds below 1 in float32)."""
    if wide:
        high = np.float64(word0 >> np.uint64(5))
        low = np.float64(word1 >> np.uint64(6))
        return (high * 67108864.0 + low) * INV_2_53
    return np.float64(word0 >> np.uint64(8)) * INV_2_24


@cuda.jit(device=True)
def _words(seed_low, seed_high, counter):
    c = np.uint64(counter)
    return philox4x32(c & MASK32, c >> SHIFT32, seed_low, seed_high)


@cuda.jit(cache=True)
def uniform_kernel(n, out, out_offset, low, high, seed_low, seed_high, counter, wide):
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        w0, w1, _w2, _w3 = _words(seed_low, seed_high, counter + j)
        out[out_offset + j] = low + (high - low) * _unit(w0, w1, wide)


@cuda.jit(cache=True)
def normal_kernel(n, out, out_offset, mean, std, seed_low, seed_high, counter, wide):
    """Box-Muller: two uniforms from one Philox call give one normal sample."""
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        w0, w1, w2, w3 = _words(seed_low, seed_high, counter + j)
        u1 = 1.0 - _unit(w0, w1, True)  # in (0, 1], so log(u1) is finite
        u2 = _unit(w2, w3, True)
        radius = math.sqrt(-2.0 * math.log(u1))
        out[out_offset + j] = mean + std * radius * math.cos(TWO_PI * u2)


@cuda.jit(cache=True)
def integers_kernel(n, out, out_offset, low, span, seed_low, seed_high, counter):
    """Integers in [low, low + span): a 64-bit random word modulo ``span``."""
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        w0, w1, _w2, _w3 = _words(seed_low, seed_high, counter + j)
        word = w0 | (w1 << SHIFT32)
        out[out_offset + j] = low + np.int64(word % span)
