"""Host time per CUDA op: kernelgrad's own Python between a tensor operation and the
kernel launch, with the launch itself replaced by a no-op.

    python benchmarks/bench_dispatch_cuda.py [--repeat 5] [--number 20000] [--clock wall|cpu]
        [--json FILE]

Runs the real CUDA backend code path (front end, backend, launch plumbing, memory pool)
under numba's CUDA simulator, where nothing is compiled for a GPU, with every kernel
launch replaced by a call that does nothing: what is left is what the Python of
kernelgrad costs per op, on top of numba-cuda's own launch (about 10 us) and the GPU's
work. Works without a GPU (it sets ``NUMBA_ENABLE_CUDASIM=1`` itself, so run it in a
fresh process).

Prints microseconds per op (the best of ``--repeat`` runs of ``--number`` ops) for:

* ``a + b`` (1,000 float32 elements, contiguous) and ``a + 1.0`` (a Python scalar);
* a broadcast multiply ``m * row`` ((32, 32) by (32,));
* ``relu``, an in-place ``add_``, ``sum`` over everything and over dim 1;
* ``backend.elementwise`` and ``Launcher.launch`` alone, for ``a + b``, and
  ``backend.empty`` (a pooled buffer of 1,000 float32, freed again): the parts below
  the front end.

A simulator allocation (host memory) costs less than a pooled numba device array on a
GPU, so the figures are a lower bound of the real host time; the launch itself is
measured on a GPU by ``benchmarks/gpu_report.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if "numba" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    sys.exit("bench_dispatch_cuda: run it in a fresh process (it needs the CUDA simulator)")
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's kernelgrad


def _no_launch(*args: Any) -> None:
    return None


def disable_launches() -> None:
    """Make every simulated kernel launch (``kernel[grid, block, ...](*args)``) a no-op:
    configuring returns a callable that does nothing, as a configured launch of a real
    numba-cuda kernel is a separate object."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    from kernelgrad.backends.cuda import launch

    def configure(self: Any, configuration: Any) -> Callable[..., None]:
        return _no_launch

    FakeCUDAKernel.__getitem__ = configure  # type: ignore[method-assign]
    # The simulator's configured launch also silences NumPy's warnings, which a GPU
    # launch does not need: skip that too.
    simulated_launch = getattr(launch, "_SimulatedLaunch", None)
    if simulated_launch is not None:
        simulated_launch.__call__ = _no_launch


def per_op(fn: Callable[[], Any], number: int, repeat: int, clock: Callable[[], float]) -> float:
    """Best microseconds per call of ``fn`` over ``repeat`` runs of ``number`` calls."""
    from _timing import best_per_call

    return best_per_call(fn, number, repeat, clock)


def cases(kg: Any) -> dict[str, Callable[[], Any]]:
    from kernelgrad.backends import get_backend
    from kernelgrad.backends.cuda.backend import _Operands
    from kernelgrad.device import as_device
    from kernelgrad.ops.elementwise import OPS

    a = kg.ones(1000, device="cuda")
    b = kg.ones(1000, device="cuda")
    m = kg.ones(32, 32, device="cuda")
    row = kg.ones(32, device="cuda")
    backend = get_backend(as_device("cuda"))
    add = OPS["add"].scalar
    out = kg.empty(1000, device="cuda")
    views = [out._view()], [a._view(), b._view()], [kg.float32, kg.float32]
    backend.elementwise(add, *views)  # loads the kernel
    kernel = next(iter(backend._elementwise_kernels.values()))
    launch_args = (1000, (0, 0, 0), out._view().buffer, a._view().buffer, b._view().buffer)
    described = _Operands.of(views[0], views[1])
    return {
        "a + b": lambda: a + b,
        "a + 1.0": lambda: a + 1.0,
        "m * row (broadcast)": lambda: m * row,
        "relu": lambda: a.relu(),
        "a.add_(b) (in place)": lambda: a.add_(b),
        "a.sum()": lambda: a.sum(),
        "m.sum(1)": lambda: m.sum(1),
        "backend.elementwise (a + b)": lambda: backend.elementwise(add, *views),
        "Launcher.launch (a + b)": lambda: backend.launcher.launch(
            "add", kernel, 4, 256, described, launch_args
        ),
        "backend.empty (1,000 float32)": lambda: backend.empty(1000, kg.float32),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or this thread's CPU time (steadier on a busy machine)",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    import kernelgrad as kg

    disable_launches()
    results = {}
    clock = time.perf_counter if args.clock == "wall" else time.thread_time
    print(
        f"host time per op ({args.clock} clock), launches replaced by no-ops "
        f"(best of {args.repeat} x {args.number})"
    )
    for name, fn in cases(kg).items():
        results[name] = per_op(fn, args.number, args.repeat, clock)
        print(f"  {name:<30} {results[name]:7.2f} us")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
