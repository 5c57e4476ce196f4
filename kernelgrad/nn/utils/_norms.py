"""``torch.norm_except_dim`` and ``torch._weight_norm`` in tensor ops (differentiable),
shared by the two forms of weight normalisation."""

from __future__ import annotations

from ...linalg import vector_norm
from ...tensor import Tensor


def norm_except_dim(v: Tensor, pow: float = 2.0, dim: int = 0) -> Tensor:
    """The ``pow``-norm of ``v`` over every dim but ``dim``, kept as size-1 dims (shape
    ``(v.shape[0], 1, 1, ...)`` for ``dim=0``); ``dim=-1`` is the norm of the whole tensor
    (a 0-d tensor), as in PyTorch (so ``weight_norm(dim=None)`` uses it)."""
    if dim == -1:
        return vector_norm(v, pow)
    axis = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != axis)
    if not others:
        return v.abs()
    return vector_norm(v, pow, dim=others, keepdim=True)


def weight_norm(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """``v * (g / norm_except_dim(v, 2, dim))`` (PyTorch's ``torch._weight_norm``)."""
    return v * (g / norm_except_dim(v, 2.0, dim))
