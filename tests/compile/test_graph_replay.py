"""kg.compile's replay captured into device graphs (``Backend.capture``,
``compile/captured.py``; CUDA graphs in ``backends/cuda/graphs.py``).

On the CUDA backend (the simulator here) the backend's own ``capture`` runs; the CPU
backend joins runs natively instead, so on the CPU the tests give it a stand-in
``capture`` that runs the steps once and returns them: the plan's side (which steps form
a run, the static buffers of arguments and fresh outputs, the copies around each graph,
refusals) is the same either way."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends import get_backend
from kernelgrad.backends.base import CaptureUnsupportedError
from tests.compile.test_compile_training import OPTIMIZERS
from tests.compile.test_compile_training import Trainer as SharedTrainer
from tests.helpers import as_numpy


@pytest.fixture
def graphs(device, monkeypatch):
    """Plans join at their second replay; on the CPU the backend captures with a stand-in.
    Returns the list of runs the stand-in captured (None on CUDA)."""
    monkeypatch.setenv("KG_NATIVE_REPLAY", "2")
    if device != "cpu":
        return None
    backend_class = type(get_backend(kg.device("cpu")))
    captured: list = []

    def capture(self, run):
        run()
        captured.append(run)
        return run

    monkeypatch.delattr(backend_class, "join_launches")
    monkeypatch.setattr(backend_class, "capture", capture, raising=False)
    return captured


def Trainer(device):  # the shared tiny classifier, with Adam
    return SharedTrainer(device, OPTIMIZERS["adam"])


def _batch(device, seed):
    rng = np.random.default_rng(seed)
    # the inputs are a slice of a larger tensor: the graph reads them at their offset
    x = kg.tensor(rng.standard_normal((8, 4)), dtype=kg.float32, device=device)[2:]
    y = kg.tensor(rng.integers(0, 3, 6), device=device)
    return x, y


def test_a_graph_replayed_step_equals_eager_steps_with_new_batches_and_rates(device, graphs):
    eager, compiled = Trainer(device), Trainer(device)
    step = kg.compile(compiled.step)
    schedules = [
        kg.optim.lr_scheduler.StepLR(t.optimizer, step_size=1, gamma=0.7) for t in (eager, compiled)
    ]
    for call in range(5):
        x, y = _batch(device, call)
        expected = eager.step(x, y).item()
        got = step(x, y).item()
        assert got == pytest.approx(expected, rel=1e-6)
        for a, b in zip(compiled.params(), eager.params()):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        for schedule in schedules:
            schedule.step()
    (plan,) = step.plans
    steps_in_graphs, graph_count = plan.native
    assert graph_count >= 1 and steps_in_graphs >= 2
    if graphs is not None:
        assert len(graphs) == graph_count  # captured once, replayed after


def test_an_argument_written_inside_a_graph_is_written_back(device, graphs):
    def bump(x, w):
        x.mul_(w).add_(1.0)
        return (x * 2.0).sum()

    step = kg.compile(bump)
    w = kg.tensor([1.5, -1.0, 2.0], device=device)
    for call in range(4):
        start = np.arange(3, dtype=np.float32) + call
        x = kg.tensor(start, device=device)
        total = step(x, w)
        expected = start * np.array([1.5, -1.0, 2.0], np.float32) + 1.0
        np.testing.assert_allclose(as_numpy(x), expected, rtol=1e-6)
        assert total.item() == pytest.approx(2.0 * expected.sum(), rel=1e-6)


def test_a_refused_capture_replays_step_by_step(device, graphs, monkeypatch):
    if device != "cpu":
        pytest.skip("the plan's side, the same on every backend (slow under the simulator)")
    backend_class = type(get_backend(kg.device(device)))
    refused = []

    def refuse(self, run):
        refused.append(run)
        raise CaptureUnsupportedError("refused by the test")

    monkeypatch.setattr(backend_class, "capture", refuse, raising=False)
    eager, compiled = Trainer(device), Trainer(device)
    step = kg.compile(compiled.step)
    for call in range(4):
        x, y = _batch(device, call)
        assert step(x, y).item() == pytest.approx(eager.step(x, y).item(), rel=1e-6)
    for a, b in zip(compiled.params(), eager.params()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    count = len(refused)
    assert count >= 1
    x, y = _batch(device, 9)
    step(x, y)
    assert len(refused) == count  # asked once per run, not on every call


def test_a_host_read_ends_a_run(device, graphs):
    def f(x, scale):
        y = (x.reshape(1, 3) @ kg.eye(3, device=device) * 2.0 + 1.0).exp().reshape(3)
        factor = scale.item()  # a guard: replays check it between graphs
        return (y * factor - 1.0).sum(), y * 0.5

    step = kg.compile(f)
    scale = kg.tensor(3.0, device=device)
    for call in range(4):
        values = np.array([0.5 * call, -1.0, 2.0], np.float32)
        total, half = step(kg.tensor(values, device=device), scale)
        y = np.exp(values * 2 + 1)
        assert total.item() == pytest.approx((y * 3 - 1).sum(), rel=1e-5)
        np.testing.assert_allclose(as_numpy(half), y * 0.5, rtol=1e-5)
    (plan,) = step.plans
    assert plan.native[1] == 2  # the steps before the read, and those after it


def test_cuda_refuses_host_work_while_capturing(device, simulated):
    if device != "cuda":
        pytest.skip("the CUDA backend's capture")
    backend = get_backend(kg.device(device))
    t = kg.tensor([1.0, 2.0], device=device)
    calls = {
        "a host read": lambda: t.cpu(),
        "a synchronisation": backend.synchronize,
        "a random draw": lambda: kg.rand(3, device=device),
    }
    for what, call in calls.items():
        error_type = RuntimeError if simulated else CaptureUnsupportedError
        with pytest.raises(error_type, match="CUDA graph"):
            backend.capture(call)
        assert not backend.capturing, what
        assert backend.pool.pinned is None, what
    graph = backend.capture(lambda: (t * 2.0).add_(1.0))
    assert len(graph.buffers) >= 1  # the product's buffer, kept for the graph


@pytest.mark.gpu
def test_on_a_gpu_a_captured_step_equals_the_step_by_step_replay(monkeypatch):
    """The driver's side (cuStreamBeginCapture ... cuGraphLaunch, numba-cuda's launches and
    cuBLAS under capture): only a real GPU runs it."""
    results = {}
    for setting in ("0", "2"):  # step by step; captured at the second replay
        monkeypatch.setenv("KG_NATIVE_REPLAY", setting)
        trainer = Trainer("cuda")
        step = kg.compile(trainer.step)
        losses = [step(*_batch("cuda", call)).item() for call in range(6)]
        (plan,) = step.plans
        results[setting] = (losses, trainer.params(), plan)
    losses, params, plan = results["2"]
    assert plan.native[1] >= 1
    refused = [run.refused for _, run in plan._joined.values() if run.refused]
    assert not refused, refused
    np.testing.assert_allclose(losses, results["0"][0], rtol=1e-6)
    for a, b in zip(params, results["0"][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
