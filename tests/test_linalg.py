"""kg.linalg norms against NumPy (values) and central differences (gradients)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float64)


@pytest.mark.parametrize("order", [2, 1, 3, 0.5, math.inf, -math.inf, 0])
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
def test_vector_norm_matches_numpy(order, dim):
    x = kg.tensor(A)
    flat_dims = (0, 1) if dim is None else dim
    if isinstance(flat_dims, int):
        expected = np.linalg.norm(A, ord=order, axis=flat_dims)
    else:
        expected = np.linalg.norm(A.reshape(-1), ord=order)
    result = kg.linalg.vector_norm(x, order, dim)
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-12)


@pytest.mark.parametrize("order", ["fro", 1, -1, math.inf, -math.inf])
def test_matrix_norm_matches_numpy(order):
    result = kg.linalg.matrix_norm(kg.tensor(A), order)
    np.testing.assert_allclose(result.item(), np.linalg.norm(A, ord=order), rtol=1e-12)
    batched = kg.linalg.matrix_norm(kg.tensor(np.stack([A, 2 * A])), order, keepdim=True)
    assert batched.shape == (2, 1, 1)
    np.testing.assert_allclose(batched.numpy().ravel()[1], 2 * np.linalg.norm(A, ord=order))


def test_norm_dispatches_like_torch_linalg_norm():
    x = kg.tensor(A)
    np.testing.assert_allclose(kg.linalg.norm(x).item(), np.sqrt((A * A).sum()))
    np.testing.assert_allclose(kg.linalg.norm(x, dim=1).numpy(), np.linalg.norm(A, axis=1))
    np.testing.assert_allclose(kg.linalg.norm(x, 1).item(), np.linalg.norm(A, 1))
    np.testing.assert_allclose(
        kg.linalg.norm(x, math.inf, dim=(1, 0)).item(), np.abs(A).sum(0).max()
    )
    np.testing.assert_allclose(x.norm(dim=0).numpy(), np.linalg.norm(A, axis=0))


def test_norm_gradients_match_central_differences():
    x = kg.tensor(A, requires_grad=True)
    (kg.linalg.vector_norm(x, 3, 1).sum() + kg.linalg.matrix_norm(x, "fro")).backward()
    step = 1e-6
    numeric = np.zeros_like(A)
    for index in np.ndindex(A.shape):
        values = []
        for sign in (1, -1):
            shifted = A.copy()
            shifted[index] += sign * step
            values.append(np.linalg.norm(shifted, 3, axis=1).sum() + np.linalg.norm(shifted))
        numeric[index] = (values[0] - values[1]) / (2 * step)
    np.testing.assert_allclose(x.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_linalg_refuses_what_it_cannot_compute():
    x = kg.tensor(A)
    with pytest.raises(kg.errors.ArgumentError, match="'nuc', 2, -2"):
        kg.linalg.matrix_norm(x, 3)
    with pytest.raises(kg.errors.UnsupportedError, match=r"\.float\(\)"):
        kg.linalg.vector_norm(kg.tensor([1, 2]))
    with pytest.raises(kg.errors.ArgumentError, match="pass dim"):
        kg.linalg.norm(kg.ones(2, 2, 2), 1)
    with pytest.raises(kg.errors.ArgumentError, match="ord"):
        kg.linalg.vector_norm(x, -1)


@pytest.mark.parametrize("order", [2, 3, 1.5])
def test_norm_gradient_at_a_zero_vector_is_zero_as_in_pytorch(order, device):
    """The root's derivative is infinite at 0; PyTorch's gradient there is 0, not NaN
    (a zero row next to non-zero ones, so both cases meet in one reduction)."""
    values = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 1.0]])
    x = kg.tensor(values, device=device, requires_grad=True)
    norms = kg.linalg.vector_norm(x, ord=order, dim=1)
    (norms * kg.tensor([2.0, 1.0], dtype=kg.float64, device=device)).sum().backward()
    grad = x.grad.cpu().numpy()
    np.testing.assert_array_equal(grad[0], 0.0)
    row = values[1]
    norm = (np.abs(row) ** order).sum() ** (1 / order)
    expected = np.sign(row) * np.abs(row) ** (order - 1) / norm ** (order - 1)
    np.testing.assert_allclose(grad[1], expected, rtol=1e-12)
    np.testing.assert_allclose(norms.detach().cpu().numpy(), [0.0, norm], rtol=1e-12)
    torch = pytest.importorskip("torch") if device == "cpu" else None
    if torch is not None:
        theirs = torch.tensor(values, requires_grad=True)
        (
            torch.linalg.vector_norm(theirs, ord=order, dim=1) * torch.tensor([2.0, 1.0])
        ).sum().backward()
        np.testing.assert_allclose(grad, theirs.grad.numpy(), rtol=1e-12, atol=0)
