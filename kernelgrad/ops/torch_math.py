"""PyTorch's special functions, bit operations, statistics, scatter reductions and small
helpers, over the primitives of ``ops/special.py`` and the existing operations.

As in ``ops/composite.py``, what depends on the values' structure (``unique``, ``mode``,
``nanmedian``, which elements ``scatter_reduce`` combines, ``histogram``) is worked out
with NumPy on the host (a copy from the device for a CUDA tensor); the values that carry
a gradient are then selected on the tensor's own device with ``take``, so gradients come
from the composition.

The in-place forms of every out-of-place method (``acos_``, ``atan2_``, ``lerp_``,
``cumsum_``, ...) are bound at the end of the module, systematically: each is the
out-of-place method written back into the tensor by the rule of ``ops/inplace.py``.
"""

from __future__ import annotations

import math
import os
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes as _dtypes
from ..dtypes import DType, as_dtype, bool_, default_float, float64, int64
from ..errors import ArgumentError, DTypeError, IndexingError, ShapeError, UnsupportedError
from ..shapes import normalize_dim
from ..tensor import Tensor, ValuesIndices
from . import composite as _composite
from . import elementwise as _ew
from . import special as _sp
from . import torch_functions as _tf
from .creation import arange, full, ones, tensor, zeros
from .indexing import index_put
from .indexing import take as _take_dim
from .movement import cat

# --- special functions ------------------------------------------------------------------------


def lgamma(x: Any) -> Tensor:
    """The natural logarithm of the absolute value of the gamma function."""
    return _sp.LGAMMA(x)


def digamma(x: Any) -> Tensor:
    """The logarithmic derivative of the gamma function (``psi``)."""
    return _sp.DIGAMMA(x)


def polygamma(n: int, x: Any) -> Tensor:
    """The ``n``-th derivative of the digamma function."""
    if isinstance(n, Tensor) or int(n) != n or n < 0:
        raise ArgumentError(f"polygamma: n must be a non-negative integer, got {n!r}")
    return _sp.DIGAMMA(x) if n == 0 else _sp.POLYGAMMA(int(n), x)


def erfc(x: Any) -> Tensor:
    """The complementary error function ``1 - erf(x)``, accurate for large ``x``."""
    return _sp.ERFC(x)


def erfinv(x: Any) -> Tensor:
    """The inverse error function (NaN outside [-1, 1])."""
    return _sp.ERFINV(x)


def i0(x: Any) -> Tensor:
    """The modified Bessel function of the first kind, order 0."""
    return _sp.I0(x)


def i1(x: Any) -> Tensor:
    """The modified Bessel function of the first kind, order 1."""
    return _sp.I1(x)


def igamma(a: Any, x: Any) -> Tensor:
    """The regularised lower incomplete gamma function ``P(a, x)`` (no gradient with
    respect to ``a``, as in PyTorch)."""
    return _sp.IGAMMA(a, x, False)


def igammac(a: Any, x: Any) -> Tensor:
    """The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    return _sp.IGAMMA(a, x, True)


def mvlgamma(x: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension ``p``; every element must be
    greater than ``(p - 1) / 2`` (checked, as PyTorch does)."""
    if p < 1:
        raise ArgumentError(f"mvlgamma: p must be at least 1, got {p}")
    if x.numel() and not bool((x > (p - 1) / 2).all().item()):
        raise ArgumentError(
            f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2} for p={p}"
        )
    total = None
    for i in range(p):
        term = _sp.LGAMMA(x - i / 2)
        total = term if total is None else total + term
    return total + p * (p - 1) / 4 * math.log(math.pi)


FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


def frexp(x: Tensor) -> FrexpResult:
    """``(mantissa, exponent)`` with ``x = mantissa * 2**exponent`` and ``0.5 <= |mantissa|
    < 1`` (the exponent as int32, as PyTorch)."""
    return FrexpResult(_sp.FREXP_MANTISSA(x), _sp.FREXP_EXPONENT(x))


def ldexp(x: Any, other: Any) -> Tensor:
    """``x * 2**other``."""
    return _ew.MUL(x, _composite.exp2(other if isinstance(other, Tensor) else tensor(other)))


def nextafter(x: Any, y: Any) -> Tensor:
    """The next floating point value after ``x`` towards ``y``."""
    dtype = _dtypes.result_type(x, y)
    bits, tiny = (53, 2.0**-1074) if dtype is float64 else (24, 2.0**-149)
    return _sp.NEXTAFTER(x, y, bits, tiny)


def float_power(x: Any, y: Any) -> Tensor:
    """``x ** y`` computed in float64 (the result is float64, as in PyTorch)."""
    x = x.to(float64) if isinstance(x, Tensor) else x
    y = y.to(float64) if isinstance(y, Tensor) else y
    if not isinstance(x, Tensor):
        x = full((), x, dtype=float64, device=y.device)
    return _ew.POW(x, y)


def heaviside(x: Tensor, values: Any) -> Tensor:
    """0 where ``x < 0``, ``values`` where ``x == 0``, 1 where ``x > 0`` (not
    differentiable, as in PyTorch)."""
    if isinstance(values, Tensor) and values.dtype != x.dtype:
        raise DTypeError(
            f"heaviside: input ({x.dtype}) and values ({values.dtype}) must have the same "
            "dtype, as in PyTorch; convert one of them"
        )
    x = x.detach()
    values = values.detach() if isinstance(values, Tensor) else values
    return _ew.where(x == 0, values, _ew.where(x > 0, 1, 0)).to(x.dtype)


def xlogy(x: Any, y: Any) -> Tensor:
    return _composite.xlogy(x, y)


# --- bit operations ---------------------------------------------------------------------------


def _bool_result(x: Any, y: Any) -> bool:
    return _dtypes.result_type(x, y) is bool_


def bitwise_and(x: Any, y: Any) -> Tensor:
    """Elementwise ``x & y`` of integer or bool tensors."""
    return _ew.LOGICAL_AND(x, y) if _bool_result(x, y) else _sp.BITWISE_AND(x, y)


def bitwise_or(x: Any, y: Any) -> Tensor:
    """Elementwise ``x | y`` of integer or bool tensors."""
    return _ew.LOGICAL_OR(x, y) if _bool_result(x, y) else _sp.BITWISE_OR(x, y)


def bitwise_xor(x: Any, y: Any) -> Tensor:
    """Elementwise ``x ^ y`` of integer or bool tensors."""
    return _ew.LOGICAL_XOR(x, y) if _bool_result(x, y) else _sp.BITWISE_XOR(x, y)


