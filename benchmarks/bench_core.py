"""Core CPU benchmarks: kernelgrad vs NumPy (same process) and PyTorch CPU (its own
process, where installed).

    python benchmarks/bench_core.py            # everything
    python benchmarks/bench_core.py --quick    # fewer repetitions
    python benchmarks/bench_core.py --only elementwise,startup [--threads 2]

Prints one line per case: the best and median time of ``--repeat`` repetitions (after
one warm-up call) for each library, and the ratio peer_time / kernelgrad_time (> 1
means kernelgrad is faster). Every library gets ``--threads`` threads (Numba, OpenBLAS,
PyTorch). PyTorch runs the same cases on the same data (the same seeded NumPy arrays)
with the same repetitions in a fresh process of its own: in kernelgrad's process it
would share kernelgrad's OpenMP runtime (see ``_timing.py``). Compile time is excluded
from the steady-state cases and measured separately (``startup``: fresh processes with
an empty and a warm kernel cache, and the time of ``import kernelgrad`` itself).
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
from _timing import import_torch, report_to_parent, run_peer, thread_counts, timeit, use_threads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kernelgrad as kg  # noqa: E402

SIZE = 16_000_000  # elements of the elementwise cases (--size)


# --- the cases: a callable to time, per library -----------------------------------------------
def _tensors(library: str, *arrays: np.ndarray) -> list:
    if library == "kernelgrad":
        return [kg.tensor(a) for a in arrays]
    if library == "torch":
        import torch

        return [torch.from_numpy(a) for a in arrays]
    return list(arrays)


def _vectors() -> tuple[np.ndarray, np.ndarray]:  # (SIZE,) float32 each
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal(SIZE).astype(np.float32),
        rng.standard_normal(SIZE).astype(np.float32),
    )


def add(library: str):
    a, b = _tensors(library, *_vectors())
    return lambda: a + b


def exp(library: str):
    a, _ = _tensors(library, *_vectors())
    return (lambda: np.exp(a)) if library == "numpy" else a.exp


def chain(library: str):
    a, b = _tensors(library, *_vectors())
    if library == "numpy":
        return lambda: (np.tanh(a * b + np.float32(1.0)) - a) * np.float32(0.5) + np.abs(b)
    return lambda: ((a * b + 1.0).tanh() - a) * 0.5 + b.abs()


def _square() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((4096, 4096)).astype(np.float32)


def total(library: str):
    (m,) = _tensors(library, _square())
    return m.sum


def column_sums(library: str):
    (m,) = _tensors(library, _square())
    return lambda: m.sum(0)


def bias_gradient(library: str):
    """The gradient of a Linear layer's bias: a (128, 256) gradient summed over the batch."""
    rng = np.random.default_rng(4)
    (g,) = _tensors(library, rng.standard_normal((128, 256)).astype(np.float32))
    return lambda: g.sum(0)


def matmul(library: str):
    rng = np.random.default_rng(2)
    a, b = _tensors(library, *(rng.standard_normal((1024, 1024)).astype(np.float32)
                               for _ in range(2)))  # fmt: skip
    return lambda: a @ b


def _mlp_arrays() -> list[np.ndarray]:
    """A 2-layer MLP (784 -> 256 -> 10, batch 128): inputs, labels, weights."""
    rng = np.random.default_rng(3)
    return [
        rng.standard_normal((128, 784)).astype(np.float32),
        rng.integers(0, 10, 128),
        (rng.standard_normal((784, 256)) * 0.05).astype(np.float32),
        np.zeros(256, np.float32),
        (rng.standard_normal((256, 10)) * 0.05).astype(np.float32),
        np.zeros(10, np.float32),
    ]


def mlp(library: str):
    """Forward and backward of the MLP with a softmax cross-entropy loss."""
    x, labels, *weights = _mlp_arrays()
    if library == "kernelgrad":
        tx, tlabels = kg.tensor(x), kg.tensor(labels)
        params = [kg.tensor(p, requires_grad=True) for p in weights]

        def loss_of(logits):
            return kg.nn.functional.cross_entropy(logits, tlabels)
    else:
        import torch

        tx, tlabels = torch.from_numpy(x), torch.from_numpy(labels)
        params = [torch.tensor(p, requires_grad=True) for p in weights]

        def loss_of(logits):
            return torch.nn.functional.cross_entropy(logits, tlabels)

    def step():
        w1, b1, w2, b2 = params
        loss = loss_of((tx @ w1 + b1).relu() @ w2 + b2)
        for p in params:
            p.grad = None
        loss.backward()
        return loss

    return step


# group -> [(label, case, libraries besides kernelgrad and PyTorch, repeat factor)]
GROUPS = {
    "elementwise": [
        ("add, {size} float32", add, ["numpy"], 1),
        ("exp, {size} float32", exp, ["numpy"], 1),
        ("chain of 6 ops, {size} float32", chain, ["numpy"], 1),
    ],
    "sum": [
        ("sum of 4096x4096 float32", total, ["numpy"], 1),
        ("sum over dim 0, 4096x4096", column_sums, ["numpy"], 1),
        ("sum over dim 0, 128x256", bias_gradient, ["numpy"], 20),
    ],
    "matmul": [("matmul 1024x1024 float32", matmul, ["numpy"], 1)],
    "mlp": [("MLP 784-256-10 fwd+bwd, batch 128", mlp, [], 4)],
}


