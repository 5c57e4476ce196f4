"""Helpers shared by convolution and pooling: argument parsing, memory layouts and
dense buffers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import autograd
from ...errors import ArgumentError, BackwardError, DTypeError, ShapeError, format_shape
from ...ops import elementwise as _ew
from ...ops.creation import empty, zeros
from ...ops.movement import make_view
from ...tensor import Tensor


def _pair(value: Any, name: str) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ArgumentError(f"{name} must be an int or a pair of ints, got {value!r}")
        return int(value[0]), int(value[1])
    return int(value), int(value)


def _triple(value: Any, name: str) -> tuple[int, int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 3:
            raise ArgumentError(f"{name} must be an int or a triple of ints, got {value!r}")
        return int(value[0]), int(value[1]), int(value[2])
    return int(value), int(value), int(value)


def _single(value: Any, name: str) -> int:
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ArgumentError(f"{name} must be an int or a 1-tuple, got {value!r}")
        return int(value[0])
    return int(value)


def _same_padding(kernel: Sequence[int], dilation: Sequence[int]) -> list[int]:
    """PyTorch's ``padding="same"`` amounts, (before, after) per dim in the kernel's
    order: half of ``dilation * (kernel - 1)`` before, the odd one after."""
    amounts: list[int] = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        amounts += [total // 2, total - total // 2]
    return amounts


def _check_float(x: Tensor, op: str) -> None:
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"{op} needs a floating point input, got {x.dtype}; convert it first, e.g. `x.float()`"
        )


def _batched(x: Tensor, op: str, ndim: int) -> tuple[Tensor, bool]:
    """Accept (N, C, ...) or an unbatched (C, ...) input with ``ndim`` batched dims."""
    if x.ndim == ndim:
        return x, False
    if x.ndim == ndim - 1:
        return x.unsqueeze(0), True
    raise ShapeError(
        f"{op}: expected a {ndim}-d (batched) or {ndim - 1}-d (unbatched) input, got shape "
        f"{format_shape(x.shape)}"
    )


def _window_view(
    x: Tensor,
    out_hw: tuple[int, int],
    step: tuple[int, int],
    tap: tuple[int, int],
    dilation: tuple[int, int],
) -> Tensor:
    """The (N, C, OH, OW) view of a 4-d tensor that a pooling window's tap (i, j) sees."""
    sn, sc, sy, sx = x._strides
    offset = x._offset + tap[0] * dilation[0] * sy + tap[1] * dilation[1] * sx
    return make_view(
        x,
        (x.shape[0], x.shape[1], out_hw[0], out_hw[1]),
        (sn, sc, step[0] * sy, step[1] * sx),
        offset,
    )


def _memory_order(t: Tensor) -> tuple[int, ...]:
    """The dims of ``t`` from the largest stride to the smallest. Kernels over ``t`` run
    in that order, so that their innermost loop walks memory with the smallest step
    (pooling a convolution output, stored batch innermost, loops over the batch)."""
    return tuple(sorted(range(t.ndim), key=lambda d: -abs(t._strides[d])))


def _permuted(t: Tensor, order: Sequence[int]) -> Tensor:
    """``t.permute(order)`` as a view that owns its result (no autograd)."""
    view = make_view(
        t, tuple(t.shape[d] for d in order), tuple(t._strides[d] for d in order), t._offset
    )
    view._base = None
    return view


def _empty_in_order(
    shape: tuple[int, ...], order: Sequence[int], like: Tensor, fill_zeros: bool = False
) -> Tensor:
    """A new tensor of ``shape`` whose memory is contiguous in the dim order ``order``."""
    physical = tuple(shape[d] for d in order)
    make = zeros if fill_zeros else empty
    buffer = make(physical, dtype=like.dtype, device=like.device)
    strides = [0] * len(shape)
    for stride, d in zip(_contiguous(physical), order):
        strides[d] = stride
    view = make_view(buffer, shape, tuple(strides), 0)
    view._base = None
    return view


def _buffer_like(x: Tensor, fill_zeros: bool) -> Tensor:
    """A new tensor of ``x``'s shape with ``x``'s strides (same memory order, gaps
    included) when that layout is simple, else one in ``x``'s dim order. With
    ``fill_zeros`` every element, and every gap, is zero."""
    order = sorted(range(x.ndim), key=lambda d: x._strides[d])
    extent = 1  # the inner dims so far span [0, extent)
    simple = x._offset == 0
    for d in order:
        size, stride = x.shape[d], x._strides[d]
        if size == 1:
            continue
        if stride < extent:  # negative, broadcast or possibly overlapping
            simple = False
            break
        extent += stride * (size - 1)
    if not simple or extent > 2 * x.numel():
        return _empty_in_order(x.shape, _memory_order(x), x, fill_zeros)
    make = zeros if fill_zeros else empty
    buffer = make(extent, dtype=x.dtype, device=x.device)
    view = make_view(buffer, x.shape, x._strides, 0)
    view._base = None
    return view


def _dense(t: Tensor) -> bool:
    """Whether ``t``'s elements fill its memory exactly, in some dim order (a permutation
    of a contiguous tensor)."""
    extent = 1
    for d in sorted(range(t.ndim), key=lambda d: t._strides[d]):
        if t.shape[d] == 1:
            continue
        if t._strides[d] != extent:
            return False
        extent *= t.shape[d]
    return True


def _apply_in_layout(op: Any, *operands: Tensor, layout: Tensor | None = None) -> Tensor:
    """``op(*operands)`` for operands of one shape (no autograd), with the result stored
    in the memory order of ``layout`` (default: the first operand), and the kernel
    looping in that order."""
    order = _memory_order(operands[0] if layout is None else layout)
    result = _empty_in_order(operands[0].shape, order, operands[0])
    _ew.apply(op, *[_permuted(t, order) for t in operands], out=_permuted(result, order))
    return result


def _no_double_backward(op: str) -> None:
    if autograd.is_grad_enabled():
        raise BackwardError(
            f"{op}: second-order gradients (backward with create_graph=True through this "
            "operation) are not supported"
        )


def _flat(t: Tensor) -> Tensor:
    """A 1-D view of a tensor whose memory is contiguous (any dim order)."""
    view = make_view(t, (t.numel(),), (1,), t._offset)
    view._base = None
    return view


def _zero_of(dtype: Any) -> Any:
    import numpy as np

    return np.dtype(dtype.numpy).type(0)


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))