def bitwise_not(x: Tensor) -> Tensor:
    """Elementwise ``~x`` of an integer or bool tensor."""
    return _ew.LOGICAL_NOT(x) if x.dtype is bool_ else _sp.BITWISE_NOT(x)


def _shift(op: Any, x: Any, y: Any) -> Tensor:
    dtype = _dtypes.result_type(x, y)
    return op(x, y, 8 * dtype.itemsize)


def bitwise_left_shift(x: Any, y: Any) -> Tensor:
    """``x << y`` (0 for shifts outside [0, bits), as PyTorch)."""
    return _shift(_sp.BITWISE_LEFT_SHIFT, x, y)


def bitwise_right_shift(x: Any, y: Any) -> Tensor:
    """``x >> y``, arithmetic (sign-filling) for signed integers."""
    return _shift(_sp.BITWISE_RIGHT_SHIFT, x, y)


def gcd(x: Any, y: Any) -> Tensor:
    """The greatest common divisor (non-negative) of integer tensors."""
    return _sp.GCD(x, y)


def lcm(x: Any, y: Any) -> Tensor:
    """The least common multiple (non-negative) of integer tensors."""
    g = _sp.GCD(x, y)
    zero = g == 0
    return _ew.where(zero, 0, _ew.ABS(_ew.MUL(_ew.FLOOR_DIVIDE(x, _ew.where(zero, 1, g)), y)))


# --- statistics and sorting -------------------------------------------------------------------


def _host(x: Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


def _to(array: np.ndarray, like: Tensor, dtype: DType | None = None) -> Tensor:
    return tensor(np.ascontiguousarray(array), dtype=dtype, device=like.device)


def msort(x: Tensor) -> Tensor:
    """``x`` sorted along its first dim."""
    return _composite.sort(x, 0).values


def unique(
    x: Tensor,
    sorted: bool = True,  # noqa: A002
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    """The distinct values (or slices along ``dim``) of ``x``, in ascending order (also
    for ``sorted=False``, which PyTorch allows to be any order)."""
    values = _host(x)
    if dim is None:
        found, inverse, counts = np.unique(
            values.reshape(-1), return_inverse=True, return_counts=True
        )
        inverse = inverse.reshape(values.shape)
    else:
        d = normalize_dim(dim, x.ndim, "unique")
        found, inverse, counts = np.unique(values, return_inverse=True, return_counts=True, axis=d)
        inverse = inverse.reshape(-1)
    result: list[Tensor] = [_to(found, x, x.dtype)]
    if return_inverse:
        result.append(_to(inverse.astype(np.int64), x))
    if return_counts:
        result.append(_to(counts.astype(np.int64), x))
    return result[0] if len(result) == 1 else tuple(result)


def unique_consecutive(
    x: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> Any:
    """``x`` with each run of equal consecutive values (or slices along ``dim``) kept once."""
    values = _host(x)
    if dim is None:
        flat = values.reshape(-1)
        starts = np.ones(flat.shape[0], bool)
        starts[1:] = flat[1:] != flat[:-1]
        found = flat[starts]
        inverse_shape = values.shape
    else:
        d = normalize_dim(dim, x.ndim, "unique_consecutive")
        moved = np.moveaxis(values, d, 0)
        rows = moved.reshape(moved.shape[0], -1)
        starts = np.ones(rows.shape[0], bool)
        starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
        found = np.moveaxis(moved[starts], 0, d)
        inverse_shape = (rows.shape[0],)
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), starts.shape[0]))
    result: list[Tensor] = [_to(found, x, x.dtype)]
    if return_inverse:
        result.append(_to(inverse.reshape(inverse_shape).astype(np.int64), x))
    if return_counts:
        result.append(_to(counts.astype(np.int64), x))
    return result[0] if len(result) == 1 else tuple(result)


def _rows(x: Tensor, dim: int, op: str) -> tuple[np.ndarray, int]:
    """The values with ``dim`` last, as (rows, length), and the normalised dim."""
    d = normalize_dim(dim, max(x.ndim, 1), op)
    values = _host(x).reshape(x.shape or (1,))
    moved = np.moveaxis(values, d, -1)
    return moved.reshape(-1, moved.shape[-1]), d


def _select_rows(x: Tensor, d: int, picks: np.ndarray, keepdim: bool) -> ValuesIndices:
    """The values of ``x`` at index ``picks`` (one per row of ``dim`` ``d``) and the indices."""
    xs = x if x.ndim else x.reshape(1)
    shape = list(xs.shape)
    shape.pop(d)
    moved_shape = tuple(shape)
    indices = np.moveaxis(picks.reshape(*moved_shape, 1), -1, d)
    index = _to(indices.astype(np.int64), x)
    values = _composite.take_along_dim(xs, index, d)
    if not keepdim:
        values, index = values.squeeze(d), index.squeeze(d)
    if x.ndim == 0:
        values, index = values.reshape(()), index.reshape(())
    return ValuesIndices(values, index)


