"""MultiplicativeLR, PolynomialLR, CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR and
ReduceLROnPlateau: rates (and cycled momenta) against PyTorch step by step and against
their formulas, state_dict round trips, and the errors PyTorch raises."""

from __future__ import annotations

import math

import pytest

import kernelgrad as kg
from kernelgrad import nn
from kernelgrad.optim import lr_scheduler as sched

METRICS = [5.0, 4.0, 4.0, 4.1, 3.9, 3.9, 3.9, 3.9, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 2.0]


def _momentum(group):
    return group["betas"][0] if "betas" in group else group.get("momentum")


def _make_optimizer(library, kind, groups=2):
    zeros = library.zeros(1)
    params = [
        {"params": [library.nn.Parameter(zeros.clone())], "lr": 0.1 * (k + 1)}
        for k in range(groups)
    ]
    if kind == "Adam":
        return library.optim.Adam(params, lr=0.1)
    return library.optim.SGD(params, lr=0.1, momentum=0.9)


def _trajectory(library, kind, make, steps, step=lambda s, i: s.step()):
    """The rate and momentum of every group before each step, then get_last_lr(), in
    one list."""
    optimizer = _make_optimizer(library, kind)
    scheduler = make(library.optim.lr_scheduler, optimizer)
    seen = []
    for i in range(steps):
        seen.append([(g["lr"], _momentum(g)) for g in optimizer.param_groups])
        optimizer.step()
        step(scheduler, i)
    return [v for step in seen for pair in step for v in pair] + list(scheduler.get_last_lr())


CASES = {
    "multiplicative": ("SGD", lambda m, o: m.MultiplicativeLR(o, lambda e: 0.9 + 0.01 * e)),
    "multiplicative-per-group": (
        "SGD",
        lambda m, o: m.MultiplicativeLR(o, [lambda e: 0.5, lambda e: 1.0 / (e + 1)]),
    ),
    "polynomial": ("SGD", lambda m, o: m.PolynomialLR(o, total_iters=6, power=2.0)),
    "warm-restarts": ("SGD", lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, eta_min=0.01)),
    "warm-restarts-mult": ("Adam", lambda m, o: m.CosineAnnealingWarmRestarts(o, 2, T_mult=2)),
    "cyclic-triangular": (
        "SGD",
        lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=2),
    ),
    "cyclic-triangular2-adam": (
        "Adam",
        lambda m, o: m.CyclicLR(o, [0.01, 0.02], 0.2, step_size_up=2, mode="triangular2"),
    ),
    "cyclic-exp-range": (
        "SGD",
        lambda m, o: m.CyclicLR(
            o, 0.01, 0.1, step_size_up=2, mode="exp_range", gamma=0.9, cycle_momentum=False
        ),
    ),
    "cyclic-scale-fn": (
        "SGD",
        lambda m, o: m.CyclicLR(
            o, 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 0.9**x, scale_mode="iterations"
        ),
    ),
    "one-cycle": ("SGD", lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=16)),
    "one-cycle-three-phase-linear-adam": (
        "Adam",
        lambda m, o: m.OneCycleLR(
            o,
            max_lr=[1.0, 2.0],
            epochs=4,
            steps_per_epoch=4,
            pct_start=0.25,
            anneal_strategy="linear",
            three_phase=True,
            div_factor=10.0,
        ),
    ),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_rates_and_momenta_match_pytorch(name):
    torch = pytest.importorskip("torch")
    kind, make = CASES[name]
    mine = _trajectory(kg, kind, make, 16)
    theirs = _trajectory(torch, kind, make, 16)
    assert mine == pytest.approx(theirs, rel=1e-12, abs=1e-15)


def _first_group(values, steps, momentum=False):
    """The first group's rate (or momentum) at each step, from a trajectory."""
    return [values[4 * i + (1 if momentum else 0)] for i in range(steps)]


def test_rates_follow_their_formulas():
    rates = _first_group(_trajectory(kg, "SGD", CASES["polynomial"][1], 8), 8)
    assert rates == pytest.approx([0.1 * (1 - min(e, 6) / 6) ** 2 for e in range(8)])
    rates = _first_group(_trajectory(kg, "SGD", CASES["warm-restarts-mult"][1], 9), 9)
    cycle_positions = [(0, 2), (1, 2), (0, 4), (1, 4), (2, 4), (3, 4), (0, 8), (1, 8), (2, 8)]
    expected = [0.1 * (1 + math.cos(math.pi * t / n)) / 2 for t, n in cycle_positions]
    assert rates == pytest.approx(expected)
    rates = _first_group(_trajectory(kg, "SGD", CASES["multiplicative"][1], 4), 4)
    assert rates == pytest.approx([0.1, 0.1 * 0.91, 0.1 * 0.91 * 0.92,
                                                      0.1 * 0.91 * 0.92 * 0.93])  # fmt: skip
    values = _trajectory(kg, "SGD", CASES["cyclic-triangular"][1], 7)
    # up from 0.01 to 0.1 in three steps, down in two, again; momentum the other way
    assert _first_group(values, 7) == pytest.approx([0.01, 0.04, 0.07, 0.1, 0.055, 0.01, 0.04])
    momenta = [0.9, 0.9 - 0.1 / 3, 0.9 - 0.2 / 3, 0.8, 0.85, 0.9, 0.9 - 0.1 / 3]
    assert _first_group(values, 7, momentum=True) == pytest.approx(momenta)


