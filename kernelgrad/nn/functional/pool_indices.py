"""Max pooling with indices, and its inverse, max unpooling.

``max_pool{1,2,3}d(..., return_indices=True)`` and ``adaptive_max_pool{1,2,3}d(...,
return_indices=True)`` return the pooled values (computed by the pooling itself, with
its gradient) and, for each window, the flat position of its maximum in the input's
spatial plane (``(d * H + h) * W + w``), as PyTorch returns them.

The positions come from one table that depends only on the shapes: for every output
cell, the flat input position of each tap of its window (a spare position, holding
-inf, for taps in the padding). The input's taps are read with one ``take`` along its
flattened spatial dim, ``argmax`` over them picks the first maximum (as the values'
gradient does, and as PyTorch scans), and the table turns it into a position.

``max_unpool{1,2,3}d`` writes each value at its position in a zero output; its
gradient reads the output's gradient back at those positions (PyTorch's rule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import autograd
from ...dtypes import int64
from ...errors import ArgumentError, DTypeError, IndexValueError, ShapeError, format_shape
from ...ops.creation import full, zeros
from ...ops.creation import tensor as tensor_from
from ...ops.indexing import gather, take
from ...ops.movement import cat
from ...tensor import Tensor
from ._layout import _batched


def _tuple(value: Any, n: int, name: str, op: str) -> tuple[int, ...]:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ArgumentError(f"{op}: {name} must be an int or {n} ints, got {value!r}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


def _window_taps(out: int, kernel: int, stride: int, padding: int, dilation: int, size: int):
    """(out, kernel) input positions of each window's taps along one dim; -1 outside."""
    taps = np.arange(out)[:, None] * stride - padding + np.arange(kernel)[None, :] * dilation
    return np.where((taps >= 0) & (taps < size), taps, -1)


