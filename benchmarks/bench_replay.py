"""What a replay of a compiled training step costs besides its kernels.

For LeNet-5 and an MLP 784-256-10 (batch 128, Adam) it prints the kernels per step,
eager and compiled (``kg.compile.count_launches``), and for a tiny MLP 4-5-3 (batch 6,
whose kernels do almost nothing) the time of one replay (``Plan.run``) and per kernel:
the Python that runs between kernels.

    python benchmarks/bench_replay.py [--calls 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _timing import use_threads
from bench_lenet import kernelgrad_step

import kernelgrad as kg
from kernelgrad.models import LeNet5


def setup(name: str):
    rng = np.random.default_rng(0)
    kg.manual_seed(0)
    if name == "lenet":
        model, shape, batch = LeNet5(), (1, 28, 28), 128
    elif name == "mlp":
        model = kg.nn.Sequential(kg.nn.Linear(784, 256), kg.nn.ReLU(), kg.nn.Linear(256, 10))
        shape, batch = (784,), 128
    else:  # tiny
        model = kg.nn.Sequential(kg.nn.Linear(4, 5), kg.nn.Tanh(), kg.nn.Linear(5, 3))
        shape, batch = (4,), 6
    classes = 3 if name == "tiny" else 10
    x = kg.tensor(rng.standard_normal((batch, *shape)).astype(np.float32))
    y = kg.tensor(rng.integers(0, classes, batch))
    optimizer = kg.optim.Adam(model.parameters(), lr=1e-3)

    def step(x, y):
        return kernelgrad_step(model, optimizer, x, y)

    compiled = kg.compile(step)
    for _ in range(3):  # eager warm-up, trace, first replay
        compiled(x, y)
    return step, compiled, x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    use_threads(args.threads)
    for name in ("lenet", "mlp"):
        step, compiled, x, y = setup(name)
        with kg.compile.count_launches() as eager:
            step(x, y)
        with kg.compile.count_launches() as replay:
            compiled(x, y)
        print(f"{name}: kernels per step: eager {eager.count}, compiled {replay.count}")
    step, compiled, x, y = setup("tiny")
    plan = compiled.last_plan
    timed = {"eager step": lambda: step(x, y), "compiled call": lambda: compiled(x, y)}
    timed["Plan.run"] = lambda: plan.run([x, y])
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for label, call in timed.items():
            start = time.perf_counter()
            for _ in range(args.calls):
                call()
            seconds = (time.perf_counter() - start) / args.calls
            best[label] = min(best.get(label, seconds), seconds)
    figures = ", ".join(f"{label} {seconds * 1e6:.0f} us" for label, seconds in best.items())
    per_kernel = best["Plan.run"] / plan.kernel_count * 1e6
    print(f"tiny MLP 4-5-3, {plan.kernel_count} kernels: {figures} ({per_kernel:.1f} us/kernel)")


if __name__ == "__main__":
    main()
