"""Pooling layers: ``MaxPool1d/2d/3d``, ``MaxUnpool1d/2d/3d``, ``AvgPool1d/2d/3d``,
``AdaptiveAvgPool1d/2d/3d``, ``AdaptiveMaxPool1d/2d/3d`` and ``LPPool1d/2d/3d``; the
resampling layers ``Upsample``, ``UpsamplingNearest2d`` and ``UpsamplingBilinear2d``."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module


def _one_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


__all__ = [
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "MaxPool1d",
    "MaxPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "AdaptiveAvgPool2d",
    "MaxPool3d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "Upsample",
    "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
]


class MaxPool2d(Module):
    """Maximum over ``kernel_size`` windows (``stride`` defaults to ``kernel_size``).

    >>> import kernelgrad as kg
    >>> kg.nn.MaxPool2d(2)(kg.zeros(1, 3, 8, 8)).shape
    kg.Size([1, 3, 4, 4])
    """

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.ceil_mode = ceil_mode
        self.return_indices = return_indices

    def forward(self, input: Tensor) -> Tensor:
        return F.max_pool2d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
            self.return_indices,
        )  # fmt: skip

    def forward_relu(self, input: Tensor) -> Tensor:
        """``relu(self(input))`` in one kernel each way (``Sequential`` uses it)."""
        return F.max_pool2d_relu(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(MaxPool2d):
    """Maximum over windows of (N, C, L) input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.max_pool1d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
            self.return_indices,
        )  # fmt: skip


class AvgPool2d(Module):
    """Mean over ``kernel_size`` windows (zero padding).

    >>> import kernelgrad as kg
    >>> kg.nn.AvgPool2d(2)(kg.ones(1, 1, 4, 4)).tolist()
    [[[[1.0, 1.0], [1.0, 1.0]]]]
    """

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(AvgPool2d):
    """Mean over windows of (N, C, L) input. Its sizes are kept as 1-tuples, as PyTorch's
    (``kernel_size=(2,)``)."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.kernel_size = _one_tuple(self.kernel_size)
        self.stride = _one_tuple(self.stride)
        self.padding = _one_tuple(self.padding)

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
        )


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed ``output_size`` whatever the input size.

    >>> import kernelgrad as kg
    >>> kg.nn.AdaptiveAvgPool2d((1, 1))(kg.ones(2, 8, 5, 5)).shape
    kg.Size([2, 8, 1, 1])
    """

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class Upsample(Module):
    """``F.interpolate`` as a layer: resize to ``size`` or by ``scale_factor``.

    >>> import kernelgrad as kg
    >>> kg.nn.Upsample(scale_factor=2)(kg.zeros(1, 3, 4, 4)).shape
    kg.Size([1, 3, 8, 8])
    """

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.size = size
        # floats, as PyTorch stores them (its repr shows scale_factor=2.0)
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(
            input, self.size, self.scale_factor, self.mode, self.align_corners,
            self.recompute_scale_factor,
        )  # fmt: skip

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            return f"scale_factor={self.scale_factor}, mode={self.mode!r}"
        return f"size={self.size}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample`` with mode ``"nearest"``."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample`` with mode ``"bilinear"`` and ``align_corners=True`` (as PyTorch's)."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


class MaxPool3d(MaxPool2d):
    """Maximum over (kd, kh, kw) windows of (N, C, D, H, W) input (``stride`` defaults to
    ``kernel_size``).

    >>> import kernelgrad as kg
    >>> kg.nn.MaxPool3d(2)(kg.zeros(1, 3, 4, 8, 8)).shape
    kg.Size([1, 3, 2, 4, 4])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.max_pool3d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
            self.return_indices,
        )  # fmt: skip


class AvgPool3d(AvgPool2d):
    """Mean over (kd, kh, kw) windows of (N, C, D, H, W) input (zero padding).

    >>> import kernelgrad as kg
    >>> kg.nn.AvgPool3d(2)(kg.ones(1, 1, 2, 2, 2)).tolist()
    [[[[[1.0]]]]]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool3d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad, self.divisor_override,
        )  # fmt: skip


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """Average pooling of (N, C, L) input to ``output_size`` cells."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool3d(AdaptiveAvgPool2d):
    """Average pooling of (N, C, D, H, W) input to a fixed ``output_size``.

    >>> import kernelgrad as kg
    >>> kg.nn.AdaptiveAvgPool3d((1, 2, 2))(kg.ones(2, 3, 4, 5, 6)).shape
    kg.Size([2, 3, 1, 2, 2])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool2d(Module):
    """Max pooling to a fixed ``output_size`` whatever the input size (``return_indices``
    is not supported).

    >>> import kernelgrad as kg
    >>> kg.nn.AdaptiveMaxPool2d(3)(kg.ones(2, 4, 7, 5)).shape
    kg.Size([2, 4, 3, 3])
    """

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    """Max pooling of (N, C, L) input to ``output_size`` cells."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(AdaptiveMaxPool2d):
    """Max pooling of (N, C, D, H, W) input to a fixed ``output_size``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class LPPool2d(Module):
    """Power-average pooling ``(sum x**p)**(1/p)`` over windows (``p = norm_type``).

    >>> import kernelgrad as kg
    >>> kg.nn.LPPool2d(2, 2)(kg.ones(1, 1, 2, 2)).tolist()
    [[[[2.0]]]]
    """

    def __init__(
        self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
    ) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return F.lp_pool2d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(LPPool2d):
    """Power-average pooling of (N, C, L) input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.lp_pool1d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool3d(LPPool2d):
    """Power-average pooling of (N, C, D, H, W) input."""

    def forward(self, input: Tensor) -> Tensor:
        return F.lp_pool3d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class _MaxUnpoolNd(Module):
    """The inverse of ``MaxPool{n}d``: ``forward(input, indices, output_size=None)`` puts
    each value at its index (from ``MaxPool{n}d(..., return_indices=True)``) in a zero
    output of the pooled input's size (or ``output_size``)."""

    _dims = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        n = self._dims
        self.kernel_size = _n_tuple(kernel_size, n)
        self.stride = _n_tuple(stride if stride is not None else kernel_size, n)
        self.padding = _n_tuple(padding, n)

    def forward(self, input: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        unpool = (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d)[self._dims - 1]
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


def _n_tuple(value: Any, n: int) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of ``MaxPool1d`` (see ``MaxUnpool2d``)."""

    _dims = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of ``MaxPool2d``: each pooled value back at the position of its
    maximum, zeros elsewhere.

    >>> import kernelgrad as kg
    >>> pool, unpool = kg.nn.MaxPool2d(2, return_indices=True), kg.nn.MaxUnpool2d(2)
    >>> unpool(*pool(kg.tensor([[[[1.0, 5.0], [7.0, 2.0]]]]))).tolist()
    [[[[0.0, 0.0], [7.0, 0.0]]]]
    """

    _dims = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of ``MaxPool3d`` (see ``MaxUnpool2d``)."""

    _dims = 3
