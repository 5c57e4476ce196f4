"""One command for a machine with an NVIDIA GPU: the GPU tests, the backend-parametrised
suite on the device, the GPU benchmarks, and one Markdown report to paste into
BENCHMARKS.md.

    python benchmarks/gpu_report.py                      # writes gpu-report.md
    python benchmarks/gpu_report.py --out report.md --budget 570
    python benchmarks/gpu_report.py --dry-run            # the plumbing, in the simulator

Sections, in this order (each one in the report, with its status):

1. **environment**: date, device, driver, the CUDA wheels (NVVM, nvJitLink, NVRTC,
   cuBLAS), the PTX version the compiler emits and whether the driver could JIT it, how
   numba-cuda links (nvJitLink to cubin, or the driver), the vendor libraries, versions;
2. **first kernel**: a fresh process creates a tensor, runs a kernel and reads it back;
   a failure is explained (e.g. PTX newer than the driver, with the pip command that
   pins the toolkit);
3. **gpu tests**: ``pytest -m gpu --backend cuda`` on the device;
4. **GEMM**: kernelgrad's tiled kernel and its cuBLAS path against cuBLAS through CuPy
   (and PyTorch, if installed), float32, TF32 off;
5. **memory-bound ops**: elementwise and reductions against the measured device copy
   bandwidth (and PyTorch);
6. **fusion**: an 8-op elementwise chain, eager against ``kg.compile`` (and PyTorch
   eager), large (bandwidth-bound) and small (launch-bound); then a compiled MLP
   training step replayed step by step and as CUDA graphs (time per step, equal losses);
7. **per-op time**: a tiny op launched back to back (and PyTorch);
8. **training**: ``kernelgrad train --device cuda`` (LeNet-5, Adam) against PyTorch eager
   on the same GPU and images: samples/s and test accuracy;
9. **first step**: time from process start to the end of the first training step, with
   an empty kernel cache and a warm one;
10. **memory over 1,000 steps**: the pool must stay flat (bytes in use, driver
    allocations) across a training loop;
11. **NCCL distributed training**: a marked hook another change fills;
12. **backend suite**: every backend-parametrised test with ``--backend cuda`` on the
    device (last: it gets what is left of ``--budget``).

Nothing is skipped silently: a section that raises, fails its checks or runs out of time
is marked FAILED in the report (with the end of its output) and the command exits with
status 1. It installs nothing; it needs the ``kernelgrad[cuda]`` extra (PyTorch with
CUDA is optional: without it the peer columns say so). It finishes within ``--budget``
seconds (570 by default, under 10 minutes on an H100/H200).

``--dry-run`` runs every section's code under numba's CUDA simulator (``kernelgrad
train`` on the CPU) with tiny sizes, in seconds: the timings mean nothing, the report
says so; it checks that the report's plumbing works before the first real run.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = Path(__file__).resolve().parent

OK = "ok"
FAILED = "FAILED"
HOOK = "not yet implemented (hook)"


class SectionError(Exception):
    """A section's check failed; ``log`` is the output worth showing."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


@dataclass
class Outcome:
    title: str
    status: str
    lines: list[str] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0