@pytest.mark.torch
def test_warm_restarts_take_fractional_epochs_as_pytorch():
    torch = pytest.importorskip("torch")
    make = CASES["warm-restarts-mult"][1]
    epochs = [0.5, 1.25, 2.0, 3.7, 5.99, 6.0, 13.5]
    mine = _trajectory(kg, "SGD", make, 7, step=lambda s, i: s.step(epochs[i]))
    theirs = _trajectory(torch, "SGD", make, 7, step=lambda s, i: s.step(epochs[i]))
    assert mine == pytest.approx(theirs, rel=1e-12)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"mode": "max", "patience": 1, "threshold_mode": "abs", "threshold": 0.5},
        {"patience": 1, "cooldown": 2, "factor": 0.5, "min_lr": [0.02, 0.05]},
        {"patience": 0, "factor": 0.5, "min_lr": 0.049, "eps": 1e-3},
    ],
)
def test_reduce_on_plateau_matches_pytorch(options, reference):
    def run(library):
        optimizer = _make_optimizer(library, "SGD")
        scheduler = library.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **options)
        seen = []
        for metric in METRICS:
            optimizer.step()
            scheduler.step(metric)
            seen += scheduler.get_last_lr()
        return seen

    mine = run(kg)
    if reference == "torch":
        assert mine == pytest.approx(run(pytest.importorskip("torch")), rel=1e-12)
    elif not options:  # patience 10: the metric improves often enough
        assert mine == [0.1, 0.2] * len(METRICS)
    elif "cooldown" in options:
        # 4.0 (again) and 4.1 are two bad epochs, more than patience 1: halved at the
        # fourth; then floors of 0.02 and 0.05
        assert mine[4:8] == [0.1, 0.2, 0.05, 0.1]
        assert mine[-2:] == [0.02, 0.05]


@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_round_trip_continues_identically(name):
    kind, make = CASES[name]
    first_optimizer = _make_optimizer(kg, kind)
    first = make(sched, first_optimizer)
    for _ in range(5):
        first_optimizer.step()
        first.step()
    saved = first.state_dict()
    assert "optimizer" not in saved and not any(callable(v) for v in saved.values())
    second_optimizer = _make_optimizer(kg, kind)
    second = make(sched, second_optimizer)
    second.load_state_dict(saved)
    second_optimizer.load_state_dict(first_optimizer.state_dict())
    for _ in range(6):
        assert second.get_last_lr() == first.get_last_lr()
        for a, b in zip(first_optimizer.param_groups, second_optimizer.param_groups):
            assert (a["lr"], _momentum(a)) == (b["lr"], _momentum(b))
        for optimizer, scheduler in ((first_optimizer, first), (second_optimizer, second)):
            optimizer.step()
            scheduler.step()


def test_a_plateau_checkpoint_round_trip(tmp_path):
    model = nn.Linear(2, 1)
    optimizer = kg.optim.SGD(model.parameters(), lr=0.1)
    scheduler = sched.ReduceLROnPlateau(optimizer, patience=0, factor=0.5)
    for metric in (3.0, 3.0, 2.0):
        scheduler.step(metric)
    path = tmp_path / "run.safetensors"
    kg.serialization.save_checkpoint(path, model, optimizer, scheduler)
    optimizer2 = kg.optim.SGD(model.parameters(), lr=0.1)
    scheduler2 = sched.ReduceLROnPlateau(optimizer2, patience=0, factor=0.5)
    kg.serialization.load_checkpoint(path, model, optimizer2, scheduler2)
    assert scheduler2.best == 2.0 and optimizer2.param_groups[0]["lr"] == 0.05
    for scheduler_ in (scheduler, scheduler2):
        scheduler_.step(2.5)
    assert scheduler2.get_last_lr() == scheduler.get_last_lr() == [0.025]


def test_errors_are_pytorchs():
    optimizer = _make_optimizer(kg, "SGD")
    with pytest.raises(ValueError, match="total_steps"):
        sched.OneCycleLR(optimizer, max_lr=1.0)
    one_cycle = sched.OneCycleLR(optimizer, max_lr=1.0, total_steps=2)
    one_cycle.step()
    one_cycle.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        one_cycle.step()
    with pytest.raises(ValueError, match="T_0"):
        sched.CosineAnnealingWarmRestarts(optimizer, T_0=0)
    with pytest.raises(ValueError, match="2 values"):
        sched.MultiplicativeLR(optimizer, [lambda e: 1.0])
    plain = kg.optim.Adagrad([nn.Parameter(kg.zeros(1))])
    with pytest.raises(ValueError, match="cycle_momentum=False"):
        sched.CyclicLR(plain, 0.01, 0.1)
    sched.CyclicLR(plain, 0.01, 0.1, cycle_momentum=False)
    with pytest.raises(ValueError, match="factor"):
        sched.ReduceLROnPlateau(optimizer, factor=1.0)
    with pytest.raises(TypeError, match="SequentialLR"):
        sched.SequentialLR(
            optimizer, [sched.StepLR(optimizer, 2), sched.ReduceLROnPlateau(optimizer)], [2]
        )
