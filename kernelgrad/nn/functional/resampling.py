"""Resampling: ``interpolate`` (nearest, nearest-exact, linear, bilinear, trilinear).

Each spatial dim is resampled on its own (the modes are separable): nearest modes pick
one source index per output position (one ``take``), linear modes blend two source
indices with weights that depend only on the sizes. The indices and weights are built
on the host from the sizes alone; the data stays on its device, and the gradient is
that of ``take`` (an ``index_add``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ArgumentError, ShapeError, UnsupportedError, format_shape
from ...ops.creation import tensor as tensor_from
from ...ops.indexing import take
from ...tensor import Tensor

_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}


def _sizes(
    input: Tensor, size: Any, scale_factor: Any, recompute: bool | None
) -> tuple[list[int], list[float | None]]:
    """Output sizes and the scales PyTorch uses to map positions (``1 / scale_factor``
    when a factor is given and not recomputed, else None: input / output size)."""
    spatial = input.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ArgumentError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        sizes = [int(size)] * spatial if not isinstance(size, Sequence) else [int(s) for s in size]
        if len(sizes) != spatial:
            raise ShapeError(
                f"interpolate: size {size} has {len(sizes)} entries but the input of shape "
                f"{format_shape(input.shape)} has {spatial} spatial dims"
            )
        return sizes, [None] * spatial
    factors = (
        [float(scale_factor)] * spatial
        if not isinstance(scale_factor, Sequence)
        else [float(f) for f in scale_factor]
    )
    if len(factors) != spatial:
        raise ShapeError(
            f"interpolate: scale_factor {scale_factor} has {len(factors)} entries but the "
            f"input of shape {format_shape(input.shape)} has {spatial} spatial dims"
        )
    sizes = [math.floor(n * f) for n, f in zip(input.shape[2:], factors)]
    scales = [None if recompute else 1.0 / f for f in factors]
    return sizes, scales


def _source_positions(
    size_in: int, size_out: int, scale: float | None, align_corners: bool, mode: str
) -> np.ndarray:
    """The (fractional) source position of each output position along one dim."""
    out = np.arange(size_out, dtype=np.float64)
    if mode in _LINEAR_MODES and align_corners:
        return out * ((size_in - 1) / (size_out - 1)) if size_out > 1 else out * 0.0
    step = scale if scale is not None else size_in / size_out
    if mode == "nearest":
        return np.minimum(np.floor(out * step), size_in - 1)
    if mode == "nearest-exact":
        return np.minimum(np.floor((out + 0.5) * step), size_in - 1)
    return np.maximum((out + 0.5) * step - 0.5, 0.0)


def interpolate(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial dims of an (N, C, ...) input to ``size`` or by
    ``scale_factor``, as ``torch.nn.functional.interpolate``: modes ``"nearest"``,
    ``"nearest-exact"``, ``"linear"`` (3-d input), ``"bilinear"`` (4-d) and
    ``"trilinear"`` (5-d), with ``align_corners`` for the linear modes.

    >>> import kernelgrad as kg
    >>> x = kg.tensor([[[1.0, 2.0]]])
    >>> kg.nn.functional.interpolate(x, scale_factor=2, mode="linear").tolist()
    [[[1.0, 1.25, 1.75, 2.0]]]
    """
    if input.ndim < 3:
        raise ShapeError(
            f"interpolate: expected an input of shape (N, C, ...) with spatial dims, got "
            f"{format_shape(input.shape)}"
        )
    if antialias:
        raise UnsupportedError("interpolate: antialias=True is not supported")
    if mode in _LINEAR_MODES:
        if input.ndim != _LINEAR_MODES[mode]:
            raise ShapeError(
                f"interpolate: mode {mode!r} needs a {_LINEAR_MODES[mode]}-d input, got shape "
                f"{format_shape(input.shape)}"
            )
    elif mode in ("nearest", "nearest-exact"):
        if align_corners is not None:
            raise ArgumentError(
                f"interpolate: align_corners is only for linear modes, not {mode!r}"
            )
    else:
        raise UnsupportedError(
            f"interpolate: mode {mode!r} is not supported (nearest, nearest-exact, linear, "
            "bilinear, trilinear)"
        )
    sizes, scales = _sizes(input, size, scale_factor, recompute_scale_factor)
    if min(sizes) <= 0:
        raise ShapeError(f"interpolate: the output size {tuple(sizes)} must be positive")
    result = input
    for offset, (size_out, scale) in enumerate(zip(sizes, scales)):
        dim = 2 + offset
        size_in = input.shape[dim]
        positions = _source_positions(size_in, size_out, scale, bool(align_corners), mode)
        low = np.floor(positions).astype(np.int64)
        if mode not in _LINEAR_MODES:
            result = take(result, dim, tensor_from(low, device=input.device))
            continue
        low = np.minimum(low, size_in - 1)
        high = np.minimum(low + 1, size_in - 1)
        fraction = positions - low
        shape = [1] * input.ndim
        shape[dim] = size_out
        weight = tensor_from(fraction.reshape(shape), dtype=input.dtype, device=input.device)
        first = take(result, dim, tensor_from(low, device=input.device))
        second = take(result, dim, tensor_from(high, device=input.device))
        result = first + (second - first) * weight
    return result


def upsample(
    input: Tensor,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
) -> Tensor:
    """``interpolate`` under its older name."""
    return interpolate(input, size, scale_factor, mode, align_corners)
