"""Padding layers: ``ZeroPad``, ``ConstantPad``, ``ReflectionPad``, ``ReplicationPad`` and
``CircularPad`` in 1, 2 and 3 dims, each a thin layer over ``F.pad``.

``padding`` is an int (the same amount on every side) or a tuple of (before, after)
pairs from the last dim backwards, as PyTorch: ``(left, right)`` in 1-d,
``(left, right, top, bottom)`` in 2-d, ``(left, right, top, bottom, front, back)`` in 3-d.
"""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError, ShapeError, format_shape
from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = [
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
]


class _Pad(Module):
    _dims = 1
    _mode = "constant"

    def __init__(self, padding: Any) -> None:
        super().__init__()
        pairs = 2 * self._dims
        if isinstance(padding, int):
            padding = (padding,) * pairs
        padding = tuple(padding)
        # constant padding passes a shorter tuple on to F.pad (PyTorch's ZeroPad2d((1, 2))
        # pads the last dim only); the other modes take exactly one pair per dim
        lengths = range(2, pairs + 1, 2) if self._mode == "constant" else (pairs,)
        if len(padding) not in lengths or not all(isinstance(p, int) for p in padding):
            count = f"2 to {pairs}" if self._mode == "constant" else f"{pairs}"
            raise ArgumentError(
                f"{type(self).__name__}: padding must be an int or a tuple of {count} ints "
                f"((before, after) pairs from the last dim backwards), got {padding!r}"
            )
        self.padding = padding

    def forward(self, input: Tensor) -> Tensor:
        if self._mode != "constant" and input.ndim not in (self._dims + 1, self._dims + 2):
            raise ShapeError(
                f"{type(self).__name__}: expected a {self._dims + 2}-d (batched) or "
                f"{self._dims + 1}-d input, got shape {format_shape(input.shape)}"
            )
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPad):
    """Pad the last dim with ``value`` (negative amounts crop).

    >>> import kernelgrad as kg
    >>> kg.nn.ConstantPad1d((1, 2), 3.5)(kg.zeros(1, 2)).tolist()
    [[3.5, 0.0, 0.0, 3.5, 3.5]]
    """

    _dims = 1


class ConstantPad2d(_ConstantPad):
    """Pad the last two dims with ``value``."""

    _dims = 2


class ConstantPad3d(_ConstantPad):
    """Pad the last three dims with ``value``."""

    _dims = 3


class _ZeroPad(_ConstantPad):
    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad):
    """Pad the last dim with zeros.

    >>> import kernelgrad as kg
    >>> kg.nn.ZeroPad1d(1)(kg.ones(1, 2)).tolist()
    [[0.0, 1.0, 1.0, 0.0]]
    """

    _dims = 1


class ZeroPad2d(_ZeroPad):
    """Pad the last two dims with zeros.

    >>> import kernelgrad as kg
    >>> kg.nn.ZeroPad2d((1, 0, 0, 1))(kg.ones(1, 1, 2, 2)).shape
    kg.Size([1, 1, 3, 3])
    """

    _dims = 2


class ZeroPad3d(_ZeroPad):
    """Pad the last three dims with zeros."""

    _dims = 3


class ReflectionPad1d(_Pad):
    """Pad the last dim of an (N, C, W) or (C, W) input with its mirror image, the edge
    not repeated (each amount must be smaller than the dim).

    >>> import kernelgrad as kg
    >>> kg.nn.ReflectionPad1d(2)(kg.tensor([[1.0, 2.0, 3.0]])).tolist()
    [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]]
    """

    _dims = 1
    _mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Reflection padding of the last two dims of an (N, C, H, W) or (C, H, W) input."""

    _dims = 2


class ReflectionPad3d(ReflectionPad1d):
    """Reflection padding of the last three dims of a 5-d (batched) or 4-d input."""

    _dims = 3


class ReplicationPad1d(_Pad):
    """Pad the last dim of an (N, C, W) or (C, W) input by repeating its edge values.

    >>> import kernelgrad as kg
    >>> kg.nn.ReplicationPad1d((2, 1))(kg.tensor([[1.0, 2.0]])).tolist()
    [[1.0, 1.0, 1.0, 2.0, 2.0]]
    """

    _dims = 1
    _mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Replication padding of the last two dims of an (N, C, H, W) or (C, H, W) input."""

    _dims = 2


class ReplicationPad3d(ReplicationPad1d):
    """Replication padding of the last three dims of a 5-d (batched) or 4-d input."""

    _dims = 3


class CircularPad1d(_Pad):
    """Pad the last dim of an (N, C, W) or (C, W) input by wrapping around (each amount
    at most the dim's size).

    >>> import kernelgrad as kg
    >>> kg.nn.CircularPad1d(1)(kg.tensor([[1.0, 2.0, 3.0]])).tolist()
    [[3.0, 1.0, 2.0, 3.0, 1.0]]
    """

    _dims = 1
    _mode = "circular"


class CircularPad2d(CircularPad1d):
    """Circular padding of the last two dims of an (N, C, H, W) or (C, H, W) input."""

    _dims = 2


class CircularPad3d(CircularPad1d):
    """Circular padding of the last three dims of a 5-d (batched) or 4-d input."""

    _dims = 3
