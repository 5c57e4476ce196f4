"""Indexing: ``__getitem__`` / ``__setitem__``, and the gather/scatter primitives.

Basic indices (integers, slices with any step including negative, ``None``, ``...``)
produce views. Integer tensors (or lists, or boolean masks) are *advanced* indices:
they gather with the ``take`` primitive, whose gradient is ``index_add`` (scatter-add).
Several advanced indices are combined into one linear index over the dims they cover,
so every gather is one ``take`` kernel.
"""

from __future__ import annotations

import threading
from math import prod
from typing import Any

import numpy as np

from .. import autograd, tracing
from ..backends import get_backend
from ..backends.base import ScalarFunction, View
from ..dtypes import bool_, int64
from ..errors import (
    ArgumentError,
    DeviceMismatchError,
    DTypeError,
    IndexingError,
    ShapeError,
    format_shape,
)
from ..shapes import broadcast_shapes, contiguous_strides, normalize_dim
from ..tensor import Tensor, _check_scalar_access
from . import register
from .elementwise import check_scalar_fits, check_writable, copy_into, where
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
        if (index == -value).any().item():
            value = -value  # the index as it was given
        raise IndexingError(
            f"{op}: index {value} is out of bounds for dimension {dim} with size {size}"
        )


# --- __getitem__ ---------------------------------------------------------------------------------
def _normalise_key(x: Tensor, key: Any, expand_masks: bool = True) -> list[Any]:
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
            if k.device != x.device and k.device.type == "cpu" and not k.requires_grad:
                # as PyTorch: host indices (or a host mask) for a device tensor are
                # copied to its device (a host-to-device copy, nothing read back)
                k = k.to(x.device)
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
    dim = 0
    for k in entries:
        if isinstance(k, Tensor) and k.dtype.is_bool:
            if k.ndim == 0:
                raise IndexingError(
                    "indexing: 0-d boolean masks are not supported; use `t[None]` or "
                    "`kg.where(mask, t, ...)`"
                )
            _check_mask_shape(k, x, dim)
        dim += _dims_indexed(k)
    return _expand_masks(entries, x.device) if expand_masks else entries


def _expand_masks(entries: list[Any], device: Any) -> list[Any]:
    """Boolean masks become integer indices (their positions), one per masked dim: one
    device-to-host read of each mask, as PyTorch's ``nonzero``."""
    if not any(isinstance(k, Tensor) and k.dtype.is_bool for k in entries):
        return entries
    backend = get_backend(device)
    expanded: list[Any] = []
    for k in entries:
        if isinstance(k, Tensor) and k.dtype.is_bool:
            for p in np.nonzero(k._host_copy()):
                buffer = backend.from_numpy(p.astype(np.int64))
                expanded.append(Tensor._from_buffer(buffer, p.shape, int64, device))
        else:
            expanded.append(k)
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


def _index_dims_at(ndim: int, advanced: list[tuple[int, Tensor]]) -> int:
    """Where the broadcast dims of several index tensors go in the result: after how
    many of the view's other dims (``ndim`` dims, the index tensors at the positions
    ``advanced`` names). PyTorch's rule, which is not NumPy's: an integer selects its
    dim first (it is no advanced index, so ``x[1, :, [1, 3]]`` of a (2, 3, 4) tensor is
    (3, 2), where NumPy gives (2, 3)), and so does a 0-d integer tensor; the index dims
    then stay where the index tensors are when these are adjacent, and go first
    otherwise."""
    positions = [p for p, _ in advanced]
    shaped = [p for p, index in advanced if index.ndim] or positions
    first, last = min(shaped), max(shaped)
    if any(d not in positions for d in range(first, last + 1)):
        return 0  # separated by a slice or None: in front, as in PyTorch and NumPy
    return sum(1 for d in range(first) if d not in positions)


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
        entries = _normalise_key(x, key)
    view, advanced = _split_key(x, entries)
    if not advanced:
        return view
    if len(advanced) == 1:
        position, index = advanced[0]
        return take(view, position, index)
    return _multi_take(view, advanced)


def _split_key(x: Tensor, entries: list[Any]) -> tuple[Tensor, list[tuple[int, Tensor]]]:
    """The basic part of a normalised key as a view of ``x`` (integer index tensors keep
    their dim), and the integer index tensors with their dims in that view."""
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
    return view, advanced


