"""End-to-end `kernelgrad train` on the real Fashion-MNIST, against PyTorch on the same data.

Runs the command as a user would (a fresh process: imports, data loading, progress,
per-epoch evaluation, checkpoints, metrics, plot), reads its ``metrics.json``, and
prints:

* the time from process start to the end of the first training step with an empty
  kernel cache (``KERNELGRAD_CACHE_DIR`` set to a new temporary folder) and with a warm
  one (the best of ``--repeats`` runs);
* training samples/s and seconds per epoch of LeNet-5 (batch 128, Adam, ``--lr`` 1e-3,
  ``--schedule constant``: the recipe of PyTorch's examples, not the command's defaults)
  over the first ``--samples`` training images, and the test accuracy after the last
  epoch. The rate is that of each epoch's training loop (the loader's batches, the
  steps, the schedule, the loss and accuracy tally, the progress line); the per-epoch
  evaluation, checkpoints and plot are outside it;
* the same training loop in PyTorch (if installed) on the same images: the same
  LeNet-5, layer for layer (conv, max-pool, ReLU), the same Adam implementation as
  ``kernelgrad train`` uses (fused: ``torch.optim.Adam(fused=True)``), the same
  schedule, in a fresh process of its own (see ``_timing.py``), run ``--repeats``
  times as kernelgrad is. Its loop indexes preloaded tensors (no loader, no progress
  line), and its rate is timed the same way, per epoch, without the evaluation;
* the ratios kernelgrad / PyTorch of the best epochs and of all epochs together
  (kernelgrad's first epoch includes loading its compiled kernels from the disk cache),
  from the fastest of the ``--repeats`` runs of each.

Both use ``--threads`` threads (Numba's, OpenMP's and the BLAS's). On a shared, busy
machine use 1: with 2 threads on 2 busy cores, PyTorch's spinning worker threads can
lose an order of magnitude.

    python benchmarks/bench_train.py [--samples 6000] [--epochs 1] [--repeats 2] [--threads 2]
        [--lr 1e-3] [--seed 0] [--schedule constant|cosine] [--compile]

``--samples 60000`` measures whole epochs. Needs Fashion-MNIST (see docs/data.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import import_torch, report_to_parent, run_peer, use_threads

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's kernelgrad, as in the subprocesses


def run_train(
    out: Path,
    samples: int,
    epochs: int,
    cache: Path | None,
    threads: int,
    lr: float,
    seed: int,
    schedule: str,
    compiled: bool = False,
) -> dict:
    env = dict(os.environ)
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    if cache is not None:
        env["KERNELGRAD_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    command = [
        sys.executable, "-m", "kernelgrad", "train", "--dataset", "fashion-mnist",
        "--model", "lenet", "--device", "cpu", "--epochs", str(epochs),
        "--limit-train", str(samples), "--out", str(out), "--no-download",
        "--lr", str(lr), "--seed", str(seed), "--schedule", schedule,
    ] + (["--compile"] if compiled else [])  # fmt: skip
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"kernelgrad train failed:\n{result.stderr}")
    metrics = json.loads((out / "metrics.json").read_text())
    metrics["wall_seconds"] = wall
    return metrics


def torch_samples_per_second(
    torch, samples: int, epochs: int, lr: float, seed: int, schedule: str
) -> tuple[list[float], float]:
    """PyTorch LeNet-5 (kernelgrad's layers, in its order), batch 128, fused Adam, on the
    same images: samples/s of each epoch's training loop, and the test accuracy."""
    import numpy as np
    from torch import nn

    from kernelgrad.data import load_dataset  # NumPy only: no kernelgrad kernel runs here

    torch.manual_seed(seed)
    train = load_dataset("fashion-mnist", train=True)
    test = load_dataset("fashion-mnist", train=False)
    images, labels = train.get_batch(np.arange(samples))
    test_images, test_labels = test.get_batch(np.arange(len(test)))
    model = nn.Sequential(  # kernelgrad.models.LeNet5, layer for layer
        nn.Conv2d(1, 6, 5, padding=2), nn.MaxPool2d(2), nn.ReLU(),
        nn.Conv2d(6, 16, 5), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)  # as kg's Adam
    steps = epochs * -(-samples // 128)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels)
    generator = np.random.default_rng(seed)
    rates = []
    for _ in range(epochs):
        order = torch.from_numpy(generator.permutation(samples))
        start = time.perf_counter()
        for begin in range(0, samples, 128):
            index = order[begin : begin + 128]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x_all[index]), y_all[index])
            loss.backward()
            optimizer.step()
            if schedule == "cosine":
                cosine.step()
        rates.append(samples / (time.perf_counter() - start))
    with torch.no_grad():
        predicted = model(torch.from_numpy(test_images)).argmax(1).numpy()
    return rates, float((predicted == test_labels).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=6000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam's learning rate (both)")
    parser.add_argument("--seed", type=int, default=0, help="initialisation and shuffling")
    parser.add_argument(
        "--schedule",
        choices=("constant", "cosine"),
        default="constant",
        help="learning rate per batch (both): constant, or cosine decay to 0",
    )
    parser.add_argument(
        "--compile", action="store_true", help="kernelgrad train --compile (PyTorch eager)"
    )
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_threads(args.threads)
    if args.peer:
        torch = import_torch(args.threads)
        if torch is not None:
            rates, accuracy = torch_samples_per_second(
                torch, args.samples, args.epochs, args.lr, args.seed, args.schedule
            )
            report_to_parent(rates=rates, accuracy=accuracy)
        return

    with tempfile.TemporaryDirectory(prefix="kg-bench-train-") as folder:
        folder = Path(folder)
        cold = run_train(
            folder / "cold",
            256,
            1,
            folder / "empty-cache",
            args.threads,
            args.lr,
            args.seed,
            args.schedule,
        )
        print(
            f"empty kernel cache: first training step after {cold['first_step_seconds']:.1f} s "
            f"(process start included), whole 256-sample run {cold['wall_seconds']:.1f} s"
        )
        warm_runs = [
            run_train(
                folder / f"warm{index}",
                args.samples,
                args.epochs,
                None,
                args.threads,
                args.lr,
                args.seed,
                args.schedule,
                args.compile,
            )
            for index in range(args.repeats)
        ]
        best = min(warm_runs, key=lambda metrics: metrics["first_step_seconds"])
        print(f"warm kernel cache: first training step after {best['first_step_seconds']:.1f} s")
        fastest = max(warm_runs, key=lambda m: max(m["history"]["samples_per_second"]))
        history = fastest["history"]
        rate = max(history["samples_per_second"])
        print(
            f"kernelgrad train, LeNet-5, {args.samples} samples x {args.epochs} epoch(s): "
            f"{rate:,.0f} samples/s (best epoch of {args.repeats} runs; all epochs "
            f"{_overall(history['samples_per_second'])}), "
            f"{min(history['seconds']):.1f} s per epoch, "
            f"{60000 / rate:.0f} s per 60,000-sample epoch at that rate, "
            f"test accuracy {history['test_accuracy'][-1]:.4f}"
        )
    options = ["--samples", str(args.samples), "--epochs", str(args.epochs),
               "--threads", str(args.threads), "--lr", str(args.lr), "--seed", str(args.seed),
               "--schedule", args.schedule]  # fmt: skip
    torch_runs = [record for _ in range(args.repeats) for record in run_peer(__file__, options)]
    if not torch_runs:
        return
    fastest_torch = max(torch_runs, key=lambda record: max(record["rates"]))
    torch_rates, torch_accuracy = fastest_torch["rates"], fastest_torch["accuracy"]
    torch_rate = max(torch_rates)
    print(
        f"PyTorch ({args.threads} threads, own process), same model, optimizer and data: "
        f"{torch_rate:,.0f} samples/s (best epoch of {len(torch_runs)} runs; all epochs "
        f"{_overall(torch_rates)}), test accuracy {torch_accuracy:.4f}"
    )
    print(f"ratio kernelgrad / PyTorch samples/s, best epochs: {rate / torch_rate:.3f}")
    kg_all = len(history["seconds"]) * args.samples / sum(history["seconds"])
    torch_all = len(torch_rates) / sum(1 / r for r in torch_rates)
    print(f"ratio kernelgrad / PyTorch samples/s, all epochs: {kg_all / torch_all:.3f}")


def _overall(rates: list[float]) -> str:
    """Samples/s over all epochs together (equal-sized epochs: the harmonic mean)."""
    return f"{len(rates) / sum(1 / r for r in rates):,.0f}"


if __name__ == "__main__":
    main()