@dataclass
class Context:
    """What every section needs: the mode, the sizes, the deadline, where to work."""

    dry_run: bool
    deadline: float
    workdir: Path
    python: str = sys.executable
    # sizes (the real run's; dry_run() shrinks them)
    gemm_n: int = 4096
    memory_numel: int = 2**26
    chain_numels: tuple[int, ...] = (2**24, 1024)
    repeat: int = 10
    tiny_ops: int = 2000
    train_samples: int = 12800
    train_test: int = 2000
    train_epochs: int = 2
    train_device: str = "cuda"
    memory_steps: int = 1000
    first_step_samples: int = 256
    notes: list[str] = field(default_factory=list)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def environment(self, cache: Path | None = None) -> dict[str, str]:
        """The environment of a child process: this checkout first on the path, the
        simulator in a dry run, the real GPU for the test suite otherwise."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), str(ROOT / ".ci"), env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        if self.dry_run:
            env["NUMBA_ENABLE_CUDASIM"] = "1"
            env.pop("KG_TEST_REAL_GPU", None)
        else:
            env.pop("NUMBA_ENABLE_CUDASIM", None)
            env["KG_TEST_REAL_GPU"] = "1"
        if cache is not None:
            env["KERNELGRAD_CACHE_DIR"] = str(cache)
        return env


def dry_run_context(deadline: float, workdir: Path) -> Context:
    return Context(
        dry_run=True,
        deadline=deadline,
        workdir=workdir,
        gemm_n=16,
        memory_numel=512,
        chain_numels=(128, 16),
        repeat=1,
        tiny_ops=3,
        train_samples=32,
        train_test=32,
        train_epochs=1,
        train_device="cpu",
        memory_steps=11,
        first_step_samples=16,
    )


# --- running commands -------------------------------------------------------------------------
def run_command(
    command: Sequence[str], ctx: Context, timeout: float, cache: Path | None = None
) -> subprocess.CompletedProcess:
    """Run a child process in this checkout; a non-zero exit or a timeout is a
    SectionError carrying the end of its output."""
    timeout = max(1.0, min(timeout, ctx.remaining()))
    try:
        completed = subprocess.run(
            list(command),
            cwd=ROOT,
            env=ctx.environment(cache),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        output = _text(expired.stdout) + _text(expired.stderr)
        raise SectionError(
            f"timed out after {timeout:.0f} s: {' '.join(command)}", tail(output)
        ) from None
    if completed.returncode != 0:
        raise SectionError(
            f"exit status {completed.returncode}: {' '.join(command)}",
            tail(completed.stdout + completed.stderr),
        )
    return completed


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# --- environment ----------------------------------------------------------------------------
WHEELS = (
    "numba",
    "numba-cuda",
    "cuda-bindings",
    "cuda-core",
    "cuda-toolkit",
    "nvidia-nvvm",
    "nvidia-nvjitlink",
    "nvidia-cuda-nvrtc",
    "nvidia-cuda-runtime",
    "nvidia-cublas",
    "cupy-cuda13x",
    "cupy-cuda12x",
    "torch",
    "numpy",
)


def version_of(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def driver_cuda_version() -> tuple[int, int] | None:
    """The CUDA version the driver supports (580: 13.0), or None without a driver."""
    try:
        from numba.cuda.cudadrv.driver import driver

        return tuple(driver.get_version())  # type: ignore[return-value]
    except Exception:
        return None


def emitted_ptx_version() -> tuple[int, int] | None:
    """The PTX ISA version numba-cuda's NVVM writes (a compile without a GPU)."""
    try:
        from numba import cuda
        from numba.cuda import types

        def probe(out):  # pragma: no cover - compiled only
            out[0] = 1.0

        ptx, _ = cuda.compile_ptx(probe, (types.float32[:],), cc=(9, 0))
    except Exception:
        return None
    match = re.search(r"^\.version (\d+)\.(\d+)", ptx, re.MULTILINE)
    return (int(match.group(1)), int(match.group(2))) if match else None


def linker_backend() -> str:
    """How numba-cuda turns PTX into machine code: nvJitLink (a library from PyPI,
    producing cubin: the driver never compiles PTX) or the driver's own linker."""
    try:
        from cuda.core import _linker

        return "driver (cuLink)" if _linker._decide_nvjitlink_or_driver() else "nvJitLink"
    except Exception as error:
        return f"unknown ({type(error).__name__})"


def max_jit_ptx(driver: tuple[int, int] | None) -> tuple[int, int] | None:
    """The newest PTX ISA a driver can JIT: CUDA 13.N -> 9.N (12.x: unknown here)."""
    if driver is None or driver[0] != 13:
        return None
    return 9, driver[1]


def ptx_verdict(ptx: tuple[int, int] | None, driver: tuple[int, int] | None, linker: str) -> str:
    """Whether the PTX the compiler writes can run on this driver, and why."""
    if ptx is None or driver is None:
        return "unknown (no compiler or no driver)"
    newest = max_jit_ptx(driver)
    if newest is None or ptx <= newest:
        return f"PTX {ptx[0]}.{ptx[1]} runs on this driver (CUDA {driver[0]}.{driver[1]})"
    if linker == "nvJitLink":
        return (
            f"PTX {ptx[0]}.{ptx[1]} is newer than this driver can JIT (at most "
            f"{newest[0]}.{newest[1]}), but numba-cuda links through nvJitLink to cubin, "
            "so the driver never compiles PTX"
        )
    return (
        f"PTX {ptx[0]}.{ptx[1]} is newer than this driver can JIT (at most "
        f"{newest[0]}.{newest[1]}) and numba-cuda links with the driver: kernels will "
        f"fail to load. {pin_advice(driver)}"
    )


