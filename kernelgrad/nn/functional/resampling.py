"""Resampling: ``interpolate`` (nearest, nearest-exact, linear, bilinear, bicubic,
trilinear, area).

Each spatial dim is resampled on its own (the modes are separable): nearest modes pick
one source index per output position (one ``take``), linear modes blend two source
indices and bicubic four (one ``take`` of all of them, then a weighted sum), with
weights that depend only on the sizes; ``area`` averages windows (adaptive average
pooling: a product with an averaging matrix per dim), and ``antialias=True`` (bilinear,
bicubic) multiplies by a weight matrix per dim whose filter is stretched when
shrinking. The indices and weights are built on the host from the sizes alone; the
data stays on its device, and the gradient is that of ``take`` (an ``index_add``) or of
the product."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from numbers import Integral
from typing import Any

import numpy as np

from ...errors import ArgumentError, DTypeError, ShapeError, UnsupportedError, format_shape
from ...ops.creation import tensor as tensor_from
from ...ops.indexing import take
from ...tensor import Tensor
from .pooling import _pooling_matrix, adaptive_avg_pool2d

_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}
_INTERPOLATING_MODES = {**_LINEAR_MODES, "bicubic": 4}  # the modes with align_corners
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
CUBIC_A = -0.75  # PyTorch's (and OpenCV's) cubic convolution coefficient
ANTIALIAS_CUBIC_A = -0.5  # PyTorch's (and Pillow's) coefficient for antialiased bicubic


def _sizes(
    input: Tensor, size: Any, scale_factor: Any, recompute: bool | None
) -> tuple[list[int], list[float | None]]:
    """Output sizes and the scales PyTorch uses to map positions (``1 / scale_factor``
    when a factor is given and not recomputed, else None: input / output size)."""
    spatial = input.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ArgumentError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        if recompute:
            raise ArgumentError(
                "interpolate: recompute_scale_factor is only meaningful with scale_factor, "
                "not with an explicit size"
            )
        sizes = list(size) if isinstance(size, Sequence) else [size] * spatial
        if not all(isinstance(s, Integral) for s in sizes):
            raise DTypeError(f"interpolate: size must be an int or a tuple of ints, got {size!r}")
        if len(sizes) != spatial:
            raise ShapeError(
                f"interpolate: size {size} has {len(sizes)} entries but the input of shape "
                f"{format_shape(input.shape)} has {spatial} spatial dims"
            )
        return [int(s) for s in sizes], [None] * spatial
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
    if mode in _INTERPOLATING_MODES and align_corners:
        return out * ((size_in - 1) / (size_out - 1)) if size_out > 1 else out * 0.0
    step = scale if scale is not None else size_in / size_out
    if mode == "nearest":
        return np.minimum(np.floor(out * step), size_in - 1)
    if mode == "nearest-exact":
        return np.minimum(np.floor((out + 0.5) * step), size_in - 1)
    if mode == "bicubic":  # not clamped: the taps before the first element clamp instead
        return (out + 0.5) * step - 0.5
    return np.maximum((out + 0.5) * step - 0.5, 0.0)


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """(size_out, 4) weights of the taps at floor - 1, floor, floor + 1, floor + 2 for a
    fraction ``t`` past the floor: Keys' cubic convolution with A = -0.75."""
    a = CUBIC_A

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)


def _check_mode(input: Tensor, mode: str, align_corners: bool | None, antialias: bool) -> None:
    if mode not in _MODES:
        raise UnsupportedError(f"interpolate: mode {mode!r} is not supported ({', '.join(_MODES)})")
    if input.ndim not in (3, 4, 5):
        raise UnsupportedError(
            f"interpolate: expected a 3-d, 4-d or 5-d input (N, C, spatial...), got shape "
            f"{format_shape(input.shape)}"
        )
    needed = _INTERPOLATING_MODES.get(mode)
    if needed is not None and input.ndim != needed:
        raise UnsupportedError(
            f"interpolate: mode {mode!r} needs a {needed}-d input, got shape "
            f"{format_shape(input.shape)}"
        )
    if needed is None and align_corners is not None:
        raise ArgumentError(
            f"interpolate: align_corners is only for the interpolating modes (linear, "
            f"bilinear, bicubic, trilinear), not {mode!r}"
        )
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ArgumentError(
            f"interpolate: antialias=True is only for modes bilinear and bicubic, not {mode!r}"
        )


def _antialias_filter(mode: str, x: np.ndarray) -> np.ndarray:
    """The filter of an antialiased mode at distances ``x`` (in output pixels): the
    triangle for bilinear, Keys' cubic with A = -0.5 for bicubic (PyTorch's and
    Pillow's choice for antialiasing, unlike the plain bicubic mode's -0.75)."""
    x = np.abs(x)
    if mode == "bilinear":
        return np.maximum(1.0 - x, 0.0)
    a = ANTIALIAS_CUBIC_A
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _antialias_matrix(
    size_in: int, size_out: int, scale: float | None, align_corners: bool, mode: str
) -> np.ndarray:
    """(size_out, size_in) weights of antialiased resampling along one dim, as PyTorch
    computes them: when shrinking by ``s`` the filter is stretched ``s`` times (it
    averages every input under it, not only the nearest 2 or 4), and each row's weights
    are normalised to sum to 1 (so the borders renormalise instead of clamping)."""
    if align_corners:
        step = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        step = scale if scale is not None else size_in / size_out
    taps = 2 if mode == "bilinear" else 4
    stretch = max(step, 1.0)
    support = taps / 2 * stretch
    matrix = np.zeros((size_out, size_in))
    for i in range(size_out):
        center = step * (i + 0.5)
        first = max(int(center - support + 0.5), 0)
        last = min(int(center + support + 0.5), size_in)
        positions = np.arange(first, last)
        weights = _antialias_filter(mode, (positions - center + 0.5) / stretch)
        total = weights.sum()
        if total != 0:
            matrix[i, first:last] = weights / total
    return matrix