def _multi_take(view: Tensor, advanced: list[tuple[int, Tensor]]) -> Tensor:
    """Several integer index tensors: broadcast them, combine into one linear index over
    the dims they cover (placed as PyTorch places them, :func:`_index_dims_at`)."""
    positions = [p for p, _ in advanced]
    indices = [i for _, i in advanced]
    at = _index_dims_at(view.ndim, advanced)
    rest = [d for d in range(view.ndim) if d not in positions]
    order = rest[:at] + positions + rest[at:]
    if order != list(range(view.ndim)):
        view = view.permute(*order)
    positions = list(range(at, at + len(positions)))
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
def setitem(
    x: Tensor, key: Any, value: Any, op: str = "indexing", accumulate: bool = False
) -> None:
    """``x[key] = value`` (``op`` names the caller in errors; ``accumulate`` adds instead,
    for ``index_put_``, whose keys are index tensors)."""
    if autograd.is_grad_enabled() and (x.requires_grad or getattr(value, "requires_grad", False)):
        _recorded_setitem(x, key, value, op, accumulate)
        return
    entries = _normalise_key(x, key, expand_masks=False)
    if (
        all(isinstance(k, int) for k in entries if k is not None)
        and len([k for k in entries if k is not None]) == x.ndim
    ):
        _check_scalar_access(x, "assigning to a single element")
    if accumulate or any(isinstance(k, Tensor) for k in entries):
        _advanced_setitem(x, entries, value, accumulate, op)
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


def _recorded_setitem(
    x: Tensor, key: Any, value: Any, op: str = "indexing", accumulate: bool = False
) -> None:
    """``x[key] = value`` recorded by autograd, as PyTorch does: ``x``'s earlier values get
    a zero gradient where they were overwritten, ``value`` the gradient of the region
    (summed over its broadcasting). With ``accumulate`` (``index_put_``) the values are
    added instead, so ``x``'s earlier values keep their whole gradient."""
    from .creation import zeros
    from .inplace import _check_autograd, _commit

    _check_autograd(x, (value,), f"{op} (assignment)")  # refuses leaves, views of leaves
    if not accumulate and _assigns_itself(x, key, value):
        x._storage.version += 1  # `y[:, 0] += 1`: the view written back where it lies
        return
    previous = x.clone()  # recorded: the edge to what x held
    with autograd.no_grad():
        result = previous.detach().clone()
        plain = value.detach() if isinstance(value, Tensor) else value
        setitem(result, key, plain, op, accumulate)
        written = None
        if not accumulate:
            written = zeros(x.shape, dtype=bool_, device=x.device)
            setitem(written, key, True, op)

    def backward(g: Tensor) -> tuple[Tensor | None, Tensor | None]:
        grad_value = getitem(g, key) if getattr(value, "requires_grad", False) else None
        return (g if written is None else where(written, 0.0, g)), grad_value

    autograd.record("index_put" if accumulate else "setitem", (previous, value), result, backward)
    _commit(x, result, f"{op} (assignment)")  # through the base when x is a view


def _assigns_itself(x: Tensor, key: Any, value: Any) -> bool:
    """Whether ``x[key] = value`` writes a view into the very positions it views, its
    history up to date with their base: the second half of ``y[:, 0] += 1`` (Python's
    ``t = y[:, 0]; t += 1; y[:, 0] = t``), which changes no value and no gradient."""
    if not isinstance(value, Tensor) or value._storage is not x._storage:
        return False
    base = x if x._base is None else x._base
    if value._base is not base or getattr(value, "_base_node", False) is not base._node:
        return False
    entries = _normalise_key(x, key, expand_masks=False)
    if any(isinstance(k, Tensor) for k in entries):
        return False
    with autograd.no_grad():
        target = getitem(x, tuple(entries))
    return (
        target.shape == value.shape
        and target._strides == value._strides
        and target._offset == value._offset
    )


