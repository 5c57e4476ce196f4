"""3-d convolution, ``conv3d``, as one 2-d convolution over stacked depth planes.

Output depth ``d`` reads the input planes ``d * stride + t * dilation`` for the ``kd``
taps ``t``. Those planes, for every output depth, are stacked as the channels (c, t) of
an (N * OD, C * kd, H, W) input, which is what the weight reshaped to
(O, C / groups * kd, kh, kw) expects, group by group; one ``conv2d`` does the rest
(height and width stride, padding and dilation included), so the 3-d case reuses the
2-d kernels and their gradients on every backend. The stack is a copy ``kd / stride``
times the size of the (depth-padded) input. ``conv_transpose3d`` uses the same
helper."""

from __future__ import annotations

from typing import Any

from ...errors import ArgumentError, ShapeError, format_shape
from ...ops.movement import pad as _pad_constant
from ...ops.movement import stack
from ...tensor import Tensor
from ._layout import _batched, _check_float, _same_padding, _triple
from .convolution import _check_groups, _check_operands, conv2d


def _conv3d_as_2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: tuple[int, int, int],
    hw_padding: Any,
    dilation: tuple[int, int, int],
    groups: int,
) -> Tensor:
    """A 3-d convolution of (N, C, D, H, W) with (O, C / groups, kd, kh, kw), unpadded
    in depth (``hw_padding`` is conv2d's padding for height and width), as one 2-d
    convolution over the stacked planes each output depth reads."""
    n, _, depth, _, _ = x.shape
    out_channels, _, kd, _, _ = weight.shape
    out_depth = (depth - dilation[0] * (kd - 1) - 1) // stride[0] + 1
    span = (out_depth - 1) * stride[0] + 1
    planes = []
    for t in range(kd):
        plane = x.narrow(2, t * dilation[0], span)
        if stride[0] > 1:
            plane = plane[:, :, :: stride[0]]
        planes.append(plane.permute(0, 2, 1, 3, 4))
    stacked = stack(planes, 3)  # (N, OD, C, kd, H, W)
    stacked = stacked.reshape(n * out_depth, -1, *stacked.shape[4:])
    flat_weight = weight.reshape(out_channels, -1, *weight.shape[3:])
    result = conv2d(stacked, flat_weight, bias, stride[1:], hw_padding, dilation[1:], groups)
    return result.reshape(n, out_depth, *result.shape[1:]).permute(0, 2, 1, 3, 4)


def _depth_and_plane_padding(
    padding: Any, kernel: tuple[int, ...], dilation: tuple[int, int, int], stride: tuple[int, ...]
) -> tuple[tuple[int, int], Any, tuple[int, int, int, int, int, int]]:
    """((front, back), conv2d's padding for height and width, all six amounts) from an
    int, a triple, ``"valid"`` or ``"same"`` (extra padding after, as in PyTorch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), 0, (0,) * 6
        if padding == "same":
            if stride != (1, 1, 1):
                raise ArgumentError(
                    "conv3d: padding='same' is not supported for strided convolutions "
                    f"(stride {stride}), as in PyTorch"
                )
            amounts = _same_padding(kernel, dilation)
            return (amounts[0], amounts[1]), "same", tuple(amounts)  # type: ignore[return-value]
        raise ArgumentError(
            f"conv3d: padding must be an int, a triple, 'valid' or 'same', got {padding!r}"
        )
    pd, ph, pw = _triple(padding, "padding")
    if min(pd, ph, pw) < 0:
        raise ArgumentError(f"conv3d: padding must be non-negative, got {padding!r}")
    return (pd, pd), (ph, pw), (pd, pd, ph, ph, pw, pw)


def conv3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """3-d convolution (cross-correlation), as ``torch.nn.functional.conv3d``.

    ``input`` is (N, C, D, H, W) (or unbatched (C, D, H, W)), ``weight`` is
    (out_channels, C / groups, kd, kh, kw), ``bias`` is (out_channels,). ``stride``,
    ``padding`` and ``dilation`` are ints or triples; ``padding`` may also be
    ``"valid"`` or ``"same"`` (stride 1).

    >>> import kernelgrad as kg
    >>> x = kg.ones(1, 1, 3, 4, 4)
    >>> kg.nn.functional.conv3d(x, kg.ones(1, 1, 2, 3, 3)).tolist()
    [[[[[18.0, 18.0], [18.0, 18.0]], [[18.0, 18.0], [18.0, 18.0]]]]]
    """
    op = "conv3d"
    x, unbatched = _batched(input, op, 5)
    if weight.ndim != 5:
        raise ShapeError(
            f"{op}: the weight must be (out_channels, in_channels / groups, kd, kh, kw), got "
            f"shape {format_shape(weight.shape)}"
        )
    _check_float(x, op)
    _check_operands(op, x, weight, bias)
    _check_groups(op, input, x.shape[1], weight, bias, groups)
    strides = _triple(stride, "stride")
    dilations = _triple(dilation, "dilation")
    if min(strides) < 1 or min(dilations) < 1:
        raise ArgumentError(f"{op}: stride and dilation must be positive")
    kernel = tuple(weight.shape[2:])
    depth_pads, plane_padding, pads = _depth_and_plane_padding(padding, kernel, dilations, strides)
    padded = [size + pads[2 * k] + pads[2 * k + 1] for k, size in enumerate(x.shape[2:])]
    if any(p < d * (k - 1) + 1 for p, d, k in zip(padded, dilations, kernel)):
        raise ShapeError(
            f"{op}: the kernel ({'x'.join(map(str, kernel))}, dilation {dilations}) is "
            f"larger than the padded input ({'x'.join(map(str, padded))}) for input shape "
            f"{format_shape(input.shape)}"
        )
    if any(depth_pads):
        x = _pad_constant(x, (0, 0, 0, 0) + depth_pads, 0.0)
    result = _conv3d_as_2d(x, weight, bias, strides, plane_padding, dilations, groups)
    return result.squeeze(0) if unbatched else result
