"""Host time per eager CPU op (kernelgrad's own Python), and training steps of small
networks side by side with PyTorch.

    python benchmarks/bench_dispatch.py [--number 2000] [--repeat 5] [--clock wall|cpu]
        [--rounds 3] [--steps 40] [--threads 2] [--only host,steps] [--profile CASE]

Two parts:

* ``host``: microseconds per op with every kernel replaced by a no-op (Numba's
  dispatchers, the BLAS call and NumPy's SIMD calls for standard math functions), so
  that only the Python between a tensor operation and its kernel is timed: the front end
  (argument normalisation, dtype rule, broadcasting, allocation, the autograd record)
  and the CPU backend's dispatch (kernel lookup, argument preparation). Cases: ``a + b``
  (same shape, small), ``a + 1.0``, a broadcast multiply, ``relu``, an in-place
  ``add_``, ``a + b`` recording autograd, ``sum(dim)``, a small ``matmul``, a Linear
  layer's forward and backward, a call of a ``kg.compile``d one-kernel function
  (kernelgrad only), and an MLP training step (784-256-10, batch 128, cross-entropy,
  fused Adam) divided by its number of kernel launches. The same cases
  run in PyTorch (its own process) with real kernels on tensors small enough that the
  kernels cost little: PyTorch's eager cost per op, for reference. Small buffers are
  handed out zeroed while kernels are no-ops (``np.zeros`` instead of ``np.empty``), so
  that error flags made with ``kg.zeros`` read as clear.
* ``steps``: the MLP training step (the same model, layer order, loss, optimizer and
  batch in both: ``Linear(784, 256)``, ReLU, ``Linear(256, 10)``, cross-entropy, Adam
  with ``fused=True``), real kernels, ``--rounds`` rounds, each timing kernelgrad in this
  process and then PyTorch in a fresh process of its own (see ``_timing.py``), with the
  ratio within each round (on a shared machine the load moves between rounds). Also the
  kernel launches per step. LeNet-5 has its own script, ``bench_lenet.py``.

* ``phases`` (not run by default: ``--only phases``): the MLP step's parts with real
  kernels, each timed alone in a loop (wall clock, best of ``--repeat`` runs of
  ``--number`` / 10 calls): the first Linear layer, ReLU, the second Linear layer, the
  cross-entropy on detached logits, the whole forward pass, forward and backward, and
  the whole step; PyTorch's in a process of its own. Where the eager step loses time.

``--profile CASE`` runs one host case (or ``step``, the MLP step with real kernels, or
``step-host``, that step with kernels as no-ops)
under cProfile and prints the functions with the most time of their own.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _timing import (
    best_per_call,
    import_torch,
    report_to_parent,
    run_peer,
    thread_counts,
    use_threads,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's kernelgrad

import kernelgrad as kg

BATCH, INPUTS, HIDDEN, CLASSES = 128, 784, 256, 10
WARMUP_STEPS = 10


def _clock(name: str) -> Callable[[], float]:
    """Wall time, or this thread's CPU time (steadier on a busy machine)."""
    return time.perf_counter if name == "wall" else time.thread_time


def per_call(fn: Callable[[], Any], number: int, repeat: int, clock: Callable[[], float]) -> float:
    """Best microseconds per call of ``fn`` over ``repeat`` runs of ``number`` calls,
    after ``number`` warm-up calls."""
    return best_per_call(fn, number, repeat, clock, warmup=number)


# --- the cases, written once for both libraries ---------------------------------------------------
def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "a": rng.standard_normal((32, 32)).astype(np.float32),
        "b": rng.standard_normal((32, 32)).astype(np.float32),
        "row": rng.standard_normal(32).astype(np.float32),
        "x": rng.standard_normal((32, 32)).astype(np.float32),
        "images": rng.standard_normal((BATCH, INPUTS)).astype(np.float32),
        "labels": rng.integers(0, CLASSES, BATCH),
    }


def host_cases(lib: Any, nn: Any, functional: Any) -> dict[str, Callable[[], Any]]:
    """The small cases; ``lib`` is ``kernelgrad`` or ``torch`` (their APIs agree here)."""
    arrays = _arrays()
    a, b, row, x = (lib.tensor(arrays[k]) for k in ("a", "b", "row", "x"))
    leaf = lib.tensor(arrays["a"], requires_grad=True)
    layer = nn.Linear(32, 32)

    def linear_forward_backward() -> None:
        layer.weight.grad = layer.bias.grad = None
        layer(x).sum().backward()

    return {
        "a + b (32x32)": lambda: a + b,
        "a + 1.0": lambda: a + 1.0,
        "a * row (broadcast)": lambda: a * row,
        "relu": lambda: a.relu(),
        "a.add_(b) (in place)": lambda: a.add_(b),
        "leaf + b (records autograd)": lambda: leaf + b,
        "a.sum(1)": lambda: a.sum(1),
        "a @ b (32x32)": lambda: a @ b,
        "Linear(32, 32) forward+backward": linear_forward_backward,
    }


