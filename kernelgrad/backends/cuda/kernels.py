"""Hand-written numba-cuda kernels that need no code generation: gather and scatter-add
(the random-number kernels are in ``rng.py``).

They are generic over dtypes (numba-cuda compiles one version per signature and, on a
GPU, caches it beside this file). All loops are grid-stride loops; every shape, stride
and offset is a scalar argument.

Index errors are reported through a small ``error`` array instead of a device-side
assert: ``error[0]`` receives an offending index and ``error[1]`` is set to 1. The
backend checks it lazily, at the next synchronisation (``flags.py``).
"""

from __future__ import annotations

from numba import cuda


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
