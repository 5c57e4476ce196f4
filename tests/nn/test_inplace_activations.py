"""``inplace=True`` of the activations and dropouts (functions and modules): the result is
written into the input, which is returned, with PyTorch's autograd rules (a leaf that
requires grad is refused, an intermediate is rebased, a tensor saved for backward that
the write changed is caught). Values against NumPy, gradients against central
differences, and both against PyTorch where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from tests.helpers import as_numpy, assert_close, check_grad

# away from every function's kinks, so that central differences are exact enough
VALUES = np.array([[-4.0, -2.2, -0.7, -0.2], [0.3, 0.8, 1.9, 3.7]])

ALPHA, SCALE = 1.6732632423543772, 1.0507009873554805


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


# name -> (call with the inplace flag, NumPy reference, the nn module that writes in place)
CASES = {
    "relu": (lambda f, x, i: f.relu(x, inplace=i), lambda x: np.maximum(x, 0), "ReLU()"),
    "elu": (
        lambda f, x, i: f.elu(x, 0.7, inplace=i),
        lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)),
        "ELU(0.7)",
    ),
    "selu": (
        lambda f, x, i: f.selu(x, inplace=i),
        lambda x: SCALE * np.where(x > 0, x, ALPHA * np.expm1(x)),
        "SELU()",
    ),
    "celu": (
        lambda f, x, i: f.celu(x, 2.0, inplace=i),
        lambda x: np.where(x > 0, x, 2.0 * np.expm1(x / 2.0)),
        "CELU(2.0)",
    ),
    "hardtanh": (
        lambda f, x, i: f.hardtanh(x, -1.5, 2.5, inplace=i),
        lambda x: np.clip(x, -1.5, 2.5),
        "Hardtanh(-1.5, 2.5)",
    ),
    "relu6": (lambda f, x, i: f.relu6(x, inplace=i), lambda x: np.clip(x, 0, 6), "ReLU6()"),
    "threshold": (
        lambda f, x, i: f.threshold(x, 0.5, -3.0, inplace=i),
        lambda x: np.where(x > 0.5, x, -3.0),
        "Threshold(0.5, -3.0)",
    ),
    "leaky_relu": (
        lambda f, x, i: f.leaky_relu(x, 0.2, inplace=i),
        lambda x: np.where(x > 0, x, 0.2 * x),
        "LeakyReLU(0.2)",
    ),
    "silu": (lambda f, x, i: f.silu(x, inplace=i), lambda x: x * _sigmoid(x), "SiLU()"),
    "hardswish": (
        lambda f, x, i: f.hardswish(x, inplace=i),
        lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
        "Hardswish()",
    ),
    "hardsigmoid": (
        lambda f, x, i: f.hardsigmoid(x, inplace=i),
        lambda x: np.clip(x / 6 + 0.5, 0, 1),
        "Hardsigmoid()",
    ),
    "mish": (
        lambda f, x, i: f.mish(x, inplace=i),
        lambda x: x * np.tanh(_softplus(x)),
        "Mish()",
    ),
    "rrelu_eval": (
        lambda f, x, i: f.rrelu(x, 0.1, 0.3, training=False, inplace=i),
        lambda x: np.where(x >= 0, x, 0.2 * x),
        "RReLU(0.1, 0.3)",
    ),
}


def _module(nn, spec: str, inplace: bool):
    """``nn.ELU(0.7)`` with ``inplace`` added to its arguments."""
    name, args = spec.split("(", 1)
    args = args.rstrip(")")
    return eval(f"nn.{name}({args}{', ' if args else ''}inplace={inplace})", {"nn": nn})


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_writes_the_result_into_the_input_and_returns_it(name, device):
    call, reference, _ = CASES[name]
    x = kg.tensor(VALUES, device=device)
    out = call(F, x, True)
    assert out is x
    assert_close(x, reference(VALUES), rtol=1e-5, atol=1e-6)
    # out of place leaves the input alone
    y = kg.tensor(VALUES, device=device)
    assert_close(call(F, y, False), reference(VALUES), rtol=1e-5, atol=1e-6)
    assert_close(y, VALUES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_on_an_intermediate_has_the_out_of_place_gradient(name, device):
    call, _, _ = CASES[name]
    # a * 1.0 is an intermediate: the in-place write is recorded and rebased onto it
    check_grad(lambda a: call(F, a * 1.0, True), VALUES, device=device)


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_modules_write_into_their_input(name, device):
    _, reference, spec = CASES[name]
    module = _module(kg.nn, spec, True).eval()  # RReLU: the mean slope
    assert module.inplace is True
    x = kg.tensor(VALUES, device=device)
    assert module(x) is x
    assert_close(x, reference(VALUES), rtol=1e-5, atol=1e-6)
    y = kg.tensor(VALUES, device=device)
    assert _module(kg.nn, spec, False).eval()(y) is not y
    assert_close(y, VALUES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_on_a_leaf_that_requires_grad_is_refused_and_leaves_it_unchanged(name):
    call, reference, _ = CASES[name]
    leaf = kg.tensor(VALUES, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        call(F, leaf, True)
    assert_close(leaf.detach(), VALUES)
    with kg.no_grad():  # as PyTorch: allowed when nothing is recorded
        assert call(F, leaf, True) is leaf
    assert_close(leaf.detach(), reference(VALUES), rtol=1e-5, atol=1e-6)


def test_a_tensor_saved_for_backward_and_then_overwritten_is_caught():
    leaf = kg.tensor(VALUES, requires_grad=True)
    y = leaf * 2.0
    z = y * y  # saves y
    F.elu(y, inplace=True)
    with pytest.raises(RuntimeError, match="modified"):
        z.sum().backward()


def test_inplace_then_out_of_place_use_chains_gradients(device):
    """The rebased tensor keeps feeding later ops: d/dx sum(elu_(2x) * 3)."""
    leaf = kg.tensor(VALUES, device=device, requires_grad=True)
    y = leaf * 2.0
    F.elu(y, inplace=True)
    (y * 3.0).sum().backward()
    expected = 6.0 * np.where(2 * VALUES > 0, 1.0, np.exp(2 * VALUES))
    assert_close(leaf.grad, expected, rtol=1e-5, atol=1e-6)


def test_new_inplace_functions_of_pytorch(device):
    x = kg.tensor(VALUES, device=device)
    assert F.selu_(x) is x
    assert_close(x, SCALE * np.where(VALUES > 0, VALUES, ALPHA * np.expm1(VALUES)), 1e-5, 1e-6)
    x = kg.tensor(VALUES, device=device)
    assert F.celu_(x, 2.0) is x
    assert_close(x, np.where(VALUES > 0, VALUES, 2.0 * np.expm1(VALUES / 2.0)), 1e-5, 1e-6)
    x = kg.tensor(VALUES, device=device)
    assert F.rrelu_(x, 0.1, 0.3) is x
    assert_close(x, np.where(VALUES >= 0, VALUES, 0.2 * VALUES), 1e-5, 1e-6)


def test_rrelu_training_inplace_draws_slopes_in_range_and_backpropagates_them():
    leaf = kg.tensor(VALUES, requires_grad=True)
    work = leaf * 1.0
    assert F.rrelu(work, 0.1, 0.3, training=True, inplace=True) is work
    got = as_numpy(work)
    assert np.array_equal(got[VALUES >= 0], VALUES[VALUES >= 0])
    slopes = got[VALUES < 0] / VALUES[VALUES < 0]
    assert np.all((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6))
    work.sum().backward()
    grad = as_numpy(leaf.grad)
    assert np.allclose(grad[VALUES >= 0], 1.0)
    assert np.allclose(grad[VALUES < 0], slopes, rtol=1e-5)


@pytest.mark.parametrize(
    ("call", "channels"),
    [
        (lambda x, i: F.dropout(x, 0.5, True, inplace=i), False),
        (lambda x, i: F.dropout2d(x, 0.5, True, inplace=i), True),
        (lambda x, i: kg.nn.Dropout(0.5, inplace=i)(x), False),
        (lambda x, i: kg.nn.Dropout2d(0.5, inplace=i)(x), True),
    ],
)
def test_inplace_dropout_writes_its_mask_into_the_input(call, channels, device):
    values = np.arange(1.0, 33.0).reshape(2, 4, 2, 2)
    leaf = kg.tensor(values, device=device, requires_grad=True)
    work = leaf * 1.0
    assert call(work, True) is work
    got = as_numpy(work)
    kept = got != 0
    assert 0 < kept.sum() < kept.size
    assert_close(got[kept], 2.0 * values[kept])
    if channels:  # whole (H, W) planes
        assert np.all(kept.all(axis=(2, 3)) | ~kept.any(axis=(2, 3)))
    work.sum().backward()
    assert_close(leaf.grad, np.where(kept, 2.0, 0.0))
    frozen = kg.tensor(values, device=device)
    assert F.dropout(frozen, 0.5, training=False, inplace=True) is frozen
    assert_close(frozen, values)
    assert call(frozen * 1.0, False) is not None
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        call(leaf, True)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_inplace_values_gradients_and_refusals_match_pytorch(name):
    torch = pytest.importorskip("torch")
    call, _, spec = CASES[name]
    ours = kg.tensor(VALUES, dtype=kg.float32, requires_grad=True)
    theirs = torch.tensor(VALUES, dtype=torch.float32, requires_grad=True)
    ours_work, theirs_work = ours * 1.5, theirs * 1.5
    out = call(F, ours_work, True)
    expected = call(torch.nn.functional, theirs_work, True)
    assert out is ours_work and expected is theirs_work
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), 1e-5, 1e-6)
    (out * out).sum().backward()
    (expected * expected).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), 1e-5, 1e-6)
    with pytest.raises(RuntimeError):
        call(torch.nn.functional, theirs, True)
    with pytest.raises(RuntimeError):
        call(F, ours, True)
    assert repr(_module(kg.nn, spec, True)) == repr(_module(torch.nn, spec, True))
    assert repr(_module(kg.nn, spec, False)) == repr(_module(torch.nn, spec, False))
