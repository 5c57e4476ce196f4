"""``Adafactor`` and ``Muon`` (torch 2.13's algorithms): parameters and state after
several steps against PyTorch (CPU) and against NumPy references of PyTorch's code
(every backend), errors, state_dict round trips, tensor learning rates, and compiled
steps under a learning-rate schedule equal to eager ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from tests.compile.test_compile_training import Trainer, _assert_same, _batch
from tests.helpers import as_numpy

RNG = np.random.default_rng(14)


def _gradients(shape, count):
    return [RNG.standard_normal(shape).astype(np.float32) for _ in range(count)]


# --- NumPy references of PyTorch's code (float64) --------------------------------------
def adafactor_reference(start, grads, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                        weight_decay=0.0, maximize=False):  # fmt: skip
    eps1 = np.finfo(np.float32).eps if eps[0] is None else eps[0]
    p = start.astype(np.float64)
    row = col = variance = 0.0
    for t, grad in enumerate(grads, 1):
        g = -grad.astype(np.float64) if maximize else grad.astype(np.float64)
        beta = t**beta2_decay
        alpha = max(eps[1], np.sqrt(np.mean(p * p))) * min(lr, 1 / math.sqrt(t))
        p = p * (1 - lr * weight_decay)
        if g.ndim > 1:
            row = row + beta * ((g * g).mean(-1, keepdims=True) - row)
            col = col + beta * ((g * g).mean(-2, keepdims=True) - col)
            estimate = row @ col / np.maximum(row.mean(-2, keepdims=True), eps1)
        else:
            variance = variance + beta * (g * g - variance)
            estimate = variance
        update = g / np.sqrt(np.maximum(estimate, eps1 * eps1))
        p = p - alpha / max(1.0, np.sqrt(np.mean(update * update)) / d) * update
    return p


def muon_reference(start, grads, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                   ns_coefficients=(3.4445, -4.7750, 2.0315), eps=1e-7, ns_steps=5,
                   adjust_lr_fn=None):  # fmt: skip
    """PyTorch's Muon with the Newton-Schulz iteration in float64 (PyTorch's runs in
    bfloat16: see kernelgrad/optim/muon.py)."""
    a, b, c = ns_coefficients
    p = start.astype(np.float64)
    buf = np.zeros_like(p)
    rows, cols = p.shape
    if adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = math.sqrt(max(1, rows / cols))
    for grad in grads:
        g = grad.astype(np.float64)
        buf = buf + (1 - momentum) * (g - buf)
        x = g + momentum * (buf - g) if nesterov else buf
        tall = rows > cols
        x = x.T if tall else x
        x = x / max(np.linalg.norm(x), eps)
        for _ in range(ns_steps):
            gram = x @ x.T
            x = a * x + (b * gram + c * gram @ gram) @ x
        x = x.T if tall else x
        p = p * (1 - lr * weight_decay) - lr * ratio * x
    return p


def _run(library, kind, start, grads, options):
    if library is kg:
        p = nn.Parameter(kg.tensor(start))
    else:
        p = library.nn.Parameter(library.tensor(start))
    optimizer = getattr(library.optim, kind)([p], **options)
    for grad in grads:
        p.grad = library.tensor(grad)
        optimizer.step()
    return p, optimizer


ADAFACTOR_CASES = [
    ((5,), {}),
    ((3, 4), {}),
    ((2, 3, 4), {"weight_decay": 0.1, "maximize": True}),
    ((4, 3), {"lr": 0.5, "eps": (1e-3, 1e-2), "d": 1.5, "beta2_decay": -0.5}),
    ((), {"lr": 0.1}),
]


@pytest.mark.torch
@pytest.mark.parametrize("shape, options", ADAFACTOR_CASES, ids=lambda v: str(v))
def test_adafactor_matches_pytorch(shape, options):
    torch = pytest.importorskip("torch")
    start, grads = RNG.standard_normal(shape).astype(np.float32), _gradients(shape, 6)
    p, mine = _run(kg, "Adafactor", start, grads, options)
    q, theirs = _run(torch, "Adafactor", start, grads, options)
    np.testing.assert_allclose(as_numpy(p), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert list(mine.state[p]) == list(theirs.state[q])
    for name, value in theirs.state[q].items():
        np.testing.assert_allclose(
            as_numpy(mine.state[p][name]), value.numpy(), rtol=1e-5, atol=1e-7, err_msg=name
        )
    expected = {k: v for k, v in theirs.param_groups[0].items() if k != "params"}
    assert {k: v for k, v in mine.param_groups[0].items() if k != "params"} == expected


MUON_CASES = [
    ((3, 4), {}),
    ((5, 2), {"nesterov": False, "weight_decay": 0.0, "adjust_lr_fn": "match_rms_adamw"}),
    ((3, 3), {"lr": 0.05, "momentum": 0.5, "ns_steps": 3, "ns_coefficients": (2.0, -1.5, 0.5)}),
]


@pytest.mark.torch
@pytest.mark.parametrize("shape, options", MUON_CASES, ids=lambda v: str(v))
def test_muon_matches_pytorch(shape, options, monkeypatch):
    """Equal to float32 rounding to PyTorch's steps with its Newton-Schulz iteration
    run in float32 (PyTorch's own code with ``.float()`` for ``.bfloat16()``), and
    within bfloat16's rounding of PyTorch's unchanged steps."""
    torch = pytest.importorskip("torch")
    start, grads = RNG.standard_normal(shape).astype(np.float32), _gradients(shape, 6)
    p, mine = _run(kg, "Muon", start, grads, options)
    q, _ = _run(torch, "Muon", start, grads, options)  # bfloat16
    moved = np.abs(q.detach().numpy() - start).max()
    np.testing.assert_allclose(as_numpy(p), q.detach().numpy(), atol=0.15 * moved)

    # PyTorch's own code with its bfloat16 copy of the update made a float32 copy
    monkeypatch.setattr(torch.Tensor, "bfloat16", lambda self: self.float().clone())
    q, theirs = _run(torch, "Muon", start, grads, options)
    np.testing.assert_allclose(as_numpy(p), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        as_numpy(mine.state[p]["momentum_buffer"]),
        theirs.state[q]["momentum_buffer"].numpy(),
        rtol=1e-5,
        atol=1e-6,
    )
    expected = {k: v for k, v in theirs.param_groups[0].items() if k != "params"}
    assert {k: v for k, v in mine.param_groups[0].items() if k != "params"} == expected


def test_both_match_numpy_references(device, simulated):
    """Three steps on every backend (two simulated): a factored (2-d) and an
    unfactored (1-d) Adafactor parameter, a wide and a tall Muon one."""
    steps = 2 if simulated else 3
    cases = [
        ("Adafactor", (2, 3), {"lr": 0.1, "weight_decay": 0.1}, adafactor_reference),
        ("Adafactor", (3,), {"lr": 0.1, "maximize": True}, adafactor_reference),
        ("Muon", (2, 3), {"lr": 0.02}, muon_reference),
        ("Muon", (3, 2), {"lr": 0.02, "nesterov": False}, muon_reference),
    ]
    params, optimizers, expected = [], [], []
    grads = {shape: _gradients(shape, steps) for _, shape, _, _ in cases}
    for kind, shape, options, reference in cases:
        start = np.linspace(-1, 1, math.prod(shape), dtype=np.float32).reshape(shape)
        p = nn.Parameter(kg.tensor(start, device=device))
        params.append(p)
        optimizers.append(getattr(kg.optim, kind)([p], **options))
        expected.append(reference(start, grads[shape], **options))
    for k in range(steps):
        for p, optimizer, (_, shape, _, _) in zip(params, optimizers, cases):
            p.grad = kg.tensor(grads[shape][k], device=device)
            optimizer.step()
    for p, value, case in zip(params, expected, cases):
        np.testing.assert_allclose(as_numpy(p), value, rtol=1e-5, atol=1e-6, err_msg=str(case))
    assert optimizers[0].state[params[0]]["step"].item() == steps
    assert optimizers[0].state[params[0]]["step"].device == params[0].device


@pytest.mark.torch
def test_tensor_learning_rates_and_errors_are_pytorchs():
    torch = pytest.importorskip("torch")
    start, grads = RNG.standard_normal((2, 3)).astype(np.float32), _gradients((2, 3), 2)
    for kind in ("Adafactor", "Muon"):  # a tensor lr gives the steps of its value
        p, _ = _run(kg, kind, start, grads, {"lr": kg.tensor(0.05)})
        q, _ = _run(kg, kind, start, grads, {"lr": 0.05})
        np.testing.assert_array_equal(as_numpy(p), as_numpy(q))
        if kind == "Adafactor":
            t, _ = _run(torch, kind, start, grads, {"lr": torch.tensor(0.05)})
            np.testing.assert_allclose(as_numpy(p), t.detach().numpy(), rtol=1e-5, atol=1e-6)
    bad = [
        ("Adafactor", {"lr": -1.0}), ("Adafactor", {"beta2_decay": 0.5}),
        ("Adafactor", {"eps": (-1.0, 1e-3)}), ("Adafactor", {"eps": (None, -1.0)}),
        ("Adafactor", {"d": 0.5}), ("Adafactor", {"weight_decay": -1.0}),
        ("Adafactor", {"lr": "tensor2"}), ("Muon", {"lr": -1.0}), ("Muon", {"momentum": -1.0}),
        ("Muon", {"weight_decay": -1.0}), ("Muon", {"adjust_lr_fn": "other"}),
        ("Muon", {"lr": "tensor2"}),
    ]  # fmt: skip
    for kind, options in bad:
        for library in (torch, kg):
            if options.get("lr") == "tensor2":
                options = {"lr": library.tensor([0.1, 0.2])}
            with pytest.raises(ValueError):
                getattr(library.optim, kind)([library.nn.Parameter(library.zeros(2, 2))], **options)
    # Muon takes only matrices, as PyTorch (a ValueError naming the size)
    with pytest.raises(ValueError, match="Muon only supports 2D parameters"):
        torch.optim.Muon([torch.nn.Parameter(torch.zeros(3))])
    with pytest.raises(ValueError, match=r"Muon only supports 2D parameters.*\(3,\).*AdamW"):
        kg.optim.Muon([nn.Parameter(kg.zeros(3))])
    p = nn.Parameter(kg.zeros(2, 2))
    optimizer = kg.optim.Muon([p], ns_steps=100)
    p.grad = kg.ones(2, 2)
    with pytest.raises(ValueError, match="less than 100"):
        optimizer.step()


def test_adafactor_fuses_its_elementwise_work_per_group():
    """The scalar, moment and parameter kernels are one launch each for a group on the
    CPU (one update kernel per parameter); the rest are the sums."""
    params = [nn.Parameter(kg.randn(*shape)) for shape in ((4,), (2, 3), ())]
    optimizer = kg.optim.Adafactor(params)
    for p in params:
        p.grad = kg.ones_like(p)
    optimizer.step()
    with kg.compile.count_launches() as launches:
        optimizer.step()
    fused = sorted(n for n in launches.names if n.startswith("adafactor"))
    assert fused == [
        "adafactor_apply[3 tensors]", "adafactor_factored", "adafactor_lerp[2 tensors]",
        "adafactor_lerp_square[2 tensors]", "adafactor_scalars[3 tensors]",
        "adafactor_unfactored", "adafactor_unfactored",
    ]  # fmt: skip
    assert len(launches.names) <= 23


def test_muon_fuses_its_elementwise_work():
    """One momentum and one parameter kernel per group on the CPU; per parameter and
    Newton-Schulz step, three matmuls and two fused kernels (PyTorch's two addmm)."""
    params = [nn.Parameter(kg.randn(*shape)) for shape in ((4, 3), (2, 3))]
    optimizer = kg.optim.Muon(params)
    for p in params:
        p.grad = kg.ones_like(p)
    optimizer.step()  # creates the momentum buffers
    with kg.compile.count_launches() as launches:
        optimizer.step()
    names = launches.names
    assert names.count("muon_nesterov[2 tensors]") == names.count("muon_apply[2 tensors]") == 1
    assert names.count("muon_polynomial") == names.count("muon_combine") == 2 * 5
    assert names.count("matmul") == 2 * 5 * 3
    assert len(names) == 2 + 2 * (3 + 5 * 5)  # + each one's sum of squares and scaling


@pytest.mark.parametrize("kind", ["Adafactor", "Muon"])
def test_state_dict_round_trip_continues_identically(kind):
    shapes = [(3, 2), (2,)] if kind == "Adafactor" else [(3, 2), (2, 2)]
    grads = [[RNG.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(5)]

    def fresh():
        params = [nn.Parameter(kg.tensor(np.ones(s, np.float32))) for s in shapes]
        groups = [{"params": [params[0]]}, {"params": [params[1]], "lr": 0.05}]
        return params, getattr(kg.optim, kind)(groups, lr=0.01)

    def step(params, optimizer, values):
        for p, g in zip(params, values):
            p.grad = kg.tensor(g)
        optimizer.step()

    first_params, first = fresh()
    for values in grads[:2]:
        step(first_params, first, values)
    saved = first.state_dict()
    second_params, second = fresh()
    with kg.no_grad():
        for p, q in zip(second_params, first_params):
            p.copy_(q)
    second.load_state_dict(saved)
    for values in grads[2:]:
        step(first_params, first, values)
        step(second_params, second, values)
    for p, q in zip(first_params, second_params):
        np.testing.assert_array_equal(as_numpy(p), as_numpy(q))
    for p, q in zip(first_params, second_params):
        for name, value in first.state[p].items():
            assert second.state[q][name]._storage is not value._storage
            np.testing.assert_array_equal(as_numpy(second.state[q][name]), as_numpy(value))
    if kind == "Adafactor":  # the factored moments keep their own shapes
        assert first.state[first_params[0]]["row_var"].shape == (3, 1)
        assert first.state[first_params[0]]["col_var"].shape == (1, 2)
        saved["state"][0]["row_var"] = kg.zeros(3, 2)
        with pytest.raises(ValueError, match=r"'row_var'.*must have shape \(3, 1\)"):
            second.load_state_dict(saved)


class _Trainer(Trainer):
    """Trainer's step on one linear layer (a matrix and a vector: both of Adafactor's
    paths), which keeps the kernels kg.compile generates for the step few."""

    def __init__(self, device, make_optimizer):
        kg.manual_seed(0)
        self.model = kg.nn.Sequential(kg.nn.Linear(4, 3)).to(device)
        self.optimizer = make_optimizer(self.model.parameters())
        self.python_runs = 0


COMPILED = {
    "Adafactor": lambda params: kg.optim.Adafactor(params, lr=0.05, weight_decay=0.1),
    # Muon takes the matrix only (the bias keeps its value in both runs)
    "Muon": lambda params: kg.optim.Muon([p for p in params if p.ndim == 2], lr=0.05),
}


@pytest.mark.parametrize("kind", list(COMPILED))
def test_compiled_steps_under_a_schedule_equal_eager_steps(kind, device, simulated):
    """The whole step is recorded: replays advance Adafactor's count and read the
    learning rate a cosine schedule changes on every call without tracing again."""
    if simulated and kind == "Muon":
        pytest.skip("the simulated pass compiles one of the two (time)")
    calls = 3 if simulated else 5
    eager, compiled = _Trainer(device, COMPILED[kind]), _Trainer(device, COMPILED[kind])
    schedules = [
        kg.optim.lr_scheduler.CosineAnnealingLR(t.optimizer, T_max=8) for t in (eager, compiled)
    ]
    step = kg.compile(compiled.step)
    x, y = _batch(device)
    for _ in range(calls):
        assert step(x, y).item() == pytest.approx(eager.step(x, y).item(), rel=1e-5)
        if kind == "Muon":
            # the replay's matmuls round differently from the eager ones, which the
            # Newton-Schulz polynomial amplifies; a wrong rate would be far off (the
            # schedule changes it by percents per call)
            for got, expected in zip(compiled.params(), eager.params()):
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        else:
            _assert_same(compiled, eager)
        for schedule in schedules:
            schedule.step()
    assert compiled.python_runs == 2  # eager, traced, then replays at new rates
    assert len(step.plans) == 1
    for p, q in zip(compiled.model.parameters(), eager.model.parameters()):
        for name, value in eager.optimizer.state.get(q, {}).items():
            np.testing.assert_allclose(
                as_numpy(compiled.optimizer.state[p][name]), as_numpy(value),
                rtol=1e-5, atol=1e-6, err_msg=name,
            )  # fmt: skip
