"""``kg.autograd.grad`` (PyTorch's ``torch.autograd.grad``): gradients returned, never
added to ``.grad``; several outputs and inputs, intermediate inputs, ``grad_outputs``,
``create_graph`` (a gradient penalty), unused inputs, hooks, errors. Compared with
PyTorch on the CPU; values checked by hand on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import BackwardError
from tests.helpers import as_numpy


def test_gradients_are_returned_and_not_accumulated(device):
    x = kg.tensor([1.0, 2.0, 3.0], requires_grad=True, device=device)
    w = kg.tensor([0.5, -1.0, 2.0], requires_grad=True, device=device)
    y = (x * w).sum() + (x**2).sum()
    gx, gw = kg.autograd.grad(y, (x, w))
    np.testing.assert_allclose(as_numpy(gx), [2.5, 3.0, 8.0])
    np.testing.assert_allclose(as_numpy(gw), [1.0, 2.0, 3.0])
    assert x.grad is None and w.grad is None


def test_create_graph_gives_gradients_that_differentiate_again(device):
    x = kg.tensor([1.0, 2.0], requires_grad=True, device=device)
    (g,) = kg.autograd.grad((x**3).sum(), x, create_graph=True)
    assert g.requires_grad
    (h,) = kg.autograd.grad(g.sum(), x, retain_graph=True)
    np.testing.assert_allclose(as_numpy(h), [6.0, 12.0])
    g.sum().backward()  # also through backward(): into x.grad
    np.testing.assert_allclose(as_numpy(x.grad), [6.0, 12.0])


def test_unused_inputs_raise_or_give_none_or_zeros(device):
    x = kg.tensor([1.0, 2.0], requires_grad=True, device=device)
    z = kg.tensor([5.0], requires_grad=True, device=device)
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="input 1 was not used"):
        kg.autograd.grad(y, (x, z), retain_graph=True)
    _, gz = kg.autograd.grad(y, (x, z), allow_unused=True, retain_graph=True)
    assert gz is None
    _, gz = kg.autograd.grad(y, (x, z), materialize_grads=True)
    np.testing.assert_allclose(as_numpy(gz), [0.0])


def test_errors_name_the_problem(device):
    x = kg.tensor([1.0, 2.0], requires_grad=True, device=device)
    y = x * 3
    with pytest.raises(BackwardError, match="has shape \\(2,\\)"):
        kg.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="input 0 does not require grad"):
        kg.autograd.grad(y.sum(), kg.ones(2, device=device))
    with pytest.raises(RuntimeError, match="freed"):
        out = (x.exp()).sum()
        kg.autograd.grad(out, x)
        kg.autograd.grad(out, x)


def test_an_intermediate_input_stops_the_pass(device):
    """As PyTorch, autograd.grad runs only the nodes between the outputs and the inputs:
    an intermediate input's own history is neither run nor freed."""
    a = kg.tensor([1.0, 2.0], requires_grad=True, device=device)
    h = a.exp()
    (g,) = kg.autograd.grad((h * h).sum(), h)
    np.testing.assert_allclose(as_numpy(g), 2 * np.exp([1.0, 2.0]), rtol=1e-6)
    (h * 3).sum().backward()  # h's exp node is still there
    np.testing.assert_allclose(as_numpy(a.grad), 3 * np.exp([1.0, 2.0]), rtol=1e-6)
    # now the exp node's saved tensor is freed; autograd.grad up to h does not need it
    (g,) = kg.autograd.grad((h * 2).sum(), h)
    np.testing.assert_allclose(as_numpy(g), [2.0, 2.0])


@pytest.mark.torch
def test_matches_pytorch_on_a_pinn_residual_over_steps():
    """A physics-informed network's loop: inputs made once as non-leaf float32 tensors
    from float64 leaves, the residual's derivatives by autograd.grad(create_graph=True)
    with respect to them, and loss.backward() (no retain_graph) every step."""
    import torch

    rng = np.random.default_rng(0)
    points = rng.uniform(-1, 1, (5, 2))
    w1 = rng.standard_normal((8, 2)).astype(np.float32)
    w2 = rng.standard_normal((1, 8)).astype(np.float32)
    results = {}
    for lib in (torch, kg):
        x = lib.tensor(points[:, 0:1], requires_grad=True).float()
        t = lib.tensor(points[:, 1:2], requires_grad=True).float()
        weights = [lib.tensor(w1, requires_grad=True), lib.tensor(w2, requires_grad=True)]
        found = []
        for _ in range(2):
            u = (lib.cat([x, t], dim=1) @ weights[0].T).tanh() @ weights[1].T
            ones = lib.ones_like(u)
            u_t = lib.autograd.grad(u, t, grad_outputs=ones, retain_graph=True, create_graph=True)[
                0
            ]
            u_x = lib.autograd.grad(u, x, grad_outputs=ones, retain_graph=True, create_graph=True)[
                0
            ]
            u_xx = lib.autograd.grad(u_x, x, grad_outputs=ones, create_graph=True)[0]
            loss = ((u_t + u * u_x - 0.01 * u_xx) ** 2).mean()
            loss.backward()
            found += [loss.item(), *(w.grad.detach().numpy().copy() for w in weights)]
        results[lib.__name__] = found
    for got, expected in zip(results["kernelgrad"], results["torch"]):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.torch
def test_matches_pytorch_on_a_gradient_penalty_and_intermediate_inputs():
    import torch

    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 3)).astype(np.float32)
    weight = rng.standard_normal((2, 3)).astype(np.float32)
    seed = rng.standard_normal((4, 2)).astype(np.float32)
    results = {}
    for lib in (torch, kg):
        x = lib.tensor(data, requires_grad=True)
        w = lib.tensor(weight, requires_grad=True)
        hidden = (x @ w.T).tanh()
        hidden.register_hook(lambda g: g * 2)  # hooks run in autograd.grad too
        out = hidden * hidden
        g_out = lib.tensor(seed)
        # two outputs, an intermediate input and two leaves
        gh, gx, gw = lib.autograd.grad(
            (out, out.sum()), (hidden, x, w), grad_outputs=(g_out, None), create_graph=True
        )
        penalty = ((gx**2).sum(1).sqrt() - 1.0).pow(2).mean()  # WGAN-GP's
        (gpw,) = lib.autograd.grad(penalty, w)
        results[lib.__name__] = [
            t.detach().numpy() if lib is torch else as_numpy(t.detach()) for t in (gh, gx, gw, gpw)
        ]
        assert x.grad is None and w.grad is None
    for got, expected in zip(results["kernelgrad"], results["torch"]):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_the_gradient_of_a_contiguous_input_is_contiguous(device):
    """The backward pass may leave a gradient in its own layout (conv2d's is batch
    innermost, a padded buffer's interior is a strided view); autograd.grad returns a
    contiguous input's gradient contiguous, as PyTorch does, so that WGAN-GP's
    ``gradients.view(gradients.size(0), -1)`` works, with or without a graph."""
    x = kg.randn(2, 3, 5, 5, device=device, requires_grad=True)
    w = kg.randn(4, 3, 3, 3, device=device, requires_grad=True)
    for create_graph in (False, True):
        conv = kg.nn.functional.conv2d(x, w, padding=1)
        for out in (conv, kg.nn.functional.pad(x, (1, 1, 2, 0)) * 2):
            (g,) = kg.autograd.grad(out.sum(), x, create_graph=create_graph)
            assert g.is_contiguous() and g.view(2, -1).shape == (2, 75)
            assert g.requires_grad == (create_graph and out is conv)
