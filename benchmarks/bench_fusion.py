"""Fusion: a chain of 8 elementwise ops, and a small MLP training step.

Compares, in one run on the same machine:

* two chains of 8 elementwise ops on 16M float32 values (arithmetic only, and one
  with a tanh): eager kernelgrad (8 kernels), ``@kg.elementwise`` (one kernel),
  ``kg.compile`` of the eager code (fused; on the CPU a large tanh stays a NumPy SIMD
  kernel of its own), NumPy (8 passes) and PyTorch CPU (8 ops, in a process of its
  own: see ``_timing.py``);
* a 2-layer MLP training step (forward, backward, SGD), eager vs ``kg.compile``:
  time per step and kernel launches.

Every figure is the best (and median) of ``--repeat`` runs after a warm-up (the
machine is shared, so the best run is the least disturbed one); every library gets
``--threads`` threads. Usage::

    python benchmarks/bench_fusion.py [--size 16777216] [--repeat 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
from _timing import import_torch, report_to_parent, run_peer, thread_counts, timeit, use_threads

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kernelgrad as kg


def chain_eager(x):
    y = x * 1.5
    y = y + 0.25
    y = y * x
    y = y.abs()
    y = y.sqrt()
    y = y - 0.5
    y = y.tanh()
    return y * 2.0


@kg.elementwise
def chain_fused(x):
    y = kg.sqrt(abs((x * 1.5 + 0.25) * x)) - 0.5
    return kg.tanh(y) * 2.0


def chain_numpy(x):
    y = x * np.float32(1.5)
    y = y + np.float32(0.25)
    y = y * x
    y = np.abs(y)
    y = np.sqrt(y)
    y = y - np.float32(0.5)
    y = np.tanh(y)
    return y * np.float32(2.0)


chain_torch = chain_eager  # the same tensor methods, called on a torch.Tensor


def launches(fn) -> int:
    from kernelgrad.compile import count_launches

    with count_launches() as counter:
        fn()
    return counter.count


def arithmetic_eager(x):
    y = x * 1.5
    y = y + 0.25
    y = y * x
    y = y.abs()
    y = y - 0.5
    y = kg.maximum(y, 0.1)
    y = y.sqrt()
    return y * 2.0


@kg.elementwise
def arithmetic_fused(x):
    return kg.sqrt(kg.maximum(abs((x * 1.5 + 0.25) * x) - 0.5, 0.1)) * 2.0


def arithmetic_numpy(x):
    y = x * np.float32(1.5)
    y = y + np.float32(0.25)
    y = y * x
    y = np.abs(y)
    y = y - np.float32(0.5)
    y = np.maximum(y, np.float32(0.1))
    y = np.sqrt(y)
    return y * np.float32(2.0)


def arithmetic_torch(x):
    y = x * 1.5
    y = y + 0.25
    y = y * x
    y = y.abs()
    y = y - 0.5
    y = y.clamp_min(0.1)
    y = y.sqrt()
    return y * 2.0


def _values(size: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-2, 2, size).astype(np.float32)


def bench_chain(title: str, eager, fused, numpy_fn, size: int, repeat: int) -> dict:
    """kernelgrad's and NumPy's rows of one chain: {row: (best, median)}."""
    values = _values(size)
    x = kg.tensor(values)
    compiled = kg.compile(eager)
    reference = numpy_fn(values)
    for name, result in [
        ("eager", eager(x)),
        ("elementwise", fused(x)),
        ("compile", compiled(x)),
        ("compile replay", compiled(x)),
    ]:
        np.testing.assert_allclose(result.numpy(), reference, rtol=1e-4, atol=1e-5, err_msg=name)

    rows = [
        ("NumPy (8 passes)", lambda: numpy_fn(values)),
        (f"kernelgrad eager ({launches(lambda: eager(x))} kernels)", lambda: eager(x)),
        (f"@kg.elementwise ({launches(lambda: fused(x))} kernel)", lambda: fused(x)),
        (f"kg.compile ({launches(lambda: compiled(x))} kernels)", lambda: compiled(x)),
    ]
    return {name: timeit(fn, repeat) for name, fn in rows}


def print_chain(title: str, size: int, timings: dict) -> None:
    print(f"\n{title} on {size:,} float32 ({os.cpu_count()} cores)")
    numpy_best = timings["NumPy (8 passes)"][0]
    for name, (best, median) in timings.items():
        print(
            f"  {name:<38} best {best * 1e3:8.1f} ms  median {median * 1e3:8.1f} ms"
            f"   {numpy_best / best:5.2f}x NumPy (best)"
        )


class MLP:
    def __init__(self, inputs: int, hidden: int, classes: int) -> None:
        rng = np.random.default_rng(0)
        self.params = [
            kg.tensor(rng.standard_normal((inputs, hidden)) * 0.05, dtype=kg.float32),
            kg.zeros(hidden),
            kg.tensor(rng.standard_normal((hidden, classes)) * 0.05, dtype=kg.float32),
            kg.zeros(classes),
        ]
        for p in self.params:
            p.requires_grad_()

    def step(self, x, target, lr):
        w1, b1, w2, b2 = self.params
        for p in self.params:
            p.grad = None
        hidden = (x @ w1 + b1).relu()
        logits = hidden @ w2 + b2
        loss = -(logits.log_softmax(1) * target).sum(1).mean()
        loss.backward()
        with kg.no_grad():
            for p in self.params:
                p.sub_(p.grad * lr)
        return loss


# title: (eager kernelgrad, @kg.elementwise, NumPy, PyTorch)
CHAINS = {
    "8-op arithmetic chain": (
        arithmetic_eager,
        arithmetic_fused,
        arithmetic_numpy,
        arithmetic_torch,
    ),
    "8-op chain with a tanh": (chain_eager, chain_fused, chain_numpy, chain_torch),
}


WARMUP_REPLAYS = 8


def bench_mlp(repeat: int) -> None:
    from kernelgrad.backends.cpu.compile_ahead import wait_for_workers
    from kernelgrad.compile import count_launches

    rng = np.random.default_rng(1)
    batch, inputs, hidden, classes = 128, 784, 256, 10
    x = kg.tensor(rng.standard_normal((batch, inputs)), dtype=kg.float32)
    target = kg.tensor(np.eye(classes)[rng.integers(0, classes, batch)], dtype=kg.float32)
    eager_model, compiled_model = MLP(inputs, hidden, classes), MLP(inputs, hidden, classes)
    compiled = kg.compile(compiled_model.step)
    with count_launches() as eager_launches:
        eager_model.step(x, target, 0.1)
    compiled(x, target, 0.1)  # runs eagerly
    compiled(x, target, 0.1)  # traced
    # Replays join their steps into native calls after a few of them (KG_NATIVE_REPLAY),
    # compiled in worker processes; time the replay in its final form.
    for _ in range(WARMUP_REPLAYS):
        compiled(x, target, 0.1)
    wait_for_workers()
    for _ in range(WARMUP_REPLAYS):
        compiled(x, target, 0.1)
    (plan,) = compiled.plans
    joined, calls = plan.native
    with count_launches() as compiled_launches:  # a replay: one launch per kernel
        compiled(x, target, 0.1)
    eager_time = timeit(lambda: eager_model.step(x, target, 0.1), repeat * 4)
    compiled_time = timeit(lambda: compiled(x, target, 0.1), repeat * 4)
    print(f"\nMLP {inputs}-{hidden}-{classes} training step, batch {batch} (forward+backward+SGD)")
    print(
        f"  eager       best {eager_time[0] * 1e3:7.2f} ms  median {eager_time[1] * 1e3:7.2f} ms"
        f"  {eager_launches.count:3d} launches"
    )
    print(
        f"  kg.compile  best {compiled_time[0] * 1e3:7.2f} ms  median "
        f"{compiled_time[1] * 1e3:7.2f} ms  {compiled_launches.count:3d} launches"
        f"   {eager_time[0] / compiled_time[0]:4.2f}x eager (best)"
    )
    print(f"  (the replay: {len(plan.steps)} kernels, {joined} of them in {calls} native call(s))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_threads(args.threads)
    if args.peer:
        peer(args.size, args.repeat, args.threads)
        return
    print(thread_counts())
    chains = {
        title: bench_chain(title, eager, fused, numpy_fn, args.size, args.repeat)
        for title, (eager, fused, numpy_fn, _) in CHAINS.items()
    }
    arguments = ["--size", str(args.size), "--repeat", str(args.repeat)]
    for record in run_peer(__file__, [*arguments, "--threads", str(args.threads)]):
        chains[record["chain"]][record["row"]] = (record["best"], record["median"])
    for title, timings in chains.items():
        print_chain(title, args.size, timings)
    bench_mlp(args.repeat)


def peer(size: int, repeat: int, threads: int) -> None:
    """The --peer process: PyTorch's row of each chain, on the same values."""
    torch = import_torch(threads)
    if torch is None:
        return
    x = torch.from_numpy(_values(size))
    for title, (*_, torch_fn) in CHAINS.items():
        best, median = timeit(lambda torch_fn=torch_fn: torch_fn(x), repeat)
        row = f"PyTorch CPU ({torch.get_num_threads()} threads, own process)"
        report_to_parent(chain=title, row=row, best=best, median=median)


if __name__ == "__main__":
    main()
