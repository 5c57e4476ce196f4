"""Shape and stride arithmetic shared by the front end and every backend.

Strides are counted in elements, not bytes. A view is (shape, strides, offset) over a
flat buffer; element ``(i0, i1, ...)`` lives at ``offset + i0*strides[0] + i1*strides[1] + ...``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from math import prod
from typing import Any

from .errors import DimensionError, DTypeError, ShapeError, format_shape

Shape = tuple[int, ...]


def normalize_size(size: Sequence[Any], op: str = "tensor creation") -> Shape:
    """Accept ``f(3, 4)``, ``f((3, 4))`` and ``f([3, 4])``; check every entry is a
    non-negative integer."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    shape = []
    for entry in size:
        if not hasattr(entry, "__index__"):
            raise DTypeError(f"{op}: shape entries must be integers, got {entry!r}")
        value = int(entry.__index__())
        if value < 0:
            raise ShapeError(f"{op}: negative dimension {value} in shape {tuple(size)}")
        shape.append(value)
    return tuple(shape)


@functools.lru_cache(maxsize=4096)
def _contiguous_strides(shape: Shape) -> Shape:
    strides = [0] * len(shape)
    step = 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def contiguous_strides(shape: Sequence[int]) -> Shape:
    """Row-major strides (in elements) of a tensor of ``shape``."""
    return _contiguous_strides(tuple(shape))


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    step = 1
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] != 1 and strides[d] != step:
            return False
        step *= shape[d]
    return True