def mlp_step(lib: Any, nn: Any, functional: Any) -> Callable[[], Any]:
    """One training step of the MLP (see the module docstring)."""
    arrays = _arrays()
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(INPUTS, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    images, labels = lib.tensor(arrays["images"]), lib.tensor(arrays["labels"])

    def step() -> Any:
        optimizer.zero_grad()
        loss = functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return step


def phase_cases(lib: Any, nn: Any, functional: Any) -> dict[str, Callable[[], Any]]:
    """The MLP step's parts (see the module docstring), real kernels, batch 128."""
    arrays = _arrays()
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(INPUTS, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    images, labels = lib.tensor(arrays["images"]), lib.tensor(arrays["labels"])
    hidden = model[0](images)
    activated = model[1](hidden)
    logits = model(images).detach()

    def forward() -> Any:
        return functional.cross_entropy(model(images), labels)

    def forward_backward() -> None:
        optimizer.zero_grad()
        forward().backward()

    def step() -> None:
        forward_backward()
        optimizer.step()

    return {
        f"Linear({INPUTS}, {HIDDEN})": lambda: model[0](images),
        "ReLU": lambda: model[1](hidden),
        f"Linear({HIDDEN}, {CLASSES})": lambda: model[2](activated),
        "cross_entropy (detached logits)": lambda: functional.cross_entropy(logits, labels),
        "forward (with the loss)": forward,
        "forward + backward": forward_backward,
        "whole step (Adam)": step,
    }


def time_phases(lib: Any, nn: Any, functional: Any, args: argparse.Namespace) -> dict[str, float]:
    """Microseconds per call of each phase case (wall clock, best of the runs)."""
    number = max(args.number // 10, 10)
    return {
        name: per_call(fn, number, args.repeat, time.perf_counter)
        for name, fn in phase_cases(lib, nn, functional).items()
    }


def time_steps(step: Callable[[], Any], steps: int, repeats: int) -> float:
    """Best seconds per step over ``repeats`` runs of ``steps`` steps (after a warm-up)."""
    for _ in range(WARMUP_STEPS):
        step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


# --- kernels replaced by no-ops ---------------------------------------------------------------
def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


def _served(*args: Any, **kwargs: Any) -> bool:
    return True


def disable_kernels() -> None:
    """Make every CPU kernel a no-op: Numba's compiled functions (generated elementwise
    and reduction kernels, gather/scatter, ``@kg.kernel`` launches), the BLAS product and
    NumPy's SIMD loops for standard math functions. Irreversible for this process."""
    from numba.core.dispatcher import Dispatcher

    from kernelgrad.backends import cpu
    from kernelgrad.backends.cpu import blas, memory

    Dispatcher.__call__ = _no_op  # type: ignore[method-assign]
    blas.matmul = _no_op
    blas.matrix_product = _served  # (as if the compiled 2-D product ran)
    cpu._quiet_ufunc = _no_op
    allocate = memory.HostBufferCache.empty

    def zeroed_when_small(self: Any, numel: int, dtype: Any) -> Any:
        if numel * dtype.itemsize < self.min_bytes:
            return np.zeros(numel, dtype=dtype)
        return allocate(self, numel, dtype)

    memory.HostBufferCache.empty = zeroed_when_small  # type: ignore[method-assign]


def launches_per_step(step: Callable[[], Any]) -> tuple[int, list[str]]:
    with kg.compile.count_launches() as counter:
        step()
    return counter.count, counter.names


def compiled_call() -> Callable[[], Any]:
    """A call of a ``kg.compile``d one-kernel function (``a * b + 1.0``, 32x32), replayed
    in its final form (one native call; see ``bench_fusion.py``)."""
    from kernelgrad.backends.cpu.compile_ahead import wait_for_workers

    arrays = _arrays()
    a, b = kg.tensor(arrays["a"]), kg.tensor(arrays["b"])
    compiled = kg.compile(lambda a, b: a * b + 1.0)
    for _ in range(10):  # eager, traced, then replays until the native call is made
        compiled(a, b)
    wait_for_workers()
    for _ in range(10):
        compiled(a, b)
    return lambda: compiled(a, b)


def kernelgrad_host(args: argparse.Namespace) -> dict[str, float]:
    """Microseconds per op of every host case, with kernels as no-ops."""
    cases = host_cases(kg, kg.nn, kg.nn.functional)
    cases["kg.compile(a * b + 1.0) call"] = compiled_call()
    step = mlp_step(kg, kg.nn, kg.nn.functional)
    for fn in [*cases.values(), step]:  # compile or load every kernel once, for real
        fn()
    count, _ = launches_per_step(step)
    disable_kernels()
    clock = _clock(args.clock)
    results = {name: per_call(fn, args.number, args.repeat, clock) for name, fn in cases.items()}
    per_step = per_call(step, max(args.number // 50, 5), args.repeat, clock)
    results[f"MLP step ({count} launches), per launch"] = per_step / count
    results["MLP step, whole step"] = per_step
    return results


def print_host(ours: dict[str, float], torch_figures: dict[str, float], clock: str) -> None:
    print(f"\nhost time per op, kernels as no-ops ({clock} clock), best of the runs")
    print(f"  {'case':<40} {'kernelgrad':>12} {'PyTorch':>12}")
    for name, value in ours.items():
        peer = torch_figures.get(name)
        theirs = f"{peer:9.2f} us" if peer is not None else f"{'':>12}"
        print(f"  {name:<40} {value:9.2f} us {theirs}")
    print(
        "  (PyTorch: real kernels on tensors this small, its own process; an MLP step's "
        "kernels are not no-ops there, so it has no per-launch figure)"
    )


def steps(args: argparse.Namespace) -> None:
    """The MLP step against PyTorch, alternating for ``--rounds`` rounds."""
    step = mlp_step(kg, kg.nn, kg.nn.functional)
    step()
    count, names = launches_per_step(step)
    print(f"\nMLP {INPUTS}-{HIDDEN}-{CLASSES} training step, batch {BATCH}, fused Adam")
    print(f"  kernelgrad launches per step: {count} ({', '.join(names)})")
    arguments = ["--only", "steps", "--steps", str(args.steps), "--repeat", str(args.repeat)]
    arguments += ["--threads", str(args.threads)]
    for round_number in range(1, args.rounds + 1):
        ours = time_steps(step, args.steps, args.repeat)
        theirs = [r["seconds"] for r in run_peer(__file__, arguments) if r.get("case") == "step"]
        line = f"  round {round_number}: kernelgrad {ours * 1e3:7.3f} ms/step"
        if theirs:
            line += f" | PyTorch {theirs[0] * 1e3:7.3f} ms/step | ratio {theirs[0] / ours:5.2f}x"
        print(line, flush=True)


def phases(args: argparse.Namespace) -> None:
    """The MLP step's parts against PyTorch's (see the module docstring)."""
    ours = time_phases(kg, kg.nn, kg.nn.functional, args)
    arguments = ["--only", "phases", "--number", str(args.number), "--repeat", str(args.repeat)]
    arguments += ["--threads", str(args.threads)]
    theirs = {r["case"]: r["us"] for r in run_peer(__file__, arguments)}
    print(f"\nMLP {INPUTS}-{HIDDEN}-{CLASSES} step's parts, batch {BATCH}, real kernels")
    print(f"  {'':<34} {'kernelgrad':>12} {'PyTorch':>12}")
    for name, us in ours.items():
        peer_us = theirs.get(name)
        peer_text = f"{peer_us:9.1f} us" if peer_us is not None else "         -"
        print(f"  {name:<34} {us:9.1f} us {peer_text}")


def profile(case: str, args: argparse.Namespace) -> None:
    import cProfile
    import pstats

    if case in ("step", "step-host"):
        fn = mlp_step(kg, kg.nn, kg.nn.functional)
        number = 200
        if case == "step-host":
            for _ in range(WARMUP_STEPS):
                fn()
            disable_kernels()
    else:
        cases = host_cases(kg, kg.nn, kg.nn.functional)
        for warm in cases.values():
            warm()
        disable_kernels()
        fn, number = cases[case], args.number
    for _ in range(WARMUP_STEPS):
        fn()
    profiler = cProfile.Profile(time.thread_time)  # this thread's CPU time: steadier when shared
    profiler.enable()
    for _ in range(number):
        fn()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def peer(parts: list[str], args: argparse.Namespace) -> None:
    """The --peer process: PyTorch's figures."""
    torch = import_torch(args.threads)
    if torch is None:
        return
    nn, functional = torch.nn, torch.nn.functional
    if "host" in parts:
        clock = _clock(args.clock)
        print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads, own process")
        for name, fn in host_cases(torch, nn, functional).items():
            report_to_parent(case=name, us=per_call(fn, args.number, args.repeat, clock))
    if "steps" in parts:
        seconds = time_steps(mlp_step(torch, nn, functional), args.steps, args.repeat)
        report_to_parent(case="step", seconds=seconds)
    if "phases" in parts:
        for name, us in time_phases(torch, nn, functional, args).items():
            report_to_parent(case=name, us=us)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--number", type=int, default=2000, help="calls per timed run")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs (the best counts)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--rounds", type=int, default=3, help="MLP step rounds vs PyTorch")
    parser.add_argument("--steps", type=int, default=40, help="MLP steps per timed run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default="host,steps", help="comma-separated: host,steps,phases")
    parser.add_argument("--profile", default="", help="a host case's name, or 'step'")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_threads(args.threads)
    parts = [part for part in args.only.split(",") if part]
    if args.peer:
        peer(parts, args)
        return
    print(thread_counts())
    if args.profile:
        profile(args.profile, args)
        return
    if "phases" in parts:
        phases(args)
    if "steps" in parts:
        steps(args)  # before the host part, which makes kernels no-ops for good
    if "host" in parts:
        arguments = ["--only", "host", "--number", str(args.number), "--repeat", str(args.repeat)]
        arguments += ["--threads", str(args.threads), "--clock", args.clock]
        torch_figures = {r["case"]: r["us"] for r in run_peer(__file__, arguments)}
        print_host(kernelgrad_host(args), torch_figures, args.clock)


if __name__ == "__main__":
    main()
