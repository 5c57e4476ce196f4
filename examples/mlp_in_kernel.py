"""A 4-4-4 network evaluated on a million independent inputs, inside one kernel.

Each work item of the kernel reads one input row, runs the whole network on it (from
registers: nothing but the row is read from memory) and writes one output row. The same
code runs on the CPU and on a CUDA GPU, and gives the batched forward's results::

    python examples/mlp_in_kernel.py [--n 1000000] [--device cpu|cuda]

The network is a freshly initialised ``Linear(4, 4) -> Tanh -> Linear(4, 4)``; a trained
one works the same way (see ``examples/neural_ode.py``). ``kg.nn.device_function`` turns
it into a function that kernels call per work item: with ``weights="constants"`` the
weights are literals in the generated code; with ``weights="arrays"`` the kernel gets
them as an argument.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a source checkout's package

import kernelgrad as kg


def build_model(seed: int = 0) -> kg.nn.Module:
    kg.manual_seed(seed)
    return kg.nn.Sequential(kg.nn.Linear(4, 4), kg.nn.Tanh(), kg.nn.Linear(4, 4))


def make_evaluator(net):
    """A function ``evaluate(inputs) -> outputs`` that runs ``net`` on every row of
    ``inputs`` in one kernel launch. The kernels are defined here, after ``net``
    exists: a kernel reads the functions it calls when it is decorated."""
    if net.weights_mode == "constants":

        @kg.kernel
        def evaluate_rows(out, inputs):
            i = kg.index()
            net(inputs[i, :], out[i, :])  # rows are views: no copies

        def evaluate(inputs):
            out = kg.empty(inputs.shape[0], net.out_features, device=inputs.device)
            evaluate_rows(out, inputs, ndrange=inputs.shape[0])
            return out

    else:

        @kg.kernel
        def evaluate_rows_with_weights(out, weights, inputs):
            i = kg.index()
            net(weights, inputs[i, :], out[i, :])

        def evaluate(inputs):
            weights = net.weights.to(inputs.device)
            out = kg.empty(inputs.shape[0], net.out_features, device=inputs.device)
            evaluate_rows_with_weights(out, weights, inputs, ndrange=inputs.shape[0])
            return out

    return evaluate


def best_time(fn, repeats: int = 5) -> float:
    fn()  # warm-up (compiles)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if kg.cuda.is_available():
            kg.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def run(n: int = 1_000_000, device: str = "cpu", repeats: int = 5, verbose: bool = True) -> dict:
    """Evaluate the network on ``n`` random inputs in both weight modes and as a batched
    forward. Returns the largest difference of each mode from the batched forward and
    the timings (seconds, best of ``repeats``)."""
    model = build_model().to(device)
    inputs = kg.randn(n, 4, device=device)
    with kg.no_grad():
        expected = model(inputs)
    differences, timings = {}, {}
    for mode in ("constants", "arrays"):
        evaluate = make_evaluator(kg.nn.device_function(model, weights=mode))
        outputs = evaluate(inputs)
        differences[mode] = (outputs - expected).abs().max().item()
        timings[mode] = best_time(lambda evaluate=evaluate: evaluate(inputs), repeats)

    def batched():
        with kg.no_grad():
            return model(inputs)

    timings["batched"] = best_time(batched, repeats)
    if verbose:
        print(f"{n:,} inputs on {device}, network 4 -> tanh(4) -> 4")
        for mode in ("constants", "arrays"):
            print(
                f"  in one kernel, weights as {mode:<9}: {timings[mode] * 1e3:8.1f} ms  "
                f"(largest difference from the batched forward {differences[mode]:.1e})"
            )
        print(f"  batched forward (4 kernels)        : {timings['batched'] * 1e3:8.1f} ms")
    return {"differences": differences, "timings": timings}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="number of inputs")
    default = "cuda" if kg.cuda.is_available() and not kg.cuda.is_simulated() else "cpu"
    parser.add_argument("--device", default=default)
    args = parser.parse_args(argv)
    run(args.n, args.device)


if __name__ == "__main__":
    main()
