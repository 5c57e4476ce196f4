"""CUDA backend benchmarks on a real GPU, with PyTorch on the same GPU as the peer.

    python benchmarks/bench_cuda.py               # everything
    python benchmarks/bench_cuda.py --quick       # smaller sizes, fewer repeats
    python benchmarks/bench_cuda.py --only matmul,mlp

Prints, for each measurement, kernelgrad's figure, PyTorch's and their ratio:

* matmul 4096 x 4096 float32: TFLOP/s with the vendor GEMM (cuBLAS through CuPy), with
  kernelgrad's own tiled kernel, and ``torch.matmul`` (TF32 off on both sides);
* matmul also through CuPy's ``matmul`` directly (the cuBLAS reference);
* elementwise (``a * b + c``, ``a + b``) and reduction (``sum``) throughput, as a
  fraction of the device-to-device copy bandwidth measured in the same run;
* per-op launch overhead: microseconds per tiny elementwise op, launched back to back;
* host <-> device transfer bandwidth (pageable NumPy memory on both sides);
* one training step of a 2-layer MLP (784-1024-10, batch 512, SGD), forward + backward
  + update.

Every timing is the best of several repeats, each synchronised with the device.
Refuses to run without a GPU (and under the CUDA simulator). The ``measure_*`` functions
return the figures; ``benchmarks/gpu_report.py`` puts them into its Markdown report.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def refuse(reason: str) -> None:
    print(f"bench_cuda: {reason}", file=sys.stderr)
    print("This benchmark needs a real NVIDIA GPU with numba-cuda installed.", file=sys.stderr)
    sys.exit(2)


def timed(fn: Callable[[], Any], synchronize: Callable[[], None], repeat: int) -> float:
    """Best wall time of ``fn`` over ``repeat`` runs, each ended by a synchronisation."""
    fn()
    synchronize()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def ratio(ours: float, theirs: float | None) -> str:
    """Our throughput over PyTorch's (above 1: faster than PyTorch)."""
    if theirs is None or theirs == 0:
        return "(no peer)"
    return f"{ours / theirs:.2f}x PyTorch's speed"


def time_ratio(our_seconds: float, torch_seconds: float) -> str:
    return ratio(1.0 / our_seconds, 1.0 / torch_seconds)


class Peer:
    """PyTorch on the same GPU, when installed with CUDA."""

    def __init__(self) -> None:
        self.torch: Any = None
        try:
            import torch

            if torch.cuda.is_available():
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
                self.torch = torch
        except ImportError:
            pass

    def synchronize(self) -> None:
        if self.torch is not None:
            self.torch.cuda.synchronize()


def measure_matmul(kg: Any, peer: Peer, n: int, repeat: int) -> dict[str, float | None]:
    """TFLOP/s of an ``n x n`` float32 product: kernelgrad with cuBLAS (through CuPy) and
    with its own tiled kernel, CuPy's ``matmul`` called directly, and PyTorch. None
    where one is unavailable (the reason is in ``unavailable``)."""
    from kernelgrad.backends import get_backend
    from kernelgrad.device import as_device

    backend = get_backend(as_device("cuda"))
    flops = 2 * n**3
    a = kg.randn(n, n, device="cuda")
    b = kg.randn(n, n, device="cuda")
    results: dict[str, Any] = {"unavailable": {}}
    chosen = backend.matmul_impl
    for impl in ("cublas", "kernel"):
        try:
            backend.set_matmul(impl)
        except RuntimeError as error:
            results[f"kernelgrad {impl}"] = None
            results["unavailable"][f"kernelgrad {impl}"] = str(error)
            continue
        seconds = timed(lambda: a @ b, kg.cuda.synchronize, repeat)
        results[f"kernelgrad {impl}"] = flops / seconds / 1e12
    backend.set_matmul(chosen)
    results["cupy"] = None
    try:
        import cupy

        ca, cb = cupy.random.standard_normal((2, n, n), dtype=cupy.float32)
        seconds = timed(lambda: ca @ cb, cupy.cuda.Device().synchronize, repeat)
        results["cupy"] = flops / seconds / 1e12
    except Exception as error:  # CuPy missing or without cuBLAS: no reference figure
        results["unavailable"]["cupy"] = f"{type(error).__name__}: {error}"
    results["torch"] = None
    if peer.torch is not None:
        ta = peer.torch.randn(n, n, device="cuda")
        tb = peer.torch.randn(n, n, device="cuda")
        results["torch"] = flops / timed(lambda: ta @ tb, peer.synchronize, repeat) / 1e12
    return results


