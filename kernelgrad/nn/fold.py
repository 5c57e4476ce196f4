"""``Unfold`` and ``Fold``: ``F.unfold`` (im2col) and ``F.fold`` (col2im) as layers."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = ["Unfold", "Fold"]


class Unfold(Module):
    """Extract sliding blocks as columns: (N, C, H, W) -> (N, C * kh * kw, L).

    >>> import kernelgrad as kg
    >>> kg.nn.Unfold(kernel_size=(2, 3))(kg.zeros(2, 5, 3, 4)).shape
    kg.Size([2, 30, 4])
    """

    def __init__(
        self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
            f"padding={self.padding}, stride={self.stride}"
        )


class Fold(Module):
    """Sum columns of sliding blocks into an image: (N, C * kh * kw, L) ->
    (N, C, *output_size).

    >>> import kernelgrad as kg
    >>> kg.nn.Fold(output_size=(4, 5), kernel_size=2)(kg.zeros(1, 12, 12)).shape
    kg.Size([1, 3, 4, 5])
    """

    def __init__(
        self,
        output_size: Any,
        kernel_size: Any,
        dilation: Any = 1,
        padding: Any = 0,
        stride: Any = 1,
    ) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(
            input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
            f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}"
        )
