"""``Dropout``, ``Dropout1d``, ``Dropout2d`` and ``Dropout3d`` (whole channels), and
``AlphaDropout`` and ``FeatureAlphaDropout`` (for SELU networks)."""

from __future__ import annotations

from ..errors import ArgumentError
from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = [
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "AlphaDropout",
    "FeatureAlphaDropout",
]


class Dropout(Module):
    """Zero each element with probability ``p`` in training mode (scaling the rest by
    1 / (1 - p)); the identity in eval mode.

    >>> import kernelgrad as kg
    >>> drop = kg.nn.Dropout(0.5).eval()
    >>> drop(kg.ones(3)).tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ArgumentError(f"Dropout: p must be between 0 and 1, got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout2d(Dropout):
    """Zero whole channels (each (H, W) plane of an (N, C, H, W) or (C, H, W) input)
    with probability ``p`` in training mode, scaling the rest by 1 / (1 - p).

    >>> import kernelgrad as kg
    >>> kg.nn.Dropout2d(0.5).eval()(kg.ones(1, 2, 1, 1)).tolist()
    [[[[1.0]], [[1.0]]]]
    """

    _spatial_dims = 2

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_dropout(
            input, self.p, self.training, self._spatial_dims, type(self).__name__, self.inplace
        )


class Dropout1d(Dropout2d):
    """Zero whole channels of an (N, C, L) or (C, L) input with probability ``p``."""

    _spatial_dims = 1


class Dropout3d(Dropout2d):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability
    ``p``, scaling the rest by 1 / (1 - p).

    >>> import kernelgrad as kg
    >>> kg.nn.Dropout3d(0.5).eval()(kg.ones(2, 1, 1, 1)).shape
    kg.Size([2, 1, 1, 1])
    """

    _spatial_dims = 3


class AlphaDropout(Dropout):
    """Dropout for SELU networks (as ``torch.nn.AlphaDropout``): in training mode, each
    element is set with probability ``p`` to SELU's negative saturation value, and an
    affine correction keeps zero mean and unit variance; the identity in eval mode.

    >>> import kernelgrad as kg
    >>> kg.nn.AlphaDropout(0.2).eval()(kg.ones(2)).tolist()
    [1.0, 1.0]
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(Dropout):
    """``AlphaDropout`` of whole channels of an (N, C, ...) input: one draw per (sample,
    channel)."""

    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)
