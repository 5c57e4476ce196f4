"""Dropout (elementwise, of whole channels, and alpha dropout), normalisation, one-hot
and padding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import autograd
from ...backends.base import ScalarFunction
from ...dtypes import int64
from ...errors import ArgumentError, DTypeError, IndexingError, ShapeError, format_shape
from ...linalg import vector_norm
from ...ops.creation import arange, empty, rand
from ...ops.creation import tensor as tensor_from
from ...ops.elementwise import where
from ...ops.indexing import take
from ...ops.movement import pad as _pad_constant
from ...tensor import Tensor
from .. import _fused
from ._inplace import write_into
from ._layout import _check_float


def dropout_mask(x, u, p, scale):
    return x * scale if u >= p else x * 0.0


_DROPOUT = ScalarFunction.from_python(dropout_mask)


def _apply_dropout(x: Tensor, draws: Tensor, p: float, scale: float) -> Tensor:
    """``x * scale`` where ``draws >= p``, else 0: one fused kernel, forward and backward."""
    result = empty(x.shape, dtype=x.dtype, device=x.device)
    _fused.launch(_DROPOUT, [result], [x, draws, p, scale], x.dtype)
    if autograd.needs_grad(x):

        def backward(grad: Tensor) -> tuple[Tensor]:
            if autograd.is_grad_enabled():  # create_graph: stay differentiable
                return (grad * where(draws >= p, scale, 0.0),)
            return (_apply_dropout(grad, draws, p, scale),)

        autograd.record("dropout", (x,), result, backward)
    return result


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p) while
    ``training``; the identity otherwise. One random draw and one fused kernel.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.dropout(kg.ones(3), p=0.5, training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    if not 0.0 <= p <= 1.0:
        raise ArgumentError(f"dropout: p must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    if inplace:  # the result written into the input, as PyTorch
        return write_into(input, "dropout_", lambda x: dropout(x, p, training))
    _check_float(input, "dropout")
    if p == 1.0:
        return input * 0.0
    draws = rand(input.shape, dtype=input.dtype, device=input.device)
    return _apply_dropout(input, draws, p, 1.0 / (1.0 - p))


def channel_dropout(
    input: Tensor,
    p: float,
    training: bool,
    spatial_dims: int,
    op: str = "dropout2d",
    inplace: bool = False,
) -> Tensor:
    """Zero whole channels: one draw per (sample, channel) of an input with
    ``spatial_dims`` trailing dims after the channel dim (batched or not); ``inplace``
    writes the result into the input."""
    if not 0.0 <= p <= 1.0:
        raise ArgumentError(f"{op}: p must be between 0 and 1, got {p}")
    if input.ndim not in (spatial_dims + 1, spatial_dims + 2):
        raise ShapeError(
            f"{op}: expected a {spatial_dims + 2}-d (batched) or {spatial_dims + 1}-d input, "
            f"got shape {format_shape(input.shape)}"
        )
    if not training or p == 0.0:
        return input
    if inplace:
        return write_into(
            input, f"{op}_", lambda x: channel_dropout(x, p, training, spatial_dims, op)
        )
    _check_float(input, op)
    if p == 1.0:
        return input * 0.0
    lead = input.ndim - spatial_dims
    draws = rand(input.shape[:lead] + (1,) * spatial_dims, dtype=input.dtype, device=input.device)
    return input * where(draws >= p, 1.0 / (1.0 - p), 0.0)


def dropout2d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of an (N, C, H, W) or (C, H, W) input with probability ``p``."""
    return channel_dropout(input, p, training, 2, "dropout2d", inplace)


def dropout1d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of an (N, C, L) or (C, L) input with probability ``p``."""
    return channel_dropout(input, p, training, 1, "dropout1d", inplace)


def dropout3d(
    input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> Tensor:
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability
    ``p``."""
    return channel_dropout(input, p, training, 3, "dropout3d", inplace)


_SELU_ALPHA_SCALE = 1.7580993408473766  # SELU's -alpha * scale: its negative saturation


