"""The affine map of nn.Linear."""

from __future__ import annotations

import math
from typing import Any

from ... import autograd
from ...backends.base import View
from ...errors import DTypeError, ShapeError, format_shape
from ...ops.elementwise import ADD
from ...tensor import Tensor


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``; ``input`` has shape (..., in_features).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.linear(kg.ones(2, 3), kg.ones(4, 3)).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    if input.ndim == 0 or input._shape[-1] != weight._shape[-1]:
        raise ShapeError(
            f"linear: the input has shape {format_shape(input._shape)} but the weight has "
            f"shape {format_shape(weight._shape)}: the input's last dimension must equal "
            f"in_features={weight._shape[-1]}"
        )
    for name, operand in (("weight", weight), ("bias", bias)):
        if operand is not None and operand.dtype != input.dtype:
            raise DTypeError(
                f"linear: the input is {input.dtype} but the {name} is {operand.dtype} (shape "
                f"{format_shape(operand._shape)}); PyTorch refuses mixed dtypes here too. Convert "
                f"the input (`x.to({operand.dtype})`) or the layer (`layer.to({input.dtype})`)"
            )
    if input.ndim == 1:
        result = input @ weight.T
        return result + bias if bias is not None else result
    lead = input._shape[:-1]
    # (the row count spelled out: reshape cannot infer -1 when in_features is 0)
    x = input.reshape(math.prod(lead), input._shape[-1]) if input.ndim > 2 else input
    direct = _direct(x, weight, bias)
    with autograd.no_grad():
        if direct:
            shape = (x._shape[0], weight._shape[0])
            in_product = bias is not None and _adds_bias(x)
            result = _product(x, _view(x), _transposed(weight), shape, bias if in_product else None)
            if bias is not None and not in_product:
                ADD(result, bias, out=result)  # what result.add_(bias) runs
                result._storage.version += 1
        else:
            result = x @ weight.T
            if bias is not None:
                result.add_(bias)
    if autograd.needs_grad(x, weight, bias):

        def backward(grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
            if direct and not autograd.is_grad_enabled() and _direct_grad(grad, x, weight):
                # the products below, with the same views, straight to the backend
                grad_x = grad_w = None
                if x.requires_grad:
                    grad_x = _product(grad, _view(grad), _view(weight), x._shape)
                if weight.requires_grad:
                    grad_w = _product(grad, _transposed(grad), _view(x), weight._shape)
            else:
                # Written with the inputs themselves: differentiable again under create_graph.
                grad_x = grad @ weight if x.requires_grad else None
                grad_w = grad.T @ x if weight.requires_grad else None  # contiguous (out, in)
            grad_b = grad.sum(0) if bias is not None and bias.requires_grad else None
            return grad_x, grad_w, grad_b

        autograd.record("linear", (x, weight, bias), result, backward, (x, weight))
    return result.reshape(lead + (weight._shape[0],)) if input.ndim > 2 else result


# --- the products of a 2-D input, straight to the backend ---------------------------------------
# ``x @ weight.T`` and the two products of its gradient go through ``matmul``, which checks
# operands, promotes dtypes, broadcasts batch dims, makes the transposes as tensors and
# records autograd (~15 us each of Python). For the common case (2-D operands of one dtype
# on one device, a non-empty inner dimension, a bias of shape (out_features,)) ``linear``
# hands the backend the same views itself: the same BLAS calls, the same results.


def _direct(x: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    """Whether ``linear`` may run its products directly (see above); the general path
    raises the errors of anything else."""
    device = x._storage.device
    return (
        weight.ndim == 2
        and x._shape[1] > 0
        and _same_device(weight, device)
        and (bias is None or (bias._shape == (weight._shape[0],) and _same_device(bias, device)))
    )


def _same_device(t: Tensor, device: Any) -> bool:
    """Whether ``t`` is on ``device`` (the same object, as on the CPU, or an equal one:
    a CUDA device object is made per tensor)."""
    other = t._storage.device
    return other is device or other == device


def _direct_grad(grad: Tensor, x: Tensor, weight: Tensor) -> bool:
    """Whether the backward products may run directly: the gradient is the result's
    shape and dtype, on its device, and neither product has an empty inner dimension
    (rows for the weight's gradient, ``out_features`` for the input's), which the
    general path fills with zeros."""
    rows, features = x._shape[0], weight._shape[0]
    return (
        rows > 0
        and features > 0
        and grad._shape == (rows, features)
        and grad.dtype is x.dtype
        and _same_device(grad, x._storage.device)
    )


def _view(t: Tensor) -> View:
    return View(t._storage.buffer, t._shape, t._strides, t._offset, t.dtype)


def _transposed(t: Tensor) -> View:
    """The view ``t.T`` is, for a 2-D tensor."""
    rows, cols = t._shape
    row_stride, col_stride = t._strides
    return View(t._storage.buffer, (cols, rows), (col_stride, row_stride), t._offset, t.dtype)


def _product(
    like: Tensor, a: View, b: View, shape: tuple[int, int], bias: Tensor | None = None
) -> Tensor:
    """``a @ b`` into a new contiguous tensor of ``shape`` on ``like``'s device, as
    ``ops.linalg._matmul`` computes it (inner dimension > 0), with ``bias`` added to every
    row by the backend's ``matmul_bias`` (only where :func:`_adds_bias`)."""
    result = Tensor._empty_on(like._storage, shape, like.dtype)
    if result.numel():
        backend = result._storage.backend
        if bias is not None:
            backend.matmul_bias(result._view(), a, b, _view(bias))
        else:
            backend.matmul(result._view(), a, b)
    return result


def _adds_bias(like: Tensor) -> bool:
    """Whether the backend of ``like`` adds a bias in the product (the optional
    ``matmul_bias`` of ``backends/base.py``: each block of the product gets the bias
    while it is in cache, the bits of a separate addition without a second pass)."""
    return getattr(like._storage.backend, "matmul_bias", None) is not None


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``;
    ``weight`` has shape (out_features, in1_features, in2_features) and the inputs the
    same leading dims.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.bilinear(kg.ones(2, 3), kg.ones(2, 4), kg.ones(5, 3, 4)).shape
    kg.Size([2, 5])
    """
    if weight.ndim != 3:
        raise ShapeError(
            f"bilinear: the weight must be (out_features, in1_features, in2_features), got "
            f"shape {format_shape(weight._shape)}"
        )
    out_features, in1, in2 = weight._shape
    if (
        input1.ndim == 0
        or input1._shape[-1] != in1
        or input2.ndim == 0
        or input2._shape[-1] != in2
        or input1._shape[:-1] != input2._shape[:-1]
    ):
        raise ShapeError(
            f"bilinear: the inputs of shapes {format_shape(input1._shape)} and "
            f"{format_shape(input2._shape)} must share their leading dims and end in "
            f"in1_features={in1} and in2_features={in2} (the weight has shape "
            f"{format_shape(weight._shape)})"
        )
    if bias is not None and bias._shape != (out_features,):
        raise ShapeError(
            f"bilinear: the bias has shape {format_shape(bias._shape)}, expected ({out_features},)"
        )
    for name, operand in (("input2", input2), ("weight", weight), ("bias", bias)):
        if operand is not None and operand.dtype != input1.dtype:
            raise DTypeError(
                f"bilinear: input1 is {input1.dtype} but {name} is {operand.dtype}; PyTorch "
                f"refuses mixed dtypes here too: convert one of them (e.g. `.to({operand.dtype})`)"
            )
    lead = input1._shape[:-1]
    rows = math.prod(lead)
    x1, x2 = input1.reshape(rows, in1), input2.reshape(rows, in2)
    # (rows, in1) @ (in1, out * in2), then contract in2 against input2
    mixed = (x1 @ weight.permute(1, 0, 2).reshape(in1, out_features * in2)).reshape(
        rows, out_features, in2
    )
    result = (mixed * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        result = result + bias
    return result.reshape(lead + (out_features,))
