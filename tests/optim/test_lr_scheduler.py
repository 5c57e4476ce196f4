"""Learning-rate schedules: values against their closed forms (every schedule) and
PyTorch (where installed), chaining, state_dict round trips."""

from __future__ import annotations

import math

import pytest

import kernelgrad as kg
from kernelgrad import nn
from kernelgrad.optim import lr_scheduler as sched
from tests.optim import reference as ref


def optimizer(lr=1.0, groups=1):
    params = [{"params": [nn.Parameter(kg.zeros(1))], "lr": lr * (k + 1)} for k in range(groups)]
    return kg.optim.SGD(params, lr=lr)


def rates(optim, scheduler, steps):
    """The learning rate of each group used at each of ``steps`` epochs."""
    values = []
    for _ in range(steps):
        values.append([group["lr"] for group in optim.param_groups])
        optim.step()
        scheduler.step()
    return values


def torch_rates(make, steps, lr=1.0, groups=1):
    torch = pytest.importorskip("torch")
    params = [
        {"params": [torch.nn.Parameter(torch.zeros(1))], "lr": lr * (k + 1)} for k in range(groups)
    ]
    optim = torch.optim.SGD(params, lr=lr)
    return rates(optim, make(torch.optim.lr_scheduler, optim), steps)


# (name, constructor called with kg's or torch's lr_scheduler module, the rate at an epoch
# for a group whose base rate is `base`: the closed form)
CASES = [
    (
        "StepLR",
        lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
        lambda epoch, base: base * ref.step(epoch, 3, 0.5),
    ),
    (
        "MultiStepLR",
        lambda m, o: m.MultiStepLR(o, milestones=[2, 5], gamma=0.1),
        lambda epoch, base: base * ref.multistep(epoch, [2, 5], 0.1),
    ),
    (
        "ExponentialLR",
        lambda m, o: m.ExponentialLR(o, gamma=0.9),
        lambda epoch, base: base * 0.9**epoch,
    ),
    (
        "CosineAnnealingLR",
        lambda m, o: m.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
        lambda epoch, base: ref.cosine(epoch, 5, floor=0.01, base=base),
    ),
    (
        "LinearLR",
        lambda m, o: m.LinearLR(o, start_factor=0.1, total_iters=4),
        lambda epoch, base: base * ref.linear(epoch, 0.1, 1.0, 4),
    ),
    (
        "ConstantLR",
        lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=3),
        lambda epoch, base: base * (0.5 if epoch < 3 else 1.0),
    ),
    (
        "LambdaLR",
        lambda m, o: m.LambdaLR(o, lambda epoch: 1 / (epoch + 1)),
        lambda epoch, base: base / (epoch + 1),
    ),
    (
        "warmup then cosine",
        lambda m, o: m.SequentialLR(
            o,
            [m.LinearLR(o, start_factor=0.2, total_iters=3), m.CosineAnnealingLR(o, T_max=6)],
            milestones=[3],
        ),
        lambda epoch, base: (
            base
            * ref.sequential(
                epoch, [lambda e: ref.linear(e, 0.2, 1.0, 3), lambda e: ref.cosine(e, 6)], [3]
            )
        ),
    ),
    (
        "chained",
        lambda m, o: m.ChainedScheduler(
            [m.LinearLR(o, start_factor=0.5, total_iters=2), m.ExponentialLR(o, gamma=0.9)]
        ),
        lambda epoch, base: base * ref.linear(epoch, 0.5, 1.0, 2) * 0.9**epoch,
    ),
]


@pytest.mark.parametrize("name, make, closed_form", CASES, ids=[case[0] for case in CASES])
def test_schedules_match_references(name, make, closed_form, reference):
    mine_optimizer = optimizer(lr=0.1, groups=2)
    mine = rates(mine_optimizer, make(sched, mine_optimizer), 12)
    if reference == "torch":
        theirs = torch_rates(make, 12, lr=0.1, groups=2)
    else:
        theirs = [[closed_form(epoch, base) for base in (0.1, 0.2)] for epoch in range(12)]
    assert len(mine) == len(theirs) == 12
    for epoch, (a, b) in enumerate(zip(mine, theirs, strict=True)):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), f"{name}, epoch {epoch}"


def test_schedules_follow_their_formulas():
    opt = optimizer()
    assert [r[0] for r in rates(opt, sched.StepLR(opt, 2, gamma=0.1), 5)] == pytest.approx(
        [1, 1, 0.1, 0.1, 0.01]
    )
    opt = optimizer()
    cosine = [r[0] for r in rates(opt, sched.CosineAnnealingLR(opt, T_max=4), 5)]
    assert cosine == pytest.approx([(1 + math.cos(math.pi * t / 4)) / 2 for t in range(5)])
    opt = optimizer()
    warmup = [r[0] for r in rates(opt, sched.LinearLR(opt, 0.25, 1.0, total_iters=3), 5)]
    assert warmup == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0])


def test_get_last_lr_and_state_dict_round_trip():
    opt = optimizer(lr=0.5)
    scheduler = sched.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(3):
        opt.step()
        scheduler.step()
    assert scheduler.get_last_lr() == [0.25]
    state = scheduler.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 3

    fresh_optimizer = optimizer(lr=0.5)
    fresh = sched.StepLR(fresh_optimizer, step_size=2, gamma=0.5)
    fresh.load_state_dict(state)
    assert fresh_optimizer.param_groups[0]["lr"] == 0.25
    fresh.step()
    scheduler.step()
    assert fresh.get_last_lr() == scheduler.get_last_lr() == [0.125]


def test_scheduler_errors():
    opt = optimizer()
    with pytest.raises(TypeError):
        sched.StepLR("not an optimizer", 2)
    with pytest.raises(ValueError):
        sched.StepLR(opt, 0)
    with pytest.raises(ValueError, match="milestones"):
        sched.SequentialLR(opt, [sched.StepLR(opt, 1), sched.StepLR(opt, 1)], milestones=[])
    with pytest.raises(ValueError, match="same optimizer"):
        sched.ChainedScheduler([sched.StepLR(opt, 1), sched.StepLR(optimizer(), 1)])
