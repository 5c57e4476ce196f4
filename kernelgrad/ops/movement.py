"""Movement primitives: views that only change (shape, strides, offset) and never copy
(reshape when possible, permute, expand, squeeze/unsqueeze, slicing, unfold), plus the
copying ones (device transfer, pad, cat).

Each view records a VJP that maps the gradient back: reshape back, inverse permute,
sum over expanded dims, scatter into the slice of a zero tensor, and so on.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

from .. import autograd, tracing
from ..device import Device
from ..dtypes import result_type
from ..errors import ArgumentError, DeviceMismatchError, DTypeError, ShapeError, format_shape
from ..shapes import (
    infer_reshape,
    normalize_dim,
    normalize_dims,
    normalize_size,
    reshape_strides,
)
from ..tensor import Tensor
from . import register
from .elementwise import cast, copy_into

register("reshape", "movement", ("Tensor.reshape", "Tensor.view", "kg.reshape"), True)
register("permute", "movement", ("Tensor.permute", "Tensor.transpose", "kg.permute"), True)
register("expand", "movement", ("Tensor.expand", "Tensor.broadcast_to"), True)
register("slice", "movement", ("Tensor.__getitem__", "Tensor.narrow"), True)
register("unfold", "movement", ("Tensor.unfold",), True)
register("transfer", "movement", ("Tensor.to", "Tensor.cpu", "Tensor.cuda"), True)
register("pad", "movement", ("kg.ops.movement.pad",), True)
register("cat", "movement", ("kg.cat", "kg.stack"), True)


def make_view(x: Tensor, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Tensor:
    """A tensor sharing ``x``'s memory (no autograd recorded here).

    ``_base`` is the tensor that owns the memory; ``_base_node`` is the base's autograd
    node now (an in-place op on the view rebases the base, and a view whose base was
    rebased since gets a new history when next used: ``ops/inplace.py``). A view of a
    detached alias (``t.detach()`` of a view) is marked ``False``: not rebased."""
    view = Tensor._make(x._storage, tuple(shape), tuple(strides), offset, x.dtype)
    base = x._base
    if base is None:
        view._base = x
        view._base_node = x._node
    else:
        view._base = base
        view._base_node = getattr(x, "_base_node", False)
    return view


# --- reshape ------------------------------------------------------------------------------
def _shape_arg(shape: Sequence[Any], op: str) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if not hasattr(s, "__index__"):
            raise DTypeError(f"{op}: shape entries must be integers, got {s!r}")
    return tuple(int(s) for s in shape)


def _reshape_view(x: Tensor, new_shape: tuple[int, ...], strides: tuple[int, ...]) -> Tensor:
    result = make_view(x, new_shape, strides, x._offset)
    if autograd.needs_grad(x):
        old_shape = x._shape
        autograd.record("reshape", (x,), result, lambda g: (g.reshape(old_shape),), reusable=True)
    return result


def reshape(x: Tensor, shape: Sequence[Any]) -> Tensor:
    """A view with a new shape when the memory layout allows it, else a contiguous copy."""
    new_shape = infer_reshape(x._shape, _shape_arg(shape, "reshape"))
    if new_shape == x._shape:
        return x
    strides = reshape_strides(x._shape, x._strides, new_shape)
    if strides is None:
        x = x.clone()
        strides = reshape_strides(x._shape, x._strides, new_shape)
        assert strides is not None
    return _reshape_view(x, new_shape, strides)


def view(x: Tensor, shape: Sequence[Any]) -> Tensor:
    """Like reshape, but never copies: raises if the layout does not allow a view."""
    new_shape = infer_reshape(x._shape, _shape_arg(shape, "view"), op="view")
    if new_shape == x._shape:
        return x
    strides = reshape_strides(x._shape, x._strides, new_shape)
    if strides is None:
        raise ShapeError(
            f"view: a tensor of shape {format_shape(x._shape)} with strides {x._strides} "
            f"cannot be viewed as {format_shape(new_shape)} without copying (its elements "
            "are not laid out contiguously enough, e.g. after transpose or permute). Use "
            "`.reshape(...)`, which copies when it must, or call `.contiguous()` first."
        )
    return _reshape_view(x, new_shape, strides)


def view_dtype(x: Tensor, dtype: Any) -> Tensor:
    """The same memory read as ``dtype``: the bits are reinterpreted, nothing is copied
    or converted (PyTorch's ``Tensor.view(dtype)``; use ``.to(dtype)`` to convert values).

    With a larger element size the last dimension shrinks by the size ratio, which needs
    a last dimension of stride 1 whose size it divides, other strides and the offset
    divisible by it; with a smaller one it grows. The result shares the version counter
    of ``x`` and carries no gradient.

    >>> import kernelgrad as kg
    >>> kg.tensor([1.0]).view(kg.int32).tolist()
    [1065353216]
    >>> kg.tensor([1.0, 2.0]).view(kg.float64).shape
    kg.Size([1])
    """
    from ..dtypes import as_dtype
    from ..tensor import AliasStorage

    target = as_dtype(dtype)
    if target is x.dtype:
        return x
    _refuse_while_tracing("view(dtype)")
    old, new = x.dtype.itemsize, target.itemsize
    shape, strides, offset = list(x._shape), list(x._strides), x._offset
    if new != old:
        where = f"to view {x.dtype} as {target} (different element sizes)"
        if x.ndim == 0:
            raise ShapeError(f"view(dtype): a 0-d tensor has no last dimension {where}")
        if strides[-1] != 1:
            raise ShapeError(
                f"view(dtype): the last dimension must have stride 1 {where}, but the "
                f"tensor of shape {format_shape(x._shape)} has strides {x._strides}; call "
                "`.contiguous()` first"
            )
        if new > old:
            ratio = new // old
            checks = [("the last dimension's size", shape[-1]), ("the offset", offset)]
            checks += [(f"stride {d}", st) for d, st in enumerate(strides[:-1])]
            for what, value in checks:
                if value % ratio:
                    raise ShapeError(
                        f"view(dtype): {what} ({value}) must be divisible by {ratio} {where} "
                        f"(shape {format_shape(x._shape)}, strides {x._strides})"
                    )
            shape[-1] //= ratio
            strides = [st // ratio for st in strides[:-1]] + [1]
            offset //= ratio
        else:
            ratio = old // new
            shape[-1] *= ratio
            strides = [st * ratio for st in strides[:-1]] + [1]
            offset *= ratio
    buffer = x._storage.buffer
    usable = len(buffer) * old // new * new // old  # whole elements of the new dtype
    reinterpreted = buffer[:usable].view(target.numpy)
    root = x._storage.root if isinstance(x._storage, AliasStorage) else x._storage
    return Tensor._make(
        AliasStorage(reinterpreted, root), tuple(shape), tuple(strides), offset, target
    )


def _refuse_while_tracing(what: str) -> None:
    """Refuse an operation that kg.compile cannot replay while a trace runs on this
    thread."""
    tracing.refuse(
        f"kg.compile: {what} creates a second buffer object over a tensor's memory, "
        "which a replay cannot follow; do it outside the compiled function and pass the "
        "result in as an argument"
    )


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if x.ndim == 0:
        return x.reshape(1)
    start = normalize_dim(start_dim, x.ndim, "flatten")
    end = normalize_dim(end_dim, x.ndim, "flatten")
    if start > end:
        raise ShapeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = x._shape[:start] + (prod(x._shape[start : end + 1]),) + x._shape[end + 1 :]
    return reshape(x, (shape,))


def unflatten(x: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    d = normalize_dim(dim, x.ndim, "unflatten")
    inner = infer_reshape((x._shape[d],), tuple(sizes), op="unflatten")
    return reshape(x, (x._shape[:d] + inner + x._shape[d + 1 :],))


def squeeze(x: Tensor, dim: Any = None) -> Tensor:
    if dim is None:
        dims = {d for d, s in enumerate(x._shape) if s == 1}
    else:
        dims = {d for d in normalize_dims(dim, x.ndim, "squeeze") if x._shape[d] == 1}
    if not dims:
        return x
    shape = tuple(s for d, s in enumerate(x._shape) if d not in dims)
    strides = tuple(st for d, st in enumerate(x._strides) if d not in dims)
    return _reshape_view(x, shape, strides)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    d = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    stride = x._strides[d] * x._shape[d] if d < x.ndim else 1
    shape = x._shape[:d] + (1,) + x._shape[d:]
    strides = x._strides[:d] + (stride,) + x._strides[d:]
    return _reshape_view(x, shape, strides)


# --- permute ------------------------------------------------------------------------------
def permute(x: Tensor, dims: Sequence[Any]) -> Tensor:
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if len(dims) != x.ndim:
        raise ShapeError(
            f"permute: got {len(dims)} dims {tuple(dims)} for a tensor with {x.ndim} "
            f"dimensions (shape {format_shape(x._shape)}); give one entry per dimension"
        )
    order = tuple(normalize_dim(d, x.ndim, "permute") for d in dims)
    if sorted(order) != list(range(x.ndim)):
        raise ShapeError(f"permute: {tuple(dims)} is not a permutation of the dimensions")
    if order == tuple(range(x.ndim)):
        return x
    result = make_view(
        x,
        tuple(x._shape[d] for d in order),
        tuple(x._strides[d] for d in order),
        x._offset,
    )
    if autograd.needs_grad(x):
        inverse = [0] * len(order)
        for i, d in enumerate(order):
            inverse[d] = i
        autograd.record("permute", (x,), result, lambda g: (g.permute(*inverse),), reusable=True)
    return result


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    if x.ndim < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return x
    order = list(range(x.ndim))
    a = normalize_dim(dim0, x.ndim, "transpose")
    b = normalize_dim(dim1, x.ndim, "transpose")
    order[a], order[b] = order[b], order[a]
    return permute(x, order)


# --- expand ------------------------------------------------------------------------------------
def expand(x: Tensor, sizes: Sequence[Any]) -> Tensor:
    target = (
        normalize_size(sizes, "expand")
        if not any((hasattr(s, "__index__") and int(s) == -1) for s in _flat_sizes(sizes))
        else tuple(int(s) for s in _flat_sizes(sizes))
    )
    if len(target) < x.ndim:
        raise ShapeError(
            f"expand: the target shape {tuple(target)} has fewer dimensions than the tensor "
            f"{format_shape(x._shape)}"
        )
    lead = len(target) - x.ndim
    shape, strides = [], []
    for i, size in enumerate(target):
        if i < lead:
            if size < 0:
                raise ShapeError(f"expand: -1 is not allowed for new leading dimension {i}")
            shape.append(size)
            strides.append(0)
            continue
        own = x._shape[i - lead]
        if size == -1 or size == own:
            shape.append(own)
            strides.append(x._strides[i - lead])
        elif own == 1:
            shape.append(size)
            strides.append(0)
        else:
            raise ShapeError(
                f"expand: cannot expand a tensor of shape {format_shape(x._shape)} to "
                f"{tuple(target)}: dimension {i} has size {own}, which is not 1"
            )
    shape_t = tuple(shape)
    if shape_t == x._shape:
        return x
    result = make_view(x, shape_t, tuple(strides), x._offset)
    if autograd.needs_grad(x):
        source = x._shape
        autograd.record("expand", (x,), result, lambda g: (g.sum_to_shape(source),), reusable=True)
    return result


def _flat_sizes(sizes: Sequence[Any]) -> tuple[Any, ...]:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return tuple(sizes)


# --- slicing ---------------------------------------------------------------------------------
def slice_view(
    x: Tensor, shape: tuple[int, ...], strides: tuple[int, ...], offset: int, key: Any
) -> Tensor:
    """A basic-indexing view; ``key`` is the normalised basic index used for backward."""
    result = make_view(x, shape, strides, offset)
    if autograd.needs_grad(x):
        source_shape = x._shape

        def backward(g: Tensor) -> tuple[Tensor]:
            return (slice_backward(g, source_shape, key),)

        autograd.record("slice", (x,), result, backward, reusable=True)
    return result


def slice_backward(g: Tensor, shape: tuple[int, ...], key: Any) -> Tensor:
    """Zeros of ``shape`` with ``g`` written into the region ``key`` selects."""
    from .creation import zeros

    grad = zeros(shape, dtype=g.dtype, device=g.device)
    copy_into(grad[key], g)
    if autograd.needs_grad(g):
        autograd.record("slice_backward", (g,), grad, lambda gg: (gg[key],))
    return grad


def _needs_a_dim(x: Tensor, op: str) -> None:
    """Ops that work along a dimension refuse 0-d tensors (a 0-d tensor accepts dim 0
    elsewhere, as in PyTorch, but has no size to slice or split)."""
    if x.ndim == 0:
        raise ShapeError(
            f"{op}: a 0-d tensor has no dimension to work along; reshape it to 1-d first "
            "(`x.reshape(1)`)"
        )


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    _needs_a_dim(x, "narrow")
    d = normalize_dim(dim, x.ndim, "narrow")
    if start < 0:
        start += x._shape[d]
    if not (start >= 0 and start + length <= x._shape[d] and length >= 0):
        raise ShapeError(
            f"narrow: start {start} + length {length} exceeds dimension {d} of size {x._shape[d]}"
        )
    key = (slice(None),) * d + (slice(start, start + length),)
    return x[key]


def flip(x: Tensor, dims: Any) -> Tensor:
    """A copy of ``x`` reversed along ``dims`` (a copy, as PyTorch's: writing into the
    result must not change ``x``)."""
    axes = normalize_dims(dims, x.ndim, "flip")
    key = tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim))
    return x[key].clone()


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    _needs_a_dim(x, "chunk")
    d = normalize_dim(dim, x.ndim, "chunk")
    if chunks < 1:
        raise ArgumentError(f"chunk: the number of chunks must be positive, got {chunks}")
    if x._shape[d] == 0:
        return split(x, [0] * chunks, d)  # as PyTorch: `chunks` empty pieces
    size = -(-x._shape[d] // chunks)
    return split(x, size, d)


def split(x: Tensor, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
    _needs_a_dim(x, "split")
    d = normalize_dim(dim, x.ndim, "split")
    total = x._shape[d]
    if isinstance(split_size, int):
        if split_size < 0 or (split_size == 0 and total):
            raise ArgumentError(
                f"split: split_size must be positive (0 only for an empty dimension), got "
                f"{split_size} for dimension {d} of size {total}"
            )
        if total == 0:
            return (x,)
        sizes = [split_size] * (total // split_size)
        if total % split_size:
            sizes.append(total % split_size)
    else:
        sizes = list(split_size)
        if sum(sizes) != total or any(size < 0 for size in sizes):
            raise ShapeError(
                f"split: sizes {sizes} must be non-negative and add up to dimension {d}'s "
                f"size {total}"
            )
    parts, start = [], 0
    for size in sizes:
        parts.append(narrow(x, d, start, size))
        start += size
    return tuple(parts)


# --- unfold (sliding windows) -----------------------------------------------------------------
def unfold(x: Tensor, dim: int, size: int, step: int, dilation: int = 1) -> Tensor:
    """Sliding windows along ``dim`` as a new last dimension, without copying.

    ``x.unfold(2, kh, sh).unfold(3, kw, sw)`` on an (N, C, H, W) tensor gives the
    (N, C, OH, OW, kh, kw) patches of a convolution (im2col as a view).

    >>> import kernelgrad as kg
    >>> kg.arange(5).unfold(0, 2, 1).tolist()
    [[0, 1], [1, 2], [2, 3], [3, 4]]
    """
    _needs_a_dim(x, "unfold")
    d = normalize_dim(dim, x.ndim, "unfold")
    span = dilation * (size - 1) + 1
    if size < 1 or step < 1 or dilation < 1:
        raise ShapeError("unfold: size, step and dilation must be positive")
    if span > x._shape[d]:
        raise ShapeError(
            f"unfold: a window spanning {span} elements does not fit dimension {d} of size "
            f"{x._shape[d]} (shape {format_shape(x._shape)})"
        )
    count = (x._shape[d] - span) // step + 1
    shape = x._shape[:d] + (count,) + x._shape[d + 1 :] + (size,)
    strides = (
        x._strides[:d] + (x._strides[d] * step,) + x._strides[d + 1 :] + (x._strides[d] * dilation,)
    )
    result = make_view(x, shape, strides, x._offset)
    if autograd.needs_grad(x):
        source_shape = x._shape

        def backward(g: Tensor) -> tuple[Tensor]:
            return (unfold_backward(g, source_shape, d, size, step, dilation),)

        autograd.record("unfold", (x,), result, backward)
    return result


def unfold_backward(
    g: Tensor, shape: tuple[int, ...], dim: int, size: int, step: int, dilation: int
) -> Tensor:
    """Sum every window's gradient back onto the positions it covered (col2im)."""
    from .creation import zeros

    grad = zeros(shape, dtype=g.dtype, device=g.device)
    count = g._shape[dim]
    with autograd.no_grad():
        for k in range(size):
            start = k * dilation
            key = (slice(None),) * dim + (slice(start, start + (count - 1) * step + 1, step),)
            region = grad[key]
            window = g.detach()[(Ellipsis, k)]
            region._backend.elementwise(
                _add_scalar_fn(),
                [region._view()],
                [region._view(), window._view()],
                [grad.dtype, grad.dtype],
            )
    if autograd.needs_grad(g):
        autograd.record(
            "unfold_backward", (g,), grad, lambda gg: (unfold(gg, dim, size, step, dilation),)
        )
    return grad


def _add_scalar_fn():
    from .elementwise import ADD

    return ADD.scalar


# --- copies ------------------------------------------------------------------------------------
def transfer(x: Tensor, device: Device) -> Tensor:
    """Copy to another device (through host memory unless the backends offer better)."""
    from ..backends import get_backend

    target = get_backend(device)
    copy = getattr(target, "copy_from", None)
    buffer = copy(x) if copy is not None else None
    if buffer is None:
        buffer = target.from_numpy(x._backend.to_numpy(x._view()))
    result = Tensor._from_buffer(buffer, x._shape, x.dtype, device)
    if autograd.needs_grad(x):
        source = x.device
        autograd.record("transfer", (x,), result, lambda g: (transfer(g, source),), reusable=True)
    return result


def pad(x: Tensor, pads: Sequence[int], value: Any = 0) -> Tensor:
    """Constant padding; ``pads`` lists (before, after) pairs from the last dim backwards,
    as in ``torch.nn.functional.pad``.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.pad(kg.ones(2), (1, 2)).tolist()
    [0.0, 1.0, 1.0, 0.0, 0.0]
    """
    from .creation import full

    if len(pads) % 2 or len(pads) // 2 > x.ndim:
        raise ShapeError(
            f"pad: expected (before, after) pairs for at most {x.ndim} dims, got {tuple(pads)}"
        )
    shape = list(x._shape)
    key: list[Any] = [slice(None)] * x.ndim
    for i in range(len(pads) // 2):
        d = x.ndim - 1 - i
        before, after = pads[2 * i], pads[2 * i + 1]
        if before < 0 or after < 0:
            raise ShapeError("pad: negative padding is not supported; slice instead")
        shape[d] += before + after
        key[d] = slice(before, before + x._shape[d])
    result = full(tuple(shape), value, dtype=x.dtype, device=x.device)
    copy_into(result[tuple(key)], x)
    if autograd.needs_grad(x):
        region = tuple(key)
        autograd.record("pad", (x,), result, lambda g: (g[region],))
    return result


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join tensors along an existing dimension.

    >>> import kernelgrad as kg
    >>> kg.cat([kg.zeros(1, 2), kg.ones(2, 2)]).shape
    kg.Size([3, 2])
    """
    tensors = list(tensors)
    if not tensors:
        raise ArgumentError("cat: expected a non-empty list of tensors")
    first = tensors[0]
    _needs_a_dim(first, "cat")
    d = normalize_dim(dim, first.ndim, "cat")
    for i, t in enumerate(tensors):
        if t.device != first.device:
            raise DeviceMismatchError(
                f"cat: tensor 0 is on {first.device} but tensor {i} is on {t.device}; move "
                "them to one device first"
            )
        if t.ndim != first.ndim or any(
            a != b for k, (a, b) in enumerate(zip(t._shape, first._shape)) if k != d
        ):
            shapes = ", ".join(format_shape(u._shape) for u in tensors)
            raise ShapeError(
                f"cat: all tensors must have the same shape except in dimension {d}; got {shapes}"
            )
    dtype = result_type(*tensors)
    sizes = [t._shape[d] for t in tensors]
    shape = first._shape[:d] + (sum(sizes),) + first._shape[d + 1 :]
    result = Tensor._empty(shape, dtype, first.device)
    start = 0
    for t, size in zip(tensors, sizes):
        key = (slice(None),) * d + (slice(start, start + size),)
        copy_into(result[key], t if t.dtype is dtype else cast(t.detach(), dtype))
        start += size
    if autograd.needs_grad(*tensors):
        offsets = [sum(sizes[:i]) for i in range(len(sizes))]

        def backward(g: Tensor) -> list[Tensor]:
            return [g[(slice(None),) * d + (slice(o, o + s),)] for o, s in zip(offsets, sizes)]

        autograd.record("cat", tensors, result, backward, reusable=True)
    return result


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join tensors of equal shape along a new dimension."""
    tensors = list(tensors)
    if not tensors:
        raise ArgumentError("stack: expected a non-empty list of tensors")
    shapes = {t._shape for t in tensors}
    if len(shapes) > 1:
        listed = ", ".join(format_shape(t._shape) for t in tensors)
        raise ShapeError(f"stack: all tensors must have the same shape; got {listed}")
    d = normalize_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([t.unsqueeze(d) for t in tensors], d)


def repeat(x: Tensor, sizes: Sequence[Any]) -> Tensor:
    reps = _flat_sizes(sizes)
    if len(reps) < x.ndim:
        raise ShapeError(
            f"repeat: give at least one repeat count per dimension ({x.ndim}), got {reps}"
        )
    if any(not hasattr(r, "__index__") or int(r) < 0 for r in reps):
        raise ArgumentError(f"repeat: repeat counts must be non-negative integers, got {reps}")
    x = x.reshape((1,) * (len(reps) - x.ndim) + x._shape)
    # (a, b) repeated (r, s): expand to (r, a, s, b), then merge pairs.
    expanded_shape, view_shape = [], []
    for r, s in zip(reps, x._shape):
        expanded_shape += [r, s]
        view_shape.append(r * s)
    interleaved = x.reshape(tuple(v for s in x._shape for v in (1, s)))
    result = interleaved.expand(*expanded_shape).reshape(*view_shape)
    # PyTorch's repeat copies ("unlike expand()"); reshape returns a view where it can
    # (repeating only new leading dims, or nothing), which would alias x: stride 0
    # elements that in-place ops refuse, and writes to x showing through.
    return result.clone() if result._storage is x._storage else result


# --- as_strided ----------------------------------------------------------------------------------
def as_strided(x: Tensor, size: Any, stride: Any, storage_offset: Any = None) -> Tensor:
    """PyTorch's ``as_strided``: a view of the memory ``x`` views with the given sizes,
    strides and offset, all counted in elements of that memory (``storage_offset``
    defaults to ``x``'s own offset). Elements may be read more than once (a stride of 0,
    overlapping windows); their gradients add up.

    >>> import kernelgrad as kg
    >>> kg.arange(5.0).as_strided((3, 2), (1, 1)).tolist()
    [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]]
    """
    size = _shape_arg((size,), "as_strided")
    stride = _shape_arg((stride,), "as_strided")
    if len(size) != len(stride):
        raise ShapeError(
            f"as_strided: {len(size)} sizes {size} but {len(stride)} strides {stride}; give "
            "one stride per dimension"
        )
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise ArgumentError(
            f"as_strided: sizes and strides must not be negative (got sizes {size}, strides "
            f"{stride}); PyTorch refuses negative strides too: use `flip` for a reversed copy"
        )
    offset = x._offset if storage_offset is None else int(storage_offset)
    length = len(x._storage.buffer)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if prod(size) else offset - 1
    if offset < 0 or last >= length:
        raise ShapeError(
            f"as_strided: sizes {size}, strides {stride} and offset {offset} reach element "
            f"{max(last, offset)}, outside the memory this tensor views ({length} elements)"
        )
    view = make_view(x, size, stride, offset)
    if autograd.needs_grad(x):

        def backward(g: Tensor) -> tuple[Tensor]:
            # the gradient of every memory element the view reads (repeats add up), then
            # the elements x itself is made of
            from .creation import zeros
            from .indexing import index_add, take

            memory = zeros(length, dtype=g.dtype, device=g.device)
            read = _positions(size, stride, offset, g.device).reshape(-1)
            memory = index_add(memory, 0, read, g.reshape(-1))
            own = _positions(x._shape, x._strides, x._offset, g.device)
            return (take(memory, 0, own.reshape(-1)).reshape(x._shape),)

        autograd.record("as_strided", (x,), view, backward)
    return view


def _positions(
    shape: tuple[int, ...], strides: tuple[int, ...], offset: int, device: Any
) -> Tensor:
    """The memory position of each element of a view of this layout (int64, its shape)."""
    from ..dtypes import int64
    from .creation import arange, full

    positions = full(shape, offset, dtype=int64, device=device)
    for d, (n, s) in enumerate(zip(shape, strides)):
        steps = arange(n, device=device) * s
        positions = positions + steps.reshape((n,) + (1,) * (len(shape) - d - 1))
    return positions
