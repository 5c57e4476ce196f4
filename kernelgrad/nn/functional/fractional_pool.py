"""Fractional max pooling (Graham, 2014): ``F.fractional_max_pool2d/3d`` and their
``_with_indices`` forms.

Each (sample, channel) plane pools ``kernel_size`` windows whose start positions along a
dim of input size ``n``, output size ``m`` and pool size ``k`` come from one random
number ``u`` in [0, 1) per plane and dim, as PyTorch generates them (``generate_intervals``
in ``aten/src/ATen/native/FractionalMaxPool2d.cpp``), in the input's precision:

    alpha = (n - k) / (m - 1)
    start[i] = trunc((i + u) * alpha) - trunc(u * alpha)   for i < m - 1
    start[m - 1] = n - k

The numbers are ``_random_samples`` ((N, C, 2) or (N, C, 3), the input's dtype; for 2-d
pooling ``u[..., 0]`` is for the width and ``u[..., 1]`` for the height, for 3-d the
order is time, height, width), else drawn from kernelgrad's generator as PyTorch draws
them (``rand(N, C, dims)``). Given the same samples the values and indices are PyTorch's.

The starts are computed on the device with tensor ops (each rounded to the input's
dtype, as PyTorch's scalar code rounds). Every window's flat input positions make one
table; the input's values at them are one ``gather``, and the window's winner is the
first maximum in scan order, or its last NaN (PyTorch's ``val > max || isnan(val)``).
The pooled values are a ``gather`` of the input at the winners, so the gradient reaches
the input's maxima through ``gather``'s own (a position shared by overlapping windows
gets the sum, as PyTorch's backward adds).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import autograd
from ...dtypes import int64
from ...errors import ArgumentError, DTypeError, ShapeError, format_shape
from ...ops.creation import arange, empty, rand
from ...ops.elementwise import where
from ...ops.indexing import gather
from ...ops.movement import cat, flip
from ...tensor import Tensor

_AXES = {2: ("height", "width"), 3: ("time", "height", "width")}


def _sizes(value: Any, n: int, name: str, op: str) -> tuple[int, ...]:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ArgumentError(
                f"{op}: {name} must either be a single int or {n} ints, got {value!r}"
            )
        sizes = tuple(value)
    else:
        sizes = (value,) * n
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise ArgumentError(f"{op}: {name} must hold ints, got {value!r}")
    return tuple(int(size) for size in sizes)


def _ratios(value: Any, n: int, op: str) -> tuple[float, ...]:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ArgumentError(
                f"{op} requires output_ratio to either be a single number or {n} numbers, got "
                f"{value!r}"
            )
        return tuple(float(v) for v in value)
    return (float(value),) * n


def _starts(samples: Tensor, size: int, out: int, pool: int) -> Tensor:
    """(N, C, out) int64 window starts along one dim from (N, C) samples (see the module
    docstring); every step a tensor op in the samples' dtype."""
    n, c = samples.shape
    last = arange(size - pool, size - pool + 1, dtype=int64, device=samples.device)
    last = last.reshape(1, 1, 1).expand(n, c, 1)
    if out == 1:
        return last
    numpy_type = samples.dtype.numpy.type
    alpha = float(numpy_type(size - pool) / numpy_type(out - 1))  # rounded as PyTorch's
    steps = arange(out - 1, dtype=samples.dtype, device=samples.device)
    u = samples.unsqueeze(-1)
    moved = ((steps + u) * alpha).trunc().to(int64)
    first = (u * alpha).trunc().to(int64)
    return cat([moved - first, last], -1)


