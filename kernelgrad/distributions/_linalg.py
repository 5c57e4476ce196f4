"""The matrix routines MultivariateNormal and the positive-definite constraints use,
from ``kg.linalg`` (LAPACK's factorisation, torch's gradients).

``cholesky_pivots`` keeps the interface the constraints use: the factor and, per
matrix, a number that is positive exactly when the factorisation succeeded.
"""

from __future__ import annotations

import kernelgrad as kg

from ..tensor import Tensor


def cholesky_pivots(matrix: Tensor) -> tuple[Tensor, Tensor]:
    """The lower Cholesky factor of a batch of symmetric matrices, and per matrix 1 where
    it is positive-definite, -1 where it is not (the factor is then undefined there)."""
    factor, info = kg.linalg.cholesky_ex((matrix + matrix.mT) / 2)
    return factor, 1 - 2 * (info != 0).to(matrix.dtype)


def cholesky(matrix: Tensor, what: str = "linalg.cholesky") -> Tensor:
    """The lower Cholesky factor of the symmetrised matrix (its gradient is symmetric, as
    PyTorch's); a matrix that is not positive-definite raises ``kg.linalg.LinAlgError``,
    as PyTorch's ``linalg.cholesky`` does."""
    return kg.linalg.cholesky((matrix + matrix.mT) / 2)


def solve_lower(lower: Tensor, rhs: Tensor) -> Tensor:
    """``X`` with ``lower @ X = rhs`` for lower-triangular ``lower`` (..., n, n) and
    ``rhs`` (..., n, k), leading dimensions broadcast."""
    return kg.linalg.solve_triangular(lower, rhs, upper=False)


def solve_lower_vector(lower: Tensor, vector: Tensor) -> Tensor:
    """``x`` with ``lower @ x = vector`` (..., n), leading dimensions broadcast."""
    return solve_lower(lower, vector.unsqueeze(-1)).squeeze(-1)
