"""Distances between vectors: ``pairwise_distance``, ``cosine_similarity`` and ``pdist``,
composed from tensor ops (autograd comes with them)."""

from __future__ import annotations

import math

from ...errors import ArgumentError, ShapeError, format_shape
from ...linalg import vector_norm
from ...ops.elementwise import where
from ...tensor import Tensor


def _norm_without_nan_at_zero(difference: Tensor, p: float, dim: int, keepdim: bool) -> Tensor:
    """``vector_norm(difference, p, dim)`` whose gradient is 0 (not NaN) where the whole
    vector is zero, as PyTorch's norm gradient is."""
    if p in (0, math.inf, -math.inf):
        return vector_norm(difference, p, dim, keepdim)
    zero = (difference == 0).all(dim, keepdim=True)
    safe = where(zero, 1.0, difference)
    norm = vector_norm(safe, p, dim, keepdim=True)
    norm = where(zero, 0.0, norm)
    return norm if keepdim else norm.squeeze(dim)


def _check_p(p: float, op: str) -> None:
    if p < 0:
        raise ArgumentError(f"{op}: p must be non-negative, got {p}")


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """The p-norm of ``x1 - x2 + eps`` over the last dimension (the operands broadcast).

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> F.pairwise_distance(kg.tensor([[3.0, 0.0]]), kg.tensor([[0.0, 4.0]]), eps=0.0).tolist()
    [5.0]
    """
    _check_p(p, "pairwise_distance")
    ndim = max(x1.ndim, x2.ndim)
    if ndim == 0:
        raise ShapeError("pairwise_distance: the inputs need at least one dimension")
    return _norm_without_nan_at_zero(x1 - x2 + eps, p, ndim - 1, keepdim)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 * x2) / (max(|x1|, eps) * max(|x2|, eps))`` along ``dim`` (the operands
    broadcast). As in PyTorch, each operand is divided by its clamped norm first, and the
    clamp is invisible to the gradient.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> F.cosine_similarity(kg.tensor([[1.0, 0.0]]), kg.tensor([[2.0, 2.0]])).tolist()[0]
    0.7071067690849304
    """
    ndim = max(x1.ndim, x2.ndim)
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ShapeError(
            f"cosine_similarity: dim {dim} is out of range for inputs of shapes "
            f"{format_shape(x1.shape)} and {format_shape(x2.shape)}"
        )
    import numpy as np

    try:
        shape = np.broadcast_shapes(x1.shape, x2.shape)
    except ValueError:
        raise ShapeError(
            f"cosine_similarity: the inputs of shapes {format_shape(x1.shape)} and "
            f"{format_shape(x2.shape)} do not broadcast together"
        ) from None
    a, b = x1.broadcast_to(shape), x2.broadcast_to(shape)
    if not a.dtype.is_floating_point:
        from ...dtypes import default_float

        a, b = a.to(default_float()), b.to(default_float())

    def clamped_norm(x: Tensor) -> Tensor:
        norm = _norm_without_nan_at_zero(x, 2, dim, keepdim=True)
        # PyTorch clamps the norm in place under no_grad: the value is clamped, the
        # gradient is the unclamped norm's
        return norm + (norm.detach().clamp(min=eps) - norm.detach())

    return ((a / clamped_norm(a)) * (b / clamped_norm(b))).sum(dim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distance between every pair of rows of an (N, M) input: the upper
    triangle of the distance matrix, row by row, as N * (N - 1) / 2 values.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.pdist(kg.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])).tolist()
    [5.0, 1.0, 4.242640495300293]
    """
    if input.ndim != 2:
        raise ShapeError(f"pdist: the input must be (N, M), got shape {format_shape(input.shape)}")
    _check_p(p, "pdist")
    import numpy as np

    from ...ops.creation import tensor

    rows, cols = np.triu_indices(input.shape[0], k=1)
    if rows.size == 0:
        return input.new_zeros((0,))
    first = input.index_select(0, tensor(rows, device=input.device))
    second = input.index_select(0, tensor(cols, device=input.device))
    return _norm_without_nan_at_zero(first - second, p, 1, False)
