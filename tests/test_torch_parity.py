"""The same programs in kernelgrad and PyTorch CPU give the same values and gradients.

Skipped cleanly when PyTorch is not installed (it is never a dependency)."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _both(values: np.ndarray, device: str):
    ours = kg.tensor(values, requires_grad=True, device=device)
    theirs = torch.tensor(values, requires_grad=True)
    return ours, theirs


PROGRAMS = {
    "softmax_matmul": lambda m, x, w: (m.softmax(x @ w, 1) * x[:, :5]).sum(),
    "log_softmax_gather": lambda m, x, w: (
        -(m.log_softmax(x @ w, 1)[m.arange(4), m.tensor([0, 2, 1, 1])]).mean()
    ),
    "activations": lambda m, x, w: (x.tanh() * x.sigmoid() + x.relu() ** 2 - x.exp() / 10).sum(),
    "reductions": lambda m, x, w: x.var(1).sum() + x.amax(0).sum() + x.std() + x.mean(),
    "views": lambda m, x, w: (
        (x.T.reshape(3, 8)[:, ::2] * 2).flip(0).sum() + x.unsqueeze(0).expand(2, 4, 6).sum()
    ),
    "broadcast": lambda m, x, w: ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1).sqrt().sum(),
    "where_clamp": lambda m, x, w: (
        m.where(x > 0, x, x * 0.1).clamp(-0.5, 0.5).sum() + m.maximum(x, x * 0.5).sum()
    ),
    "cat_stack": lambda m, x, w: (m.cat([x, x * 2], 1) @ m.stack([w[:, 0]] * 12, 0)).sum(),
}


class _Kg:
    softmax = staticmethod(lambda t, d: t.softmax(d))
    log_softmax = staticmethod(lambda t, d: t.log_softmax(d))
    arange = staticmethod(lambda n: kg.arange(n, device=_Kg.device))
    tensor = staticmethod(lambda v: kg.tensor(v, device=_Kg.device))
    where = staticmethod(kg.where)
    maximum = staticmethod(kg.maximum)
    cat = staticmethod(kg.cat)
    stack = staticmethod(kg.stack)
    device = "cpu"


class _Torch:
    softmax = staticmethod(lambda t, d: t.softmax(d))
    log_softmax = staticmethod(lambda t, d: t.log_softmax(d))
    arange = staticmethod(torch.arange)
    tensor = staticmethod(torch.tensor)
    where = staticmethod(torch.where)
    maximum = staticmethod(torch.maximum)
    cat = staticmethod(torch.cat)
    stack = staticmethod(torch.stack)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_match_pytorch(name, device):
    rng = np.random.default_rng(0)
    x_values = rng.standard_normal((4, 6)).astype(np.float32)
    w_values = rng.standard_normal((6, 5)).astype(np.float32)
    _Kg.device = device
    kx, tx = _both(x_values, device)
    kw, tw = _both(w_values, device)
    ours = PROGRAMS[name](_Kg, kx, kw)
    theirs = PROGRAMS[name](_Torch, tx, tw)
    assert_close(ours, theirs.detach().numpy(), rtol=1e-5, atol=1e-5)
    ours.backward()
    theirs.backward()
    assert_close(kx.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    if tw.grad is not None:
        assert_close(kw.grad, tw.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_type_promotion_matches_pytorch(device):
    pairs = [
        (np.int32, np.int64),
        (np.int64, np.float32),
        (np.float32, np.float64),
        (np.bool_, np.int32),
        (np.bool_, np.float32),
    ]
    for left, right in pairs:
        a, b = np.ones(2, left), np.ones(2, right)
        ours = (kg.tensor(a, device=device) + kg.tensor(b, device=device)).dtype
        theirs = (torch.from_numpy(a) + torch.from_numpy(b)).dtype
        assert str(theirs) == f"torch.{ours.name}"
    for scalar in (2, 2.5, True):
        ints = kg.tensor([1, 2], dtype=kg.int32, device=device) * scalar
        reference = torch.tensor([1, 2], dtype=torch.int32) * scalar
        assert str(reference.dtype) == f"torch.{ints.dtype.name}"


def test_max_with_dim_matches_pytorch(device):
    values = np.array([[1.0, 5.0, 5.0], [7.0, 2.0, 7.0]], dtype=np.float32)
    ours = kg.tensor(values, device=device).max(1)
    theirs = torch.tensor(values).max(1)
    assert_close(ours.values, theirs.values.numpy())
    assert_close(ours.indices, theirs.indices.numpy())