def _assigned_value(x: Tensor, value: Any, op: str) -> Tensor:
    """The value of an advanced assignment as a tensor of ``x``'s dtype on its device.

    As PyTorch: numbers and 0-d tensors are converted (a 0-d tensor may come from any
    device), a tensor with dims must already have ``x``'s dtype and device."""
    from .creation import full, tensor

    if not isinstance(value, Tensor):
        if isinstance(value, (list, tuple, np.ndarray)):
            value = tensor(value, device=x.device)
            if value.dtype != x.dtype:
                value = value.to(x.dtype)
            return value
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (bool, int, float)):
            raise DTypeError(
                f"{op}: cannot assign a value of type {type(value).__name__} into a "
                f"{x.dtype} tensor; give a number or a tensor"
            )
        return full((), value, dtype=x.dtype, device=x.device)
    if value.ndim == 0:
        if value.device != x.device:
            value = value.to(x.device)
        return value if value.dtype == x.dtype else value.to(x.dtype)
    if value.device != x.device:
        raise DeviceMismatchError(
            f"{op}: the value is on {value.device} but the tensor written to is on "
            f"{x.device}; move it with `.to({str(x.device)!r})` (only a 0-d value may come "
            "from another device)"
        )
    if value.dtype != x.dtype:
        raise DTypeError(
            f"{op}: the value has dtype {value.dtype} but the tensor written to has "
            f"{x.dtype} (PyTorch requires them to match); convert it with "
            f"`value.to({x.dtype})`"
        )
    return value


def _advanced_setitem(
    x: Tensor, entries: list[Any], value: Any, accumulate: bool = False, op: str = "indexing"
) -> None:
    """``x[entries] = value`` (or ``+=`` with ``accumulate``) in place, outside autograd,
    on any device: one ``put_kernel`` launch (``_index_put_kernel.py``), or the backend's
    ``index_add`` when accumulating; ``t[mask] = v`` with ``v`` independent of the number
    of selected elements is ``where(mask, v, t)`` written back, with no device read."""
    check_writable(x, f"{op} (assignment)")
    for k in entries:
        if isinstance(k, Tensor) and k.device != x.device:
            _index_tensor(k, x.device, op)  # raises, naming the fix
    if not accumulate and _plain_number(x, value, op) and _masked_write(x, entries, value, op):
        return
    value = _assigned_value(x, value, f"{op} (assignment)")
    if accumulate and x.dtype is bool_:  # adding booleans is "or", as in PyTorch
        counts = x.long()
        _advanced_setitem(counts, entries, value.long(), True, op)
        copy_into(x, counts != 0, f"{op} (assignment)")
        return
    if not accumulate and _masked_write(x, entries, value, op):
        return
    entries = _expand_masks(entries, x.device)
    with autograd.no_grad():
        view, advanced = _split_key(x, entries)
        dims = [d for d, _ in advanced]
        indices = [i for _, i in advanced]
        index_shape = broadcast_shapes(*(i.shape for i in indices), op=op)
        at = _index_dims_at(view.ndim, advanced)  # as getitem places them
        rest = [d for d in range(view.ndim) if d not in dims]
        lead, trail = rest[:at], rest[at:]
        selected = (
            tuple(view.shape[d] for d in lead) + index_shape + tuple(view.shape[d] for d in trail)
        )
        if broadcast_shapes(selected, value.shape, op=f"{op} (assignment)") != selected:
            raise ShapeError(
                f"{op} (assignment): a value of shape {format_shape(value.shape)} cannot be "
                f"assigned to the {format_shape(selected)} elements the index selects"
            )
        if not prod(selected):  # nothing to write, but the indices must still fit
            for d, index in advanced:
                _check_bounds(index, view.shape[d], d, op)
        else:
            rest = _rest_offsets(view, lead, trail)
            n_trail = prod(view.shape[d] for d in trail)
            if accumulate:
                expanded = value.expand(selected)
                _accumulate(x, view, advanced, index_shape, rest, n_trail, expanded, op)
            else:
                _put(x, view, advanced, index_shape, rest, n_trail, value, selected, op)
    x._storage.version += 1


def _plain_number(x: Tensor, value: Any, op: str) -> bool:
    """Whether ``value`` is a Python number that mixes with ``x`` without changing its
    dtype (a float into a float tensor, an int into an integer one, a bool into a bool
    one), so ``where`` may take it as it is."""
    kind = type(value)
    if kind is float or kind is int:
        if x.dtype.is_floating_point:
            return True
        if kind is int and not x.dtype.is_bool:
            check_scalar_fits(value, x.dtype, f"{op} (assignment)")
            return True
        return False
    return kind is bool and x.dtype.is_bool


