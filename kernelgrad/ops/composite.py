"""Operations composed from the primitives: PyTorch's wider tensor API without new kernels.

Each function here is written in Tensor operations (elementwise ops, reductions, views,
``cat``, ``take``, ``matmul``), so it runs on every backend and its gradient comes from
the composition: nothing here needs a VJP of its own, and a backward pass can be
differentiated again.

A few operations need data-dependent decisions that the primitives cannot make on the
device: the permutation of ``sort`` / ``argsort`` / ``topk`` (and what uses them), and
the positions of ``nonzero`` and of ``repeat_interleave`` with a tensor of repeats. They
compute those integer indices with NumPy on the host (a copy from the device for a CUDA
tensor, as PyTorch synchronises for ``nonzero``) and then select the values with
``gather`` / ``take`` on the tensor's own device, which is what carries the gradient.

Scans (``cumsum``, ``cumprod``, ``cummax``, ``cummin``, ``logcumsumexp``) and ``prod``
run in ``log2(n)`` steps of whole-tensor operations (a Hillis-Steele scan and a pairwise
product tree), so they are exact for integers and differentiable, including through
zeros for ``prod`` and ``cumprod``.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import autograd
from ..dtypes import as_dtype, bool_, default_float, int64, result_type
from ..errors import ArgumentError, DTypeError, ShapeError, format_shape
from ..shapes import normalize_dim
from ..tensor import Tensor, ValuesIndices
from ..tensor import _axis as dim_or_axis
from . import elementwise as _ew
from . import movement as _movement
from . import reduce as _reduce
from .creation import arange, full, ones, rand, tensor, zeros
from .indexing import take
from .linalg import matmul

# --- helpers ----------------------------------------------------------------------------------


def _as_tensor_like(value: Any, like: Tensor) -> Tensor:
    return (
        value
        if isinstance(value, Tensor)
        else full((), value, dtype=like.dtype, device=like.device)
    )


def _host(x: Tensor) -> np.ndarray:
    """The values of ``x`` as a NumPy array (a copy from the device for CUDA tensors)."""
    return x.detach().cpu().numpy()


def _on_device(array: np.ndarray, like: Tensor) -> Tensor:
    return tensor(np.ascontiguousarray(array), device=like.device)


# --- elementwise ------------------------------------------------------------------------------
def log2(x: Tensor) -> Tensor:
    """Base-2 logarithm (exact at the powers of two: ``kg.log2(kg.tensor([8.0])).tolist()``
    is ``[3.0]``)."""
    return _ew.LOG2(x)


def log10(x: Tensor) -> Tensor:
    """Base-10 logarithm (the C library's ``log10``, exact at the powers of ten)."""
    return _ew.LOG10(x)


def exp2(x: Tensor) -> Tensor:
    """``2 ** x`` elementwise (exact at the integers)."""
    return _ew.EXP2(x)


def frac(x: Tensor) -> Tensor:
    """The fractional part ``x - trunc(x)`` (with the sign of ``x``)."""
    return x - _ew.TRUNC(x)


def round(x: Tensor, decimals: int = 0) -> Tensor:  # noqa: A001
    """Round half to even, optionally to ``decimals`` places, as ``torch.round``.

    >>> import kernelgrad as kg
    >>> kg.round(kg.tensor([0.5, 1.5, 2.567]), decimals=0).tolist()
    [0.0, 2.0, 3.0]
    """
    if decimals == 0:
        return _ew.ROUND(x)
    scale = 10.0**decimals
    return _ew.ROUND(x * scale) / scale


def isinf(x: Tensor) -> Tensor:
    """True where the element is +inf or -inf."""
    if not x.dtype.is_floating_point:
        return zeros(x.shape, dtype=bool_, device=x.device)
    return _ew.ABS(x) == math.inf


def isfinite(x: Tensor) -> Tensor:
    """True where the element is neither infinite nor NaN."""
    if not x.dtype.is_floating_point:
        return ones(x.shape, dtype=bool_, device=x.device)
    return _ew.ABS(x) < math.inf


def nan_to_num(
    x: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Tensor:
    """NaN -> ``nan``, +inf -> ``posinf`` (the largest finite value by default), -inf ->
    ``neginf`` (the lowest)."""
    if not x.dtype.is_floating_point:
        return x.clone()
    largest = float(np.finfo(x.dtype.numpy).max)
    high = largest if posinf is None else posinf
    low = -largest if neginf is None else neginf
    result = _ew.where(_ew.ISNAN(x), nan, x)
    result = _ew.where(x == math.inf, high, result)
    return _ew.where(x == -math.inf, low, result)


def copysign(x: Any, y: Any) -> Tensor:
    """``|x|`` with the sign of ``y`` (``-0.0`` counts as negative), as ``torch.copysign``.

    >>> import kernelgrad as kg
    >>> kg.copysign(kg.tensor([1.0, -2.0]), -1.0).tolist()
    [-1.0, -2.0]

    The result has the promoted floating dtype of both operands, and the sign bit of a
    NaN counts too (``copysign(3, -nan)`` is -3), as C's ``copysign``.
    """
    x = x if isinstance(x, Tensor) else tensor(x)
    return _ew.COPYSIGN(x, y)


def fmod(x: Any, y: Any) -> Tensor:
    """C's remainder: the result has the sign of the dividend ``x`` (``torch.fmod``);
    :func:`remainder` has the sign of the divisor.

    >>> import kernelgrad as kg
    >>> kg.fmod(kg.tensor([-3.0, 3.0]), 2).tolist()
    [-1.0, 1.0]
    """
    if not isinstance(x, Tensor):
        x = _as_tensor_like(x, y)
    if _result_is_float(x, y):
        return _ew.FMOD(x, y)  # exact, as C's fmod (x - trunc(x / y) * y is not)
    return x - div(x, y, rounding_mode="trunc") * y  # integer division by zero raises


def _result_is_float(x: Any, y: Any) -> bool:
    return result_type(x, y).is_floating_point


def remainder(x: Any, y: Any) -> Tensor:
    """Python's ``%``: the result has the sign of the divisor (``torch.remainder``)."""
    if not isinstance(x, Tensor):
        x = _as_tensor_like(x, y)
    return _ew.REMAINDER(x, y)


def div(x: Any, y: Any, rounding_mode: str | None = None) -> Tensor:
    """``x / y``; ``rounding_mode="trunc"`` rounds the quotient toward zero and
    ``"floor"`` toward minus infinity (integer inputs then stay integers), as
    ``torch.div``.

    >>> import kernelgrad as kg
    >>> kg.div(kg.tensor([-7, 7]), 2, rounding_mode="trunc").tolist()
    [-3, 3]
    """
    if rounding_mode is None:
        return _ew.DIV(x, y)
    if rounding_mode not in ("trunc", "floor"):
        raise ArgumentError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
            f"{rounding_mode!r}"
        )
    if not isinstance(x, Tensor):
        x = _as_tensor_like(x, y)
    if _result_is_float(x, y):
        if rounding_mode == "trunc":
            return _ew.TRUNC(_ew.DIV(x, y))  # as PyTorch: trunc(x / y)
        # as PyTorch and ``//``: Python's floor division (from C's fmod), not the floor of
        # the rounded quotient (1.0 // 0.1 is 9.0, floor(1.0 / 0.1) 10.0)
        floored = _ew.FLOOR_DIVIDE(x, y)
        if not autograd.needs_grad(x, y):
            return floored
        # piecewise constant: a zero gradient in the graph, as PyTorch's
        return _ew.where(True, floored, _ew.FLOOR(_ew.DIV(x, y)))
    floored = _ew.FLOOR_DIVIDE(x, y)
    if rounding_mode == "floor":
        return floored
    # toward zero: one more than the floor where the quotient is negative and inexact
    inexact = _ew.REMAINDER(x, y) != 0
    negative = (x < 0) != (y < 0)
    return _ew.where(inexact & negative, floored + 1, floored)


def floor_divide(x: Any, y: Any) -> Tensor:
    """``x // y`` (rounds toward minus infinity, as ``torch.floor_divide``)."""
    return div(x, y, rounding_mode="floor")


def true_divide(x: Any, y: Any) -> Tensor:
    return _ew.DIV(x, y)


def logaddexp(x: Any, y: Any) -> Tensor:
    """``log(exp(x) + exp(y))`` without overflow.

    >>> import kernelgrad as kg
    >>> f"{kg.logaddexp(kg.tensor([0.0]), kg.tensor([0.0])).item():.6f}"
    '0.693147'
    """
    larger = _ew.MAXIMUM(x, y)
    difference = _ew.where(_ew.EQ(x, y), 0.0, _ew.SUB(x, y))  # -inf - -inf would be NaN
    return larger + _ew.LOG1P(_ew.EXP(-_ew.ABS(difference)))


def logaddexp2(x: Any, y: Any) -> Tensor:
    """``log2(2**x + 2**y)``."""
    scale = math.log(2)
    return logaddexp(_ew.MUL(x, scale), _ew.MUL(y, scale)) * (1 / scale)


def atan2(y: Any, x: Any) -> Tensor:
    """The angle of the point ``(x, y)``, in ``[-pi, pi]`` (C's ``atan2``)."""
    y = y if isinstance(y, Tensor) else _as_tensor_like(y, x)
    return _ew.ATAN2(y, x)


def hypot(x: Any, y: Any) -> Tensor:
    """``sqrt(x**2 + y**2)`` without overflow or underflow in between (C's ``hypot``)."""
    return _ew.HYPOT(x, y)


def xlogy(x: Any, y: Any) -> Tensor:
    """``x * log(y)``, 0 where ``x`` is 0 (unless ``y`` is NaN)."""
    if not isinstance(y, Tensor) and isinstance(x, Tensor):
        # a number: the log in the result's dtype (not the default float's), and 0 * log(y)
        # is 0 for every y but NaN
        dtype = result_type(x, y)
        dtype = dtype if dtype.is_floating_point else default_float()
        product = _ew.MUL(x, _ew.LOG(full((), y, dtype=dtype, device=x.device)))
        return product if math.isnan(y) else _ew.where(_ew.EQ(x, 0), 0.0, product)
    product = _ew.MUL(x, _ew.LOG(y))
    zero = _ew.EQ(x, 0) & ~_ew.ISNAN(y if isinstance(y, Tensor) else product * 0 + y)
    return _ew.where(zero, 0.0, product)


def lerp(start: Tensor, end: Any, weight: Any) -> Tensor:
    """``start + weight * (end - start)``."""
    return start + _ew.MUL(weight, _ew.SUB(end, start))


def fmax(x: Tensor, y: Tensor) -> Tensor:
    """Elementwise maximum that ignores NaN (NaN only where both are NaN)."""
    return _ew.where(_ew.ISNAN(y), x, _ew.where(_ew.ISNAN(x), y, _ew.MAXIMUM(x, y)))


def fmin(x: Tensor, y: Tensor) -> Tensor:
    """Elementwise minimum that ignores NaN."""
    return _ew.where(_ew.ISNAN(y), x, _ew.where(_ew.ISNAN(x), y, _ew.MINIMUM(x, y)))


def isclose(
    x: Tensor, y: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> Tensor:
    """``|x - y| <= atol + rtol * |y|`` elementwise (infinities equal only themselves).

    >>> import kernelgrad as kg
    >>> kg.isclose(kg.tensor([1.0, 2.0]), kg.tensor([1.0 + 1e-9, 2.1])).tolist()
    [True, False]
    """
    if rtol < 0 or atol < 0:
        raise ArgumentError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    equal = _ew.EQ(x, y)
    if not (x.dtype.is_floating_point or _result_is_float(x, y)):
        close = _ew.ABS(_ew.SUB(x, y)).to(default_float()) <= _ew.ADD(atol, _ew.ABS(y) * rtol)
        return equal | close
    difference = _ew.ABS(_ew.SUB(x, y))
    close = (difference <= _ew.ADD(atol, _ew.MUL(_ew.ABS(y), rtol))) & isfinite(difference)
    result = equal | close
    if equal_nan:
        both_nan = _ew.ISNAN(x) & _ew.ISNAN(y if isinstance(y, Tensor) else x * 0 + y)
        result = result | both_nan
    return result


def allclose(
    x: Tensor, y: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> bool:
    """True when :func:`isclose` holds everywhere (a Python bool, as in PyTorch)."""
    return bool(isclose(x, y, rtol, atol, equal_nan).all().item())


def equal(x: Tensor, y: Tensor) -> bool:
    """True when both tensors have the same shape and elements."""
    if tuple(x.shape) != tuple(y.shape):
        return False
    return bool((x == y).all().item())


# --- reductions -------------------------------------------------------------------------------
def _count(x: Tensor, axes: tuple[int, ...]) -> int:
    return math.prod(x.shape[d] for d in axes)


def _integer_accumulator(x: Tensor, dtype: Any = None) -> Tensor:
    """``x`` in the requested ``dtype``; without one, integers and bools accumulate in
    int64, as PyTorch's sum, prod and cumsum."""
    if dtype is not None:
        return x.to(as_dtype(dtype))
    return x if x.dtype.is_floating_point or x.dtype is int64 else x.to(int64)


def _product_along(x: Tensor, d: int) -> Tensor:
    """The product along ``d`` (kept as a size-1 dim), by a pairwise tree."""
    n = x.shape[d]
    if n == 0:
        shape = x.shape[:d] + (1,) + x.shape[d + 1 :]
        return ones(shape, dtype=x.dtype, device=x.device)
    while n > 1:
        half = n // 2
        product = _movement.narrow(x, d, 0, half) * _movement.narrow(x, d, half, half)
        if n % 2:
            product = _movement.cat([product, _movement.narrow(x, d, 2 * half, 1)], d)
        x, n = product, product.shape[d]
    return x


def prod(
    x: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None, axis: Any = None
) -> Tensor:
    """The product of the elements (over ``dim``), differentiable also through zeros.

    >>> import kernelgrad as kg
    >>> kg.tensor([[1, 2], [3, 4]]).prod(1).tolist()
    [2, 12]
    """
    dim = dim_or_axis(dim, axis, "prod")
    x = _integer_accumulator(x, dtype)
    if dim is None:
        result = _product_along(x.reshape(-1), 0).reshape(())
        return result.reshape((1,) * x.ndim) if keepdim else result
    if x.ndim == 0:
        normalize_dim(dim, 0, "prod")
        return x.clone()
    d = normalize_dim(dim, x.ndim, "prod")
    result = _product_along(x, d)
    return result if keepdim else result.squeeze(d)


def var_mean(
    x: Tensor,
    dim: Any = None,
    correction: Any = None,
    keepdim: bool = False,
    unbiased: Any = None,
    axis: Any = None,
) -> tuple[Tensor, Tensor]:
    """``(var, mean)`` in one call, as ``torch.var_mean``."""
    dim = dim_or_axis(dim, axis, "var_mean")
    return (
        _reduce.var(x, dim, correction, keepdim, unbiased),
        _reduce.mean(x, dim, keepdim),
    )


def std_mean(
    x: Tensor,
    dim: Any = None,
    correction: Any = None,
    keepdim: bool = False,
    unbiased: Any = None,
    axis: Any = None,
) -> tuple[Tensor, Tensor]:
    """``(std, mean)`` in one call, as ``torch.std_mean``."""
    variance, average = var_mean(x, dim, correction, keepdim, unbiased, axis)
    return variance.sqrt(), average


def count_nonzero(x: Tensor, dim: Any = None) -> Tensor:
    """The number of non-zero elements (over ``dim``), as int64."""
    return _reduce.sum(x != 0, dim)


def aminmax(x: Tensor, *, dim: Any = None, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """``(amin, amax)`` as a named pair ``(min, max)``."""
    from collections import namedtuple

    pair = namedtuple("aminmax", ["min", "max"])
    return pair(_reduce.amin(x, dim, keepdim), _reduce.amax(x, dim, keepdim))


def norm(x: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False) -> Tensor:
    """The vector ``p``-norm over ``dim`` (all elements by default); ``"fro"`` and 2 are
    the Euclidean norm, ``inf`` the largest magnitude (``kg.linalg.vector_norm``)."""
    from ..linalg import vector_norm

    return vector_norm(x, 2 if p == "fro" else math.inf if p == "inf" else p, dim, keepdim)


def _shifted(x: Tensor, d: int, shift: int, fill: Any) -> Tensor:
    """``x`` moved ``shift`` places forward along ``d``, the first places ``fill``."""
    shape = x.shape[:d] + (shift,) + x.shape[d + 1 :]
    head = full(shape, fill, dtype=x.dtype, device=x.device)
    return _movement.cat([head, _movement.narrow(x, d, 0, x.shape[d] - shift)], d)


def _scan(x: Tensor, dim: Any, op: str, combine: Any, identity: Any) -> Tensor:
    if x.ndim == 0:
        normalize_dim(dim, 0, op)
        return x.clone()
    d = normalize_dim(dim, x.ndim, op)
    shift = 1
    while shift < x.shape[d]:
        x = combine(_shifted(x, d, shift, identity), x)
        shift *= 2
    return x


def cumsum(x: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Running sums along ``dim`` (integers and bools sum in int64).

    >>> import kernelgrad as kg
    >>> kg.tensor([1, 2, 3, 4]).cumsum(0).tolist()
    [1, 3, 6, 10]
    """
    x = _integer_accumulator(x, dtype)
    return _scan(x, dim, "cumsum", _ew.ADD, 0)


def cumprod(x: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Running products along ``dim``."""
    x = _integer_accumulator(x, dtype)
    return _scan(x, dim, "cumprod", _ew.MUL, 1)


def logcumsumexp(x: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(x)))`` without overflow."""
    if not x.dtype.is_floating_point:
        x = x.to(default_float())
    return _scan(x, dim, "logcumsumexp", logaddexp, -math.inf)


def _cumulative_extreme(x: Tensor, dim: int, op: str, earlier_wins: Any) -> ValuesIndices:
    if x.ndim == 0:
        normalize_dim(dim, 0, op)
        return ValuesIndices(x.clone(), zeros((), dtype=int64, device=x.device))
    d = normalize_dim(dim, x.ndim, op)
    n = x.shape[d]
    positions = arange(n, device=x.device).reshape((n,) + (1,) * (x.ndim - d - 1))
    values, indices = x, positions.expand(x.shape)
    fill = _ew._lowest(x.dtype) if op == "cummax" else -_ew._lowest(x.dtype)
    if not x.dtype.is_floating_point and op == "cummin":
        fill = _ew._highest(x.dtype)
    shift = 1
    while shift < n:
        earlier = _shifted(values, d, shift, fill)
        earlier_index = _shifted(indices, d, shift, 0)
        take_earlier = earlier_wins(earlier, values)
        if x.dtype.is_floating_point:
            # a NaN wins over every number after it (a later NaN over an earlier one), as
            # in PyTorch: the values stay NaN from the first NaN on
            take_earlier = take_earlier | (_ew.ISNAN(earlier) & ~_ew.ISNAN(values))
        values = _ew.where(take_earlier, earlier, values)
        indices = _ew.where(take_earlier, earlier_index, indices)
        shift *= 2
    return ValuesIndices(values, indices)


def cummax(x: Tensor, dim: int) -> ValuesIndices:
    """Running maxima along ``dim`` and where they are (the last of equal values)."""
    return _cumulative_extreme(x, dim, "cummax", lambda earlier, now: earlier > now)


def cummin(x: Tensor, dim: int) -> ValuesIndices:
    """Running minima along ``dim`` and where they are."""
    return _cumulative_extreme(x, dim, "cummin", lambda earlier, now: earlier < now)


# --- sorting and selection (indices computed on the host) -------------------------------------
def _sort_keys(values: np.ndarray, descending: bool) -> np.ndarray:
    if values.dtype == np.bool_:
        values = values.astype(np.int8)
    if not descending:
        return values
    if values.dtype.kind == "f":
        return np.where(np.isnan(values), -np.inf, -values)  # NaN first, as PyTorch
    return -values.astype(np.float64) if values.dtype.itemsize >= 8 else -values.astype(np.int64)


def argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The indices that sort ``x`` along ``dim`` (equal values keep their order).

    >>> import kernelgrad as kg
    >>> kg.tensor([3.0, 1.0, 2.0]).argsort().tolist()
    [1, 2, 0]
    """
    if x.ndim == 0:
        normalize_dim(dim, 0, "argsort")
        return zeros((), dtype=int64, device=x.device)
    d = normalize_dim(dim, x.ndim, "argsort")
    order = np.argsort(_sort_keys(_host(x), descending), axis=d, kind="stable")
    return _on_device(order.astype(np.int64), x)


def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
    """``(values, indices)`` of ``x`` sorted along ``dim``; the values carry the gradient.

    >>> import kernelgrad as kg
    >>> kg.tensor([3.0, 1.0, 2.0]).sort(descending=True).values.tolist()
    [3.0, 2.0, 1.0]
    """
    indices = argsort(x, dim, descending)
    if x.ndim == 0:
        return ValuesIndices(x.clone(), indices)
    return ValuesIndices(x.gather(normalize_dim(dim, x.ndim, "sort"), indices), indices)


def topk(
    x: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002
) -> ValuesIndices:
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices.

    >>> import kernelgrad as kg
    >>> kg.tensor([1.0, 4.0, 2.0, 3.0]).topk(2).indices.tolist()
    [1, 3]
    """
    size = x.shape[normalize_dim(dim, x.ndim, "topk")] if x.ndim else 1
    if not 0 <= k <= size:
        raise ArgumentError(
            f"topk: k ({k}) is out of range for dimension {dim} of size {size} (shape "
            f"{format_shape(x.shape)})"
        )
    values, indices = sort(x, dim, descending=largest)
    if x.ndim == 0:
        return ValuesIndices(values, indices)
    d = normalize_dim(dim, x.ndim, "topk")
    return ValuesIndices(_movement.narrow(values, d, 0, k), _movement.narrow(indices, d, 0, k))


def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
    """The ``k``-th smallest element (1-based) along ``dim`` and its index."""
    d = normalize_dim(dim, x.ndim, "kthvalue") if x.ndim else 0
    size = x.shape[d] if x.ndim else 1
    if not 1 <= k <= size:
        raise ArgumentError(f"kthvalue: k ({k}) is out of range for a dimension of size {size}")
    values, indices = sort(x, dim)
    if x.ndim == 0:
        return ValuesIndices(values, indices)
    values, indices = (_movement.narrow(t, d, k - 1, 1) for t in (values, indices))
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return ValuesIndices(values, indices)


def median(x: Tensor, dim: Any = None, keepdim: bool = False) -> Any:
    """The lower median (of all elements, or ``(values, indices)`` along ``dim``), as
    ``torch.median``: NaN (and the index of the first NaN) where a NaN is present."""
    if dim is None:
        flat = x.reshape(-1)
        if flat.numel() == 0:
            raise ShapeError("median: the tensor is empty")
        return _median_along(flat, 0, False).values
    if x.ndim == 0:
        return kthvalue(x, 1, dim, keepdim)
    d = normalize_dim(dim, x.ndim, "median")
    if x.shape[d] == 0:
        return kthvalue(x, 0, dim, keepdim)  # raises: out of range
    return _median_along(x, d, keepdim)


def _median_along(x: Tensor, d: int, keepdim: bool) -> ValuesIndices:
    values, indices = sort(x, d)  # NaN last, in the order of their indices
    n = x.shape[d]
    position: Any = (n - 1) // 2
    if x.dtype.is_floating_point:
        nans = _reduce.sum(_ew.ISNAN(x), d, True)
        position = _ew.where(nans > 0, _ew.SUB(n, nans), position)  # the first NaN
    else:
        position = full(x.shape[:d] + (1,) + x.shape[d + 1 :], position, dtype=int64,
                        device=x.device)  # fmt: skip
    values, indices = values.gather(d, position), indices.gather(d, position)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return ValuesIndices(values, indices)


def nonzero(x: Tensor, *, as_tuple: bool = False) -> Any:
    """The indices of the non-zero elements: an ``(n, ndim)`` int64 tensor, or one index
    tensor per dim with ``as_tuple=True``.

    >>> import kernelgrad as kg
    >>> kg.tensor([0, 3, 0, 5]).nonzero().tolist()
    [[1], [3]]
    """
    values = _host(x)
    if as_tuple:
        if x.ndim == 0:
            return (_on_device(np.nonzero(values.reshape(1))[0].astype(np.int64), x),)
        return tuple(_on_device(p.astype(np.int64), x) for p in np.nonzero(values))
    return _on_device(np.argwhere(values).astype(np.int64), x)


def argwhere(x: Tensor) -> Tensor:
    return nonzero(x)


def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """The elements of ``x`` where ``mask`` is true, as a 1-d tensor (broadcast together)."""
    from ..shapes import broadcast_shapes

    shape = broadcast_shapes(x.shape, mask.shape, op="masked_select")
    return x.expand(shape)[mask.expand(shape)]


def repeat_interleave(
    x: Tensor, repeats: Any = None, dim: int | None = None, *, output_size: int | None = None
) -> Tensor:
    """Repeat each element ``repeats`` times (an int, or a tensor with one count per
    element) along ``dim`` (of the flattened tensor when None).

    >>> import kernelgrad as kg
    >>> kg.tensor([1, 2]).repeat_interleave(2).tolist()
    [1, 1, 2, 2]
    """
    if repeats is None:  # kg.repeat_interleave(counts): each position, counts times
        counts = _host(x)
        return _on_device(np.repeat(np.arange(len(counts)), counts).astype(np.int64), x)
    if dim is None:
        x, d = x.reshape(-1), 0
    else:
        d = normalize_dim(dim, x.ndim, "repeat_interleave")
    if isinstance(repeats, Tensor) and repeats.numel() == 1:
        repeats = int(repeats.reshape(()).item())
    if isinstance(repeats, int):
        if repeats < 0:
            raise ArgumentError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
        shape = x.shape[: d + 1] + (repeats,) + x.shape[d + 1 :]
        return x.unsqueeze(d + 1).expand(shape).flatten(d, d + 1)
    counts = _host(repeats) if isinstance(repeats, Tensor) else np.asarray(repeats)
    if counts.shape != (x.shape[d],):
        raise ShapeError(
            f"repeat_interleave: repeats must have one count per element of dimension {d} "
            f"({x.shape[d]}), got shape {counts.shape}"
        )
    if (counts < 0).any():
        raise ArgumentError("repeat_interleave: repeats must be non-negative")
    index = np.repeat(np.arange(x.shape[d]), counts).astype(np.int64)
    return take(x, d, _on_device(index, x))


# --- shape and layout -------------------------------------------------------------------------
def _triangle_mask(x: Tensor, diagonal: int, lower: bool, op: str) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(
            f"{op}: the input must have at least 2 dimensions, got shape {format_shape(x.shape)}"
        )
    rows, cols = x.shape[-2], x.shape[-1]
    offset = arange(cols, device=x.device).reshape(1, cols) - arange(rows, device=x.device).reshape(
        rows, 1
    )
    return offset <= diagonal if lower else offset >= diagonal


def _keep(x: Tensor, mask: Tensor) -> Tensor:
    if x.dtype is bool_:
        return x & mask
    return _ew.where(mask, x, 0).to(x.dtype)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (elements above ``diagonal`` set to 0).

    >>> import kernelgrad as kg
    >>> kg.tril(kg.ones(2, 2)).tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    return _keep(x, _triangle_mask(x, diagonal, True, "tril"))


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (elements below ``diagonal`` set to 0)."""
    return _keep(x, _triangle_mask(x, diagonal, False, "triu"))


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``value`` where ``mask`` is true, ``x`` elsewhere (mask broadcast to ``x``); keeps
    ``x``'s dtype.

    >>> import kernelgrad as kg
    >>> kg.tensor([1.0, 2.0]).masked_fill(kg.tensor([True, False]), -1.0).tolist()
    [-1.0, 2.0]
    """
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        raise DTypeError(
            "masked_fill only supports boolean masks, but got mask of dtype "
            f"{getattr(mask, 'dtype', type(mask).__name__)}; use `mask.bool()` or a comparison"
        )
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(
            f"masked_fill only supports a 0-dimensional value tensor, but got one of shape "
            f"{format_shape(value.shape)}"
        )
    if not isinstance(value, Tensor) and not x.dtype.is_floating_point:
        _ew.check_scalar_fits(value, x.dtype, "masked_fill")
    from ..shapes import broadcast_shapes

    if broadcast_shapes(x.shape, mask.shape, op="masked_fill") != x.shape:
        raise ShapeError(
            f"masked_fill: the mask of shape {format_shape(mask.shape)} does not broadcast to "
            f"the tensor's shape {format_shape(x.shape)}"
        )
    result = _ew.where(mask, value, x)
    return result if result.dtype is x.dtype else result.to(x.dtype)


def masked_fill_(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """In-place :func:`masked_fill` (recorded by autograd like the other in-place ops)."""
    from .inplace import _check_autograd, _commit

    if _check_autograd(x, (value,), "masked_fill_"):
        _commit(x, masked_fill(x.clone(), mask, value), "masked_fill_")
        return x
    _ew.copy_into(x, masked_fill(x, mask, value), "masked_fill_")
    return x


def roll(x: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """Rotate elements along ``dims`` by ``shifts`` (of the flattened tensor when
    ``dims`` is None).

    >>> import kernelgrad as kg
    >>> kg.roll(kg.tensor([1, 2, 3, 4]), 1).tolist()
    [4, 1, 2, 3]
    """
    if dims is None:
        if not isinstance(shifts, int):
            if len(shifts) != 1:
                raise ArgumentError("roll: give dims when shifts has more than one entry")
            shifts = shifts[0]
        return roll(x.reshape(-1), shifts, 0).reshape(x.shape)
    shift_list = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dim_list = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shift_list) != len(dim_list):
        raise ArgumentError(
            f"roll: shifts ({len(shift_list)} entries) and dims ({len(dim_list)}) must have "
            "the same length"
        )
    for shift, dim in zip(shift_list, dim_list):
        d = normalize_dim(dim, x.ndim, "roll")
        n = x.shape[d]
        if n == 0 or shift % n == 0:
            continue
        s = shift % n
        x = _movement.cat([_movement.narrow(x, d, n - s, s), _movement.narrow(x, d, 0, n - s)], d)
    return x


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the ``dim1`` x ``dim2`` planes as the last dim: a view, as in
    PyTorch (writing into it changes ``x``; in a graph see ``ops/inplace.py``).

    >>> import kernelgrad as kg
    >>> kg.arange(9).reshape(3, 3).diagonal(1).tolist()
    [1, 5]
    """
    from .. import autograd

    d1 = normalize_dim(dim1, x.ndim, "diagonal")
    d2 = normalize_dim(dim2, x.ndim, "diagonal")
    if d1 == d2:
        raise ArgumentError(f"diagonal: dim1 and dim2 cannot be the same dimension ({d1})")
    n1, n2 = x.shape[d1], x.shape[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    others = [d for d in range(x.ndim) if d not in (d1, d2)]
    start = x._offset
    if length:
        start += offset * x._strides[d2] if offset >= 0 else -offset * x._strides[d1]
    result = _movement.make_view(
        x,
        tuple(x.shape[d] for d in others) + (length,),
        tuple(x._strides[d] for d in others) + (x._strides[d1] + x._strides[d2],),
        start,
    )
    if autograd.needs_grad(x):
        shape = x.shape
        autograd.record(
            "diagonal",
            (x,),
            result,
            lambda g: (_diagonal_backward(g, shape, offset, d1, d2),),
        )
    return result


def _diagonal_backward(g: Tensor, shape: tuple[int, ...], offset: int, d1: int, d2: int) -> Tensor:
    """Zeros of ``shape`` with ``g`` on the diagonal (differentiable)."""
    from .. import autograd

    grad = zeros(shape, dtype=g.dtype, device=g.device)
    with autograd.no_grad():
        _ew.copy_into(diagonal(grad, offset, d1, d2), g.detach())
    if autograd.needs_grad(g):
        autograd.record("diagonal_backward", (g,), grad, lambda gg: (diagonal(gg, offset, d1, d2),))
    return grad


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-d tensor -> the square matrix with it on a diagonal; a matrix -> its diagonal.

    >>> import kernelgrad as kg
    >>> kg.diag(kg.tensor([1, 2])).tolist()
    [[1, 0], [0, 2]]
    """
    if x.ndim == 2:
        return globals()["diagonal"](x, diagonal).clone()  # a copy, as PyTorch's diag
    if x.ndim != 1:
        raise ShapeError(f"diag: expected a 1-d or 2-d tensor, got shape {format_shape(x.shape)}")
    n = x.shape[0] + abs(diagonal)
    # row i of the result holds its diagonal entry: x padded so that entry is at row i
    line = _movement.pad(x, (max(-diagonal, 0), max(diagonal, 0))).reshape(n, 1)
    positions = arange(n, device=x.device)
    offset = positions.reshape(1, n) - positions.reshape(n, 1)
    return _ew.where(offset == diagonal, line, 0).to(x.dtype)


def trace(x: Tensor) -> Tensor:
    """The sum of the main diagonal of a matrix."""
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, got shape {format_shape(x.shape)}")
    return diagonal(x).sum()


def movedim(x: Tensor, source: Any, destination: Any) -> Tensor:
    """Move dims ``source`` to positions ``destination`` (the others keep their order)."""
    sources = [source] if isinstance(source, int) else list(source)
    destinations = [destination] if isinstance(destination, int) else list(destination)
    if len(sources) != len(destinations):
        raise ArgumentError("movedim: source and destination must have the same length")
    sources = [normalize_dim(d, x.ndim, "movedim") for d in sources]
    destinations = [normalize_dim(d, x.ndim, "movedim") for d in destinations]
    order = [d for d in range(x.ndim) if d not in sources]
    for dest, src in sorted(zip(destinations, sources)):
        order.insert(dest, src)
    return x.permute(*order)


def swapaxes(x: Tensor, axis0: int, axis1: int) -> Tensor:
    return x.transpose(axis0, axis1)


def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along ``dim``, each without that dim."""
    d = normalize_dim(dim, x.ndim, "unbind")
    return tuple(_select(x, d, i) for i in range(x.shape[d]))


def _select(x: Tensor, d: int, i: int) -> Tensor:
    return x[(slice(None),) * d + (i,)]


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate along dim 1 (dim 0 for 1-d tensors)."""
    return _movement.cat(list(tensors), 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate along dim 0, 1-d tensors as rows."""
    return _movement.cat([t.reshape(1, -1) if t.ndim == 1 else t for t in tensors], 0)


def take_along_dim(x: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``gather`` with the index broadcast against ``x`` (``torch.take_along_dim``)."""
    if dim is None:
        return x.reshape(-1).gather(0, indices.reshape(-1))
    d = normalize_dim(dim, x.ndim, "take_along_dim")
    shape = list(x.shape)
    shape[d] = indices.shape[d]
    return x.gather(d, indices.expand(tuple(shape)))


# --- products ---------------------------------------------------------------------------------
def _check_ndim(x: Tensor, ndim: int, op: str) -> None:
    if x.ndim != ndim:
        raise ShapeError(
            f"{op}: expected a {ndim}-d tensor, got one of shape {format_shape(x.shape)}"
        )


def _fixed_rank_matmul(x: Tensor, y: Tensor, ranks: tuple[int, int], op: str) -> Tensor:
    """``matmul`` for the PyTorch functions that accept only one rank per operand."""
    _check_ndim(x, ranks[0], op)
    _check_ndim(y, ranks[1], op)
    return matmul(x, y)


def mm(x: Tensor, y: Tensor) -> Tensor:
    """Matrix product of two 2-d tensors."""
    return _fixed_rank_matmul(x, y, (2, 2), "mm")


def bmm(x: Tensor, y: Tensor) -> Tensor:
    """Batched matrix product of two 3-d tensors."""
    return _fixed_rank_matmul(x, y, (3, 3), "bmm")


def mv(x: Tensor, v: Tensor) -> Tensor:
    """Matrix times vector."""
    return _fixed_rank_matmul(x, v, (2, 1), "mv")


def dot(x: Tensor, y: Tensor) -> Tensor:
    """Inner product of two 1-d tensors."""
    return _fixed_rank_matmul(x, y, (1, 1), "dot")


def outer(x: Tensor, y: Tensor) -> Tensor:
    _check_ndim(x, 1, "outer")
    _check_ndim(y, 1, "outer")
    return x.reshape(-1, 1) * y.reshape(1, -1)


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation, as ``torch.einsum`` (``...`` for leading dims, implicit output
    when there is no ``->``). Pairs of operands contract with one ``matmul``.

    >>> import kernelgrad as kg
    >>> a = kg.ones(2, 3)
    >>> kg.einsum("ij,kj->ik", a, a).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    text = equation.replace(" ", "")
    inputs_text, arrow, output = text.partition("->")
    terms = inputs_text.split(",")
    if len(terms) != len(operands):
        raise ArgumentError(
            f"einsum: the equation {equation!r} has {len(terms)} operand(s), but "
            f"{len(operands)} tensor(s) were given"
        )
    spare = iter(c for c in string.ascii_uppercase + string.ascii_lowercase if c not in text)
    widest = 0
    for term, x in zip(terms, operands):
        if "..." in term:
            widest = max(widest, x.ndim - (len(term) - 3))
    ellipsis_letters = "".join(next(spare) for _ in range(widest))
    expanded = []
    for term, x in zip(terms, operands):
        if "..." in term:
            count = x.ndim - (len(term) - 3)
            term = term.replace("...", ellipsis_letters[widest - count :])
        if len(term) != x.ndim:
            raise ShapeError(
                f"einsum: the subscripts {term!r} name {len(term)} dims, but the operand has "
                f"shape {format_shape(x.shape)}"
            )
        expanded.append(term)
    if arrow:
        output = output.replace("...", ellipsis_letters)
    else:
        letters = "".join(expanded)
        output = ellipsis_letters + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ellipsis_letters)
        )
    sizes: dict[str, int] = {}
    for term, x in zip(expanded, operands):
        for letter, size in zip(term, x.shape):
            if sizes.get(letter, 1) != 1 and size not in (1, sizes[letter]):
                raise ShapeError(
                    f"einsum: subscript {letter!r} has size {size} in one operand and "
                    f"{sizes[letter]} in another"
                )
            if size != 1 or letter not in sizes:
                sizes[letter] = size
    items = [_einsum_single(x, term) for x, term in zip(operands, expanded)]
    while len(items) > 1:
        (a, ta), (b, tb) = items[0], items[1]
        rest = "".join(t for _, t in items[2:]) + output
        items = [_contract(a, ta, b, tb, rest, sizes), *items[2:]]
    result, term = items[0]
    unused = [i for i, c in enumerate(term) if c not in output]
    if unused:
        result = result.sum(tuple(unused))
        term = "".join(c for c in term if c in output)
    if term != output:
        result = result.permute(*(term.index(c) for c in output))
    return result


def _einsum_single(x: Tensor, term: str) -> tuple[Tensor, str]:
    """Take the diagonal of subscripts repeated within one operand."""
    while len(set(term)) != len(term):
        letter = next(c for c in term if term.count(c) > 1)
        first = term.index(letter)
        second = term.index(letter, first + 1)
        x = diagonal(x, 0, first, second)
        term = "".join(c for i, c in enumerate(term) if i not in (first, second)) + letter
    return x, term


def _contract(
    a: Tensor, ta: str, b: Tensor, tb: str, needed: str, sizes: dict[str, int]
) -> tuple[Tensor, str]:
    """Contract two operands: shared subscripts that are needed later become batch dims,
    the others are summed by one batched matmul."""
    # subscripts of one operand only that are not needed later are summed first
    for name, (x, term) in (("a", (a, ta)), ("b", (b, tb))):
        other = tb if name == "a" else ta
        alone = [i for i, c in enumerate(term) if c not in other and c not in needed]
        if alone:
            x = x.sum(tuple(alone))
            term = "".join(c for c in term if c in other or c in needed)
        if name == "a":
            a, ta = x, term
        else:
            b, tb = x, term
    batch = [c for c in ta if c in tb and c in needed]
    summed = [c for c in ta if c in tb and c not in needed]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]

    def arranged(x: Tensor, term: str, order: list[str]) -> Tensor:
        x = x.permute(*(term.index(c) for c in order)) if order else x
        return x.expand(tuple(sizes[c] for c in order))

    a3 = arranged(a, ta, batch + left + summed).reshape(
        math.prod(sizes[c] for c in batch),
        math.prod(sizes[c] for c in left),
        math.prod(sizes[c] for c in summed),
    )
    b3 = arranged(b, tb, batch + summed + right).reshape(
        math.prod(sizes[c] for c in batch),
        math.prod(sizes[c] for c in summed),
        math.prod(sizes[c] for c in right),
    )
    product = matmul(a3, b3).reshape(tuple(sizes[c] for c in batch + left + right))
    return product, "".join(batch + left + right)


# --- random -----------------------------------------------------------------------------------
def multinomial(
    probabilities: Tensor, num_samples: int, replacement: bool = False, *, generator: Any = None
) -> Tensor:
    """Draw ``num_samples`` category indices per row of ``probabilities`` (weights, not
    necessarily normalised), with the backends' random numbers (the same draws on every
    device for one seed).

    >>> import kernelgrad as kg
    >>> kg.multinomial(kg.tensor([0.0, 1.0]), 3, replacement=True).tolist()
    [1, 1, 1]
    """
    if probabilities.ndim not in (1, 2):
        raise ShapeError(
            f"multinomial: probabilities must be 1-d or 2-d, got shape "
            f"{format_shape(probabilities.shape)}"
        )
    weights = probabilities if probabilities.ndim == 2 else probabilities.reshape(1, -1)
    if not weights.dtype.is_floating_point:
        raise DTypeError("multinomial: probabilities must be a floating point tensor")
    host = _host(weights)
    if (host < 0).any() or not np.isfinite(host).all():
        raise ArgumentError("multinomial: probabilities must be finite and non-negative")
    positive = (host > 0).sum(1)
    if (positive == 0).any():
        raise ArgumentError("multinomial: every row of probabilities must have a positive sum")
    if not replacement and num_samples > int(positive.min()):
        raise ArgumentError(
            f"multinomial: cannot draw {num_samples} samples without replacement from a row "
            f"with {int(positive.min())} non-zero probabilities; use replacement=True"
        )
    rows, categories = weights.shape
    weights = weights.detach()
    if replacement:
        uniform = rand(
            rows, num_samples, generator=generator, dtype=weights.dtype, device=weights.device
        )
        cdf = cumsum(weights, 1)
        cdf = cdf / _movement.narrow(cdf, 1, categories - 1, 1)  # the last entry is exactly 1
        chosen = _reduce.sum(cdf.unsqueeze(1) <= uniform.unsqueeze(2), 2)
        chosen = _ew.clamp(chosen, 0, categories - 1)
    else:
        # Gumbel top-k: the k largest log(p) + Gumbel noise are k draws without replacement
        noise = rand(
            rows, categories, generator=generator, dtype=weights.dtype, device=weights.device
        )
        gumbel = -_ew.LOG(-_ew.LOG(_ew.clamp(noise, 1e-20, 1.0 - 1e-7)))
        keys = _ew.where(weights > 0, _ew.LOG(weights) + gumbel, -math.inf)
        chosen = topk(keys, num_samples, 1).indices
    return chosen if probabilities.ndim == 2 else chosen.reshape(-1)


def randperm(
    n: int,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A random permutation of ``0 .. n-1`` (from the backends' random numbers, so one
    seed gives the same permutation on every device).

    >>> import kernelgrad as kg
    >>> sorted(kg.randperm(4).tolist())
    [0, 1, 2, 3]
    """
    if n < 0:
        raise ArgumentError(f"randperm: n must be non-negative, got {n}")
    keys = rand(n, generator=generator, dtype=default_float(), device=device)
    order = argsort(keys)
    return order if dtype is None else order.to(as_dtype(dtype))


__all__ = [
    "allclose",
    "argsort",
    "argwhere",
    "atan2",
    "bmm",
    "copysign",
    "count_nonzero",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "diag",
    "diagonal",
    "div",
    "dot",
    "einsum",
    "equal",
    "exp2",
    "floor_divide",
    "fmax",
    "fmin",
    "fmod",
    "frac",
    "hstack",
    "hypot",
    "isclose",
    "isfinite",
    "isinf",
    "kthvalue",
    "lerp",
    "log10",
    "log2",
    "logaddexp",
    "logaddexp2",
    "logcumsumexp",
    "masked_fill",
    "masked_select",
    "median",
    "mm",
    "movedim",
    "multinomial",
    "mv",
    "nan_to_num",
    "nonzero",
    "norm",
    "outer",
    "prod",
    "randperm",
    "remainder",
    "repeat_interleave",
    "roll",
    "round",
    "sort",
    "std_mean",
    "swapaxes",
    "take_along_dim",
    "topk",
    "trace",
    "tril",
    "triu",
    "true_divide",
    "unbind",
    "var_mean",
    "vstack",
    "xlogy",
]