def pin_advice(driver: tuple[int, int] | None) -> str:
    minor = f"{driver[0]}.{driver[1]}" if driver else "<driver's CUDA version>"
    return (
        f'Fix: pin the toolkit to the driver, pip install "cuda-toolkit[cccl,cudart,nvrtc,'
        f'nvvm]=={minor}.*" (or install nvidia-nvjitlink so that numba-cuda links to '
        "cubin); see docs/cuda.md."
    )


def diagnose_failure(output: str, driver: tuple[int, int] | None) -> str | None:
    """An explanation of a known way the first kernel fails, or None."""
    if re.search(r"UNSUPPORTED_PTX_VERSION|unsupported PTX version|PTX JIT", output, re.I):
        return (
            "The driver cannot compile the PTX that the CUDA compiler from PyPI wrote: the "
            "toolkit wheels are newer than the driver. " + pin_advice(driver)
        )
    if re.search(r"libcublas|cublasLt", output):
        return "cuBLAS does not load. " + _cublas_fix()
    if re.search(r"CUDA driver library cannot be found|no CUDA GPU|CUDA_ERROR_NO_DEVICE", output):
        return "No usable driver or GPU: check nvidia-smi, and the container's GPU access."
    return None


def _cublas_fix() -> str:
    from kernelgrad.backends.cuda import vendor

    return f"Fix: {vendor.fix_command()}"


def section_environment(ctx: Context) -> list[str]:
    import kernelgrad as kg

    lines = [
        f"* date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"* host: {platform.node()}, {platform.platform()}, Python {platform.python_version()}",
        f"* kernelgrad {kg.__version__} ({_git_commit()})",
    ]
    if ctx.dry_run:
        lines.append("* **dry run: numba's CUDA simulator; every timing below is meaningless**")
    if not kg.cuda.is_available():
        raise SectionError("no CUDA device: kg.cuda.is_available() is False")
    from kernelgrad.backends import get_backend
    from kernelgrad.device import as_device

    properties = get_backend(as_device("cuda")).properties
    driver = driver_cuda_version()
    ptx = emitted_ptx_version()
    linker = linker_backend()
    lines += [
        f"* device: {kg.cuda.get_device_name()} (compute capability "
        f"{'.'.join(map(str, properties.compute_capability))}, "
        f"{properties.multiprocessors} SMs), {kg.cuda.device_count()} device(s)",
        f"* driver: CUDA {driver[0]}.{driver[1]}" if driver else "* driver: none",
        f"* compiler: NVVM writes PTX {'.'.join(map(str, ptx)) if ptx else 'unknown'}; "
        f"numba-cuda links with {linker}",
        f"* PTX and driver: {ptx_verdict(ptx, driver, linker)}",
    ]
    libraries = kg.cuda.vendor_libraries()
    lines.append(
        "* vendor libraries: " + "; ".join(f"{name}: {state}" for name, state in libraries.items())
    )
    wheels = [f"{name} {version_of(name)}" for name in WHEELS if version_of(name)]
    lines.append(f"* wheels: {', '.join(wheels)}")
    return lines


def _git_commit() -> str:
    try:
        completed = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
        return completed.stdout.strip() or "not a git checkout"
    except Exception:
        return "not a git checkout"


FIRST_KERNEL = """
import time
start = time.perf_counter()
import kernelgrad as kg
x = kg.arange(8, dtype=kg.float32, device="cuda")
value = ((x + 1) * 2).sum().item()
assert value == 72.0, value
product = (kg.ones(64, 64, device="cuda") @ kg.ones(64, 64, device="cuda")).sum().item()
assert product == 64.0 ** 3, product
from kernelgrad.backends import get_backend
from kernelgrad.device import as_device
print("matmul", get_backend(as_device("cuda")).matmul_impl)
print("seconds", time.perf_counter() - start)
"""


def section_first_kernel(ctx: Context) -> list[str]:
    try:
        completed = run_command([ctx.python, "-c", FIRST_KERNEL], ctx, timeout=180)
    except SectionError as failure:
        explanation = diagnose_failure(failure.log, driver_cuda_version())
        if explanation:
            raise SectionError(f"{failure} -- {explanation}", failure.log) from None
        raise
    found = dict(line.split(" ", 1) for line in completed.stdout.strip().splitlines())
    lines = [
        f"* a fresh process ran its first kernels and matmul in {float(found['seconds']):.1f} s "
        "(import, compile or load from the kernel cache, launch, read back)",
        f"* matmul runs on: {found['matmul']}",
    ]
    if not ctx.dry_run and found["matmul"] != "cublas":
        raise SectionError(
            f"matmul does not use cuBLAS on this GPU ({found['matmul']}). {_cublas_fix()}"
        )
    return lines