def _alpha_dropout(
    input: Tensor, p: float, training: bool, op: str, feature: bool, inplace: bool = False
) -> Tensor:
    if not 0.0 <= p <= 1.0:
        raise ArgumentError(f"{op}: p must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    if inplace:
        return write_into(input, f"{op}_", lambda x: _alpha_dropout(x, p, training, op, feature))
    _check_float(input, op)
    if p == 1.0:
        return input * 0.0
    if feature and input.ndim < 2:
        raise ShapeError(
            f"{op}: expected an input of shape (N, C, ...) or (C, ...), got "
            f"{format_shape(input.shape)}"
        )
    if feature:  # one draw per (sample, channel), as PyTorch: dims from 2 on share it
        shape = input.shape[:2] + (1,) * (input.ndim - 2)
    else:
        shape = input.shape
    keep = rand(shape, dtype=input.dtype, device=input.device) >= p
    # PyTorch's affine correction: kept values a * x + alpha * a * p, dropped values
    # -alpha * a * (1 - p), so that zero mean and unit variance are kept
    alpha = _SELU_ALPHA_SCALE
    a = 1.0 / float(np.sqrt((alpha * alpha * p + 1.0) * (1.0 - p)))
    return where(keep, input * a + alpha * a * p, -alpha * a * (1.0 - p))


def alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value
    and an affine correction keeps the mean and variance (as ``torch``); the identity
    when not ``training``.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.alpha_dropout(kg.ones(3), 0.5).tolist()
    [1.0, 1.0, 1.0]
    """
    return _alpha_dropout(input, p, training, "alpha_dropout", False, inplace)


def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """``alpha_dropout`` of whole channels: one draw per (sample, channel)."""
    return _alpha_dropout(input, p, training, "feature_alpha_dropout", True, inplace)


def _same_dtype(op: str, input: Tensor, name: str, operand: Tensor | None) -> None:
    """A floating-point input and a layer's parameter or statistic must share a dtype, as
    in PyTorch (which refuses "mixed dtype"): otherwise the result would silently take
    the wider one."""
    if operand is not None and operand.dtype != input.dtype and input.dtype.is_floating_point:
        raise DTypeError(
            f"{op}: the input is {input.dtype} but {name} is {operand.dtype}; PyTorch refuses "
            f"mixed dtypes here too. Convert the input (`x.to({operand.dtype})`) or the layer "
            f"(`layer.to({input.dtype})`)"
        )


def _check_channel_vectors(op: str, input: Tensor, **vectors: Tensor | None) -> None:
    """Each given vector (a normalisation's weight, bias or running statistic) has shape
    (C,) and the input's dtype."""
    channels = input.shape[1]
    for name, vector in vectors.items():
        if vector is None:
            continue
        if vector.shape != (channels,):
            raise ShapeError(
                f"{op}: {name} has shape {format_shape(vector.shape)}, but the input of shape "
                f"{format_shape(input.shape)} has {channels} channels (dim 1): it must have "
                f"shape ({channels},)"
            )
        _same_dtype(op, input, name, vector)


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalisation over every dim but 1 (channels). In training, batch
    statistics are used and the running statistics (if given) are updated in place
    with ``momentum`` (the running variance uses the unbiased estimate, as PyTorch).

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.batch_norm(kg.randn(8, 3), None, None, training=True)
    >>> [abs(round(v, 4)) for v in y.mean(0).tolist()]
    [0.0, 0.0, 0.0]
    """
    if input.ndim < 2:
        raise ShapeError(
            f"batch_norm: expected at least 2 dims (N, C, ...), got {format_shape(input.shape)}"
        )
    channels = input.shape[1]
    _check_channel_vectors(
        "batch_norm", input, running_mean=running_mean, running_var=running_var,
        weight=weight, bias=bias,
    )  # fmt: skip
    dims = (0,) + tuple(range(2, input.ndim))
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // channels
        if count <= 1:
            raise ArgumentError(
                f"batch_norm: expected more than 1 value per channel when training, got input "
                f"of shape {format_shape(input.shape)}"
            )
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        if running_mean is not None and running_var is not None:
            with autograd.no_grad():
                running_mean.mul_(1.0 - momentum).add_(mean.reshape(channels) * momentum)
                unbiased = var.reshape(channels) * (count / (count - 1))
                running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ArgumentError(
                "batch_norm: running statistics are needed when not training (pass "
                "running_mean and running_var, or training=True)"
            )
        centered = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    result = centered * (var + eps).rsqrt()
    if weight is not None:
        result = result * weight.reshape(shape)
    if bias is not None:
        result = result + bias.reshape(shape)
    return result


def layer_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise over the last ``len(normalized_shape)`` dims (mean 0, variance 1), then
    scale by ``weight`` and shift by ``bias`` (both of ``normalized_shape``).

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.layer_norm(kg.tensor([[1.0, 2.0, 3.0]]), (3,))
    >>> [round(v, 3) for v in y[0].tolist()]
    [-1.225, 0.0, 1.225]
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape:
        raise ShapeError(
            "layer_norm: normalized_shape is empty; give the trailing dims to normalise over "
            f"(at least one), e.g. ({input.shape[-1] if input.ndim else 1},)"
        )
    if input.shape[input.ndim - len(shape) :] != shape:
        raise ShapeError(
            f"layer_norm: normalized_shape {shape} does not match the last dims of the input "
            f"of shape {format_shape(input.shape)}"
        )
    _same_dtype("layer_norm", input, "weight", weight)
    _same_dtype("layer_norm", input, "bias", bias)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dims, keepdim=True)
    result = centered * (var + eps).rsqrt()
    if weight is not None:
        result = result * weight
    if bias is not None:
        result = result + bias
    return result


def one_hot(input: Tensor, num_classes: int = -1) -> Tensor:
    """int64 tensor with a trailing dim of ``num_classes``: 1 at each index, else 0.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.one_hot(kg.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    from ...errors import DTypeError
    from ...ops.movement import stack

    if input.dtype.is_floating_point or input.dtype.is_bool:
        raise DTypeError(
            f"one_hot: the input must be an integer tensor of class indices, got {input.dtype}"
        )
    if num_classes < 0 and input.numel() == 0:
        raise ShapeError(
            "one_hot: cannot infer the number of classes from an empty tensor; give num_classes"
        )
    if input.numel():
        low, high = (int(v) for v in stack([input.amin(), input.amax()]).cpu().tolist())
        if low < 0:
            raise IndexingError(
                f"one_hot: class values must be non-negative, but the input holds {low}; "
                "check the labels (a negative class has no column to set)"
            )
        if num_classes < 0:
            num_classes = high + 1
        elif high >= num_classes:
            raise IndexingError(
                f"one_hot: class value {high} is out of range for num_classes={num_classes} "
                f"(valid: 0 to {num_classes - 1})"
            )
    classes = arange(max(num_classes, 0), device=input.device)
    return (input.unsqueeze(-1) == classes).to(int64)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad ``input``: ``pad`` lists (before, after) pairs from the last dim backwards, as
    ``torch.nn.functional.pad``. ``mode`` is ``"constant"`` (with ``value``; negative
    amounts crop), ``"reflect"`` (mirrored without repeating the edge), ``"replicate"``
    (the edge repeated) or ``"circular"`` (wrapped around).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.pad(kg.ones(1, 2), (1, 1)).tolist()
    [[0.0, 1.0, 1.0, 0.0]]
    >>> kg.nn.functional.pad(kg.tensor([[[1.0, 2.0, 3.0]]]), (2, 1), mode="reflect").tolist()
    [[[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]]
    """
    amounts = tuple(int(a) for a in pad)
    if len(amounts) % 2:
        raise ArgumentError(f"pad: the pad amounts come in (before, after) pairs, got {amounts}")
    if len(amounts) // 2 > input.ndim:
        raise ShapeError(
            f"pad: {len(amounts) // 2} dims to pad but the input of shape "
            f"{format_shape(input.shape)} has only {input.ndim}"
        )
    if mode == "constant":
        return _pad_constant(input, amounts, value)
    if mode not in ("reflect", "replicate", "circular"):
        raise ArgumentError(
            f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}"
        )
    result = input
    for pair in range(len(amounts) // 2):
        dim = input.ndim - 1 - pair
        before, after = amounts[2 * pair], amounts[2 * pair + 1]
        if before or after:
            result = take(
                result, dim, _pad_index(input.shape[dim], before, after, mode, dim, input)
            )
    return result


def _pad_index(size: int, before: int, after: int, mode: str, dim: int, input: Tensor) -> Tensor:
    """The source position of each output position of one padded dim."""
    if mode == "reflect" and (before >= size or after >= size):
        raise ShapeError(
            f"pad: reflect padding ({before}, {after}) of dim {dim} must be smaller than its "
            f"size {size} (input of shape {format_shape(input.shape)})"
        )
    if mode == "circular" and (before > size or after > size):
        raise ShapeError(
            f"pad: circular padding ({before}, {after}) of dim {dim} must be at most its size "
            f"{size} (input of shape {format_shape(input.shape)})"
        )
    if size == 0:
        raise ShapeError(f"pad: {mode} padding of dim {dim}, which has size 0")
    positions = np.arange(-before, size + after)
    if mode == "reflect":
        period = 2 * (size - 1) if size > 1 else 1
        folded = np.mod(positions, period)
        index = np.where(folded < size, folded, period - folded)
    elif mode == "replicate":
        index = np.clip(positions, 0, size - 1)
    else:
        index = np.mod(positions, size)
    return tensor_from(index.astype(np.int64), device=input.device)


def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None
) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.normalize(kg.tensor([[3.0, 4.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    """
    if out is not None:
        raise ArgumentError("normalize: out= is not supported; assign the result instead")
    norm = vector_norm(input, p, dim, keepdim=True)
    return input / norm.clamp(min=eps)
