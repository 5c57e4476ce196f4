"""Core CPU benchmarks: kernelgrad vs NumPy (and PyTorch CPU where installed), in one run.

    python benchmarks/bench_core.py            # everything
    python benchmarks/bench_core.py --quick    # fewer repetitions

Prints one line per case: the best and median time of several repetitions for each
library, and the ratio peer_time / kernelgrad_time (> 1 means kernelgrad is faster).
Compile time is excluded from the steady-state cases (one warm-up call each) and
measured separately in fresh processes with an empty and a warm kernel cache.
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

import kernelgrad as kg

try:
    import torch
except ImportError:  # PyTorch is optional: its columns are skipped
    torch = None


def report(name: str, results: dict[str, tuple[float, float]]) -> None:
    ours = results["kernelgrad"][0]
    parts = []
    for library, (best, median) in results.items():
        entry = f"{library} {best * 1e3:8.2f} ms (median {median * 1e3:8.2f})"
        if library != "kernelgrad":
            entry += f" -> ratio {best / ours:5.2f}x"
        parts.append(entry)
    print(f"{name:<34} " + " | ".join(parts), flush=True)


def bench_elementwise(repeat: int) -> None:
    n = 16_000_000
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ka, kb = kg.tensor(a), kg.tensor(b)
    results = {
        "kernelgrad": timeit(lambda: ka + kb, repeat),
        "numpy": timeit(lambda: a + b, repeat),
    }
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        results["torch"] = timeit(lambda: ta + tb, repeat)
    report("add, 16M float32", results)

    results = {
        "kernelgrad": timeit(lambda: ka.exp(), repeat),
        "numpy": timeit(lambda: np.exp(a), repeat),
    }
    if torch is not None:
        results["torch"] = timeit(lambda: ta.exp(), repeat)
    report("exp, 16M float32", results)

    def chain_kg():
        return ((ka * kb + 1.0).tanh() - ka) * 0.5 + kb.abs()

    def chain_np():
        return (np.tanh(a * b + np.float32(1.0)) - a) * np.float32(0.5) + np.abs(b)

    results = {"kernelgrad": timeit(chain_kg, repeat), "numpy": timeit(chain_np, repeat)}
    if torch is not None:
        results["torch"] = timeit(lambda: ((ta * tb + 1.0).tanh() - ta) * 0.5 + tb.abs(), repeat)
    report("chain of 6 ops, 16M float32", results)


def bench_sum(repeat: int) -> None:
    m = np.random.default_rng(1).standard_normal((4096, 4096)).astype(np.float32)
    km = kg.tensor(m)
    results = {
        "kernelgrad": timeit(lambda: km.sum(), repeat),
        "numpy": timeit(lambda: m.sum(), repeat),
    }
    if torch is not None:
        tm = torch.from_numpy(m)
        results["torch"] = timeit(lambda: tm.sum(), repeat)
    report("sum of 4096x4096 float32", results)
    results = {
        "kernelgrad": timeit(lambda: km.sum(0), repeat),
        "numpy": timeit(lambda: m.sum(0), repeat),
    }
    if torch is not None:
        results["torch"] = timeit(lambda: tm.sum(0), repeat)
    report("sum over dim 0, 4096x4096", results)


def bench_matmul(repeat: int) -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    ka, kb = kg.tensor(a), kg.tensor(b)
    results = {
        "kernelgrad": timeit(lambda: ka @ kb, repeat),
        "numpy": timeit(lambda: a @ b, repeat),
    }
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        results["torch"] = timeit(lambda: ta @ tb, repeat)
    report("matmul 1024x1024 float32", results)


def bench_mlp(repeat: int) -> None:
    """A 2-layer MLP forward + backward (784 -> 256 -> 10, batch 128, softmax loss)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    labels = rng.integers(0, 10, 128)
    w1 = (rng.standard_normal((784, 256)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((256, 10)) * 0.05).astype(np.float32)
    b1 = np.zeros(256, np.float32)
    b2 = np.zeros(10, np.float32)

    kx, klabels = kg.tensor(x), kg.tensor(labels)
    kparams = [kg.tensor(p, requires_grad=True) for p in (w1, b1, w2, b2)]
    rows = kg.arange(128)

    def step_kg():
        kw1, kb1, kw2, kb2 = kparams
        logits = (kx @ kw1 + kb1).relu() @ kw2 + kb2
        loss = -logits.log_softmax(1)[rows, klabels].mean()
        for p in kparams:
            p.grad = None
        loss.backward()
        return loss

    results = {"kernelgrad": timeit(step_kg, repeat)}
    if torch is not None:
        tx, tlabels = torch.from_numpy(x), torch.from_numpy(labels)
        tparams = [torch.tensor(p, requires_grad=True) for p in (w1, b1, w2, b2)]

        def step_torch():
            tw1, tb1, tw2, tb2 = tparams
            logits = (tx @ tw1 + tb1).relu() @ tw2 + tb2
            loss = torch.nn.functional.cross_entropy(logits, tlabels)
            for p in tparams:
                p.grad = None
            loss.backward()
            return loss

        results["torch"] = timeit(step_torch, repeat)
        assert abs(step_kg().item() - step_torch().item()) < 1e-4
    report("MLP 784-256-10 fwd+bwd, batch 128", results)


THREADS_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    import kernelgrad as kg
    from kernelgrad.backends import cpu
    from _timing import timeit

    saved, repeat = cpu.PARALLEL_THRESHOLD, int(sys.argv[1])
    for n in (32_768, 131_072, 262_144, 1_048_576):
        x = kg.randn(n)
        cpu.PARALLEL_THRESHOLD = 1
        spread = [seconds * 1e6 for seconds in timeit(x.relu, repeat)]
        cpu.PARALLEL_THRESHOLD = 2**62
        one = [seconds * 1e6 for seconds in timeit(x.relu, repeat)]
        print(
            f"relu {n:>9,} float32: all threads {spread[0]:7.1f} us (median {spread[1]:7.1f})"
            f" | calling thread {one[0]:7.1f} us (median {one[1]:7.1f})"
            f" | threshold now {saved:,}"
        )
    """
)


def bench_threads(repeat: int) -> None:
    """ReLU over n float32 elements spread over the cores vs on the calling thread: where
    a parallel region starts to pay for waking the workers (KG_PARALLEL_THRESHOLD).

    Measured in a fresh process without PyTorch. PyTorch ships its own libgomp.so.1;
    loaded first, it apparently also serves Numba's OpenMP layer (one soname), having
    read GOMP_SPINCOUNT before kernelgrad set it, so its workers spin between regions
    and waking them is cheap (on an idle 2-core virtual machine ~13 us per region
    instead of ~90 us)."""
    out = subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT, str(repeat * 20), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
    )
    print(out.stdout, end="", flush=True)


STARTUP_SCRIPT = textwrap.dedent(
    """
    import time
    start = time.perf_counter()
    import kernelgrad as kg
    x = kg.rand(1000)
    y = kg.rand(1000)
    ops = [
        x + y, x - y, x * y, x / (y + 1), x ** 2, x.exp(), (x + 1).log(), x.sqrt(),
        x.tanh(), x.sigmoid(), x.relu(), x.abs(), kg.maximum(x, y), kg.minimum(x, y),
        x > y, kg.where(x > y, x, y), x.sum(), x.max(), x.argmax(),
        x.reshape(10, 100) @ y.reshape(100, 10),
    ]
    print(f"{len(ops)} {time.perf_counter() - start:.3f}")
    """
)


def bench_startup() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KERNELGRAD_CACHE_DIR=cache)
        timings = []
        for _ in range(3):
            start = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", STARTUP_SCRIPT],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            total = time.perf_counter() - start
            count, inside = out.stdout.split()
            timings.append((total, float(inside)))
    (cold_total, cold_inside), *warm = timings
    warm_total = min(t for t, _ in warm)
    warm_inside = min(i for _, i in warm)
    print(
        f"process using {count} ops: empty cache {cold_total:6.2f} s "
        f"(import+ops {cold_inside:.2f} s) | warm cache {warm_total:6.2f} s "
        f"(import+ops {warm_inside:.2f} s)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated subset: elementwise,sum,matmul,mlp,threads,startup",
    )
    args = parser.parse_args()
    repeat = 5 if args.quick else 15
    import numba

    print(
        f"kernelgrad {kg.__version__} | numpy {np.__version__} | numba {numba.__version__} | "
        f"torch {torch.__version__ if torch else 'not installed'} | threads: numba "
        f"{numba.get_num_threads()}, torch {torch.get_num_threads() if torch else '-'} | "
        f"cores {os.cpu_count()}"
    )
    cases = {
        "elementwise": lambda: bench_elementwise(repeat),
        "sum": lambda: bench_sum(repeat),
        "matmul": lambda: bench_matmul(repeat),
        "mlp": lambda: bench_mlp(repeat * 4),
        "threads": lambda: bench_threads(repeat),
        "startup": bench_startup,
    }
    selected = [c for c in args.only.split(",") if c] or list(cases)
    for name in selected:
        cases[name]()


if __name__ == "__main__":
    main()
