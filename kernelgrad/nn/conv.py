"""Convolution layers: ``Conv1d``, ``Conv2d``, ``Conv3d``, ``ConvTranspose1d``,
``ConvTranspose2d`` and ``ConvTranspose3d``."""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError
from ..ops.creation import empty
from ..tensor import Tensor
from . import functional as F
from . import init
from .functional._layout import _same_padding
from .module import Module, Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value: Any, n: int) -> tuple:
    if isinstance(value, str):
        return value  # type: ignore[return-value]
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ArgumentError(f"expected an int or a {n}-tuple, got {value!r}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


class _ConvNd(Module):
    _dims = 2
    _transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if padding_mode not in PADDING_MODES:
            raise ArgumentError(
                f"{type(self).__name__}: padding_mode must be one of "
                f"{', '.join(map(repr, PADDING_MODES))}, got {padding_mode!r}"
            )
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ArgumentError(
                f"{type(self).__name__}: padding must be an int, a tuple, 'same' or 'valid', "
                f"got {padding!r}"
            )
        self.padding_mode = padding_mode
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ArgumentError(
                f"groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        n = self._dims
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride, n)
        self.padding = _tuple(padding, n)
        self.dilation = _tuple(dilation, n)
        self.groups = groups
        shape = (out_channels, in_channels // groups) + self.kernel_size
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        self.weight = Parameter(empty(shape, device=device, dtype=dtype))
        self.bias = Parameter(empty(out_channels, device=device, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.default_linear_init_(self.weight, self.bias)

    def extra_repr(self) -> str:
        text = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        # as PyTorch's: a string padding and the padding mode without quotes
        if self.padding != (0,) * self._dims:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            text += f", dilation={self.dilation}"
        output_padding = getattr(self, "output_padding", None)
        if output_padding is not None and output_padding != (0,) * self._dims:
            text += f", output_padding={output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text

    def _padded(self, input: Tensor) -> tuple[Tensor, Any]:
        """The input and the padding the convolution itself applies: unchanged for
        ``padding_mode="zeros"``; otherwise the input padded by ``F.pad`` in that mode
        (``"reflect"``, ``"replicate"``, ``"circular"``) and no padding left, as in
        PyTorch."""
        if self.padding_mode == "zeros":
            return input, self.padding
        if self.padding == "same":
            pairs = _same_padding(self.kernel_size, self.dilation)
        elif self.padding == "valid":
            pairs = [0] * (2 * self._dims)
        else:
            pairs = [p for amount in self.padding for p in (amount, amount)]
        # F.pad takes the (before, after) pairs from the last dim back
        amounts = [p for d in reversed(range(self._dims)) for p in pairs[2 * d : 2 * d + 2]]
        return F.pad(input, amounts, mode=self.padding_mode), 0


class Conv2d(_ConvNd):
    """2-d convolution over (N, C, H, W) input; weight (out, in / groups, kh, kw).

    ``padding`` may be an int, a pair, ``"valid"`` or ``"same"``. Initialised as in
    PyTorch (uniform in +-1/sqrt(fan_in)).

    >>> import kernelgrad as kg
    >>> conv = kg.nn.Conv2d(1, 6, kernel_size=5, padding=2)
    >>> conv(kg.zeros(2, 1, 28, 28)).shape
    kg.Size([2, 6, 28, 28])
    """

    _dims = 2

    def forward(self, input: Tensor) -> Tensor:
        x, padding = self._padded(input)
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv1d(_ConvNd):
    """1-d convolution over (N, C, L) input; weight (out, in / groups, k).

    >>> import kernelgrad as kg
    >>> kg.nn.Conv1d(2, 4, 3, padding=1)(kg.zeros(1, 2, 10)).shape
    kg.Size([1, 4, 10])
    """

    _dims = 1

    def forward(self, input: Tensor) -> Tensor:
        x, padding = self._padded(input)
        if isinstance(padding, tuple):
            padding = padding[0]
        return F.conv1d(
            x,
            self.weight,
            self.bias,
            self.stride[0],
            padding,
            self.dilation[0],
            self.groups,
        )


class Conv3d(_ConvNd):
    """3-d convolution over (N, C, D, H, W) input; weight (out, in / groups, kd, kh, kw),
    initialised as in PyTorch. ``padding`` may be an int, a triple, ``"valid"`` or
    ``"same"``. Runs as one 2-d convolution over stacked depth planes
    (``nn/functional/convolution3d.py``).

    >>> import kernelgrad as kg
    >>> conv = kg.nn.Conv3d(2, 4, kernel_size=3, stride=(1, 2, 2), padding=1)
    >>> conv(kg.zeros(1, 2, 4, 8, 8)).shape
    kg.Size([1, 4, 4, 4, 4])
    """

    _dims = 3

    def forward(self, input: Tensor) -> Tensor:
        x, padding = self._padded(input)
        return F.conv3d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if padding_mode != "zeros":
            raise ArgumentError(
                f"{type(self).__name__}: padding_mode={padding_mode!r} is not supported; only "
                "'zeros' (as in PyTorch)"
            )
        self.output_padding = _tuple(output_padding, self._dims)
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, device, dtype,
        )  # fmt: skip

    def _output_padding(self, input: Tensor, output_size: Any) -> tuple[int, ...]:
        """``output_padding``, or the one that gives ``output_size`` (the spatial sizes,
        optionally after the batch and channel sizes), as PyTorch computes it."""
        if output_size is None:
            return self.output_padding
        dims = self._dims
        leading = input.ndim - dims  # batch and channels, or channels
        sizes = [int(size) for size in output_size]
        if len(sizes) == leading + dims:
            sizes = sizes[leading:]
        if len(sizes) != dims:
            raise ArgumentError(
                f"{type(self).__name__}: for a {input.ndim}-d input, output_size must have "
                f"{dims} or {leading + dims} elements, got {tuple(output_size)}"
            )
        smallest = [
            (input.shape[leading + d] - 1) * self.stride[d] - 2 * self.padding[d]
            + self.dilation[d] * (self.kernel_size[d] - 1) + 1
            for d in range(dims)
        ]  # fmt: skip
        largest = [low + stride - 1 for low, stride in zip(smallest, self.stride)]
        if any(not low <= size <= high for size, low, high in zip(sizes, smallest, largest)):
            raise ArgumentError(
                f"{type(self).__name__}: output_size {tuple(sizes)} is out of reach: the "
                f"sizes range from {tuple(smallest)} to {tuple(largest)} for an input of "
                f"spatial shape {tuple(input.shape[leading:])}"
            )
        return tuple(size - low for size, low in zip(sizes, smallest))


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-d convolution (the gradient of a convolution with respect to its
    input, used to upsample); weight (in, out / groups, kh, kw), as PyTorch's.
    ``forward(input, output_size=None)``: ``output_size`` picks the output padding.

    >>> import kernelgrad as kg
    >>> up = kg.nn.ConvTranspose2d(4, 2, kernel_size=4, stride=2, padding=1)
    >>> up(kg.zeros(1, 4, 8, 8)).shape
    kg.Size([1, 2, 16, 16])
    """

    _dims = 2

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        return F.conv_transpose2d(
            input, self.weight, self.bias, self.stride, self.padding,
            self._output_padding(input, output_size), self.groups, self.dilation,
        )  # fmt: skip


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-d convolution; weight (in, out / groups, k), as PyTorch's."""

    _dims = 1

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        return F.conv_transpose1d(
            input, self.weight, self.bias, self.stride[0], self.padding[0],
            self._output_padding(input, output_size)[0], self.groups, self.dilation[0],
        )  # fmt: skip


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-d convolution over (N, C, D, H, W) input; weight (in, out / groups,
    kd, kh, kw), as PyTorch's.

    >>> import kernelgrad as kg
    >>> up = kg.nn.ConvTranspose3d(2, 1, kernel_size=2, stride=2)
    >>> up(kg.zeros(1, 2, 3, 3, 3)).shape
    kg.Size([1, 1, 6, 6, 6])
    """

    _dims = 3

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        return F.conv_transpose3d(
            input, self.weight, self.bias, self.stride, self.padding,
            self._output_padding(input, output_size), self.groups, self.dilation,
        )  # fmt: skip
