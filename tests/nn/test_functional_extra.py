"""The activations, losses, padding modes, normalize, channel dropout and gradient
clipping that PyTorch programs use: forward values against NumPy formulas, gradients
against central differences, and both against PyTorch where it is installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, ShapeError
from tests.helpers import assert_close, check_grad

# Values away from each function's kinks (0, +-lambd, +-3, the clamp bounds), so that
# central differences are exact enough.
VALUES = np.array([[-4.0, -2.2, -0.7, -0.2], [0.3, 0.8, 1.9, 3.7]])


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


ALPHA, SCALE = 1.6732632423543772, 1.0507009873554805
# name -> (kernelgrad call, NumPy reference, PyTorch call)
ACTIVATIONS = {
    "elu": (lambda x: F.elu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    "selu": (F.selu, lambda x: SCALE * np.where(x > 0, x, ALPHA * np.expm1(x))),
    "celu": (lambda x: F.celu(x, 2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(x / 2.0))),
    "hardtanh": (lambda x: F.hardtanh(x, -1.5, 2.5), lambda x: np.clip(x, -1.5, 2.5)),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6)),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    "logsigmoid": (F.logsigmoid, lambda x: np.log(_sigmoid(x))),
    "mish": (F.mish, lambda x: x * np.tanh(_softplus(x))),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "threshold": (lambda x: F.threshold(x, 0.5, -3.0), lambda x: np.where(x > 0.5, x, -3.0)),
    "hardshrink": (F.hardshrink, lambda x: np.where(np.abs(x) > 0.5, x, 0)),
    "softshrink": (F.softshrink, lambda x: np.sign(x) * np.maximum(np.abs(x) - 0.5, 0)),
    "softmin": (
        lambda x: F.softmin(x, 1),
        lambda x: np.exp(-x) / np.exp(-x).sum(1, keepdims=True),
    ),
    "glu": (F.glu, lambda x: x[:, :2] * _sigmoid(x[:, 2:])),
    "rrelu_eval": (F.rrelu, lambda x: np.where(x >= 0, x, x * (1 / 8 + 1 / 3) / 2)),
    "prelu": (
        lambda x: F.prelu(x, kg.tensor([0.1, 0.2, 0.3, 0.4], dtype=x.dtype, device=x.device)),
        lambda x: np.where(x > 0, x, x * np.array([0.1, 0.2, 0.3, 0.4])),
    ),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_match_numpy_values_and_central_differences(name, device):
    function, reference = ACTIVATIONS[name]
    x = kg.tensor(VALUES, dtype=kg.float32, device=device)
    assert_close(function(x), reference(VALUES), rtol=1e-5, atol=1e-6)
    check_grad(function, VALUES, device=device)


def test_activations_survive_extreme_inputs(device):
    """The branch `where` does not pick gets a clamped input: no inf * 0 = NaN gradient."""
    x = kg.tensor([-1000.0, 1000.0], device=device, requires_grad=True)
    for function in (F.elu, F.selu, F.celu, F.mish, F.logsigmoid, F.softsign):
        x.grad = None
        function(x).sum().backward()
        assert np.all(np.isfinite(x.grad.cpu().numpy())), function.__name__


@pytest.mark.torch
def test_activations_and_modules_match_pytorch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    calls = {
        "elu": lambda f, x: f.elu(x, 0.7),
        "selu": lambda f, x: f.selu(x),
        "celu": lambda f, x: f.celu(x, 2.0),
        "hardtanh": lambda f, x: f.hardtanh(x, -1.5, 2.5),
        "relu6": lambda f, x: f.relu6(x),
        "hardsigmoid": lambda f, x: f.hardsigmoid(x),
        "hardswish": lambda f, x: f.hardswish(x),
        "logsigmoid": lambda f, x: f.logsigmoid(x),
        "mish": lambda f, x: f.mish(x),
        "softsign": lambda f, x: f.softsign(x),
        "tanhshrink": lambda f, x: f.tanhshrink(x),
        "threshold": lambda f, x: f.threshold(x, 0.5, -3.0),
        "hardshrink": lambda f, x: f.hardshrink(x),
        "softshrink": lambda f, x: f.softshrink(x),
        "softmin": lambda f, x: f.softmin(x, 1),
        "glu": lambda f, x: f.glu(x),
        "rrelu_eval": lambda f, x: f.rrelu(x, training=False),
    }
    for name, call in calls.items():
        ours = kg.tensor(VALUES, dtype=kg.float32, requires_grad=True)
        theirs = torch.tensor(VALUES, dtype=torch.float32, requires_grad=True)
        out, expected = call(F, ours), call(tf, theirs)
        np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), 1e-5, 1e-6)
        (out * out).sum().backward()
        (expected * expected).sum().backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), 1e-5, 1e-6, name)
    modules = ["ELU", "SELU", "CELU", "Hardtanh", "ReLU6", "Hardsigmoid", "Hardswish"]
    modules += ["LogSigmoid", "Mish", "Softsign", "Tanhshrink", "Hardshrink", "Softshrink"]
    modules += ["GLU", "PReLU"]
    for name in modules:
        module, expected_module = getattr(kg.nn, name)(), getattr(torch.nn, name)()
        out = module(kg.tensor(VALUES, dtype=kg.float32)).numpy()
        expected = expected_module(torch.tensor(VALUES, dtype=torch.float32)).detach().numpy()
        np.testing.assert_allclose(out, expected, 1e-5, 1e-6, name)
    assert list(kg.nn.PReLU(3).state_dict()) == list(torch.nn.PReLU(3).state_dict())


def _smooth_l1(d, beta):
    d = np.abs(d)
    return np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)


@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1_and_huber_losses(beta, device):
    target = np.zeros_like(VALUES)
    x = kg.tensor(VALUES, device=device)
    t = kg.tensor(target, device=device)
    expected = _smooth_l1(VALUES, beta) if beta else np.abs(VALUES)
    assert_close(F.smooth_l1_loss(x, t, reduction="none", beta=beta), expected)
    assert F.smooth_l1_loss(x, t, beta=beta).item() == pytest.approx(expected.mean(), 1e-6)
    check_grad(lambda a: F.smooth_l1_loss(a, t, reduction="sum", beta=beta), VALUES, device=device)
    if beta:
        huber = F.huber_loss(x, t, reduction="sum", delta=beta)
        assert huber.item() == pytest.approx((_smooth_l1(VALUES, beta) * beta).sum(), 1e-6)
        assert kg.nn.HuberLoss(delta=beta)(x, t).item() == pytest.approx(
            (_smooth_l1(VALUES, beta) * beta).mean(), 1e-6
        )
    assert kg.nn.SmoothL1Loss(beta=beta)(x, t).item() == pytest.approx(expected.mean(), 1e-6)
    with pytest.raises(ArgumentError, match="smooth_l1_loss: beta must be non-negative"):
        F.smooth_l1_loss(x, t, beta=-1.0)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
def test_pad_modes_match_numpy(mode, device):
    values = np.arange(2 * 3 * 4, dtype=np.float64).reshape(1, 2, 3, 4)
    amounts = (2, 1, 1, 2)  # last dim (2, 1), then dim 2 (1, 2)
    numpy_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode)
    widths = ((0, 0), (0, 0), (1, 2), (2, 1))
    expected = np.pad(values, widths, mode=numpy_mode) if numpy_mode else np.pad(values, widths)
    result = F.pad(kg.tensor(values, device=device), amounts, mode=mode)
    assert_close(result, expected)
    check_grad(lambda a: F.pad(a, amounts, mode=mode), values, device=device)


def test_pad_checks_its_arguments():
    x = kg.ones(1, 1, 3)
    with pytest.raises(ShapeError, match=r"pad: reflect padding \(3, 0\) of dim 2"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(ArgumentError, match="pad: mode must be"):
        F.pad(x, (1, 1), mode="mirror")
    with pytest.raises(ArgumentError, match="pairs"):
        F.pad(x, (1,), mode="replicate")


def test_normalize_matches_numpy(device):
    x = kg.tensor(VALUES, device=device)
    for p, dim in ((2.0, 1), (1.0, 0), (math.inf, 1), (3.0, 1)):
        norm = np.linalg.norm(VALUES, ord=p, axis=dim, keepdims=True)
        assert_close(F.normalize(x, p=p, dim=dim), VALUES / norm)
    check_grad(lambda a: F.normalize(a, dim=1), VALUES, device=device)
    zero = F.normalize(kg.zeros(2, 3, device=device))
    assert_close(zero, np.zeros((2, 3)))  # divided by eps, not by 0


def test_channel_dropout_zeroes_whole_channels(device):
    kg.manual_seed(0)
    x = kg.ones(4, 6, 2, 3, device=device)
    y = kg.nn.Dropout2d(0.5)(x).cpu().numpy()
    per_channel = y.reshape(4, 6, -1)
    assert np.all((per_channel == 0) | (per_channel == 2.0))
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # a channel is all or nothing
    assert 0 < (per_channel[..., 0] == 0).sum() < 24
    assert_close(kg.nn.Dropout1d(0.5).eval()(kg.ones(2, 3, 4)), np.ones((2, 3, 4)))
    with pytest.raises(ShapeError, match="Dropout2d: expected a 4-d"):
        kg.nn.Dropout2d()(kg.ones(2, 3))


def test_clip_grad_norm_and_value(device):
    first = kg.nn.Parameter(kg.zeros(2, device=device))
    second = kg.nn.Parameter(kg.zeros(1, device=device))
    untouched = kg.nn.Parameter(kg.zeros(1, device=device))  # no gradient: skipped
    first.grad = kg.tensor([3.0, 0.0], device=device)
    second.grad = kg.tensor([4.0], device=device)
    total = kg.nn.utils.clip_grad_norm_([first, second, untouched], max_norm=1.0)
    assert total.item() == pytest.approx(5.0)
    assert_close(first.grad, [0.6, 0.0], rtol=1e-5)
    assert_close(second.grad, [0.8], rtol=1e-5)
    assert untouched.grad is None
    # below the limit nothing changes; the infinity norm is the largest magnitude
    total = kg.nn.utils.clip_grad_norm_([first, second], max_norm=10.0, norm_type=math.inf)
    assert total.item() == pytest.approx(0.8, rel=1e-5)
    assert_close(second.grad, [0.8], rtol=1e-5)
    first.grad = kg.tensor([float("nan"), 1.0], device=device)
    with pytest.raises(ArgumentError, match="clip_grad_norm_: the total norm"):
        kg.nn.utils.clip_grad_norm_(first, 1.0, error_if_nonfinite=True)
    first.grad = kg.tensor([-3.0, 0.25], device=device)
    kg.nn.utils.clip_grad_value_([first], 1.0)
    assert_close(first.grad, [-1.0, 0.25])
    assert kg.nn.utils.clip_grad_norm_([untouched], 1.0).item() == 0.0


@pytest.mark.torch
def test_clip_grad_norm_matches_pytorch():
    torch = pytest.importorskip("torch")
    grads = [np.array([[0.5, -2.0], [1.5, 0.1]]), np.array([3.0, -0.7])]
    for norm_type in (2.0, 1.0, math.inf, 3.0):
        ours = [kg.nn.Parameter(kg.zeros(g.shape)) for g in grads]
        theirs = [torch.nn.Parameter(torch.zeros(g.shape)) for g in grads]
        for parameter, g in zip(ours, grads):
            parameter.grad = kg.tensor(g, dtype=kg.float32)
        for parameter, g in zip(theirs, grads):
            parameter.grad = torch.tensor(g, dtype=torch.float32)
        total = kg.nn.utils.clip_grad_norm_(ours, 1.5, norm_type)
        expected = torch.nn.utils.clip_grad_norm_(theirs, 1.5, norm_type)
        assert total.item() == pytest.approx(expected.item(), rel=1e-6)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)
