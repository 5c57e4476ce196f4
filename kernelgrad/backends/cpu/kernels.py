"""Hand-written Numba kernels of the CPU backend that need no code generation.

They are generic over dtypes (Numba compiles one version per signature and caches it
beside this file). Index errors are reported through a small ``error`` array instead
of raising inside a parallel loop: ``error[0]`` holds an offending index, ``error[1]`` 1.
"""

from __future__ import annotations

from numba import njit, prange

_OPTIONS = {"cache": True, "error_model": "numpy", "nogil": True}
CHUNK = 4096


def _take(x, pre, size, post, index, out, error):  # pragma: no cover - compiled
    """``out[p, b, q] = x[p, index[b], q]`` for contiguous ``x`` of shape (pre, size, post)."""
    n_index = index.shape[0]
    for work in prange(pre * n_index):
        p = work // n_index
        b = work - p * n_index
        i = index[b]
        if i < 0:
            i += size
        if i < 0 or i >= size:
            error[0] = index[b]
            error[1] = 1
            continue
        source = (p * size + i) * post
        target = work * post
        for q in range(post):
            out[target + q] = x[source + q]


def _index_add(out, pre, size, post, index, src, error):  # pragma: no cover - compiled
    """``out[p, index[b], q] += src[p, b, q]``; parallel over (p, q), so repeated indices
    never race."""
    n_index = index.shape[0]
    n_chunks = (post + CHUNK - 1) // CHUNK
    for work in prange(pre * n_chunks):
        p = work // n_chunks
        q0 = (work - p * n_chunks) * CHUNK
        q1 = min(q0 + CHUNK, post)
        for b in range(n_index):
            i = index[b]
            if i < 0:
                i += size
            if i < 0 or i >= size:
                error[0] = index[b]
                error[1] = 1
                continue
            target = (p * size + i) * post
            source = (p * n_index + b) * post
            for q in range(q0, q1):
                out[target + q] += src[source + q]


# ``prange`` runs as a plain ``range`` when compiled without ``parallel=True``: the serial
# twins serve small problems, for which starting a parallel region costs more than the work.
take_kernel = njit(parallel=True, **_OPTIONS)(_take)
take_kernel_serial = njit(parallel=False, **_OPTIONS)(_take)
index_add_kernel = njit(parallel=True, **_OPTIONS)(_index_add)
index_add_kernel_serial = njit(parallel=False, **_OPTIONS)(_index_add)
