"""``unfold`` (im2col) and ``fold`` (col2im) of batched images.

``unfold`` is a view: ``Tensor.unfold`` along the height and then the width of the
zero-padded input gives the (N, C, OH, OW, kh, kw) patches, which are reordered to
PyTorch's (N, C * kh * kw, OH * OW). ``fold`` sums such columns back onto the positions
they came from with ``unfold_backward`` (the gradient of ``Tensor.unfold``, itself
differentiable), then drops the padding. Each is the other's adjoint, so their
gradients are each other."""

from __future__ import annotations

from typing import Any

from ...errors import ArgumentError, ShapeError, format_shape
from ...ops.movement import pad as _pad_constant
from ...ops.movement import unfold_backward
from ...tensor import Tensor
from ._layout import _pair


def _options(
    op: str, kernel_size: Any, dilation: Any, padding: Any, stride: Any
) -> tuple[tuple[int, int], ...]:
    kernel = _pair(kernel_size, "kernel_size")
    dilations = _pair(dilation, "dilation")
    pads = _pair(padding, "padding")
    strides = _pair(stride, "stride")
    if min(kernel + dilations + strides) < 1 or min(pads) < 0:
        raise ArgumentError(
            f"{op}: kernel_size, dilation and stride must be positive and padding "
            f"non-negative, got kernel_size={kernel_size!r}, dilation={dilation!r}, "
            f"padding={padding!r}, stride={stride!r}"
        )
    return kernel, dilations, pads, strides


def _blocks(size: tuple[int, int], kernel, dilations, pads, strides) -> tuple[int, int]:
    return tuple(  # type: ignore[return-value]
        (n + 2 * p - d * (k - 1) - 1) // s + 1
        for n, k, d, p, s in zip(size, kernel, dilations, pads, strides)
    )


def unfold(
    input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """The sliding (kh, kw) blocks of an (N, C, H, W) or (C, H, W) input as columns:
    (N, C * kh * kw, L), with L the number of blocks (im2col).

    >>> import kernelgrad as kg
    >>> x = kg.arange(9.0).reshape(1, 1, 3, 3)
    >>> kg.nn.functional.unfold(x, 2).tolist()
    [[[0.0, 1.0, 3.0, 4.0], [1.0, 2.0, 4.0, 5.0], [3.0, 4.0, 6.0, 7.0], [4.0, 5.0, 7.0, 8.0]]]
    """
    op = "unfold"
    if input.ndim not in (3, 4):
        raise ShapeError(
            f"{op}: expected a 4-d (N, C, H, W) or 3-d (C, H, W) input, got shape "
            f"{format_shape(input.shape)}"
        )
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _options(op, kernel_size, dilation, padding, stride)
    oh, ow = _blocks(x.shape[2:], (kh, kw), (dh, dw), (ph, pw), (sh, sw))
    if oh < 1 or ow < 1:
        raise ShapeError(
            f"{op}: the {kh}x{kw} kernel (dilation ({dh}, {dw})) does not fit the input of "
            f"shape {format_shape(input.shape)} with padding ({ph}, {pw})"
        )
    if ph or pw:
        x = _pad_constant(x, (pw, pw, ph, ph), 0.0)
    n, c = x.shape[:2]
    patches = x.unfold(2, kh, sh, dh).unfold(3, kw, sw, dw)  # (N, C, OH, OW, kh, kw)
    columns = patches.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)
    return columns.squeeze(0) if unbatched else columns


def fold(
    input: Tensor,
    output_size: Any,
    kernel_size: Any,
    dilation: Any = 1,
    padding: Any = 0,
    stride: Any = 1,
) -> Tensor:
    """Sum columns of sliding blocks, (N, C * kh * kw, L) or (C * kh * kw, L), into an
    (N, C, H, W) image of ``output_size`` (col2im; overlapping blocks add up).

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> F.fold(F.unfold(kg.ones(1, 1, 3, 3), 2), (3, 3), 2).tolist()
    [[[[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]]]
    """
    op = "fold"
    if input.ndim not in (2, 3):
        raise ShapeError(
            f"{op}: expected a 3-d (N, C * kh * kw, L) or 2-d (C * kh * kw, L) input, got "
            f"shape {format_shape(input.shape)}"
        )
    unbatched = input.ndim == 2
    cols = input.unsqueeze(0) if unbatched else input
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _options(op, kernel_size, dilation, padding, stride)
    h, w = _pair(output_size, "output_size")
    n, rows, length = cols.shape
    if rows % (kh * kw):
        raise ShapeError(
            f"{op}: dim 1 of the input of shape {format_shape(input.shape)} has size {rows}, "
            f"which is not a multiple of the kernel's {kh * kw} taps ({kh}x{kw})"
        )
    oh, ow = _blocks((h, w), (kh, kw), (dh, dw), (ph, pw), (sh, sw))
    if oh < 1 or ow < 1 or oh * ow != length:
        raise ShapeError(
            f"{op}: an output of size ({h}, {w}) with kernel {kh}x{kw}, dilation ({dh}, {dw}), "
            f"padding ({ph}, {pw}) and stride ({sh}, {sw}) has {max(oh, 0) * max(ow, 0)} "
            f"blocks, but the input of shape {format_shape(input.shape)} has {length}"
        )
    c = rows // (kh * kw)
    hp, wp = h + 2 * ph, w + 2 * pw
    patches = cols.reshape(n, c, kh, kw, oh, ow).permute(0, 1, 4, 5, 2, 3)
    rows_summed = unfold_backward(patches, (n, c, oh, wp, kh), 3, kw, sw, dw)
    image = unfold_backward(rows_summed, (n, c, hp, wp), 2, kh, sh, dh)
    if ph or pw:
        image = image[:, :, ph : ph + h, pw : pw + w]
    return image.squeeze(0) if unbatched else image
