"""Adaptive pooling to a fixed output size: ``adaptive_avg_pool1d/3d`` and
``adaptive_max_pool1d/2d/3d`` (``adaptive_avg_pool2d`` lives in ``pooling``).

Cell ``i`` of ``n`` along a dim of size ``L`` covers ``floor(i * L / n)`` to
``ceil((i + 1) * L / n)``, as in PyTorch. Both poolings are separable over the dims, so
each dim is pooled in turn: averages through ``adaptive_avg_pool2d`` or an averaging
matrix; maxima with ``max_pool2d`` when the windows tile the input evenly, else with one
``max`` per output cell. The maxima are taken along the last dim first, so that a
window's gradient goes to its first maximum in row-major order, as PyTorch's."""

from __future__ import annotations

from typing import Any

from ...errors import ArgumentError
from ...ops.movement import cat
from ...tensor import Tensor
from ._layout import _batched, _check_float
from .pooling import _pooling_matrix, adaptive_avg_pool2d, max_pool2d


def _sizes(output_size: Any, input_sizes: tuple[int, ...], op: str) -> tuple[int, ...]:
    count = len(input_sizes)
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != count:
            raise ArgumentError(
                f"{op}: output_size must be an int or {count} ints (or None), got {output_size!r}"
            )
        sizes = tuple(output_size)
    else:
        sizes = (output_size,) * count
    result = tuple(size if out is None else int(out) for out, size in zip(sizes, input_sizes))
    if min(result) <= 0:
        raise ArgumentError(f"{op}: output size must be positive, got {output_size!r}")
    return result


def _with_indices(input: Tensor, n_dims: int, output_size: Any) -> Any:
    """(values, indices) for ``return_indices=True``: see pool_indices.py."""
    from .pool_indices import adaptive_max_pool_with_indices

    return adaptive_max_pool_with_indices(input, n_dims, output_size)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of (N, C, L) or (C, L) input to ``output_size`` cells.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.adaptive_avg_pool1d(kg.tensor([[[1.0, 2.0, 3.0]]]), 2).tolist()
    [[[1.5, 2.5]]]
    """
    op = "adaptive_avg_pool1d"
    x, unbatched = _batched(input, op, 3)
    _check_float(x, op)
    (length,) = _sizes(output_size, x.shape[2:], op)
    result = adaptive_avg_pool2d(x.unsqueeze(2), (1, length)).squeeze(2)
    return result.squeeze(0) if unbatched else result


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) input to ``output_size`` (an
    int or a triple; None keeps that size).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.adaptive_avg_pool3d(kg.ones(2, 3, 5, 4, 3), 1).shape
    kg.Size([2, 3, 1, 1, 1])
    """
    op = "adaptive_avg_pool3d"
    x, unbatched = _batched(input, op, 5)
    _check_float(x, op)
    n, c, d, h, w = x.shape
    od, oh, ow = _sizes(output_size, (d, h, w), op)
    planes = adaptive_avg_pool2d(x.reshape(n, c * d, h, w), (oh, ow))
    rows = planes.reshape(n, c, d, oh * ow)
    if od != d:
        rows = _pooling_matrix(od, d, x) @ rows
    result = rows.reshape(n, c, od, oh, ow)
    return result.squeeze(0) if unbatched else result


def _max_along(x: Tensor, dim: int, out: int) -> Tensor:
    """Adaptive maximum along ``dim``: one ``max`` per output cell, concatenated."""
    size = x.shape[dim]
    if out == size:
        return x
    cells = []
    for i in range(out):
        start = (i * size) // out
        stop = -(-((i + 1) * size) // out)
        cells.append(x.narrow(dim, start, stop - start).max(dim, keepdim=True)[0])
    return cells[0] if out == 1 else cat(cells, dim)


def _adaptive_max(x: Tensor, sizes: tuple[int, ...]) -> Tensor:
    """Pool the trailing ``len(sizes)`` dims of ``x``, the last one first."""
    ndim = x.ndim
    for k in range(len(sizes) - 1, -1, -1):
        x = _max_along(x, ndim - len(sizes) + k, sizes[k])
    return x


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Max pooling of (N, C, H, W) or (C, H, W) input to ``output_size`` (an int or a
    pair; None keeps that size). ``return_indices`` also returns the flat position of
    each window's maximum.

    >>> import kernelgrad as kg
    >>> x = kg.arange(9.0).reshape(1, 1, 3, 3)
    >>> kg.nn.functional.adaptive_max_pool2d(x, 2).tolist()
    [[[[4.0, 5.0], [7.0, 8.0]]]]
    """
    op = "adaptive_max_pool2d"
    if return_indices:
        return _with_indices(input, 2, output_size)
    x, unbatched = _batched(input, op, 4)
    _check_float(x, op)
    h, w = x.shape[2:]
    oh, ow = _sizes(output_size, (h, w), op)
    if h % oh == 0 and w % ow == 0:
        result = max_pool2d(x, (h // oh, w // ow))
    else:
        result = _adaptive_max(x, (oh, ow))
    return result.squeeze(0) if unbatched else result


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Max pooling of (N, C, L) or (C, L) input to ``output_size`` cells.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.adaptive_max_pool1d(kg.tensor([[[1.0, 3.0, 2.0]]]), 2).tolist()
    [[[3.0, 3.0]]]
    """
    op = "adaptive_max_pool1d"
    if return_indices:
        return _with_indices(input, 1, output_size)
    x, unbatched = _batched(input, op, 3)
    (length,) = _sizes(output_size, x.shape[2:], op)
    result = adaptive_max_pool2d(x.unsqueeze(2), (1, length)).squeeze(2)
    return result.squeeze(0) if unbatched else result


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Tensor:
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) input to ``output_size``."""
    op = "adaptive_max_pool3d"
    if return_indices:
        return _with_indices(input, 3, output_size)
    x, unbatched = _batched(input, op, 5)
    _check_float(x, op)
    result = _adaptive_max(x, _sizes(output_size, x.shape[2:], op))
    return result.squeeze(0) if unbatched else result
