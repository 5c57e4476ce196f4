"""Matrix multiplication with NumPy's rules: batched, broadcast batch dims, and 1-D
operands treated as a row (left) or column (right) vector that is removed afterwards."""

from __future__ import annotations

from typing import Any

from .. import autograd
from ..dtypes import result_type
from ..errors import DeviceMismatchError, ShapeError, format_shape
from ..shapes import broadcast_shapes
from ..tensor import Tensor
from . import register

register("matmul", "linalg", ("Tensor.__matmul__", "Tensor.matmul", "kg.matmul"), True)


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product ``a @ b``.

    >>> import kernelgrad as kg
    >>> (kg.ones(2, 3) @ kg.ones(3)).tolist()
    [3.0, 3.0]
    """
    if not isinstance(a, Tensor):
        from .creation import tensor

        a = tensor(a, device=b.device if isinstance(b, Tensor) else None)
    if not isinstance(b, Tensor):
        from .creation import tensor

        b = tensor(b, device=a.device)
    if a._storage.device is not b._storage.device and a.device != b.device:
        raise DeviceMismatchError(
            f"matmul: the left operand is on {a.device} and the right one on {b.device}; "
            f"move one of them, e.g. `b.to({str(a.device)!r})`"
        )
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            "matmul: both operands need at least one dimension (got shapes "
            f"{format_shape(a.shape)} and {format_shape(b.shape)}); use * for scalars"
        )
    dtype = result_type(a, b)
    if a.dtype is not dtype:
        a = a.to(dtype)
    if b.dtype is not dtype:
        b = b.to(dtype)
    left_vector, right_vector = a.ndim == 1, b.ndim == 1
    a2 = a.unsqueeze(0) if left_vector else a
    b2 = b.unsqueeze(-1) if right_vector else b
    if a2._shape[-1] != b2._shape[-2]:
        raise ShapeError(
            f"matmul: shapes {format_shape(a._shape)} and {format_shape(b._shape)} are not "
            f"aligned: the left operand has {a2._shape[-1]} columns but the right one has "
            f"{b2._shape[-2]} rows"
        )
    result = _matmul(a2, b2)
    if left_vector:
        result = result.squeeze(-2)
    if right_vector:
        result = result.squeeze(-1)
    return result


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    """The primitive: both operands have >= 2 dims and matching inner sizes."""
    batch = broadcast_shapes(a._shape[:-2], b._shape[:-2], op="matmul (batch dims)")
    n, m = a._shape[-2], b._shape[-1]
    left = a.expand(*(batch + a._shape[-2:])) if a._shape[:-2] != batch else a
    right = b.expand(*(batch + b._shape[-2:])) if b._shape[:-2] != batch else b
    result = Tensor._empty_on(a._storage, batch + (n, m), a.dtype)
    if result.numel():
        if a._shape[-1] == 0:
            result._backend.elementwise(_zero_fn(), [result._view()], [0], [result.dtype])
        else:
            result._backend.matmul(result._view(), left._view(), right._view())
    if autograd.needs_grad(a, b):

        def backward(g: Tensor) -> tuple[Tensor | None, Tensor | None]:
            # Under create_graph the gradients depend on the other operand too.
            left, right = (a, b) if autograd.is_grad_enabled() else (a.detach(), b.detach())
            grad_a = g @ right.mT if a.requires_grad else None
            grad_b = left.mT @ g if b.requires_grad else None
            return grad_a, grad_b

        autograd.record("matmul", (a, b), result, backward, (a, b))
    return result


def _zero_fn():
    from .elementwise import IDENTITY

    return IDENTITY.scalar