def mode(x: Tensor, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """The most frequent value along ``dim`` (the smallest of those tied) and the index
    of its last occurrence (PyTorch's CPU choice)."""
    rows, d = _rows(x, dim, "mode")
    if rows.shape[1] == 0:
        raise IndexingError("mode: cannot compute the mode of an empty dimension")
    picks = np.empty(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        found, counts = np.unique(row, return_counts=True)
        best = found[np.argmax(counts)]
        picks[r] = np.flatnonzero(row == best)[-1]
    return _select_rows(x, d, picks, keepdim)


def nanmedian(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The lower median of the non-NaN values (NaN where a row holds only NaN)."""
    if dim is None:
        flat = x.reshape(-1)
        return nanmedian(flat, 0).values if flat.numel() else _composite.median(x)
    rows, d = _rows(x, dim, "nanmedian")
    picks = np.zeros(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        valid = np.flatnonzero(~np.isnan(row)) if row.dtype.kind == "f" else np.arange(len(row))
        if len(valid) == 0:
            picks[r] = 0
            continue
        order = valid[np.argsort(row[valid], kind="stable")]
        picks[r] = order[(len(valid) - 1) // 2]
    return _select_rows(x, d, picks, keepdim)


def _quantile(
    x: Tensor, q: Any, dim: Any, keepdim: bool, interpolation: str, ignore_nan: bool, op: str
) -> Tensor:
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: input must be a floating point tensor, got {x.dtype}")
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ArgumentError(
            f"{op}: interpolation must be linear, lower, higher, midpoint or nearest, got "
            f"{interpolation!r}"
        )
    scalar_q = not isinstance(q, Tensor) or q.ndim == 0
    qs = np.atleast_1d(_host(q) if isinstance(q, Tensor) else np.asarray(q, np.float64))
    if qs.ndim > 1:
        raise ShapeError(f"{op}: q must be a scalar or a 1-D tensor")
    if ((qs < 0) | (qs > 1)).any():
        raise ArgumentError(f"{op}: q values must be in the range [0, 1]")
    if dim is None:
        source, d = x.reshape(-1), 0
    else:
        d = normalize_dim(dim, max(x.ndim, 1), op)
        source = x if x.ndim else x.reshape(1)
    n = source.shape[d]
    if n == 0:
        raise IndexingError(f"{op}: cannot compute a quantile of an empty dimension")
    ordered = _composite.sort(source, d).values  # NaN sorts last
    nan_count = _ew.ISNAN(source).sum(d, keepdim=True)
    count = (nan_count * -1 + n) if ignore_nan else nan_count * 0 + n
    last = _ew.where(count > 0, count - 1, 0).to(ordered.dtype)
    results = []
    for value in qs:
        position = last * float(value)
        if interpolation == "lower":
            position = position.floor()
        elif interpolation == "higher":
            position = position.ceil()
        elif interpolation == "nearest":
            position = _composite.round(position)
        low = position.floor()
        high = position.ceil()
        below = _composite.take_along_dim(ordered, low.to(int64), d)
        above = _composite.take_along_dim(ordered, high.to(int64), d)
        if interpolation == "midpoint":
            value_at = below + (above - below) * _ew.where(high > low, 0.5, 0.0)
        else:
            value_at = below + (above - below) * (position - low)
        if ignore_nan:
            value_at = _ew.where(count == 0, math.nan, value_at)
        else:
            value_at = _ew.where(nan_count > 0, math.nan, value_at)
        results.append(value_at)
    stacked = cat([r.unsqueeze(0) for r in results], 0)  # (len(q), ..., 1, ...)
    if keepdim:
        if dim is None:
            stacked = stacked.reshape((len(qs),) + (1,) * x.ndim)
    else:
        stacked = stacked.squeeze(d + 1)
    return stacked[0] if scalar_q else stacked


def quantile(
    x: Tensor,
    q: Any,
    dim: Any = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
) -> Tensor:
    """The ``q``-th quantiles of ``x`` along ``dim`` (NaN where a row holds NaN)."""
    return _quantile(x, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(
    x: Tensor,
    q: Any,
    dim: Any = None,
    keepdim: bool = False,
    *,
    interpolation: str = "linear",
) -> Tensor:
    """``quantile`` ignoring NaN values."""
    return _quantile(x, q, dim, keepdim, interpolation, True, "nanquantile")


def histc(x: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of ``bins`` equal bins over ``[min, max]`` (the data's range when both
    are 0); values outside are ignored (not differentiable)."""
    if not x.dtype.is_floating_point:
        raise DTypeError(f"histc: input must be a floating point tensor, got {x.dtype}")
    if bins <= 0:
        raise ArgumentError(f"histc: bins must be > 0, got {bins}")
    low, high = float(min), float(max)
    if low > high:
        raise ArgumentError(f"histc: max ({high}) must be larger than min ({low})")
    values = x.detach().reshape(-1)
    if low == high and values.numel():
        low, high = float(values.amin().item()), float(values.amax().item())
    if low == high:
        low, high = low - 1, high + 1
    position = ((values - low) * (bins / (high - low))).floor().to(int64)
    position = _ew.where(values == high, bins - 1, position)
    inside = (values >= low) & (values <= high)
    position = _ew.where(inside, position, 0)
    counts = zeros(bins, dtype=x.dtype, device=x.device)
    return _tf.index_add(counts, 0, position, inside.to(x.dtype))


HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])


def histogram(
    x: Tensor,
    bins: Any = 100,
    *,
    range: Any = None,  # noqa: A002
    weight: Tensor | None = None,
    density: bool = False,
) -> HistogramResult:
    """``(hist, bin_edges)`` as ``numpy.histogram`` (not differentiable)."""
    if not x.dtype.is_floating_point:
        raise DTypeError(f"histogram: input must be a floating point tensor, got {x.dtype}")
    edges = _host(bins) if isinstance(bins, Tensor) else int(bins)
    hist, found = np.histogram(
        _host(x).reshape(-1),
        bins=edges,
        range=range,
        weights=None if weight is None else _host(weight).reshape(-1),
        density=density,
    )
    return HistogramResult(_to(hist, x, x.dtype), _to(found, x, x.dtype))


HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])


def _linspace_edges(low: float, high: float, count: int, dtype: Any) -> np.ndarray:
    """``count + 1`` equal-width edges over ``[low, high]`` in ``dtype`` as PyTorch's
    CPU ``linspace`` computes them: ``start + step * i`` for the first half and ``end -
    step * (count - i)`` for the rest, each a fused multiply-add (emulated in extended
    precision), so that a value on an edge falls in the same bin as in PyTorch."""
    kind = dtype.numpy.type
    start, end = kind(low), kind(high)
    step = kind((end - start) / kind(count))
    index = np.arange(count + 1)
    wide = np.longdouble
    edges = np.where(
        index < (count + 1) // 2,
        wide(start) + wide(step) * index,
        wide(end) - wide(step) * (count - index),
    )
    return edges.astype(dtype.numpy)


