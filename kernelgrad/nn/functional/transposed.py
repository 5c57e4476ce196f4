"""Transposed convolution: ``conv_transpose1d``, ``conv_transpose2d`` and
``conv_transpose3d``.

A transposed convolution is the gradient of a convolution with respect to its input.
It is computed as a stride-1 convolution: the input with ``stride - 1`` zeros inserted
between its elements, padded by ``dilation * (kernel - 1) - padding`` on each side (plus
``output_padding`` after), convolved with the weight flipped in space and with its
channel dims swapped per group. The zeros cost ``stride**dims`` times the multiply-adds
of a direct scatter; written this way every step is an existing differentiable
operation and the convolution kernels do the work. The 3-d form folds depth into the
2-d convolution: each output depth is one 2-d convolution over the ``kd`` input planes
it reads, stacked as channels (``convolution3d._conv3d_as_2d``, as ``conv3d``)."""

from __future__ import annotations

from typing import Any

from ...errors import ArgumentError, DTypeError, ShapeError, format_shape
from ...ops.movement import pad as _pad_constant
from ...tensor import Tensor
from ._layout import _batched, _pair, _single, _triple
from .convolution import conv2d
from .convolution3d import _conv3d_as_2d


def _spread(x: Tensor, dim: int, stride: int) -> Tensor:
    """``stride - 1`` zeros between neighbouring elements along ``dim``."""
    if stride == 1 or x.shape[dim] == 0:
        return x
    size = x.shape[dim]
    spread = x.unsqueeze(dim + 1)
    amounts = [0, 0] * (spread.ndim - dim - 2) + [0, stride - 1]
    spread = _pad_constant(spread, tuple(amounts), 0.0)
    shape = x.shape[:dim] + (size * stride,) + x.shape[dim + 1 :]
    return spread.reshape(shape).narrow(dim, 0, (size - 1) * stride + 1)


def _pad_or_crop(x: Tensor, dim: int, before: int, after: int) -> Tensor:
    """Zero-pad (positive amounts) or crop (negative amounts) dim ``dim``."""
    if before < 0:
        x = x.narrow(dim, -before, x.shape[dim] + before)
        before = 0
    if after < 0:
        x = x.narrow(dim, 0, x.shape[dim] + after)
        after = 0
    if before or after:
        amounts = [0, 0] * (x.ndim - dim - 1) + [before, after]
        x = _pad_constant(x, tuple(amounts), 0.0)
    return x


def _conv_transpose(
    op: str,
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: int,
    dilation: Any,
    dims: int,
) -> Tensor:
    """The transposed convolution over ``dims`` (2 or 3) spatial dims."""
    x, unbatched = _batched(input, op, dims + 2)
    spatial = ("kh, kw", "kd, kh, kw")[dims - 2]
    if weight.ndim != dims + 2:
        raise ShapeError(
            f"{op}: the weight must be (in_channels, out_channels / groups, {spatial}), got "
            f"{format_shape(weight.shape)}"
        )
    if weight.dtype != x.dtype:
        raise DTypeError(
            f"{op}: the input is {x.dtype} but the weight is {weight.dtype}; convert one of "
            "them (e.g. `model.to(kg.float64)` or `x.float()`)"
        )
    channels = x.shape[1]
    if groups < 1 or channels % groups or weight.shape[0] != channels:
        raise ShapeError(
            f"{op}: the input has {channels} channels (shape {format_shape(x.shape)}) but the "
            f"weight of shape {format_shape(weight.shape)} expects {weight.shape[0]} "
            f"in {groups} group(s)"
        )
    tuples = _pair if dims == 2 else _triple
    strides, paddings = tuples(stride, "stride"), tuples(padding, "padding")
    extra, dilations = tuples(output_padding, "output_padding"), tuples(dilation, "dilation")
    if min(strides) < 1 or min(dilations) < 1 or min(paddings) < 0:
        raise ArgumentError(f"{op}: stride and dilation must be positive and padding >= 0")
    for e, s, d in zip(extra, strides, dilations):
        if not 0 <= e < max(s, d):
            raise ArgumentError(
                f"{op}: output_padding {extra} must be smaller than stride {strides} or "
                f"dilation {dilations}"
            )
    kernel = weight.shape[2:]
    for k in range(dims):
        dim = 2 + k
        x = _spread(x, dim, strides[k])
        border = dilations[k] * (kernel[k] - 1) - paddings[k]
        x = _pad_or_crop(x, dim, border, border + extra[k])
        if x.shape[dim] < dilations[k] * (kernel[k] - 1) + 1:
            raise ShapeError(
                f"{op}: padding {paddings} is too large for the input of shape "
                f"{format_shape(input.shape)} and the kernel {tuple(kernel)}: the output "
                "would be empty"
            )
    out_per_group = weight.shape[1]
    # (C_in, C_out/g, k...) -> (C_out, C_in/g, k...), flipped in space
    swapped = weight.reshape(groups, channels // groups, out_per_group, *kernel)
    swapped = swapped.transpose(1, 2).reshape(groups * out_per_group, channels // groups, *kernel)
    flipped = swapped.flip(tuple(range(2, dims + 2)))
    if dims == 3:
        result = _conv3d_as_2d(x, flipped, bias, (1, 1, 1), 0, dilations, groups)
    else:
        result = conv2d(x, flipped, bias, 1, 0, dilations, groups)
    return result.squeeze(0) if unbatched else result


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 2-d convolution of (N, C_in, H, W) (or unbatched) input with a weight
    of shape (C_in, C_out / groups, kh, kw), as ``torch.nn.functional.conv_transpose2d``.
    The output has size ``(H - 1) * stride - 2 * padding + dilation * (kh - 1) +
    output_padding + 1`` (and likewise for W).

    >>> import kernelgrad as kg
    >>> x = kg.ones(1, 1, 2, 2)
    >>> kg.nn.functional.conv_transpose2d(x, kg.ones(1, 1, 2, 2), stride=2).shape
    kg.Size([1, 1, 4, 4])
    """
    return _conv_transpose(
        "conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups,
        dilation, 2,
    )  # fmt: skip


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 3-d convolution of (N, C_in, D, H, W) (or unbatched) input with a
    weight of shape (C_in, C_out / groups, kd, kh, kw), as
    ``torch.nn.functional.conv_transpose3d``; sizes as for ``conv_transpose2d``, per dim.

    >>> import kernelgrad as kg
    >>> x = kg.ones(1, 1, 2, 2, 2)
    >>> kg.nn.functional.conv_transpose3d(x, kg.ones(1, 3, 2, 2, 2), stride=2).shape
    kg.Size([1, 3, 4, 4, 4])
    """
    return _conv_transpose(
        "conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups,
        dilation, 3,
    )  # fmt: skip


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 1-d convolution of (N, C_in, L) (or unbatched) input with a weight of
    shape (C_in, C_out / groups, k).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.conv_transpose1d(kg.ones(1, 1, 3), kg.ones(1, 2, 2)).shape
    kg.Size([1, 2, 4])
    """
    x, unbatched = _batched(input, "conv_transpose1d", 3)
    if weight.ndim != 3:
        raise ShapeError(
            "conv_transpose1d: the weight must be (in_channels, out_channels / groups, k), "
            f"got {format_shape(weight.shape)}"
        )
    result = conv_transpose2d(
        x.unsqueeze(2), weight.unsqueeze(2), bias, (1, _single(stride, "stride")),
        (0, _single(padding, "padding")), (0, _single(output_padding, "output_padding")),
        groups, (1, _single(dilation, "dilation")),
    ).squeeze(2)  # fmt: skip
    return result.squeeze(0) if unbatched else result
