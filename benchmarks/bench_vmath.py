"""The CPU backend's vectorisable math functions against Numba's ``math`` and NumPy.

    python benchmarks/bench_vmath.py                    # all functions, 16M elements
    python benchmarks/bench_vmath.py --functions exp,log --repeat 5 --size 4000000

For each function and dtype it times, in one run and on the same input:

* ``math``: a Numba loop calling ``math.X`` (one libm call per element),
* ``vmath``: the same loop calling ``kernelgrad.backends.cpu.vmath.X``,
* ``numpy``: NumPy's ufunc ``np.X`` (SIMD loops; ``erf`` from SciPy when installed),

each on one thread and, for the two Numba loops, with ``prange`` on all of Numba's
threads. Repetitions of all variants are interleaved so that load from other processes
spreads over them, and the best time of each is reported (the median beside it). Ratios:
``numpy/vmath`` (> 1: vmath is faster than NumPy) and ``math/vmath`` (the speed-up over
Numba's own math functions). Compile time is excluded (one warm-up call each).

A last section times kernelgrad's generated elementwise kernels that use these functions
(kernelgrad's own threads, against single-threaded NumPy expressions).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numba
import numpy as np
from numba import njit, prange

from kernelgrad.backends.cpu import vmath

try:
    from scipy import special as scipy_special
except ImportError:  # erf has no NumPy ufunc: its NumPy column is then skipped
    scipy_special = None


def _inputs(name: str, size: int, dtype: type) -> np.ndarray:
    """Arguments in the range where each function is typically used."""
    rng = np.random.default_rng(0)
    if name in ("log", "log1p"):
        values = np.exp(rng.uniform(-7.0, 7.0, size)) - (0.999 if name == "log1p" else 0.0)
    elif name == "exp":
        values = rng.uniform(-20.0, 20.0, size)
    elif name == "expm1":
        values = rng.uniform(-5.0, 5.0, size)
    elif name in ("sin", "cos"):
        values = rng.uniform(-10.0, 10.0, size)
    else:  # tanh, erf
        values = rng.standard_normal(size) * 2.0
    return values.astype(dtype)


def _loops(name: str):
    """(serial, parallel) Numba loops for math.X and for vmath.X."""
    math_function = getattr(math, name)
    vmath_function = getattr(vmath, name)
    loops = {}
    for label, function in (("math", math_function), ("vmath", vmath_function)):

        def serial(x, out, function=function):
            for i in range(x.size):
                out[i] = function(x[i])

        def parallel(x, out, function=function):
            for i in prange(x.size):
                out[i] = function(x[i])

        options = {"error_model": "numpy", "nogil": True}
        loops[label] = njit(**options)(serial)
        loops[label + " prange"] = njit(parallel=True, **options)(parallel)
    return loops


def _numpy_function(name: str):
    if name == "erf":
        return None if scipy_special is None else scipy_special.erf
    return getattr(np, name)


def _time(variants: dict, repeat: int) -> dict[str, tuple[float, float]]:
    for run in variants.values():
        run()  # compile, fault in memory
    times: dict[str, list[float]] = {label: [] for label in variants}
    for _ in range(repeat):
        for label, run in variants.items():
            start = time.perf_counter()
            run()
            times[label].append(time.perf_counter() - start)
    return {label: (min(values), statistics.median(values)) for label, values in times.items()}


def bench_function(name: str, dtype: type, size: int, repeat: int) -> None:
    x = _inputs(name, size, dtype)
    out = np.empty_like(x)
    variants = {label: (lambda loop=loop: loop(x, out)) for label, loop in _loops(name).items()}
    numpy_function = _numpy_function(name)
    if numpy_function is not None:

        def numpy_run():
            with np.errstate(all="ignore"):
                numpy_function(x, out=out)

        variants["numpy"] = numpy_run
    results = _time(variants, repeat)

    def ms(label: str) -> str:
        best, median = results[label]
        return f"{best * 1e3:7.1f} ({median * 1e3:6.1f})"

    vmath_best = results["vmath"][0]
    line = f"{name:<6} {np.dtype(dtype).name:<8}"
    line += f" | math {ms('math')} vmath {ms('vmath')}"
    if "numpy" in results:
        line += f" numpy {ms('numpy')} -> numpy/vmath {results['numpy'][0] / vmath_best:4.2f}x"
    else:
        line += " numpy       (none)           "
    line += f", math/vmath {results['math'][0] / vmath_best:5.1f}x"
    parallel_best = results["vmath prange"][0]
    line += f" | prange: math {ms('math prange')} vmath {ms('vmath prange')}"
    line += f" -> math/vmath {results['math prange'][0] / parallel_best:5.1f}x"
    print(line, flush=True)


def bench_kernels(size: int, repeat: int) -> None:
    """kernelgrad's generated elementwise kernels, which call vmath, against NumPy.

    ``sigmoid`` and ``gelu`` always run as generated kernels; ``exp`` and ``tanh`` do on
    a sliced view (on contiguous tensors the backend calls NumPy's ufuncs instead)."""
    import kernelgrad as kg
    from kernelgrad.ops.elementwise import GELU

    side = math.isqrt(size)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((side, side + 1)).astype(np.float32)
    ka = kg.tensor(a)
    view, numpy_view = ka[:, 1:], a[:, 1:]  # rows of unit stride, not contiguous
    one, half = np.float32(1.0), np.float32(0.5)
    cases = {
        "exp (sliced view)": (lambda: view.exp(), lambda: np.exp(numpy_view)),
        "tanh (sliced view)": (lambda: view.tanh(), lambda: np.tanh(numpy_view)),
        "sigmoid": (lambda: ka.sigmoid(), lambda: one / (one + np.exp(-a))),
    }
    if scipy_special is not None:
        cases["gelu"] = (
            lambda: GELU(ka),
            lambda: half * a * (one + scipy_special.erf(a * np.float32(0.5**0.5))),
        )
    for name, (ours, peer) in cases.items():
        results = _time({"kernelgrad": ours, "numpy": peer}, repeat)
        best, median = results["kernelgrad"]
        peer_best, peer_median = results["numpy"]
        print(
            f"{name:<18} {side}x{side} float32 | kernelgrad {best * 1e3:7.1f} "
            f"({median * 1e3:6.1f}) numpy {peer_best * 1e3:7.1f} ({peer_median * 1e3:6.1f})"
            f" -> numpy/kernelgrad {peer_best / best:4.2f}x",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--functions", default=",".join(vmath.FUNCTIONS))
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--no-kernels", action="store_true", help="skip the kernelgrad section")
    args = parser.parse_args()
    print(
        f"{args.size:,} elements, best (median) of {args.repeat} interleaved runs in ms, "
        f"Numba threads for prange: {numba.get_num_threads()}"
    )
    for name in args.functions.split(","):
        for dtype_name in args.dtypes.split(","):
            bench_function(name, getattr(np, dtype_name), args.size, args.repeat)
    if not args.no_kernels:
        bench_kernels(args.size, args.repeat)


if __name__ == "__main__":
    main()