def bench_matmul(kg: Any, peer: Peer, n: int, repeat: int) -> None:
    results = measure_matmul(kg, peer, n, repeat)
    torch_tflops = results["torch"]
    if torch_tflops is not None:
        print(f"matmul torch  : {torch_tflops:7.2f} TFLOP/s  ({n}x{n} float32, TF32 off)")
    for name, reason in results["unavailable"].items():
        print(f"matmul {name}: unavailable ({reason})")
    for impl in ("cublas", "kernel"):
        tflops = results[f"kernelgrad {impl}"]
        if tflops is None:
            continue
        label = "cuBLAS/CuPy" if impl == "cublas" else "own tiled kernel"
        print(f"matmul {impl:<7}: {tflops:7.2f} TFLOP/s  {ratio(tflops, torch_tflops)}  [{label}]")


def copy_bandwidth(kg: Any, numel: int, repeat: int) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second) with numba's
    cuMemcpyDtoD: the ceiling for memory-bound kernels."""
    from numba import cuda

    source = cuda.device_array(numel, dtype=np.float32)
    target = cuda.device_array(numel, dtype=np.float32)
    seconds = timed(lambda: target.copy_to_device(source), cuda.synchronize, repeat)
    return 2 * numel * 4 / seconds


def measure_memory_bound(
    kg: Any, peer: Peer, numel: int, repeat: int
) -> tuple[float, list[dict[str, Any]]]:
    """The copy bandwidth, and for each memory-bound op: GB/s, the fraction of the copy
    bandwidth, and PyTorch's GB/s (None without it)."""
    bandwidth = copy_bandwidth(kg, numel, repeat)
    a = kg.randn(numel, device="cuda")
    b = kg.randn(numel, device="cuda")
    c = kg.randn(numel, device="cuda")
    rows = kg.randn(max(numel // 1024, 1), 1024, device="cuda")
    cases = {
        "elementwise a*b+c": (lambda: a * b + c, 2 * 3 * 4 + 2 * 4),  # two kernels
        "elementwise a+b": (lambda: a + b, 3 * 4),
        "clone (copy kernel)": (lambda: a.clone(), 2 * 4),
        "sum (all)": (lambda: a.sum(), 4),
        "sum(dim=1) rows": (lambda: rows.sum(dim=1), 4),
        "sum(dim=0) columns": (lambda: rows.sum(dim=0), 4),
    }
    torch_cases: dict[str, Callable[[], Any]] = {}
    if peer.torch is not None:
        torch = peer.torch
        ta, tb, tc = (torch.randn(numel, device="cuda") for _ in range(3))
        trows = torch.randn(max(numel // 1024, 1), 1024, device="cuda")
        torch_cases = {
            "elementwise a*b+c": lambda: ta * tb + tc,
            "elementwise a+b": lambda: ta + tb,
            "clone (copy kernel)": lambda: ta.clone(),
            "sum (all)": lambda: ta.sum(),
            "sum(dim=1) rows": lambda: trows.sum(dim=1),
            "sum(dim=0) columns": lambda: trows.sum(dim=0),
        }
    results = []
    for name, (fn, bytes_per_element) in cases.items():
        achieved = numel * bytes_per_element / timed(fn, kg.cuda.synchronize, repeat)
        torch_rate = None
        if name in torch_cases:
            torch_seconds = timed(torch_cases[name], peer.synchronize, repeat)
            torch_rate = numel * bytes_per_element / torch_seconds
        results.append(
            {"op": name, "bytes_per_s": achieved, "of_copy": achieved / bandwidth,
             "torch_bytes_per_s": torch_rate}
        )  # fmt: skip
    return bandwidth, results


def bench_memory_bound(kg: Any, peer: Peer, numel: int, repeat: int) -> None:
    bandwidth, results = measure_memory_bound(kg, peer, numel, repeat)
    print(f"copy bandwidth (cuMemcpyDtoD): {bandwidth / 1e9:8.1f} GB/s ({numel * 4 / 1e6:.0f} MB)")
    for row in results:
        line = (
            f"{row['op']:<20}: {row['bytes_per_s'] / 1e9:8.1f} GB/s = {row['of_copy']:5.2f} of copy"
        )
        if row["torch_bytes_per_s"] is not None:
            line += f"   torch {row['torch_bytes_per_s'] / 1e9:8.1f} GB/s, "
            line += ratio(row["bytes_per_s"], row["torch_bytes_per_s"])
        print(line)


def measure_launch_overhead(kg: Any, peer: Peer, count: int) -> tuple[float, float | None]:
    """Seconds per tiny op (``y = y + 1`` on 8 elements, back to back): kernelgrad's and
    PyTorch's (None without it)."""
    x = kg.ones(8, device="cuda")

    def ours() -> None:
        y = x
        for _ in range(count):
            y = y + 1.0

    seconds = timed(ours, kg.cuda.synchronize, 3) / count
    if peer.torch is None:
        return seconds, None
    tx = peer.torch.ones(8, device="cuda")

    def theirs() -> None:
        y = tx
        for _ in range(count):
            y = y + 1.0

    return seconds, timed(theirs, peer.synchronize, 3) / count


def bench_launch_overhead(kg: Any, peer: Peer, count: int) -> None:
    seconds, torch_seconds = measure_launch_overhead(kg, peer, count)
    line = f"launch overhead     : {seconds * 1e6:8.1f} us per tiny op (y = y + 1, 8 elements)"
    if torch_seconds is not None:
        line += f"   torch {torch_seconds * 1e6:.1f} us, {time_ratio(seconds, torch_seconds)}"
    print(line)


def bench_transfers(kg: Any, peer: Peer, numel: int, repeat: int) -> None:
    host = np.random.default_rng(0).standard_normal(numel).astype(np.float32)
    host_tensor = kg.tensor(host)
    on_device = host_tensor.to("cuda")
    nbytes = numel * 4
    up = nbytes / timed(lambda: host_tensor.to("cuda"), kg.cuda.synchronize, repeat)
    down = nbytes / timed(lambda: on_device.cpu(), kg.cuda.synchronize, repeat)
    line_up = f"host -> device      : {up / 1e9:8.2f} GB/s ({nbytes / 1e6:.0f} MB, pageable)"
    line_down = f"device -> host      : {down / 1e9:8.2f} GB/s"
    if peer.torch is not None:
        torch = peer.torch
        torch_host = torch.from_numpy(host)
        torch_device = torch_host.cuda()
        torch_up = nbytes / timed(lambda: torch_host.cuda(), peer.synchronize, repeat)
        torch_down = nbytes / timed(lambda: torch_device.cpu(), peer.synchronize, repeat)
        line_up += f"   torch {torch_up / 1e9:.2f} GB/s, {ratio(up, torch_up)}"
        line_down += f"   torch {torch_down / 1e9:.2f} GB/s, {ratio(down, torch_down)}"
    print(line_up)
    print(line_down)


def bench_mlp(kg: Any, peer: Peer, batch: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 784)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    w1 = (rng.standard_normal((784, 1024)) * 0.03).astype(np.float32)
    w2 = (rng.standard_normal((1024, 10)) * 0.03).astype(np.float32)

    params = [
        kg.tensor(w1, device="cuda", requires_grad=True),
        kg.zeros(1024, device="cuda", requires_grad=True),
        kg.tensor(w2, device="cuda", requires_grad=True),
        kg.zeros(10, device="cuda", requires_grad=True),
    ]
    inputs, targets = kg.tensor(x, device="cuda"), kg.tensor(labels, device="cuda")

    def step() -> None:
        hidden = (inputs @ params[0] + params[1]).relu()
        loss = -((hidden @ params[2] + params[3]).log_softmax(1) * targets).sum(1).mean()
        loss.backward()
        with kg.no_grad():
            for p in params:
                p -= 0.01 * p.grad
                p.grad = None

    seconds = timed(step, kg.cuda.synchronize, repeat)
    stats = kg.cuda.memory_stats()
    line = f"MLP training step   : {seconds * 1e3:8.2f} ms (784-1024-10, batch {batch})"
    if peer.torch is not None:
        torch = peer.torch
        tparams = [
            torch.tensor(w1, device="cuda", requires_grad=True),
            torch.zeros(1024, device="cuda", requires_grad=True),
            torch.tensor(w2, device="cuda", requires_grad=True),
            torch.zeros(10, device="cuda", requires_grad=True),
        ]
        tinputs = torch.tensor(x, device="cuda")
        ttargets = torch.tensor(labels, device="cuda")

        def torch_step() -> None:
            hidden = (tinputs @ tparams[0] + tparams[1]).relu()
            logits = hidden @ tparams[2] + tparams[3]
            loss = -(logits.log_softmax(1) * ttargets).sum(1).mean()
            loss.backward()
            with torch.no_grad():
                for p in tparams:
                    p -= 0.01 * p.grad
                    p.grad = None

        torch_seconds = timed(torch_step, peer.synchronize, repeat)
        line += f"   torch {torch_seconds * 1e3:.2f} ms, {time_ratio(seconds, torch_seconds)}"
    print(line)
    print(
        f"  pool after the steps: {stats['allocated_bytes'] / 1e6:.1f} MB in use, "
        f"{stats['reserved_bytes'] / 1e6:.1f} MB reserved, {stats['num_raw_allocs']} raw "
        f"allocations for {stats['num_allocs']} requests"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--only", default="", help="comma-separated: matmul,memory,launch,...")
    args = parser.parse_args()
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        refuse("NUMBA_ENABLE_CUDASIM=1 is set: the simulator's timings mean nothing.")
    import kernelgrad as kg

    if not kg.cuda.is_available():
        refuse("no CUDA GPU is available (numba-cuda found no driver or device).")
    peer = Peer()
    print(f"device: {kg.cuda.get_device_name()}   numba-cuda kernels, best of N repeats")
    if peer.torch is None:
        print("PyTorch with CUDA is not available: no peer ratios")
    else:
        print(f"peer: torch {peer.torch.__version__} on the same GPU")
    quick = args.quick
    repeat = 3 if quick else 10
    selected = set(filter(None, args.only.split(","))) or {
        "matmul",
        "memory",
        "launch",
        "transfer",
        "mlp",
    }
    if "matmul" in selected:
        bench_matmul(kg, peer, 2048 if quick else 4096, repeat)
    if "memory" in selected:
        bench_memory_bound(kg, peer, 2**24 if quick else 2**26, repeat)
    if "launch" in selected:
        bench_launch_overhead(kg, peer, 200 if quick else 2000)
    if "transfer" in selected:
        bench_transfers(kg, peer, 2**24 if quick else 2**26, repeat)
    if "mlp" in selected:
        bench_mlp(kg, peer, 512, repeat)


if __name__ == "__main__":
    main()