def _antialias(
    x: Tensor, sizes: list[int], scales: list[float | None], align_corners: bool, mode: str
) -> Tensor:
    """Antialiased bilinear or bicubic resampling: per spatial dim, a product with the
    dim's weight matrix (the gradient is the product's)."""
    for offset, (size_out, scale) in enumerate(zip(sizes, scales)):
        dim = 2 + offset
        weights = _antialias_matrix(x.shape[dim], size_out, scale, align_corners, mode)
        matrix = tensor_from(weights.T, dtype=x.dtype, device=x.device)
        x = (x.transpose(dim, -1) @ matrix).transpose(dim, -1)
    return x


def _area(x: Tensor, sizes: list[int]) -> Tensor:
    """Adaptive average pooling to ``sizes``, as PyTorch's ``area`` mode."""
    if x.ndim == 4:
        return adaptive_avg_pool2d(x, sizes)
    for offset, size_out in enumerate(sizes):
        dim = 2 + offset
        if size_out != x.shape[dim]:
            matrix = _pooling_matrix(size_out, x.shape[dim], x)
            x = (x.transpose(dim, -1) @ matrix.T).transpose(dim, -1)
    return x


def _resample_dim(
    x: Tensor, dim: int, size_out: int, scale: float | None, align_corners: bool, mode: str
) -> Tensor:
    """``x`` resampled to ``size_out`` along ``dim`` by the separable ``mode``."""
    size_in = x.shape[dim]
    positions = _source_positions(size_in, size_out, scale, align_corners, mode)
    low = np.floor(positions).astype(np.int64)
    if mode in ("nearest", "nearest-exact"):
        return take(x, dim, tensor_from(low, device=x.device))
    if mode == "bicubic":
        weights = _cubic_weights(positions - low)
        indices = np.clip(low[:, None] + np.arange(-1, 3), 0, size_in - 1)
    else:
        low = np.minimum(low, size_in - 1)
        fraction = positions - low
        weights = np.stack([1 - fraction, fraction], axis=1)
        indices = np.stack([low, np.minimum(low + 1, size_in - 1)], axis=1)
    taps = weights.shape[1]
    # one take of every tap, (..., size_out * taps, ...) -> (..., size_out, taps, ...)
    gathered = take(x, dim, tensor_from(indices.reshape(-1), device=x.device))
    gathered = gathered.reshape(x.shape[:dim] + (size_out, taps) + x.shape[dim + 1 :])
    shape = (size_out, taps) + (1,) * (x.ndim - dim - 1)
    weight = tensor_from(weights.reshape(shape), dtype=x.dtype, device=x.device)
    return (gathered * weight).sum(dim + 1)


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
    ``"nearest-exact"``, ``"linear"`` (3-d input), ``"bilinear"`` and ``"bicubic"``
    (4-d), ``"trilinear"`` (5-d) with ``align_corners``, and ``"area"`` (adaptive
    average pooling). ``scale_factor`` gives the output size ``floor(size *
    scale_factor)`` and, unless ``recompute_scale_factor``, the scale that maps output
    positions to input positions. ``antialias=True`` (bilinear, bicubic) stretches the
    filter when shrinking so that every input under it counts, as PyTorch does.

    >>> import kernelgrad as kg
    >>> x = kg.tensor([[[1.0, 2.0]]])
    >>> kg.nn.functional.interpolate(x, scale_factor=2, mode="linear").tolist()
    [[[1.0, 1.25, 1.75, 2.0]]]
    """
    _check_mode(input, mode, align_corners, antialias)
    sizes, scales = _sizes(input, size, scale_factor, recompute_scale_factor)
    if min(sizes) <= 0:
        raise ShapeError(f"interpolate: the output size {tuple(sizes)} must be positive")
    if mode == "area":
        return _area(input, sizes)
    if antialias:
        return _antialias(input, sizes, scales, bool(align_corners), mode)
    result = input
    for offset, (size_out, scale) in enumerate(zip(sizes, scales)):
        result = _resample_dim(result, 2 + offset, size_out, scale, bool(align_corners), mode)
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


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode="nearest")``, with
    PyTorch's warning.

    >>> import warnings
    >>> import kernelgrad as kg
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     kg.nn.functional.upsample_nearest(kg.ones(1, 1, 2, 2), scale_factor=2).shape
    kg.Size([1, 1, 4, 4])
    """
    warnings.warn(
        "`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=2,
    )
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode="bilinear",
    align_corners=True)``, with PyTorch's warning.

    >>> import warnings
    >>> import kernelgrad as kg
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     kg.nn.functional.upsample_bilinear(kg.ones(1, 1, 2, 2), size=3).shape
    kg.Size([1, 1, 3, 3])
    """
    warnings.warn(
        "`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=2,
    )
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
