"""The CPU backend's native replay (``backends/cpu/native_replay.py``): runs of a
compiled step's launches joined into one generated function that calls the kernels'
compiled code, with no Python between them. These check that it happens, that it
computes exactly what the Python replay computes (same kernels, same arguments, bit for
bit) over each call's own buffers, and that errors and unfinished compiles are handled."""

from __future__ import annotations

import functools

import numba
import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends.cpu import native_replay
from kernelgrad.compile import plan as plan_module
from tests.compile.test_compile_replay import OPTIMIZERS, _scaled_rows
from tests.compile.test_compile_training import Trainer
from tests.helpers import as_numpy


def _joined_steps(plan) -> int:
    return sum(stop - first for first, (stop, _) in plan._joined.items())


def _train(name, native, monkeypatch, steps=6):
    monkeypatch.setenv("KG_NATIVE_REPLAY", "1" if native else "0")  # at the first replay
    trainer = Trainer("cpu", OPTIMIZERS[name])
    schedule = kg.optim.lr_scheduler.StepLR(trainer.optimizer, 2, gamma=0.5)
    step = kg.compile(trainer.step)
    rng = np.random.default_rng(3)
    losses = []
    for _ in range(steps):
        x = kg.tensor(rng.standard_normal((6, 4)), dtype=kg.float32)
        y = kg.tensor(rng.integers(0, 3, 6))
        losses.append(step(x, y).item())
        schedule.step()
    return trainer, step.last_plan, losses


@pytest.mark.parametrize("name", ["sgd-nesterov-decay-maximize", "adamw-amsgrad"])
def test_a_native_replay_computes_what_the_python_replay_computes(monkeypatch, name):
    native, plan, native_losses = _train(name, True, monkeypatch)
    python, python_plan, python_losses = _train(name, False, monkeypatch)
    assert _joined_steps(plan) >= len(plan.steps) // 2  # most steps run natively
    assert _joined_steps(python_plan) == 0  # KG_NATIVE_REPLAY=0: none
    assert native_losses == python_losses  # bit for bit, with new inputs and a schedule
    for got, expected in zip(native.params(), python.params()):
        np.testing.assert_array_equal(got, expected)


def test_natively_replayed_kernels_follow_arguments_into_new_buffers_and_offsets(monkeypatch):
    """Arguments at new offsets of a larger buffer, a transposed argument and fresh
    outputs on every call: the joined kernel reads each call's buffers."""
    monkeypatch.setenv("KG_NATIVE_REPLAY", "1")

    def f(x, flat):
        out = kg.empty(x.shape)
        _scaled_rows(out, x, flat, 0.5, ndrange=x.shape)
        return (out * 2 + 1).sum(dim=1)

    compiled = kg.compile(f)
    rng = np.random.default_rng(0)
    big = kg.tensor(rng.standard_normal((40, 3)), dtype=kg.float32)
    for transposed in (False, True):
        for step in range(5):
            base = kg.tensor(rng.standard_normal((3, 4)), dtype=kg.float32)
            x = base.T if transposed else base.T.contiguous()
            flat = big[5 * step : 5 * step + 4]  # a new offset into the same buffer
            np.testing.assert_array_equal(as_numpy(compiled(x, flat)), as_numpy(f(x, flat)))
        plan = compiled.last_plan
        assert plan._joined, "no run was joined"
        kernel_step = next(i for i, s in enumerate(plan.steps) if s.label.startswith("kernel"))
        joined_kernel = any(
            first <= kernel_step < stop for first, (stop, _) in plan._joined.items()
        )
        assert joined_kernel


@numba.njit
def _fails_past(values, limit):
    for i in range(values.size):
        if values[i] > limit:
            raise ValueError("a value is past the limit")
        values[i] += 1.0


def test_an_exception_raised_in_a_natively_called_kernel_reaches_the_caller():
    buffer = np.zeros(4, dtype=np.float32)
    launch = functools.partial(_fails_past, buffer[1:3], 2.5)
    launch()  # compiled (as a replay's launches are before they are joined)
    runs = native_replay.join([(launch, [0]), (launch, [0])], [buffer], [0], set())
    assert [(first, stop) for first, stop, _ in runs] == [(0, 2)]
    run = runs[0][2]
    run([buffer], [0])
    np.testing.assert_array_equal(buffer, [0, 3, 3, 0])  # both launches ran, natively
    with pytest.raises(ValueError, match="past the limit"):
        run([buffer], [0])


def test_a_varying_buffer_is_read_again_at_each_calls_offset():
    buffer = np.arange(8, dtype=np.float32)
    launch = functools.partial(_fails_past, buffer[2:4], 100.0)
    launch()
    [(_, _, run)] = native_replay.join([(launch, [0])], [buffer], [2], {0})
    other = np.zeros(10, dtype=np.float32)
    run([other], [5])  # the same view, two elements at this call's offset of another buffer
    np.testing.assert_array_equal(other, [0, 0, 0, 0, 0, 1, 1, 0, 0, 0])


def test_launches_it_cannot_call_stay_python_calls_between_joined_runs():
    buffer = np.zeros(3, dtype=np.float32)
    native = functools.partial(_fails_past, buffer, 100.0)
    native()
    python = functools.partial(np.add, buffer, 1.0, out=buffer)  # NumPy's: not joined
    launches = [(native, [0]), (python, [0]), (None, [0]), (native, [0]), (native, [0])]
    runs = native_replay.join(launches, [buffer], [0], set())
    assert [(first, stop) for first, stop, _ in runs] == [(0, 1), (3, 5)]


def test_a_form_still_compiling_elsewhere_postpones_the_join(monkeypatch):
    """While the backend answers "not yet" the plan replays in Python and asks again
    after 1, 2, 4... more replays."""
    not_yet = [None, None]  # the first two answers
    real_join = native_replay.join

    def join(*args):
        return not_yet.pop() if not_yet else real_join(*args)

    monkeypatch.setattr(native_replay, "join", join)
    monkeypatch.setenv("KG_NATIVE_REPLAY", "1")  # ask at the first replay
    trainer = Trainer("cpu", OPTIMIZERS["sgd"])
    step = kg.compile(trainer.step)
    x = kg.tensor(np.ones((6, 4)), dtype=kg.float32)
    y = kg.tensor(np.zeros(6, dtype=np.int64))
    for _ in range(3):  # eager, trace, first replay: asked, "not yet"
        step(x, y)
    plan = step.last_plan
    assert plan._join_wait == 1 and not plan._joined
    step(x, y)  # waits one replay
    step(x, y)  # asks again: "not yet", now waits two
    assert plan._join_wait == 2 and not plan._joined
    for _ in range(3):
        step(x, y)
    assert plan._join_wait is None and plan._joined


def test_kg_native_replay_counts_the_replays_before_joining(monkeypatch):
    monkeypatch.setenv("KG_NATIVE_REPLAY", "3")
    trainer = Trainer("cpu", OPTIMIZERS["sgd"])
    step = kg.compile(trainer.step)
    x = kg.tensor(np.ones((6, 4)), dtype=kg.float32)
    y = kg.tensor(np.zeros(6, dtype=np.int64))
    for _ in range(4):  # eager, trace, two replays
        step(x, y)
    assert not step.last_plan._joined
    step(x, y)  # the third replay joins
    assert step.last_plan._joined
    monkeypatch.setenv("KG_NATIVE_REPLAY", "yes")
    with pytest.raises(ValueError, match="KG_NATIVE_REPLAY must be a whole number"):
        plan_module._replays_before_joining()