# --- test suites ------------------------------------------------------------------------------
def pytest_summary(output: str) -> str:
    """The last summary line of a pytest run ("12 passed, 3 skipped in 4.5s")."""
    for line in reversed(output.strip().splitlines()):
        if re.search(r"\d+ (passed|failed|skipped|deselected|error)", line):
            return line.strip("= ")
    return "no summary"


def run_pytest(ctx: Context, arguments: list[str], timeout: float) -> list[str]:
    command = [ctx.python, "-m", "pytest", "--backend", "cuda", "-q", "-p", "no:cacheprovider"]
    command += arguments
    completed = run_command(command, ctx, timeout)
    summary = pytest_summary(completed.stdout)
    if " passed" not in summary:
        raise SectionError(f"no test passed: {summary}", tail(completed.stdout))
    return [f"* `{' '.join(['pytest', *command[3:]])}`", f"* {summary}"]


def section_gpu_tests(ctx: Context) -> list[str]:
    if ctx.dry_run:  # under the simulator every gpu test skips: run a small CUDA file
        return run_pytest(ctx, ["tests/backends/test_cuda_random.py", "-k", "model"], 120)
    return run_pytest(ctx, ["-m", "gpu", "-ra"], 180)


def section_backend_suite(ctx: Context) -> list[str]:
    arguments = ["-p", "cuda_sim_select", "-m", "not slow", "--durations=5"]
    if ctx.dry_run:
        arguments = ["tests/backends/test_cuda_runtime.py", *arguments]
    return run_pytest(ctx, arguments, ctx.remaining() - 5)


# --- benchmarks -------------------------------------------------------------------------------
def _bench() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    import bench_cuda

    return bench_cuda


def _figure(value: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value * scale:,.{digits}f}"


def _vs(ours: float | None, theirs: float | None) -> str:
    return "n/a" if ours is None or not theirs else f"{ours / theirs:.2f}x"


def section_gemm(ctx: Context) -> list[str]:
    import kernelgrad as kg

    bench = _bench()
    results = bench.measure_matmul(kg, bench.Peer(), ctx.gemm_n, ctx.repeat)
    reference = results["cupy"]
    lines = [
        f"float32 {ctx.gemm_n}x{ctx.gemm_n} @ {ctx.gemm_n}x{ctx.gemm_n}, TF32 off, best of "
        f"{ctx.repeat}.",
        "",
        "| implementation | TFLOP/s | vs cuBLAS through CuPy |",
        "|---|---:|---:|",
    ]
    names = {
        "kernelgrad cublas": "kernelgrad, cuBLAS path",
        "kernelgrad kernel": "kernelgrad, own tiled kernel",
        "cupy": "cupy.matmul (cuBLAS)",
        "torch": "torch.matmul",
    }
    for key, label in names.items():
        lines.append(f"| {label} | {_figure(results[key])} | {_vs(results[key], reference)} |")
    for name, reason in results["unavailable"].items():
        lines.append(f"\n{name} unavailable: {reason}")
    if not ctx.dry_run and results["kernelgrad cublas"] is None:
        raise SectionError("kernelgrad's cuBLAS path is unavailable", "\n".join(lines))
    return lines


def section_memory_bound(ctx: Context) -> list[str]:
    import kernelgrad as kg

    bench = _bench()
    bandwidth, rows = bench.measure_memory_bound(kg, bench.Peer(), ctx.memory_numel, ctx.repeat)
    lines = [
        f"{ctx.memory_numel:,} float32 elements; device copy bandwidth (cuMemcpyDtoD) "
        f"{bandwidth / 1e9:,.1f} GB/s.",
        "",
        "| op | kernelgrad GB/s | of copy bandwidth | PyTorch GB/s | kernelgrad / PyTorch |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['op']} | {_figure(row['bytes_per_s'], 1e-9, 1)} | {row['of_copy']:.2f} | "
            f"{_figure(row['torch_bytes_per_s'], 1e-9, 1)} | "
            f"{_vs(row['bytes_per_s'], row['torch_bytes_per_s'])} |"
        )
    return lines


