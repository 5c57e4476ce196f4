"""The affine map of nn.Linear."""

from __future__ import annotations

import math

from ... import autograd
from ...errors import DTypeError, ShapeError, format_shape
from ...tensor import Tensor


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``; ``input`` has shape (..., in_features).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.linear(kg.ones(2, 3), kg.ones(4, 3)).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise ShapeError(
            f"linear: the input has shape {format_shape(input.shape)} but the weight has "
            f"shape {format_shape(weight.shape)}: the input's last dimension must equal "
            f"in_features={weight.shape[-1]}"
        )
    for name, operand in (("weight", weight), ("bias", bias)):
        if operand is not None and operand.dtype != input.dtype:
            raise DTypeError(
                f"linear: the input is {input.dtype} but the {name} is {operand.dtype} (shape "
                f"{format_shape(operand.shape)}); PyTorch refuses mixed dtypes here too. Convert "
                f"the input (`x.to({operand.dtype})`) or the layer (`layer.to({input.dtype})`)"
            )
    if input.ndim == 1:
        result = input @ weight.T
        return result + bias if bias is not None else result
    lead = input.shape[:-1]
    # (the row count spelled out: reshape cannot infer -1 when in_features is 0)
    x = input.reshape(math.prod(lead), input.shape[-1]) if input.ndim > 2 else input
    with autograd.no_grad():
        result = x @ weight.T
        if bias is not None:
            result.add_(bias)
    if autograd.needs_grad(x, weight, bias):

        def backward(grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
            # Written with the inputs themselves: differentiable again under create_graph.
            grad_x = grad @ weight if x.requires_grad else None
            grad_w = grad.T @ x if weight.requires_grad else None  # contiguous (out, in)
            grad_b = grad.sum(0) if bias is not None and bias.requires_grad else None
            return grad_x, grad_w, grad_b

        autograd.record("linear", (x, weight, bias), result, backward, (x, weight))
    return result.reshape(lead + (weight.shape[0],)) if input.ndim > 2 else result