def histogramdd(
    input: Tensor,  # noqa: A002
    bins: Any,
    *,
    range: Any = None,  # noqa: A002
    weight: Tensor | None = None,
    density: bool = False,
) -> HistogramddResult:
    """``(hist, bin_edges)`` of the points in the rows of ``input`` (``(..., D)``: the
    last dim holds each point's ``D`` coordinates), as ``torch.histogramdd``: ``bins``
    an int, one int per dim, or one tensor of increasing edges per dim; ``range`` the
    flat ``(min0, max0, min1, max1, ...)`` of equal-width bins (the data's range
    otherwise); ``weight`` of shape ``input.shape[:-1]``. Runs on the host, like
    ``histogram`` (not differentiable)."""
    name = "histogramdd"
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{name}: input must be a floating point tensor, got {input.dtype}")
    if input.ndim < 2:
        raise ShapeError(
            f"{name}: input tensor should have at least 2 dimensions (points in its rows, "
            f"coordinates in its last dim), got shape {tuple(input.shape)}; use histogram "
            "for one dimension or reshape(-1, 1)"
        )
    dims = input.shape[-1]
    points = _host(input).reshape(-1, dims)
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * dims
    if len(per_dim) != dims:
        raise ShapeError(
            f"{name}: the size of bins ({len(per_dim)}) must be equal to the innermost "
            f"dimension of the input ({dims})"
        )
    if range is not None:
        range = [float(v) for v in range]  # noqa: A001
        if len(range) != 2 * dims:
            raise ArgumentError(
                f"{name}: for a {dims}-dimensional histogram range should have {2 * dims} "
                f"elements, but got {len(range)}"
            )
    weights = None
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape[:-1]):
            raise ShapeError(
                f"{name}: weight must have the shape of the input without its last dim, "
                f"{tuple(input.shape[:-1])}, got {tuple(weight.shape)}"
            )
        if weight.dtype is not input.dtype:
            raise DTypeError(
                f"{name}: weight must have the input's dtype {input.dtype}, got {weight.dtype}"
            )
        weights = _host(weight).reshape(-1)
    edges = []
    for d, spec in enumerate(per_dim):
        if isinstance(spec, Tensor):
            found = _host(spec).astype(input.dtype.numpy).reshape(-1)
            if found.size < 1 or np.any(np.diff(found) < 0):
                raise ArgumentError(
                    f"{name}: the bin edges of dimension {d} must be a non-empty increasing "
                    "1-d tensor"
                )
            edges.append(found)
            continue
        count = int(spec)
        if count <= 0:
            raise ArgumentError(f"{name}: bins must be > 0, but got {count} for dimension {d}")
        if range is not None:
            low, high = range[2 * d], range[2 * d + 1]
        elif points.shape[0]:
            low, high = float(points[:, d].min()), float(points[:, d].max())
        else:
            low, high = 0.0, 1.0
        if low > high:
            raise ArgumentError(
                f"{name}: min should not exceed max, but got min {low} max {high} for dimension {d}"
            )
        if not (np.isfinite(low) and np.isfinite(high)):
            raise ArgumentError(f"{name}: range of [{low}, {high}] is not finite for dimension {d}")
        if low == high:
            low, high = low - 0.5, high + 0.5
        edges.append(_linspace_edges(low, high, count, input.dtype))
    # NumPy's bins are the float edges computed above (exact in float64), so that a
    # value falls in the bin PyTorch puts it in; the rightmost edge is inclusive
    hist, _ = np.histogramdd(
        points.astype(np.float64),
        bins=[e.astype(np.float64) for e in edges],
        weights=None if weights is None else weights.astype(np.float64),
        density=density,
    )
    return HistogramddResult(
        _to(hist, input, input.dtype), tuple(_to(e, input, input.dtype) for e in edges)
    )