def eight_op_chain(x: Any) -> Any:
    """Eight elementwise ops: eight kernels eager, one when fused by kg.compile."""
    y = x * 1.5 + 0.5
    y = y.relu() * x
    y = (y - 1.0).tanh()
    return y * 2.0 + x


def section_fusion(ctx: Context) -> list[str]:
    import kernelgrad as kg

    bench = _bench()
    peer = bench.Peer()
    fused = kg.compile(eight_op_chain)
    lines = [
        "`((((x*1.5+0.5).relu()*x)-1).tanh())*2+x`: 8 kernels eager, 1 fused "
        f"(kg.compile); best of {ctx.repeat}.",
        "",
        "| elements | eager ms | fused ms | fused speed-up | PyTorch eager ms |",
        "|---:|---:|---:|---:|---:|",
    ]
    for numel in ctx.chain_numels:
        x = kg.randn(numel, device="cuda")
        expected = eight_op_chain(x).cpu().numpy()
        fused(x)  # the first call runs eagerly, the second traces
        got = fused(x).cpu().numpy()
        if not _allclose(got, expected):
            raise SectionError(f"the fused chain differs from the eager one ({numel} elements)")
        eager_seconds = bench.timed(lambda x=x: eight_op_chain(x), kg.cuda.synchronize, ctx.repeat)
        fused_seconds = bench.timed(lambda x=x: fused(x), kg.cuda.synchronize, ctx.repeat)
        torch_ms = None
        if peer.torch is not None:
            tx = peer.torch.randn(numel, device="cuda")
            torch_ms = bench.timed(lambda tx=tx: eight_op_chain(tx), peer.synchronize, ctx.repeat)
        lines.append(
            f"| {numel:,} | {eager_seconds * 1e3:.3f} | {fused_seconds * 1e3:.3f} | "
            f"{eager_seconds / fused_seconds:.2f}x | {_figure(torch_ms, 1e3, 3)} |"
        )
    return lines


def section_graphs(ctx: Context) -> list[str]:
    """A compiled MLP training step replayed step by step and as CUDA graphs
    (``KG_NATIVE_REPLAY=0`` and the default), with the same results."""
    import numpy as np

    import kernelgrad as kg
    import kernelgrad.nn.functional as F  # noqa: N812

    batch, sizes = (8, (16, 8, 4)) if ctx.dry_run else (128, (784, 256, 10))
    rng = np.random.default_rng(0)
    x = kg.tensor(rng.standard_normal((batch, sizes[0])), dtype=kg.float32, device="cuda")
    y = kg.tensor(rng.integers(0, sizes[2], batch), device="cuda")
    rows = []
    losses = {}
    for setting in ("0", "8"):
        os.environ["KG_NATIVE_REPLAY"] = setting
        kg.manual_seed(0)
        model = kg.nn.Sequential(
            kg.nn.Linear(sizes[0], sizes[1]), kg.nn.ReLU(), kg.nn.Linear(sizes[1], sizes[2])
        ).to("cuda")
        optimizer = kg.optim.Adam(model.parameters(), lr=1e-3)

        def step(model=model, optimizer=optimizer):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        compiled = kg.compile(step)
        losses[setting] = [compiled().item() for _ in range(12)]  # traced, joined at the 8th
        seconds = _bench().timed(compiled, kg.cuda.synchronize, max(ctx.repeat, 1) * 10)
        (plan,) = compiled.plans
        joined, graphs = plan.native
        refused = [run.refused for _, run in plan._joined.values() if run.refused]
        if refused:
            raise SectionError(f"a capture was refused: {refused[0]}")
        rows.append(
            f"| {'step by step' if setting == '0' else 'CUDA graphs'} | "
            f"{seconds * 1e3:.3f} | {len(plan.steps)} | {joined} in {graphs} |"
        )
    os.environ.pop("KG_NATIVE_REPLAY", None)
    if not np.allclose(losses["0"], losses["8"], rtol=1e-5):
        raise SectionError(f"losses differ: {losses['0']} vs {losses['8']}")
    return [
        f"MLP {'-'.join(map(str, sizes))} training step (Adam, batch {batch}) under "
        "kg.compile, replayed step by step (`KG_NATIVE_REPLAY=0`) and as CUDA graphs; "
        "equal losses over 12 steps.",
        "",
        "| replay | ms/step | kernels | steps in graphs |",
        "|---|---:|---:|---:|",
        *rows,
    ]


