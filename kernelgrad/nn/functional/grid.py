"""Spatial transformers: ``affine_grid`` (the sampling grid of an affine map) and
``grid_sample`` (the input read at a grid of normalised positions), in 2-d and 3-d.

Written with tensor ops, so both run on every backend and autograd differentiates them
with respect to the input and the grid (or ``theta``): the positions are unnormalised
and folded into the input by the padding mode, each corner of the cell around a
position is read with one ``gather`` over the input's flattened spatial dims, and the
corners are blended with the (differentiable) linear weights. ``nearest`` rounds half to
even, as PyTorch; its gradient with respect to the grid is zero.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from ...errors import ArgumentError, DTypeError, ShapeError, UnsupportedError, format_shape
from ...ops.creation import arange, ones
from ...ops.elementwise import where
from ...ops.indexing import gather
from ...ops.movement import stack
from ...tensor import Tensor

_MODES = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def _base_coordinates(size: int, align_corners: bool, like: Tensor) -> Tensor:
    """The normalised positions of ``size`` pixel centres (or corners)."""
    steps = arange(size, dtype=like.dtype, device=like.device)
    if align_corners:
        return steps * (2.0 / (size - 1)) - 1.0 if size > 1 else steps * 0.0
    return (steps * 2.0 + 1.0) / size - 1.0


def affine_grid(theta: Tensor, size: Any, align_corners: bool | None = None) -> Tensor:
    """The (N, H, W, 2) (or (N, D, H, W, 3)) grid of normalised positions that the
    affine maps ``theta`` (N, 2, 3) (or (N, 3, 4)) send the output's pixels to, for an
    output of ``size`` (N, C, H, W) (or (N, C, D, H, W)); the last dim is (x, y[, z]).
    ``align_corners`` as ``grid_sample``'s (None means False, as PyTorch).

    >>> import kernelgrad as kg
    >>> identity = kg.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    >>> kg.nn.functional.affine_grid(identity, (1, 1, 1, 2), align_corners=False).tolist()
    [[[[-0.5, 0.0], [0.5, 0.0]]]]
    """
    align_corners = bool(align_corners)
    size = tuple(int(s) for s in size)
    if not isinstance(theta, Tensor) or not theta.dtype.is_floating_point:
        raise DTypeError("affine_grid: theta must be a floating-point tensor")
    if len(size) not in (4, 5):
        raise ArgumentError(
            f"affine_grid: size must be (N, C, H, W) or (N, C, D, H, W), got {size}"
        )
    spatial = len(size) - 2
    expected = (size[0], spatial, spatial + 1)
    if tuple(theta.shape) != expected:
        raise ArgumentError(
            f"affine_grid: expected a batch of {spatial}-d affine matrices of shape "
            f"{format_shape(expected)} for size {size}, got theta of shape "
            f"{format_shape(theta.shape)}"
        )
    if min(size[2:]) <= 0:
        raise ArgumentError(f"affine_grid: the spatial sizes must be positive, got {size}")
    sizes = size[2:]
    # (x, y[, z]) along (W, H[, D]): the last spatial dim varies fastest
    axes = [_base_coordinates(s, align_corners, theta) for s in reversed(sizes)]
    columns = []
    for k, axis in enumerate(axes):
        shape = [1] * spatial
        shape[spatial - 1 - k] = sizes[spatial - 1 - k]
        columns.append(axis.reshape(tuple(shape)).expand(*sizes))
    columns.append(ones(sizes, dtype=theta.dtype, device=theta.device))
    base = stack(columns, -1).reshape(1, -1, spatial + 1)
    grid = base.matmul(theta.transpose(1, 2))  # (N, positions, spatial)
    return grid.reshape((size[0],) + sizes + (spatial,))


def _unnormalise(coordinate: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coordinate + 1.0) * ((size - 1) / 2.0)
    return ((coordinate + 1.0) * size - 1.0) / 2.0


def _reflect(position: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """PyTorch's ``reflect_coordinates``: ``position`` folded back and forth into
    [twice_low / 2, twice_high / 2]."""
    if twice_low == twice_high:
        return position * 0.0
    low = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    distance = (position - low).abs()
    flips = (distance / span).floor()  # gradient 0: only the remainder moves
    extra = distance - flips * span
    even = (flips - (flips / 2.0).floor() * 2.0) == 0
    return where(even, extra + low, span - extra + low)


def _source_position(
    coordinate: Tensor, size: int, padding_mode: str, align_corners: bool
) -> Tensor:
    position = _unnormalise(coordinate, size, align_corners)
    if padding_mode == "border":
        position = position.clamp(0.0, size - 1.0)
    elif padding_mode == "reflection":
        if align_corners:
            position = _reflect(position, 0, 2 * (size - 1))
        else:
            position = _reflect(position, -1, 2 * size - 1)
        position = position.clamp(0.0, size - 1.0)
    return position


def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """``input`` (N, C, H, W) (or (N, C, D, H, W)) read at the normalised positions of
    ``grid`` (N, Ho, Wo, 2) (or (N, Do, Ho, Wo, 3); last dim (x, y[, z]) in [-1, 1]):
    the result is (N, C, Ho, Wo) (or (N, C, Do, Ho, Wo)). ``mode`` is ``"bilinear"``
    (trilinear in 3-d) or ``"nearest"``; ``padding_mode`` says what positions outside
    the input read: ``"zeros"``, the ``"border"`` value, or the input ``"reflection"``-ed
    at its edges. With ``align_corners`` -1 and 1 are the centres of the corner pixels,
    without (the default, None) their outer edges. Differentiable with respect to the
    input and the grid.

    >>> import kernelgrad as kg
    >>> x = kg.tensor([[[[0.0, 10.0]]]])
    >>> grid = kg.tensor([[[[0.0, 0.0]]]])
    >>> kg.nn.functional.grid_sample(x, grid, align_corners=True).tolist()
    [[[[5.0]]]]
    """
    align_corners = bool(align_corners)
    if mode not in _MODES:
        raise ArgumentError(
            f"grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}"
        )
    if padding_mode not in _PADDING:
        raise ArgumentError(
            "grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got "
            f"{padding_mode!r}"
        )
    if mode == "bicubic":
        raise UnsupportedError(
            "grid_sample: mode='bicubic' is not supported; use 'bilinear' or 'nearest'"
        )
    if input.ndim not in (4, 5):
        raise ShapeError(
            f"grid_sample: expected a 4-d (N, C, H, W) or 5-d (N, C, D, H, W) input, got "
            f"shape {format_shape(input.shape)}"
        )
    spatial = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != spatial or grid.shape[0] != input.shape[0]:
        raise ShapeError(
            f"grid_sample: for an input of shape {format_shape(input.shape)} the grid must be "
            f"(N, {', '.join(['*'] * spatial)}, {spatial}) with N = {input.shape[0]}, got "
            f"shape {format_shape(grid.shape)}"
        )
    if grid.dtype != input.dtype:
        raise DTypeError(
            f"grid_sample: the grid is {grid.dtype} but the input is {input.dtype}; they must "
            "match (convert one with `.to(...)`)"
        )
    if not input.dtype.is_floating_point:
        raise DTypeError(f"grid_sample: the input must be floating point, got {input.dtype}")
    n, c = input.shape[:2]
    sizes = input.shape[2:]  # (H, W) or (D, H, W)
    out_sizes = grid.shape[1:-1]
    count = math.prod(out_sizes)
    # per spatial dim (input order), the source position of every output element
    positions = [
        _source_position(
            grid[..., spatial - 1 - k].reshape(n, count), sizes[k], padding_mode, align_corners
        )
        for k in range(spatial)
    ]
    flat_input = input.reshape(n, c, -1)

    def read(corner: list[Tensor]) -> Tensor:
        """The input at integer positions ``corner`` (one (N, count) tensor per dim),
        zero where any is outside."""
        inside = None
        linear = None
        for k, position in enumerate(corner):
            ok = (position >= 0) & (position <= sizes[k] - 1)
            inside = ok if inside is None else inside & ok
            clipped = position.clamp(0, sizes[k] - 1).long()
            linear = clipped if linear is None else linear * sizes[k] + clipped
        index = linear.unsqueeze(1).expand(n, c, count)
        values = gather(flat_input, 2, index)
        return where(inside.unsqueeze(1), values, 0.0)

    if mode == "nearest":
        result = read([p.detach().round() for p in positions])
        if grid.requires_grad:  # PyTorch's zero gradient for the grid, not none
            for p in positions:
                result = result + ((p - p.detach()) * 0.0).unsqueeze(1)
    else:
        lows = [p.detach().floor() for p in positions]
        fractions = [p - low for p, low in zip(positions, lows)]  # carry the grid gradient
        result = None
        for corner in itertools.product((0, 1), repeat=spatial):
            weight = None
            for k, upper in enumerate(corner):
                factor = fractions[k] if upper else 1.0 - fractions[k]
                weight = factor if weight is None else weight * factor
            term = read([low + upper for low, upper in zip(lows, corner)]) * weight.unsqueeze(1)
            result = term if result is None else result + term
    return result.reshape((n, c) + tuple(out_sizes))
