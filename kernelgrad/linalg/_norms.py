"""``torch.linalg``'s norms, composed from reductions (so their gradients come from the
composition); the nuclear and spectral matrix norms from ``svdvals``.

>>> import kernelgrad as kg
>>> kg.linalg.norm(kg.tensor([[3.0, 4.0], [0.0, 0.0]]), dim=1).tolist()
[5.0, 0.0]
>>> kg.linalg.matrix_norm(kg.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1).item()
6.0
"""

from __future__ import annotations

import math
from typing import Any

from .. import autograd
from ..errors import ArgumentError, UnsupportedError
from ..ops.elementwise import where
from ..ops.reduce import _every_dim_if_empty
from ..shapes import normalize_dim
from ..tensor import Tensor

__all__ = ["matrix_norm", "norm", "vector_norm"]


def _dims(x: Tensor, dim: Any, name: str) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(x.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(normalize_dim(d, x.ndim, name) for d in dims)


def vector_norm(
    x: Tensor, ord: float = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The ``ord``-norm of ``x`` seen as a vector over ``dim`` (all dims when None):
    ``ord`` is 2, 1, inf, -inf, 0 (the count of non-zeros) or any other positive number.

    >>> import kernelgrad as kg
    >>> kg.linalg.vector_norm(kg.tensor([3.0, -4.0]), ord=float("inf")).item()
    4.0
    """
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_floating_point:
        raise UnsupportedError(
            f"vector_norm: needs a floating point tensor, got {x.dtype}; convert with .float()"
        )
    dims = _dims(x, _every_dim_if_empty(dim), "vector_norm")  # (dim=[]: every dim)
    magnitude = x.abs()
    if ord == math.inf:
        return magnitude.amax(dims, keepdim=keepdim)
    if ord == -math.inf:
        return magnitude.amin(dims, keepdim=keepdim)
    if ord == 0:
        return (magnitude != 0).to(x.dtype).sum(dims, keepdim=keepdim)
    if ord == 2:
        return _root((x * x).sum(dims, keepdim=keepdim), 0.5)
    if ord == 1:
        return magnitude.sum(dims, keepdim=keepdim)
    if not isinstance(ord, (int, float)) or isinstance(ord, bool) or ord < 0:
        raise ArgumentError(f"vector_norm: ord must be a positive number, 0 or +-inf, got {ord!r}")
    return _root((magnitude**ord).sum(dims, keepdim=keepdim), 1.0 / ord)


def _root(total: Tensor, power: float) -> Tensor:
    """``total ** power`` (``sqrt`` for 1/2) with PyTorch's gradient at a zero norm: 0,
    not NaN. The root's derivative is infinite at 0 (and the sum's is 0 there); both
    ``where``s route no gradient through the root where the total is 0. Without a
    gradient to take (``clip_grad_norm_``'s norms, say) the root alone runs."""

    def root(t: Tensor) -> Tensor:
        return t.sqrt() if power == 0.5 else t**power

    if not autograd.needs_grad(total):
        return root(total)
    zero = total == 0
    return where(zero, 0.0, root(where(zero, 1.0, total)))


def matrix_norm(
    x: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1), keepdim: bool = False
) -> Tensor:
    """The matrix norm over the two dims ``dim``: ``"fro"`` (Frobenius), ``"nuc"`` (the sum
    of the singular values), 2 / -2 (the largest / smallest singular value), 1 / -1
    (largest / smallest column sum of magnitudes), inf / -inf (largest / smallest row sum).

    >>> import kernelgrad as kg
    >>> kg.linalg.matrix_norm(kg.ones(2, 3)).item() ** 2
    6.0...
    """
    if x.ndim < 2:
        raise ArgumentError(f"matrix_norm: needs at least 2 dims, got shape {tuple(x.shape)}")
    rows, cols = _dims(x, dim, "matrix_norm") if dim is not None else (x.ndim - 2, x.ndim - 1)
    if rows == cols:
        raise ArgumentError(f"matrix_norm: dim must name two different dims, got {dim}")
    if ord == "fro":
        return vector_norm(x, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        from ._decompositions import svdvals

        values = svdvals(x.movedim((rows, cols), (-2, -1)))
        result = (
            values.sum(-1) if ord == "nuc" else values.amax(-1) if ord == 2 else values.amin(-1)
        )
        if keepdim:
            for d in sorted((rows, cols)):
                result = result.unsqueeze(d)
        return result
    if ord in (1, -1):
        summed, over = rows, cols  # sum down each column, then the largest/smallest column
    elif ord in (math.inf, -math.inf):
        summed, over = cols, rows
    else:
        raise ArgumentError(
            f"matrix_norm: ord must be 'fro', 'nuc', 2, -2, 1, -1, inf or -inf, got {ord!r}"
        )
    sums = x.abs().sum(summed, keepdim=True)
    pick = sums.amax if ord > 0 else sums.amin
    result = pick(over, keepdim=True)
    return result if keepdim else result.squeeze((rows, cols))


def norm(x: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False) -> Tensor:
    """PyTorch's ``torch.linalg.norm``: a vector norm over one dim (or, with ``ord=None``,
    over all of them), a matrix norm over two.

    >>> import kernelgrad as kg
    >>> round(kg.linalg.norm(kg.ones(2, 2)).item(), 4)
    2.0
    """
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(x, 2 if ord is None else ord, dims, keepdim)
        if len(dims) == 2:
            return matrix_norm(x, "fro" if ord is None else ord, dims, keepdim)
        raise ArgumentError(f"norm: dim must name 1 or 2 dims, got {dim}")
    if ord is None:
        return vector_norm(x, 2, None, keepdim)
    if x.ndim == 1:
        return vector_norm(x, ord, None, keepdim)
    if x.ndim == 2:
        return matrix_norm(x, ord, (0, 1), keepdim)
    raise ArgumentError(
        f"norm: with ord={ord!r} and no dim the input must be 1-D or 2-D, got {x.ndim} dims; "
        "pass dim"
    )
