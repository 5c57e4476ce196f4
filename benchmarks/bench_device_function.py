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
``--repeats`` runs after a warm-up; ratios are against PyTorch's batched forward (> 1:
faster than PyTorch), which runs the same networks (the same weights, saved to a file)
on the same inputs in a process of its own (see ``_timing.py``), with the same
``--threads``, repeats and clock. On a loaded machine use ``--cpu-time`` (process CPU
time) with ``--threads 1``::

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
from _timing import import_torch, report_to_parent, run_peer, use_threads

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


def synchronize(device: str, torch=None) -> None:
    if device == "cuda":
        torch.cuda.synchronize() if torch is not None else kg.cuda.synchronize()


def best_of(fn, repeats: int, device: str, torch=None) -> float:
    """Best seconds of ``repeats`` calls after a warm-up; ``torch`` when ``fn`` runs
    PyTorch (whose device queue is the one to wait for)."""
    fn()  # warm-up
    synchronize(device, torch)
    best = float("inf")
    for _ in range(repeats):
        start = CLOCK()
        fn()
        synchronize(device, torch)
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


def weights_of(model: kg.nn.Module) -> list[np.ndarray]:
    """Each Linear layer's weight and bias, in order (tanh between them)."""
    return [p.detach().cpu().numpy() for p in model.parameters()]


def torch_network(torch, weights: list[np.ndarray], device: str):
    """The same network in PyTorch: Linear layers with these weights, tanh between."""
    layers = []
    for weight, bias in zip(weights[::2], weights[1::2], strict=True):
        linear = torch.nn.Linear(weight.shape[1], weight.shape[0])
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(weight))
            linear.bias.copy_(torch.from_numpy(bias))
        layers += [linear, torch.nn.Tanh()]
    return torch.nn.Sequential(*layers[:-1]).to(device)


def row(label: str, seconds: float, reference: float | None, extra: str = "") -> None:
    ratio = f"{reference / seconds:6.2f}x" if reference else "       "
    print(f"  {label:<42} {seconds * 1e3:10.1f} ms  {ratio}  {extra}")


# --- 1. independent inputs ----------------------------------------------------------------
def network_inputs(spec: str, n: int) -> np.ndarray:
    inputs = int(spec.split("-")[0])
    return np.random.default_rng(0).standard_normal((n, inputs)).astype(np.float32)


def ode_initial(n_initial: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1.5, 1.5, size=(n_initial, DIM)).astype(np.float32)


def ode_model() -> kg.nn.Module:
    return build("2-32-2", seed=1)


def bench_independent(args, references: dict) -> None:
    print(f"\n1. A network on {args.n:,} independent inputs ({args.device})")
    print(f"  {'':<42} {'time':>13}  vs PyTorch")
    for spec in NETWORKS:
        bench_network(spec, args, references.get(("network", spec)))


def bench_network(spec: str, args, reference: float | None) -> None:
    model = build(spec).to(args.device)
    inputs = kg.tensor(network_inputs(spec, args.n), device=args.device)
    print(f" {spec} (tanh):")
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
        row(f"PyTorch batched ({args.threads} threads, own process)", reference, reference)


# --- 2. a network inside a per-item loop (RK4) -----------------------------------------------
def bench_ode(args, reference: float | None, n_initial: int) -> None:
    steps, dt = args.steps, DT
    print(
        f"\n2. RK4 of dy/dt = f(y), f = 2-32-2 (tanh): {n_initial:,} initial conditions, "
        f"{steps} steps, {4 * steps} network calls each ({args.device})"
    )
    print(f"  {'':<42} {'time':>13}  vs PyTorch")
    model = ode_model().to(args.device)
    initial = kg.tensor(ode_initial(n_initial), device=args.device)

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
        row(f"PyTorch batched ({args.threads} threads, own process)", reference, reference)


DT = 0.05  # the RK4 time step


def peer(args, weights_file: str) -> None:
    """The --peer process: PyTorch's batched forwards and RK4 integrations, with the
    weights the parent saved."""
    torch = import_torch(args.threads)
    if torch is None:
        return
    saved = np.load(weights_file)

    def network(name: str):
        count = sum(key.startswith(f"{name}/") for key in saved.files)
        return torch_network(torch, [saved[f"{name}/{k}"] for k in range(count)], args.device)

    if not args.skip_independent:
        for spec in NETWORKS:
            model = network(spec)
            inputs = torch.from_numpy(network_inputs(spec, args.n)).to(args.device)

            def forward(model=model, inputs=inputs):
                with torch.no_grad():
                    return model(inputs)

            seconds = best_of(forward, args.repeats, args.device, torch)
            report_to_parent(kind="network", case=spec, seconds=seconds)
    model = network("ode")
    for n_initial in [int(n) for n in args.initial.split(",")]:
        initial = torch.from_numpy(ode_initial(n_initial)).to(args.device)

        def integrate(initial=initial):
            y = initial
            with torch.no_grad():
                for _ in range(args.steps):
                    y = rk4_step(model, y, DT)
            return y

        seconds = best_of(integrate, args.repeats, args.device, torch)
        report_to_parent(kind="ode", case=n_initial, seconds=seconds)


def torch_references(args) -> dict:
    """PyTorch's times, measured in a process of its own: {(kind, case): seconds}."""
    if args.no_torch:
        return {}
    models = {spec: build(spec) for spec in NETWORKS}
    models["ode"] = ode_model()
    arrays = {
        f"{name}/{k}": weight
        for name, model in models.items()
        for k, weight in enumerate(weights_of(model))
    }
    with tempfile.TemporaryDirectory(prefix="kg-bench-devfn-weights-") as folder:
        path = os.path.join(folder, "weights.npz")
        np.savez(path, **arrays)
        options = ["--n", str(args.n), "--initial", args.initial, "--steps", str(args.steps),
                   "--repeats", str(args.repeats), "--threads", str(args.threads),
                   "--device", args.device, "--weights", path]  # fmt: skip
        options += ["--cpu-time"] if args.cpu_time else []
        options += ["--skip-independent"] if args.skip_independent else []
        records = run_peer(__file__, options)
    return {(record["kind"], record["case"]): record["seconds"] for record in records}


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
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_threads(args.threads)
    if args.cpu_time:
        global CLOCK
        CLOCK = time.process_time
    if args.peer:  # PyTorch's side: no kernelgrad kernel runs in this process
        peer(args, args.weights)
        return
    if args.device == "cuda" and (not kg.cuda.is_available() or kg.cuda.is_simulated()):
        raise SystemExit(
            "bench_device_function: --device cuda needs a real CUDA GPU (none here, or only "
            "Numba's simulator, whose timings mean nothing); run it on a GPU machine"
        )
    references = torch_references(args)
    clock = "process CPU time" if args.cpu_time else "wall time"
    print(
        f"kernelgrad {kg.__version__}, {args.threads} thread(s), {clock}, best of "
        f"{args.repeats}; cache {os.environ['KERNELGRAD_CACHE_DIR']}"
    )
    if not args.skip_independent:
        bench_independent(args, references)
    for n_initial in [int(n) for n in args.initial.split(",")]:
        bench_ode(args, references.get(("ode", n_initial)), n_initial)


if __name__ == "__main__":
    main()
