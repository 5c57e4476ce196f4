"""PyTorch's top-level linear-algebra names (``torch.inverse``, ``torch.logdet``, the
legacy ``torch.svd`` / ``torch.qr`` / ``torch.cholesky`` / ``torch.triangular_solve``
signatures, ...) over ``kg.linalg``, and the Tensor methods of the same names. Loaded on
first use: ``kernelgrad/__init__.py`` maps the names here, ``tensor.py`` binds the methods
to functions that import this module when called."""

from __future__ import annotations

import math
from collections import namedtuple

from ..tensor import Tensor
from ._composed import matrix_exp, matrix_power, multi_dot
from ._composed import vander as _linalg_vander
from ._decompositions import cholesky as _linalg_cholesky
from ._decompositions import det, inv, pinv, solve_triangular
from ._decompositions import qr as _linalg_qr
from ._decompositions import slogdet as _linalg_slogdet
from ._decompositions import svd as _linalg_svd

Slogdet = namedtuple("slogdet", ["sign", "logabsdet"])
QR = namedtuple("qr", ["Q", "R"])
SVD = namedtuple("svd", ["U", "S", "V"])
TriangularSolve = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def inverse(input: Tensor) -> Tensor:
    """``torch.inverse``: ``kg.linalg.inv``."""
    return inv(input)


def slogdet(input: Tensor) -> Slogdet:
    """``torch.slogdet``: ``(sign, logabsdet)`` as ``kg.linalg.slogdet``."""
    return Slogdet(*_linalg_slogdet(input))


def logdet(input: Tensor) -> Tensor:
    """The log of the determinant (``torch.logdet``): NaN for a negative determinant,
    -inf for a zero one."""
    from ..ops.elementwise import where

    sign, logabsdet = _linalg_slogdet(input)
    return where(sign < 0, math.nan, logabsdet)


def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky`` (deprecated in PyTorch): lower factor, ``upper`` positional."""
    return _linalg_cholesky(input, upper=upper)


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False) -> Tensor:
    """The solution of ``A X = B`` from the Cholesky factor of ``A`` (``torch.cholesky_solve(B,
    L, upper=False)``): two triangular solves."""
    factor = input2
    if upper:
        return solve_triangular(factor, solve_triangular(factor.mT, input, upper=False), upper=True)
    return solve_triangular(factor.mT, solve_triangular(factor, input, upper=False), upper=True)


def cholesky_inverse(input: Tensor, upper: bool = False) -> Tensor:
    """The inverse of ``A`` from its Cholesky factor (``torch.cholesky_inverse``)."""
    from ..ops.creation import eye

    identity = eye(input.shape[-1], dtype=input.dtype, device=input.device)
    return cholesky_solve(identity.expand(*input.shape), input, upper)


def qr(input: Tensor, some: bool = True) -> QR:
    """``torch.qr`` (deprecated in PyTorch): ``some=False`` is ``mode="complete"``."""
    return QR(*_linalg_qr(input, "reduced" if some else "complete"))


def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> SVD:
    """``torch.svd`` (deprecated in PyTorch): ``(U, S, V)`` with ``V``, not ``Vh``, and
    reduced factors unless ``some=False``; with ``compute_uv=False`` ``U`` and ``V`` are
    zero matrices of shapes m x m and n x n."""
    if not compute_uv:
        from ..ops.creation import zeros
        from ._decompositions import svdvals

        m, n = input.shape[-2], input.shape[-1]
        batch = tuple(input.shape[:-2])
        return SVD(
            zeros(batch + (m, m), dtype=input.dtype, device=input.device),
            svdvals(input),
            zeros(batch + (n, n), dtype=input.dtype, device=input.device),
        )
    U, S, Vh = _linalg_svd(input, full_matrices=not some)
    return SVD(U, S, Vh.mT)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: ``kg.linalg.pinv`` with ``rtol=rcond``."""
    return pinv(input, rtol=rcond)


def triangular_solve(
    input: Tensor,
    A: Tensor,
    upper: bool = True,
    transpose: bool = False,
    unitriangular: bool = False,
) -> TriangularSolve:
    """``torch.triangular_solve(b, A)`` (deprecated in PyTorch): ``(solution,
    cloned_coefficient)`` for ``A X = b`` (``A^T X = b`` with ``transpose``)."""
    coefficient = A.mT if transpose else A
    solution = solve_triangular(
        coefficient, input, upper=upper != transpose, unitriangular=unitriangular
    )
    return TriangularSolve(solution, A.clone())


def ger(input: Tensor, vec2: Tensor) -> Tensor:
    """``torch.ger``: the outer product (``kg.outer``)."""
    return input.outer(vec2)


def chain_matmul(*matrices: Tensor) -> Tensor:
    """``torch.chain_matmul``: ``kg.linalg.multi_dot`` of 2-D matrices."""
    if len(matrices) == 1:
        return matrices[0]
    return multi_dot(matrices)


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """``torch.vander``: the Vandermonde matrix of a 1-D ``x``, decreasing powers unless
    ``increasing`` (``kg.linalg.vander`` has increasing ones and batches)."""
    from ..errors import ShapeError

    if x.ndim != 1:
        raise ShapeError(f"vander: x must be a one-dimensional tensor, got {x.ndim} dims")
    if N == 0:
        from ..ops.creation import zeros

        return zeros((x.shape[0], 0), dtype=x.dtype, device=x.device)
    result = _linalg_vander(x, N)
    return result if increasing else result.flip(-1)


# torch's top-level names (kg.<name>); kernelgrad/__init__.py maps them here.
FUNCTIONS = {
    "inverse": inverse,
    "det": det,
    "logdet": logdet,
    "slogdet": slogdet,
    "cholesky": cholesky,
    "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse,
    "qr": qr,
    "svd": svd,
    "pinverse": pinverse,
    "matrix_power": matrix_power,
    "matrix_exp": matrix_exp,
    "triangular_solve": triangular_solve,
    "ger": ger,
    "chain_matmul": chain_matmul,
    "vander": vander,
}
__all__ = sorted(FUNCTIONS)
