"""kg.compile with the side effects a function has on tensors it makes: constants made
from host data inside it and written in place or returned, and gradients stored in
``.grad`` that the program sets or replaces between calls. Every compiled call must
give what the eager call gives (calls 1 and 2 run eagerly, 3 and later replay)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelgrad as kg

CALLS = 6


def _eager_and_compiled(fn, make_input):
    compiled = kg.compile(fn)
    for call in range(1, CALLS + 1):
        eager = fn(make_input(call))
        replayed = compiled(make_input(call))
        yield call, eager, replayed


def _values(t):
    return t.cpu().numpy()


@pytest.mark.parametrize(
    "make",
    [
        lambda device: kg.tensor([0.0, 0.0, 0.0], device=device),
        lambda device: kg.tensor(np.zeros(3, np.float32), device=device),
        lambda device: kg.arange(0, 3, dtype=kg.float32, device=device) * 0,
    ],
)
def test_a_constant_written_in_place_starts_from_its_host_data_on_every_call(device, make):
    def f(x):
        c = make(device)
        c += x
        return c * 2

    for call, eager, replayed in _eager_and_compiled(f, lambda k: kg.ones(3, device=device) * k):
        np.testing.assert_array_equal(_values(replayed), _values(eager), err_msg=f"call {call}")


def test_a_constant_scaled_in_place_does_not_accumulate_across_calls(device):
    def f(x):
        m = kg.eye(2, device=device)
        m.mul_(x)
        return m.sum(0)

    for call, eager, replayed in _eager_and_compiled(f, lambda k: kg.ones(2, device=device) * k):
        np.testing.assert_array_equal(_values(replayed), _values(eager), err_msg=f"call {call}")


def test_a_returned_constant_is_a_new_tensor_on_every_call(device):
    compiled = kg.compile(lambda x: (kg.tensor([1.0, 2.0, 3.0], device=device), x + 1))
    x = kg.zeros(3, device=device)
    returned = []
    for _ in range(CALLS):
        constant, _ = compiled(x)
        np.testing.assert_array_equal(_values(constant), [1.0, 2.0, 3.0])
        returned.append(constant)
        constant.mul_(10)  # the caller owns it: later calls must not see this
    assert len({id(t._storage.buffer) for t in returned[2:]}) == len(returned) - 2


def test_a_constant_only_read_is_not_copied_again(device):
    """Read-only constants stay one buffer of the plan: no copy kernel per replay."""
    compiled = kg.compile(lambda x: x * kg.tensor([1.0, 2.0, 3.0], device=device))
    for _ in range(3):
        compiled(kg.ones(3, device=device))
    labels = [line.split()[0] for line in compiled.last_plan.describe().splitlines()[1:]]
    assert "identity" not in labels, labels


def _gradient_run(compiled: bool, device: str, returns_grad: bool, zero_outside: bool):
    w = kg.tensor([1.0, 2.0], device=device, requires_grad=True)

    def step(x):
        if not zero_outside:
            w.grad = None
        (w * x).sum().backward()
        return w.grad if returns_grad else None

    run = kg.compile(step) if compiled else step
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # retraced on every call: warned after 8
        for call in range(1, CALLS + 1):
            result = run(kg.tensor([1.0, 1.0], device=device) * call)
            seen.append(_values(w.grad).tolist())
            if returns_grad:
                seen.append(_values(result).tolist())
            if zero_outside:
                w.grad = None  # optimizer.zero_grad() outside the compiled function
    return seen


@pytest.mark.parametrize("returns_grad, zero_outside", [(False, True), (True, False), (True, True)])
def test_gradients_stored_in_grad_follow_the_program(device, returns_grad, zero_outside):
    """``p.grad = None`` outside the compiled step traces it again (a replay cannot give
    ``p.grad`` a new tensor); a returned ``.grad`` is a copy, and ``.grad`` itself is
    updated by the replay."""
    eager = _gradient_run(False, device, returns_grad, zero_outside)
    compiled = _gradient_run(True, device, returns_grad, zero_outside)
    assert compiled == eager


def test_a_returned_grad_is_not_changed_by_later_calls(device):
    w = kg.tensor([1.0, 2.0], device=device, requires_grad=True)

    def step(x):
        w.grad = None
        (w * x).sum().backward()
        return w.grad

    compiled = kg.compile(step)
    results = [compiled(kg.tensor([1.0, 1.0], device=device) * k) for k in range(1, CALLS + 1)]
    for k, result in enumerate(results, start=1):
        np.testing.assert_array_equal(_values(result), [k, k])
    np.testing.assert_array_equal(_values(w.grad), [CALLS, CALLS])


def test_zero_grad_inside_the_step_replays_without_new_traces(device):
    model = kg.nn.Linear(3, 2).to(device)
    optimizer = kg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x):
        optimizer.zero_grad()
        model(x).square().sum().backward()
        optimizer.step()

    compiled = kg.compile(step)
    for _ in range(CALLS):
        compiled(kg.ones(4, 3, device=device))
    (entry,) = compiled._entries.values()
    assert entry.traces == 1


def test_a_captured_tensor_passed_as_the_argument_runs_eagerly(device):
    """A trace reads a captured tensor through its buffer; called with that very tensor
    as the argument, a replay would read the argument for both: the call runs eagerly."""
    captured = kg.tensor([1.0, 2.0, 3.0], device=device)

    def f(x):
        doubled = captured * 2
        x.add_(1)
        return doubled + x

    compiled = kg.compile(f)
    for _ in range(3):  # traced and replayed with unrelated arguments
        compiled(kg.zeros(3, device=device))
    eager_captured = kg.tensor([1.0, 2.0, 3.0], device=device)

    def eager(x):
        doubled = eager_captured * 2
        x.add_(1)
        return doubled + x

    for _ in range(3):
        got = compiled(captured)
        want = eager(eager_captured)
        np.testing.assert_array_equal(_values(got), _values(want))
        np.testing.assert_array_equal(_values(captured), _values(eager_captured))


def test_state_replaced_inside_the_function_runs_eagerly_with_a_warning(device):
    """A function that replaces a tensor it read from outside (``state["ema"] = ...``)
    cannot be replayed: a replay would read the old tensor again. That signature runs
    eagerly from the trace on, with a warning that says how to write it instead."""

    def run(compiled: bool):
        state = {"ema": kg.zeros(3, device=device)}

        def f(x):
            state["ema"] = state["ema"] * 0.5 + x
            return state["ema"] * 1.0

        g = kg.compile(f) if compiled else f
        return [_values(g(kg.ones(3, device=device) * 2))[0] for _ in range(CALLS)]

    with pytest.warns(RuntimeWarning, match=r"replaced 1 tensor\(s\) it read from outside"):
        compiled = run(True)
    assert compiled == run(False)


def test_state_updated_in_place_is_replayed(device):
    state = {"ema": kg.zeros(3, device=device)}

    def f(x):
        state["ema"].mul_(0.5).add_(x)
        return state["ema"] * 1.0

    compiled = kg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback, no retrace warning
        values = [_values(compiled(kg.ones(3, device=device) * 2))[0] for _ in range(CALLS)]
    np.testing.assert_allclose(values, [2 * (1 - 0.5**k) * 2 for k in range(1, CALLS + 1)])
    (entry,) = compiled._entries.values()
    assert entry.traces == 1
