"""Adam's eager fused steps from a prepared update (``Adam._planned_update``): the same
results, bit for bit, as the update planned afresh on every step, and a new plan
whenever what the old one was made from changes."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from kernelgrad.backends.cpu import PARALLEL_THRESHOLD
from kernelgrad.nn.module import _swap_memory

SHAPES = [(7,), (3, 5), (), (PARALLEL_THRESHOLD + 3,), (4,)]


def _unplanned(optimizer):
    """The optimizer with its prepared update switched off: every step plans afresh."""
    optimizer._plan_update = lambda group: None
    return optimizer


def _params(shapes=SHAPES, dtype=kg.float32):
    values = np.random.default_rng(0)
    return [nn.Parameter(kg.tensor(values.standard_normal(shape), dtype=dtype)) for shape in shapes]


def _run_both(make, steps, change=None, shapes=SHAPES):
    """Run ``steps`` steps with the prepared update and without, with the same gradients;
    ``change(step, params, optimizer)`` may alter either run before a step. Returns both
    runs' parameters and the prepared run's optimizer."""
    results = []
    for planned in (True, False):
        params = _params(shapes)
        optimizer = make(params)
        if not planned:
            _unplanned(optimizer)
        grads = np.random.default_rng(1)
        for step in range(steps):
            for p in optimizer.param_groups[0]["params"]:
                p.grad = kg.tensor(grads.standard_normal(p.shape), dtype=p.dtype)
            if change is not None:
                change(step, optimizer.param_groups[0]["params"], optimizer)
            optimizer.step()
        results.append(([p.numpy().copy() for p in params], optimizer))
    (planned_values, planned_optimizer), (fresh_values, _) = results
    for got, expected in zip(planned_values, fresh_values, strict=True):
        np.testing.assert_array_equal(got, expected)
    return planned_optimizer


def _plan(optimizer, group=0):
    return optimizer._update_plans.get(id(optimizer.param_groups[group]))


@pytest.mark.parametrize(
    "make",
    [
        lambda p: kg.optim.Adam(p, lr=0.01),
        lambda p: kg.optim.Adam(p, lr=0.01, weight_decay=0.1, maximize=True),
        lambda p: kg.optim.AdamW(p, lr=0.01, amsgrad=True),
    ],
    ids=["adam", "adam-decay-maximize", "adamw-amsgrad"],
)
def test_prepared_steps_equal_steps_planned_afresh(make):
    optimizer = _run_both(make, 5)
    plan = _plan(optimizer)
    assert plan is not None and plan.used  # the prepared update ran


def test_a_changed_learning_rate_and_settings_are_used():
    def change(step, params, optimizer):
        group = optimizer.param_groups[0]
        group["lr"] = 0.01 * (step + 1)
        group["betas"] = (0.8, 0.99) if step >= 3 else (0.9, 0.999)
        group["weight_decay"] = 0.05 if step == 4 else 0.0

    _run_both(lambda p: kg.optim.Adam(p, lr=0.01), 6, change)


def test_a_parameter_added_to_the_group_is_updated():
    extra = {}

    def change(step, params, optimizer):
        if step == 3:
            p = extra.setdefault(id(optimizer), nn.Parameter(kg.ones(6)))
            params.append(p)
            p.grad = kg.full((6,), 0.5)

    optimizer = _run_both(lambda p: kg.optim.Adam(p, lr=0.01), 6, change)
    added = extra[id(optimizer)]
    assert optimizer.state[added]["step"].item() == 3.0
    assert _plan(optimizer).params[-1] is added


def test_a_parameter_without_a_gradient_keeps_its_own_step_count():
    def change(step, params, optimizer):
        if step in (2, 3):
            params[1].grad = None

    optimizer = _run_both(lambda p: kg.optim.Adam(p, lr=0.01), 7, change)
    params = optimizer.param_groups[0]["params"]
    assert optimizer.state[params[1]]["step"].item() == 5.0
    assert optimizer.state[params[0]]["step"].item() == 7.0


def test_gradients_of_another_layout_or_dtype_take_the_general_path():
    def change(step, params, optimizer):
        if step == 2:  # a transposed (strided) gradient
            params[1].grad = kg.tensor(np.random.default_rng(step).standard_normal((5, 3))).T
        if step == 3:
            params[0].grad = params[0].grad.to(kg.float64)

    _run_both(lambda p: kg.optim.Adam(p, lr=0.01), 6, change)


def test_loaded_and_replaced_state_is_used():
    saved = {}

    def change(step, params, optimizer):
        if step == 2:
            saved[id(optimizer)] = optimizer.state_dict()
        if step == 4:
            optimizer.load_state_dict(saved[id(optimizer)])  # back two steps
        if step == 5:
            optimizer.state[params[0]]["exp_avg"] = kg.zeros_like(params[0])

    optimizer = _run_both(lambda p: kg.optim.Adam(p, lr=0.01), 9, change)
    assert _plan(optimizer).used  # planned again (after a wait: two changes in a row)


def test_a_parameter_whose_memory_was_swapped_is_updated_in_its_new_memory():
    def change(step, params, optimizer):
        if step == 3:
            p = params[1]
            _swap_memory(p, p.detach().clone() * 2)
            p.grad = kg.ones_like(p)

    optimizer = _run_both(lambda p: kg.optim.Adam(p, lr=0.01), 5, change)
    p = optimizer.param_groups[0]["params"][1]
    assert _plan(optimizer).entries[1][1][0][2] is p._storage


def test_the_plan_is_dropped_for_a_new_parameter_list_and_counted_launches_are_seen():
    params = _params([(3,), (4,), (5,)])
    optimizer = kg.optim.Adam(params, lr=0.01)
    for p in params:
        p.grad = kg.ones_like(p)
    optimizer.step()
    plan = _plan(optimizer)
    assert plan is not None
    optimizer.step()
    assert plan.used
    # count_launches watches the backend: the step goes the general way and is counted
    with kg.compile.count_launches() as launches:
        optimizer.step()
    assert launches.names == ["adam_update[3 tensors]"]
    assert _plan(optimizer) is plan  # still holds
    optimizer.param_groups[0]["params"] = params[:2]
    params[2].grad = None
    optimizer.step()
    assert _plan(optimizer) is not plan and _plan(optimizer).params == params[:2]
    counts = [optimizer.state[p]["step"].item() for p in params]
    assert counts == [4.0, 4.0, 3.0]


def test_a_group_that_never_keeps_its_plan_plans_less_often():
    params = _params([(3,), (4,)])
    optimizer = kg.optim.Adam(params, lr=0.01)
    built = []
    plan_update = optimizer._plan_update

    def counted(group):
        before = _plan(optimizer)
        plan_update(group)
        if _plan(optimizer) is not before:
            built.append(1)

    optimizer._plan_update = counted
    for step in range(40):
        for p in params:
            p.grad = kg.ones_like(p)
        if step % 2:  # a gradient every other step: no plan holds for the next step
            params[1].grad = None
        optimizer.step()
    assert 0 < len(built) < 10
    assert not any(plan.used for plan in optimizer._update_plans.values())
