"""PyTorch's call signatures: every optimizer and learning-rate scheduler of kg.optim
takes the arguments of its torch.optim namesake, by name and by position, with the same
kinds (positional or keyword-only) and defaults (code ported from PyTorch passes them
either way); the public methods too. Deliberate differences are listed below with
their reasons. Also: ``Adam(decoupled_weight_decay=True)`` is AdamW (PyTorch 2.13), step
by step against PyTorch, and the arguments PyTorch uses for implementation choices are
accepted."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from kernelgrad.optim import lr_scheduler as kg_sched
from tests.helpers import as_numpy

try:
    import torch
except ImportError:  # pragma: no cover - PyTorch is installed in CI
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="compares with PyTorch")

# torch.optim names kernelgrad does not have (docs/pytorch-compat.md, "Optimizers").
NOT_PROVIDED: set[str] = set()

# (class, method, argument) -> why kernelgrad's argument differs from PyTorch's. The
# default of ``method`` "__init__" is the constructor's.
ALLOWED = {
    # PyTorch's LBFGS.step requires the closure; kernelgrad's defaults to None (and
    # raises when it is missing), as every other optimizer's step.
    ("LBFGS", "step", "closure"): "default None",
}

# Public methods to compare besides the constructor (where both classes have them).
OPTIMIZER_METHODS = ["step", "zero_grad", "add_param_group", "state_dict", "load_state_dict"]
SCHEDULER_METHODS = ["step", "get_last_lr", "state_dict", "load_state_dict"]


def described(function) -> list[tuple[str, str, object]]:
    """(name, kind, default) of every parameter; annotations are left out (PyTorch's
    name its own types)."""
    return [
        (p.name, p.kind.name, p.default) for p in inspect.signature(function).parameters.values()
    ]


def compare(kg_object, torch_object, name: str, method: str) -> list[str]:
    """The differences between the two signatures that ALLOWED does not list."""
    mine, theirs = described(kg_object), described(torch_object)
    allowed = {arg for (cls, m, arg) in ALLOWED if cls == name and m == method}
    mine = [a for a in mine if a[0] not in allowed]
    theirs = [a for a in theirs if a[0] not in allowed]
    if mine == theirs:
        return []
    return [f"{name}.{method}:\n  kernelgrad {mine}\n  torch      {theirs}"]


def optimizer_names() -> list[str]:
    return [n for n in kg.optim.__all__ if n not in ("lr_scheduler", "swa_utils")]


@needs_torch
@pytest.mark.parametrize("name", optimizer_names())
def test_optimizer_signatures_are_pytorchs(name):
    mine, theirs = getattr(kg.optim, name), getattr(torch.optim, name)
    problems = compare(mine, theirs, name, "__init__")
    for method in OPTIMIZER_METHODS:
        if hasattr(theirs, method):
            problems += compare(getattr(mine, method), getattr(theirs, method), name, method)
    assert not problems, "\n".join(problems)


@needs_torch
def test_every_torch_optimizer_is_provided_or_listed():
    theirs = {
        n
        for n in torch.optim.__all__
        if isinstance(getattr(torch.optim, n), type)
        and issubclass(getattr(torch.optim, n), torch.optim.Optimizer)
    }
    assert theirs - set(optimizer_names()) == NOT_PROVIDED


@needs_torch
@pytest.mark.parametrize("name", kg_sched.__all__)
def test_scheduler_signatures_are_pytorchs(name):
    mine, theirs = getattr(kg_sched, name), getattr(torch.optim.lr_scheduler, name)
    problems = compare(mine, theirs, name, "__init__")
    for method in SCHEDULER_METHODS:
        problems += compare(getattr(mine, method), getattr(theirs, method), name, method)
    assert not problems, "\n".join(problems)


@needs_torch
def test_every_torch_scheduler_is_provided():
    assert set(torch.optim.lr_scheduler.__all__) <= set(kg_sched.__all__)


# --- the arguments in use ----------------------------------------------------------------
START = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)
GRADIENTS = [np.random.default_rng(k).standard_normal((2, 3)).astype(np.float32) for k in range(4)]


def trajectory(module, make, device="cpu"):
    """The parameter after each of four steps, with ``module`` kernelgrad or torch."""
    if module is kg:
        p = nn.Parameter(kg.tensor(START, device=device))
    else:
        p = torch.nn.Parameter(torch.tensor(START))
    optimizer = make(module.optim, [p])
    values = []
    for grad in GRADIENTS:
        p.grad = kg.tensor(grad, device=device) if module is kg else torch.tensor(grad)
        optimizer.step()
        values.append((as_numpy(p) if module is kg else p.detach().numpy()).copy())
    return values, optimizer


# Positional calls as PyTorch orders them, and PyTorch's implementation arguments.
CALLS = [
    ("sgd-positional", lambda o, p: o.SGD(p, 0.05, 0.9, 0.1, 0.01, False, maximize=True)),
    (
        "sgd-implementation-arguments",
        lambda o, p: o.SGD(p, 0.05, momentum=0.9, foreach=True, differentiable=False),
    ),
    ("adam-positional", lambda o, p: o.Adam(p, 0.01, (0.8, 0.9), 1e-6, 0.1, True)),
    (
        "adam-implementation-arguments",
        lambda o, p: o.Adam(p, 0.01, foreach=False, capturable=False, differentiable=False),
    ),
    ("adamw-positional", lambda o, p: o.AdamW(p, 0.01, (0.8, 0.9), 1e-6, 0.2, True)),
    (
        "adamw-implementation-arguments",
        lambda o, p: o.AdamW(p, 0.01, maximize=True, foreach=True, capturable=False),
    ),
]


@needs_torch
@pytest.mark.parametrize("make", [c[1] for c in CALLS], ids=[c[0] for c in CALLS])
def test_pytorch_calls_run_and_match(make):
    mine, optimizer = trajectory(kg, make)
    theirs, torch_optimizer = trajectory(torch, make)
    for got, expected in zip(mine, theirs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # the same settings in every parameter group, under the same names
    assert optimizer.param_groups[0].keys() == torch_optimizer.param_groups[0].keys()


DECOUPLED = [
    {"lr": 0.01, "weight_decay": 0.3},
    {"lr": 0.02, "weight_decay": 0.1, "amsgrad": True, "betas": (0.9, 0.5)},
    {"lr": 0.01, "weight_decay": 0.2, "maximize": True},
]


@pytest.mark.parametrize("fused", [None, False])
@pytest.mark.parametrize("options", DECOUPLED)
def test_adam_with_decoupled_weight_decay_is_adamw(options, fused, device):
    def decoupled(o, p):
        return o.Adam(p, decoupled_weight_decay=True, fused=fused, **options)

    mine, optimizer = trajectory(kg, decoupled, device)
    adamw, _ = trajectory(kg, lambda o, p: o.AdamW(p, fused=fused, **options), device)
    for got, expected in zip(mine, adamw, strict=True):
        np.testing.assert_array_equal(got, expected)
    if device == "cpu" and torch is not None:  # PyTorch is compared in the CPU pass
        theirs, _ = trajectory(torch, decoupled)
        for step, (got, expected) in enumerate(zip(mine, theirs, strict=True)):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"{step}")
        torch_adamw, _ = trajectory(torch, lambda o, p: o.AdamW(p, **options))
        np.testing.assert_allclose(mine[-1], torch_adamw[-1], rtol=1e-5, atol=1e-6)
        assert optimizer.param_groups[0]["decoupled_weight_decay"] is True
    # ... and differs from Adam's L2 penalty
    coupled, _ = trajectory(kg, lambda o, p: o.Adam(p, fused=fused, **options), device)
    assert not np.allclose(coupled[-1], mine[-1], rtol=1e-4, atol=0)


def test_decoupled_weight_decay_is_per_group_and_loaded():
    a, b = nn.Parameter(kg.ones(2)), nn.Parameter(kg.ones(2))
    groups = [{"params": [a]}, {"params": [b], "decoupled_weight_decay": True}]
    optimizer = kg.optim.Adam(groups, lr=0.1, weight_decay=0.5)
    a.grad, b.grad = kg.zeros(2), kg.zeros(2)
    optimizer.step()
    # zero gradient: the L2 penalty moves a by about lr; the decoupled decay shrinks b
    np.testing.assert_allclose(as_numpy(a), [0.9, 0.9], rtol=1e-5)
    np.testing.assert_allclose(as_numpy(b), [0.95, 0.95], rtol=1e-5)
    # AdamW stays decoupled whatever a loaded state_dict says (PyTorch's __setstate__)
    c = nn.Parameter(kg.ones(2))
    adamw = kg.optim.AdamW([c], lr=0.1, weight_decay=0.5)
    saved = kg.optim.Adam([nn.Parameter(kg.ones(2))], lr=0.1, weight_decay=0.5).state_dict()
    adamw.load_state_dict(saved)
    c.grad = kg.zeros(2)
    adamw.step()
    np.testing.assert_allclose(as_numpy(c), [0.95, 0.95], rtol=1e-5)


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_fused_none_is_the_fused_kernel(kind):
    """``fused`` keeps kernelgrad's meaning: None (PyTorch's default, also what a state
    saved by PyTorch holds) launches what True launches; False the separate operations."""
    launched = {}
    for fused in (None, True, False):
        p = nn.Parameter(kg.tensor(START))
        optimizer = getattr(kg.optim, kind)([p], lr=0.1, fused=fused)
        p.grad = kg.tensor(GRADIENTS[0])
        with kg.compile.count_launches() as launches:
            optimizer.step()
        launched[fused] = list(launches.names)
    assert launched[None] == launched[True]
    assert launched[None] != launched[False]


# --- schedulers: step(epoch) --------------------------------------------------------------
def scheduler_rates(module, make, epochs):
    if module is kg:
        optimizer = kg.optim.SGD([nn.Parameter(kg.zeros(1))], lr=1.0)
    else:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = make(module.optim.lr_scheduler, optimizer)
    values = []
    with pytest.warns(UserWarning, match="epoch parameter"):
        for epoch in epochs:
            optimizer.step()
            scheduler.step(epoch)
            values.append(optimizer.param_groups[0]["lr"])
    return values


EPOCH_CALLS = [
    ("StepLR", lambda s, o: s.StepLR(o, step_size=2, gamma=0.5)),
    ("CosineAnnealingLR", lambda s, o: s.CosineAnnealingLR(o, T_max=5)),
    ("LambdaLR", lambda s, o: s.LambdaLR(o, lambda e: 1 / (e + 1))),
    ("LinearLR", lambda s, o: s.LinearLR(o, start_factor=0.2, total_iters=4)),
]


@needs_torch
@pytest.mark.parametrize("make", [c[1] for c in EPOCH_CALLS], ids=[c[0] for c in EPOCH_CALLS])
def test_step_with_an_epoch_matches_pytorch(make):
    epochs = [1, 2, 5, 3, 7]  # jumps and going back: PyTorch's closed forms
    mine = scheduler_rates(kg, make, epochs)
    theirs = scheduler_rates(torch, make, epochs)
    np.testing.assert_allclose(mine, theirs, rtol=1e-12)


@needs_torch
def test_lambda_lr_takes_one_function_per_group():
    def make(module, optimizer):
        return module.optim.lr_scheduler.LambdaLR(optimizer, [lambda e: 0.5**e, lambda e: e + 1])

    rates = {}
    for module in (kg, torch):
        groups = [{"params": [module.nn.Parameter(module.zeros(1))], "lr": lr} for lr in (1, 2)]
        optimizer = module.optim.SGD(groups, lr=1.0)
        scheduler = make(module, optimizer)
        rates[module] = []
        for _ in range(3):
            optimizer.step()
            scheduler.step()
            rates[module].append(scheduler.get_last_lr())
        assert "lr_lambdas" not in scheduler.state_dict() or module is torch
    np.testing.assert_allclose(rates[kg], rates[torch], rtol=1e-12)


def test_multiplicative_lr_refuses_a_jump():
    optimizer = kg.optim.SGD([nn.Parameter(kg.zeros(1))], lr=1.0)
    scheduler = kg_sched.MultiplicativeLR(optimizer, lambda e: 0.5)
    with pytest.warns(UserWarning, match="epoch parameter"):
        scheduler.step(1)  # the next epoch: as step()
    assert scheduler.get_last_lr() == [0.5]
    with pytest.raises(NotImplementedError, match="only the next epoch"):
        scheduler.step(5)


@pytest.mark.parametrize(
    "name", ["SGD", "Adam", "AdamW", "RMSprop", "Adadelta", "Adagrad", "NAdam"]
)
def test_differentiable_true_is_refused_not_ignored(name):
    """``differentiable=True`` asks for gradients through the update, which kernelgrad's
    updates (outside autograd) cannot give: refused, naming the problem, in the
    constructor and in a parameter group added later."""
    optimizer_class = getattr(kg.optim, name)
    with pytest.raises(kg.errors.UnsupportedError, match="outside autograd"):
        optimizer_class([nn.Parameter(kg.zeros(2))], lr=0.1, differentiable=True)
    optimizer = optimizer_class([nn.Parameter(kg.zeros(2))], lr=0.1)
    with pytest.raises(NotImplementedError, match="differentiable=False"):
        optimizer.add_param_group({"params": [nn.Parameter(kg.zeros(1))], "differentiable": True})
