"""kg.utils.checkpoint: gradients equal the plain run's (and PyTorch's), dropout inside
draws the same mask when re-run, activations are not kept, both variants' rules."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import UnsupportedError
from kernelgrad.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((3, 4))
W2 = RNG.standard_normal((4, 2))
X = RNG.standard_normal((5, 3))
B = RNG.standard_normal((5, 4))


def _block(lib, x, b, w1, w2, scale, p=0.0):
    """Two layers, a second tensor input, a float argument and (optionally) dropout."""
    h = (x @ w1 + b).tanh() * scale
    if p:
        h = lib.nn.functional.dropout(h, p=p, training=True)
    return (h @ w2).sin(), h.sum(1)


def _grads(lib, reentrant, use_checkpoint, p=0.0, device="cpu", seed=0):
    to = (lambda a: lib.tensor(a, device=device, requires_grad=True)) if lib is kg else None
    if lib is not kg:
        to = lambda a: lib.tensor(a, requires_grad=True)
    x, b, w1, w2 = to(X), to(B), to(W1), to(W2)
    lib.manual_seed(seed)
    if use_checkpoint:
        ckpt = lib.utils.checkpoint.checkpoint if lib is not kg else checkpoint
        y, s = ckpt(_block, lib, x, b, w1, w2, 0.5, p, use_reentrant=reentrant)
    else:
        y, s = _block(lib, x, b, w1, w2, 0.5, p)
    lib.manual_seed(seed + 1)  # the backward's re-run must not use the current state
    (y.square().sum() + (s * s).sum()).backward()
    return [t.grad.detach().cpu().numpy() for t in (x, b, w1, w2)], y.detach().cpu().numpy()


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradients_equal_the_plain_run_with_dropout_inside(reentrant, device):
    plain, y_plain = _grads(kg, reentrant, False, p=0.5, device=device)
    checked, y_checked = _grads(kg, reentrant, True, p=0.5, device=device)
    np.testing.assert_array_equal(y_checked, y_plain)
    for a, b in zip(checked, plain):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.torch
@pytest.mark.parametrize("reentrant", [True, False])
def test_gradients_match_pytorch_checkpoint(reentrant):
    import torch
    import torch.utils.checkpoint

    theirs, y_theirs = _grads(torch, reentrant, True)
    ours, y_ours = _grads(kg, reentrant, True)
    np.testing.assert_allclose(y_ours, y_theirs, rtol=1e-5, atol=1e-6)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reentrant", [True, False])
def test_activations_inside_are_not_kept(reentrant):
    seen = []

    def fn(x, w):
        h = (x @ w).tanh()  # tanh's backward would keep h
        seen.append(weakref.ref(h))
        return (h * h).sum(1)

    x = kg.tensor(X, requires_grad=True)
    w = kg.tensor(W1, requires_grad=True)
    plain = fn(x, w)
    gc.collect()
    assert seen[0]() is not None  # without checkpoint, the graph holds h
    del plain
    y = checkpoint(fn, x, w, use_reentrant=reentrant)
    gc.collect()
    assert seen[1]() is None
    # the node depends on the tensors read, not on what was computed inside
    read = {id(n.variable) for n, _ in y.grad_fn.next_functions if n is not None}
    assert read == {id(x), id(w)}
    y.sum().backward()
    assert x.grad is not None and w.grad is not None


def test_non_reentrant_works_with_autograd_grad_and_keyword_arguments():
    w = kg.tensor(W1, requires_grad=True)
    x = kg.tensor(X, requires_grad=True)

    def fn(x, *, power):
        return ((x @ w) ** power).sum()

    (gw, gx) = kg.autograd.grad(checkpoint(fn, x, power=2, use_reentrant=False), (w, x))
    ew, ex = kg.autograd.grad(fn(x, power=2), (w, x))
    np.testing.assert_allclose(gw.numpy(), ew.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gx.numpy(), ex.numpy(), rtol=1e-6)
    assert w.grad is None and x.grad is None


def test_reentrant_refuses_grad_keywords_and_warns_like_pytorch():
    x = kg.tensor(X, requires_grad=True)
    y = checkpoint(lambda x: (x * x).sum(), x, use_reentrant=True)
    with pytest.raises(RuntimeError, match=r"use_reentrant=True.*incompatible with \.grad"):
        kg.autograd.grad(y, x)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: power"):
        checkpoint(lambda x, power: x, x, power=2, use_reentrant=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        checkpoint(lambda x: x * 2, x.detach(), use_reentrant=True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        checkpoint(lambda x: x * 2, x)


@pytest.mark.torch
def test_the_missing_use_reentrant_warning_is_pytorchs():
    import torch
    import torch.utils.checkpoint

    def message(ckpt, x):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ckpt(lambda x: x * 2, x)
        return [str(w.message) for w in caught if "use_reentrant" in str(w.message)]

    ours = message(checkpoint, kg.ones(2, requires_grad=True))
    theirs = message(torch.utils.checkpoint.checkpoint, torch.ones(2, requires_grad=True))
    assert ours == theirs and len(ours) == 1


def test_a_captured_intermediate_tensor_is_refused_not_silently_dropped():
    w = kg.tensor(W1, requires_grad=True)
    scaled = w * 2  # requires grad, not a leaf, not an argument
    x = kg.tensor(X, requires_grad=True)
    with pytest.raises(UnsupportedError, match="pass that tensor as an argument"):
        checkpoint(lambda x: x @ scaled, x, use_reentrant=False)
    y = checkpoint(lambda x, s: x @ s, x, scaled, use_reentrant=False)  # the fix
    y.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * X.sum(0)[:, None].repeat(4, 1), rtol=1e-6)


def test_a_recomputation_that_differs_raises_checkpoint_error():
    calls = []

    def fn(x):
        calls.append(1)
        return x[: len(calls)] * 2

    y = checkpoint(fn, kg.tensor(X, requires_grad=True), use_reentrant=False)
    with pytest.raises(CheckpointError, match="different metadata"):
        y.sum().backward()


def test_an_argument_changed_in_place_before_backward_raises():
    x = kg.tensor(X, requires_grad=True)
    h = x * 1
    y = checkpoint(lambda h: (h * h).sum(), h, use_reentrant=False)
    with kg.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_sequential_matches_the_plain_sequential(reentrant):
    kg.manual_seed(1)
    model = kg.nn.Sequential(
        kg.nn.Linear(3, 4), kg.nn.Tanh(), kg.nn.Linear(4, 4), kg.nn.ReLU(), kg.nn.Linear(4, 1)
    )
    x = kg.tensor(X, dtype=kg.float32, requires_grad=True)
    model(x).sum().backward()
    expected = [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]
    model.zero_grad()
    x.grad = None
    checkpoint_sequential(model, 2, x, use_reentrant=reentrant).sum().backward()
    got = [p.grad.numpy() for p in model.parameters()] + [x.grad.numpy()]
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_torch_utils_checkpoint_path():
    from kernelgrad.torch_alias import aliased

    with aliased():
        import torch.utils.checkpoint as tc

    assert tc.checkpoint is checkpoint