def dist(x: Tensor, y: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm of ``x - y``."""
    return _composite.norm(x - y, p)


def renorm(x: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along ``dim`` rescaled to a ``p``-norm of at most ``maxnorm``."""
    if x.ndim <= 1:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got {x.ndim}")
    d = normalize_dim(dim, x.ndim, "renorm")
    others = tuple(k for k in range(x.ndim) if k != d)
    norms = _composite.norm(x, p, others, keepdim=True)
    scale = _ew.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return x * scale


def cov(
    x: Tensor,
    *,
    correction: int = 1,
    fweights: Tensor | None = None,
    aweights: Tensor | None = None,
) -> Tensor:
    """The covariance matrix of the variables in the rows of ``x`` (observations in the
    columns), with optional frequency and observation weights."""
    if x.ndim > 2:
        raise ShapeError(f"cov: expected a tensor with at most 2 dims, got {x.ndim}")
    obs = x if x.ndim == 2 else x.reshape(1, -1)
    if not obs.dtype.is_floating_point:
        obs = obs.to(default_float())
    n = obs.shape[1]
    weights = None
    if fweights is not None:
        weights = fweights
    if aweights is not None:
        weights = aweights if weights is None else weights * aweights
    if weights is None:
        total = float(n)
        mean = obs.mean(1, keepdim=True)
        centered = obs - mean
        norm = total - correction
        result = (centered @ centered.t()) / norm
    else:
        weights = weights.to(obs.dtype)
        total = weights.sum()
        mean = (obs * weights).sum(1, keepdim=True) / total
        centered = obs - mean
        if correction == 0:
            norm = total
        elif aweights is None:
            norm = total - correction
        else:
            norm = total - correction * (weights * aweights.to(obs.dtype)).sum() / total
        result = ((centered * weights) @ centered.t()) / norm
    return result.reshape(()) if tuple(result.shape) == (1, 1) else result


def corrcoef(x: Tensor) -> Tensor:
    """The Pearson correlation coefficients of the rows of ``x``."""
    c = cov(x)
    if c.ndim == 0:
        return c / c
    d = _composite.diagonal(c).sqrt()
    return _ew.clamp(c / d.unsqueeze(1) / d.unsqueeze(0), -1, 1)


# --- scatter reductions and indexed writes ------------------------------------------------------


def _identity(reduce: str, dtype: DType) -> Any:
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.is_floating_point:
        return -math.inf if reduce == "amax" else math.inf
    info = np.iinfo(dtype.numpy) if dtype is not bool_ else None
    if info is None:
        return reduce == "amin"
    return int(info.min) if reduce == "amax" else int(info.max)


def scatter_reduce(
    x: Tensor,
    dim: int,
    index: Tensor,
    src: Tensor,
    reduce: str,
    *,
    include_self: bool = True,
) -> Tensor:
    """``x`` with ``src``'s values combined into the positions ``index`` gives along
    ``dim`` by ``reduce`` (``sum``, ``prod``, ``mean``, ``amax``, ``amin``), starting from
    ``x``'s value there unless ``include_self=False``. Gradients flow to ``x`` and ``src``
    (for ``amax``/``amin`` split among ties, as PyTorch)."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ArgumentError(
            f"scatter_reduce: reduce must be sum, prod, mean, amax or amin, got {reduce!r}"
        )
    if x.ndim == 0:
        flat = [t.reshape(1) for t in (x, index, src)]
        return scatter_reduce(flat[0], dim, flat[1], flat[2], reduce, include_self=include_self)[0]
    d = normalize_dim(dim, x.ndim, "scatter_reduce")
    _tf._check_scatter(x, d, index, src, "scatter_reduce")
    if src.dtype != x.dtype:
        raise DTypeError(
            f"scatter_reduce: src ({src.dtype}) must have the dtype of self ({x.dtype})"
        )
    if index.numel() == 0:
        return x.clone()
    # which target (flat position of x) each used element of src goes to
    idx = _host(index).astype(np.int64)
    size = x.shape[d]
    if ((idx < -size) | (idx >= size)).any():
        raise IndexingError(
            f"scatter_reduce: an index is out of bounds for dimension {d} with size {size}"
        )
    idx = np.where(idx < 0, idx + size, idx)
    grids = np.indices(idx.shape)
    coords = [grids[k] for k in range(idx.ndim)]
    coords[d] = idx
    targets = np.ravel_multi_index(coords, x.shape).reshape(-1)
    src_positions = np.ravel_multi_index(list(grids), src.shape).reshape(-1)
    touched, member_of = np.unique(targets, return_inverse=True)
    numel = x.numel()
    # candidates: x's elements, then src's, then the reduction's identity
    flat_x = x.reshape(-1)
    flat_src = src.reshape(-1)
    pad = full((1,), _identity(reduce, x.dtype), dtype=x.dtype, device=x.device)
    candidates = cat([flat_x, flat_src, pad], 0)
    pad_at = numel + flat_src.numel()
    counts = np.bincount(member_of, minlength=len(touched)) + (1 if include_self else 0)
    width = int(counts.max())
    table = np.full((len(touched), width), pad_at, np.int64)
    fill = np.zeros(len(touched), np.int64)
    if include_self:
        table[:, 0] = touched
        fill[:] = 1
    order = np.argsort(member_of, kind="stable")
    for k in order:
        row = member_of[k]
        table[row, fill[row]] = numel + src_positions[k]
        fill[row] += 1
    gathered = _take_dim(candidates, 0, _to(table, x))
    if reduce == "sum":
        reduced = gathered.sum(1)
    elif reduce == "prod":
        reduced = _composite.prod(gathered, 1)
    elif reduce == "amax":
        reduced = gathered.amax(1)
    elif reduce == "amin":
        reduced = gathered.amin(1)
    else:
        total = gathered.sum(1)
        how_many = _to(counts, x, x.dtype)
        if x.dtype.is_floating_point:
            reduced = total / how_many
        else:
            reduced = _composite.div(total, how_many, "floor")
    # the result: x where untouched, the reduction where touched
    lookup = np.zeros(max(numel, 1), np.int64)
    lookup[touched] = np.arange(len(touched))
    mask = np.zeros(max(numel, 1), bool)
    mask[touched] = True
    spread = _take_dim(reduced, 0, _to(lookup[:numel], x))
    result = _ew.where(_to(mask[:numel], x), spread, flat_x)
    return result.reshape(x.shape)


def index_reduce(
    x: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """``scatter_reduce`` with one index per slice of ``source`` along ``dim``
    (``reduce``: ``prod``, ``mean``, ``amax``, ``amin``)."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ArgumentError(
            f"index_reduce: reduce must be prod, mean, amax or amin, got {reduce!r}"
        )
    d = normalize_dim(dim, max(x.ndim, 1), "index_reduce")
    if index.ndim > 1:
        raise ShapeError("index_reduce: index must be a 1-D tensor")
    if x.ndim and source.ndim and index.numel() != source.shape[d]:
        raise ShapeError(
            f"index_reduce: index has {index.numel()} entries but source has "
            f"{source.shape[d]} along dim {d}"
        )
    shape = [1] * max(source.ndim, 1)
    shape[d] = -1
    full_index = index.reshape(shape).expand(*(source.shape or (1,)))
    return scatter_reduce(x, d, full_index, source, reduce, include_self=include_self)


def take(x: Tensor, *args: Any) -> Tensor:
    """``kg.take(x, index)``: PyTorch's form, the elements of ``x`` seen as 1-D at
    ``index`` (a tensor of any shape); ``kg.take(x, dim, index)``: kernelgrad's gather
    along ``dim`` (see ``ops/indexing.take``)."""
    if len(args) == 2:
        return _take_dim(x, *args)
    if len(args) != 1:
        raise ArgumentError("take: expected take(input, index) or take(input, dim, index)")
    index = args[0]
    if not isinstance(index, Tensor):
        index = tensor(index, dtype=int64, device=x.device)
    return _take_dim(x.reshape(-1), 0, index)


