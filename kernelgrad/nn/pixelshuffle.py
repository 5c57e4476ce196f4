"""``PixelShuffle`` and ``PixelUnshuffle``: sub-pixel rearrangement between channels and
the two trailing spatial dims; ``ChannelShuffle``: interleaving groups of channels."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle", "ChannelShuffle"]


class PixelShuffle(Module):
    """(*, C * r * r, H, W) to (*, C, H * r, W * r), r = ``upscale_factor``.

    >>> import kernelgrad as kg
    >>> kg.nn.PixelShuffle(3)(kg.zeros(1, 9, 4, 4)).shape
    kg.Size([1, 1, 12, 12])
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) to (*, C * r * r, H, W), r = ``downscale_factor``.

    >>> import kernelgrad as kg
    >>> kg.nn.PixelUnshuffle(2)(kg.zeros(1, 1, 4, 4)).shape
    kg.Size([1, 4, 2, 2])
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave ``groups`` groups of the channels of an (N, C, *) input (ShuffleNet).

    >>> import kernelgrad as kg
    >>> kg.nn.ChannelShuffle(2)(kg.arange(4.0).reshape(1, 4, 1)).reshape(-1).tolist()
    [0.0, 2.0, 1.0, 3.0]
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
