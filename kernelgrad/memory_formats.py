"""PyTorch's memory formats: ``kg.contiguous_format``, ``kg.channels_last``,
``kg.channels_last_3d`` and ``kg.preserve_format``, for ``x.to(memory_format=...)``,
``x.contiguous(memory_format=...)`` and ``x.is_contiguous(memory_format=...)``.

A channels-last tensor has PyTorch's strides (the channel dimension innermost: an
``(N, C, H, W)`` tensor has strides ``(H*W*C, 1, W*C, C)``); its values and what every
operation computes from them are those of the row-major tensor.
``Module.to(memory_format=...)`` accepts the format and keeps parameters row-major (the
optimizers' fused kernels update parameters as flat arrays)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tensor import Tensor


class memory_format:
    """A memory format (``torch.memory_format``); compare with ``is`` or ``==``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self) -> str:
        return self.name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# the permutation that makes a format's innermost dimension last, by tensor rank
_ORDER = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def check(fmt: object) -> memory_format:
    if not isinstance(fmt, memory_format):
        raise TypeError(f"memory_format must be a kg.memory_format, got {fmt!r}")
    return fmt


def _order(x: Tensor, fmt: memory_format) -> tuple[int, ...]:
    rank, order = _ORDER[fmt]
    if x.ndim != rank:
        raise RuntimeError(
            f"required rank {rank} tensor to use {fmt.name} format, got a {x.ndim}-d tensor"
        )
    return order


def is_contiguous(x: Tensor, fmt: object) -> bool:
    """Whether ``x`` is laid out densely in ``fmt`` (PyTorch's answer)."""
    fmt = check(fmt)
    if fmt is contiguous_format or fmt is preserve_format:
        return x.is_contiguous()
    rank, order = _ORDER[fmt]
    if x.ndim != rank:
        return False
    expected = 1
    for dim in reversed(order):
        if x.shape[dim] != 1 and x.stride(dim) != expected:
            return False
        expected *= x.shape[dim]
    return True


def convert(x: Tensor, fmt: object) -> Tensor:
    """``x`` laid out in ``fmt``: itself when it already is (and for
    ``preserve_format``), else a copy (differentiable)."""
    fmt = check(fmt)
    if fmt is preserve_format:
        return x
    if fmt is contiguous_format:
        return x.contiguous()
    order = _order(x, fmt)
    if is_contiguous(x, fmt):
        return x
    inverse = tuple(order.index(dim) for dim in range(len(order)))
    return x.permute(*order).contiguous().permute(*inverse)
