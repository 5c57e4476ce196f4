"""Networks inside kernels (``kg.nn.device_function``) against batched forwards.

Two workloads, each measured in one run on the same machine:

1. **Independent inputs**: a network evaluated on N input vectors. In one kernel (one
   work item per input; weights as constants, or as an array argument) against the
   batched forward: kernelgrad eager, kernelgrad ``kg.compile``d, and PyTorch.
2. **A network inside a per-item loop**: RK4 integration of dy/dt = f(y) for N initial
   conditions, f a 2-32-2 network, 4 network calls per step. In one kernel launch
   against a batched step per time step (kernelgrad eager, a ``kg.compile``d step, and
   PyTorch).

Also the compile time of each kernel (first call, empty cache). Times are the best of
``--repeats`` runs after a warm-up; ratios are against PyTorch's batched forward in the
same run (> 1: faster than PyTorch). The machine is shared: on a loaded machine use
``--cpu-time`` (process CPU time) with ``--threads 1``, which also sets Numba's and
PyTorch's thread counts (set ``OPENBLAS_NUM_THREADS=1`` in the environment too)::

    python benchmarks/bench_device_function.py [--n 1000000] [--initial 1000,10000,100000]
        [--steps 100] [--repeats 3] [--threads 2] [--cpu-time] [--device cpu|cuda]

``--device cuda`` needs a real GPU and refuses otherwise (the CUDA simulator runs
kernels as Python: its timings mean nothing).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

# An empty cache, so that the first call of each kernel measures its compilation.
os.environ.setdefault("KERNELGRAD_CACHE_DIR", tempfile.mkdtemp(prefix="kg-bench-devfn-"))

from mlp_in_kernel import make_evaluator  # noqa: E402
from neural_ode import DIM, integrate_batched, make_integrator, rk4_step  # noqa: E402

import kernelgrad as kg  # noqa: E402

CLOCK = time.perf_counter
NETWORKS = ("4-4-4", "2-32-2", "8-32-32-8")


def synchronize(device: str) -> None:
    if device == "cuda":
        kg.cuda.synchronize()


def best_of(fn, repeats: int, device: str) -> float:
    fn()  # warm-up
    synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        start = CLOCK()
        fn()
        synchronize(device)
        best = min(best, CLOCK() - start)
    return best


def first_call(fn, device: str) -> float:
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def build(spec: str, seed: int = 0) -> kg.nn.Module:
    sizes = [int(s) for s in spec.split("-")]
    kg.manual_seed(seed)
    layers: list = []
    for index, (inputs, outputs) in enumerate(itertools.pairwise(sizes)):
        layers.append(kg.nn.Linear(inputs, outputs))
        if index < len(sizes) - 2:
            layers.append(kg.nn.Tanh())
    return kg.nn.Sequential(*layers)


def torch_copy(model: kg.nn.Module, torch, device: str):
    """The same network in PyTorch, with the same weights."""
    layers = []
    for layer in model:
        if isinstance(layer, kg.nn.Linear):
            linear = torch.nn.Linear(layer.in_features, layer.out_features)
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(layer.weight.detach().cpu().numpy()))
                linear.bias.copy_(torch.from_numpy(layer.bias.detach().cpu().numpy()))
            layers.append(linear)
        else:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers).to(device)


def row(label: str, seconds: float, reference: float | None, extra: str = "") -> None:
    ratio = f"{reference / seconds:6.2f}x" if reference else "       "
    print(f"  {label:<38} {seconds * 1e3:10.1f} ms  {ratio}  {extra}")


# --- 1. independent inputs ----------------------------------------------------------------
def bench_independent(args, torch) -> None:
    print(f"\n1. A network on {args.n:,} independent inputs ({args.device})")
    print(f"  {'':<38} {'time':>13}  vs PyTorch")
    for spec in NETWORKS:
        bench_network(spec, args, torch)


def bench_network(spec: str, args, torch) -> None:
    model = build(spec).to(args.device)
    inputs = kg.randn(args.n, model[0].in_features, device=args.device)
    print(f" {spec} (tanh):")
    reference = None
    if torch is not None:
        torch_model = torch_copy(model, torch, args.device)
        torch_inputs = torch.from_numpy(inputs.cpu().numpy()).to(args.device)

        def torch_forward():
            with torch.no_grad():
                return torch_model(torch_inputs)

        reference = best_of(torch_forward, args.repeats, args.device)
    with kg.no_grad():
        expected = model(inputs)
    for mode in ("constants", "arrays"):
        evaluate = make_evaluator(kg.nn.device_function(model, weights=mode))
        compile_seconds = first_call(lambda evaluate=evaluate: evaluate(inputs[:8]), args.device)
        seconds = best_of(lambda evaluate=evaluate: evaluate(inputs), args.repeats, args.device)
        difference = (evaluate(inputs) - expected).abs().max().item()
        row(
            f"in one kernel, weights as {mode}",
            seconds,
            reference,
            f"(first call {compile_seconds:5.2f} s; max diff {difference:.0e})",
        )

    def eager():
        with kg.no_grad():
            return model(inputs)

    row("kernelgrad batched, eager", best_of(eager, args.repeats, args.device), reference)
    compiled = kg.compile(eager)
    row("kernelgrad batched, kg.compile", best_of(compiled, args.repeats, args.device), reference)
    if reference is not None:
        row(f"PyTorch batched ({args.threads} threads)", reference, reference)


# --- 2. a network inside a per-item loop (RK4) -----------------------------------------------
def bench_ode(args, torch, n_initial: int) -> None:
    steps, dt = args.steps, 0.05
    print(
        f"\n2. RK4 of dy/dt = f(y), f = 2-32-2 (tanh): {n_initial:,} initial conditions, "
        f"{steps} steps, {4 * steps} network calls each ({args.device})"
    )
    print(f"  {'':<38} {'time':>13}  vs PyTorch")
    model = build("2-32-2", seed=1).to(args.device)
    rng = np.random.default_rng(0)
    initial_values = rng.uniform(-1.5, 1.5, size=(n_initial, DIM)).astype(np.float32)
    initial = kg.tensor(initial_values, device=args.device)

    reference = None
    if torch is not None:
        torch_model = torch_copy(model, torch, args.device)
        torch_initial = torch.from_numpy(initial_values).to(args.device)

        def torch_integrate():
            y = torch_initial
            with torch.no_grad():
                for _ in range(steps):
                    y = rk4_step(torch_model, y, dt)
            return y

        reference = best_of(torch_integrate, args.repeats, args.device)

    def eager_integrate():
        return integrate_batched(model, initial, dt, steps)

    expected = eager_integrate()
    for mode in ("constants", "arrays"):
        integrate = make_integrator(kg.nn.device_function(model, weights=mode))
        compile_seconds = first_call(
            lambda integrate=integrate: integrate(initial[:8], dt, 1), args.device
        )
        seconds = best_of(
            lambda integrate=integrate: integrate(initial, dt, steps), args.repeats, args.device
        )
        difference = (integrate(initial, dt, steps) - expected).abs().max().item()
        row(
            f"one kernel launch, weights as {mode}",
            seconds,
            reference,
            f"(first call {compile_seconds:5.2f} s; max diff {difference:.0e})",
        )
    with kg.compile.count_launches() as launches, kg.no_grad():
        rk4_step(model, initial, dt)
    row(
        "kernelgrad batched, eager",
        best_of(eager_integrate, args.repeats, args.device),
        reference,
        f"({launches.count} kernels per step)",
    )

    def step(y):
        with kg.no_grad():
            return rk4_step(model, y, dt)

    compiled_step = kg.compile(step)
    compiled_step(initial)  # trace
    with kg.compile.count_launches() as launches:
        compiled_step(initial)

    def compiled_integrate():
        y = initial
        for _ in range(steps):
            y = compiled_step(y)
        return y

    row(
        "kernelgrad batched, kg.compile'd step",
        best_of(compiled_integrate, args.repeats, args.device),
        reference,
        f"({launches.count} kernels per step)",
    )
    if reference is not None:
        row(f"PyTorch batched ({args.threads} threads)", reference, reference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="independent inputs")
    parser.add_argument(
        "--initial",
        default="1000,10000,100000",
        help="numbers of ODE initial conditions (comma-separated)",
    )
    parser.add_argument("--steps", type=int, default=100, help="RK4 steps")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="measure process CPU time instead of wall time (use with --threads 1)",
    )
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    parser.add_argument("--skip-independent", action="store_true", help="only the ODE part")
    args = parser.parse_args()
    if args.device == "cuda" and (not kg.cuda.is_available() or kg.cuda.is_simulated()):
        raise SystemExit(
            "bench_device_function: --device cuda needs a real CUDA GPU (none here, or only "
            "Numba's simulator, whose timings mean nothing); run it on a GPU machine"
        )
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    torch = None
    if not args.no_torch:
        try:
            import torch

            torch.set_num_threads(args.threads)
        except ImportError:
            print("PyTorch is not installed: no comparison")
    clock = "process CPU time" if args.cpu_time else "wall time"
    print(
        f"kernelgrad {kg.__version__}, {args.threads} thread(s), {clock}, best of "
        f"{args.repeats}; cache {os.environ['KERNELGRAD_CACHE_DIR']}"
    )
    if not args.skip_independent:
        bench_independent(args, torch)
    for n_initial in [int(n) for n in args.initial.split(",")]:
        bench_ode(args, torch, n_initial)


if __name__ == "__main__":
    main()
