"""Data-parallel training on one machine: 1 process x 2 threads against 2 processes x 1
thread, the cost of averaging gradients, and the all-reduce's bandwidth.

Prints three tables:

* **train**: ``kernelgrad train`` (LeNet-5, batch 128 in total, Adam 1e-3 constant) as one
  process with 2 threads and as ``--nproc 2`` (1 thread each), run as a user would;
  training samples/s per epoch and test accuracy, read from each run's ``metrics.json``.
  Both runs take the same optimisation steps (2 x 64 samples = 128), so their accuracy
  agrees to float rounding; only the speed differs.
* **step**: in a 2-process job, milliseconds per LeNet-5 training step (64 samples per
  rank) without communication, with DistributedDataParallel in one bucket (every
  reduction after backward) and in small buckets (reductions start during backward),
  and the all-reduce of the gradient alone: what averaging costs, and how much of it
  overlaps with backward.
* **all_reduce**: in a 2-process job, ``kg.distributed.all_reduce`` of float32 tensors
  from 1 KB to 64 MB (and the gradient size of LeNet-5), against mpi4py's blocking
  ``Allreduce`` of the same NumPy arrays: median time, algorithm bandwidth (bytes /
  time) and bus bandwidth (x 2(n-1)/n, the figure nccl-tests print).

    python benchmarks/bench_distributed.py [--samples 60000] [--epochs 2] [--dataset fashion-mnist]
        [--compile] [--only train|step|all_reduce]
    python benchmarks/bench_distributed.py --nccl      # on a machine with CUDA GPUs

``--nccl`` runs on every visible GPU (one process each; one GPU is a world of 1, which
still runs every NCCL call): NCCL all-reduce bandwidth of CUDA tensors, a check of every
collective against the expected values, and DistributedDataParallel LeNet-5 steps on
CUDA against the same steps without it. It needs mpi4py with an MPI (``kernelgrad
[distributed]``), CuPy and NCCL (``nvidia-nccl-cu13``), and exits with status 2 naming
what is missing.

On a 2-core machine the figures say what the overheads are, not how training scales:
see docs/distributed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's kernelgrad, as in the subprocesses

LENET_PARAMETERS = 61_706  # LeNet-5's gradient: 247 KB of float32


def environment(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def mpi_job(nproc: int, worker: str, *arguments: str, threads: int = 1) -> str:
    """Run this script's ``worker`` in ``nproc`` MPI processes; rank 0's output."""
    from kernelgrad.distributed.launch import find_mpiexec

    command = [find_mpiexec().path, "-n", str(nproc), sys.executable, __file__]
    command += ["--worker", worker, *arguments]
    result = subprocess.run(command, env=environment(threads), capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"the {worker} job failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


# --- train: the command, as a user runs it ----------------------------------------------------
def train_run(out: Path, args: argparse.Namespace, nproc: int | None) -> dict:
    command = [sys.executable, "-m", "kernelgrad", "train", "--dataset", args.dataset,
               "--model", "lenet", "--device", "cpu", "--epochs", str(args.epochs),
               "--limit-train", str(args.samples), "--out", str(out), "--no-download",
               "--lr", "1e-3", "--schedule", "constant", "--batch-size", "128"]  # fmt: skip
    if args.compile:
        command.append("--compile")
    threads = 2
    if nproc is not None:
        command += ["--nproc", str(nproc)]
        threads = 1
    result = subprocess.run(command, env=environment(threads), capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"kernelgrad train failed:\n{result.stdout}\n{result.stderr}")
    return json.loads((out / "metrics.json").read_text())


def bench_train(args: argparse.Namespace) -> None:
    print(f"== train: LeNet-5 on {args.samples} {args.dataset} images, {args.epochs} epoch(s), "
          f"batch 128, Adam 1e-3{', --compile' if args.compile else ''}")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for label, nproc in (("1 process x 2 threads", None), ("2 processes x 1 thread", 2)):
            metrics = train_run(Path(folder) / label.replace(" ", "-"), args, nproc)
            history = metrics["history"]
            rows.append((label, history["samples_per_second"], history["test_accuracy"]))
    print(f"{'':24} {'samples/s per epoch':>28} {'best':>8} {'test accuracy':>14}")
    for label, rates, accuracy in rows:
        per_epoch = " ".join(f"{r:,.0f}" for r in rates)
        print(f"{label:24} {per_epoch:>28} {max(rates):8,.0f} {accuracy[-1]:14.4f}")
    ratio = max(rows[1][1]) / max(rows[0][1])
    print(f"2 processes / 1 process (best epochs): {ratio:.2f}x")


# --- step: what averaging costs -----------------------------------------------------------------
def bench_step(args: argparse.Namespace) -> None:
    print("== step: LeNet-5, 64 samples per rank and step, 2 processes x 1 thread")
    print(mpi_job(2, "step", "--repeats", str(args.repeats)), end="")


def step_worker(args: argparse.Namespace) -> None:
    import numpy as np

    import kernelgrad as kg
    import kernelgrad.nn.functional as F  # noqa: N812
    from kernelgrad.models import build_model
    from kernelgrad.nn.parallel import DistributedDataParallel

    dist = kg.distributed
    dist.init_process_group("mpi")
    rank = dist.get_rank()
    rng = np.random.default_rng(rank)
    images = kg.tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    labels = kg.tensor(rng.integers(0, 10, 64))

    def stepper(model, forward):
        optimizer = kg.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            optimizer.zero_grad()
            F.cross_entropy(forward(images), labels).backward()
            optimizer.step()

        return step

    def measure(step) -> float:
        for _ in range(3):
            step()
        times = []
        for _ in range(args.repeats):
            dist.barrier()
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3

    kg.manual_seed(0)
    local = build_model("lenet")
    results = {"no communication": measure(stepper(local, local))}
    for label, megabytes in (("DDP, 1 bucket", 25.0), ("DDP, 64 KB buckets", 0.0625)):
        kg.manual_seed(0)
        model = build_model("lenet")
        wrapper = DistributedDataParallel(model, bucket_cap_mb=megabytes)
        results[f"{label} ({len(wrapper._buckets)})"] = measure(stepper(model, wrapper))
    gradient = kg.zeros(sum(p.numel() for p in local.parameters()))
    results["all_reduce of the gradient alone"] = measure(lambda: dist.all_reduce(gradient))
    if rank == 0:
        base = results["no communication"]
        for label, value in results.items():
            extra = "" if label.startswith(("no ", "all_")) else f"  (+{value - base:.2f} ms)"
            print(f"  {label:36} {value:8.2f} ms{extra}")
    dist.destroy_process_group()


# --- all_reduce bandwidth ------------------------------------------------------------------------
SIZES = (256, 4096, LENET_PARAMETERS, 262_144, 1_048_576, 4_194_304, 16_777_216)


def bench_all_reduce(args: argparse.Namespace) -> None:
    print("== all_reduce: float32, 2 processes (shared memory on one machine)")
    print(mpi_job(2, "all_reduce", "--repeats", str(args.repeats)), end="")


def all_reduce_worker(args: argparse.Namespace, device: str = "cpu", backend: str = "mpi") -> None:
    import numpy as np

    import kernelgrad as kg

    dist = kg.distributed
    dist.init_process_group(backend)
    size, rank = dist.get_world_size(), dist.get_rank()
    MPI = dist.get_group().MPI  # noqa: N806
    if rank == 0:
        print(f"  {'elements':>10} {'bytes':>9} {'kernelgrad':>11} {'algbw':>10} {'busbw':>10}"
              + ("" if device != "cpu" else f" {'mpi4py':>10}"))  # fmt: skip
    for count in SIZES:
        x = kg.ones(count, device=device)
        repeats = max(3, min(args.repeats, int(2e8 // (count * 4 + 1e4))))

        def kernelgrad_call(x=x):
            dist.all_reduce(x)
            if device != "cpu":
                kg.cuda.synchronize(device)

        ours = _median_seconds(kernelgrad_call, repeats, dist)
        line = f"  {count:10,} {_bytes(count * 4):>9} {ours * 1e6:9.1f} us"
        algbw = count * 4 / ours / 1e9
        line += f" {algbw:7.2f} GB/s {algbw * 2 * (size - 1) / size:6.2f} GB/s"
        if device == "cpu":
            array = np.ones(count, dtype=np.float32)
            theirs = _median_seconds(
                lambda a=array: dist.get_group().comm.Allreduce(MPI.IN_PLACE, a), repeats, dist
            )
            line += f" {theirs * 1e6:8.1f} us"
        if rank == 0:
            print(line + ("  <- LeNet-5's gradient" if count == LENET_PARAMETERS else ""))
    dist.destroy_process_group()


def _median_seconds(fn, repeats: int, dist) -> float:
    fn()
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _bytes(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.3g} {unit}"
        count /= 1024
    return str(count)


# --- NCCL on GPUs (for the GPU report) ---------------------------------------------------------
def nccl_prerequisites() -> list[str]:
    missing = []
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        missing.append("mpi4py (pip install 'kernelgrad[distributed]')")
    try:
        from kernelgrad.distributed.launch import LaunchError, find_mpiexec

        find_mpiexec()
    except LaunchError as error:
        missing.append(str(error))
    from kernelgrad.distributed.nccl import NCCL_HINT, nccl_available

    if not nccl_available():
        missing.append(f"NCCL through CuPy ({NCCL_HINT})")
    import kernelgrad as kg

    if not (kg.cuda.is_available() and not kg.cuda.is_simulated()):
        missing.append("a CUDA GPU")
    return missing


def bench_nccl(args: argparse.Namespace) -> int:
    missing = nccl_prerequisites()
    if missing:
        print("bench_distributed --nccl: cannot run; missing:\n  " + "\n  ".join(missing))
        return 2
    import kernelgrad as kg

    gpus = int(kg.cuda.device_count())
    print(f"== NCCL on {gpus} GPU(s), one process each")
    print(mpi_job(gpus, "nccl", "--repeats", str(args.repeats)), end="")
    return 0


def nccl_worker(args: argparse.Namespace) -> None:
    import numpy as np

    import kernelgrad as kg
    import kernelgrad.nn.functional as F  # noqa: N812
    from kernelgrad.models import build_model
    from kernelgrad.nn.parallel import DistributedDataParallel

    dist = kg.distributed
    dist.init_process_group("nccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    device = f"cuda:{dist.get_local_rank() % int(kg.cuda.device_count())}"
    # every collective against its expected value
    checks = []
    x = kg.tensor(np.arange(6, dtype=np.float32) + rank, device=device)
    dist.all_reduce(x, op="sum")
    expected = np.arange(6) * size + sum(range(size))
    checks.append(("all_reduce sum", np.allclose(x.cpu().numpy(), expected)))
    x = kg.tensor(np.arange(6, dtype=np.float32) + rank, device=device)
    dist.all_reduce(x[::2], op="mean")
    checks.append(
        (
            "all_reduce mean (strided)",
            np.allclose(x.cpu().numpy()[::2], np.arange(0, 6, 2) + (size - 1) / 2),
        )
    )
    y = kg.tensor([rank * 1.0, 7.0], device=device)
    dist.broadcast(y, src=size - 1)
    checks.append(("broadcast", y.cpu().tolist() == [size - 1.0, 7.0]))
    gathered = kg.zeros(size, 2, device=device)
    dist.all_gather_into_tensor(gathered, kg.tensor([rank, rank + 0.5], device=device))
    checks.append(
        ("all_gather", np.allclose(gathered.cpu().numpy(), [[r, r + 0.5] for r in range(size)]))
    )
    block = kg.zeros(2, device=device)
    dist.reduce_scatter_tensor(block, kg.ones(2 * size, device=device))
    checks.append(("reduce_scatter", block.cpu().tolist() == [size * 1.0] * 2))
    # DDP steps on CUDA against the same steps without it (same data on every rank)
    rng = np.random.default_rng(0)
    images = kg.tensor(rng.standard_normal((32, 1, 28, 28)).astype(np.float32), device=device)
    labels = kg.tensor(rng.integers(0, 10, 32), device=device)
    finals = []
    for wrap in (False, True):
        kg.manual_seed(0)
        model = build_model("lenet").to(device)
        forward = DistributedDataParallel(model) if wrap else model
        optimizer = kg.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(3):
            optimizer.zero_grad()
            F.cross_entropy(forward(images), labels).backward()
            optimizer.step()
        finals.append([p.cpu().numpy() for p in model.parameters()])
    same = all(np.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(*finals))
    checks.append(("DDP LeNet-5 steps == plain steps", same))
    if rank == 0:
        for name, ok in checks:
            print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    failed = [name for name, ok in checks if not ok]
    dist.destroy_process_group()
    all_reduce_worker(args, device=device, backend="nccl")
    if failed:
        sys.exit(f"rank {rank}: failed checks: {', '.join(failed)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=60000, help="training images per epoch")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--compile", action="store_true", help="train with --compile")
    parser.add_argument("--repeats", type=int, default=50, help="timed repetitions")
    parser.add_argument("--only", choices=("train", "step", "all_reduce"))
    parser.add_argument("--nccl", action="store_true", help="NCCL on the GPUs of this machine")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "step":
        step_worker(args)
    elif args.worker == "all_reduce":
        all_reduce_worker(args)
    elif args.worker == "nccl":
        nccl_worker(args)
    elif args.nccl:
        return bench_nccl(args)
    else:
        for name, run in (
            ("train", bench_train),
            ("step", bench_step),
            ("all_reduce", bench_all_reduce),
        ):
            if args.only in (None, name):
                run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