def _masked_write(x: Tensor, entries: list[Any], value: Any, op: str) -> bool:
    """``x[..., mask, ...] = value`` as ``where``, when the key is one boolean mask among
    slices and ``None`` and ``value`` does not depend on how many elements the mask
    selects (a number, or a tensor of size 1 along the selected dim). Returns False to
    leave every other case to the general path."""
    tensors = [k for k in entries if isinstance(k, Tensor)]
    if len(tensors) != 1 or not tensors[0].dtype.is_bool:
        return False
    if any(isinstance(k, int) for k in entries):
        return False
    mask = tensors[0]
    position = next(k for k, entry in enumerate(entries) if entry is mask)
    # Only slices and None around the mask: each gives one dim of the view.
    before, after = position, len(entries) - position - 1
    if not isinstance(value, Tensor):
        pass
    elif value.ndim > after:
        if value.shape[value.ndim - after - 1] != 1:
            return False  # one value per selected element: the general path
        head = value.shape[: value.ndim - after - 1]
        tail = value.shape[value.ndim - after :]
        value = value.reshape(head + (1,) * mask.ndim + tail)
    basic = entries[:position] + [slice(None)] * mask.ndim + entries[position + 1 :]
    with autograd.no_grad():
        view = getitem(x, tuple(basic))
    shape = getattr(value, "shape", ())
    if broadcast_shapes(view.shape, shape, op=f"{op} (assignment)") != view.shape:
        return False  # the general path names the shapes
    placed = mask
    if before or after:
        placed = mask.reshape((1,) * before + mask.shape + (1,) * after)
    copy_into(view, where(placed, value, view), f"{op} (assignment)")
    return True


_REST_CACHE: dict[Any, Tensor] = {}


def _rest_offsets(view: Tensor, lead: list[int], trail: list[int]) -> Tensor:
    """The storage offsets of the basic dims of a selection, ``(lead..., trail...)``
    flattened: metadata only, computed on the host and cached per layout and device."""
    key = (
        view._offset,
        tuple((view.shape[d], view._strides[d]) for d in lead),
        tuple((view.shape[d], view._strides[d]) for d in trail),
        view.device,
    )
    rest = _REST_CACHE.get(key)
    if rest is None:
        from .creation import tensor

        offsets = np.full((1,) * (len(lead) + len(trail)), view._offset, dtype=np.int64)
        for k, d in enumerate(lead + trail):
            shape = [1] * (len(lead) + len(trail))
            shape[k] = view.shape[d]
            offsets = offsets + (np.arange(view.shape[d]) * view._strides[d]).reshape(shape)
        rest = tensor(offsets.reshape(-1).astype(np.int64), device=view.device)
        if len(_REST_CACHE) >= 4096:
            _REST_CACHE.clear()
        _REST_CACHE[key] = rest
    return rest


def _storage_flat(x: Tensor) -> Tensor:
    """``x``'s whole storage as a 1-d tensor (the positions written are storage offsets)."""
    buffer = x._storage.buffer
    return Tensor._make(x._storage, (int(buffer.shape[0]),), (1,), 0, x.dtype)


def _combined_offsets(
    view: Tensor, advanced: list[tuple[int, Tensor]], index_shape: tuple[int, ...], op: str
) -> Tensor:
    """The storage-offset contribution of several index tensors (checked, wrapped,
    broadcast), one per element of ``index_shape``."""
    total = None
    for d, index in advanced:
        size = view.shape[d]
        _check_bounds(index, size, d, op)
        term = where(index < 0, index + size, index).to(int64) * view._strides[d]
        total = term if total is None else total + term
    assert total is not None
    return total.expand(index_shape).contiguous().reshape(-1)


class _Flags(threading.local):
    """Each thread's zeroed error flag per device, reused by the next launch (a flag
    that reported an error is zeroed again before the error is raised)."""

    def __init__(self) -> None:
        self.by_device: dict[Any, Tensor] = {}


_FLAGS = _Flags()


def _error_flag(device: Any, make_error: Any) -> tuple[Tensor, Any]:
    """A two-element int64 flag a kernel reports a bad index into, and the function
    that raises ``make_error(value)`` for it: read at once, or, on a backend with
    ``error_slot`` (CUDA), at its next device-to-host read (no wait for the device)."""
    from .creation import zeros

    recorder = tracing.active_recorder()
    if recorder is not None:
        return traced_error_flag(recorder, device, make_error)
    slot = getattr(get_backend(device), "error_slot", None)
    if slot is None:
        flag = _FLAGS.by_device.get(device)
        if flag is None:
            flag = _FLAGS.by_device[device] = zeros(2, dtype=int64, device=device)

        def check() -> None:
            bad, found = flag._host_copy().tolist()
            if found:
                copy_into(flag, 0)
                raise make_error(bad)

        return flag, check
    buffer, check = slot(make_error)
    return Tensor._from_buffer(buffer, (2,), int64, device), check


