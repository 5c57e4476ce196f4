"""Convolution micro-benchmark: LeNet-5's two layers, forward and forward+backward,
kernelgrad's two patch-matrix layouts for stride 1 (``kg.nn.functional.PATCH_LAYOUT``:
"full-width" and "per-pixel", the default) and PyTorch, all in this process.

    python benchmarks/bench_conv.py [--repeats 5] [--threads 2]

Each figure is the best of ``--repeats`` timings of 5 calls.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import kernelgrad as kg
import kernelgrad.nn.functional as F  # noqa: N812
from kernelgrad.nn import functional as functional_module

LAYERS = {
    "conv1 1->6 5x5 pad 2 on 128x28x28": ((128, 1, 28, 28), (6, 1, 5, 5), 2),
    "conv2 6->16 5x5 on 128x14x14": ((128, 6, 14, 14), (16, 6, 5, 5), 0),
}


def best_time(fn, repeats: int, inner: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def measure_kernelgrad(arrays, padding: int, repeats: int) -> dict[str, tuple[float, float]]:
    x, w, b = (kg.tensor(a, requires_grad=True) for a in arrays)
    seed = kg.ones(F.conv2d(x, w, b, padding=padding).shape)

    def forward():
        return F.conv2d(x, w, b, padding=padding)

    def forward_backward():
        forward().backward(seed)

    results = {}
    for layout in ("full-width", "per-pixel"):
        default = functional_module.PATCH_LAYOUT
        functional_module.PATCH_LAYOUT = layout
        try:
            results[layout] = (best_time(forward, repeats), best_time(forward_backward, repeats))
        finally:
            functional_module.PATCH_LAYOUT = default
    return results


def measure_torch(arrays, padding: int, repeats: int) -> tuple[float, float]:
    try:
        import torch
    except ImportError:
        return float("nan"), float("nan")
    x, w, b = (torch.tensor(a, requires_grad=True) for a in arrays)

    def forward():
        return torch.nn.functional.conv2d(x, w, b, padding=padding)

    def forward_backward():
        forward().sum().backward()

    return best_time(forward, repeats), best_time(forward_backward, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        pass
    rng = np.random.default_rng(0)
    print(f"{'layer':36s} {'pass':8s} {'full-width':>10s} {'per-pixel':>10s} {'PyTorch':>10s}")
    for name, (x_shape, w_shape, padding) in LAYERS.items():
        arrays = [
            rng.standard_normal(x_shape).astype(np.float32),
            rng.standard_normal(w_shape).astype(np.float32),
            rng.standard_normal(w_shape[0]).astype(np.float32),
        ]
        mine = measure_kernelgrad(arrays, padding, args.repeats)
        theirs = measure_torch(arrays, padding, args.repeats)
        for index, label in enumerate(("forward", "fwd+bwd")):
            print(
                f"{name:36s} {label:8s} {mine['full-width'][index] * 1e3:8.2f}ms "
                f"{mine['per-pixel'][index] * 1e3:8.2f}ms {theirs[index] * 1e3:8.2f}ms"
            )


if __name__ == "__main__":
    main()
