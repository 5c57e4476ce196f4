"""Matrix products of the benchmarks' models on kernelgrad's own OpenBLAS, one kernel
set against another (``backends/cpu/blas.py``: ``KG_BLAS_CORETYPE``).

    python benchmarks/bench_blas.py [--cores numpy,auto,Haswell] [--repeat 5]

Each kernel set runs in a fresh process (OpenBLAS reads its kernel set when it loads)
on one thread: every product is one ``cblas_sgemm`` call of kernelgrad's copy, the call
a prepared or compiled product makes (``split_gemm.gemm_batch``), timed by this
thread's CPU time, best of ``--repeat`` runs. ``auto`` is OpenBLAS's own choice for the
CPU, ``numpy`` the library NumPy loaded (``KG_BLAS_OWN=0``: what kernelgrad called before
it had a copy of its own, possibly another OpenBLAS version); the first line of each
process names the library and kernels. No peer: this compares BLAS builds and kernel
sets, not libraries.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's kernelgrad

# (name, rows of the result, columns, inner size, left transposed, right transposed):
# the products of an MLP 784-256-10, LeNet-5 and the cnn model at batch 128
PRODUCTS = [
    ("MLP forward x @ W1.T", 128, 256, 784, False, True),
    ("MLP weight grad g.T @ x", 256, 784, 128, True, False),
    ("MLP last layer h @ W2.T", 128, 10, 256, False, True),
    ("MLP last weight grad", 10, 256, 128, True, False),
    ("LeNet conv1 forward", 128 * 576, 6, 25, False, True),
    ("LeNet conv1 weight grad", 6, 25, 128 * 576, True, False),
    ("LeNet conv2 forward", 128 * 64, 16, 150, False, True),
    ("LeNet conv2 weight grad", 16, 150, 128 * 64, True, False),
    ("cnn 32->64 conv forward", 128 * 196, 64, 288, False, True),
]


def child(repeat: int) -> None:
    from kernelgrad.backends.cpu import blas, split_gemm

    print(f"  {blas.describe()}")
    rng = np.random.default_rng(0)
    for name, m, n, k, left_t, right_t in PRODUCTS:
        left = rng.standard_normal((k, m) if left_t else (m, k), dtype=np.float32)
        right = rng.standard_normal((n, k) if right_t else (k, n), dtype=np.float32)
        a, b = (left.T if left_t else left), (right.T if right_t else right)
        out = np.empty((m, n), np.float32)
        arguments = blas._split_arguments(a, b, out)
        calls = max(3, int(2e7 / (m * n * k + 1e5)))
        split_gemm.gemm_batch(*arguments)
        np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3)
        best = float("inf")
        for _ in range(repeat):
            start = time.thread_time()
            for _ in range(calls):
                split_gemm.gemm_batch(*arguments)
            best = min(best, (time.thread_time() - start) / calls)
        print(f"  {name:<28} {m:>6}x{k:<5} @ {k:>5}x{n:<4} {best * 1e6:10.1f} us", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cores", default="numpy,auto,Haswell", help="KG_BLAS_CORETYPE values, or numpy"
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.repeat)
        return
    for core in args.cores.split(","):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        env.update(NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        if core == "numpy":
            env["KG_BLAS_OWN"] = "0"
            print("KG_BLAS_OWN=0 (NumPy's library), one thread", flush=True)
        else:
            env["KG_BLAS_CORETYPE"] = core
            print(f"KG_BLAS_CORETYPE={core}, one thread", flush=True)
        command = [sys.executable, __file__, "--child", "--repeat", str(args.repeat)]
        subprocess.run(command, env=env, check=True)


if __name__ == "__main__":
    main()
