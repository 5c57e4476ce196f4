"""Normalisation layers: ``BatchNorm1d``, ``BatchNorm2d`` and ``LayerNorm``."""

from __future__ import annotations

from typing import Any

from .. import autograd
from ..dtypes import int64
from ..errors import ArgumentError
from ..ops.creation import ones, tensor, zeros
from ..tensor import Tensor
from . import functional as F
from .module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm"]


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
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(ones(num_features, device=device, dtype=dtype))
            self.bias = Parameter(zeros(num_features, device=device, dtype=dtype))
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
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) input, per channel C.

    >>> import kernelgrad as kg
    >>> bn = kg.nn.BatchNorm1d(3)
    >>> bn(kg.randn(8, 3)).shape, [name for name, _ in bn.named_buffers()]
    ((8, 3), ['running_mean', 'running_var', 'num_batches_tracked'])
    """

    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) input, per channel C; running statistics
    (buffers) are used in eval mode.

    >>> import kernelgrad as kg
    >>> kg.nn.BatchNorm2d(4)(kg.randn(2, 4, 3, 3)).shape
    (2, 4, 3, 3)
    """

    _input_dims = (4,)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims, with an elementwise affine
    transform (``weight`` ones and ``bias`` zeros at start).

    >>> import kernelgrad as kg
    >>> kg.nn.LayerNorm(8)(kg.randn(2, 5, 8)).shape
    (2, 5, 8)
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
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