def _label(label: str) -> str:
    size = f"{SIZE // 1_000_000}M" if SIZE % 1_000_000 == 0 else f"{SIZE:,}"
    return label.format(size=size)


def _duration(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:8.1f} us"


def report(name: str, results: dict[str, tuple[float, float]]) -> None:
    ours = results["kernelgrad"][0]
    parts = []
    for library, (best, median) in results.items():
        entry = f"{library} {_duration(best)} (median {_duration(median)})"
        if library != "kernelgrad":
            entry += f" -> ratio {best / ours:5.2f}x"
        parts.append(entry)
    print(f"{name:<34} " + " | ".join(parts), flush=True)


def compare(groups: list[str], repeat: int, threads: int) -> None:
    results: dict[str, dict[str, tuple[float, float]]] = {}
    losses = {}
    for group in groups:
        for label, case, others, factor in GROUPS[group]:
            label = _label(label)
            results[label] = {}
            for library in ["kernelgrad", *others]:
                fn = case(library)
                results[label][library] = timeit(fn, repeat * factor)
                if case is mlp:
                    losses[label] = fn().item()
    arguments = ["--only", ",".join(groups), "--repeat", str(repeat), "--threads", str(threads),
                 "--size", str(SIZE)]  # fmt: skip
    for record in run_peer(__file__, arguments):
        results[record["case"]]["torch"] = (record["best"], record["median"])
        if "loss" in record:
            difference = abs(record["loss"] - losses[record["case"]])
            assert difference < 1e-4, f"the two MLPs disagree: loss difference {difference}"
    for label, timings in results.items():
        report(label, timings)


def peer(groups: list[str], repeat: int, threads: int) -> None:
    """The --peer process: PyTorch's side of every case of ``groups``."""
    torch = import_torch(threads)
    if torch is None:
        return
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads, own process")
    for group in groups:
        for label, case, _, factor in GROUPS[group]:
            fn = case("torch")
            best, median = timeit(fn, repeat * factor)
            extra = {"loss": fn().item()} if case is mlp else {}
            report_to_parent(case=_label(label), best=best, median=median, **extra)


# --- kernelgrad alone: threads and start-up -----------------------------------------------------
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
    Measured in a fresh process (without PyTorch, whose libgomp would serve Numba too)."""
    out = subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT, str(repeat * 20), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
    )
    print(out.stdout, end="", flush=True)


IMPORT_SCRIPT = textwrap.dedent(
    """
    import sys, time
    start = time.perf_counter()
    import kernelgrad
    seconds = time.perf_counter() - start
    heavy = [m for m in ("numba", "numba.cuda", "cupy", "torch") if m in sys.modules]
    print(f"{seconds:.4f} {','.join(heavy) or '-'}")
    """
)

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


def _python(script: str, env: dict[str, str]) -> str:
    env = dict(env, PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def bench_startup(repeat: int) -> None:
    """``import kernelgrad`` alone (best and median of ``repeat`` fresh processes, and
    which heavy modules it loaded), then a process running 20 operations with an empty
    kernel cache and with a warm one."""
    imports = [_python(IMPORT_SCRIPT, dict(os.environ)).split() for _ in range(repeat)]
    seconds = sorted(float(s) for s, _ in imports)
    loaded = {modules for _, modules in imports}
    print(
        f"import kernelgrad: best {seconds[0]:.3f} s, median {seconds[len(seconds) // 2]:.3f} s"
        f" ({repeat} fresh processes); heavy modules imported: {', '.join(loaded)}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KERNELGRAD_CACHE_DIR=cache)
        timings = []
        for _ in range(3):
            start = time.perf_counter()
            count, inside = _python(STARTUP_SCRIPT, env).split()
            timings.append((time.perf_counter() - start, float(inside)))
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
    global SIZE
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (5)")
    parser.add_argument("--repeat", type=int, default=None, help="repetitions (default 15)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--size", type=int, default=SIZE, help="elements of the elementwise cases")
    parser.add_argument(
        "--only",
        default="",
        help=f"comma-separated subset: {','.join(GROUPS)},threads,startup",
    )
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_threads(args.threads)
    SIZE = args.size
    repeat = args.repeat or (5 if args.quick else 15)
    selected = [c for c in args.only.split(",") if c] or [*GROUPS, "threads", "startup"]
    groups = [name for name in selected if name in GROUPS]
    if args.peer:
        peer(groups, repeat, args.threads)
        return
    import numba

    print(
        f"kernelgrad {kg.__version__} | numpy {np.__version__} | numba {numba.__version__} | "
        f"{thread_counts()} | cores {os.cpu_count()} | best of {repeat}"
    )
    if groups:
        compare(groups, repeat, args.threads)
    if "threads" in selected:
        bench_threads(repeat)
    if "startup" in selected:
        bench_startup(repeat)


if __name__ == "__main__":
    main()
