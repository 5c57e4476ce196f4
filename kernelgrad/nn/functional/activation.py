"""Activation functions and softmax."""

from __future__ import annotations

import math

from ... import autograd
from ...errors import ArgumentError
from ...ops import elementwise as _ew
from ...ops.elementwise import where
from ...tensor import Tensor
from ._layout import _apply_in_layout, _dense


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0), elementwise.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.relu(kg.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    if inplace:
        return input.relu_()
    if input.is_contiguous() or not _dense(input):
        return input.relu()
    # A permuted layout (a convolution's output, stored batch innermost) is kept: the
    # result, and the gradient, are stored like the input and computed in memory order.
    with autograd.no_grad():
        result = _apply_in_layout(_ew.RELU, input)
    if autograd.needs_grad(input):
        saved = autograd.SavedOutput(result)

        def backward(grad: Tensor) -> tuple[Tensor]:
            output = saved.get()
            if autograd.is_grad_enabled():  # create_graph: the differentiable record
                return (_ew.RELU_GRAD(grad, output),)
            return (_apply_in_layout(_ew.RELU_GRAD, grad, output, layout=output),)

        autograd.record("relu", (input,), result, backward, (saved.data,))
        saved.bind(result._node)
    return result


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit ``x * Phi(x)``; ``approximate="tanh"`` uses the tanh
    formula of the original paper.

    >>> import kernelgrad as kg
    >>> round(kg.nn.functional.gelu(kg.tensor([1.0])).item(), 4)
    0.8413
    """
    if approximate == "none":
        return _ew.GELU(input)
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (inner.tanh() + 1.0)
    raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), elementwise."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return input.tanh()


def silu(input: Tensor) -> Tensor:
    """x * sigmoid(x) (also called swish)."""
    return input * input.sigmoid()


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """x where x > 0, else ``negative_slope * x``."""
    return where(input > 0, input, input * negative_slope)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, linear above ``threshold`` (as PyTorch)."""
    scaled = input * beta
    smooth = (-scaled.abs()).exp().log1p() / beta + scaled.relu() / beta
    return where(scaled > threshold, input, smooth)


def softmax(input: Tensor, dim: int) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim`` (stable: the maximum is subtracted first)."""
    return input.softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably as x - logsumexp(x)."""
    return input.log_softmax(dim)