def _allclose(got: Any, expected: Any) -> bool:
    import numpy as np

    return bool(np.allclose(got, expected, rtol=1e-5, atol=1e-6))


def section_per_op(ctx: Context) -> list[str]:
    import kernelgrad as kg

    bench = _bench()
    ours, theirs = bench.measure_launch_overhead(kg, bench.Peer(), ctx.tiny_ops)
    return [
        f"* `y = y + 1` on 8 elements, {ctx.tiny_ops} times back to back: "
        f"{ours * 1e6:.1f} us per op (PyTorch: {_figure(theirs, 1e6, 1)} us)",
        "* kernelgrad's own Python per op, without the launch: "
        "`python benchmarks/bench_dispatch_cuda.py` (any machine)",
    ]


# --- training ---------------------------------------------------------------------------------
def training_dataset() -> str:
    """Fashion-MNIST when it is on this machine (nothing is downloaded), else the small
    dataset inside kernelgrad."""
    from kernelgrad.data import load_dataset

    try:
        load_dataset("fashion-mnist", train=False)
        return "fashion-mnist"
    except Exception:
        return "digits"


def run_train(
    ctx: Context, out: Path, samples: int, epochs: int, cache: Path | None, timeout: float
) -> dict[str, Any]:
    command = [
        ctx.python, "-m", "kernelgrad", "train", "--dataset", training_dataset(),
        "--model", "lenet", "--device", ctx.train_device, "--epochs", str(epochs),
        "--limit-train", str(samples), "--limit-test", str(ctx.train_test), "--out", str(out),
        "--no-download", "--lr", "1e-3", "--schedule", "constant", "--seed", "0",
    ]  # fmt: skip
    started = time.perf_counter()
    run_command(command, ctx, timeout, cache)
    metrics = json.loads((out / "metrics.json").read_text())
    metrics["wall_seconds"] = time.perf_counter() - started
    return metrics


def torch_training(ctx: Context, dataset: str) -> tuple[float, float] | None:
    """PyTorch eager LeNet-5 (the same layers, Adam 1e-3, batch 128) on the same images,
    on the GPU: best epoch's samples/s and test accuracy; None without PyTorch+CUDA."""
    try:
        import torch
        from torch import nn
    except ImportError:
        return None
    if ctx.dry_run or not torch.cuda.is_available():
        return None
    import numpy as np

    from kernelgrad.data import load_dataset

    torch.manual_seed(0)
    train, test = load_dataset(dataset, train=True), load_dataset(dataset, train=False)
    samples = min(ctx.train_samples, len(train))
    images, labels = train.get_batch(np.arange(samples))
    test_images, test_labels = test.get_batch(np.arange(min(ctx.train_test, len(test))))
    model = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10),
    ).cuda()  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x_all = torch.from_numpy(images).cuda()
    y_all = torch.from_numpy(labels).cuda()
    order_rng = np.random.default_rng(0)
    best = 0.0
    for _ in range(ctx.train_epochs):
        order = torch.from_numpy(order_rng.permutation(samples)).cuda()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for begin in range(0, samples, 128):
            index = order[begin : begin + 128]
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x_all[index]), y_all[index]).backward()
            optimizer.step()
        torch.cuda.synchronize()
        best = max(best, samples / (time.perf_counter() - start))
    with torch.no_grad():
        predicted = model(torch.from_numpy(test_images).cuda()).argmax(1).cpu().numpy()
    return best, float((predicted == test_labels).mean())


def section_training(ctx: Context) -> list[str]:
    dataset = training_dataset()
    metrics = run_train(
        ctx, ctx.workdir / "train", ctx.train_samples, ctx.train_epochs, None, timeout=240
    )
    history = metrics["history"]
    rate = max(history["samples_per_second"])
    accuracy = history["test_accuracy"][-1]
    from kernelgrad.data import load_dataset

    samples = min(ctx.train_samples, len(load_dataset(dataset, train=True)))
    lines = [
        f"LeNet-5, {dataset} ({metrics['data']}), {samples:,} training samples x "
        f"{ctx.train_epochs} epochs, batch 128, Adam 1e-3 (constant), seed 0; "
        f"`kernelgrad train --device {ctx.train_device}` against PyTorch eager on the same "
        "GPU and images (best epoch).",
        "",
        "| | samples/s | test accuracy |",
        "|---|---:|---:|",
        f"| kernelgrad | {rate:,.0f} | {accuracy:.4f} |",
    ]
    peer = torch_training(ctx, dataset)
    if peer is None:
        lines.append("| PyTorch | n/a (no PyTorch with CUDA) | |")
    else:
        lines.append(f"| PyTorch | {peer[0]:,.0f} | {peer[1]:.4f} |")
        lines += ["", f"kernelgrad / PyTorch samples/s: {rate / peer[0]:.2f}"]
    if not 0.0 <= accuracy <= 1.0 or rate <= 0:
        raise SectionError(f"implausible training metrics: {rate} samples/s, {accuracy}")
    return lines


