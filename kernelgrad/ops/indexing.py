"""Indexing: ``__getitem__`` / ``__setitem__``, and the gather/scatter primitives.

Basic indices (integers, slices with any step including negative, ``None``, ``...``)
produce views. Integer tensors (or lists, or boolean masks) are *advanced* indices:
they gather with the ``take`` primitive, whose gradient is ``index_add`` (scatter-add).
Several advanced indices are combined into one linear index over the dims they cover,
so every gather is one ``take`` kernel.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from .. import autograd
from ..dtypes import bool_, int64
from ..errors import (
    DeviceMismatchError,
    DTypeError,
    IndexingError,
    ShapeError,
    UnsupportedError,
    format_shape,
)
from ..shapes import broadcast_shapes, normalize_dim
from ..tensor import Tensor, _check_scalar_access
from . import register
from .elementwise import check_writable, copy_into, where
from .movement import slice_view

register("take", "indexing", ("Tensor.index_select", "Tensor.__getitem__", "kg.take"), True)
register("index_add", "indexing", ("kg.index_add",), True)


def _index_tensor(index: Any, device: Any, op: str) -> Tensor:
    from .creation import tensor

    if not isinstance(index, Tensor):
        index = tensor(index, device=device)
    if index.device != device:
        raise DeviceMismatchError(
            f"{op}: the index tensor is on {index.device} but the indexed tensor is on "
            f"{device}; move the index with `.to({str(device)!r})`"
        )
    if index.dtype.is_floating_point or index.dtype.is_bool:
        raise DTypeError(
            f"{op}: indices must be an integer tensor, got {index.dtype} (use `.long()`; "
            "boolean masks are only accepted directly inside `t[mask]`)"
        )
    return index


def take(x: Tensor, dim: int, index: Any) -> Tensor:
    """Select entries along ``dim`` with an integer tensor of any shape (``index_select``
    generalised). The result's shape is ``x.shape[:dim] + index.shape + x.shape[dim+1:]``.

    >>> import kernelgrad as kg
    >>> kg.take(kg.tensor([[1, 2], [3, 4], [5, 6]]), 0, kg.tensor([2, 0])).tolist()
    [[5, 6], [1, 2]]
    """
    if x.ndim == 0:
        raise ShapeError("take: cannot index a 0-d tensor along a dimension")
    d = normalize_dim(dim, x.ndim, "take")
    index = _index_tensor(index, x.device, "take")
    shape = x.shape[:d] + index.shape + x.shape[d + 1 :]
    result = Tensor._empty(shape, x.dtype, x.device)
    if not result.numel() and index.numel():
        # No element to gather (another dim is empty), but the indices must still fit.
        _check_bounds(index, x.shape[d], d, "take")
    if result.numel():
        flat_index = index.reshape(-1)
        bad = x._backend.take(result._view(), x._view(), d, flat_index._view())
        if bad is not None:
            raise IndexingError(
                f"take: index {bad} is out of bounds for dimension {d} with size {x.shape[d]} "
                f"(tensor of shape {format_shape(x.shape)})"
            )
    if autograd.needs_grad(x):
        source_shape = x.shape

        def backward(g: Tensor) -> tuple[Tensor]:
            from .creation import zeros

            return (index_add(zeros(source_shape, dtype=g.dtype, device=g.device), d, index, g),)

        autograd.record("take", (x,), result, backward)
    return result


def index_add(target: Tensor, dim: int, index: Any, source: Tensor) -> Tensor:
    """A copy of ``target`` with ``source`` added at the positions ``index`` selects
    along ``dim`` (repeated indices accumulate). ``source`` has the shape
    ``target.shape[:dim] + index.shape + target.shape[dim+1:]``."""
    if target.ndim == 0:
        raise ShapeError("index_add: cannot index a 0-d tensor along a dimension")
    d = normalize_dim(dim, target.ndim, "index_add")
    index = _index_tensor(index, target.device, "index_add")
    if source.device != target.device:
        raise DeviceMismatchError(
            f"index_add: the source is on {source.device} but the target is on "
            f"{target.device}; move it with `.to({str(target.device)!r})`"
        )
    expected = target.shape[:d] + index.shape + target.shape[d + 1 :]
    if source.shape != expected:
        raise ShapeError(
            f"index_add: source has shape {format_shape(source.shape)}, expected "
            f"{format_shape(expected)} for a target of shape {format_shape(target.shape)} "
            f"and an index of shape {format_shape(index.shape)} along dim {d}"
        )
    result = target.detach().clone()
    if not source.numel() and index.numel():
        _check_bounds(index, target.shape[d], d, "index_add")  # nothing to add, but check
    if source.numel():
        flat_source = source.detach().reshape(
            target.shape[:d] + (index.numel(),) + target.shape[d + 1 :]
        )
        bad = result._backend.index_add(
            result._view(), d, index.reshape(-1)._view(), flat_source.contiguous()._view()
        )
        if bad is not None:
            raise IndexingError(
                f"index_add: index {bad} is out of bounds for dimension {d} with size "
                f"{target.shape[d]}"
            )
    if autograd.needs_grad(target, source):
        autograd.record(
            "index_add",
            (target, source),
            result,
            lambda g: (g, take(g, d, index)),
        )
    return result


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """``torch.gather``: ``out[i][j] = x[i][index[i][j]]`` for ``dim=1`` (same rank)."""
    from .creation import arange

    if x.ndim == 0:
        raise ShapeError("gather: cannot index a 0-d tensor along a dimension")
    d = normalize_dim(dim, x.ndim, "gather")
    index = _index_tensor(index, x.device, "gather")
    if index.ndim != x.ndim:
        raise ShapeError(
            f"gather: index must have as many dims as the input ({x.ndim}), got "
            f"{format_shape(index.shape)}"
        )
    for k in range(x.ndim):
        if k != d and index.shape[k] > x.shape[k]:
            raise ShapeError(
                f"gather: index shape {format_shape(index.shape)} exceeds input shape "
                f"{format_shape(x.shape)} in dimension {k}"
            )
    size = x.shape[d]
    _check_bounds(index, size, d, "gather")
    base = x.contiguous()
    strides = base._strides
    linear = where(index < 0, index + size, index) * strides[d]
    for k in range(x.ndim):
        if k != d:
            positions = arange(index.shape[k], device=x.device) * strides[k]
            linear = linear + positions.reshape((-1,) + (1,) * (x.ndim - 1 - k))
    return take(base.reshape(-1), 0, linear)


def _check_bounds(index: Tensor, size: int, dim: int, op: str) -> None:
    """Raise IndexingError naming an out-of-range index (one device read)."""
    if index.numel() == 0:
        return
    bad = ((index < -size) | (index >= size)).any()
    if bad.item():
        value = where((index < -size) | (index >= size), index, 0).abs().max().item()
        raise IndexingError(
            f"{op}: index {value} is out of bounds for dimension {dim} with size {size}"
        )


# --- __getitem__ ---------------------------------------------------------------------------------
def _normalise_key(x: Tensor, key: Any) -> list[Any]:
    from .creation import tensor

    if not isinstance(key, tuple):
        key = (key,)
    entries: list[Any] = []
    for k in key:
        if isinstance(k, slice) and k.step == 0:
            raise IndexingError(f"indexing: slice step cannot be zero (in {k})")
        if k is None or k is Ellipsis or isinstance(k, slice):
            entries.append(k)
        elif isinstance(k, (bool, np.bool_)):
            raise IndexingError(
                "indexing: a Python bool is not a valid index; use a boolean tensor mask"
            )
        elif isinstance(k, Tensor):
            entries.append(k)
        elif isinstance(k, (list, np.ndarray, range)):
            if isinstance(k, range):
                k = list(k)  # as PyTorch: a range is a list of integer indices
            empty = len(k) == 0  # `t[[]]` selects nothing, as in NumPy
            entries.append(tensor(k, dtype=int64 if empty else None, device=x.device))
        elif hasattr(k, "__index__"):
            entries.append(int(k.__index__()))
        else:
            raise IndexingError(
                f"indexing: unsupported index {k!r}: use integers, slices, None, ..., or "
                "integer / boolean tensors"
            )
    consumed = sum(_dims_indexed(k) for k in entries)
    ellipses = [i for i, k in enumerate(entries) if k is Ellipsis]
    if len(ellipses) > 1:
        raise IndexingError("indexing: an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise IndexingError(
            f"indexing: too many indices for a tensor of dimension {x.ndim} (shape "
            f"{format_shape(x.shape)}): {consumed} were given"
        )
    if ellipses:
        i = ellipses[0]
        entries[i : i + 1] = [slice(None)] * (x.ndim - consumed)
    else:
        entries += [slice(None)] * (x.ndim - consumed)
    # Boolean masks become integer indices (their positions), one per masked dim.
    expanded: list[Any] = []
    dim = 0
    for k in entries:
        if isinstance(k, Tensor) and k.dtype.is_bool:
            if k.ndim == 0:
                raise IndexingError(
                    "indexing: 0-d boolean masks are not supported; use `t[None]` or "
                    "`kg.where(mask, t, ...)`"
                )
            _check_mask_shape(k, x, dim)
            positions = np.nonzero(k.cpu().numpy() if k.device.type != "cpu" else k.numpy())
            expanded.extend(tensor(p.astype(np.int64), device=x.device) for p in positions)
        else:
            expanded.append(k)
        dim += _dims_indexed(k)
    return expanded


def _dims_indexed(entry: Any) -> int:
    """How many dims of the indexed tensor one entry of a normalised key consumes."""
    if entry is None or entry is Ellipsis:
        return 0
    if isinstance(entry, Tensor) and entry.dtype.is_bool:
        return entry.ndim
    return 1


def _check_mask_shape(mask: Tensor, x: Tensor, dim: int) -> None:
    """A boolean mask must have the shape of the dims it indexes (NumPy and PyTorch
    refuse anything else; a shorter mask would silently select from the wrong rows)."""
    indexed = x.shape[dim : dim + mask.ndim]
    for k, (want, got) in enumerate(zip(indexed, mask.shape)):
        if want != got:
            raise IndexingError(
                f"indexing: the boolean mask of shape {format_shape(mask.shape)} does not "
                f"match the indexed tensor of shape {format_shape(x.shape)}: mask dimension "
                f"{k} has size {got}, but tensor dimension {dim + k} has size {want}. A mask "
                "needs the shape of the dimensions it selects from"
            )


def _ints_as_advanced(entries: list[Any], device: Any) -> list[Any]:
    """NumPy and PyTorch treat integers as advanced indices when index tensors are
    present; that only changes the result when the integers and the index tensors are
    not adjacent (the broadcast index dims then move to the front)."""
    from .creation import tensor

    positions = [i for i, k in enumerate(entries) if isinstance(k, (int, Tensor)) and k is not None]
    if not any(isinstance(entries[i], Tensor) for i in positions):
        return entries
    if positions == list(range(positions[0], positions[-1] + 1)):
        return entries
    return [tensor(k, device=device) if isinstance(k, int) else k for k in entries]


def _basic_entries(x: Tensor, key: Any) -> list[Any] | None:
    """The normalised key for the common case, cheaply: a Python int or slice, or a
    tuple of at most ``x.ndim`` of them (no step of zero); None for anything else, which
    :func:`_normalise_key` then handles (with its errors)."""
    if type(key) is not tuple:
        key = (key,)
    if len(key) > x.ndim:
        return None
    for k in key:
        kind = type(k)
        if kind is slice:
            if k.step == 0:
                return None
        elif kind is not int:  # bool, None, Ellipsis, tensors, lists...: the full path
            return None
    return [*key, *[slice(None)] * (x.ndim - len(key))]


def getitem(x: Tensor, key: Any) -> Tensor:
    entries = _basic_entries(x, key)
    if entries is None:
        entries = _ints_as_advanced(_normalise_key(x, key), x.device)
    shape: list[int] = []
    strides: list[int] = []
    offset = x._offset
    basic_key: list[Any] = []
    advanced: list[tuple[int, Tensor]] = []  # (dim in the basic view, index)
    d = 0
    for k in entries:
        if k is None:
            shape.append(1)
            strides.append(0)
            basic_key.append(None)
            continue
        size, stride = x.shape[d], x._strides[d]
        if isinstance(k, int):
            if not -size <= k < size:
                raise IndexingError(
                    f"indexing: index {k} is out of bounds for dimension {d} with size {size} "
                    f"(tensor of shape {format_shape(x.shape)})"
                )
            offset += (k % size) * stride
            basic_key.append(k)
        elif isinstance(k, slice):
            start, stop, step = k.indices(size)
            length = len(range(start, stop, step))
            if length:
                offset += start * stride
            shape.append(length)
            strides.append(stride * step)
            # slice.indices() gives stop=-1 for a negative step that runs past the start;
            # re-applied, -1 would mean "the last element", so store None instead.
            key_stop = stop if stop >= 0 else None
            basic_key.append(slice(start, key_stop, step) if length else slice(0, 0, 1))
        else:  # an integer index tensor: keep the dim, gather afterwards
            advanced.append((len(shape), _index_tensor(k, x.device, "indexing")))
            shape.append(size)
            strides.append(stride)
            basic_key.append(slice(None))
        d += 1
    view = x
    if tuple(shape) != x.shape or offset != x._offset or tuple(strides) != x._strides:
        view = slice_view(x, tuple(shape), tuple(strides), offset, tuple(basic_key))
    if not advanced:
        return view
    if len(advanced) == 1:
        position, index = advanced[0]
        return take(view, position, index)
    return _multi_take(view, advanced)


def _multi_take(view: Tensor, advanced: list[tuple[int, Tensor]]) -> Tensor:
    """Several integer index tensors: broadcast them, combine into one linear index over
    the dims they cover (moved to the front when not adjacent, as NumPy does)."""
    positions = [p for p, _ in advanced]
    indices = [i for _, i in advanced]
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    if not adjacent:
        rest = [d for d in range(view.ndim) if d not in positions]
        view = view.permute(*(positions + rest))
        positions = list(range(len(positions)))
    shape = broadcast_shapes(*(i.shape for i in indices), op="indexing")
    sizes = [view.shape[p] for p in positions]
    linear = None
    for index, size, k in zip(indices, sizes, range(len(sizes))):
        _check_bounds(index, size, positions[k], "indexing")
        wrapped = where(index < 0, index + size, index).to(int64)
        term = wrapped * prod(sizes[k + 1 :])
        linear = term if linear is None else linear + term
    assert linear is not None
    merged = view.flatten(positions[0], positions[-1])
    return take(merged, positions[0], linear.expand(*shape))


# --- __setitem__ ---------------------------------------------------------------------------------
def setitem(x: Tensor, key: Any, value: Any) -> None:
    if autograd.is_grad_enabled() and (x.requires_grad or getattr(value, "requires_grad", False)):
        _recorded_setitem(x, key, value)
        return
    entries = _normalise_key(x, key)
    if (
        all(isinstance(k, int) for k in entries if k is not None)
        and len([k for k in entries if k is not None]) == x.ndim
    ):
        _check_scalar_access(x, "assigning to a single element")
    if any(isinstance(k, Tensor) for k in entries):
        _advanced_setitem(x, entries, value)
        return
    with autograd.no_grad():
        target = getitem(x, tuple(entries))
    if target.numel():
        copy_into(target, value, "indexing (assignment)")
    else:
        if isinstance(value, Tensor):  # nothing to write, but the value must still fit
            shape = broadcast_shapes(target.shape, value.shape, op="indexing (assignment)")
            if shape != target.shape:
                raise ShapeError(
                    f"indexing (assignment): a value of shape {format_shape(value.shape)} "
                    f"cannot be assigned to the {format_shape(target.shape)} selection"
                )
        x._storage.version += 1


def _recorded_setitem(x: Tensor, key: Any, value: Any) -> None:
    """``x[key] = value`` recorded by autograd, as PyTorch does: ``x``'s earlier values get
    a zero gradient where they were overwritten, ``value`` the gradient of the region
    (summed over its broadcasting)."""
    from .creation import zeros
    from .inplace import _check_autograd

    _check_autograd(x, (value,), "indexing (assignment)")  # refuses leaves and views
    previous = x.clone()  # recorded: the edge to what x held
    with autograd.no_grad():
        written = zeros(x.shape, dtype=bool_, device=x.device)
        setitem(written, key, True)
        result = previous.detach().clone()
        setitem(result, key, value.detach() if isinstance(value, Tensor) else value)

    def backward(g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        grad_value = getitem(g, key) if getattr(value, "requires_grad", False) else None
        return where(written, 0.0, g), grad_value

    autograd.record("setitem", (previous, value), result, backward)
    copy_into(x, result, "indexing (assignment)")
    x._node = result._node
    x.requires_grad = True


def _advanced_setitem(x: Tensor, entries: list[Any], value: Any) -> None:
    if x.device.type != "cpu":
        raise UnsupportedError(
            f"indexing: assignment through integer or boolean index tensors is not "
            f"implemented for {x.device} tensors yet; use `t = kg.where(mask, value, t)` for "
            "masks"
        )
    check_writable(x, "indexing (assignment)")
    key: list[Any] = []
    dim = 0
    for k in entries:
        if isinstance(k, Tensor):
            k = _index_tensor(k, x.device, "indexing")
            _check_bounds(k, x.shape[dim], dim, "indexing")
            k = k.numpy()
        elif isinstance(k, int) and not -x.shape[dim] <= k < x.shape[dim]:
            raise IndexingError(
                f"indexing: index {k} is out of bounds for dimension {dim} with size "
                f"{x.shape[dim]} (tensor of shape {format_shape(x.shape)})"
            )
        key.append(k)
        dim += k is not None
    broadcast_shapes(*(k.shape for k in key if isinstance(k, np.ndarray)), op="indexing")
    target = x.numpy()
    selected = target[tuple(key)].shape
    if isinstance(value, Tensor):
        value = value.cpu().numpy()
    value = np.asarray(value)
    if value.dtype.kind not in "biuf":
        raise DTypeError(
            f"indexing: cannot assign a value of NumPy dtype {value.dtype} into a "
            f"{x.dtype} tensor; give a number or a tensor"
        )
    broadcast_shapes(selected, value.shape, op="indexing (assignment)")
    if broadcast_shapes(selected, value.shape) != selected:
        raise ShapeError(
            f"indexing: cannot assign a value of shape {format_shape(value.shape)} to the "
            f"{format_shape(selected)} elements the index selects"
        )
    target[tuple(key)] = value
    x._storage.version += 1
