"""More of PyTorch's function surface, composed from kernelgrad's existing operations.

Aliases (``multiply``, ``greater``, ``moveaxis``, ...), the fused-looking BLAS-style
forms (``addmm``, ``addcmul``, ...), scatter (``scatter``, ``scatter_add`` through the
``index_add`` primitive), shape helpers (``tile``, ``meshgrid``, ``tensor_split``,
``atleast_2d``, ...) and numeric helpers (``diff``, ``cross``, ``kron``, ``cdist``, ...).
Nothing here has a kernel or a VJP of its own: gradients come from the composition, and
every function runs on every backend.

Two functions have a result size that depends on the values: ``bincount`` (the largest
value) and ``tensor_split`` given a tensor of indices. They read that one number (or the
indices) to the host, a copy from the device for a CUDA tensor, as PyTorch synchronises.

The ``Tensor`` methods (``x.scatter_add_``, ``x.exp_()``, ``x.addmm(...)``, ...) are bound
at the end of this module; the in-place ones follow ``ops/inplace.py``: they write into the
tensor's memory and bump its version, and inside a graph they are recorded out of place
and the tensor's history is rebased onto the result.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import autograd
from .. import dtypes as _dtypes
from ..dtypes import DType, as_dtype, bool_, default_float, float64, int32, int64, result_type
from ..errors import (
    ArgumentError,
    DTypeError,
    IndexingError,
    ShapeError,
    UnsupportedError,
    format_shape,
)
from ..shapes import Size, normalize_dim
from ..shapes import broadcast_shapes as _broadcast_shapes
from ..tensor import Tensor
from . import composite as _composite
from . import elementwise as _ew
from . import indexing as _indexing
from . import inplace as _inplace
from . import movement as _movement
from .creation import arange, full, ones, rand, randint, randn, tensor, zeros
from .elementwise import copy_into
from .indexing import _index_tensor
from .indexing import index_add as _index_add
from .linalg import matmul

# --- aliases ----------------------------------------------------------------------------------


def clone(x: Tensor, *, memory_format: Any = None) -> Tensor:
    """A copy of ``x`` with its own memory (differentiable)."""
    return x.clone()


def t(x: Tensor) -> Tensor:
    """Transpose a tensor of at most 2 dims (0-d and 1-d tensors come back as they are)."""
    return x.t()


def multiply(x: Any, y: Any) -> Tensor:
    """Alias of ``kg.mul``."""
    return _ew.MUL(x, y)


def divide(x: Any, y: Any, *, rounding_mode: str | None = None) -> Tensor:
    """Alias of ``kg.div``."""
    return _composite.div(x, y, rounding_mode)


def subtract(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    """Alias of ``kg.sub``: ``x - alpha * y``."""
    return _ew.SUB(x, y if alpha == 1 else _ew.MUL(y, alpha))


def negative(x: Tensor) -> Tensor:
    """Alias of ``kg.neg``."""
    return _ew.NEG(x)


def positive(x: Tensor) -> Tensor:
    """``x`` itself (as PyTorch, refused for bool tensors)."""
    if x.dtype is bool_:
        raise DTypeError("positive: unary + is not supported on a bool tensor")
    return x


def not_equal(x: Any, y: Any) -> Tensor:
    """Alias of ``kg.ne``."""
    return _ew.NE(x, y)


def greater(x: Any, y: Any) -> Tensor:
    """Alias of ``kg.gt``."""
    return _ew.GT(x, y)


def greater_equal(x: Any, y: Any) -> Tensor:
    """Alias of ``kg.ge``."""
    return _ew.GE(x, y)


def less(x: Any, y: Any) -> Tensor:
    """Alias of ``kg.lt``."""
    return _ew.LT(x, y)


def less_equal(x: Any, y: Any) -> Tensor:
    """Alias of ``kg.le``."""
    return _ew.LE(x, y)


def absolute(x: Tensor) -> Tensor:
    """Alias of ``kg.abs``."""
    return _ew.ABS(x)


def sgn(x: Tensor) -> Tensor:
    """``kg.sign`` (the two differ only for complex numbers, which kernelgrad lacks)."""
    return _ew.SIGN(x)


def moveaxis(x: Tensor, source: Any, destination: Any) -> Tensor:
    """Alias of ``kg.movedim``."""
    return _composite.movedim(x, source, destination)


def ravel(x: Tensor) -> Tensor:
    """``x`` flattened to 1-d (a view when the layout allows, else a copy)."""
    return x.reshape(-1)


def select(x: Tensor, dim: int, index: int) -> Tensor:
    """The slice ``index`` along ``dim``, without that dim (a view).

    >>> import kernelgrad as kg
    >>> kg.select(kg.tensor([[1, 2], [3, 4]]), 1, 0).tolist()
    [1, 3]
    """
    if x.ndim == 0:
        raise ShapeError("select: cannot select from a 0-d tensor; it has no dimension")
    d = normalize_dim(dim, x.ndim, "select")
    size = x.shape[d]
    if not -size <= int(index) < size:
        raise IndexingError(
            f"select: index {index} is out of range for dimension {d} with size {size}"
        )
    return x[(slice(None),) * d + (int(index),)]


def clamp_min(x: Tensor, min: Any) -> Tensor:  # noqa: A002
    """``kg.clamp(x, min=min)``."""
    return _ew.clamp(x, min, None)


def clamp_max(x: Tensor, max: Any) -> Tensor:  # noqa: A002
    """``kg.clamp(x, max=max)``."""
    return _ew.clamp(x, None, max)


def index_add(target: Tensor, dim: int, index: Any, source: Tensor, *, alpha: Any = 1) -> Tensor:
    """A copy of ``target`` with ``alpha * source`` added at the positions ``index``
    selects along ``dim`` (repeated indices accumulate).

    >>> import kernelgrad as kg
    >>> kg.index_add(kg.zeros(3), 0, kg.tensor([0, 0, 2]), kg.ones(3)).tolist()
    [2.0, 0.0, 1.0]
    """
    return _index_add(target, dim, index, source if alpha == 1 else _ew.MUL(source, alpha))


# --- default dtype ----------------------------------------------------------------------------


def set_default_dtype(dtype: Any) -> None:
    """Set the dtype of Python floats and of new floating point tensors (``float32`` or
    ``float64``; ``float32`` at start)."""
    chosen = as_dtype(dtype)
    if not chosen.is_floating_point:
        raise DTypeError(
            f"set_default_dtype: only floating point dtypes can be the default, got {chosen} "
            "(kg.float32 or kg.float64)"
        )
    _dtypes._default_float = chosen


def get_default_dtype() -> DType:
    """The dtype of Python floats and new floating point tensors (``kg.float32`` unless
    :func:`set_default_dtype` changed it)."""
    return default_float()


# --- broadcasting and grids -------------------------------------------------------------------


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape that tensors of the given shapes broadcast to.

    >>> import kernelgrad as kg
    >>> kg.broadcast_shapes((2, 1), (3,))
    kg.Size([2, 3])
    """
    normal = [(int(s),) if isinstance(s, int) else tuple(int(n) for n in s) for s in shapes]
    return Size(_broadcast_shapes(*normal, op="broadcast_shapes"))