def section_first_step(ctx: Context) -> list[str]:
    # (a dry run keeps the usual cache: compiling every CPU kernel afresh takes minutes)
    cache = None if ctx.dry_run else ctx.workdir / "empty-kernel-cache"
    runs = []
    for kind in ("cold", "warm"):
        runs.append(
            run_train(ctx, ctx.workdir / kind, ctx.first_step_samples, 1, cache, timeout=240)
        )
    cold, warm = (run["first_step_seconds"] for run in runs)
    return [
        "Time from process start to the end of the first training step of `kernelgrad "
        f"train --device {ctx.train_device}` (LeNet-5, batch 128):",
        "",
        f"* empty kernel cache (every kernel compiled): {cold:.1f} s",
        f"* warm kernel cache (loaded from disk): {warm:.1f} s",
        "",
        "(numba-cuda caches the backend's hand-written kernels beside the package, outside "
        "the kernel cache folder: those are warm in both runs.)",
    ]


def section_memory(ctx: Context) -> list[str]:
    import numpy as np

    import kernelgrad as kg
    from kernelgrad.models import build_model
    from kernelgrad.nn.functional import cross_entropy

    kg.manual_seed(0)
    with kg.device("cuda"):
        if ctx.dry_run:  # the simulator runs every GPU thread in Python
            model = kg.nn.Sequential(kg.nn.Flatten(), kg.nn.Linear(16, 10))
        else:
            model = build_model("lenet")
    optimizer = kg.optim.Adam(model.parameters(), lr=1e-3)
    batch, side = (4, 4) if ctx.dry_run else (128, 28)
    rng = np.random.default_rng(0)
    x = kg.tensor(rng.standard_normal((batch, 1, side, side)).astype(np.float32), device="cuda")
    y = kg.tensor(rng.integers(0, 10, batch), device="cuda")
    # step 10 is the baseline: by then every buffer size of a step has been allocated
    checkpoints = sorted({10, max(10, ctx.memory_steps // 10), ctx.memory_steps})
    rows = []
    start = time.perf_counter()
    for step in range(1, ctx.memory_steps + 1):
        optimizer.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        if step in checkpoints:
            loss.item()
            stats = kg.cuda.memory_stats()
            rows.append((step, stats))
    seconds = time.perf_counter() - start
    lines = [
        f"{'A linear layer' if ctx.dry_run else 'LeNet-5'}, batch {batch}, Adam, "
        f"{ctx.memory_steps} steps in {seconds:.1f} s.",
        "",
        "| after step | in use (MB) | reserved (MB) | driver allocations | CuPy pool (MB) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for step, stats in rows:
        lines.append(
            f"| {step} | {stats['allocated_bytes'] / 1e6:.2f} | "
            f"{stats['reserved_bytes'] / 1e6:.2f} | {stats['num_raw_allocs']} | "
            f"{stats['vendor_pool_reserved_bytes'] / 1e6:.2f} |"
        )
    first, last = rows[0][1], rows[-1][1]
    keys = ("allocated_bytes", "num_raw_allocs", "vendor_pool_reserved_bytes")
    grown = [key for key in keys if last[key] > first[key]]
    if grown:
        raise SectionError(f"memory grew from step {rows[0][0]} to {rows[-1][0]}: {grown}")
    lines += ["", "Flat: in use, driver allocations and CuPy's pool do not grow after step 10."]
    return lines


def section_nccl(ctx: Context) -> list[str]:
    """HOOK: the NCCL path of distributed training. kernelgrad has no multi-GPU training
    yet; the change that adds it replaces this function with its measurements (all-reduce
    bandwidth against nvidia-nccl's own test, a data-parallel LeNet-5 step on every GPU)
    and returns its lines (raising SectionError when a check fails)."""
    return [
        "**Not yet implemented.** The NCCL path of distributed training does not exist in "
        "kernelgrad yet; `section_nccl` in `benchmarks/gpu_report.py` is the hook its "
        "change fills (all-reduce bandwidth, a data-parallel training step).",
    ]


SECTIONS: list[tuple[str, Callable[[Context], list[str]]]] = [
    ("Environment", section_environment),
    ("First kernel", section_first_kernel),
    ("GPU tests (`pytest -m gpu`)", section_gpu_tests),
    ("GEMM", section_gemm),
    ("Memory-bound ops", section_memory_bound),
    ("Fusion: an 8-op chain", section_fusion),
    ("Compiled steps as CUDA graphs", section_graphs),
    ("Per-op time", section_per_op),
    ("Training: kernelgrad train vs PyTorch eager", section_training),
    ("First training step, cold and warm", section_first_step),
    ("Memory over training steps", section_memory),
    ("NCCL distributed training", section_nccl),
    ("Backend-parametrised suite on the device", section_backend_suite),
]


# --- the report -------------------------------------------------------------------------------
def run_section(title: str, section: Callable[[Context], list[str]], ctx: Context) -> Outcome:
    """Run one section; any exception makes it FAILED with its message and log."""
    start = time.monotonic()
    if ctx.remaining() <= 0:
        return Outcome(title, FAILED, ["not run: the budget of the report was used up"])
    try:
        lines = section(ctx)
    except SectionError as failure:
        outcome = Outcome(title, FAILED, [f"**{failure}**"], failure.log)
    except Exception as error:
        outcome = Outcome(
            title, FAILED, [f"**{type(error).__name__}: {error}**"], traceback.format_exc()
        )
    else:
        status = HOOK if section is section_nccl else OK
        outcome = Outcome(title, status, lines)
    outcome.seconds = time.monotonic() - start
    return outcome


def render(outcomes: list[Outcome], ctx: Context, total_seconds: float) -> str:
    """The Markdown report."""
    heading = "GPU report" + (" (DRY RUN: simulator, timings meaningless)" if ctx.dry_run else "")
    lines = [
        f"## {heading}",
        "",
        f"`python benchmarks/gpu_report.py{' --dry-run' if ctx.dry_run else ''}`, "
        f"{datetime.date.today().isoformat()}, {total_seconds:.0f} s in all.",
        "",
        "| section | status | seconds |",
        "|---|---|---:|",
    ]
    lines += [f"| {o.title} | {o.status} | {o.seconds:.1f} |" for o in outcomes]
    for outcome in outcomes:
        lines += ["", f"### {outcome.title} ({outcome.status})", "", *outcome.lines]
        if outcome.log:
            lines += ["", "```", outcome.log.strip(), "```"]
    for note in ctx.notes:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def failed(outcomes: list[Outcome]) -> list[str]:
    return [o.title for o in outcomes if o.status == FAILED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-report.md", help="the Markdown file to write")
    parser.add_argument("--budget", type=float, default=570.0, help="seconds for everything")
    parser.add_argument(
        "--dry-run", action="store_true", help="the plumbing under the simulator, tiny sizes"
    )
    parser.add_argument(
        "--only", default="", help="comma-separated section numbers to run (1-12), e.g. 1,2,4"
    )
    args = parser.parse_args(argv)
    if args.dry_run:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba is imported
    elif os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        parser.error("NUMBA_ENABLE_CUDASIM=1 is set: use --dry-run, or unset it for a GPU")
    sys.path.insert(0, str(ROOT))
    started = time.monotonic()
    deadline = started + args.budget
    only = {int(n) for n in args.only.split(",") if n.strip()}
    with tempfile.TemporaryDirectory(prefix="kg-gpu-report-") as folder:
        workdir = Path(folder)
        if args.dry_run:
            ctx = dry_run_context(deadline, workdir)
        else:
            ctx = Context(dry_run=False, deadline=deadline, workdir=workdir)
        outcomes = []
        for number, (title, section) in enumerate(SECTIONS, start=1):
            if only and number not in only:
                continue
            print(f"[{number}/{len(SECTIONS)}] {title} ...", flush=True)
            outcome = run_section(title, section, ctx)
            print(f"      {outcome.status} ({outcome.seconds:.1f} s)", flush=True)
            outcomes.append(outcome)
    report = render(outcomes, ctx, time.monotonic() - started)
    Path(args.out).write_text(report)
    print(report)
    print(f"report written to {args.out}")
    broken = failed(outcomes)
    if broken:
        print(f"FAILED sections: {', '.join(broken)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
