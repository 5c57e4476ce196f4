"""User kernels on the CPU: against hand-written Numba, the clamp loop, a tiled
shared-memory matmul, compile latency.

Compares, in one run on the same machine:

* four ``@kg.kernel`` shapes against the same loops hand-written in Numba (``prange``
  over rows, a plain inner loop, float32 accumulators), printing the time ratio: a 3x3
  box blur over ``kg.index(2)``, one work item per row with a loop inside, a 1-D
  ``axpy``, and a workgroup tree reduction (``kg.shared`` + ``kg.barrier``) against a
  loop over chunks;
* ``clamp_`` (the loop a Knet user wrote for a 300x300 image) as a ``@kg.kernel``
  against NumPy's ``np.clip(..., out=...)`` and against the same loop in pure Python
  (over a NumPy array, and over a kernelgrad tensor -- element access from Python);
* the tiled matmul kernel (``kg.shared`` + ``kg.barrier``, the CPU runs workgroups as
  phases) against the backend's matmul (BLAS) for a few sizes;
* compile latency: the first call of a kernel, an ``@kg.elementwise`` function and a
  ``kg.compile``d function in a fresh process with an empty cache
  (``KERNELGRAD_CACHE_DIR`` set to a new temporary folder), then in a second fresh
  process that loads the compiled code from that cache.

Times are the best (and median) of several repetitions after a warm-up; the machine is
shared, so the best run is the least disturbed. Usage::

    python benchmarks/bench_kernels.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
from _timing import timeit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kernelgrad as kg  # noqa: E402


@kg.kernel
def clamp_(img):
    i = kg.index()
    v = img[i]
    if v > 1.0:
        img[i] = 1.0
    elif v < 0.0:
        img[i] = 0.0


TILE = 16


@kg.kernel
def matmul_tiled(c, a, b):
    i, j = kg.index(2)
    li, lj = kg.local_index(2)
    tile_a = kg.shared((TILE, TILE), kg.float32)
    tile_b = kg.shared((TILE, TILE), kg.float32)
    n = a.shape[0]
    k = a.shape[1]
    m = b.shape[1]
    acc = 0.0
    for t in range((k + TILE - 1) // TILE):
        col = t * TILE + lj
        row = t * TILE + li
        if i < n and col < k:
            tile_a[li, lj] = a[i, col]
        else:
            tile_a[li, lj] = 0.0
        if row < k and j < m:
            tile_b[li, lj] = b[row, j]
        else:
            tile_b[li, lj] = 0.0
        kg.barrier()
        for kk in range(TILE):
            acc += tile_a[li, kk] * tile_b[kk, lj]
        kg.barrier()
    if i < n and j < m:
        c[i, j] = acc


# --- @kg.kernel against the same loop hand-written in Numba --------------------------------
@kg.kernel
def box_blur(out, img):
    i, j = kg.index(2)
    if i == 0 or j == 0 or i >= img.shape[0] - 1 or j >= img.shape[1] - 1:
        return
    s = 0.0
    for di in range(-1, 2):
        for dj in range(-1, 2):
            s += img[i + di, j + dj]
    out[i, j] = s / 9.0


@kg.kernel
def row_sums(out, x):
    i = kg.index()
    s = 0.0
    for j in range(x.shape[1]):
        s += x[i, j] * x[i, j]
    out[i] = s


@kg.kernel
def axpy(out, alpha, x, y):
    i = kg.index()
    out[i] = alpha * x[i] + y[i]


GROUP = 256


@kg.kernel
def group_sums(out, x):
    i = kg.index()
    lane = kg.local_index()
    partial = kg.shared((GROUP,), kg.float32)
    partial[lane] = x[i] if i < x.shape[0] else 0.0
    kg.barrier()
    half = GROUP // 2
    while half > 0:
        if lane < half:
            partial[lane] += partial[lane + half]
        kg.barrier()
        half //= 2
    if lane == 0:
        out[kg.group_index()] = partial[0]


def _numba_pairs() -> dict:
    """The hand-written Numba loops: what a Numba user writes for the same work (prange
    over rows, a plain inner loop, float32 accumulators)."""
    from numba import njit, prange

    @njit(parallel=True, cache=True, error_model="numpy", nogil=True)
    def blur(out, img):
        rows, cols = img.shape
        for i in prange(1, rows - 1):
            for j in range(1, cols - 1):
                s = np.float32(0.0)
                for di in range(-1, 2):
                    for dj in range(-1, 2):
                        s += img[i + di, j + dj]
                out[i, j] = s / np.float32(9.0)

    @njit(parallel=True, cache=True, error_model="numpy", nogil=True)
    def sums(out, x):
        for i in prange(x.shape[0]):
            s = np.float32(0.0)
            for j in range(x.shape[1]):
                s += x[i, j] * x[i, j]
            out[i] = s

    @njit(parallel=True, cache=True, error_model="numpy", nogil=True)
    def saxpy(out, alpha, x, y):
        for i in prange(x.shape[0]):
            out[i] = alpha * x[i] + y[i]

    @njit(parallel=True, cache=True, error_model="numpy", nogil=True)
    def chunk_sums(out, x):
        for g in prange(out.shape[0]):
            s = np.float32(0.0)
            for k in range(g * GROUP, min((g + 1) * GROUP, x.shape[0])):
                s += x[k]
            out[g] = s

    return {"blur": blur, "sums": sums, "saxpy": saxpy, "chunk_sums": chunk_sums}


def bench_pairs(repeat: int, quick: bool) -> None:
    print("\n@kg.kernel against the same loop hand-written in Numba (float32 tensors)")
    numba = _numba_pairs()
    rng = np.random.default_rng(2)
    side = 512 if quick else 1024
    img = rng.standard_normal((side, side)).astype(np.float32)
    x2 = rng.standard_normal((2048 if quick else 4096, 1024)).astype(np.float32)
    n = 1 << (20 if quick else 22)
    x1, y1 = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    groups = -(-n // GROUP)
    cases = [
        (
            f"box blur 3x3, {side}x{side} (kg.index(2))",
            lambda out, a: box_blur(out, a, ndrange=a.shape),
            numba["blur"],
            (np.zeros_like(img), img),
        ),
        (
            f"row sums of squares, {x2.shape[0]}x{x2.shape[1]} (an item per row)",
            lambda out, a: row_sums(out, a, ndrange=a.shape[0]),
            numba["sums"],
            (np.zeros(x2.shape[0], np.float32), x2),
        ),
        (
            f"axpy, {n} elements (1-D)",
            lambda out, a, b: axpy(out, 2.0, a, b, ndrange=a.shape[0]),
            lambda out, a, b: numba["saxpy"](out, np.float32(2.0), a, b),
            (np.zeros(n, np.float32), x1, y1),
        ),
        (
            f"group sums, {n} elements in groups of {GROUP} (kg.shared + kg.barrier)",
            lambda out, a: group_sums(out, a, ndrange=groups * GROUP, workgroup=GROUP),
            numba["chunk_sums"],
            (np.zeros(groups, np.float32), x1),
        ),
    ]
    for label, kernel_call, numba_call, arrays in cases:
        tensors = [kg.tensor(a) for a in arrays]
        expected = [a.copy() for a in arrays]
        kernel_call(*tensors)
        numba_call(*expected)
        np.testing.assert_allclose(tensors[0].numpy(), expected[0], rtol=1e-4, atol=1e-3)
        kernel = timeit(lambda t=tensors, f=kernel_call: f(*t), repeat * 5)
        hand = timeit(lambda e=expected, f=numba_call: f(*e), repeat * 5)
        print(
            f"  {label:<62} kernel {fmt(kernel[0])}  Numba {fmt(hand[0])}"
            f"  kernel/Numba {kernel[0] / hand[0]:5.2f}"
        )


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:8.2f} s "
    if seconds >= 1e-3:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds * 1e6:8.1f} us"


def python_clamp(img) -> None:
    """The clamp loop in pure Python, over a NumPy array or a kernelgrad tensor."""
    rows, cols = img.shape
    for i in range(rows):
        for j in range(cols):
            v = img[i, j]
            if v > 1.0:
                img[i, j] = 1.0
            elif v < 0.0:
                img[i, j] = 0.0


def bench_clamp(repeat: int) -> None:
    values = np.random.default_rng(0).uniform(-1, 2, (300, 300)).astype(np.float32)
    img = kg.tensor(values)
    array = values.copy()
    print("\nclamp of a 300x300 float32 image (in place)")
    kernel = timeit(lambda: clamp_(img, ndrange=img.numel()), repeat * 20)
    numpy = timeit(lambda: np.clip(array, 0.0, 1.0, out=array), repeat * 20)
    loop = timeit(lambda: python_clamp(values.copy()), 2)
    corner = kg.tensor(values[:30, :30])
    start = time.perf_counter()
    python_clamp(corner)
    tensor_loop = (time.perf_counter() - start) * 100  # 30x30 measured, x100 elements
    print(f"  @kg.kernel clamp_             best {fmt(kernel[0])}  median {fmt(kernel[1])}")
    print(
        f"  np.clip(out=)                 best {fmt(numpy[0])}  median {fmt(numpy[1])}"
        f"   kernel/np.clip time ratio {kernel[0] / numpy[0]:6.2f}"
    )
    print(
        f"  Python loop over NumPy array  best {fmt(loop[0])}                       "
        f"   {loop[0] / kernel[0]:8.0f}x the kernel's time"
    )
    print(
        f"  Python loop over a kg tensor       {fmt(tensor_loop)} (30x30 timed, x100)"
        f"   {tensor_loop / kernel[0]:8.0f}x the kernel's time"
    )


def bench_matmul(repeat: int, sizes: list[int]) -> None:
    print(f"\ntiled matmul kernel (TILE={TILE}, kg.shared + kg.barrier) vs the backend's matmul")
    rng = np.random.default_rng(1)
    for n in sizes:
        a = kg.tensor(rng.standard_normal((n, n)), dtype=kg.float32)
        b = kg.tensor(rng.standard_normal((n, n)), dtype=kg.float32)
        c = kg.zeros(n, n)
        padded = -(-n // TILE) * TILE

        def tiled(c=c, a=a, b=b, padded=padded) -> None:
            matmul_tiled(c, a, b, ndrange=(padded, padded), workgroup=(TILE, TILE))

        tiled()
        np.testing.assert_allclose(c.numpy(), (a @ b).numpy(), rtol=1e-3, atol=1e-3)
        kernel = timeit(tiled, repeat)
        blas = timeit(lambda a=a, b=b: a @ b, repeat)
        gflops = 2 * n**3 / 1e9
        print(
            f"  n={n:5d}  kernel best {fmt(kernel[0])} ({gflops / kernel[0]:6.2f} GFLOP/s)"
            f"   backend matmul best {fmt(blas[0])} ({gflops / blas[0]:7.2f} GFLOP/s)"
            f"   kernel/matmul time {kernel[0] / blas[0]:6.1f}x"
        )


LATENCY_SCRIPT = textwrap.dedent(
    """
    import sys, time
    start = time.perf_counter()
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {bench!r})
    import numpy as np
    import kernelgrad as kg
    from bench_kernels import clamp_, matmul_tiled, TILE
    imported = time.perf_counter()

    @kg.elementwise
    def soft_clip(x, limit):
        return limit * kg.tanh(x / limit)

    def affine_gelu(x, w, b):
        y = x @ w + b
        return 0.5 * y * (1 + (y * 0.7071067811865476).erf())

    compiled = kg.compile(affine_gelu)
    img = kg.tensor(np.random.default_rng(0).uniform(-1, 2, (300, 300)).astype(np.float32))
    a, b, c = kg.randn(40, 40), kg.randn(40, 40), kg.zeros(40, 40)
    x, w, bias = kg.randn(8, 16), kg.randn(16, 32), kg.randn(32)
    marks = []
    for name, call in [
        ("kernel clamp_", lambda: clamp_(img, ndrange=img.numel())),
        ("kernel matmul_tiled", lambda: matmul_tiled(c, a, b, ndrange=(48, 48),
                                                       workgroup=(TILE, TILE))),
        ("elementwise soft_clip", lambda: soft_clip(img, 2.0)),
        ("kg.compile affine_gelu (trace+fuse)", lambda: compiled(x, w, bias)),
    ]:
        t = time.perf_counter()
        call()
        marks.append((name, time.perf_counter() - t))
    print("IMPORT", imported - start)
    for name, seconds in marks:
        print("MARK", name, "|", seconds)
    """
)


def bench_latency() -> None:
    print("\ncompile latency of a first call (fresh process each)")
    script = LATENCY_SCRIPT.format(root=str(ROOT), bench=str(Path(__file__).parent))
    with tempfile.TemporaryDirectory(prefix="kernelgrad-bench-cache-") as cache:
        env = dict(os.environ, KERNELGRAD_CACHE_DIR=cache)
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        runs = {}
        for label in ("empty cache", "warm cache (new process)"):
            done = subprocess.run(
                [sys.executable, "-c", script],
                env=env,
                capture_output=True,
                text=True,
                timeout=1200,
            )
            if done.returncode:
                print(done.stderr[-2000:])
                return
            runs[label] = done.stdout
    for label, output in runs.items():
        print(f"  {label}:")
        for line in output.splitlines():
            if line.startswith("IMPORT"):
                print(
                    f"    import kernelgrad + kernels module       {float(line.split()[1]):7.2f} s"
                )
            elif line.startswith("MARK"):
                name, seconds = line[5:].split(" | ")
                print(f"    {name:<40} {float(seconds):7.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and sizes")
    args = parser.parse_args()
    repeat = 3 if args.quick else 7
    print(f"{os.cpu_count()} cores; Numba threads: {__import__('numba').get_num_threads()}")
    bench_pairs(repeat, args.quick)
    bench_clamp(repeat)
    bench_matmul(repeat, [128, 256] if args.quick else [128, 256, 512])
    bench_latency()


if __name__ == "__main__":
    main()
