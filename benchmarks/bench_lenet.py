"""Training throughput of LeNet-5 (or an MLP 784-256-10) on Fashion-MNIST-shaped data:
kernelgrad vs PyTorch.

Batch 128, Adam (lr 1e-3), random inputs of shape (128, 1, 28, 28) and random labels
(the data loader is not part of what is measured). PyTorch runs in a fresh process with
the environment this script started with (kernelgrad sets ``GOMP_SPINCOUNT`` for its
own OpenMP workers before its first kernel; PyTorch's OpenMP copy would read it too if
it started later in the same process, which made PyTorch's step 1.5x slower on a 2-core
virtual machine; see ``_timing.py``). Both sides get the same:

* threads: ``--threads`` (2 by default) for Numba, OpenBLAS and PyTorch;
* model: kernelgrad's LeNet-5, whose blocks are conv, max-pool, ReLU (the same function
  as conv, ReLU, max-pool, with the ReLU on a quarter of the values), in that order
  in PyTorch too;
* optimizer implementation: ``--optimizer fused`` (the default) runs kernelgrad's fused
  Adam (one kernel per parameter group and dtype on the CPU) against
  ``torch.optim.Adam(fused=True)``; ``--optimizer unfused`` runs both step by step
  (kernelgrad ``fused=False``, PyTorch ``foreach=False``);
* warm-up (10 steps) and repeats (the best of ``--repeats`` runs of ``--steps`` steps).

    python benchmarks/bench_lenet.py [--steps 40] [--repeats 3] [--threads 2] [--cpu-time]
                                     [--compile] [--optimizer fused|unfused]
                                     [--model lenet|mlp] [--hidden 256] [--cold]

Prints samples per second for each and the ratio kernelgrad / PyTorch; with
``--compile`` also the same step under ``kg.compile`` (forward, backward and Adam's
update traced, fused and replayed). Environment settings such as
``OMP_WAIT_POLICY=PASSIVE`` apply to both; see docs/nn.md ("Speed") for the settings
that matter on a small machine.

``--model mlp`` runs the same comparison for an MLP 784-256-10 (Linear, ReLU, Linear) on
the flattened images (``--hidden 1024,1024``: other hidden widths). ``--cold`` measures
the first training step instead: in a fresh process with an empty kernel cache
(``KERNELGRAD_CACHE_DIR`` set to a new folder: every kernel is generated and compiled),
then in another fresh process with that cache filled (kernels loaded from the disk), and
prints both. With an empty cache the ``prange`` forms of the kernels compile in worker
processes while their serial twins run (``KG_COMPILE_WORKERS``, docs/kernels.md): the
line also says when every kernel ran in its final form (the workers done and one more
step taken)."""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import time
from typing import Any

import numpy as np
from _timing import ORIGINAL_ENVIRONMENT, thread_counts, use_threads

import kernelgrad as kg
import kernelgrad.nn.functional as F  # noqa: N812
from kernelgrad.models import LeNet5

MLP_SIZES = (784, 256, 10)

BATCH = 128
WARMUP_STEPS = 10  # PyTorch's first steps after start-up are slow; kernelgrad's compile


def kernelgrad_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


CLOCK = time.perf_counter


def time_steps(step, steps: int, repeats: int) -> float:
    """Best seconds per step over ``repeats`` runs of ``steps`` steps."""
    best = float("inf")
    for _ in range(repeats):
        start = CLOCK()
        for _ in range(steps):
            step()
        best = min(best, (CLOCK() - start) / steps)
    return best


