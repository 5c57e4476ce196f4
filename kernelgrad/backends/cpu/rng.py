"""The CPU backend's random numbers: the Philox4x32-10 functions of ``backends/philox.py``
in Numba loops over the elements (in parallel above the parallel threshold).

Element ``j`` of a fill is a function of (seed, counter + j) only, exactly as in the CUDA
backend's kernels, so both devices give the same bits for one seed. The loops have no
branches that depend on the data and no calls, so LLVM vectorises them (64-bit integer
products of 32-bit words are a single SIMD instruction on AVX2 and AVX-512).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import philox

_KERNELS = """

@njit(parallel=PARALLEL, cache=True, error_model="numpy", nogil=True)
def uniform_fill(out, low, high, seed_low, seed_high, counter, wide):
    for j in prange(out.shape[0]):
        out[j] = uniform_value(seed_low, seed_high, counter + j, low, high, wide)


@njit(parallel=PARALLEL, cache=True, error_model="numpy", nogil=True)
def normal_fill(out, mean, std, seed_low, seed_high, counter):
    for j in prange(out.shape[0]):
        out[j] = normal_value(seed_low, seed_high, counter + j, mean, std)


@njit(parallel=PARALLEL, cache=True, error_model="numpy", nogil=True)
def integers_fill(out, low, span, seed_low, seed_high, counter):
    for j in prange(out.shape[0]):
        out[j] = integer_value(seed_low, seed_high, counter + j, low, span)
"""

_modules: dict[bool, Any] = {}


def _module(parallel: bool) -> Any:
    module = _modules.get(parallel)
    if module is None:
        from ...codecache import load_module

        header = "from numba import njit, prange\n"
        functions = philox.device_source(
            '@njit(inline="always", cache=True, error_model="numpy", nogil=True)', "a * b"
        )
        kernels = _KERNELS.replace("PARALLEL", str(parallel))
        module = _modules[parallel] = load_module(header + functions + kernels, "cpu_philox")
    return module


def fill(
    target: np.ndarray,
    distribution: str,
    low: float,
    high: float,
    stream: philox.Stream,
    parallel: bool,
) -> None:
    """Fill the 1-D ``target`` with the next numbers of ``stream``: ``uniform``
    [low, high), ``normal`` (mean ``low``, std ``high``) or ``integers`` [low, high)."""
    if distribution not in ("uniform", "normal", "integers"):
        raise ValueError(f"unknown distribution {distribution!r}")
    module = _module(parallel)
    seed_low, seed_high, counter = stream.take(target.size)
    if distribution == "uniform":
        wide = target.dtype == np.float64
        module.uniform_fill(target, float(low), float(high), seed_low, seed_high, counter, wide)
    elif distribution == "normal":
        module.normal_fill(target, float(low), float(high), seed_low, seed_high, counter)
    else:
        span = np.uint64(int(high) - int(low))
        module.integers_fill(target, int(low), span, seed_low, seed_high, counter)
