"""Fusion: a chain of 8 elementwise ops, and a small MLP training step.

Compares, in one run on the same machine:

* the chain on 16M float32 values: eager kernelgrad (8 kernels), ``@kg.elementwise``
  (one kernel), ``kg.compile`` of the eager code (one fused kernel), NumPy (8 passes)
  and PyTorch CPU (8 ops), all with the cores NumPy/Numba/PyTorch use by default;
* a 2-layer MLP training step (forward, backward, SGD), eager vs ``kg.compile``:
  time per step and kernel launches.

Every figure is the best of ``--repeat`` runs after a warm-up (the machine is shared,
so the best run is the least disturbed one). Usage::

    python benchmarks/bench_fusion.py [--size 16777216] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

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


def chain_torch(x):
    y = x * 1.5
    y = y + 0.25
    y = y * x
    y = y.abs()
    y = y.sqrt()
    y = y - 0.5
    y = y.tanh()
    return y * 2.0


def best_of(fn, repeat: int) -> float:
    fn()  # warm-up (compilation, page faults)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_chain(size: int, repeat: int) -> None:
    values = np.random.default_rng(0).uniform(-2, 2, size).astype(np.float32)
    x = kg.tensor(values)
    compiled = kg.compile(chain_eager)
    reference = chain_numpy(values)
    for name, result in [
        ("eager", chain_eager(x)),
        ("elementwise", chain_fused(x)),
        ("compile", compiled(x)),
        ("compile replay", compiled(x)),
    ]:
        np.testing.assert_allclose(result.numpy(), reference, rtol=1e-4, atol=1e-5, err_msg=name)

    rows = [
        ("NumPy (8 passes)", lambda: chain_numpy(values)),
        ("kernelgrad eager (8 kernels)", lambda: chain_eager(x)),
        ("@kg.elementwise (1 kernel)", lambda: chain_fused(x)),
        ("kg.compile (1 fused kernel)", lambda: compiled(x)),
    ]
    try:
        import torch

        tx = torch.from_numpy(values)
        rows.append((f"PyTorch CPU ({torch.get_num_threads()} threads)", lambda: chain_torch(tx)))
    except ImportError:
        print("(PyTorch not installed: no PyTorch row)")
    print(f"\n8-op elementwise chain on {size:,} float32 ({os.cpu_count()} cores)")
    timings = {name: best_of(fn, repeat) for name, fn in rows}
    numpy_time = timings["NumPy (8 passes)"]
    gigabytes = size * 4 * 2 / 1e9  # one read and one write of the array
    for name, seconds in timings.items():
        print(
            f"  {name:<32} {seconds * 1e3:8.1f} ms   {gigabytes / seconds:6.2f} GB/s(1r+1w)"
            f"   {numpy_time / seconds:5.2f}x NumPy"
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


def bench_mlp(repeat: int) -> None:
    from kernelgrad.compile import count_launches

    rng = np.random.default_rng(1)
    batch, inputs, hidden, classes = 128, 784, 256, 10
    x = kg.tensor(rng.standard_normal((batch, inputs)), dtype=kg.float32)
    target = kg.tensor(np.eye(classes)[rng.integers(0, classes, batch)], dtype=kg.float32)
    eager_model, compiled_model = MLP(inputs, hidden, classes), MLP(inputs, hidden, classes)
    compiled = kg.compile(compiled_model.step)
    with count_launches() as eager_launches:
        eager_model.step(x, target, 0.1)
    compiled(x, target, 0.1)
    with count_launches() as compiled_launches:
        compiled(x, target, 0.1)
    eager_time = best_of(lambda: eager_model.step(x, target, 0.1), repeat * 4)
    compiled_time = best_of(lambda: compiled(x, target, 0.1), repeat * 4)
    print(f"\nMLP {inputs}-{hidden}-{classes} training step, batch {batch} (forward+backward+SGD)")
    print(f"  eager       {eager_time * 1e3:7.2f} ms/step  {eager_launches.count:3d} launches")
    print(
        f"  kg.compile  {compiled_time * 1e3:7.2f} ms/step  {compiled_launches.count:3d} launches"
        f"   {eager_time / compiled_time:4.2f}x eager"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bench_chain(args.size, args.repeat)
    bench_mlp(args.repeat)


if __name__ == "__main__":
    main()