def traced_error_flag(recorder: Any, device: Any, make_error: Any) -> tuple[Tensor, Any]:
    """An error flag while kg.compile traces: a zeroed flag that is a constant of the
    plan, and a check recorded as a host operation (``recorder.host_op``) that keeps it
    zero for the next call, so that a replay raises the launch's own error, as the eager
    call does, instead of a guard's "the value differs" error. On the CPU the check reads
    the flag (and zeroes it when it reports an error). On a backend with ``error_slot``
    (CUDA) one kernel moves the flag into a slot of the backend's table and zeroes it:
    the error comes at the next device-to-host read, and a replay does not wait for the
    device in the middle of a step."""
    from .creation import tensor

    flag = tensor(np.zeros(2, dtype=np.int64), dtype=int64, device=device)
    recorder.persist(flag)  # one flag for every replay, kept zero by report()

    def report(tensors: list[Tensor]) -> None:
        (flag,) = tensors
        slot = getattr(flag._storage.backend, "error_slot", None)
        if slot is None:
            bad, found = flag._host_copy().tolist()
            if found:
                copy_into(flag, 0)
                raise make_error(bad)
            return
        buffer, after = slot(make_error)
        target = Tensor._from_buffer(buffer, (2,), int64, flag.device)
        view = flag._view()
        flag._storage.backend.elementwise(
            _MOVE_AND_ZERO, [target._view(), view], [view, 0], [int64, int64]
        )
        after()

    return flag, lambda: recorder.host_op("error check", report, [flag], written=[0])


# (flag, 0) -> (slot, flag): the flag's value moved into the slot, the flag zeroed
_MOVE_AND_ZERO = ScalarFunction(
    "move_and_zero", "def move_and_zero(x, z):\n    return x, z\n", 2, 2
)


def _flat(t: Tensor) -> Tensor:
    """``t`` as a 1-d contiguous tensor (a view when ``t`` is contiguous), no autograd."""
    if not t.is_contiguous():
        t = t.contiguous()
    return Tensor._make(t._storage, (t.numel(),), (1,), t._offset, t.dtype)


_put_kernel: Any = None  # ``_index_put_kernel.put_kernel``, imported on first use


def _put(
    x: Tensor,
    view: Tensor,
    advanced: list[tuple[int, Tensor]],
    index_shape: tuple[int, ...],
    rest: Tensor,
    n_trail: int,
    value: Tensor,
    selected: tuple[int, ...],
    op: str,
) -> None:
    """Write ``value`` (broadcast to ``selected``) at the selection: one kernel launch,
    which checks and wraps a single index tensor itself."""
    global _put_kernel
    if _put_kernel is None:
        from ._index_put_kernel import put_kernel as _put_kernel
    if len(advanced) == 1:
        d, index = advanced[0]
        size, stride = view.shape[d], view._strides[d]
        index = _flat(index)
    else:  # checked and combined into storage offsets first
        d, size, stride = -1, 0, 1
        index = _combined_offsets(view, advanced, index_shape, op)
    if value._storage is x._storage:
        value = value.clone()  # read while x is written
    if value.numel() == 1:
        values, vstep = _flat(value), 0
    else:
        values, vstep = _flat(value if value.shape == selected else value.expand(selected)), 1
    flag, check = _error_flag(
        x.device,
        lambda bad: IndexingError(
            f"{op}: index {bad} is out of bounds for dimension {d} with size {size} "
            f"(tensor of shape {format_shape(view.shape)})"
        ),
    )
    _put_kernel(
        _storage_flat(x),
        rest,
        index,
        size,
        stride,
        values,
        vstep,
        prod(index_shape),
        n_trail,
        flag,
        ndrange=prod(selected),
    )
    check()


