"""Optimizers: updates against NumPy references of PyTorch's algorithms and against
PyTorch itself (where installed), fused kernels against the step-by-step tensor version,
state_dict round trips, parameter groups."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from tests.helpers import as_numpy, assert_close
from tests.optim import reference as ref

RNG = np.random.default_rng(11)
GRADIENTS = [RNG.standard_normal((3, 2)).astype(np.float32) for _ in range(4)]
START = RNG.standard_normal((3, 2)).astype(np.float32)


def run_kernelgrad(make, device, steps=4):
    p = nn.Parameter(kg.tensor(START, device=device))
    optimizer = make([p])
    for grad in GRADIENTS[:steps]:
        p.grad = kg.tensor(grad, device=device)
        optimizer.step()
    return as_numpy(p), optimizer


def run_torch(make, steps=4):
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.tensor(START))
    optimizer = make([p])
    for grad in GRADIENTS[:steps]:
        p.grad = torch.tensor(grad)
        optimizer.step()
    return p.detach().numpy()


SGD_OPTIONS = [
    {"lr": 0.1},
    {"lr": 0.1, "weight_decay": 0.01},
    {"lr": 0.05, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.1},
    {"lr": 0.05, "momentum": 0.8, "nesterov": True},
    {"lr": 0.1, "momentum": 0.5, "maximize": True},
]
ADAM_OPTIONS = [
    {"lr": 0.01},
    {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6},
    {"lr": 0.01, "weight_decay": 0.1},
    {"lr": 0.01, "amsgrad": True},
    {"lr": 0.01, "betas": (0.9, 0.5), "amsgrad": True},  # short memory: the maximum matters
    {"lr": 0.01, "maximize": True, "weight_decay": 0.05},
]


def expected_parameter(reference: str, kind: str, options: dict) -> np.ndarray:
    """The parameter after the four steps of ``run_kernelgrad``, by ``reference``."""
    if reference == "torch":
        torch = pytest.importorskip("torch")
        return run_torch(lambda p: getattr(torch.optim, kind)(p, **options))
    return getattr(ref, kind.lower())(START, GRADIENTS, **options)


ADAPTIVE_OPTIONS = [
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "momentum": 0.8, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "centered": True, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1, "maximize": True}),
]


@pytest.mark.parametrize("kind, options", ADAPTIVE_OPTIONS)
def test_rmsprop_and_adadelta_match_references(kind, options, device, reference):
    mine, optimizer = run_kernelgrad(lambda p: getattr(kg.optim, kind)(p, **options), device)
    expected = expected_parameter(reference, kind, options)
    np.testing.assert_allclose(mine, expected, rtol=1e-5, atol=1e-6)
    assert next(iter(optimizer.state.values()))["step"] == 4


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("options", SGD_OPTIONS)
def test_sgd_matches_references(options, fused, device, reference):
    mine, _ = run_kernelgrad(lambda p: kg.optim.SGD(p, fused=fused, **options), device)
    expected = expected_parameter(reference, "SGD", options)
    np.testing.assert_allclose(mine, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("kind", ["Adam", "AdamW"])
@pytest.mark.parametrize("options", ADAM_OPTIONS)
def test_adam_and_adamw_match_references(kind, options, fused, device, reference):
    mine, _ = run_kernelgrad(lambda p: getattr(kg.optim, kind)(p, fused=fused, **options), device)
    expected = expected_parameter(reference, kind, options)
    np.testing.assert_allclose(mine, expected, rtol=1e-5, atol=1e-6)


def test_sgd_momentum_follows_its_formula(device):
    lr, momentum, decay = 0.1, 0.9, 0.01
    mine, optimizer = run_kernelgrad(
        lambda p: kg.optim.SGD(p, lr=lr, momentum=momentum, weight_decay=decay), device, steps=3
    )
    p, buffer = START.astype(np.float64), None
    for grad in GRADIENTS[:3]:
        d = grad + decay * p
        buffer = d if buffer is None else momentum * buffer + d
        p = p - lr * buffer
    np.testing.assert_allclose(mine, p, rtol=1e-5)
    state = optimizer.state[optimizer.param_groups[0]["params"][0]]
    np.testing.assert_allclose(as_numpy(state["momentum_buffer"]), buffer, rtol=1e-5)


def test_adam_follows_its_formula(device):
    lr, (beta1, beta2), eps = 0.01, (0.9, 0.999), 1e-8
    mine, optimizer = run_kernelgrad(lambda p: kg.optim.Adam(p, lr=lr), device, steps=3)
    p = START.astype(np.float64)
    m = v = np.zeros_like(p)
    for t, grad in enumerate(GRADIENTS[:3], start=1):
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad**2
        m_hat, v_hat = m / (1 - beta1**t), v / (1 - beta2**t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    np.testing.assert_allclose(mine, p, rtol=1e-5)
    state = optimizer.state[optimizer.param_groups[0]["params"][0]]
    assert state["step"].item() == 3  # a 0-d tensor on the parameter's device
    np.testing.assert_allclose(as_numpy(state["exp_avg"]), m, rtol=1e-5)
    np.testing.assert_allclose(as_numpy(state["exp_avg_sq"]), v, rtol=1e-4)


@pytest.mark.parametrize(
    "make, names",
    [
        (lambda p: kg.optim.Adam(p, lr=0.01), ["exp_avg", "exp_avg_sq"]),
        (lambda p: kg.optim.Adam(p, lr=0.01, amsgrad=True), ["exp_avg", "exp_avg_sq"]),
        (lambda p: kg.optim.SGD(p, lr=0.01, momentum=0.9), ["momentum_buffer"]),
    ],
    ids=["adam", "amsgrad", "sgd-momentum"],
)
def test_fused_updates_set_subnormal_running_averages_to_zero(make, names, device):
    """A unit whose gradient stays zero has its averages decay geometrically; once they
    are subnormal (slow on x86 CPUs) the fused update sets them to zero, and only them."""
    tiny = float(np.finfo(np.float32).tiny)
    p = nn.Parameter(kg.ones(4, device=device))
    optimizer = make([p])
    p.grad = kg.zeros(4, device=device)
    optimizer.step()  # creates the state
    state = optimizer.state[p]
    start = np.array([tiny * 0.5, -tiny * 0.01, tiny * 4, 1e-3], dtype=np.float32)
    for name in names:
        state[name] = kg.tensor(np.abs(start) if name == "exp_avg_sq" else start, device=device)
    optimizer.step()
    for name in names:
        values = as_numpy(state[name])
        assert values[0] == 0.0 and values[1] == 0.0, (name, values)
        assert abs(values[2]) >= tiny and values[3] > 0.0, (name, values)  # normal ones decay


@pytest.mark.parametrize(
    "make",
    [
        lambda p, fused: kg.optim.Adam(p, lr=0.01, weight_decay=0.1, fused=fused),
        lambda p, fused: kg.optim.AdamW(p, lr=0.01, amsgrad=True, fused=fused),
        lambda p, fused: kg.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, fused=fused),
        lambda p, fused: kg.optim.SGD(p, lr=0.05, fused=fused),
    ],
    ids=["adam", "adamw-amsgrad", "sgd-nesterov", "sgd"],
)
def test_one_fused_launch_for_many_parameters_equals_the_unfused_updates(make, device):
    """The fused update of a group of parameters of several sizes and dtypes (on the CPU
    one kernel per dtype for all of them, but a transposed gradient's, which runs on its
    own) equals the step-by-step tensor version."""
    shapes = [(7,), (3, 5), (1,), (40, 30), (2, 2), (6,)]
    dtypes = [kg.float32, kg.float32, kg.float64, kg.float32, kg.float64, kg.float32]
    runs = []
    for fused in (True, False):
        values = np.random.default_rng(3)
        params = [
            nn.Parameter(kg.tensor(values.standard_normal(shape), dtype=dtype, device=device))
            for shape, dtype in zip(shapes, dtypes, strict=True)
        ]
        optimizer = make(params, fused)
        grads = np.random.default_rng(4)
        for _ in range(3):
            for p in params:
                g = grads.standard_normal(p.shape).astype(np.float32)
                p.grad = kg.tensor(g, dtype=p.dtype, device=device)
            transposed = grads.standard_normal((30, 40)).astype(np.float32)
            params[3].grad = kg.tensor(transposed, device=device).T
            with kg.compile.count_launches() as launches:
                optimizer.step()
        runs.append([as_numpy(p) for p in params])
        if fused and device == "cpu":
            # float32: one kernel for (7,), (3, 5), (6,); (40, 30) alone; float64: one
            assert sum("tensors]" in name for name in launches.names) == 2, launches.names
    for got, expected in zip(*runs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_adamw_decays_the_weights_directly(device):
    p = nn.Parameter(kg.ones(2, device=device))
    optimizer = kg.optim.AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = kg.zeros(2, device=device)
    optimizer.step()
    assert as_numpy(p).tolist() == pytest.approx([0.95, 0.95])


def test_parameters_without_gradients_are_skipped_and_groups_have_their_own_settings(device):
    a = nn.Parameter(kg.ones(2, device=device))
    b = nn.Parameter(kg.ones(2, device=device))
    c = nn.Parameter(kg.ones(2, device=device))
    optimizer = kg.optim.SGD([{"params": [a, b]}, {"params": c, "lr": 1.0}], lr=0.1)
    assert optimizer.param_groups[1]["lr"] == 1.0 and optimizer.param_groups[0]["lr"] == 0.1
    a.grad = kg.ones(2, device=device)
    c.grad = kg.ones(2, device=device)
    optimizer.step()
    assert as_numpy(a).tolist() == pytest.approx([0.9, 0.9])
    assert as_numpy(b).tolist() == [1.0, 1.0]
    assert as_numpy(c).tolist() == [0.0, 0.0]
    optimizer.zero_grad()
    assert a.grad is None and c.grad is None
    with pytest.raises(ValueError, match="more than one"):
        optimizer.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty"):
        kg.optim.Adam([])
    with pytest.raises(ValueError, match="does not require grad"):
        kg.optim.SGD([kg.zeros(2)], lr=0.1)
    with pytest.raises(ValueError):
        kg.optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(ValueError):
        kg.optim.Adam([a], betas=(1.0, 0.9))


def test_step_runs_the_closure_and_updates_in_place(device):
    model = nn.Linear(3, 1).to(device)
    weight = model.weight
    storage = weight._storage
    optimizer = kg.optim.Adam(model.parameters(), lr=0.01)
    x = kg.ones(4, 3, device=device)

    def closure():
        optimizer.zero_grad()
        # far from the optimum whatever the initial weights (|output| <= 3 * 1 / sqrt(3) +
        # 1 / sqrt(3) < 2.4), so that a step of 0.01 cannot overshoot it
        loss = (model(x) - 5.0).pow(2).mean()
        loss.backward()
        return loss

    first = optimizer.step(closure).item()
    second = optimizer.step(closure).item()
    assert second < first
    assert model.weight is weight and weight._storage is storage and weight.requires_grad


@pytest.mark.parametrize("kind", ["SGD", "Adam", "AdamW"])
def test_state_dict_round_trip_continues_identically(kind, device):
    options = {"lr": 0.05, "momentum": 0.9} if kind == "SGD" else {"lr": 0.05, "amsgrad": True}

    def fresh():
        p = nn.Parameter(kg.tensor(START, device=device))
        return p, getattr(kg.optim, kind)([p], **options)

    p1, first = fresh()
    for grad in GRADIENTS[:2]:
        p1.grad = kg.tensor(grad, device=device)
        first.step()
    saved = first.state_dict()
    assert saved["param_groups"][0]["params"] == [0]
    p2, second = fresh()
    with kg.no_grad():
        p2.copy_(p1)
    second.load_state_dict(saved)
    for grad in GRADIENTS[2:]:
        for p, optimizer in ((p1, first), (p2, second)):
            p.grad = kg.tensor(grad, device=device)
            optimizer.step()
    np.testing.assert_array_equal(as_numpy(p1), as_numpy(p2))
    # loaded state is a copy, not shared with the source optimizer
    state1 = next(iter(first.state.values()))
    state2 = next(iter(second.state.values()))
    for key, value in state1.items():
        if isinstance(value, kg.Tensor):
            assert value._storage is not state2[key]._storage


def test_load_state_dict_checks_the_layout(device):
    p = nn.Parameter(kg.zeros(2, device=device))
    optimizer = kg.optim.SGD([p], lr=0.1, momentum=0.9)
    p.grad = kg.ones(2, device=device)
    optimizer.step()
    saved = optimizer.state_dict()
    other = kg.optim.SGD([nn.Parameter(kg.zeros(3, device=device))], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="shape"):
        other.load_state_dict(saved)
    groups = [{"params": [nn.Parameter(kg.zeros(2))]}, {"params": [nn.Parameter(kg.zeros(2))]}]
    two_groups = kg.optim.SGD(groups, lr=1.0)
    with pytest.raises(ValueError, match="groups"):
        two_groups.load_state_dict(saved)


def test_fused_update_keeps_float64_parameters_in_float64(device):
    p = nn.Parameter(kg.tensor([1.0, 2.0], dtype=kg.float64, device=device))
    optimizer = kg.optim.Adam([p], lr=1e-3)
    p.grad = kg.tensor([1e-3, 1.0], dtype=kg.float64, device=device)
    optimizer.step()
    assert p.dtype is kg.float64
    # the first step moves each entry by lr * g / (|g| + eps), computed in float64
    expected = [1.0 - 1e-3 * 1e-3 / (1e-3 + 1e-8), 2.0 - 1e-3 * 1.0 / (1.0 + 1e-8)]
    assert as_numpy(p).tolist() == pytest.approx(expected, abs=1e-12)
    state = optimizer.state[p]
    assert state["exp_avg"].dtype is kg.float64
    assert as_numpy(state["exp_avg"]).tolist() == pytest.approx([1e-4, 0.1], rel=1e-12)
    assert as_numpy(state["exp_avg_sq"]).tolist() == pytest.approx([1e-9, 1e-3], rel=1e-12)


def test_training_a_tiny_model_reduces_the_loss(device):
    kg.manual_seed(0)
    x = kg.tensor(RNG.standard_normal((32, 4)), dtype=kg.float32, device=device)
    true_weight = kg.tensor([[1.0, -2.0, 0.5, 3.0]], device=device)
    y = x @ true_weight.T
    for make in (
        lambda p: kg.optim.SGD(p, lr=0.1, momentum=0.9),
        lambda p: kg.optim.Adam(p, lr=0.1),
        lambda p: kg.optim.AdamW(p, lr=0.1, weight_decay=1e-4),
    ):
        model = nn.Linear(4, 1).to(device)
        optimizer = make(model.parameters())
        losses = []
        for _ in range(30):
            optimizer.zero_grad()
            loss = kg.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert losses[-1] < 0.05 * losses[0]
        assert math.isfinite(losses[-1])


def test_repr_lists_the_settings():
    text = repr(kg.optim.SGD([nn.Parameter(kg.zeros(1))], lr=0.5))
    assert text.startswith("SGD (\nParameter Group 0\n") and "lr: 0.5" in text
    assert_close(kg.zeros(1), [0.0])


def _rosenbrock_steps(library, make_parameter, steps, **options):
    """Parameters after ``steps`` LBFGS steps on a 2-parameter-tensor Rosenbrock."""
    x = make_parameter(np.array([-1.2, 1.0]))
    scale = make_parameter(np.array([0.5]))
    optimizer = library.optim.LBFGS([x, scale], **options)

    def closure():
        optimizer.zero_grad()
        loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2 + (scale - 2.0).pow(2).sum()
        loss.backward()
        return loss

    for _ in range(steps):
        optimizer.step(closure)
    return np.concatenate([as_numpy(x.detach()), as_numpy(scale.detach())])


LBFGS_OPTIONS = [
    {"lr": 0.5, "max_iter": 6},
    {"lr": 0.2, "history_size": 2},
    {"line_search_fn": "strong_wolfe", "max_iter": 5, "history_size": 3},
    # the line search stops at max_eval evaluations, within its bracketing phase
    {"line_search_fn": "strong_wolfe", "lr": 0.5, "max_eval": 7},
]


@pytest.mark.parametrize("options", LBFGS_OPTIONS)
def test_lbfgs_follows_pytorchs_algorithm(options, device, reference):
    mine = _rosenbrock_steps(
        kg, lambda v: nn.Parameter(kg.tensor(v, dtype=kg.float64, device=device)), 3, **options
    )
    if reference == "torch":
        torch = pytest.importorskip("torch")
        expected = _rosenbrock_steps(
            torch, lambda v: torch.nn.Parameter(torch.tensor(v, dtype=torch.float64)), 3, **options
        )
        # sixty iterations on Rosenbrock's valley: sums in another order differ by ~1e-7
        np.testing.assert_allclose(mine, expected, rtol=1e-6, atol=1e-9)
    else:  # the loss falls from 24.2 + 2.25 (the start) by more than half
        x, y, scale = mine
        assert (1 - x) ** 2 + 100 * (y - x * x) ** 2 + (scale - 2) ** 2 < 13.0
    with pytest.raises(ValueError, match="strong_wolfe"):
        kg.optim.LBFGS([nn.Parameter(kg.zeros(1))], line_search_fn="backtracking")


def test_lbfgs_strong_wolfe_converges_on_rosenbrock():
    """Three steps of twenty iterations with the line search reach the minimum (1, 1, 2).
    CPU only: the search is host code; the simulated pass runs the rows above."""
    mine = _rosenbrock_steps(
        kg, lambda v: nn.Parameter(kg.tensor(v, dtype=kg.float64)), 3, line_search_fn="strong_wolfe"
    )
    np.testing.assert_allclose(mine, [1.0, 1.0, 2.0], atol=1e-4)