def overlaps_itself(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when two positions of the view may address one memory location: a broadcast
    dim (stride 0, as ``expand`` makes) or windows that overlap (``unfold`` with a step
    smaller than the window). Writing through such a view would write one element
    several times, so in-place operations refuse it, as PyTorch does.

    Sorted by stride, each dim must step past everything the smaller dims reach; views
    made by slicing, permuting and non-overlapping ``unfold`` always do.
    """
    if _contiguous_strides(tuple(shape)) == tuple(strides):
        return False
    reach = 0
    for stride, size in sorted((abs(st), s) for s, st in zip(shape, strides) if s > 1):
        if stride <= reach or stride == 0:
            return True
        reach += stride * (size - 1)
    return False


def broadcast_shapes(*shapes: Shape, op: str = "broadcast") -> Shape:
    """NumPy broadcasting. The error lists every shape and the first clashing dimension."""
    if len(shapes) == 2 and shapes[0] == shapes[1] and type(shapes[0]) is tuple:
        return shapes[0]  # the common case: two equal shapes
    ndim = max((len(s) for s in shapes), default=0)
    result = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape):
            d = ndim - len(shape) + i
            if size == result[d] or size == 1:
                continue
            if result[d] == 1:
                result[d] = size
                continue
            listed = " and ".join(format_shape(s) for s in shapes)
            raise ShapeError(
                f"{op}: shapes {listed} cannot be broadcast together: dimension {d - ndim} "
                f"(counting from the end) is {result[d]} in one and {size} in another; "
                "sizes must match or be 1"
            )
    return tuple(result)


def broadcast_strides(shape: Shape, strides: Shape, target: Shape) -> Shape:
    """Strides of a view of ``shape`` expanded to ``target`` (0 where broadcast)."""
    pad = len(target) - len(shape)
    out = [0] * len(target)
    for i, (size, stride) in enumerate(zip(shape, strides)):
        out[pad + i] = 0 if (size == 1 and target[pad + i] != 1) else stride
    return tuple(out)


def normalize_dim(dim: Any, ndim: int, op: str = "operation") -> int:
    if not hasattr(dim, "__index__"):
        raise DTypeError(f"{op}: dim must be an integer, got {dim!r}")
    dim = int(dim)
    low, high = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not low <= dim <= high:
        raise DimensionError(
            f"{op}: dim {dim} is out of range for a tensor with {ndim} dimension"
            f"{'s' if ndim != 1 else ''} (valid: {low} to {high})"
        )
    return dim % ndim if ndim else 0


def normalize_dims(dims: Any, ndim: int, op: str = "operation") -> tuple[int, ...]:
    """``None`` means every dim; an int or an iterable of ints otherwise. Sorted.

    Each dim is checked (a 0-d tensor accepts 0 and -1, as in PyTorch) and may appear
    once: ``sum(dim=(0, 0))`` is an error, as in PyTorch and NumPy."""
    if dims is None:
        return tuple(range(ndim))
    if type(dims) is int:  # the common case, without the ABC check below (~0.5 us)
        normalized_dim = normalize_dim(dims, ndim, op)
        return () if ndim == 0 else (normalized_dim,)
    if isinstance(dims, Iterable) and not isinstance(dims, str):
        normalized = [normalize_dim(d, ndim, op) for d in dims]
        if len(set(normalized)) != len(normalized):
            repeated = next(d for d in normalized if normalized.count(d) > 1)
            raise DimensionError(
                f"{op}: dim {repeated} appears more than once in the dims {tuple(dims)}; "
                "name each dimension once"
            )
        return () if ndim == 0 else tuple(sorted(normalized))
    normalized_dim = normalize_dim(dims, ndim, op)
    return () if ndim == 0 else (normalized_dim,)


def infer_reshape(shape: Shape, new_shape: Sequence[int], op: str = "reshape") -> Shape:
    """Resolve a single ``-1`` entry and check the element count."""
    numel = prod(shape)
    unknown = [i for i, s in enumerate(new_shape) if s == -1]
    if len(unknown) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {tuple(new_shape)}")
    for s in new_shape:
        if s < -1:
            raise ShapeError(f"{op}: invalid size {s} in {tuple(new_shape)}")
    if unknown:
        known = prod(s for s in new_shape if s != -1)
        if known == 0 or numel % known:
            raise ShapeError(
                f"{op}: cannot reshape a tensor of shape {format_shape(shape)} ({numel} "
                f"elements) into {tuple(new_shape)}"
            )
        new_shape = list(new_shape)
        new_shape[unknown[0]] = numel // known
    new_shape = tuple(int(s) for s in new_shape)
    if prod(new_shape) != numel:
        raise ShapeError(
            f"{op}: cannot reshape a tensor of shape {format_shape(shape)} ({numel} elements) "
            f"into {format_shape(new_shape)} ({prod(new_shape)} elements)"
        )
    return new_shape


def reshape_strides(shape: Shape, strides: Shape, new_shape: Shape) -> Shape | None:
    """Strides that let ``new_shape`` view the same memory without a copy, or None.

    Groups of old dimensions that are laid out contiguously with respect to each other
    can be split or merged freely (the rule NumPy and PyTorch use)."""
    old = [(s, st) for s, st in zip(shape, strides) if s != 1]
    if prod(shape) == 0 or not old:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    n_old, n_new = len(old), len(new_shape)
    while ni < n_new and new_shape[ni] == 1:
        new_strides[ni] = 1
        ni += 1
    while oi < n_old and ni < n_new:
        old_start, new_start = oi, ni
        old_count, new_count = old[oi][0], new_shape[ni]
        while old_count != new_count:
            if old_count < new_count:
                oi += 1
                old_count *= old[oi][0]
            else:
                ni += 1
                new_count *= new_shape[ni]
        # old dims old_start..oi must be contiguous among themselves
        for k in range(old_start, oi):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        stride = old[oi][1]
        for k in range(ni, new_start - 1, -1):
            new_strides[k] = stride
            stride *= new_shape[k]
        oi += 1
        ni += 1
        while ni < n_new and new_shape[ni] == 1:
            new_strides[ni] = 1
            ni += 1
    return tuple(new_strides)


def coalesce(shape: Shape, strides_list: Sequence[Shape]) -> tuple[Shape, list[Shape]]:
    """Drop size-1 dims and merge neighbours that are contiguous for every operand.

    Kernels loop over the result: most elementwise problems collapse to one dimension."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    if not dims:
        return (1,), [(0,) for _ in strides_list]
    out_shape = [shape[dims[0]]]
    out_strides = [[st[dims[0]]] for st in strides_list]
    for d in dims[1:]:
        size = shape[d]
        if all(out_st[-1] == st[d] * size for out_st, st in zip(out_strides, strides_list)):
            out_shape[-1] *= size
            for out_st, st in zip(out_strides, strides_list):
                out_st[-1] = st[d]
        else:
            out_shape.append(size)
            for out_st, st in zip(out_strides, strides_list):
                out_st.append(st[d])
    return tuple(out_shape), [tuple(s) for s in out_strides]


class Size(tuple):
    """The shape of a tensor as ``x.size()`` returns it: a tuple (it compares equal to
    plain tuples and unpacks like one) with PyTorch's ``torch.Size`` extras.

    >>> import kernelgrad as kg
    >>> size = kg.zeros(2, 3).size()
    >>> size == (2, 3), size.numel(), size[1:]
    (True, 6, kg.Size([3]))
    """

    __slots__ = ()

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds."""
        count = 1
        for size in self:
            count *= size
        return count

    def __getitem__(self, key: Any) -> Any:
        result = tuple.__getitem__(self, key)
        return Size(result) if isinstance(key, slice) else result

    def __add__(self, other: Any) -> Size:
        return Size(tuple.__add__(self, tuple(other)))

    def __repr__(self) -> str:
        return f"kg.Size({list(self)})"