def _accumulate(
    x: Tensor,
    view: Tensor,
    advanced: list[tuple[int, Tensor]],
    index_shape: tuple[int, ...],
    rest: Tensor,
    n_trail: int,
    value: Tensor,
    op: str,
) -> None:
    """Add ``value`` (already of the selection's shape) at the selection with the
    backend's ``index_add`` over the storage: repeated positions add up. One index into
    a contiguous view is ``index_add`` along its dim directly (the backend checks it)."""
    if value._storage is x._storage:
        value = value.clone()
    if len(advanced) == 1 and view.is_contiguous():
        d, index = advanced[0]
        shape = view.shape[:d] + (prod(index_shape),) + view.shape[d + 1 :]
        source = _flat(value)
        source_view = View(
            source._storage.buffer, shape, contiguous_strides(shape), source._offset, x.dtype
        )
        bad = x._backend.index_add(view._view(), d, _flat(index)._view(), source_view)
        if bad is not None:
            raise IndexingError(
                f"{op}: index {bad} is out of bounds for dimension {d} with size "
                f"{view.shape[d]} (tensor of shape {format_shape(view.shape)})"
            )
        return
    offsets = _combined_offsets(view, advanced, index_shape, op)
    n_index = prod(index_shape)
    n_lead = rest.numel() // n_trail
    positions = (rest.reshape(n_lead, 1, n_trail) + offsets.reshape(1, n_index, 1)).reshape(-1)
    source = _flat(value)
    bad = x._backend.index_add(_storage_flat(x)._view(), 0, positions._view(), source._view())
    if bad is not None:  # pragma: no cover - the indices were checked above
        raise IndexingError(f"{op}: storage offset {bad} is out of bounds")


