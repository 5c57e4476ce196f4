"""3-d max and average pooling, and power-average (LP) pooling.

Max and average pooling over a box window are separable: the maximum (or sum) over a
(kd, kh, kw) box is the maximum (or sum) over the kd depth taps of each plane's (kh, kw)
maximum (or sum). So ``max_pool3d`` and ``avg_pool3d`` are two 2-d poolings: one over the
(H, W) planes of an (N, C * D, H, W) view of the input, then one with a (kd, 1) window
over an (N, C, D, OH * OW) view of that result, which reuses the 2-d kernels and their
gradients on every backend. Average pooling's divisor is separable too (the cells a
window counts form a box, so their number is a product of per-dim counts), and the
max-pool gradient still goes to the first maximum in (depth, row, column) order, as in
PyTorch: each plane keeps its first maximum, then depth picks the first plane."""

from __future__ import annotations

from typing import Any

from ...errors import ArgumentError, ShapeError, format_shape
from ...tensor import Tensor
from ._layout import _batched, _check_float, _pair, _single, _triple
from .pooling import _pool_size, avg_pool1d, avg_pool2d, max_pool2d


def _plan3d(
    op: str,
    x: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
) -> tuple[tuple[int, int, int], ...]:
    """(kernel, stride, padding, dilation) triples, checked as PyTorch checks them."""
    kernel = _triple(kernel_size, "kernel_size")
    strides = kernel if stride is None or stride == [] else _triple(stride, "stride")
    pads = _triple(padding, "padding")
    dilations = _triple(dilation, "dilation")
    if min(kernel + strides + dilations) < 1:
        raise ArgumentError(f"{op}: kernel_size, stride and dilation must be positive")
    if min(pads) < 0 or any(p > k // 2 for p, k in zip(pads, kernel)):
        raise ArgumentError(
            f"{op}: padding {pads} must be non-negative and at most half the kernel size {kernel}"
        )
    for size, k, s, p, d in zip(x.shape[2:], kernel, strides, pads, dilations):
        if _pool_size(size, k, s, p, d, ceil_mode) <= 0:
            raise ShapeError(
                f"{op}: the window {'x'.join(map(str, kernel))} (dilation {dilations}) does "
                f"not fit the input of shape {format_shape(x.shape)} (with padding {pads})"
            )
    return kernel, strides, pads, dilations


def _planes(x: Tensor) -> Tensor:
    n, c, d, h, w = x.shape
    return x.reshape(n, c * d, h, w)


def _depth_rows(pooled: Tensor, n: int, c: int, d: int) -> Tensor:
    """(N, C * D, OH, OW) plane results as (N, C, D, OH * OW): depth as the height."""
    return pooled.reshape(n, c, d, -1)


def max_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    """Maximum over (kd, kh, kw) windows of (N, C, D, H, W) or (C, D, H, W) input
    (``stride`` defaults to ``kernel_size``, padding with -inf); the gradient of a window
    goes to its first maximum, as in PyTorch.

    >>> import kernelgrad as kg
    >>> x = kg.arange(64.0).reshape(1, 1, 4, 4, 4)
    >>> kg.nn.functional.max_pool3d(x, 2)[0, 0, 0].tolist()
    [[21.0, 23.0], [29.0, 31.0]]
    """
    op = "max_pool3d"
    if return_indices:  # (values, indices): see pool_indices.py
        from .pool_indices import max_pool_with_indices

        return max_pool_with_indices(input, 3, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(input, op, 5)
    _check_float(x, op)
    kernel, strides, pads, dilations = _plan3d(
        op, x, kernel_size, stride, padding, dilation, ceil_mode
    )
    n, c, d, _, _ = x.shape
    planes = max_pool2d(_planes(x), kernel[1:], strides[1:], pads[1:], dilations[1:], ceil_mode)
    oh, ow = planes.shape[2:]
    result = max_pool2d(
        _depth_rows(planes, n, c, d), (kernel[0], 1), (strides[0], 1), (pads[0], 0),
        (dilations[0], 1), ceil_mode,
    )  # fmt: skip
    result = result.reshape(n, c, -1, oh, ow)
    return result.squeeze(0) if unbatched else result


def avg_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over (kd, kh, kw) windows of (N, C, D, H, W) or (C, D, H, W) input (zero
    padding; ``count_include_pad`` and ``divisor_override`` as in PyTorch).

    >>> import kernelgrad as kg
    >>> x = kg.arange(8.0).reshape(1, 1, 2, 2, 2)
    >>> kg.nn.functional.avg_pool3d(x, 2).tolist()
    [[[[[3.5]]]]]
    """
    op = "avg_pool3d"
    x, unbatched = _batched(input, op, 5)
    _check_float(x, op)
    if divisor_override is not None and divisor_override == 0:
        raise ArgumentError(f"{op}: divisor_override must be non-zero")
    kernel, strides, pads, _ = _plan3d(op, x, kernel_size, stride, padding, 1, ceil_mode)
    n, c, d, _, _ = x.shape
    plane_divisor = None if divisor_override is None else 1
    planes = avg_pool2d(
        _planes(x), kernel[1:], strides[1:], pads[1:], ceil_mode, count_include_pad,
        plane_divisor,
    )  # fmt: skip
    oh, ow = planes.shape[2:]
    result = avg_pool2d(
        _depth_rows(planes, n, c, d), (kernel[0], 1), (strides[0], 1), (pads[0], 0), ceil_mode,
        count_include_pad, divisor_override,
    )  # fmt: skip
    result = result.reshape(n, c, -1, oh, ow)
    return result.squeeze(0) if unbatched else result


def _lp(average: Tensor, norm_type: float, taps: int) -> Tensor:
    # PyTorch's formula: (sign(out) * relu(|out|) * taps) ** (1 / p)
    return (average.sign() * average.abs().relu() * taps) ** (1.0 / norm_type)


def _check_norm_type(norm_type: float, op: str) -> None:
    if norm_type == 0:
        raise ArgumentError(f"{op}: norm_type must be non-zero (the result is a 1/norm_type power)")


def lp_pool1d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling of (N, C, L) or (C, L) input: ``(sum x**p)**(1/p)`` over each
    window (``p = norm_type``; p = 1 is sum pooling, large p approaches max pooling).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.lp_pool1d(kg.tensor([[[3.0, 4.0]]]), 2, 2).tolist()
    [[[5.0]]]
    """
    _check_norm_type(norm_type, "lp_pool1d")
    k = _single(kernel_size, "kernel_size")
    average = avg_pool1d(input**norm_type, k, stride, 0, ceil_mode)
    return _lp(average, norm_type, k)


def lp_pool2d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling of (N, C, H, W) or (C, H, W) input: ``(sum x**p)**(1/p)``
    over each window."""
    _check_norm_type(norm_type, "lp_pool2d")
    kh, kw = _pair(kernel_size, "kernel_size")
    average = avg_pool2d(input**norm_type, (kh, kw), stride, 0, ceil_mode)
    return _lp(average, norm_type, kh * kw)


def lp_pool3d(
    input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling of (N, C, D, H, W) or (C, D, H, W) input."""
    _check_norm_type(norm_type, "lp_pool3d")
    kd, kh, kw = _triple(kernel_size, "kernel_size")
    average = avg_pool3d(input**norm_type, (kd, kh, kw), stride, 0, ceil_mode)
    return _lp(average, norm_type, kd * kh * kw)


__all__ = ["max_pool3d", "avg_pool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d"]
