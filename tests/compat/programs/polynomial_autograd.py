"""Learning PyTorch with Examples, "PyTorch: Tensors and autograd": fit sin(x) with a
third-order polynomial whose four coefficients are tensors that require grad, updated by
hand under torch.no_grad()."""

import math

import torch

REQUIRES = ()


def make_models():
    return {}


def make_data(rng):
    return None


def train(models, data, steps):
    dtype = torch.float
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_default_device(device) if hasattr(torch, "set_default_device") else None

    x = torch.linspace(-math.pi, math.pi, 2000, dtype=dtype)
    y = torch.sin(x)

    a = torch.full((), 0.1, dtype=dtype, requires_grad=True)
    b = torch.full((), -0.2, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.05, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, dtype=dtype, requires_grad=True)

    learning_rate = 1e-6
    losses = []
    for t in range(steps):
        y_pred = a + b * x + c * x**2 + d * x**3
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    return losses


def check(losses):
    assert losses[-1] < losses[0]
