"""How a compiled step is replayed: multi-tensor launches (an optimizer's update of every
parameter) run as one kernel, independent elementwise launches of one shape are joined
into one kernel, a compiled training step runs no more kernels than the eager one, and
replays agree with eager steps for every optimizer under changing inputs and a
learning-rate schedule."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from tests.compile.test_compile_training import Trainer, _assert_same
from tests.helpers import as_numpy, assert_close

OPTIMIZERS = {
    "sgd": lambda p: kg.optim.SGD(p, lr=0.1),
    "sgd-momentum-dampening": lambda p: kg.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1),
    "sgd-nesterov-decay-maximize": lambda p: kg.optim.SGD(
        p, lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.05, maximize=True
    ),
    "adam-decay": lambda p: kg.optim.Adam(p, lr=0.05, weight_decay=0.01),
    "adam-maximize": lambda p: kg.optim.Adam(p, lr=0.05, betas=(0.8, 0.99), maximize=True),
    "adamw-amsgrad": lambda p: kg.optim.AdamW(p, lr=0.05, weight_decay=0.1, amsgrad=True),
}


def _batches(device, count):
    rng = np.random.default_rng(1)
    for _ in range(count):
        x = kg.tensor(rng.standard_normal((6, 4)), dtype=kg.float32, device=device)
        y = kg.tensor(rng.integers(0, 3, 6), device=device)
        yield x, y


# The simulated CUDA pass runs these (time); test_compile_training covers plain momentum
# and Adam there.
SIMULATED = ("sgd-nesterov-decay-maximize", "adamw-amsgrad")


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_replays_equal_eager_steps_with_new_inputs_and_a_schedule(device, name):
    if device == "cuda" and name not in SIMULATED and kg.cuda.is_simulated():
        pytest.skip("the simulated pass runs two of the optimizers (time)")
    eager = Trainer(device, OPTIMIZERS[name])
    compiled = Trainer(device, OPTIMIZERS[name])
    schedules = [kg.optim.lr_scheduler.StepLR(t.optimizer, 2, gamma=0.5) for t in (eager, compiled)]
    step = kg.compile(compiled.step)
    for x, y in _batches(device, 6):
        assert step(x, y).item() == pytest.approx(eager.step(x, y).item(), rel=1e-5)
        _assert_same(compiled, eager)
        for schedule in schedules:
            schedule.step()
    assert compiled.python_runs == 2  # eager, traced, then four replays
    assert len(step.plans) == 1


@pytest.mark.parametrize("name", ["sgd-momentum-dampening", "adamw-amsgrad"])
def test_a_compiled_step_runs_no_more_kernels_than_the_eager_step(device, name):
    eager = Trainer(device, OPTIMIZERS[name])
    compiled = Trainer(device, OPTIMIZERS[name])
    step = kg.compile(compiled.step)
    batches = list(_batches(device, 3))
    for x, y in batches[:2]:
        step(x, y)
        eager.step(x, y)
    with kg.compile.count_launches() as eager_launches:
        eager.step(*batches[2])
    with kg.compile.count_launches() as replay_launches:
        step(*batches[2])
    assert replay_launches.count <= eager_launches.count, (
        replay_launches.names,
        eager_launches.names,
    )
    # the update of the four parameters is one launch, as in the eager step
    labels = [s.label for s in step.last_plan.steps]
    assert any(label.endswith("[4 tensors]") for label in labels), labels


def test_independent_launches_of_one_function_replay_as_one_foreach(device):
    @kg.compile
    def scale(x, y):
        with kg.no_grad():
            x.mul_(2.0)
            y.mul_(2.0)
            x.mul_(3.0)  # reads what the first launch wrote: not part of it

    x, y = kg.ones(5, device=device), kg.ones(3, device=device)
    for _ in range(3):
        scale(x, y)
    labels = [s.label for s in scale.last_plan.steps]
    assert len(labels) == 2 and labels[0].endswith("[2 tensors]"), labels
    np.testing.assert_array_equal(as_numpy(x), np.full(5, 6.0**3, np.float32))
    np.testing.assert_array_equal(as_numpy(y), np.full(3, 2.0**3, np.float32))


def test_independent_elementwise_launches_of_one_shape_are_joined(device):
    @kg.compile
    def two(x, y):
        return x + 1, (y * 2).exp()

    x = kg.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    y = kg.tensor([[0.0, 0.5], [1.0, -1.0]], device=device)
    for _ in range(3):
        a, b = two(x, y)
    assert two.last_plan.kernel_count == 1, two.last_plan.describe()
    np.testing.assert_allclose(as_numpy(a), as_numpy(x) + 1)
    np.testing.assert_allclose(as_numpy(b), np.exp(as_numpy(y) * 2), rtol=1e-6)


def test_a_launch_reading_a_joined_output_is_not_joined(device):
    @kg.compile
    def chain(x, y):
        a = x + 1
        with kg.no_grad():
            y.copy_(a)  # writes an argument: a must be stored first
        return a * y

    x, y = kg.ones(4, device=device), kg.zeros(4, device=device)
    for _ in range(3):
        out = chain(x, y)
    np.testing.assert_array_equal(as_numpy(out), np.full(4, 4.0, np.float32))
    np.testing.assert_array_equal(as_numpy(y), np.full(4, 2.0, np.float32))


def test_replays_see_in_place_changes_to_captured_tensors_between_calls(device):
    """Kernels whose buffers are the same on every call are prepared once (their
    arguments bound); they still read the values written between calls."""
    w = kg.ones(4, device=device)
    state = kg.zeros(4, device=device)

    @kg.compile
    def accumulate(x):
        with kg.no_grad():
            state.add_(w * 2)
        return x + state

    x = kg.zeros(4, device=device)
    for call in range(4):
        w.copy_(kg.full((4,), float(call), device=device))
        out = accumulate(x)
    expected = 2.0 * sum(range(4))
    np.testing.assert_array_equal(as_numpy(state), np.full(4, expected, np.float32))
    np.testing.assert_array_equal(as_numpy(out), np.full(4, expected, np.float32))


def test_a_host_op_between_prepared_kernels_runs_in_order(device):
    from kernelgrad.compile.external import run_host_op

    calls = []
    w = kg.ones(3, device=device)

    def double(tensors):
        calls.append(1)
        tensors[0].mul_(2)

    @kg.compile
    def step(x):
        with kg.no_grad():
            w.add_(1.0)  # a prepared kernel on a captured buffer
            run_host_op("double", double, [w], written=[0])
            w.sub_(1.0)
        return x * w

    x = kg.ones(3, device=device)
    for _ in range(3):
        out = step(x)
    # w: 1 -> 3 -> 7 -> 15
    np.testing.assert_array_equal(as_numpy(w), np.full(3, 15.0, np.float32))
    np.testing.assert_array_equal(as_numpy(out), np.full(3, 15.0, np.float32))
    assert len(calls) == 3


@kg.kernel
def _scaled_rows(out, x, flat, scale):
    """out[i, j] = scale * x[i, j] + flat[i * cols + j] (flat: linear indexing)."""
    i, j = kg.index(2)
    out[i, j] = scale * x[i, j] + flat[i * out.shape[1] + j]


def test_replayed_kernels_follow_arguments_into_new_buffers_and_offsets(device):
    """A @kg.kernel launch is replayed without going through its checks again, over
    the buffers of each call: arguments that are new tensors, views at other offsets
    of a larger buffer, a transposed (non-contiguous) argument, and a linearly indexed
    argument that is a row-major slice (its flat memory)."""

    def f(x, flat):
        out = kg.empty(x.shape, device=x.device)
        _scaled_rows(out, x, flat, 0.5, ndrange=x.shape)
        return out * 2

    compiled = kg.compile(f)
    rng = np.random.default_rng(0)
    big = kg.tensor(rng.standard_normal((40, 3)), dtype=kg.float32, device=device)
    for step in range(6):
        base = kg.tensor(rng.standard_normal((3, 4)), dtype=kg.float32, device=device)
        x = base.T if step % 2 else base.T.contiguous()  # (4, 3): strides differ by parity
        flat = big[5 * step : 5 * step + 4]  # a new offset into the same buffer each step
        assert_close(compiled(x, flat), f(x, flat), rtol=1e-6, atol=1e-6)
    assert sum(entry.traces for entry in compiled._entries.values()) == 2  # one per layout
    if device == "cpu":  # the CPU backend prepares launches: this one is rebound per call
        assert _kernel_step_preparation(compiled.last_plan) == [True]


def _kernel_step_preparation(plan):
    """For each kernel step of ``plan``: True if it replays rebound to the call's
    buffers, False if prepared over fixed buffers, None if it runs the full launch."""
    kinds = []
    for step, (launch, rebound) in zip(plan.steps, plan._prepared):
        if step.label.startswith("kernel "):
            kinds.append(None if launch is None else rebound)
    return kinds


def test_a_kernel_whose_argument_is_copied_still_replays_correctly(device):
    """A linearly indexed argument that is not contiguous is copied for the kernel; that
    copy would be stale on the next call, so the launch is never prepared."""

    def f(x, flat):
        out = kg.empty(x.shape, device=x.device)
        _scaled_rows(out, x, flat, 1.0, ndrange=x.shape)
        return out

    compiled = kg.compile(f)
    rng = np.random.default_rng(1)
    for _ in range(4):
        x = kg.tensor(rng.standard_normal((2, 3)), dtype=kg.float32, device=device)
        flat = kg.tensor(rng.standard_normal((3, 2)), dtype=kg.float32, device=device).T
        assert_close(compiled(x, flat), f(x, flat), rtol=1e-6, atol=1e-6)
    assert _kernel_step_preparation(compiled.last_plan) == [None]