# --- index_put_, index_copy_, index_fill_, masked_scatter_ ----------------------------------------
def index_put_(x: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """``x[indices] = values`` in place, ``indices`` a tuple of index tensors (integer or
    boolean); with ``accumulate=True`` the values are added, and repeated positions add
    up (assignment to a repeated position keeps one of its values, as in PyTorch).

    >>> import kernelgrad as kg
    >>> kg.zeros(3).index_put_((kg.tensor([0, 0, 2]),), kg.tensor(1.0), accumulate=True).tolist()
    [2.0, 0.0, 1.0]
    """
    if not isinstance(indices, (tuple, list)):
        raise ArgumentError(
            f"index_put_: indices must be a tuple of index tensors, got "
            f"{type(indices).__name__}; write `(index,)` for one"
        )
    for k, index in enumerate(indices):
        if not isinstance(index, Tensor):
            raise ArgumentError(
                f"index_put_: indices[{k}] is a {type(index).__name__}, not a tensor; give "
                "integer or boolean index tensors (for slices use `x[key] = values`)"
            )
    if len(indices) == 0:
        raise ArgumentError("index_put_: give at least one index tensor")
    setitem(x, tuple(indices), values, "index_put_", bool(accumulate))
    return x


def index_put(x: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:
    """The out-of-place :func:`index_put_`: a copy of ``x`` with the values written."""
    return index_put_(x.clone(), indices, values, accumulate)


def _index_along(x: Tensor, dim: int, index: Any, op: str) -> tuple[int, Tensor]:
    """``dim`` normalised and ``index`` as a 1-d integer tensor on ``x``'s device."""
    if x.ndim == 0:
        raise ShapeError(f"{op}: the tensor is 0-d; index a tensor with dims (e.g. `x.reshape(1)`)")
    d = normalize_dim(dim, x.ndim, op)
    index = _index_tensor(index, x.device, op)
    if index.ndim > 1:
        raise IndexingError(
            f"{op}: the index must have 0 or 1 dims, got shape {format_shape(index.shape)}; "
            "flatten it with `index.reshape(-1)`"
        )
    return d, index.reshape(-1)


def index_copy_(x: Tensor, dim: int, index: Any, source: Tensor) -> Tensor:
    """Copy the slices of ``source`` along ``dim`` into ``x`` at the positions ``index``
    names: ``x[..., index[i], ...] = source[..., i, ...]``.

    >>> import kernelgrad as kg
    >>> kg.zeros(3).index_copy_(0, kg.tensor([2, 0]), kg.tensor([5.0, 6.0])).tolist()
    [6.0, 0.0, 5.0]
    """
    d, index = _index_along(x, dim, index, "index_copy_")
    if not isinstance(source, Tensor):
        raise ArgumentError(f"index_copy_: source must be a tensor, got {type(source).__name__}")
    if source.dtype != x.dtype:
        raise DTypeError(
            f"index_copy_: the source has dtype {source.dtype} but the tensor has {x.dtype}; "
            f"convert it with `source.to({x.dtype})`"
        )
    expected = x.shape[:d] + (index.numel(),) + x.shape[d + 1 :]
    if source.ndim == 0 and index.numel() == 1 and x.ndim == 1:
        source = source.reshape(1)
    if source.shape != expected:
        raise ShapeError(
            f"index_copy_: the source has shape {format_shape(source.shape)}, expected "
            f"{format_shape(expected)}: the tensor's shape with dim {d} the number of "
            f"indices ({index.numel()})"
        )
    setitem(x, (slice(None),) * d + (index,), source, "index_copy_")
    return x


def index_copy(x: Tensor, dim: int, index: Any, source: Tensor) -> Tensor:
    """The out-of-place :func:`index_copy_`."""
    return index_copy_(x.clone(), dim, index, source)


def index_fill_(x: Tensor, dim: int, index: Any, value: Any) -> Tensor:
    """Set every element of the slices ``index`` names along ``dim`` to ``value`` (a
    number or a 0-d tensor).

    >>> import kernelgrad as kg
    >>> kg.zeros(2, 3).index_fill_(1, kg.tensor([0, 2]), 7.0).tolist()
    [[7.0, 0.0, 7.0], [7.0, 0.0, 7.0]]
    """
    d, index = _index_along(x, dim, index, "index_fill_")
    if isinstance(value, Tensor) and value.ndim != 0:
        raise ShapeError(
            f"index_fill_: the value must be a number or a 0-d tensor, got shape "
            f"{format_shape(value.shape)}"
        )
    setitem(x, (slice(None),) * d + (index,), value, "index_fill_")
    return x


def index_fill(x: Tensor, dim: int, index: Any, value: Any) -> Tensor:
    """The out-of-place :func:`index_fill_`."""
    return index_fill_(x.clone(), dim, index, value)


def _scatter_mask(x: Tensor, mask: Any, op: str) -> Tensor:
    if not isinstance(mask, Tensor) or not mask.dtype.is_bool:
        raise DTypeError(
            f"{op}: the mask must be a boolean tensor, got "
            f"{getattr(mask, 'dtype', type(mask).__name__)}; use `mask.bool()` or a comparison"
        )
    if mask.device != x.device:
        raise DeviceMismatchError(
            f"{op}: the mask is on {mask.device} but the tensor is on {x.device}; move it "
            f"with `.to({str(x.device)!r})`"
        )
    if broadcast_shapes(x.shape, mask.shape, op=op) != x.shape:
        raise ShapeError(
            f"{op}: the mask of shape {format_shape(mask.shape)} does not broadcast to the "
            f"tensor's shape {format_shape(x.shape)}"
        )
    return mask.expand(x.shape)


def masked_scatter_(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """Copy the elements of ``source``, in order, into ``x`` where ``mask`` is true
    (``mask`` broadcasts to ``x``; ``source`` needs at least as many elements as the mask
    selects). Reads the number of selected elements to the host, as PyTorch does.

    >>> import kernelgrad as kg
    >>> x = kg.zeros(4)
    >>> x.masked_scatter_(kg.tensor([True, False, True, False]), kg.tensor([1.0, 2.0])).tolist()
    [1.0, 0.0, 2.0, 0.0]
    """
    mask = _scatter_mask(x, mask, "masked_scatter_")
    if not isinstance(source, Tensor):
        raise ArgumentError(
            f"masked_scatter_: source must be a tensor, got {type(source).__name__}"
        )
    if source.dtype != x.dtype:
        raise DTypeError(
            f"masked_scatter_: the source has dtype {source.dtype} but the tensor has "
            f"{x.dtype}; convert it with `source.to({x.dtype})`"
        )
    if source.device != x.device:
        raise DeviceMismatchError(
            f"masked_scatter_: the source is on {source.device} but the tensor is on "
            f"{x.device}; move it with `.to({str(x.device)!r})`"
        )
    count = int(mask.sum().item()) if x.ndim else int(mask.item())
    if source.numel() < count:
        raise ShapeError(
            f"masked_scatter_: the mask selects {count} elements but the source has only "
            f"{source.numel()}; give a source with at least {count} elements"
        )
    if x.ndim == 0:
        if count:
            setitem(x, (), source.reshape(-1)[0], "masked_scatter_")
        return x
    setitem(x, mask, source.reshape(-1)[:count], "masked_scatter_")
    return x


def masked_scatter(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """The out-of-place :func:`masked_scatter_` (``x`` and ``mask`` broadcast together)."""
    shape = broadcast_shapes(x.shape, getattr(mask, "shape", ()), op="masked_scatter")
    return masked_scatter_(x.expand(shape).clone(), mask, source)