def put(x: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """``x`` with ``source`` written at the flat positions ``index`` (added with
    ``accumulate=True``)."""
    flat = index_put(x.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(x.shape)


def _scatter_into_view(x: Tensor, src: Any, view: Any, op: str) -> Tensor:
    """``x`` with ``src`` written into the view ``view(x)`` (out of place, differentiable)."""
    positions = view(arange(x.numel(), device=x.device).reshape(x.shape))
    if isinstance(src, Tensor) and tuple(src.shape) != tuple(positions.shape):
        raise ShapeError(
            f"{op}: src has shape {tuple(src.shape)}, but the embedded view has shape "
            f"{tuple(positions.shape)}"
        )
    flat = positions.reshape(-1)
    values = src.reshape(-1) if isinstance(src, Tensor) else src
    return index_put(x.reshape(-1), (flat,), values).reshape(x.shape)


def diagonal_scatter(
    x: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> Tensor:
    """``x`` with ``src`` embedded on the diagonal ``diagonal(offset, dim1, dim2)``."""
    return _scatter_into_view(
        x, src, lambda t: _composite.diagonal(t, offset, dim1, dim2), "diagonal_scatter"
    )


def select_scatter(x: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """``x`` with ``src`` embedded at ``index`` along ``dim``."""
    return _scatter_into_view(x, src, lambda t: _tf.select(t, dim, index), "select_scatter")


def slice_scatter(
    x: Tensor,
    src: Tensor,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> Tensor:
    """``x`` with ``src`` embedded in the slice ``start:end:step`` along ``dim``."""
    d = normalize_dim(dim, x.ndim, "slice_scatter")

    def view(t: Tensor) -> Tensor:
        return t[(slice(None),) * d + (slice(start, end, step),)]

    return _scatter_into_view(x, src, view, "slice_scatter")


def _fill_diagonal(x: Tensor, value: Any, wrap: bool) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(f"fill_diagonal_: the tensor needs at least 2 dims, got {x.ndim}")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise ShapeError("fill_diagonal_: all dimensions of the tensor must have the same length")
    if x.ndim == 2:
        rows, cols = x.shape
        step = cols + 1
        limit = rows * cols if wrap else min(rows, cols) * cols
        positions = np.arange(0, limit, step, dtype=np.int64)
        if not wrap:
            positions = positions[: min(rows, cols)]
    else:
        n = x.shape[0]
        step = sum(int(np.prod(x.shape[k + 1 :])) for k in range(x.ndim))
        positions = np.arange(n, dtype=np.int64) * step
    flat = index_put(x.reshape(-1), (_to(positions, x),), value)
    return flat.reshape(x.shape)


def sum_to_size(x: Tensor, *size: Any) -> Tensor:
    """``x`` summed to ``size`` (which ``x`` must be broadcastable to)."""
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    lead = x.ndim - len(size)
    if lead < 0 or any(s not in (1, n) for s, n in zip(size, x.shape[lead:])):
        raise ShapeError(
            f"sum_to_size: size {size} is not expandable to the tensor's size {tuple(x.shape)}"
        )
    result = x.sum(tuple(range(lead))) if lead else x
    dims = tuple(k for k, (s, n) in enumerate(zip(size, result.shape)) if s == 1 and n != 1)
    return result.sum(dims, keepdim=True) if dims else result


# --- dtypes, creation and process state --------------------------------------------------------


def result_type(x: Any, y: Any) -> DType:
    """The dtype of an arithmetic operation on ``x`` and ``y`` (tensors or numbers)."""
    return _dtypes.result_type(x, y)


def can_cast(from_: Any, to: Any) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` (no float to integer, no
    number to bool)."""
    return as_dtype(from_).category <= as_dtype(to).category


class finfo:
    """Machine limits of a floating point dtype (the default float dtype by default)."""

    def __init__(self, dtype: Any = None) -> None:
        self.dtype = default_float() if dtype is None else as_dtype(dtype)
        if not self.dtype.is_floating_point:
            raise DTypeError(f"finfo: {self.dtype} is not a floating point dtype; use kg.iinfo")
        info = np.finfo(self.dtype.numpy)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = float(info.tiny)
        self.smallest_normal = float(info.smallest_normal)
        self.resolution = float(info.resolution)

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
            f"eps={self.eps}, smallest_normal={self.smallest_normal}, tiny={self.tiny}, "
            f"dtype={self.dtype.name})"
        )


class iinfo:
    """Machine limits of an integer dtype."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = as_dtype(dtype)
        if self.dtype.is_floating_point:
            raise DTypeError(f"iinfo: {self.dtype} is not an integer dtype; use kg.finfo")
        info = np.iinfo(self.dtype.numpy) if self.dtype is not bool_ else None
        self.bits = 8 if info is None else int(info.bits)
        self.min = 0 if info is None else int(info.min)
        self.max = 1 if info is None else int(info.max)

    def __repr__(self) -> str:
        return f"iinfo(min={self.min}, max={self.max}, bits={self.bits}, dtype={self.dtype.name})"


def get_num_threads() -> int:
    """The number of threads the CPU backend's parallel kernels use."""
    import numba

    return int(numba.get_num_threads())


def set_num_threads(n: int) -> None:
    """Set the number of threads of the CPU backend's parallel kernels (at most the
    number Numba started with, ``NUMBA_NUM_THREADS``)."""
    import numba

    if n < 1:
        raise ArgumentError(f"set_num_threads: expected a positive number, got {n}")
    numba.set_num_threads(min(int(n), numba.config.NUMBA_NUM_THREADS))


_INTEROP_THREADS = [os.cpu_count() or 1]


def get_num_interop_threads() -> int:
    """Kept for PyTorch programs: kernelgrad runs operations from the calling thread."""
    return _INTEROP_THREADS[0]


def set_num_interop_threads(n: int) -> None:
    """Recorded for ``get_num_interop_threads``; kernelgrad has no inter-op thread pool."""
    _INTEROP_THREADS[0] = int(n)


def seed() -> int:
    """Seed every generator with a non-deterministic number and return it."""
    from .creation import manual_seed

    value = int.from_bytes(os.urandom(8), "little") & (2**63 - 1)
    manual_seed(value)
    return value


def initial_seed() -> int:
    """The seed given to ``kg.manual_seed`` (or ``kg.seed``); before either, the seed the
    CPU generator drew for itself at start (a random one: kernelgrad's streams start
    unseeded, where PyTorch's start from a fixed default)."""
    from .creation import _SeedState, get_rng_state

    if _SeedState.seed is None:
        return int(get_rng_state("cpu")["seed"])
    return int(_SeedState.seed)


def scalar_tensor(
    value: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """A 0-dim tensor holding ``value`` (the default float dtype unless ``dtype``)."""
    result = full((), value, dtype=default_float() if dtype is None else dtype, device=device)
    return result.requires_grad_() if requires_grad else result


def empty_strided(
    size: Sequence[int],
    stride: Sequence[int],
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """An uninitialised tensor with the given shape and strides (in elements)."""
    from ..device import as_device, default_device
    from ..tensor import Storage

    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride) or any(s < 0 for s in stride):
        raise ShapeError(
            f"empty_strided: size {size} and stride {stride} must have the same length and "
            "non-negative strides"
        )
    kind = default_float() if dtype is None else as_dtype(dtype)
    place = default_device() if device is None else as_device(device)
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    base = Tensor._empty((extent,), kind, place)
    storage = base._storage
    result = Tensor._make(
        Storage(storage.buffer, storage.device, storage.backend), size, stride, 0, kind
    )
    return result.requires_grad_() if requires_grad else result


def asarray(
    obj: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    copy: bool | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """``obj`` as a tensor: a tensor is returned as it is (converted when ``dtype`` or
    ``device`` differ; copied when ``copy=True``); anything else becomes a new tensor."""
    if isinstance(obj, Tensor):
        result = obj.to(
            device=device if device is not None else obj.device,
            dtype=dtype if dtype is not None else obj.dtype,
        )
        if copy and result is obj:
            result = obj.clone()
    else:
        result = tensor(obj, dtype=dtype, device=device)
    return result.requires_grad_() if requires_grad else result


# --- window functions ---------------------------------------------------------------------------


def _window_positions(
    n: int, periodic: bool, dtype: Any, device: Any, op: str
) -> tuple[Tensor, int]:
    if n < 0:
        raise ArgumentError(f"{op}: window_length must be non-negative, got {n}")
    kind = default_float() if dtype is None else as_dtype(dtype)
    if not kind.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point dtype, got {kind}")
    return arange(n, dtype=kind, device=device), n + 1 if periodic else n


def _cosine_window(
    n: int, periodic: bool, coefficients: Sequence[float], dtype: Any, device: Any, op: str
) -> Tensor:
    k, length = _window_positions(n, periodic, dtype, device, op)
    if n <= 1:
        return ones(n, dtype=k.dtype, device=k.device)
    phase = k * (2 * math.pi / (length - 1))
    result = k * 0 + coefficients[0]
    for order, c in enumerate(coefficients[1:], start=1):
        term = _ew.COS(phase * order) * c
        result = result - term if order % 2 else result + term
    return result


def hann_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Hann window ``0.5 - 0.5 cos(2 pi k / (N - 1))`` (N + 1 points, the last dropped,
    when ``periodic``)."""
    w = _cosine_window(window_length, periodic, (0.5, 0.5), dtype, device, "hann_window")
    return w.requires_grad_() if requires_grad else w


def hamming_window(
    window_length: int,
    periodic: bool = True,
    alpha: float = 0.54,
    beta: float = 0.46,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Hamming window ``alpha - beta cos(2 pi k / (N - 1))``."""
    w = _cosine_window(window_length, periodic, (alpha, beta), dtype, device, "hamming_window")
    return w.requires_grad_() if requires_grad else w


def blackman_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Blackman window ``0.42 - 0.5 cos(2 pi k / (N-1)) + 0.08 cos(4 pi k / (N-1))``."""
    w = _cosine_window(window_length, periodic, (0.42, 0.5, 0.08), dtype, device, "blackman_window")
    return w.requires_grad_() if requires_grad else w


def bartlett_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The triangular Bartlett window ``1 - |2k / (N - 1) - 1|``."""
    k, length = _window_positions(window_length, periodic, dtype, device, "bartlett_window")
    if window_length <= 1:
        w = ones(window_length, dtype=k.dtype, device=k.device)
    else:
        w = 1 - _ew.ABS(k * (2 / (length - 1)) - 1)
    return w.requires_grad_() if requires_grad else w


def kaiser_window(
    window_length: int,
    periodic: bool = True,
    beta: float = 12.0,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - (2k / (N - 1) - 1)^2)) / I0(beta)``."""
    k, length = _window_positions(window_length, periodic, dtype, device, "kaiser_window")
    if window_length <= 1:
        w = ones(window_length, dtype=k.dtype, device=k.device)
    else:
        ratio = k * (2 / (length - 1)) - 1
        inside = _ew.clamp(1 - ratio * ratio, 0, None)
        w = _sp.I0(_ew.SQRT(inside) * beta) / float(_sp.I0(tensor(beta, dtype=float64)).item())
    return w.requires_grad_() if requires_grad else w


# --- Tensor methods and properties ---------------------------------------------------------------


def _data_ptr(self: Tensor) -> int:
    """The address of the tensor's first element."""
    buffer = self._storage.buffer
    if self.device.type == "cpu":
        base = np.asarray(buffer).ctypes.data
    else:
        interface = getattr(buffer, "__cuda_array_interface__", None)
        if interface is None:
            raise UnsupportedError(
                "data_ptr: this device's buffers have no address (Numba's CUDA simulator)"
            )
        base = interface["data"][0]
    return int(base) + self._offset * self.dtype.itemsize


def _is_nonzero(self: Tensor) -> bool:
    if self.numel() != 1:
        raise ArgumentError(
            f"is_nonzero: a tensor with {self.numel()} elements is ambiguous; it needs "
            "exactly one element"
        )
    return bool(self.item())


def _new(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """``x.new(*sizes)``: an uninitialised tensor of ``x``'s dtype and device;
    ``x.new(data)``: a tensor of the data (as ``new_tensor``)."""
    if not args:
        return self.new_empty((0,), **kwargs)
    if len(args) == 1 and not isinstance(args[0], int):
        data = args[0]
        if isinstance(data, Tensor):
            return data
        return self.new_tensor(data, **kwargs)
    return self.new_empty(tuple(args), **kwargs)


def _new_empty_strided(
    self: Tensor,
    size: Any,
    stride: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    return empty_strided(
        size,
        stride,
        dtype=self.dtype if dtype is None else dtype,
        device=self.device if device is None else device,
        requires_grad=requires_grad,
    )


def _fliplr(x: Tensor) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(f"fliplr: the input must have at least 2 dims, got {x.ndim}")
    return x.flip(1)


def _flipud(x: Tensor) -> Tensor:
    if x.ndim < 1:
        raise ShapeError("flipud: the input must have at least 1 dim")
    return x.flip(0)


_FUNCTIONS_AS_METHODS = {
    "lgamma": lgamma,
    "digamma": digamma,
    "polygamma": lambda self, n: polygamma(n, self),
    "mvlgamma": mvlgamma,
    "erfc": erfc,
    "erfinv": erfinv,
    "i0": i0,
    "igamma": igamma,
    "igammac": igammac,
    "frexp": frexp,
    "ldexp": ldexp,
    "nextafter": nextafter,
    "float_power": float_power,
    "heaviside": heaviside,
    "xlogy": xlogy,
    "hypot": _composite.hypot,
    "logaddexp2": _composite.logaddexp2,
    "fmax": _composite.fmax,
    "fmin": _composite.fmin,
    "arctan2": _composite.atan2,
    "bitwise_and": bitwise_and,
    "bitwise_or": bitwise_or,
    "bitwise_xor": bitwise_xor,
    "bitwise_not": bitwise_not,
    "bitwise_left_shift": bitwise_left_shift,
    "bitwise_right_shift": bitwise_right_shift,
    "gcd": gcd,
    "lcm": lcm,
    "msort": msort,
    "unique": unique,
    "unique_consecutive": unique_consecutive,
    "mode": mode,
    "nanmedian": nanmedian,
    "quantile": quantile,
    "nanquantile": nanquantile,
    "histc": histc,
    "histogram": histogram,
    "dist": dist,
    "renorm": renorm,
    "cov": cov,
    "corrcoef": corrcoef,
    "scatter_reduce": scatter_reduce,
    "index_reduce": index_reduce,
    "put": put,
    "take": lambda self, index: take(self, index),
    "diagonal_scatter": diagonal_scatter,
    "select_scatter": select_scatter,
    "slice_scatter": slice_scatter,
    "sum_to_size": sum_to_size,
    "fliplr": _fliplr,
    "flipud": _flipud,
    "new": _new,
    "new_empty_strided": _new_empty_strided,
    "data_ptr": _data_ptr,
    "is_nonzero": _is_nonzero,
    "is_same_size": lambda self, other: tuple(self.shape) == tuple(other.shape),
    "is_complex": lambda self: False,
    "is_conj": lambda self: False,
    "is_neg": lambda self: False,
    "is_inference": lambda self: False,
    "is_pinned": lambda self: False,
    "is_shared": lambda self: False,
    "isreal": lambda self: ones(self.shape, dtype=bool_, device=self.device),
    "resolve_conj": lambda self: self,
    "resolve_neg": lambda self: self,
    "conj": lambda self: self,
    "fill_diagonal_": lambda self, fill_value, wrap=False: _tf._write_result(
        self, "fill_diagonal_", lambda x: _fill_diagonal(x, fill_value, wrap)
    ),
    "put_": lambda self, index, source, accumulate=False: _tf._write_result(
        self, "put_", lambda x: put(x, index, source, accumulate), source
    ),
    "swapaxes_": lambda self, a, b: _tf._restride(self, "swapaxes_", lambda x: x.transpose(a, b)),
    "swapdims_": lambda self, a, b: _tf._restride(self, "swapdims_", lambda x: x.transpose(a, b)),
}

# properties PyTorch tensors have, with the answers for kernelgrad's dense tensors
_PROPERTIES = {
    "itemsize": lambda self: self.dtype.itemsize,
    "is_sparse": lambda self: False,
    "is_sparse_csr": lambda self: False,
    "is_quantized": lambda self: False,
    "is_meta": lambda self: False,
    "is_mkldnn": lambda self: False,
    "is_nested": lambda self: False,
    "is_xpu": lambda self: False,
    "is_mps": lambda self: False,
    "is_ipu": lambda self: False,
    "is_xla": lambda self: False,
    "is_vulkan": lambda self: False,
    "is_maia": lambda self: False,
    "is_mtia": lambda self: False,
}


def _inplace_names() -> dict[str, Any]:
    """Every PyTorch in-place method ``name_`` whose out-of-place ``name`` kernelgrad
    tensors have: the out-of-place method written back into the tensor."""
    names = {
        "acos", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2",
        "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "cosh", "sinh", "exp2",
        "log2", "log10", "frac", "hypot", "lerp", "fmod", "remainder", "copysign",
        "cumsum", "cumprod", "xlogy", "true_divide", "floor_divide", "nan_to_num",
        "lgamma", "digamma", "polygamma", "mvlgamma", "erfc", "erfinv", "i0", "igamma",
        "igammac", "ldexp", "nextafter", "float_power", "heaviside", "bitwise_and",
        "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
        "bitwise_right_shift", "gcd", "lcm", "renorm", "scatter_reduce", "index_reduce",
        "logaddexp", "logaddexp2", "fmax", "fmin", "masked_fill", "where", "relu",
        "hardshrink", "sigmoid", "clip",
    }  # fmt: skip
    methods = {}
    for name in sorted(names):
        inplace = name + "_"
        if inplace in Tensor.__dict__ or inplace in _FUNCTIONS_AS_METHODS:
            continue
        out_of_place = _FUNCTIONS_AS_METHODS.get(name) or getattr(Tensor, name, None)
        if out_of_place is None:
            continue
        methods[inplace] = _tf._composite_inplace(out_of_place, inplace)
    return methods


def _bind() -> None:
    # a method the Tensor class (or another op module) already defines keeps its definition
    for name, method in _FUNCTIONS_AS_METHODS.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, method)
    for name, method in _inplace_names().items():
        setattr(Tensor, name, method)
    for name, getter in _PROPERTIES.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, property(getter))
    # integer bit operators; bool tensors keep their logical meaning
    Tensor.__and__ = Tensor.__rand__ = lambda self, other: bitwise_and(self, other)
    Tensor.__or__ = Tensor.__ror__ = lambda self, other: bitwise_or(self, other)
    Tensor.__xor__ = Tensor.__rxor__ = lambda self, other: bitwise_xor(self, other)
    Tensor.__invert__ = lambda self: bitwise_not(self)
    Tensor.__lshift__ = lambda self, other: bitwise_left_shift(self, other)
    Tensor.__rlshift__ = lambda self, other: bitwise_left_shift(other, self)
    Tensor.__rshift__ = lambda self, other: bitwise_right_shift(self, other)
    Tensor.__rrshift__ = lambda self, other: bitwise_right_shift(other, self)
    Tensor.__iand__ = Tensor.bitwise_and_
    Tensor.__ior__ = Tensor.bitwise_or_
    Tensor.__ixor__ = Tensor.bitwise_xor_
    Tensor.__ilshift__ = Tensor.bitwise_left_shift_
    Tensor.__irshift__ = Tensor.bitwise_right_shift_


_bind()


def _torch_inplace_function(name: str) -> Any:
    def function(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return getattr(x, name)(*args, **kwargs)

    function.__name__ = name
    function.__doc__ = f"``x.{name}(...)``: the in-place method as a function (``torch.{name}``)."
    return function


# torch.<name>_ functions (torch.abs_(x), torch.exp_(x), ...; the activations' relu_,
# sigmoid_, tanh_ are in torch_nn_functions.py with torch's nn operations)
TORCH_INPLACE_FUNCTIONS = {
    name: _torch_inplace_function(name)
    for name in (
        "abs_",
        "acos_",
        "acosh_",
        "arccos_",
        "arccosh_",
        "arcsin_",
        "arcsinh_",
        "arctan_",
        "arctanh_",
        "asin_",
        "asinh_",
        "atan_",
        "atanh_",
        "ceil_",
        "clamp_",
        "clamp_max_",
        "clamp_min_",
        "clip_",
        "cos_",
        "cosh_",
        "deg2rad_",
        "erf_",
        "erfc_",
        "exp_",
        "exp2_",
        "expm1_",
        "fill_",
        "fix_",
        "floor_",
        "frac_",
        "gcd_",
        "i0_",
        "lcm_",
        "ldexp_",
        "log_",
        "log10_",
        "log1p_",
        "log2_",
        "logit_",
        "nan_to_num_",
        "neg_",
        "negative_",
        "rad2deg_",
        "reciprocal_",
        "round_",
        "rsqrt_",
        "sin_",
        "sinc_",
        "sinh_",
        "sqrt_",
        "square_",
        "tan_",
        "trunc_",
        "xlogy_",
        "zero_",
    )
}
