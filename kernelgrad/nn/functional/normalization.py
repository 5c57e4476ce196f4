"""Group, instance, RMS and local response normalisation, composed of Tensor operations
(means, variances, ``rsqrt``) so autograd and every backend come for free."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import autograd
from ...errors import ArgumentError, ShapeError, format_shape
from ...tensor import Tensor
from ._layout import _check_float
from .layers import _check_channel_vectors


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Split the channels (dim 1) of an (N, C, ...) input into ``num_groups`` groups and
    normalise each (sample, group) over its channels and spatial positions; then scale by
    ``weight`` and shift by ``bias`` (both of shape (C,)).

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.group_norm(kg.tensor([[1.0, 3.0, 5.0, 9.0]]), 2)
    >>> [round(v, 3) for v in y[0].tolist()]
    [-1.0, 1.0, -1.0, 1.0]
    """
    if input.ndim < 2:
        raise ShapeError(
            f"group_norm: expected an (N, C, ...) input with at least 2 dims, got "
            f"{format_shape(input.shape)}"
        )
    _check_float(input, "group_norm")
    batch, channels = input.shape[0], input.shape[1]
    if num_groups <= 0 or channels % num_groups:
        raise ShapeError(
            f"group_norm: the input of shape {format_shape(input.shape)} has {channels} "
            f"channels (dim 1), which num_groups={num_groups} must divide"
        )
    _check_channel_vectors("group_norm", input, weight=weight, bias=bias)
    grouped = input.reshape(batch, num_groups, -1)
    mean = grouped.mean(2, keepdim=True)
    centered = grouped - mean
    var = (centered * centered).mean(2, keepdim=True)
    result = (centered * (var + eps).rsqrt()).reshape(input.shape)
    return _affine(result, weight, bias)


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise each (sample, channel) of an (N, C, ...) input over its spatial dims.

    With ``use_input_stats`` the statistics of the input are used and the running
    statistics (if given, shape (C,)) are updated in place with ``momentum``, from the
    mean over the batch of each instance's mean and unbiased variance (as PyTorch);
    otherwise the running statistics normalise.

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.instance_norm(kg.tensor([[[1.0, 3.0], [0.0, 4.0]]]))
    >>> [[round(v, 3) for v in row] for row in y[0].tolist()]
    [[-1.0, 1.0], [-1.0, 1.0]]
    """
    if input.ndim < 3:
        raise ShapeError(
            f"instance_norm: expected an (N, C, ...) input with at least one spatial dim, "
            f"got {format_shape(input.shape)} (add the batch dim with x.unsqueeze(0))"
        )
    _check_float(input, "instance_norm")
    channels = input.shape[1]
    _check_channel_vectors(
        "instance_norm",
        input,
        running_mean=running_mean,
        running_var=running_var,
        weight=weight,
        bias=bias,
    )
    shape = (1, channels) + (1,) * (input.ndim - 2)
    dims = tuple(range(2, input.ndim))
    if use_input_stats:
        count = int(np.prod(input.shape[2:]))
        if count <= 1:
            raise ArgumentError(
                f"instance_norm: expected more than 1 spatial element when using the input's "
                f"statistics, got input of shape {format_shape(input.shape)}"
            )
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        if running_mean is not None and running_var is not None:
            with autograd.no_grad():
                batch_mean = mean.reshape(input.shape[:2]).mean(0)
                unbiased = var.reshape(input.shape[:2]).mean(0) * (count / (count - 1))
                running_mean.mul_(1.0 - momentum).add_(batch_mean * momentum)
                running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ArgumentError(
                "instance_norm: running statistics are needed when use_input_stats=False "
                "(pass running_mean and running_var, or use_input_stats=True)"
            )
        centered = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    return _affine(centered * (var + eps).rsqrt(), weight, bias)


def rms_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """Divide by the root mean square over the last ``len(normalized_shape)`` dims
    (``x / sqrt(mean(x**2) + eps)``), then scale by ``weight`` (of ``normalized_shape``).
    ``eps=None`` is the machine epsilon of the input's dtype, as PyTorch.

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.rms_norm(kg.tensor([[3.0, 4.0]]), (2,), eps=0.0)
    >>> [round(v, 4) for v in y[0].tolist()]
    [0.8485, 1.1314]
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    _check_float(input, "rms_norm")
    if not shape or input.shape[input.ndim - len(shape) :] != shape or len(shape) > input.ndim:
        raise ShapeError(
            f"rms_norm: normalized_shape {shape} must be the last dims of the input, whose "
            f"shape is {format_shape(input.shape)}"
        )
    if weight is not None and weight.shape != shape:
        raise ShapeError(
            f"rms_norm: the weight has shape {format_shape(weight.shape)} but must have "
            f"normalized_shape {format_shape(shape)}"
        )
    if eps is None:
        eps = float(np.finfo(input.dtype.numpy).eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    result = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return result * weight if weight is not None else result


def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """Divide each element of an (N, C, ...) input by
    ``(k + alpha / size * sum of squares over `size` neighbouring channels) ** beta``; the
    window runs from ``size // 2`` channels before to ``(size - 1) // 2`` after (zero
    outside), as PyTorch.

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.local_response_norm(kg.ones(1, 2, 1), 2, alpha=2.0, beta=1.0)
    >>> [round(v, 3) for v in y.reshape(-1).tolist()]
    [0.5, 0.333]
    """
    if input.ndim < 3:
        raise ShapeError(
            f"local_response_norm: expected an (N, C, ...) input with at least 3 dims, got "
            f"{format_shape(input.shape)}"
        )
    if size < 1:
        raise ArgumentError(f"local_response_norm: size must be positive, got {size}")
    _check_float(input, "local_response_norm")
    if input.numel() == 0:
        return input
    from .layers import pad

    squares = input * input
    channels = input.shape[1]
    before, after = size // 2, (size - 1) // 2
    padded = pad(squares.movedim(1, -1), (before, after)).movedim(-1, 1)
    window = padded.narrow(1, 0, channels)
    for shift in range(1, size):
        window = window + padded.narrow(1, shift, channels)
    return input / (window * (alpha / size) + k) ** beta


def _affine(result: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    shape = (1, result.shape[1]) + (1,) * (result.ndim - 2)
    if weight is not None:
        result = result * weight.reshape(shape)
    if bias is not None:
        result = result + bias.reshape(shape)
    return result