def fractional_max_pool_with_indices(
    input: Tensor,
    n_dims: int,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """(values, int64 indices) of ``n_dims``-d fractional max pooling; see the module
    docstring."""
    op = f"fractional_max_pool{n_dims}d"
    if not isinstance(input, Tensor):
        raise DTypeError(f"{op}: input must be a tensor, got {type(input).__name__}")
    if input.ndim not in (n_dims + 1, n_dims + 2):
        raise ShapeError(
            f"{op}: expected a {n_dims + 1}-d (unbatched) or {n_dims + 2}-d (batched) input, "
            f"got shape {format_shape(input.shape)}"
        )
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}: input must be float32 or float64, got {input.dtype.name}")
    unbatched = input.ndim == n_dims + 1
    x = input.unsqueeze(0) if unbatched else input
    for dim in range(1, x.ndim):
        if x.shape[dim] == 0:
            raise ShapeError(
                f"{op}: expected the input to have non-zero size for non-batch dimensions, "
                f"got shape {format_shape(input.shape)}"
            )
    pools = _sizes(kernel_size, n_dims, "kernel_size", op)
    if min(pools) < 1:
        raise ArgumentError(f"{op}: kernel_size must be positive, got {kernel_size!r}")
    spatial = x.shape[2:]
    if output_size is None:
        if output_ratio is None:
            raise ArgumentError(
                f"{op} requires specifying either an output_size or an output_ratio"
            )
        ratios = _ratios(output_ratio, n_dims, op)
        outs = tuple(int(spatial[k] * ratios[k]) for k in range(n_dims))
    else:
        outs = _sizes(output_size, n_dims, "output_size", op)
    for k in range(n_dims):
        if outs[k] < 0:
            raise ArgumentError(f"{op}: output_size must not be negative, got {outs}")
        # PyTorch's checks: at most the input size in 2-d, less than it in 3-d
        reach = outs[k] + pools[k] - 1
        if reach > spatial[k] or (n_dims == 3 and reach == spatial[k]):
            axis = _AXES[n_dims][k]
            bound = "at most" if n_dims == 2 else "less than"
            raise ArgumentError(
                f"{op}: pool {axis} {pools[k]} too large relative to input {axis} "
                f"{spatial[k]} (output {axis} {outs[k]}): output + pool - 1 must be {bound} "
                "the input size"
            )
    batch, channels = x.shape[:2]
    if random_samples is None:
        random_samples = rand(batch, channels, n_dims, dtype=x.dtype, device=x.device)
    else:
        _check_samples(random_samples, x, n_dims, op)
    # PyTorch's order: (width, height) for 2-d, (time, height, width) for 3-d
    order = (1, 0) if n_dims == 2 else (0, 1, 2)
    samples = random_samples.detach()[:batch]
    count = math.prod(spatial)
    plane = (batch, channels)
    if batch == 0 or math.prod(outs) == 0:
        values = x.reshape(batch, channels, count)[:, :, :0].reshape(plane + outs)  # empty
        indices = empty(plane + outs, dtype=int64, device=x.device)
    else:
        with autograd.no_grad():
            table = None  # (N, C, *outs, *pools) flat input positions of the windows' taps
            for k in range(n_dims):
                starts = _starts(samples[:, :, order[k]], spatial[k], outs[k], pools[k])
                taps = starts.unsqueeze(-1) + arange(pools[k], dtype=int64, device=x.device)
                shape = [1] * (2 * n_dims)
                shape[k], shape[n_dims + k] = outs[k], pools[k]
                along = taps.reshape(plane + tuple(shape)) * math.prod(spatial[k + 1 :])
                table = along if table is None else table + along
            window = math.prod(pools)
            table = table.reshape(plane + outs + (window,))
            flat = x.detach().reshape(batch, channels, count)
            read = gather(flat, 2, table.reshape(batch, channels, -1)).reshape(table.shape)
            winner = read.argmax(-1, keepdim=True)
            nans = read.isnan()
            last_nan = (window - 1) - flip(nans, (-1,)).to(int64).argmax(-1, keepdim=True)
            winner = where(nans.any(-1, keepdim=True), last_nan, winner)
            indices = gather(table, -1, winner).squeeze(-1)
        values = gather(x.reshape(batch, channels, count), 2, indices.reshape(*plane, -1))
        values = values.reshape(plane + outs)
    if unbatched:
        return values.squeeze(0), indices.squeeze(0)
    return values, indices


def _check_samples(samples: Any, x: Tensor, n_dims: int, op: str) -> None:
    """PyTorch's checks of ``_random_samples``: (>= N, C, n_dims), the input's dtype."""
    if not isinstance(samples, Tensor):
        raise DTypeError(f"{op}: _random_samples must be a tensor, got {type(samples).__name__}")
    if samples.dtype != x.dtype:
        raise DTypeError(
            f"{op}: expect _random_samples to have the same dtype as input ({x.dtype.name}), "
            f"got {samples.dtype.name}"
        )
    if samples.ndim != 3:
        raise ShapeError(f"{op}: expect _random_samples to have 3 dimensions, got {samples.ndim}")
    if samples.shape[0] < x.shape[0]:
        raise ShapeError(
            f"{op}: expect _random_samples.size(0) no less than the input batch size "
            f"({x.shape[0]}), got {samples.shape[0]}"
        )
    if samples.shape[1] != x.shape[1]:
        raise ShapeError(
            f"{op}: expect _random_samples.size(1) to equal the input channel size "
            f"({x.shape[1]}), got {samples.shape[1]}"
        )
    if samples.shape[2] != n_dims:
        raise ShapeError(
            f"{op}: expect _random_samples.size(2) to equal {n_dims}, got {samples.shape[2]}"
        )
    if samples.device != x.device:
        from ...errors import DeviceMismatchError

        raise DeviceMismatchError(
            f"{op}: _random_samples is on {samples.device}, the input on {x.device}; move it "
            f"with _random_samples.to({str(x.device)!r})"
        )


# --- PyTorch's names ---------------------------------------------------------------------------


def fractional_max_pool2d_with_indices(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """2-d fractional max pooling of (N, C, H, W) or (C, H, W) input, and the flat
    position ``h * W + w`` of each window's maximum.

    >>> import kernelgrad as kg
    >>> x = kg.arange(16.0).reshape(1, 1, 4, 4)
    >>> samples = kg.full((1, 1, 2), 0.5)
    >>> values, indices = kg.nn.functional.fractional_max_pool2d_with_indices(
    ...     x, 2, output_size=2, _random_samples=samples)
    >>> values.tolist(), indices.tolist()
    ([[[[5.0, 7.0], [13.0, 15.0]]]], [[[[5, 7], [13, 15]]]])
    """
    return fractional_max_pool_with_indices(
        input, 2, kernel_size, output_size, output_ratio, _random_samples
    )


def fractional_max_pool3d_with_indices(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """3-d fractional max pooling of (N, C, T, H, W) or (C, T, H, W) input, and the flat
    position ``(t * H + h) * W + w`` of each window's maximum."""
    return fractional_max_pool_with_indices(
        input, 3, kernel_size, output_size, output_ratio, _random_samples
    )


def fractional_max_pool2d(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """2-d fractional max pooling (``return_indices=True``: with the indices)."""
    values, indices = fractional_max_pool_with_indices(
        input, 2, kernel_size, output_size, output_ratio, _random_samples
    )
    return (values, indices) if return_indices else values


def fractional_max_pool3d(
    input: Tensor,
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """3-d fractional max pooling (``return_indices=True``: with the indices)."""
    values, indices = fractional_max_pool_with_indices(
        input, 3, kernel_size, output_size, output_ratio, _random_samples
    )
    return (values, indices) if return_indices else values
