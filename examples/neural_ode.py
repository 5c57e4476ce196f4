"""A neural ODE integrated for many initial conditions in one kernel launch.

A damped oscillator, x'' + 2 zeta omega x' + omega^2 x = 0, is observed as sampled
trajectories of its state y = (x, x'). A small network f learns its vector field
(dy/dt = f(y)) from those samples alone: training makes one RK4 step of the network
predict the next observed state. Then every work item of one kernel integrates
dy/dt = f(y) with RK4 from its own initial condition, calling the network four times per
step, with the whole state in registers (``kg.private`` arrays)::

    python examples/neural_ode.py [--initial 20000] [--steps 100] [--iterations 1000]
                                  [--device cpu|cuda]

This is the use case for networks inside kernels: the batched alternative launches
every layer of the network, four times per step, for every step, and stores every
intermediate result in memory. The example checks that both give the same trajectories
and that they follow the true system.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # a source checkout's package

import kernelgrad as kg

OMEGA = 2.0  # natural frequency (rad/s)
ZETA = 0.1  # damping ratio
DIM = 2  # the state (position, velocity)


# --- the true system, in NumPy (float64) -----------------------------------------------------
def true_field(y: np.ndarray) -> np.ndarray:
    position, velocity = y[..., 0], y[..., 1]
    acceleration = -(OMEGA**2) * position - 2.0 * ZETA * OMEGA * velocity
    return np.stack([velocity, acceleration], axis=-1)


def true_solution(initial: np.ndarray, dt: float, steps: int, substeps: int = 10) -> np.ndarray:
    """States after ``steps`` steps of ``dt``: RK4 with ``substeps`` smaller steps each
    (accurate to ~1e-9 here), shape (steps + 1, n, 2)."""
    h = dt / substeps
    y = initial.astype(np.float64)
    states = [y]
    for _ in range(steps):
        for _ in range(substeps):
            k1 = true_field(y)
            k2 = true_field(y + 0.5 * h * k1)
            k3 = true_field(y + 0.5 * h * k2)
            k4 = true_field(y + h * k3)
            y = y + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        states.append(y)
    return np.stack(states)


# --- the network and its training ------------------------------------------------------------
def build_model(hidden: int = 32, seed: int = 0) -> kg.nn.Module:
    kg.manual_seed(seed)
    return kg.nn.Sequential(kg.nn.Linear(DIM, hidden), kg.nn.Tanh(), kg.nn.Linear(hidden, DIM))


def rk4_step(model, y, dt: float):
    """One RK4 step of dy/dt = model(y) for a batch of states (Tensor ops)."""
    k1 = model(y)
    k2 = model(y + k1 * (dt / 2))
    k3 = model(y + k2 * (dt / 2))
    k4 = model(y + k3 * dt)
    return y + (k1 + k2 * 2.0 + k3 * 2.0 + k4) * (dt / 6)


def train(model, dt: float, iterations: int = 1000, seed: int = 0, verbose: bool = True) -> float:
    """Fit ``model`` so that one RK4 step of it maps each observed state to the next one;
    returns the final root-mean-square error of the predicted derivative."""
    rng = np.random.default_rng(seed)
    initial = rng.uniform(-2.0, 2.0, size=(64, DIM))
    observed = true_solution(initial, dt, steps=20).astype(np.float32)  # (21, 64, 2)
    before = kg.tensor(observed[:-1].reshape(-1, DIM))
    after = kg.tensor(observed[1:].reshape(-1, DIM))
    optimizer = kg.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = kg.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=iterations)
    for _ in range(iterations):
        optimizer.zero_grad()
        # the error of the step, divided by dt: the error of the average derivative
        loss = ((rk4_step(model, before, dt) - after) / dt).pow(2).mean()
        loss.backward()
        optimizer.step()
        scheduler.step()
    rms = loss.item() ** 0.5
    if verbose:
        print(f"trained on {before.shape[0]} observed steps: derivative error (RMS) {rms:.3f}")
    return rms


# --- integration inside one kernel -----------------------------------------------------------
def _stage(out, y, step, k):
    # out = y + step * k  (an RK4 intermediate state)
    for d in range(DIM):
        out[d] = y[d] + step * k[d]


def _combine(y, sixth, k1, k2, k3, k4):
    two = np.float32(2.0)  # a float32 literal keeps the arithmetic in float32
    for d in range(DIM):
        y[d] = y[d] + (k1[d] + two * k2[d] + two * k3[d] + k4[d]) * sixth


def make_integrator(net):
    """``integrate(initial, dt, steps) -> final states``: one kernel launch, one work item
    per initial condition. Defined after ``net`` exists (a kernel reads the functions
    it calls when it is decorated)."""
    if net.weights_mode == "constants":

        @kg.kernel
        def integrate_rows(final, initial, half, dt, sixth, steps):
            i = kg.index()
            y = kg.private(DIM, kg.float32)  # this work item's state, in registers
            stage = kg.private(DIM, kg.float32)
            k1 = kg.private(DIM, kg.float32)
            k2 = kg.private(DIM, kg.float32)
            k3 = kg.private(DIM, kg.float32)
            k4 = kg.private(DIM, kg.float32)
            for d in range(DIM):
                y[d] = initial[i, d]
            for _ in range(steps):
                net(y, k1)
                _stage(stage, y, half, k1)
                net(stage, k2)
                _stage(stage, y, half, k2)
                net(stage, k3)
                _stage(stage, y, dt, k3)
                net(stage, k4)
                _combine(y, sixth, k1, k2, k3, k4)
            for d in range(DIM):
                final[i, d] = y[d]

        def launch(final, initial, half, dt, sixth, steps):
            integrate_rows(final, initial, half, dt, sixth, steps, ndrange=initial.shape[0])

    else:

        @kg.kernel
        def integrate_rows_with_weights(final, weights, initial, half, dt, sixth, steps):
            i = kg.index()
            y = kg.private(DIM, kg.float32)
            stage = kg.private(DIM, kg.float32)
            k1 = kg.private(DIM, kg.float32)
            k2 = kg.private(DIM, kg.float32)
            k3 = kg.private(DIM, kg.float32)
            k4 = kg.private(DIM, kg.float32)
            for d in range(DIM):
                y[d] = initial[i, d]
            for _ in range(steps):
                net(weights, y, k1)
                _stage(stage, y, half, k1)
                net(weights, stage, k2)
                _stage(stage, y, half, k2)
                net(weights, stage, k3)
                _stage(stage, y, dt, k3)
                net(weights, stage, k4)
                _combine(y, sixth, k1, k2, k3, k4)
            for d in range(DIM):
                final[i, d] = y[d]

        def launch(final, initial, half, dt, sixth, steps):
            weights = net.weights.to(initial.device)
            integrate_rows_with_weights(
                final, weights, initial, half, dt, sixth, steps, ndrange=initial.shape[0]
            )

    def integrate(initial, dt: float, steps: int):
        final = kg.empty(initial.shape[0], DIM, device=initial.device)
        # float32 step sizes, rounded as the batched form rounds dt / 2 and dt / 6
        half, step, sixth = (np.float32(dt / 2), np.float32(dt), np.float32(dt / 6))
        launch(final, initial, half, step, sixth, steps)
        return final

    return integrate


def integrate_batched(model, initial, dt: float, steps: int):
    """The same integration as whole-tensor operations: 4 network calls per step."""
    y = initial
    with kg.no_grad():
        for _ in range(steps):
            y = rk4_step(model, y, dt)
    return y


# --- the demonstration -------------------------------------------------------------------------
def run(
    n_initial: int = 20_000,
    steps: int = 100,
    dt: float = 0.05,
    iterations: int = 1000,
    device: str = "cpu",
    verbose: bool = True,
) -> dict:
    """Train, then integrate ``n_initial`` initial conditions for ``steps`` steps in one
    kernel (both weight modes) and as batched tensor operations. Returns the final
    states, their errors and the timings (seconds)."""
    model = build_model()
    train(model, dt=0.1, iterations=iterations, verbose=verbose)
    model = model.to(device)

    rng = np.random.default_rng(1)
    initial_values = rng.uniform(-1.5, 1.5, size=(n_initial, DIM)).astype(np.float32)
    initial = kg.tensor(initial_values, device=device)
    truth = true_solution(initial_values, dt, steps)[-1]

    def timed(fn):
        start = time.perf_counter()
        result = fn()
        if device != "cpu":
            kg.cuda.synchronize()
        return result.cpu().numpy().copy(), time.perf_counter() - start

    report: dict = {"time": {}, "final": {}}
    for mode in ("constants", "arrays"):
        integrate = make_integrator(kg.nn.device_function(model, weights=mode))
        integrate(initial[:2], dt, 1)  # compile before timing
        report["final"][mode], report["time"][mode] = timed(
            lambda integrate=integrate: integrate(initial, dt, steps)
        )
    integrate_batched(model, initial[:2], dt, 1)  # compile (or load) its kernels first
    report["final"]["batched"], report["time"]["batched"] = timed(
        lambda: integrate_batched(model, initial, dt, steps)
    )
    final = report["final"]["constants"]
    report["rms_error"] = float(np.sqrt(np.mean((final - truth) ** 2)))
    report["max_error"] = float(np.abs(final - truth).max())
    report["rms_state"] = float(np.sqrt(np.mean(truth**2)))
    report["kernel_vs_batched"] = max(
        float(np.abs(report["final"][mode] - report["final"]["batched"]).max())
        for mode in ("constants", "arrays")
    )

    if verbose:
        print(
            f"{n_initial:,} initial conditions, {steps} RK4 steps of {dt} s "
            f"(to t = {steps * dt:g} s), {4 * steps} network calls each, on {device}:"
        )
        for mode in ("constants", "arrays"):
            print(f"  one kernel launch, weights as {mode:<9}: {report['time'][mode]:6.2f} s")
        print(f"  batched tensor operations               : {report['time']['batched']:6.2f} s")
        print(
            f"kernel vs batched: largest difference {report['kernel_vs_batched']:.1e}; "
            f"learned vs true system at t = {steps * dt:g} s: RMS error "
            f"{report['rms_error']:.3f} (largest {report['max_error']:.3f}) for states of "
            f"RMS size {report['rms_state']:.3f}"
        )
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--initial", type=int, default=20_000, help="initial conditions")
    parser.add_argument("--steps", type=int, default=100, help="RK4 steps")
    parser.add_argument("--dt", type=float, default=0.05)
    parser.add_argument("--iterations", type=int, default=1000, help="training iterations")
    default = "cuda" if kg.cuda.is_available() and not kg.cuda.is_simulated() else "cpu"
    parser.add_argument("--device", default=default)
    args = parser.parse_args(argv)
    run(args.initial, args.steps, args.dt, args.iterations, args.device)


if __name__ == "__main__":
    main()
