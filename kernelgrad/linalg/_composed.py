"""``torch.linalg``'s functions composed from tensor ops and the factorizations of
``_decompositions.py``, so that their gradients come from the composition."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ArgumentError, ShapeError, format_shape
from ..tensor import Tensor
from ._decompositions import inv, inv_ex, solve, svdvals
from ._host import check_matrix, to_device, to_host
from ._norms import matrix_norm


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """``torch.linalg.matmul``: ``kg.matmul``."""
    from ..ops.linalg import matmul as product

    return product(input, other)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` multiplied by itself ``n`` times (``torch.linalg.matrix_power``): the identity
    for 0, powers of ``inv(A)`` for negative ``n``; by repeated squaring.

    >>> import kernelgrad as kg
    >>> kg.linalg.matrix_power(kg.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
    [[1.0, 3.0], [0.0, 1.0]]
    """
    name = "linalg.matrix_power"
    if not isinstance(A, Tensor) or A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        shape = format_shape(A.shape) if isinstance(A, Tensor) else type(A).__name__
        raise ShapeError(f"{name}: A must be batches of square matrices, got {shape}")
    if isinstance(n, bool) or not isinstance(n, int):
        raise ArgumentError(f"{name}: the exponent must be an int, got {n!r}")
    if n == 0:
        from ..ops.creation import eye

        return eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape).contiguous()
    if n < 0:
        A, n = inv(A), -n
    result = None
    power = A
    while n:
        if n & 1:
            result = power if result is None else result @ power
        n >>= 1
        if n:
            power = power @ power
    return result


# Higham (2005), "The scaling and squaring method for the matrix exponential revisited":
# the [13/13] Pade approximant is accurate to double precision for 1-norms up to theta_13.
_PADE13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
_THETA13 = 5.371920351148152


def matrix_exp(A: Tensor) -> Tensor:
    """The matrix exponential of each square matrix (``torch.linalg.matrix_exp``), by
    scaling and squaring with the [13/13] Pade approximant (Higham 2005), each matrix of a
    batch scaled by its own power of two. Composed from ``matmul`` and ``solve``, which
    give its gradient. The 1-norms that choose the scaling are read on the host.

    >>> import kernelgrad as kg
    >>> round(kg.linalg.matrix_exp(kg.tensor([[0.0, 1.0], [0.0, 0.0]]))[0, 1].item(), 6)
    1.0
    """
    check_matrix(A, "linalg.matrix_exp", square=True)
    from ..ops.creation import eye
    from ..ops.elementwise import where

    norms = np.abs(to_host(A)).sum(-2).max(-1) if A.shape[-1] else np.zeros(A.shape[:-2])
    norms = np.nan_to_num(norms, nan=0.0, posinf=0.0)
    with np.errstate(divide="ignore"):
        squarings = np.maximum(0, np.ceil(np.log2(np.maximum(norms, 1e-300) / _THETA13)))
    squarings = squarings.astype(np.int64)
    X = A * to_device((0.5**squarings)[..., None, None], A)
    b = _PADE13
    identity = eye(A.shape[-1], dtype=A.dtype, device=A.device)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    U = X @ (
        X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2)
        + b[7] * X6
        + b[5] * X4
        + b[3] * X2
        + b[1] * identity
    )
    V = (
        X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2)
        + b[6] * X6
        + b[4] * X4
        + b[2] * X2
        + b[0] * identity
    )
    result = solve(V - U, V + U)
    most = int(squarings.max()) if squarings.size else 0
    for step in range(most):
        if np.all(squarings > step):
            result = result @ result
        else:
            still = to_device((squarings > step)[..., None, None], A, _bool())
            result = where(still, result @ result, result)
    return result


