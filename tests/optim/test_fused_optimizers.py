"""Adagrad, Adamax, NAdam, RAdam, ASGD and Rprop (``optim/_fused_optimizer.py``): eight
steps against NumPy references of PyTorch's algorithms and against PyTorch itself,
their state names, parameter groups and settings, state_dict round trips, one launch
per group, and compiled steps under a learning-rate schedule equal to eager ones."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from tests.compile.test_compile_training import Trainer, _assert_same, _batch
from tests.helpers import as_numpy
from tests.optim import reference as ref

RNG = np.random.default_rng(5)
GRADIENTS = [RNG.standard_normal((3, 2)).astype(np.float32) for _ in range(8)]
START = RNG.standard_normal((3, 2)).astype(np.float32)

CASES = [
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.1, "weight_decay": 0.1,
                 "initial_accumulator_value": 0.5, "maximize": True}),
    ("Adamax", {"lr": 0.01}),
    ("Adamax", {"lr": 0.01, "betas": (0.8, 0.9), "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {"lr": 0.01}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "momentum_decay": 0.05}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True,
               "maximize": True}),
    # betas[1] = 0.9: the first five steps are momentum SGD, the rest rectified Adam
    ("RAdam", {"lr": 0.01, "betas": (0.9, 0.9)}),
    ("RAdam", {"lr": 0.01, "betas": (0.8, 0.9), "weight_decay": 0.1}),
    ("RAdam", {"lr": 0.01, "betas": (0.9, 0.9), "weight_decay": 0.1,
               "decoupled_weight_decay": True, "maximize": True}),
    ("ASGD", {"lr": 0.1}),
    # t0=3: the average starts moving after three steps
    ("ASGD", {"lr": 0.1, "lambd": 0.1, "alpha": 0.5, "t0": 3, "weight_decay": 0.1,
              "maximize": True}),
    ("Rprop", {"lr": 0.1}),
    ("Rprop", {"lr": 0.1, "etas": (0.3, 1.5), "step_sizes": (0.01, 0.2), "maximize": True}),
]  # fmt: skip
KINDS = ["Adagrad", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"]
STATE = {
    "Adagrad": ["step", "sum"],
    "Adamax": ["step", "exp_avg", "exp_inf"],
    "NAdam": ["step", "mu_product", "exp_avg", "exp_avg_sq"],
    "RAdam": ["step", "exp_avg", "exp_avg_sq"],
    "ASGD": ["step", "eta", "mu", "ax"],
    "Rprop": ["step", "prev", "step_size"],
}


def _case_id(case):
    kind, options = case
    return kind + "-" + "-".join(options) if len(options) > 1 else kind


def _run(library, make_parameter, kind, options, grads):
    p = make_parameter(START)
    optimizer = getattr(library.optim, kind)([p], **options)
    for grad in grads:
        p.grad = make_parameter(grad).detach()
        optimizer.step()
    return p, optimizer


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_eight_steps_match_references(case, device, reference):
    kind, options = case
    p, optimizer = _run(
        kg, lambda v: nn.Parameter(kg.tensor(v, device=device)), kind, options, GRADIENTS
    )
    state = optimizer.state[p]
    assert list(state) == STATE[kind]
    assert state["step"].item() == 8 and state["step"].device == p.device
    if reference == "torch":
        torch = pytest.importorskip("torch")
        q, expected_optimizer = _run(
            torch, lambda v: torch.nn.Parameter(torch.tensor(v)), kind, options, GRADIENTS
        )
        expected = q.detach().numpy()
        for name, value in expected_optimizer.state[q].items():
            np.testing.assert_allclose(
                as_numpy(state[name]), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=name
            )
    else:
        expected = getattr(ref, kind.lower())(START, GRADIENTS, **options)
    np.testing.assert_allclose(as_numpy(p), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("kind", KINDS)
def test_arguments_and_group_settings_are_pytorchs(kind):
    """The same constructor arguments (``foreach``, ``capturable``, ``differentiable``
    accepted and ignored), the same group settings, the same errors for bad values."""
    torch = pytest.importorskip("torch")
    ignored = {"foreach": False, "differentiable": False}
    if kind != "Adagrad":
        ignored["capturable"] = False
    mine = getattr(kg.optim, kind)([nn.Parameter(kg.zeros(2))], **ignored)
    theirs = getattr(torch.optim, kind)([torch.nn.Parameter(torch.zeros(2))], **ignored)
    expected = {k: v for k, v in theirs.param_groups[0].items() if k != "params"}
    got = {k: v for k, v in mine.param_groups[0].items() if k != "params"}
    assert got == expected
    with pytest.raises(ValueError):
        getattr(torch.optim, kind)([torch.nn.Parameter(torch.zeros(2))], lr=-1.0)
    with pytest.raises(ValueError, match=kind):
        getattr(kg.optim, kind)([nn.Parameter(kg.zeros(2))], lr=-1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_state_dict_round_trip_with_two_groups_continues_identically(kind, device):
    def fresh():
        a = nn.Parameter(kg.tensor(START, device=device))
        b = nn.Parameter(kg.tensor(START[0], device=device))
        groups = [{"params": [a]}, {"params": [b], "lr": 0.05}]
        return (a, b), getattr(kg.optim, kind)(groups, lr=0.01)

    def step(params, optimizer, grad):
        params[0].grad = kg.tensor(grad, device=device)
        params[1].grad = kg.tensor(grad[1] * 2, device=device)
        optimizer.step()

    first_params, first = fresh()
    assert [g["lr"] for g in first.param_groups] == [0.01, 0.05]
    for grad in GRADIENTS[:3]:
        step(first_params, first, grad)
    saved = first.state_dict()
    assert [g["params"] for g in saved["param_groups"]] == [[0], [1]]
    assert list(saved["state"][1]) == STATE[kind]
    second_params, second = fresh()
    with kg.no_grad():
        for p, q in zip(second_params, first_params):
            p.copy_(q)
    second.load_state_dict(saved)
    for grad in GRADIENTS[3:6]:
        step(first_params, first, grad)
        step(second_params, second, grad)
    for p, q in zip(first_params, second_params):
        np.testing.assert_array_equal(as_numpy(p), as_numpy(q))
    for name, value in first.state[first_params[1]].items():
        loaded = second.state[second_params[1]][name]
        assert loaded._storage is not value._storage  # a copy
        np.testing.assert_array_equal(as_numpy(loaded), as_numpy(value))


def test_adagrad_creates_its_state_with_the_optimizer(device):
    """As in PyTorch: every parameter's ``step`` and ``sum`` exist before any step (a
    state_dict saved at once lists them)."""
    p = nn.Parameter(kg.zeros(3, device=device))
    optimizer = kg.optim.Adagrad([p], initial_accumulator_value=0.25)
    assert optimizer.state[p]["step"].item() == 0
    assert as_numpy(optimizer.state[p]["sum"]).tolist() == [0.25] * 3
    assert list(optimizer.state_dict()["state"]) == [0]


def test_a_group_of_parameters_is_one_launch():
    params = [nn.Parameter(kg.randn(*shape)) for shape in ((4,), (2, 3), ())]
    for kind in KINDS:
        optimizer = getattr(kg.optim, kind)(params)
        for p in params:
            p.grad = kg.ones_like(p)
        optimizer.step()  # creates the state
        with kg.compile.count_launches() as launches:
            optimizer.step()  # the scalar state advances in Python on the CPU
        names = sorted(launches.names)
        assert names == [f"{kind.lower()}_update[3 tensors]"], names


def test_sparse_adam_names_the_replacement():
    with pytest.raises(kg.errors.UnsupportedError, match=r"kg\.optim\.Adam"):
        kg.optim.SparseAdam([nn.Parameter(kg.zeros(2))], lr=0.01)


COMPILED = {
    "Adagrad": lambda p: kg.optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.01),
    "Adamax": lambda p: kg.optim.Adamax(p, lr=0.05, maximize=True),
    "NAdam": lambda p: kg.optim.NAdam(p, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True),
    "RAdam": lambda p: kg.optim.RAdam(p, lr=0.05, betas=(0.9, 0.9)),
    "ASGD": lambda p: kg.optim.ASGD(p, lr=0.05, t0=2, lambd=0.1),
    "Rprop": lambda p: kg.optim.Rprop(p, lr=0.05),
}
SIMULATED = "NAdam"  # the simulated pass runs one, and fewer calls (time)


@pytest.mark.parametrize("kind", KINDS)
def test_compiled_steps_under_a_schedule_equal_eager_steps(kind, device):
    """The scalar state advances on the device in replays, and the rate a cosine
    schedule changes on every call is fed to them without tracing again."""
    calls = 7
    if device == "cuda" and kg.cuda.is_simulated():
        if kind != SIMULATED:
            pytest.skip("the simulated pass runs one of the optimizers (time)")
        calls = 4
    eager, compiled = Trainer(device, COMPILED[kind]), Trainer(device, COMPILED[kind])
    schedules = [
        kg.optim.lr_scheduler.CosineAnnealingLR(t.optimizer, T_max=8) for t in (eager, compiled)
    ]
    step = kg.compile(compiled.step)
    x, y = _batch(device)
    for _ in range(calls):
        assert step(x, y).item() == pytest.approx(eager.step(x, y).item(), rel=1e-5)
        _assert_same(compiled, eager)
        for schedule in schedules:
            schedule.step()
    assert compiled.python_runs == 2  # eager, traced, then replays at new rates
    assert len(step.plans) == 1
    for p, q in zip(compiled.model.parameters(), eager.model.parameters()):
        for name, value in eager.optimizer.state[q].items():
            np.testing.assert_allclose(
                as_numpy(compiled.optimizer.state[p][name]), as_numpy(value),
                rtol=1e-5, atol=1e-6, err_msg=name,
            )  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_the_prepared_update_equals_the_general_path_bit_for_bit(kind):
    """Eager CPU steps from the prepared update (``FusedOptimizer._planned_update``)
    equal the update planned afresh on every step: with a new rate (which the plan
    reads), and through the changes that must drop the plan: a gradient of another
    layout, state loaded from a state_dict, a parameter without a gradient (its count
    then differs from the others', which the plan refuses)."""
    runs = []
    for planned in (True, False):
        values = np.random.default_rng(0)
        params = [
            nn.Parameter(kg.tensor(values.standard_normal(s), dtype=kg.float32))
            for s in ((3,), (2, 2))
        ]
        optimizer = getattr(kg.optim, kind)(params, lr=0.01)
        if not planned:
            optimizer._plan_update = lambda group: None
        grads = np.random.default_rng(1)
        used = []
        for step in range(9):
            for p in params:
                p.grad = kg.tensor(grads.standard_normal(p.shape), dtype=kg.float32)
            if step == 2:
                optimizer.param_groups[0]["lr"] = 0.02
            if step == 3:
                params[1].grad = params[1].grad.T.contiguous().T
            if step == 5:
                optimizer.load_state_dict(optimizer.state_dict())
            if step == 8:
                params[0].grad = None
            optimizer.step()
            plan = optimizer._plans.get(id(optimizer.param_groups[0]))
            used.append(plan is not None and plan.used)
        if planned:
            # planned after steps 0, 4 (the transposed gradient cannot be prepared) and
            # 6 (one after the loaded state's first step: a plan dropped unused waits)
            assert used == [False, True, True, False, False, False, False, True, False], used
        runs.append([as_numpy(p).copy() for p in params] + [
            as_numpy(v) for p in params for v in optimizer.state[p].values()
        ])  # fmt: skip
    for got, expected in zip(*runs, strict=True):
        np.testing.assert_array_equal(got, expected)