def _native(compiled) -> str:
    """How much of the last replay ran as native calls (backends/cpu/native_replay.py)."""
    joined, calls = compiled.last_plan.native
    return f"{joined} of {len(compiled.last_plan.steps)} steps in {calls} native call(s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="cProfile kernelgrad's steps")
    parser.add_argument(
        "--compile", action="store_true", help="also time the step compiled with kg.compile"
    )
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="measure process CPU time instead of wall time (on a machine shared with other "
        "work, run with --threads 1, NUMBA_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1)",
    )
    parser.add_argument(
        "--optimizer",
        choices=("fused", "unfused"),
        default="fused",
        help="Adam's implementation on both sides (see the module docstring)",
    )
    parser.add_argument("--model", choices=("lenet", "mlp"), default="lenet")
    parser.add_argument(
        "--hidden", default="256", help="the MLP's hidden widths, comma-separated (256)"
    )
    parser.add_argument(
        "--cold", action="store_true", help="time the first step with an empty and a warm cache"
    )
    parser.add_argument("--torch-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first-step-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold:
        cold_start(args)
        return
    use_threads(args.threads)
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time

    rng = np.random.default_rng(0)
    images = rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32)
    if args.model == "mlp":
        images = images.reshape(BATCH, -1)
    labels = rng.integers(0, 10, BATCH)
    if args.torch_only:
        torch_only(args, images, labels)
        return

    if not args.first_step_only:
        print(thread_counts())
    kg.manual_seed(0)
    model = kernelgrad_model(args.model, args.hidden)
    optimizer = kg.optim.Adam(model.parameters(), lr=1e-3, fused=args.optimizer == "fused")
    x, y = kg.tensor(images), kg.tensor(labels)
    start = time.perf_counter()
    first_loss = kernelgrad_step(model, optimizer, x, y).item()
    warmup = time.perf_counter() - start
    if args.first_step_only:
        # The parallel forms of some kernels compile in worker processes meanwhile
        # (backends/cpu/compile_ahead.py); until they are ready their serial twins run.
        from kernelgrad.backends.cpu.compile_ahead import wait_for_workers

        wait_for_workers()
        ready = time.perf_counter() - start
        kernelgrad_step(model, optimizer, x, y).item()  # loads the parallel forms
        final = time.perf_counter() - start
        print(f"every kernel in its final form after {final:.3f} (workers done {ready:.3f})")
        print(f"first step {warmup:.3f}")
        return
    for _ in range(WARMUP_STEPS - 1):
        kernelgrad_step(model, optimizer, x, y)
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.steps):
            kernelgrad_step(model, optimizer, x, y)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    kg_seconds = time_steps(
        lambda: kernelgrad_step(model, optimizer, x, y), args.steps, args.repeats
    )
    last_loss = kernelgrad_step(model, optimizer, x, y).item()
    print(f"kernelgrad: first step (compile or load kernels) {warmup:.2f} s")
    print(f"kernelgrad: loss {first_loss:.3f} -> {last_loss:.3f} on one repeated batch")
    kg_rate = BATCH / kg_seconds
    print(f"kernelgrad: {kg_seconds * 1e3:7.2f} ms/step  {kg_rate:8.0f} samples/s")
    if args.compile:
        compiled = kg.compile(lambda x, y: kernelgrad_step(model, optimizer, x, y))
        start = time.perf_counter()
        compiled(x, y)  # runs eagerly
        compiled(x, y)  # traced and compiled
        first_two = time.perf_counter() - start
        for _ in range(WARMUP_STEPS - 2):
            compiled(x, y)
        # Replays join their steps into native calls after a few of them, compiled in
        # worker processes (backends/cpu/native_replay.py): time the final form, as
        # bench_fusion.py does.
        from kernelgrad.backends.cpu.compile_ahead import wait_for_workers

        wait_for_workers()
        for _ in range(WARMUP_STEPS):
            compiled(x, y)
        compiled_seconds = time_steps(lambda: compiled(x, y), args.steps, args.repeats)
        # the replay as timed (read before the eager step below: an eager step between
        # compiled calls gives the parameters new .grad tensors, and the next compiled
        # call traces again)
        kernels, native = len(compiled.last_plan.steps), _native(compiled)
        with kg.compile.count_launches() as eager_launches:
            kernelgrad_step(model, optimizer, x, y)
        print(
            f"kernelgrad, kg.compile: {compiled_seconds * 1e3:7.2f} ms/step  "
            f"{BATCH / compiled_seconds:8.0f} samples/s  (eager / compiled: "
            f"{kg_seconds / compiled_seconds:.2f}x; {kernels} kernels per step, eager "
            f"{eager_launches.count}; {native}; first two calls {first_two:.2f} s)"
        )

    command = [
        sys.executable, __file__, "--torch-only", "--steps", str(args.steps),
        "--repeats", str(args.repeats), "--threads", str(args.threads),
        "--optimizer", args.optimizer, "--model", args.model, "--hidden", args.hidden,
    ] + (["--cpu-time"] if args.cpu_time else [])  # fmt: skip
    result = subprocess.run(
        command, env=ORIGINAL_ENVIRONMENT, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        print(f"PyTorch run failed:\n{result.stderr}")
        return
    for line in result.stdout.splitlines():
        if not line.startswith("torch "):
            print(line)
            continue
        _, name, order, seconds = line.split("\t")
        torch_rate = BATCH / float(seconds)
        ratios = f"ratio kernelgrad / PyTorch: {kg_rate / torch_rate:.2f}x"
        if args.compile:
            ratios += f" (kg.compile: {BATCH / compiled_seconds / torch_rate:.2f}x)"
        print(
            f"{name}, own process, {order}: {float(seconds) * 1e3:7.2f} ms/step  "
            f"{torch_rate:8.0f} samples/s  {ratios}"
        )


def mlp(nn: Any, hidden: str) -> Any:
    """The MLP (Linear, ReLU, ..., Linear) with these hidden widths, in ``nn`` (kernelgrad's
    or PyTorch's)."""
    widths = [MLP_SIZES[0], *(int(w) for w in hidden.split(",")), MLP_SIZES[-1]]
    layers: list[Any] = []
    for fan_in, fan_out in itertools.pairwise(widths):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def mlp_name(hidden: str) -> str:
    return f"MLP {MLP_SIZES[0]}-{hidden.replace(',', '-')}-{MLP_SIZES[-1]}"


def kernelgrad_model(name: str, hidden: str = "256") -> kg.nn.Module:
    return LeNet5() if name == "lenet" else mlp(kg.nn, hidden)


def cold_start(args: argparse.Namespace) -> None:
    """The first training step in a fresh process, with an empty kernel cache and then
    with the cache that run filled."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kernelgrad-cold-") as folder:
        environment = dict(ORIGINAL_ENVIRONMENT, KERNELGRAD_CACHE_DIR=folder)
        command = [
            sys.executable, __file__, "--first-step-only", "--model", args.model,
            "--threads", str(args.threads), "--optimizer", args.optimizer,
        ]  # fmt: skip
        for label in ("empty kernel cache", "warm kernel cache"):
            started = time.perf_counter()
            result = subprocess.run(
                command, env=environment, capture_output=True, text=True, check=False
            )
            process = time.perf_counter() - started
            if result.returncode != 0:
                print(f"{label}: the run failed:\n{result.stderr}")
                return
            step = float(result.stdout.split()[-1])
            final = float(result.stdout.split("after")[1].split()[0])
            kernels = len(os.listdir(os.path.join(folder, "kernels")))
            print(
                f"{args.model}, first training step, {label}: {step:6.2f} s "
                f"(whole process {process:6.2f} s; {kernels} files in the cache); every "
                f"kernel in its parallel form {final:6.2f} s after the first step began"
            )


def torch_only(args: argparse.Namespace, images: np.ndarray, labels: np.ndarray) -> None:
    """Time PyTorch's LeNet-5 step: one tab-separated line."""
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: no comparison")
        return
    torch.set_num_threads(args.threads)
    tnn = torch.nn
    tx, ty = torch.from_numpy(images), torch.from_numpy(labels)
    name = f"PyTorch {torch.__version__} ({args.threads} threads)"
    torch.manual_seed(0)
    torch_model = tnn.Sequential(  # kernelgrad's LeNet5, layer for layer
        tnn.Conv2d(1, 6, 5, padding=2), tnn.MaxPool2d(2), tnn.ReLU(),
        tnn.Conv2d(6, 16, 5), tnn.MaxPool2d(2), tnn.ReLU(), tnn.Flatten(),
        tnn.Linear(400, 120), tnn.ReLU(), tnn.Linear(120, 84), tnn.ReLU(), tnn.Linear(84, 10),
    )  # fmt: skip
    if args.model == "mlp":
        torch_model = mlp(tnn, args.hidden)
    implementation = {"fused": True} if args.optimizer == "fused" else {"foreach": False}
    torch_optimizer = torch.optim.Adam(torch_model.parameters(), lr=1e-3, **implementation)
    layers = "conv-pool-relu" if args.model == "lenet" else mlp_name(args.hidden)
    order = f"{layers}, Adam {', '.join(f'{k}={v}' for k, v in implementation.items())}"

    def torch_step():
        torch_optimizer.zero_grad()
        loss = tnn.functional.cross_entropy(torch_model(tx), ty)
        loss.backward()
        torch_optimizer.step()

    for _ in range(WARMUP_STEPS):
        torch_step()
    print(f"torch \t{name}\t{order}\t{time_steps(torch_step, args.steps, args.repeats)}")


if __name__ == "__main__":
    main()