def _bool() -> Any:
    from ..dtypes import bool_

    return bool_


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of a chain of matrices in the cheapest order (``torch.linalg.multi_dot``):
    the first may be a 1-D row vector and the last a 1-D column vector.

    >>> import kernelgrad as kg
    >>> kg.linalg.multi_dot([kg.ones(2), kg.ones(2, 3), kg.ones(3)]).item()
    6.0
    """
    name = "linalg.multi_dot"
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ArgumentError(f"{name}(): expected at least 2 tensors but got {len(tensors)}")
    first_vector, last_vector = tensors[0].ndim == 1, tensors[-1].ndim == 1
    if first_vector:
        tensors[0] = tensors[0].unsqueeze(0)
    if last_vector:
        tensors[-1] = tensors[-1].unsqueeze(-1)
    for position, t in enumerate(tensors):
        if t.ndim != 2:
            raise ShapeError(
                f"{name}(): tensor {position} must be 2D (the first and last may be 1D), got "
                f"{t.ndim}D"
            )
    for position in range(len(tensors) - 1):
        if tensors[position].shape[1] != tensors[position + 1].shape[0]:
            raise ShapeError(
                f"{name}(): tensors {position} and {position + 1} with shapes "
                f"{format_shape(tensors[position].shape)} and "
                f"{format_shape(tensors[position + 1].shape)} cannot be multiplied"
            )
    sizes = [t.shape[0] for t in tensors] + [tensors[-1].shape[1]]
    count = len(tensors)
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def chain(i: int, j: int) -> Tensor:
        if i == j:
            return tensors[i]
        return chain(i, split[i][j]) @ chain(split[i][j] + 1, j)

    result = chain(0, count - 1)
    if first_vector:
        result = result.squeeze(0)
    if last_vector:
        result = result.squeeze(-1)
    return result


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (``torch.linalg.cross``; last dim by
    default, unlike the legacy ``kg.cross``)."""
    from ..ops.torch_functions import cross as legacy_cross

    return legacy_cross(input, other, dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of vectors along ``dim``, batched with broadcasting
    (``torch.linalg.vecdot``; real tensors, so no conjugate)."""
    return (x * y).sum(dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.linalg.diagonal``: ``A.diagonal`` with the last two dims by default."""
    return A.diagonal(offset, dim1, dim2)


def vander(x: Tensor, N: int | None = None) -> Tensor:
    """The Vandermonde matrix of the last dim of ``x``: columns ``x^0, x^1, ..., x^(N-1)``
    (``torch.linalg.vander``; ``N`` defaults to ``x.shape[-1]``).

    >>> import kernelgrad as kg
    >>> kg.linalg.vander(kg.tensor([2.0, 3.0])).tolist()
    [[1.0, 2.0], [1.0, 3.0]]
    """
    from ..ops.creation import ones_like
    from ..ops.movement import stack

    if x.ndim < 1:
        raise ShapeError("linalg.vander: x must have at least one dimension, got a 0-d tensor")
    if N is None:
        N = x.shape[-1]
    if N < 1:
        raise ArgumentError(f"linalg.vander: N must be greater than 1, got {N}")
    columns = [ones_like(x)]
    for _ in range(N - 1):
        columns.append(columns[-1] * x)
    return stack(columns, -1)


def cond(A: Tensor, p: Any = None) -> Tensor:
    """The condition number of each matrix in the ``p``-norm (``torch.linalg.cond``): for
    None, 2 and -2 the ratio of the largest and smallest singular values (any shape);
    otherwise ``norm(A) * norm(inv(A))`` for square ``A``, inf for a singular one."""
    check_matrix(A, "linalg.cond")
    if p in (None, 2, -2):
        s = svdvals(A)
        ratio = s[..., 0] / s[..., -1]
        return ratio if p in (None, 2) else 1 / ratio
    check_matrix(A, "linalg.cond", square=True)
    inverse, info = inv_ex(A)
    from ..ops.elementwise import where

    result = matrix_norm(A, p) * matrix_norm(
        where(info.unsqueeze(-1).unsqueeze(-1) > 0, 0.0, inverse), p
    )
    return where(info > 0, math.inf, result)


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of ``A`` seen as a matrix of its first ``ind`` dims by the others
    (``torch.linalg.tensorinv``): ``tensordot(tensorinv(A), A, ind)`` is the identity."""
    if ind <= 0:
        raise ArgumentError(
            f"linalg.tensorinv: Expected a strictly positive integer for 'ind', but got {ind}"
        )
    rows, cols = A.shape[:ind], A.shape[ind:]
    if math.prod(rows) != math.prod(cols):
        raise ShapeError(
            f"linalg.tensorinv: Expected self to satisfy the requirement "
            f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {math.prod(cols)} != "
            f"{math.prod(rows)}"
        )
    return inv(A.reshape(math.prod(rows), math.prod(cols))).reshape(*cols, *rows)


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None) -> Tensor:
    """The ``X`` with ``tensordot(A, X, X.ndim) == B`` (``torch.linalg.tensorsolve``); the
    dims of ``A`` named in ``dims`` are moved to the end first."""
    if dims is not None:
        dims = list(dims)
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    result_shape = A.shape[B.ndim :]
    size = math.prod(result_shape)
    if math.prod(A.shape[: B.ndim]) != size or tuple(A.shape[: B.ndim]) != tuple(B.shape):
        raise ShapeError(
            f"linalg.tensorsolve: Expected self to satisfy the requirement "
            f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), got A of shape "
            f"{format_shape(A.shape)} and B of shape {format_shape(B.shape)}"
        )
    return solve(A.reshape(size, size), B.reshape(size)).reshape(*result_shape)
