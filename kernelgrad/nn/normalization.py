"""Normalisation layers: ``BatchNorm1d/2d/3d``, ``LayerNorm``, ``GroupNorm``,
``InstanceNorm1d/2d/3d``, ``RMSNorm`` and ``LocalResponseNorm``."""

from __future__ import annotations

import warnings
from typing import Any

from .. import autograd
from ..dtypes import int64
from ..errors import ArgumentError, ShapeError, format_shape
from ..ops.creation import ones, tensor, zeros
from ..tensor import Tensor
from . import functional as F
from .module import Module, Parameter

__all__ = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LayerNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "RMSNorm",
    "LocalResponseNorm",
    "CrossMapLRN2d",
]


class _BatchNorm(Module):
    _input_dims: tuple[int, ...] = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:  # bias=False: a learned scale without a shift (PyTorch 2.x)
            self.weight = Parameter(ones(num_features, device=device, dtype=dtype))
            self.bias = Parameter(zeros(num_features, device=device, dtype=dtype)) if bias else None
        else:
            self.weight = None
            self.bias = None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with autograd.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def _check_input(self, input: Tensor) -> None:
        if input.ndim not in self._input_dims:
            raise ArgumentError(
                f"{type(self).__name__} expects a {' or '.join(map(str, self._input_dims))}-d "
                f"input, got shape {input.shape}"
            )
        if input.shape[1] != self.num_features:
            raise ArgumentError(
                f"{type(self).__name__}({self.num_features}) got an input with "
                f"{input.shape[1]} channels (shape {input.shape})"
            )

    def forward(self, input: Tensor) -> Tensor:
        self._check_input(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        use_batch_stats = self.training or self.running_mean is None
        if self.training and self.track_running_stats:
            with autograd.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        update = self.training and self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if (update or not use_batch_stats) else None,
            self.running_var if (update or not use_batch_stats) else None,
            self.weight,
            self.bias,
            use_batch_stats,
            momentum,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) input, per channel C.

    >>> import kernelgrad as kg
    >>> bn = kg.nn.BatchNorm1d(3)
    >>> bn(kg.randn(8, 3)).shape, [name for name, _ in bn.named_buffers()]
    (kg.Size([8, 3]), ['running_mean', 'running_var', 'num_batches_tracked'])
    """

    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) input, per channel C; running statistics
    (buffers) are used in eval mode.

    >>> import kernelgrad as kg
    >>> kg.nn.BatchNorm2d(4)(kg.randn(2, 4, 3, 3)).shape
    kg.Size([2, 4, 3, 3])
    """

    _input_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W) input, per channel C.

    >>> import kernelgrad as kg
    >>> kg.nn.BatchNorm3d(2)(kg.randn(2, 2, 3, 2, 2)).shape
    kg.Size([2, 2, 3, 2, 2])
    """

    _input_dims = (5,)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims, with an elementwise affine
    transform (``weight`` ones and ``bias`` zeros at start).

    >>> import kernelgrad as kg
    >>> kg.nn.LayerNorm(8)(kg.randn(2, 5, 8)).shape
    kg.Size([2, 5, 8])
    """

    def __init__(
        self,
        normalized_shape: Any,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, device=device, dtype=dtype))
            self.bias = (
                Parameter(zeros(self.normalized_shape, device=device, dtype=dtype))
                if bias
                else None
            )
        else:
            self.weight = None
            self.bias = None

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class GroupNorm(Module):
    """Group normalisation of an (N, C, ...) input: the C channels are split into
    ``num_groups`` groups, each normalised per sample, then a per-channel affine
    transform (``weight`` ones and ``bias`` zeros at start).

    >>> import kernelgrad as kg
    >>> kg.nn.GroupNorm(2, 4)(kg.randn(3, 4, 5)).shape
    kg.Size([3, 4, 5])
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ArgumentError(
                f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                f"({num_groups})"
            )
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(ones(num_channels, device=device, dtype=dtype))
            self.bias = Parameter(zeros(num_channels, device=device, dtype=dtype)) if bias else None
        else:
            self.weight = None
            self.bias = None

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class _InstanceNorm(_BatchNorm):
    _spatial_dims = 1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )

    def forward(self, input: Tensor) -> Tensor:
        unbatched = self._spatial_dims + 1
        if input.ndim not in (unbatched, unbatched + 1):
            raise ShapeError(
                f"{type(self).__name__}: expected a {unbatched + 1}-d (batched) or "
                f"{unbatched}-d input, got shape {format_shape(input.shape)}"
            )
        feature_dim = input.ndim - unbatched
        if input.shape[feature_dim] != self.num_features:
            if self.affine or self.track_running_stats:
                raise ArgumentError(
                    f"{type(self).__name__}({self.num_features}): expected the input's size "
                    f"at dim={feature_dim} to match num_features ({self.num_features}), but "
                    f"got {input.shape[feature_dim]} (input of shape "
                    f"{format_shape(input.shape)})"
                )
            warnings.warn(
                f"{type(self).__name__}: the input's size at dim={feature_dim} does not match "
                "num_features, which is not used because affine=False",
                stacklevel=2,
            )
        batched = input if feature_dim == 1 else input.unsqueeze(0)
        result = F.instance_norm(
            batched,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return result if feature_dim == 1 else result.squeeze(0)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of an (N, C, L) or (C, L) input: each (sample, channel)
    normalised over L. By default without affine parameters or running statistics, as
    PyTorch.

    >>> import kernelgrad as kg
    >>> kg.nn.InstanceNorm1d(3)(kg.randn(2, 3, 5)).shape
    kg.Size([2, 3, 5])
    """

    _spatial_dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of an (N, C, H, W) or (C, H, W) input over (H, W)."""

    _spatial_dims = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of an (N, C, D, H, W) or (C, D, H, W) input over (D, H, W)."""

    _spatial_dims = 3


