"""Whole training steps with kg.optim optimizers under kg.compile: replays equal eager
steps (lazily created optimizer state, Adam's step count and bias corrections), and a
change of the optimizer's settings or state between calls traces again."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.serialization import load_checkpoint, save_checkpoint
from tests.helpers import as_numpy

OPTIMIZERS = {
    "sgd-momentum": lambda p: kg.optim.SGD(p, lr=0.1, momentum=0.9),
    "sgd-nesterov-decay": lambda p: kg.optim.SGD(
        p, lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.05
    ),
    "adam": lambda p: kg.optim.Adam(p, lr=0.05),
    "adamw-amsgrad": lambda p: kg.optim.AdamW(p, lr=0.05, weight_decay=0.1, amsgrad=True),
}


class Trainer:
    """A tiny classifier, its optimizer and a training step that counts how often its
    Python code runs (a replay does not run it)."""

    def __init__(self, device, make_optimizer, seed=0):
        kg.manual_seed(seed)
        self.model = kg.nn.Sequential(kg.nn.Linear(4, 5), kg.nn.Tanh(), kg.nn.Linear(5, 3))
        self.model.to(device)
        self.optimizer = make_optimizer(self.model.parameters())
        self.python_runs = 0

    def step(self, x, y):
        self.python_runs += 1
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss

    def params(self):
        return [as_numpy(p.detach()) for p in self.model.parameters()]


def _batch(device, seed=0):
    rng = np.random.default_rng(seed)
    x = kg.tensor(rng.standard_normal((6, 4)), dtype=kg.float32, device=device)
    y = kg.tensor(rng.integers(0, 3, 6), device=device)
    return x, y


def _assert_same(compiled: Trainer, eager: Trainer) -> None:
    for got, expected in zip(compiled.params(), eager.params()):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_training_step_equals_eager_steps(device, name):
    eager = Trainer(device, OPTIMIZERS[name])
    fused = Trainer(device, OPTIMIZERS[name])
    step = kg.compile(fused.step)
    x, y = _batch(device)
    for _ in range(5):
        expected = eager.step(x, y).item()
        got = step(x, y).item()
        assert got == pytest.approx(expected, rel=1e-6)
        _assert_same(fused, eager)
    # the first call ran eagerly, the second was traced, the last three were replays
    assert fused.python_runs == 2
    assert len(step.plans) == 1
    for p, q in zip(fused.model.parameters(), eager.model.parameters()):
        for key, value in eager.optimizer.state[q].items():
            np.testing.assert_allclose(
                as_numpy(fused.optimizer.state[p][key]), as_numpy(value), rtol=1e-6, atol=1e-7
            )


def test_adam_step_count_advances_on_replays(device):
    trainer = Trainer(device, OPTIMIZERS["adam"])
    step = kg.compile(trainer.step)
    x, y = _batch(device)
    for _ in range(4):
        step(x, y)
    for p in trainer.model.parameters():
        count = trainer.optimizer.state[p]["step"]
        assert isinstance(count, kg.Tensor) and count.shape == ()
        assert count.device == p.device
        assert count.item() == 4


def test_eager_steps_between_replays_continue_the_adam_step_count(device):
    # Eager steps on a GPU keep a host copy of the count; traced kernels and replays
    # advance the device count without it.
    compiled = Trainer(device, OPTIMIZERS["adam"])
    eager = Trainer(device, OPTIMIZERS["adam"])
    step = kg.compile(compiled.step)
    x, y = _batch(device)
    # eager, eager (a compiled function's first call), traced, eager, replay, eager
    for call in (compiled.step, step, step, compiled.step, step, compiled.step):
        call(x, y)
        eager.step(x, y)
    _assert_same(compiled, eager)
    for p in compiled.model.parameters():
        assert compiled.optimizer.state[p]["step"].item() == 6


def test_the_first_call_runs_eagerly_and_the_second_is_traced(device):
    trainer = Trainer(device, OPTIMIZERS["sgd-momentum"])
    step = kg.compile(trainer.step)
    x, y = _batch(device)
    step(x, y)
    assert step.plans == []
    assert "momentum_buffer" in trainer.optimizer.state[next(trainer.model.parameters())]
    step(x, y)
    assert len(step.plans) == 1


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_scheduled_learning_rate_is_fed_to_replays_without_tracing_again(device, name):
    """A cosine schedule changes the rate every call; replays read it from a tensor
    that is refreshed before each of them, and agree with eager steps."""
    eager = Trainer(device, OPTIMIZERS[name])
    fused = Trainer(device, OPTIMIZERS[name])
    schedules = [
        kg.optim.lr_scheduler.CosineAnnealingLR(t.optimizer, T_max=8) for t in (eager, fused)
    ]
    step = kg.compile(fused.step)
    x, y = _batch(device)
    for _ in range(6):
        assert step(x, y).item() == pytest.approx(eager.step(x, y).item(), rel=1e-6)
        _assert_same(fused, eager)
        for schedule in schedules:
            schedule.step()
    assert fused.python_runs == 2  # eager, traced, then four replays at four new rates
    assert len(step.plans) == 1


def test_other_new_settings_and_unfused_updates_trace_again(device):
    """Settings other than a fused optimizer's rate are frozen into the trace: changing
    one traces again; so does a new rate for the unfused (tensor-op) update."""
    for make, change in (
        (lambda p: kg.optim.SGD(p, lr=0.1, momentum=0.9), ("momentum", 0.5)),
        (lambda p: kg.optim.Adam(p, lr=0.05, fused=False), ("lr", 0.01)),
    ):
        eager, fused = Trainer(device, make), Trainer(device, make)
        step = kg.compile(fused.step)
        x, y = _batch(device)
        for call in range(5):
            assert step(x, y).item() == pytest.approx(eager.step(x, y).item(), rel=1e-6)
            _assert_same(fused, eager)
            if call == 2:
                for trainer in (eager, fused):
                    trainer.optimizer.param_groups[0][change[0]] = change[1]
        # calls 1-2: eager and traced, 3: replayed, 4: the new setting traces, 5: replayed
        assert fused.python_runs == 3, change


def test_loading_optimizer_state_between_calls_traces_again(device):
    eager = Trainer(device, OPTIMIZERS["sgd-momentum"])
    fused = Trainer(device, OPTIMIZERS["sgd-momentum"])
    step = kg.compile(fused.step)
    x, y = _batch(device)
    for _ in range(3):
        eager.step(x, y)
        step(x, y)
    saved = eager.optimizer.state_dict()
    fused.optimizer.load_state_dict(saved)  # new state tensors, same values
    for seed in range(1, 3):
        x, y = _batch(device, seed)
        assert step(x, y).item() == pytest.approx(eager.step(x, y).item(), rel=1e-6)
        _assert_same(fused, eager)


def test_adam_checkpoint_round_trip_keeps_the_tensor_step(tmp_path, device):
    original = Trainer(device, OPTIMIZERS["adam"])
    x, y = _batch(device)
    for _ in range(3):
        original.step(x, y)
    path = tmp_path / "adam.safetensors"
    save_checkpoint(path, original.model, original.optimizer)
    resumed = Trainer(device, OPTIMIZERS["adam"], seed=1)
    load_checkpoint(path, resumed.model, resumed.optimizer)
    for p in resumed.model.parameters():
        count = resumed.optimizer.state[p]["step"]
        assert isinstance(count, kg.Tensor) and count.device == p.device
        assert count.item() == 3
    step = kg.compile(resumed.step)
    for _ in range(3):
        assert step(x, y).item() == pytest.approx(original.step(x, y).item(), rel=1e-6)
        _assert_same(resumed, original)


def test_adam_loads_a_state_dict_with_a_number_as_step_count(device):
    """Checkpoints written before the step count became a tensor hold an int."""
    original = Trainer(device, OPTIMIZERS["adam"])
    x, y = _batch(device)
    for _ in range(2):
        original.step(x, y)
    saved = original.optimizer.state_dict()
    for values in saved["state"].values():
        values["step"] = int(values["step"].item())
    resumed = Trainer(device, OPTIMIZERS["adam"])
    resumed.model.load_state_dict(original.model.state_dict())
    resumed.optimizer.load_state_dict(saved)
    step = kg.compile(resumed.step)
    for _ in range(3):
        assert step(x, y).item() == pytest.approx(original.step(x, y).item(), rel=1e-6)
        _assert_same(resumed, original)
    assert next(iter(resumed.optimizer.state.values()))["step"].item() == 5
