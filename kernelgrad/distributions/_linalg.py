"""The few matrix routines MultivariateNormal needs, written in differentiable Tensor ops
(kg.linalg has no factorisations): a Cholesky factorisation and a lower-triangular
solve, one column or row at a time, each step batched over every leading dimension.

A ``n``-by-``n`` matrix costs ``n`` steps of a handful of tensor operations, which suits
the event sizes distributions use (a few to a few hundred); gradients flow through the
steps as through any other Tensor ops.
"""

from __future__ import annotations

import kernelgrad as kg

from ..errors import ArgumentError
from ..tensor import Tensor


def cholesky_pivots(matrix: Tensor) -> tuple[Tensor, Tensor]:
    """The lower Cholesky factor of a batch of symmetric matrices, and each matrix's
    smallest pivot (the factor is NaN where that pivot is not positive).

    The matrix is symmetrised first, ``(A + A.mT) / 2``, so its gradient is symmetric,
    as PyTorch's ``linalg.cholesky`` gives it."""
    n = matrix.shape[-1]
    a = (matrix + matrix.mT) / 2
    rows = kg.arange(n, device=matrix.device)
    columns: list[Tensor] = []
    pivots: list[Tensor] = []
    for j in range(n):
        column = a[..., :, j]
        if columns:
            done = kg.stack(columns, -1)  # (..., n, j)
            column = column - (done * done[..., j : j + 1, :]).sum(-1)
        pivot = column[..., j]
        pivots.append(pivot)
        diagonal = pivot.clamp(min=0).sqrt()
        below = column / diagonal.unsqueeze(-1)
        column = kg.where(rows == j, diagonal.unsqueeze(-1), below)
        columns.append(kg.where(rows >= j, column, kg.zeros_like(column)))
    factor = kg.stack(columns, -1)
    return factor, kg.stack(pivots, -1).amin(-1)


def cholesky(matrix: Tensor, what: str = "linalg.cholesky") -> Tensor:
    """The lower Cholesky factor; a matrix that is not positive-definite raises (as
    PyTorch's ``linalg.cholesky`` does) rather than giving NaNs."""
    if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ArgumentError(
            f"{what}: expected a batch of square matrices, got shape {tuple(matrix.shape)}"
        )
    factor, smallest = cholesky_pivots(matrix)
    if not (smallest > 0).all().item():
        raise ArgumentError(
            f"{what}: the factorization could not be completed because the input is not "
            "positive-definite; pass a symmetric positive-definite matrix (add a small "
            "multiple of the identity to a nearly singular one)"
        )
    return factor


def solve_lower(lower: Tensor, rhs: Tensor) -> Tensor:
    """``X`` with ``lower @ X = rhs`` for lower-triangular ``lower`` (..., n, n) and
    ``rhs`` (..., n, k), leading dimensions broadcast (forward substitution)."""
    n = lower.shape[-1]
    batch = tuple(kg.broadcast_shapes(tuple(lower.shape[:-2]), tuple(rhs.shape[:-2])))
    lower = lower.expand(batch + (n, n))
    rhs = rhs.expand(batch + tuple(rhs.shape[-2:]))
    rows: list[Tensor] = []
    for i in range(n):
        row = rhs[..., i : i + 1, :]
        if rows:
            row = row - kg.matmul(lower[..., i : i + 1, :i], kg.cat(rows, -2))
        rows.append(row / lower[..., i : i + 1, i : i + 1])
    return kg.cat(rows, -2)


def solve_lower_vector(lower: Tensor, vector: Tensor) -> Tensor:
    """``x`` with ``lower @ x = vector`` (..., n), leading dimensions broadcast."""
    return solve_lower(lower, vector.unsqueeze(-1)).squeeze(-1)