class RMSNorm(Module):
    """Root mean square normalisation over the trailing ``normalized_shape`` dims, with an
    elementwise ``weight`` (ones at start; no bias). ``eps=None`` uses the machine epsilon
    of the input's dtype, as PyTorch.

    >>> import kernelgrad as kg
    >>> norm = kg.nn.RMSNorm(8)
    >>> norm(kg.randn(2, 5, 8)).shape, [name for name, _ in norm.named_parameters()]
    (kg.Size([2, 5, 8]), ['weight'])
    """

    def __init__(
        self,
        normalized_shape: Any,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = (
            Parameter(ones(self.normalized_shape, device=device, dtype=dtype))
            if elementwise_affine
            else None
        )

    def reset_parameters(self) -> None:
        if self.weight is not None:
            with autograd.no_grad():
                self.weight.fill_(1.0)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class LocalResponseNorm(Module):
    """Local response normalisation across channels (dim 1) of an (N, C, ...) input:
    ``x / (k + alpha / size * sum of x**2 over `size` neighbouring channels) ** beta``.

    >>> import kernelgrad as kg
    >>> kg.nn.LocalResponseNorm(2)(kg.ones(1, 4, 3, 3)).shape
    kg.Size([1, 4, 3, 3])
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(Module):
    """PyTorch's legacy ``nn.CrossMapLRN2d`` (from Lua Torch): local response
    normalisation across the channels of an (N, C, H, W) input,
    ``x / (k + alpha / size * s) ** beta`` with ``s`` a sum of squares over a window of
    channels, computed as PyTorch computes it. PyTorch's running window never drops
    channel 0: channel c sums channel 0 and channels ``max(1, c - p + 1)`` to
    ``min(c + p - 1, C - 1)``, ``p = (size - 1) // 2 + 1`` (``LocalResponseNorm``
    sums the symmetric window). kernelgrad gives the same values, and their exact
    gradient; PyTorch's hand-written backward is not the derivative of its forward (its
    own ``gradcheck`` fails), so the gradients differ from PyTorch's.

    >>> import kernelgrad as kg
    >>> kg.nn.CrossMapLRN2d(3)(kg.ones(1, 4, 2, 2)).shape
    kg.Size([1, 4, 2, 2])
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        import numpy as np

        if input.ndim != 4:
            raise ShapeError(
                f"CrossMapLRN2d: expected a 4-d (N, C, H, W) input, got shape "
                f"{format_shape(input.shape)}"
            )
        batch, channels, height, width = input.shape
        reach = int((self.size - 1) / 2 + 1)
        window = np.zeros((channels, channels))
        for c in range(channels):
            window[c, 0] = 1.0
            window[c, max(1, c - reach + 1) : min(c + reach - 1, channels - 1) + 1] = 1.0
        sums = tensor(window, dtype=input.dtype, device=input.device) @ (input * input).reshape(
            batch, channels, height * width
        )
        scale = sums.reshape(input.shape) * (self.alpha / self.size) + self.k
        return input * scale.pow(-self.beta)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
