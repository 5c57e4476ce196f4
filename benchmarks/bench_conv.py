"""Convolution micro-benchmark: the layers of the reference models (LeNet-5, CNN), forward
and forward+backward, with kernelgrad's two algorithms (direct kernels, and im2col +
matrix product: ``kg.nn.functional.convolution.DIRECT_MAX_TAPS`` picks between them) and
PyTorch (in a process of its own, on the same seeded inputs: see ``_timing.py``), each
with ``--threads`` threads; then a training step of the ``cnn`` model (the wide 3x3
convolutions in context: Adam, cross-entropy, one batch) on both.

    python benchmarks/bench_conv.py [--repeats 5] [--threads 2] [--batch 128]

Each figure is the best (and the median) of ``--repeats`` timings of 5 calls, in ms.
Layers after the first get their input the way they get it inside the network: stored
batch innermost (the layout of kernelgrad's convolution and pooling outputs), and
requiring a gradient.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _timing import import_torch, report_to_parent, run_peer, thread_counts, use_threads

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kernelgrad as kg
import kernelgrad.nn.functional as F  # noqa: N812
from kernelgrad.nn.functional import convolution

# name: (input shape, weight shape, padding, first layer)
LAYERS = {
    "LeNet conv1 1->6 5x5 pad 2, 28x28": ((128, 1, 28, 28), (6, 1, 5, 5), 2, True),
    "LeNet conv2 6->16 5x5, 14x14": ((128, 6, 14, 14), (16, 6, 5, 5), 0, False),
    "CNN conv1 1->32 3x3 pad 1, 28x28": ((128, 1, 28, 28), (32, 1, 3, 3), 1, True),
    "CNN conv2 32->64 3x3 pad 1, 14x14": ((128, 32, 14, 14), (64, 32, 3, 3), 1, False),
}


def timings(fn, repeats: int, inner: int = 5) -> tuple[float, float]:
    """(best, median) seconds per call."""
    fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        runs.append((time.perf_counter() - start) / inner)
    return min(runs), statistics.median(runs)


def measure_kernelgrad(arrays, padding: int, first: bool, repeats: int) -> dict:
    x_values, w_values, b_values = arrays
    if first:
        x = kg.tensor(x_values)
    else:
        stored = kg.tensor(np.ascontiguousarray(x_values.transpose(1, 2, 3, 0)))
        x = stored.permute(3, 0, 1, 2).requires_grad_()
    w, b = kg.tensor(w_values, requires_grad=True), kg.tensor(b_values, requires_grad=True)
    seed = kg.ones(F.conv2d(x, w, b, padding=padding).shape)

    def forward():
        return F.conv2d(x, w, b, padding=padding)

    def forward_backward():
        forward().backward(seed)

    results = {}
    default = convolution.DIRECT_MAX_TAPS
    for algorithm, limit in (("direct", 10**9), ("patch matrix", 0)):
        convolution.DIRECT_MAX_TAPS = limit
        try:
            results[algorithm] = (timings(forward, repeats), timings(forward_backward, repeats))
        finally:
            convolution.DIRECT_MAX_TAPS = default
    return results


def layer_inputs(batch: int):
    """(layer name, arrays, padding, first layer) of every layer, from one seeded
    generator: both processes draw the same values."""
    rng = np.random.default_rng(0)
    for name, (x_shape, w_shape, padding, first) in LAYERS.items():
        arrays = [
            rng.standard_normal((batch, *x_shape[1:])).astype(np.float32),
            rng.standard_normal(w_shape).astype(np.float32),
            rng.standard_normal(w_shape[0]).astype(np.float32),
        ]
        yield name, arrays, padding, first


def measure_torch(torch, arrays, padding: int, first: bool, repeats: int) -> tuple:
    x = torch.tensor(arrays[0], requires_grad=not first)
    w, b = (torch.tensor(a, requires_grad=True) for a in arrays[1:])

    def forward():
        return torch.nn.functional.conv2d(x, w, b, padding=padding)

    def forward_backward():
        forward().sum().backward()

    return timings(forward, repeats), timings(forward_backward, repeats)


MODEL_STEPS = 10  # timed steps per repeat, after as many warm-up steps


def model_step_data(batch: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    images = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    return images, rng.integers(0, 10, batch)


def kernelgrad_cnn_step(batch: int, repeats: int) -> tuple[float, float]:
    """(best, median) seconds of a training step of the ``cnn`` reference model (Adam,
    cross-entropy) on one batch."""
    from kernelgrad.models import CNN

    images, labels = model_step_data(batch)
    kg.manual_seed(0)
    model = CNN()
    optimizer = kg.optim.Adam(model.parameters(), lr=1e-3)
    x, y = kg.tensor(images), kg.tensor(labels)

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    return timings(step, repeats, MODEL_STEPS)


def torch_cnn_step(torch, batch: int, repeats: int) -> tuple[float, float]:
    """The same step in PyTorch: the same layers (kernelgrad.models.CNN), fused Adam."""
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10),
    )  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    images, labels = model_step_data(batch)
    x, y = torch.tensor(images), torch.tensor(labels)

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    return timings(step, repeats, MODEL_STEPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128, help="images per call")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_threads(args.threads)
    if args.peer:
        torch = import_torch(args.threads)
        for name, arrays, padding, first in layer_inputs(args.batch) if torch else ():
            passes = measure_torch(torch, arrays, padding, first, args.repeats)
            report_to_parent(layer=name, passes=passes)
        if torch:
            report_to_parent(model="cnn", step=torch_cnn_step(torch, args.batch, args.repeats))
        return
    print(thread_counts())
    mine = {
        name: measure_kernelgrad(arrays, padding, first, args.repeats)
        for name, arrays, padding, first in layer_inputs(args.batch)
    }
    nan = (float("nan"), float("nan"))
    theirs = {name: (nan, nan) for name in LAYERS}
    arguments = ["--repeats", str(args.repeats), "--threads", str(args.threads)]
    step = kernelgrad_cnn_step(args.batch, args.repeats)
    their_step = nan
    for record in run_peer(__file__, [*arguments, "--batch", str(args.batch)]):
        if "layer" in record:
            theirs[record["layer"]] = record["passes"]
        else:
            their_step = tuple(record["step"])
    print(f"default: direct for stride 1 and at most {convolution.DIRECT_MAX_TAPS} taps per filter")
    print(f"{'layer':36s} {'pass':8s} {'direct':>15s} {'patch matrix':>15s} {'PyTorch':>15s}")
    print(f"{'':36s} {'':8s} {'best / median ms':>15s}")
    for name in LAYERS:
        for index, label in enumerate(("forward", "fwd+bwd")):
            cells = [mine[name]["direct"][index], mine[name]["patch matrix"][index]]
            cells.append(theirs[name][index])
            text = " ".join(f"{best * 1e3:7.2f}/{median * 1e3:<7.2f}" for best, median in cells)
            print(f"{name:36s} {label:8s} {text}")
    print(
        f"\ncnn model training step, batch {args.batch} (best / median ms): kernelgrad "
        f"{step[0] * 1e3:.2f}/{step[1] * 1e3:.2f}, PyTorch "
        f"{their_step[0] * 1e3:.2f}/{their_step[1] * 1e3:.2f}; PyTorch / kernelgrad time "
        f"(best) {their_step[0] / step[0]:.2f}"
    )


if __name__ == "__main__":
    main()