def _tensors_arg(tensors: tuple[Any, ...]) -> list[Tensor]:
    """``f(a, b)`` and ``f([a, b])`` alike."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def broadcast_tensors(*tensors: Any) -> tuple[Tensor, ...]:
    """The tensors expanded to their common broadcast shape (views)."""
    items = _tensors_arg(tensors)
    shape = _broadcast_shapes(*(x.shape for x in items), op="broadcast_tensors")
    return tuple(x.broadcast_to(shape) for x in items)


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-d tensors: with ``indexing="ij"`` (the default) output ``k``
    varies along dim ``k``; with ``"xy"`` the first two dims are swapped (NumPy's default).

    >>> import kernelgrad as kg
    >>> [g.tolist() for g in kg.meshgrid(kg.tensor([1, 2]), kg.tensor([3, 4, 5]))][1]
    [[3, 4, 5], [3, 4, 5]]
    """
    if indexing not in ("ij", "xy"):
        raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    items = _tensors_arg(tensors)
    if not items:
        raise ArgumentError("meshgrid: expects at least one tensor")
    for x in items:
        if x.ndim > 1:
            raise ShapeError(
                f"meshgrid: expects 0-d or 1-d tensors, got shape {format_shape(x.shape)}"
            )
    sizes = [x.numel() for x in items]
    order = list(range(len(items)))
    if indexing == "xy" and len(items) >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[k] for k in order)
    grids = []
    for k, x in enumerate(items):
        position = order.index(k)
        view = [1] * len(items)
        view[position] = sizes[k]
        grids.append(x.reshape(view).expand(shape))
    return tuple(grids)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of the elements of 1-d tensors, one per row (a single tensor
    comes back as it is)."""
    items = _tensors_arg(tensors)
    if len(items) == 1:
        return items[0]
    grids = meshgrid(*items, indexing="ij")
    return _movement.stack([g.reshape(-1) for g in grids], 1)


def tile(x: Tensor, dims: Any) -> Tensor:
    """Repeat ``x`` ``dims[k]`` times along dim ``k``; missing leading entries of either
    are taken as 1 (NumPy's ``tile``).

    >>> import kernelgrad as kg
    >>> kg.tile(kg.tensor([1, 2]), (2, 2)).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    reps = (int(dims),) if isinstance(dims, int) else tuple(int(n) for n in dims)
    if len(reps) < x.ndim:
        reps = (1,) * (x.ndim - len(reps)) + reps
    return x.repeat(*reps)


# --- scatter ----------------------------------------------------------------------------------


def _linear_index(shape: tuple[int, ...], d: int, index: Tensor) -> Tensor:
    """Flat positions (row-major in ``shape``) that ``index`` names along ``d``."""
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    size = shape[d]
    linear = _ew.where(index < 0, index + size, index) * strides[d]
    for k in range(len(shape)):
        if k != d:
            positions = arange(index.shape[k], device=index.device) * strides[k]
            linear = linear + positions.reshape((-1,) + (1,) * (len(shape) - 1 - k))
    return linear


def _check_scatter(x: Tensor, d: int, index: Tensor, src: Tensor | None, op: str) -> None:
    if index.ndim != x.ndim or (src is not None and src.ndim != x.ndim):
        raise ShapeError(
            f"{op}: index and src must have as many dims as the input ({x.ndim}), got index "
            f"{format_shape(index.shape)}"
            + ("" if src is None else f" and src {format_shape(src.shape)}")
        )
    for k in range(x.ndim):
        if (k != d and index.shape[k] > x.shape[k]) or (
            src is not None and index.shape[k] > src.shape[k]
        ):
            raise ShapeError(
                f"{op}: index shape {format_shape(index.shape)} exceeds the input shape "
                f"{format_shape(x.shape)}"
                + ("" if src is None else f" or the src shape {format_shape(src.shape)}")
                + f" in dimension {k}"
            )
    if index.numel():
        bad = (index < 0) | (index >= x.shape[d])
        if bad.any().item():
            value = _ew.where(bad, index, 0).abs().max().item()
            if (index == -value).any().item():
                value = -value
            raise IndexingError(
                f"{op}: index {value} is out of bounds for dimension {d} with size "
                f"{x.shape[d]} (scatter indices must lie in [0, size))"
            )


def _scatter_src(src: Any, like: Tensor, index: Tensor) -> Tensor:
    if isinstance(src, Tensor):
        if src.device != like.device:
            src = src.to(like.device)
        return src[tuple(slice(0, n) for n in index.shape)]
    return full(index.shape, src, dtype=like.dtype, device=like.device)


def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of ``x`` with ``src[i][j]`` added at ``[i][index[i][j]]`` (for ``dim=1``);
    repeated indices accumulate. ``index`` has the rank of ``x`` and fits in ``src``.

    >>> import kernelgrad as kg
    >>> kg.scatter_add(kg.zeros(3), 0, kg.tensor([0, 2, 0]), kg.ones(3)).tolist()
    [2.0, 0.0, 1.0]
    """
    if x.ndim == 0:
        raise ShapeError("scatter_add: cannot scatter into a 0-d tensor")
    d = normalize_dim(dim, x.ndim, "scatter_add")
    index = _index_tensor(index, x.device, "scatter_add")
    _check_scatter(x, d, index, src, "scatter_add")
    if x.dtype != src.dtype:
        raise DTypeError(
            f"scatter_add: src has dtype {src.dtype} but the input has {x.dtype}; convert "
            f"one of them (e.g. `src.to({x.dtype})`)"
        )
    if not index.numel():
        return x.clone()
    if x.dtype is bool_:  # adding booleans is "or"
        return _ew.NE(scatter_add(x.long(), d, index, src.long()), 0)
    values = _scatter_src(src, x, index)
    linear = _linear_index(x.shape, d, index)
    flat = _index_add(x.reshape(-1), 0, linear.reshape(-1), values.reshape(-1))
    return flat.reshape(x.shape)


def scatter(
    x: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None, reduce: Any = None
) -> Tensor:
    """A copy of ``x`` with ``src[i][j]`` (or the number ``value``) written at
    ``[i][index[i][j]]`` (for ``dim=1``). ``reduce="add"`` adds instead (``"multiply"``
    multiplies). Where an index repeats, the value last in index order lands, on every
    backend and every run (PyTorch documents the choice as unspecified; its CPU writes
    the last one, as kernelgrad does, its CUDA any one of them).

    >>> import kernelgrad as kg
    >>> kg.scatter(kg.zeros(2, 3), 1, kg.tensor([[2], [0]]), 1.0).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if value is not None:
        if src is not None:
            raise ArgumentError("scatter: give src or value, not both")
        src = value
    if src is None:
        raise ArgumentError("scatter: give the values to write, src (a tensor) or value")
    if x.ndim == 0:
        raise ShapeError("scatter: cannot scatter into a 0-d tensor")
    d = normalize_dim(dim, x.ndim, "scatter")
    index = _index_tensor(index, x.device, "scatter")
    _check_scatter(x, d, index, src if isinstance(src, Tensor) else None, "scatter")
    if isinstance(src, Tensor) and src.dtype != x.dtype:
        raise DTypeError(
            f"scatter: src has dtype {src.dtype} but the input has {x.dtype}; convert one of "
            f"them (e.g. `src.to({x.dtype})`)"
        )
    if reduce == "multiply":
        raise UnsupportedError(
            "scatter: reduce='multiply' is not supported (PyTorch deprecates it); "
            "reduce='add' and the default (write) are"
        )
    if reduce not in (None, "add"):
        raise ArgumentError(f"scatter: reduce must be 'add' (or left out), got {reduce!r}")
    if not index.numel():
        return x.clone()
    if x.dtype is bool_:
        source = src.long() if isinstance(src, Tensor) else int(src)
        return _ew.NE(scatter(x.long(), d, index, source, reduce=reduce), 0)
    values = _scatter_src(src, x, index)
    if reduce == "add":
        return scatter_add(x, d, index, values)
    return _last_written(x, d, index, values)


def _last_written(x: Tensor, d: int, index: Tensor, values: Tensor) -> Tensor:
    """A copy of ``x`` with ``values`` written at the positions ``index`` names along
    ``d``; where positions repeat, the value last in index order lands, as on PyTorch's
    CPU, on every backend and every run.

    Two sources can only meet when they differ in their position ``j`` along ``d`` alone
    (their other coordinates are the destination's), so the last writer of a position
    is the one with the largest ``j``. That maximum is found one bit at a time, from the
    highest: a position's bit is set where some writer agrees with the bits found so far
    and has the bit set, counted by an integer scatter-add (exact, and the same in any
    order, so CUDA's atomics decide nothing). The winner's value is then gathered, not
    added, so ``-0.0``, infinities and NaN land as they are."""
    numel, count = x.numel(), index.numel()
    destination = _linear_index(x.shape, d, index).reshape(-1)
    ranks = arange(index.shape[d], device=x.device).reshape((-1,) + (1,) * (x.ndim - 1 - d))
    ranks = ranks.expand(*index.shape).reshape(-1)
    best = zeros(numel, dtype=int64, device=x.device)  # per position: the last j so far
    for bit in reversed(range((index.shape[d] - 1).bit_length())):
        found = _indexing.take(best, 0, destination)
        agrees = _ew.EQ(ranks >> (bit + 1), found >> (bit + 1)) & _ew.EQ((ranks >> bit) & 1, 1)
        writers = _index_add(
            zeros(numel, dtype=int64, device=x.device), 0, destination, agrees.long()
        )
        best = best + _ew.where(writers > 0, 1 << bit, 0)
    last = _ew.EQ(ranks, _indexing.take(best, 0, destination))
    # per position: 1 + the flat position in `values` of its last writer, 0 if none
    sources = _ew.where(last, arange(1, count + 1, device=x.device), 0)
    chosen = _index_add(zeros(numel, dtype=int64, device=x.device), 0, destination, sources)
    landed = _indexing.take(values.reshape(-1), 0, (chosen - 1).clamp(min=0))
    return _ew.where(chosen > 0, landed, x.reshape(-1)).reshape(x.shape)


# --- BLAS-style combinations ------------------------------------------------------------------


def _scaled_sum(x: Tensor, product: Tensor, beta: Any, alpha: Any) -> Tensor:
    """``beta * x + alpha * product``; with ``beta == 0`` ``x`` is ignored (NaN in it does
    not propagate), as in PyTorch."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        shape = _broadcast_shapes(x.shape, product.shape, op="add")
        return product.broadcast_to(shape) + zeros((), dtype=x.dtype, device=x.device)
    return (x if beta == 1 else x * beta) + product


def addmm(x: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * x + alpha * (mat1 @ mat2)`` for 2-d ``mat1`` and ``mat2`` (``x``
    broadcast to the product's shape).

    >>> import kernelgrad as kg
    >>> kg.addmm(kg.ones(2, 2), kg.eye(2), kg.eye(2), beta=2).tolist()
    [[3.0, 2.0], [2.0, 3.0]]
    """
    return _scaled_sum(x, _composite.mm(mat1, mat2), beta, alpha)


def addmv(x: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * x + alpha * (mat @ vec)`` for a 2-d ``mat`` and a 1-d ``vec``."""
    return _scaled_sum(x, _composite.mv(mat, vec), beta, alpha)


def addr(x: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * x + alpha * outer(vec1, vec2)``."""
    return _scaled_sum(x, _composite.outer(vec1, vec2), beta, alpha)


def baddbmm(x: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * x + alpha * bmm(batch1, batch2)`` for 3-d batches."""
    return _scaled_sum(x, _composite.bmm(batch1, batch2), beta, alpha)


def addbmm(x: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * x + alpha * sum_b(batch1[b] @ batch2[b])``."""
    return _scaled_sum(x, _composite.bmm(batch1, batch2).sum(0), beta, alpha)


def addcmul(x: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
    """``x + value * tensor1 * tensor2`` (broadcast).

    >>> import kernelgrad as kg
    >>> kg.addcmul(kg.ones(2), kg.tensor([1.0, 2.0]), kg.tensor([3.0, 4.0]), value=0.5).tolist()
    [2.5, 5.0]
    """
    product = _ew.MUL(tensor1, tensor2)
    return _ew.ADD(x, product if value == 1 else _ew.MUL(product, value))


def addcdiv(x: Tensor, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
    """``x + value * tensor1 / tensor2`` (broadcast; integer division is refused, as in
    PyTorch)."""

    def integral(v: Any) -> bool:
        return not (v.dtype.is_floating_point if isinstance(v, Tensor) else isinstance(v, float))

    if integral(tensor1) and integral(tensor2):
        raise DTypeError(
            "addcdiv: integer division is not supported; convert tensor1 or tensor2 to a "
            "floating point dtype (e.g. `tensor1.float()`)"
        )
    quotient = _ew.DIV(tensor1, tensor2)
    return _ew.ADD(x, quotient if value == 1 else _ew.MUL(quotient, value))


# --- elementwise ------------------------------------------------------------------------------


def deg2rad(x: Tensor) -> Tensor:
    """Degrees to radians (integers give the default float)."""
    return _ew.MUL(x, math.pi / 180)


def rad2deg(x: Tensor) -> Tensor:
    """Radians to degrees (integers give the default float)."""
    return _ew.MUL(x, 180 / math.pi)


def logit(x: Tensor, eps: float | None = None) -> Tensor:
    """``log(x / (1 - x))``; with ``eps``, ``x`` is first clamped to ``[eps, 1 - eps]``."""
    if not x.dtype.is_floating_point:
        x = x.to(default_float())
    if eps is not None:
        x = _ew.clamp(x, eps, 1 - eps)
    return _ew.LOG(x / (1 - x))


def sinc(x: Tensor) -> Tensor:
    """The normalised sinc ``sin(pi x) / (pi x)``, 1 at 0 (with gradient 0 there)."""
    if not x.dtype.is_floating_point:
        x = x.to(default_float())
    zero = x == 0
    safe = _ew.where(zero, 1.0, x) * math.pi
    return _ew.where(zero, 1.0, _ew.SIN(safe) / safe)


def signbit(x: Tensor) -> Tensor:
    """True where the sign bit is set: negative numbers, ``-0.0`` and negative NaNs."""
    if not x.dtype.is_floating_point:
        return x < 0
    bits = x.detach().view(int32 if x.dtype.itemsize == 4 else int64)
    return bits < 0


def isposinf(x: Tensor) -> Tensor:
    """True where the element is ``+inf``."""
    if not x.dtype.is_floating_point:
        return zeros(x.shape, dtype=bool_, device=x.device)
    return x == math.inf


def isneginf(x: Tensor) -> Tensor:
    """True where the element is ``-inf``."""
    if not x.dtype.is_floating_point:
        return zeros(x.shape, dtype=bool_, device=x.device)
    return x == -math.inf


def isin(
    elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False
) -> Tensor:
    """True where an element of ``elements`` occurs in ``test_elements`` (either may be a
    number). Compares every pair on the device (memory grows with the product of sizes).

    >>> import kernelgrad as kg
    >>> kg.isin(kg.tensor([1, 2, 3]), kg.tensor([3, 1])).tolist()
    [True, False, True]
    """
    if not isinstance(elements, Tensor):
        elements = tensor(elements, device=getattr(test_elements, "device", None))
    if not isinstance(test_elements, Tensor):
        test_elements = tensor(test_elements, device=elements.device)
    found = _ew.EQ(elements.unsqueeze(-1), test_elements.reshape(-1)).any(-1)
    return found.logical_not() if invert else found


# --- reductions -------------------------------------------------------------------------------


def nansum(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Sum, with NaN taken as zero."""
    if x.dtype.is_floating_point:
        x = _ew.where(_ew.ISNAN(x), 0.0, x)
    return x.sum(dim, keepdim, dtype=dtype)


def nanmean(x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Mean of the non-NaN elements (NaN where all are NaN)."""
    if dtype is not None:
        x = x.to(as_dtype(dtype))
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"nanmean: expects a floating point tensor, got {x.dtype} (give dtype=kg.float32)"
        )
    present = _ew.ISNAN(x).logical_not()
    total = _ew.where(present, x, 0.0).sum(dim, keepdim)
    return total / present.sum(dim, keepdim).to(x.dtype)


def diff(
    x: Tensor,
    n: int = 1,
    dim: int = -1,
    prepend: Tensor | None = None,
    append: Tensor | None = None,
) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (after joining ``prepend`` and
    ``append``); booleans give ``!=``.

    >>> import kernelgrad as kg
    >>> kg.diff(kg.tensor([1, 4, 9, 16])).tolist()
    [3, 5, 7]
    """
    if x.ndim == 0:
        raise ShapeError("diff: expects a tensor with at least one dimension, got a 0-d tensor")
    if n < 0:
        raise ArgumentError(f"diff: order n must be non-negative, got {n}")
    d = normalize_dim(dim, x.ndim, "diff")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        parts = [
            p
            if isinstance(p, Tensor) and p.ndim
            else full(
                x.shape[:d] + (1,) + x.shape[d + 1 :],
                p.item() if isinstance(p, Tensor) else p,
                dtype=x.dtype,
                device=x.device,
            )
            for p in parts
        ]
        x = _movement.cat(parts, d)
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        later, earlier = x.narrow(d, 1, size - 1), x.narrow(d, 0, size - 1)
        x = _ew.NE(later, earlier) if x.dtype is bool_ else later - earlier
    return x


def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``, with sample points ``x`` or spacing ``dx``
    (1 by default).

    >>> import kernelgrad as kg
    >>> kg.trapezoid(kg.tensor([1.0, 2.0, 3.0])).item()
    4.0
    """
    if y.ndim == 0:
        raise ShapeError("trapezoid: expects a tensor with at least one dimension")
    d = normalize_dim(dim, y.ndim, "trapezoid")
    if isinstance(x, Tensor) and dx is not None:
        raise ArgumentError("trapezoid: give sample points x or a spacing dx, not both")
    if not isinstance(x, Tensor) and x is not None:
        dx, x = x, None
    size = y.shape[d]
    if size == 0:
        return zeros(y.shape[:d] + y.shape[d + 1 :], dtype=_float_of(y), device=y.device)
    mid = (y.narrow(d, 1, size - 1) + y.narrow(d, 0, size - 1)) / 2
    if x is None:
        return mid.sum(d) * (1 if dx is None else dx)
    if x.ndim == 1:
        if x.shape[0] != size:
            raise ShapeError(
                f"trapezoid: x has {x.shape[0]} sample points but y has {size} along dim {d}"
            )
        spacing = diff(x).reshape((-1,) + (1,) * (y.ndim - 1 - d))
    else:
        spacing = diff(x, dim=d - y.ndim if x.ndim >= y.ndim - d else -1)
    return (mid * spacing).sum(d)


def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """Alias of :func:`trapezoid`."""
    return trapezoid(y, x, dx=dx, dim=dim)


def _float_of(x: Tensor) -> DType:
    return x.dtype if x.dtype.is_floating_point else default_float()


# --- products ---------------------------------------------------------------------------------


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """Contract the last ``dims`` dims of ``a`` with the first ``dims`` of ``b``, or the
    dims listed in ``dims = (dims_a, dims_b)``.

    >>> import kernelgrad as kg
    >>> kg.tensordot(kg.ones(2, 3), kg.ones(3, 4), dims=1).shape
    kg.Size([2, 4])
    """
    if isinstance(dims, Tensor):
        dims = dims.cpu().tolist()
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ArgumentError(
                f"tensordot: dims must be between 0 and {min(a.ndim, b.ndim)}, got {dims}"
            )
        dims_a = list(range(a.ndim - dims, a.ndim))
        dims_b = list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise ArgumentError(
            f"tensordot: both tensors need as many contracted dims, got {dims_a} and {dims_b}"
        )
    dims_a = [normalize_dim(d, a.ndim, "tensordot") for d in dims_a]
    dims_b = [normalize_dim(d, b.ndim, "tensordot") for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise ShapeError(
                f"tensordot: contracted dims differ in size: dim {da} of a "
                f"{format_shape(a.shape)} has {a.shape[da]}, dim {db} of b "
                f"{format_shape(b.shape)} has {b.shape[db]}"
            )
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    inner_size = math.prod(a.shape[d] for d in dims_a)
    left = a.permute(free_a + dims_a).reshape(-1, inner_size)
    right = b.permute(dims_b + free_b).reshape(inner_size, -1)
    shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return matmul(left, right).reshape(shape)


def inner(a: Tensor, b: Tensor) -> Tensor:
    """Sum over the last dims of ``a`` and ``b`` (a product when either is 0-d)."""
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return tensordot(a, b, ([-1], [-1]))


def vdot(a: Tensor, b: Tensor) -> Tensor:
    """Dot product of two 1-d tensors (no conjugation is needed for real numbers)."""
    return _composite.dot(a, b)


def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product: block ``(i, j)`` of the result is ``a[i, j] * b``.

    >>> import kernelgrad as kg
    >>> kg.kron(kg.tensor([1, 2]), kg.tensor([1, 10])).tolist()
    [1, 10, 2, 20]
    """
    ndim = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (ndim - a.ndim) + a.shape)
    b = b.reshape((1,) * (ndim - b.ndim) + b.shape)
    left, right = [], []
    for n, m in zip(a.shape, b.shape):
        left += [n, 1]
        right += [1, m]
    shape = tuple(n * m for n, m in zip(a.shape, b.shape))
    return (a.reshape(left) * b.reshape(right)).reshape(shape)


def cross(a: Tensor, b: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along ``dim`` (broadcast); without ``dim``, the first
    dim of size 3, as ``torch.cross`` (``kg.linalg.cross`` would use the last)."""
    shape = _broadcast_shapes(a.shape, b.shape, op="cross")
    a, b = a.broadcast_to(shape), b.broadcast_to(shape)
    if dim is None:
        sized = [k for k, n in enumerate(shape) if n == 3]
        if not sized:
            raise ShapeError(f"cross: no dimension of size 3 in shape {format_shape(shape)}")
        d = sized[0]
    else:
        d = normalize_dim(dim, len(shape), "cross")
    if shape[d] != 3:
        raise ShapeError(f"cross: dimension {d} must have size 3, got shape {format_shape(shape)}")
    a0, a1, a2 = (a.narrow(d, k, 1) for k in range(3))
    b0, b1, b2 = (b.narrow(d, k, 1) for k in range(3))
    return _movement.cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: Any = None) -> Tensor:
    """Distances between the rows of ``x1`` (``..., P, M``) and of ``x2`` (``..., R, M``):
    a ``..., P, R`` tensor of p-norms (``p >= 0``, ``inf`` allowed); the gradient at a zero
    distance is 0, as in PyTorch."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise ShapeError(
            f"cdist: expects tensors of at least 2 dims, got {format_shape(x1.shape)} and "
            f"{format_shape(x2.shape)}"
        )
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            f"cdist: x1 and x2 must have the same number of columns, got "
            f"{x1.shape[-1]} and {x2.shape[-1]}"
        )
    if p < 0:
        raise ArgumentError(f"cdist: p must be non-negative, got {p}")
    if not (x1.dtype.is_floating_point and x2.dtype.is_floating_point):
        raise DTypeError("cdist: expects floating point tensors (convert with `.float()`)")
    delta = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return _ew.NE(delta, 0).to(delta.dtype).sum(-1)
    if p == math.inf:
        return delta.amax(-1)
    if p == 1:
        return delta.sum(-1)
    total = (delta * delta).sum(-1) if p == 2 else (delta**p).sum(-1)
    positive_total = total > 0
    safe = _ew.where(positive_total, total, 1.0)
    root = _ew.SQRT(safe) if p == 2 else safe ** (1.0 / p)
    return _ew.where(positive_total, root, 0.0)


# --- shapes -----------------------------------------------------------------------------------


def rot90(x: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """Rotate by 90 degrees ``k`` times, from the first of ``dims`` towards the second."""
    if len(dims) != 2:
        raise ArgumentError(f"rot90: dims must name two dims, got {tuple(dims)}")
    if x.ndim < 2:
        raise ShapeError(f"rot90: expects at least 2 dims, got shape {format_shape(x.shape)}")
    d0, d1 = (normalize_dim(d, x.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise ArgumentError(f"rot90: the two dims must differ, got {tuple(dims)}")
    k %= 4
    if k == 1:
        return x.flip(d1).transpose(d0, d1)
    if k == 2:
        return x.flip((d0, d1))
    if k == 3:
        return x.flip(d0).transpose(d0, d1)
    return x.clone()


def unflatten(x: Tensor, dim: int, sizes: Any) -> Tensor:
    """Split dim ``dim`` into the dims ``sizes`` (one may be -1)."""
    return x.unflatten(dim, sizes)


def tensor_split(x: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of ``x`` split along ``dim`` into ``n`` nearly equal parts (the first
    ``size % n`` one longer), or at the given indices.

    >>> import kernelgrad as kg
    >>> [p.tolist() for p in kg.tensor_split(kg.arange(5), 3)]
    [[0, 1], [2, 3], [4]]
    """
    if x.ndim == 0:
        raise ShapeError("tensor_split: expects a tensor with at least one dimension")
    d = normalize_dim(dim, x.ndim, "tensor_split")
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype.is_floating_point or spec.ndim > 1:
            raise DTypeError(
                "tensor_split: a tensor of indices_or_sections must be a 0-d or 1-d integer "
                f"tensor, got {spec.dtype} of shape {format_shape(spec.shape)}"
            )
        spec = spec.cpu().tolist()  # the split points decide the shapes: a host read
    size = x.shape[d]
    if isinstance(spec, int):
        if spec <= 0:
            raise ArgumentError(
                f"tensor_split: the number of sections must be positive, got {spec}"
            )
        base, extra = divmod(size, spec)
        bounds = [0]
        for k in range(spec):
            bounds.append(bounds[-1] + base + (1 if k < extra else 0))
    else:
        bounds = [0] + [min(max(int(i) + (size if int(i) < 0 else 0), 0), size) for i in spec]
        bounds.append(size)
    parts = []
    for start, stop in itertools.pairwise(bounds):
        stop = max(stop, start)
        parts.append(x.narrow(d, start, stop - start))
    return tuple(parts)


def _split_like_numpy(x: Tensor, spec: Any, d: int, op: str) -> tuple[Tensor, ...]:
    if isinstance(spec, int) and (spec <= 0 or x.shape[d] % spec):
        raise ShapeError(
            f"{op}: cannot split dimension {d} of size {x.shape[d]} into {spec} equal "
            "parts; give a divisor of the size, or a list of split indices"
        )
    return tensor_split(x, spec, d)


def hsplit(x: Tensor, sections: Any) -> tuple[Tensor, ...]:
    """Split along dim 1 (dim 0 of a 1-d tensor); an int must divide the size."""
    if x.ndim == 0:
        raise ShapeError("hsplit: expects a tensor with at least one dimension")
    return _split_like_numpy(x, sections, 0 if x.ndim == 1 else 1, "hsplit")


def vsplit(x: Tensor, sections: Any) -> tuple[Tensor, ...]:
    """Split along dim 0 of a tensor of at least 2 dims; an int must divide the size."""
    if x.ndim < 2:
        raise ShapeError(f"vsplit: expects at least 2 dims, got shape {format_shape(x.shape)}")
    return _split_like_numpy(x, sections, 0, "vsplit")


def dsplit(x: Tensor, sections: Any) -> tuple[Tensor, ...]:
    """Split along dim 2 of a tensor of at least 3 dims; an int must divide the size."""
    if x.ndim < 3:
        raise ShapeError(f"dsplit: expects at least 3 dims, got shape {format_shape(x.shape)}")
    return _split_like_numpy(x, sections, 2, "dsplit")


def _at_least(tensors: tuple[Any, ...], shaper: Any) -> Any:
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    results = tuple(shaper(x) for x in _tensors_arg(tensors))
    return results[0] if single else results


def atleast_1d(*tensors: Any) -> Any:
    """The tensor(s) with 0-d ones made 1-d (views)."""
    return _at_least(tensors, lambda x: x.reshape(1) if x.ndim == 0 else x)


def atleast_2d(*tensors: Any) -> Any:
    """The tensor(s) with fewer than 2 dims given leading dims of size 1 (views)."""
    return _at_least(
        tensors, lambda x: x.reshape((1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x
    )


def atleast_3d(*tensors: Any) -> Any:
    """The tensor(s) made 3-d: ``(n,)`` becomes ``(1, n, 1)``, ``(m, n)`` ``(m, n, 1)``."""

    def shaper(x: Tensor) -> Tensor:
        if x.ndim == 0:
            return x.reshape(1, 1, 1)
        if x.ndim == 1:
            return x.reshape(1, -1, 1)
        if x.ndim == 2:
            return x.unsqueeze(-1)
        return x

    return _at_least(tensors, shaper)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Stack 0-d and 1-d tensors as columns (and concatenate 2-d ones) along dim 1."""
    columns = [x.reshape(-1, 1) if x.ndim <= 1 else x for x in tensors]
    return _movement.cat(columns, 1)


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate along dim 2, after making every tensor 3-d (:func:`atleast_3d`)."""
    return _movement.cat([atleast_3d(x) for x in tensors], 2)


def block_diag(*tensors: Tensor) -> Tensor:
    """A block-diagonal matrix of the given 0-d, 1-d or 2-d tensors (zeros elsewhere).

    >>> import kernelgrad as kg
    >>> kg.block_diag(kg.tensor([[1, 2]]), kg.tensor(3)).tolist()
    [[1, 2, 0], [0, 0, 3]]
    """
    blocks = []
    for x in tensors:
        if x.ndim > 2:
            raise ShapeError(
                f"block_diag: expects tensors of at most 2 dims, got {format_shape(x.shape)}"
            )
        blocks.append(x.reshape(1, -1) if x.ndim < 2 else x)
    if not blocks:
        return zeros(1, 0)
    dtype = result_type(*blocks)
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = width - left - b.shape[1]
        rows.append(_movement.pad(b.to(dtype), (left, right)))
        left += b.shape[1]
    return _movement.cat(rows, 0)


def diag_embed(x: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Tensors whose diagonals (between output dims ``dim1`` and ``dim2``, at ``offset``)
    hold the last dim of ``x``; zeros elsewhere."""
    if x.ndim == 0:
        raise ShapeError("diag_embed: expects a tensor with at least one dimension")
    ndim = x.ndim + 1
    d1, d2 = normalize_dim(dim1, ndim, "diag_embed"), normalize_dim(dim2, ndim, "diag_embed")
    if d1 == d2:
        raise ArgumentError(f"diag_embed: dim1 and dim2 must differ, got {dim1} and {dim2}")
    n = x.shape[-1]
    m = n + abs(offset)
    rows = np.arange(n) + max(-offset, 0)
    cols = np.arange(n) + max(offset, 0)
    positions = tensor(rows * m + cols, device=x.device)
    flat = _index_add(
        zeros(x.shape[:-1] + (m * m,), dtype=x.dtype, device=x.device), -1, positions, x
    )
    square = flat.reshape(x.shape[:-1] + (m, m))
    return _composite.movedim(square, (-2, -1), (d1, d2))


def diagflat(x: Tensor, offset: int = 0) -> Tensor:
    """A 2-d tensor with the flattened ``x`` on diagonal ``offset``."""
    return diag_embed(x.reshape(-1), offset)


def tril_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The ``(2, N)`` row and column indices of the lower triangle of a ``row x col``
    matrix (below diagonal ``offset``), row by row."""
    rows, cols = np.tril_indices(row, offset, col)
    return tensor(np.stack([rows, cols]), dtype=dtype or int64, device=device)


def triu_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The ``(2, N)`` row and column indices of the upper triangle of a ``row x col``
    matrix (above diagonal ``offset``), row by row."""
    rows, cols = np.triu_indices(row, offset, col)
    return tensor(np.stack([rows, cols]), dtype=dtype or int64, device=device)


def logspace(
    start: float,
    end: float,
    steps: int,
    base: float = 10.0,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced in the
    exponent."""
    if steps < 0:
        raise ArgumentError(f"logspace: steps must be non-negative, got {steps}")
    chosen = as_dtype(dtype) if dtype is not None else default_float()
    values = np.power(float(base), np.linspace(start, end, steps))
    if not chosen.is_floating_point:
        values = np.trunc(values)
    return tensor(values, dtype=chosen, device=device, requires_grad=requires_grad)


# --- counting and searching -------------------------------------------------------------------


def bincount(x: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value ``0 .. max(x)`` occurs in the 1-d non-negative integer tensor
    ``x`` (summing ``weights`` instead of ones when given); at least ``minlength`` long.
    Reads the largest value to the host (the result's size depends on it).

    >>> import kernelgrad as kg
    >>> kg.bincount(kg.tensor([0, 2, 2])).tolist()
    [1, 0, 2]
    """
    if x.ndim != 1 or x.dtype.is_floating_point or x.dtype is bool_:
        raise DTypeError(
            f"bincount: expects a 1-d tensor of non-negative integers, got {x.dtype} of shape "
            f"{format_shape(x.shape)}"
        )
    if minlength < 0:
        raise ArgumentError(f"bincount: minlength must be non-negative, got {minlength}")
    if weights is not None and weights.shape != x.shape:
        raise ShapeError(
            f"bincount: weights must have the shape of the input {format_shape(x.shape)}, got "
            f"{format_shape(weights.shape)}"
        )
    largest = int(x.max().item()) if x.numel() else -1
    if x.numel() and int(x.min().item()) < 0:
        raise ArgumentError("bincount: the input must not contain negative values")
    size = max(largest + 1, minlength)
    if weights is None:
        return _index_add(
            zeros(size, dtype=int64, device=x.device),
            0,
            x,
            ones(x.shape, dtype=int64, device=x.device),
        )
    dtype = weights.dtype if weights.dtype.is_floating_point else float64
    return _index_add(zeros(size, dtype=dtype, device=x.device), 0, x, weights.to(dtype))


def searchsorted(
    sorted_sequence: Tensor,
    values: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """For each value, the index at which inserting it keeps the (innermost dim of the)
    sorted sequence sorted: the first such index, or the last with ``right=True`` /
    ``side="right"``. Compares every pair on the device.

    >>> import kernelgrad as kg
    >>> kg.searchsorted(kg.tensor([1, 3, 5]), kg.tensor([3, 6])).tolist()
    [1, 3]
    """
    if side is not None:
        if side not in ("left", "right"):
            raise ArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ArgumentError("searchsorted: right=True and side='left' contradict")
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = _composite.take_along_dim(seq, sorter, -1)
    if not isinstance(values, Tensor):
        values = tensor(values, device=seq.device)
    if seq.ndim == 0:
        raise ShapeError("searchsorted: the sorted sequence must have at least one dimension")
    if seq.ndim > 1 and seq.shape[:-1] != values.shape[:-1]:
        raise ShapeError(
            f"searchsorted: the leading dims of the sorted sequence {format_shape(seq.shape)} "
            f"and of the values {format_shape(values.shape)} must match"
        )
    if seq.ndim == 1:
        below = (seq <= values.unsqueeze(-1)) if right else (seq < values.unsqueeze(-1))
    else:
        edges = seq.unsqueeze(-2)
        below = (edges <= values.unsqueeze(-1)) if right else (edges < values.unsqueeze(-1))
    counts = below.sum(-1)
    return counts.to(int32) if out_int32 else counts


def bucketize(
    x: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False
) -> Tensor:
    """The bucket of each value among the sorted 1-d ``boundaries``: ``i`` with
    ``boundaries[i-1] < x <= boundaries[i]`` (``<=`` and ``<`` swapped with
    ``right=True``)."""
    if boundaries.ndim != 1:
        raise ShapeError(
            f"bucketize: boundaries must be 1-d, got shape {format_shape(boundaries.shape)}"
        )
    return searchsorted(boundaries, x, out_int32=out_int32, right=right)


# --- random -----------------------------------------------------------------------------------


def normal(
    mean: Any = 0.0,
    std: Any = 1.0,
    size: Any = None,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    generator: Any = None,
) -> Tensor:
    """Samples from normal distributions: ``mean`` and ``std`` (numbers or tensors,
    broadcast), or numbers and a ``size``. As in PyTorch, no gradient flows to tensor
    arguments (they receive zeros)."""
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    if not tensors:
        if size is None:
            raise ArgumentError("normal: with a number mean and std, give the size")
        shape = (int(size),) if isinstance(size, int) else tuple(size)
        sample = randn(shape, generator=generator, dtype=dtype, device=device)
        if std != 1 or mean != 0:
            sample = sample * std + mean
        return sample.requires_grad_() if requires_grad else sample
    like = tensors[0]
    shape = _broadcast_shapes(*(t.shape for t in tensors), op="normal")
    if any(not t.dtype.is_floating_point for t in tensors):
        raise DTypeError("normal: tensor mean and std must be floating point")
    if isinstance(std, Tensor) and bool((std < 0).any().item()):
        raise ArgumentError("normal: std must be non-negative")
    sample = randn(shape, generator=generator, dtype=like.dtype, device=like.device)
    sample = sample * _detached(std) + _detached(mean)
    if autograd.is_grad_enabled() and any(t.requires_grad for t in tensors):
        # keep the arguments in the graph with a zero gradient, as PyTorch
        for t in tensors:
            sample = sample + t * 0
    return sample


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, Tensor) else value


def bernoulli(x: Tensor, p: Any = None, *, generator: Any = None) -> Tensor:
    """0/1 samples with probabilities ``x`` (or the number ``p``), in ``x``'s dtype."""
    probability = x if p is None else p
    dtype = x.dtype if x.dtype.is_floating_point else default_float()
    if isinstance(probability, Tensor):
        probability = probability.detach()
    uniform = rand(x.shape, generator=generator, dtype=dtype, device=x.device)
    return (uniform < probability).to(dtype)


def randint_like(
    x: Tensor, low: int = 0, high: int | None = None, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """Random integers in ``[low, high)`` with the shape of ``x`` (``randint_like(x,
    high)`` starts at 0), in ``x``'s dtype unless ``dtype`` is given."""
    if high is None:
        low, high = 0, low
    chosen = as_dtype(dtype) if dtype is not None else x.dtype
    values = randint(low, high, x.shape, dtype=int64, device=device or x.device)
    return values if chosen is int64 else values.to(chosen)


# --- Tensor methods -----------------------------------------------------------------------------


def _write_result(x: Tensor, name: str, compute: Any, *others: Any) -> Tensor:
    """``x`` overwritten by ``compute(x)`` (same shape, a dtype ``x`` can hold): in a graph,
    recorded out of place and ``x``'s history rebased onto the result (a result without a
    gradient passes none back, as ``fill_``)."""
    recorded = _inplace._check_autograd(x, others, name)
    _ew.check_writable(x, name)
    result = compute(x.clone() if recorded else x)
    if result.shape != x.shape:
        raise ShapeError(
            f"{name}: the result of shape {format_shape(result.shape)} cannot be written into "
            f"a tensor of shape {format_shape(x.shape)}"
        )
    _inplace._check_dtype(name, result.dtype, x)
    if recorded and not result.requires_grad:
        _inplace._record_overwrite(x, result, name)
        return x
    if recorded:
        _inplace._commit(x, result, name)  # through the base for a view
    else:
        copy_into(x, result.detach(), name)
    return x


def _restride(x: Tensor, name: str, make_view: Any) -> Tensor:
    """``t_``, ``squeeze_``, ``unsqueeze_``: ``x`` takes the shape and strides of a view of
    itself (no data moves, the version stays)."""
    recorded = _inplace._check_autograd(x, (), name)
    view = make_view(x)
    x.shape, x._strides, x._offset = view.shape, view._strides, view._offset
    if recorded:
        x._node = view._node
    return x


def _primitive_inplace(op: Any, name: str) -> Any:
    def method(self: Tensor, *others: Any) -> Tensor:
        return _inplace.apply_inplace(op, self, *others)

    method.__name__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``: writes into this tensor and returns it."
    return method


def _composite_inplace(function: Any, name: str) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        tensors = tuple(a for a in (*args, *kwargs.values()) if isinstance(a, Tensor))
        return _write_result(self, name, lambda x: function(x, *args, **kwargs), *tensors)

    method.__name__ = name
    method.__doc__ = f"In-place ``{name[:-1]}``: writes into this tensor and returns it."
    return method


def _compare_inplace(op: Any, name: str) -> Any:
    def method(self: Tensor, other: Any) -> Tensor:
        return _write_result(self, name, lambda x: op(x, other).to(self.dtype), other)

    method.__name__ = name
    method.__doc__ = (
        f"In-place ``{name[:-1]}``: this tensor holds 1 where the comparison is true, else 0."
    )
    return method


def _tile_method(self: Tensor, *dims: Any) -> Tensor:
    """Repeat the tensor ``dims[k]`` times along dim ``k`` (see ``kg.tile``)."""
    return tile(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)


def _get_device(self: Tensor) -> int:
    """The GPU index of a CUDA tensor; -1 for a CPU tensor."""
    return -1 if self.device.type == "cpu" else int(self.device.index or 0)


def _retains_grad(self: Tensor) -> bool:
    """True for a non-leaf tensor whose ``.grad`` backward will keep (``retain_grad()``)."""
    from .. import autograd

    return autograd.retains_grad(self)


def _bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Any = None) -> Tensor:
    """Fill with 0/1 samples that are 1 with probability ``p`` (a number or a tensor)."""
    if isinstance(p, Tensor):
        p = p.detach()
    return _write_result(
        self, "bernoulli_", lambda x: rand(x.shape, dtype=_float_of(x), device=x.device) < p
    )


_METHODS: dict[str, Any] = {
    "index_put_": _indexing.index_put_,
    "index_put": _indexing.index_put,
    "index_copy_": _indexing.index_copy_,
    "index_copy": _indexing.index_copy,
    "index_fill_": _indexing.index_fill_,
    "index_fill": _indexing.index_fill,
    "masked_scatter_": _indexing.masked_scatter_,
    "masked_scatter": _indexing.masked_scatter,
    "scatter": scatter,
    "scatter_add": scatter_add,
    "index_add": index_add,
    "addmm": addmm,
    "addmv": addmv,
    "addr": addr,
    "baddbmm": baddbmm,
    "addbmm": addbmm,
    "addcmul": addcmul,
    "addcdiv": addcdiv,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
    "multiply": multiply,
    "divide": divide,
    "subtract": subtract,
    "negative": negative,
    "positive": positive,
    "not_equal": not_equal,
    "greater": greater,
    "greater_equal": greater_equal,
    "less": less,
    "less_equal": less_equal,
    "absolute": absolute,
    "sgn": sgn,
    "moveaxis": moveaxis,
    "ravel": ravel,
    "select": select,
    "tile": _tile_method,
    "deg2rad": deg2rad,
    "rad2deg": rad2deg,
    "diff": diff,
    "cross": cross,
    "inner": inner,
    "kron": kron,
    "vdot": vdot,
    "logit": logit,
    "signbit": signbit,
    "sinc": sinc,
    "nansum": nansum,
    "nanmean": nanmean,
    "tensor_split": tensor_split,
    "hsplit": hsplit,
    "vsplit": vsplit,
    "dsplit": dsplit,
    "diag_embed": diag_embed,
    "diagflat": diagflat,
    "rot90": rot90,
    "isposinf": isposinf,
    "isneginf": isneginf,
    "bincount": bincount,
    "bernoulli": bernoulli,
    "bernoulli_": _bernoulli_,
    "logical_and": lambda self, other: _ew.LOGICAL_AND(self, other),
    "logical_or": lambda self, other: _ew.LOGICAL_OR(self, other),
    "logical_xor": lambda self, other: _ew.LOGICAL_XOR(self, other),
    "ndimension": lambda self: self.ndim,
    "register_hook": autograd.register_hook,
    "get_device": _get_device,
    "is_signed": lambda self: self.dtype is not bool_,
    "t_": lambda self: _restride(self, "t_", Tensor.t),
    "squeeze_": lambda self, dim=None: _restride(self, "squeeze_", lambda x: x.squeeze(dim)),
    "unsqueeze_": lambda self, dim: _restride(self, "unsqueeze_", lambda x: x.unsqueeze(dim)),
    "transpose_": lambda self, dim0, dim1: _restride(
        self, "transpose_", lambda x: x.transpose(dim0, dim1)
    ),
}
for _name, _op in {
    "exp_": _ew.EXP,
    "log_": _ew.LOG,
    "log1p_": _ew.LOG1P,
    "expm1_": _ew.EXPM1,
    "sqrt_": _ew.SQRT,
    "sigmoid_": _ew.SIGMOID,
    "tanh_": _ew.TANH,
    "neg_": _ew.NEG,
    "negative_": _ew.NEG,
    "abs_": _ew.ABS,
    "absolute_": _ew.ABS,
    "reciprocal_": _ew.RECIPROCAL,
    "floor_": _ew.FLOOR,
    "ceil_": _ew.CEIL,
    "trunc_": _ew.TRUNC,
    "fix_": _ew.TRUNC,
    "sin_": _ew.SIN,
    "cos_": _ew.COS,
    "tan_": _ew.TAN,
    "sign_": _ew.SIGN,
    "sgn_": _ew.SIGN,
    "erf_": _ew.ERF,
    "pow_": _ew.POW,
}.items():
    _METHODS[_name] = _primitive_inplace(_op, _name)
for _name, _function in {
    "rsqrt_": lambda x: x.rsqrt(),
    "square_": lambda x: x.square(),
    "round_": _composite.round,
    "tril_": _composite.tril,
    "triu_": _composite.triu,
    "clamp_min_": clamp_min,
    "clamp_max_": clamp_max,
    "addmm_": addmm,
    "addmv_": addmv,
    "addr_": addr,
    "baddbmm_": baddbmm,
    "addbmm_": addbmm,
    "addcmul_": addcmul,
    "addcdiv_": addcdiv,
    "index_add_": index_add,
    "scatter_": scatter,
    "scatter_add_": scatter_add,
    "logit_": logit,
    "sinc_": sinc,
    "deg2rad_": deg2rad,
    "rad2deg_": rad2deg,
    "multiply_": multiply,
    "divide_": divide,
    "subtract_": subtract,
    "logical_and_": _ew.LOGICAL_AND,
    "logical_or_": _ew.LOGICAL_OR,
    "logical_xor_": _ew.LOGICAL_XOR,
    "logical_not_": _ew.LOGICAL_NOT,
}.items():
    _METHODS[_name] = _composite_inplace(_function, _name)
for _name, _op in {
    "eq_": _ew.EQ,
    "ne_": _ew.NE,
    "lt_": _ew.LT,
    "le_": _ew.LE,
    "gt_": _ew.GT,
    "ge_": _ew.GE,
    "not_equal_": _ew.NE,
    "greater_": _ew.GT,
    "greater_equal_": _ew.GE,
    "less_": _ew.LT,
    "less_equal_": _ew.LE,
}.items():
    _METHODS[_name] = _compare_inplace(_op, _name)


def _bind_methods() -> None:
    for name, method in _METHODS.items():
        if name in Tensor.__dict__:
            raise RuntimeError(f"Tensor.{name} is defined twice")
        setattr(Tensor, name, method)
    Tensor.is_cpu = property(lambda self: self.device.type == "cpu", doc="True on the CPU.")
    Tensor.retains_grad = property(_retains_grad, doc=_retains_grad.__doc__)


_bind_methods()