def _adaptive_taps(out: int, size: int):
    """(out, longest window) positions of adaptive pooling's windows along one dim
    (``[floor(i * size / out), ceil((i + 1) * size / out))``); a shorter window repeats
    its last position, which changes neither its maximum nor the first one's place."""
    starts = [(i * size) // out for i in range(out)]
    stops = [-(-((i + 1) * size) // out) for i in range(out)]
    longest = max(stop - start for start, stop in zip(starts, stops))
    return np.array(
        [[min(start + t, stop - 1) for t in range(longest)] for start, stop in zip(starts, stops)]
    )


def _argmax_positions(x: Tensor, taps: Sequence[np.ndarray]) -> Tensor:
    """The flat spatial position of the first maximum of each window of ``x`` (N, C,
    *spatial); ``taps[k]`` holds the positions along spatial dim k (see above)."""
    spatial = x.shape[2:]
    n_dims = len(spatial)
    outs = tuple(t.shape[0] for t in taps)
    count = math.prod(spatial)
    # table[o_1, .., o_n, t_1, .., t_n]: the flat position of that tap (or `count`),
    # the taps in row-major order, PyTorch's scan order
    table = np.zeros((1,) * 2 * n_dims, dtype=np.int64)
    outside = np.zeros((1,) * 2 * n_dims, dtype=bool)
    for k, positions in enumerate(taps):
        shape = [1] * (2 * n_dims)
        shape[k], shape[n_dims + k] = positions.shape
        along = positions.reshape(shape)
        table = table + np.maximum(along, 0) * math.prod(spatial[k + 1 :])
        outside = outside | (along < 0)
    table = np.where(outside, count, table).reshape(outs + (-1,))
    with autograd.no_grad():
        flat = x.detach().reshape(x.shape[0], x.shape[1], count)
        spare = full((x.shape[0], x.shape[1], 1), -math.inf, dtype=x.dtype, device=x.device)
        read = take(cat([flat, spare], -1), 2, tensor_from(table, device=x.device))
        winner = read.argmax(-1, keepdim=True)  # (N, C, *outs, 1)
        where_at = tensor_from(table, device=x.device).expand(*winner.shape[:-1], table.shape[-1])
        return gather(where_at, -1, winner).squeeze(-1)


def max_pool_with_indices(
    input: Tensor,
    n_dims: int,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> tuple[Tensor, Tensor]:
    """(values, int64 indices) of ``n_dims``-d max pooling; see the module docstring."""
    from .pooling import max_pool1d, max_pool2d
    from .pooling3d import max_pool3d

    op = f"max_pool{n_dims}d"
    pool = {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}[n_dims]
    values = pool(input, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(input, op, n_dims + 2)
    kernel = _tuple(kernel_size, n_dims, "kernel_size", op)
    strides = kernel if stride is None else _tuple(stride, n_dims, "stride", op)
    if not strides:  # PyTorch's stride=[] means kernel_size too
        strides = kernel
    pads = _tuple(padding, n_dims, "padding", op)
    dilations = _tuple(dilation, n_dims, "dilation", op)
    outs = values.shape[-n_dims:]
    taps = [
        _window_taps(outs[k], kernel[k], strides[k], pads[k], dilations[k], x.shape[2 + k])
        for k in range(n_dims)
    ]
    indices = _argmax_positions(x, taps)
    return values, indices.squeeze(0) if unbatched else indices


def adaptive_max_pool_with_indices(
    input: Tensor, n_dims: int, output_size: Any
) -> tuple[Tensor, Tensor]:
    """(values, int64 indices) of ``n_dims``-d adaptive max pooling."""
    from .adaptive_pooling import (
        adaptive_max_pool1d,
        adaptive_max_pool2d,
        adaptive_max_pool3d,
    )

    pool = {1: adaptive_max_pool1d, 2: adaptive_max_pool2d, 3: adaptive_max_pool3d}[n_dims]
    values = pool(input, output_size)
    x, unbatched = _batched(input, f"adaptive_max_pool{n_dims}d", n_dims + 2)
    outs = values.shape[-n_dims:]
    taps = [_adaptive_taps(outs[k], x.shape[2 + k]) for k in range(n_dims)]
    indices = _argmax_positions(x, taps)
    return values, indices.squeeze(0) if unbatched else indices


def max_unpool(
    input: Tensor,
    indices: Tensor,
    n_dims: int,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The inverse of ``n_dims``-d max pooling: a zero tensor of the pooled input's size
    (or ``output_size``) with each value of ``input`` at its position in ``indices``."""
    op = f"max_unpool{n_dims}d"
    if not isinstance(indices, Tensor) or indices.dtype.is_floating_point or indices.dtype.is_bool:
        raise DTypeError(
            f"{op}: indices must be an integer tensor (the second result of "
            f"max_pool{n_dims}d(..., return_indices=True))"
        )
    if indices.shape != input.shape:
        raise ShapeError(
            f"{op}: indices of shape {format_shape(indices.shape)} do not match the input of "
            f"shape {format_shape(input.shape)}; pass the indices max pooling returned with "
            "these values"
        )
    x, unbatched = _batched(input, op, n_dims + 2)
    where_at = indices.unsqueeze(0) if unbatched else indices
    kernel = _tuple(kernel_size, n_dims, "kernel_size", op)
    strides = kernel if stride is None else _tuple(stride, n_dims, "stride", op)
    pads = _tuple(padding, n_dims, "padding", op)
    sizes_in = x.shape[2:]
    default = tuple((sizes_in[k] - 1) * strides[k] - 2 * pads[k] + kernel[k] for k in range(n_dims))
    if output_size is None:
        sizes = default
    else:
        sizes = tuple(int(s) for s in output_size)
        if len(sizes) == n_dims + 2 or (unbatched and len(sizes) == n_dims + 1):
            sizes = sizes[-n_dims:]
        if len(sizes) != n_dims:
            raise ArgumentError(
                f"{op}: output_size must have {n_dims} (or {n_dims + 2}) entries, got "
                f"{output_size!r}"
            )
        for k in range(n_dims):
            low, high = default[k] - strides[k], default[k] + strides[k]
            if not low < sizes[k] < high:
                raise ArgumentError(
                    f"{op}: output_size {tuple(sizes)} is not possible for this input and "
                    f"pooling: each size must lie strictly between {low} and {high} along "
                    f"spatial dim {k} (the default is {default})"
                )
    n, c = x.shape[:2]
    count = math.prod(sizes)
    positions = where_at.reshape(n, c, -1).to(int64)
    if positions.numel():
        low, high = int(positions.min().item()), int(positions.max().item())
        if low < 0 or high >= count:
            bad = low if low < 0 else high
            raise IndexValueError(
                f"{op}: index {bad} is outside the output's {count} positions per channel "
                f"(spatial size {tuple(sizes)}); pass the indices of the matching "
                "max pooling, and its input's size as output_size"
            )
    with autograd.no_grad():
        result = _write_at(x.detach().reshape(n, c, -1), positions, count)
    if autograd.needs_grad(x):
        shape = x.shape

        def backward(grad: Tensor) -> tuple[Tensor]:
            return (gather(grad.reshape(n, c, count), 2, positions).reshape(shape),)

        result = result.reshape((n, c) + sizes)
        autograd.record(op, (x,), result, backward)
    else:
        result = result.reshape((n, c) + sizes)
    return result.squeeze(0) if unbatched else result


def _write_at(values: Tensor, positions: Tensor, count: int) -> Tensor:
    """(N, C, count) zeros with ``values[n, c, i]`` at ``positions[n, c, i]`` (a position
    named twice, by overlapping windows sharing a maximum, gets that one value)."""
    from .._index_write import write_rows

    n, c, _ = values.shape
    result = zeros(n * c * count, 1, dtype=values.dtype, device=values.device)
    if values.numel():
        base = tensor_from(np.arange(n * c, dtype=np.int64) * count, device=values.device)
        linear = (positions + base.reshape(n, c, 1)).reshape(-1)
        write_rows(result, linear, values.reshape(-1, 1))
    return result.reshape(n, c, count)


# --- PyTorch's names ---------------------------------------------------------------------------


def max_pool1d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = True,
) -> tuple[Tensor, Tensor]:
    """``max_pool1d`` and the position (along L) of each window's maximum."""
    return max_pool_with_indices(input, 1, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = True,
) -> tuple[Tensor, Tensor]:
    """``max_pool2d`` and the flat position ``h * W + w`` of each window's maximum.

    >>> import kernelgrad as kg
    >>> x = kg.tensor([[[[1.0, 5.0], [7.0, 2.0]]]])
    >>> values, indices = kg.nn.functional.max_pool2d_with_indices(x, 2)
    >>> values.tolist(), indices.tolist()
    ([[[[7.0]]]], [[[[2]]]])
    """
    return max_pool_with_indices(input, 2, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = True,
) -> tuple[Tensor, Tensor]:
    """``max_pool3d`` and the flat position ``(d * H + h) * W + w`` of each maximum."""
    return max_pool_with_indices(input, 3, kernel_size, stride, padding, dilation, ceil_mode)


def adaptive_max_pool1d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = True
) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool1d`` and the position of each window's maximum."""
    return adaptive_max_pool_with_indices(input, 1, output_size)


def adaptive_max_pool2d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = True
) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool2d`` and the flat position of each window's maximum."""
    return adaptive_max_pool_with_indices(input, 2, output_size)


def adaptive_max_pool3d_with_indices(
    input: Tensor, output_size: Any, return_indices: bool = True
) -> tuple[Tensor, Tensor]:
    """``adaptive_max_pool3d`` and the flat position of each window's maximum."""
    return adaptive_max_pool_with_indices(input, 3, output_size)


def max_unpool1d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The inverse of ``max_pool1d``: zeros with each value at its index."""
    return max_unpool(input, indices, 1, kernel_size, stride, padding, output_size)


def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The inverse of ``max_pool2d``: zeros with each value at its index.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> x = kg.tensor([[[[1.0, 5.0], [7.0, 2.0]]]])
    >>> values, indices = F.max_pool2d(x, 2, return_indices=True)
    >>> F.max_unpool2d(values, indices, 2).tolist()
    [[[[0.0, 0.0], [7.0, 0.0]]]]
    """
    return max_unpool(input, indices, 2, kernel_size, stride, padding, output_size)


def max_unpool3d(
    input: Tensor,
    indices: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    output_size: Any = None,
) -> Tensor:
    """The inverse of ``max_pool3d``: zeros with each value at its index."""
    return max_unpool(input, indices, 3, kernel_size, stride, padding, output_size)
