"""In-place operations (``add_``, ``x += y``, ``fill_``, ``copy_``, ...).

Without autograd involvement they write straight into the tensor's memory (no new
buffer) and bump its storage version. When autograd is involved:

* a leaf that requires grad cannot be changed in place (that would lose the value its
  gradient is defined at): do parameter updates under ``kg.no_grad()``; nor can a view
  of one (``w[0].add_(1)``, ``w.T.mul_(2)``);
* an intermediate result can: the operation is recorded out of place and the tensor's
  history is rebased onto it, as PyTorch does. Tensors saved for backward that the
  write overwrote are caught by the version check at backward time.
* so can a view ``v`` of such a tensor (or of a tensor that requires no grad, written
  with a value that does: ``buf[0] += w``), as PyTorch's ``CopySlices``: the result
  ``r = op(v, ...)`` is recorded out of place and written at ``v``'s positions, the
  base's history is rebased onto a ``copy_slices`` node (its gradient goes to the base's
  old history with ``v``'s region zeroed, and ``v``'s region of it to ``r``), and ``v``
  becomes a view of the base's new history (``as_strided``). Other views of the base
  made earlier get the same new history when they are next used (``refresh``). The
  base must fill a dense block of memory (a permutation of a contiguous layout), which
  every tensor that views make is, except those of ``expand``-like layouts.

``y[:, 0] += 1`` is Python's ``t = y[:, 0]; t += 1; y[:, 0] = t``: the ``+=`` rebases
``y`` through the view, and the assignment of ``t`` (the same memory) back into the
same positions changes nothing and records nothing (``indexing._recorded_setitem``).
"""

from __future__ import annotations

from typing import Any

from .. import autograd
from ..dtypes import bool_
from ..errors import DTypeError, InplaceError, ShapeError, format_shape
from ..shapes import broadcast_shapes
from ..tensor import Tensor
from .elementwise import (
    ElementwiseOp,
    _overlaps,
    _plan_key,
    apply,
    apply_into,
    check_writable,
    clamp,
    copy_into,
    where,
)

# apply's cache keys (elementwise._plan_key, with x as the output) whose in-place shape and
# dtype checks passed
_CHECKED: set[tuple] = set()


def _check_autograd(x: Tensor, others: tuple[Any, ...], op_name: str) -> bool:
    """True when the in-place op must be recorded in the graph."""
    if not autograd.is_grad_enabled():
        return False
    involved = x.requires_grad or any(getattr(o, "requires_grad", False) for o in others)
    if not involved:
        return False
    if x.requires_grad and x._node is None:
        raise InplaceError(
            f"{op_name}: a leaf tensor that requires grad (a parameter) cannot be modified "
            "in place while gradients are being recorded. Wrap the update in `with "
            "kg.no_grad():` (as optimizers do), or use an out-of-place op."
        )
    if x._base is not None:
        marker = getattr(x, "_base_node", _NOT_MADE_BY_A_VIEW)
        if marker is False:
            raise InplaceError(
                f"{op_name}: this tensor is a view of a detached tensor (`t.detach()` or "
                "`t.data` of a view), whose in-place change autograd cannot follow. Use the "
                "out-of-place form (e.g. `v = v + w`), or `.clone()` the detached tensor "
                "first."
            )
        if marker is not _NOT_MADE_BY_A_VIEW:  # a detached alias is rebased on its own
            _check_view(x, op_name)
    return True


_NOT_MADE_BY_A_VIEW = object()


def _check_view(view: Tensor, op_name: str) -> None:
    """Refuse an in-place op on ``view`` that autograd cannot record through its base
    (before anything is written)."""
    base = view._base
    if base.requires_grad and base._node is None:
        raise InplaceError(
            f"{op_name}: this tensor is a view of a leaf tensor that requires grad (a "
            f"parameter of shape {format_shape(base.shape)}), which cannot be modified in "
            "place while gradients are being recorded (PyTorch refuses it too). Wrap the "
            "update in `with kg.no_grad():` (as optimizers do), or use an out-of-place op "
            "(e.g. `w2 = w.clone(); w2[0] += 1`)."
        )
    geometry = _geometry(base, view, op_name)  # raises for a base not filling dense memory
    if view._base_node is not base._node:  # the base changed since: its history first
        _view_of(view, base, geometry)
    elif base.requires_grad and not view.requires_grad:
        raise InplaceError(
            f"{op_name}: this view was made under `kg.no_grad()` from a tensor that "
            "requires grad, so its values are not followed by autograd, and changing it in "
            "place with a value that requires grad would give the base a wrong gradient "
            "(PyTorch refuses it too). Take the view outside `kg.no_grad()`, or make the "
            "change under `kg.no_grad()`."
        )


# --- in-place ops on views under autograd (PyTorch's CopySlices) ------------------------------
class _Geometry:
    """Where a view's elements sit inside its base: the base's shape and strides (a
    dense layout, numel consecutive slots from the base's offset) and the view's shape,
    strides and offset relative to the base's first slot."""

    __slots__ = ("base_shape", "base_strides", "numel", "offset", "shape", "strides")

    def __init__(self, base: Tensor, view: Tensor) -> None:
        self.base_shape = base.shape
        self.base_strides = base._strides
        self.numel = base.numel()
        self.shape = view.shape
        self.strides = view._strides
        self.offset = view._offset - base._offset


def _geometry(base: Tensor, view: Tensor, op_name: str) -> _Geometry:
    """The geometry of ``view`` in ``base``; InplaceError when the base does not fill a
    dense block of memory (its strides are not a permutation of contiguous strides)."""
    geometry = _Geometry(base, view)
    if geometry.numel == 0 or view.numel() == 0:
        return geometry
    dims = sorted(((st, n) for n, st in zip(base.shape, base._strides) if n != 1), reverse=True)
    expected = 1
    dense = True
    for stride, size in reversed(dims):
        if stride != expected:
            dense = False
            break
        expected *= size
    low = high = geometry.offset
    for size, stride in zip(view.shape, view._strides):
        if stride > 0:
            high += (size - 1) * stride
        else:
            low += (size - 1) * stride
    if not dense or low < 0 or high >= geometry.numel:
        raise InplaceError(
            f"{op_name}: this tensor is a view of a tensor of shape "
            f"{format_shape(base.shape)} with strides {base._strides}, whose elements do not "
            "fill one dense block of memory, so autograd cannot record an in-place change "
            "through the view. Make the base contiguous before taking the view (`y = "
            "y.contiguous()`), or use the out-of-place form."
        )
    return geometry


def _region(grad: Tensor, geometry: _Geometry) -> Tensor:
    """The elements of ``grad`` (shaped like the base) at the view's positions, shaped like
    the view (differentiable: its gradient is :func:`_embed`)."""
    from .creation import empty
    from .movement import make_view

    if grad.shape == geometry.base_shape and grad._strides == geometry.base_strides:
        source = grad  # already laid out as the base: the region is a view of it
        offset = grad._offset + geometry.offset
    else:
        source = empty(geometry.numel, dtype=grad.dtype, device=grad.device)
        copy_into(make_view(source, geometry.base_shape, geometry.base_strides, 0), grad.detach())
        offset = geometry.offset
    region = make_view(source, geometry.shape, geometry.strides, offset)
    if autograd.needs_grad(grad):
        autograd.record("as_strided", (grad,), region, lambda g: (_embed(g, geometry),))
    return region


def _embed(values: Tensor, geometry: _Geometry) -> Tensor:
    """A tensor shaped (and laid out) like the base: ``values`` at the view's positions,
    zeros elsewhere (differentiable: its gradient is :func:`_region`)."""
    from .creation import zeros
    from .movement import make_view

    flat = zeros(geometry.numel, dtype=values.dtype, device=values.device)
    copy_into(make_view(flat, geometry.shape, geometry.strides, geometry.offset), values.detach())
    result = make_view(flat, geometry.base_shape, geometry.base_strides, 0)
    result._base = None  # owns the new buffer
    if autograd.needs_grad(values):
        autograd.record("as_strided_backward", (values,), result, lambda g: (_region(g, geometry),))
    return result


def _commit(x: Tensor, result: Tensor, op_name: str) -> None:
    """Write ``result`` (recorded, computed out of place, of ``x``'s shape) into ``x`` and
    make it ``x``'s history: through the base for a view (see the module docstring)."""
    base = x._base
    if base is None or getattr(x, "_base_node", False) is False:
        copy_into(x, result.detach(), op_name)
        x._node = result._node
        x.requires_grad = True
        return
    from .creation import ones

    geometry = _geometry(base, x, op_name)
    copy_into(x, result.detach(), op_name)
    with autograd.no_grad():
        written = _embed(ones(x.shape, dtype=bool_, device=x.device), geometry)
    base_needs = base.requires_grad

    def backward(g: Tensor) -> tuple[Tensor | None, Tensor]:
        return (where(written, 0.0, g) if base_needs else None), _region(g, geometry)

    autograd.record("copy_slices", (base, result), base, backward)
    _view_of(x, base, geometry)


def _view_of(view: Tensor, base: Tensor, geometry: _Geometry) -> None:
    """Make ``view``'s history a view of ``base``'s current one."""
    view._base_node = base._node
    view._node = None
    view.requires_grad = False
    if base.requires_grad:
        autograd.record("as_strided", (base,), view, lambda g: (_embed(g, geometry),))


def _refresh(view: Tensor) -> None:
    """``autograd.refresh_view``: ``view``'s base was rebased since the view got its
    history (its values may have changed), so it becomes a view of the base's new one."""
    base = view._base
    try:
        geometry = _geometry(base, view, "")
    except InplaceError:
        raise InplaceError(
            f"a view of shape {format_shape(view.shape)} is used after its base (shape "
            f"{format_shape(base.shape)}, strides {base._strides}) was changed in place "
            "while gradients were recorded, and the base's elements do not fill one dense "
            "block of memory, so autograd cannot give the view the base's new history. Take "
            "the view again after the in-place change, or make the base contiguous first."
        ) from None
    _view_of(view, base, geometry)


autograd._view_refresher = _refresh


def apply_inplace(op: ElementwiseOp, x: Tensor, *others: Any) -> Tensor:
    operands = (x, *others)
    if (
        autograd._mode.enabled
        and (x.requires_grad or any(getattr(o, "requires_grad", False) for o in others))
        and _check_autograd(x, others, f"{op.name}_")
    ):
        return _apply_recorded(op, x, others)
    # The shape and dtype checks depend only on what apply's cache key holds: passed once
    # for a key, they pass again (the overlap check reads storages and runs every time).
    key = _plan_key(op, operands, x)
    if key is None or key not in _CHECKED:
        _check_inplace(op, operands, x, key)
    storage = x._storage
    for t in others:
        if isinstance(t, Tensor) and t._storage is storage and t is not x and _overlaps(t, x):
            check_writable(x, f"{op.name}_")
            copy_into(x, apply(op, *operands), f"{op.name}_")  # overlap: compute, then write
            return x
    if not apply_into(op, operands, x, key):
        apply(op, *operands, out=x)
    storage.version += 1
    return x


def _apply_recorded(op: ElementwiseOp, x: Tensor, others: tuple[Any, ...]) -> Tensor:
    """``apply_inplace`` when autograd is involved: recorded out of place, the tensor's
    history rebased onto the result."""
    source = x.clone() if op.saves in ("inputs", "others", "both") else x
    result = apply(op, source, *others)
    if result.shape != x.shape:
        raise ShapeError(
            f"{op.name}_: the result of shape {format_shape(result.shape)} cannot be "
            f"written into a tensor of shape {format_shape(x.shape)}"
        )
    _check_dtype(f"{op.name}_", result.dtype, x)
    _commit(x, result, f"{op.name}_")
    return x


def _check_inplace(
    op: ElementwiseOp, operands: tuple[Any, ...], x: Tensor, key: tuple | None
) -> None:
    """The result of ``op`` on ``operands`` has ``x``'s shape and a dtype ``x`` can hold
    (remembered per key in ``_CHECKED``)."""
    tensors = [o for o in operands if isinstance(o, Tensor)]
    shape = broadcast_shapes(*(t.shape for t in tensors), op=f"{op.name}_")
    if shape != x.shape:
        raise ShapeError(
            f"{op.name}_: operands broadcast to {format_shape(shape)}, which cannot be "
            f"written into a tensor of shape {format_shape(x.shape)}"
        )
    _, out_dtype = op.dtype_rule(list(operands))
    _check_dtype(f"{op.name}_", out_dtype, x)
    if key is not None:
        if len(_CHECKED) >= 4096:
            _CHECKED.clear()
        _CHECKED.add(key)


def _check_dtype(name: str, result_dtype: Any, x: Tensor) -> None:
    """A result of ``result_dtype`` can be written into ``x`` by the in-place op ``name``."""
    if result_dtype.category > x.dtype.category:
        raise DTypeError(
            f"{name}: the result has dtype {result_dtype}, which cannot be stored in "
            f"place in a {x.dtype} tensor; use the out-of-place form, or convert the "
            f"tensor first (e.g. `x = x.float()`)"
        )


def clamp_(x: Tensor, low: Any = None, high: Any = None) -> Tensor:
    recorded = _check_autograd(x, (low, high), "clamp_")
    check_writable(x, "clamp_")
    result = clamp(x.clone() if recorded else x, low, high)
    _check_dtype("clamp_", result.dtype, x)
    if result.shape != x.shape:
        raise ShapeError(
            f"clamp_: the bounds broadcast the result to {format_shape(result.shape)}, which "
            f"cannot be written into a tensor of shape {format_shape(x.shape)}"
        )
    if recorded:
        _commit(x, result, "clamp_")
    else:
        copy_into(x, result.detach(), "clamp_")
    return x


def fill_(x: Tensor, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ShapeError(
                f"fill_: the value must be a number or a one-element tensor, got shape "
                f"{format_shape(value.shape)}"
            )
        value = value.item()
    if _check_autograd(x, (), "fill_"):
        # as PyTorch: the filled tensor stays in the graph, passing a zero gradient back
        _record_overwrite(x, value, "fill_")
        return x
    # unrecorded (under no_grad): ``x`` keeps its gradient flag and history, as in PyTorch
    copy_into(x, value, "fill_")
    return x


def random_(x: Tensor, kind: str, first: float, second: float) -> Tensor:
    """``Tensor.uniform_(low, high)`` and ``Tensor.normal_(mean, std)``: fill ``x`` with
    random samples in place; in a graph, recorded as ``fill_`` is (no gradient flows to what
    ``x`` held)."""
    from . import creation

    fill = creation.uniform_ if kind == "uniform" else creation.normal_
    if _check_autograd(x, (), f"{kind}_"):
        samples = fill(creation.empty_like(x), first, second)
        _record_overwrite(x, samples, f"{kind}_")
        return x
    fill(x, first, second)  # unrecorded: ``x`` keeps its flag and history, as fill_
    return x


def _record_overwrite(x: Tensor, value: Any, op_name: str) -> None:
    """Write ``value`` (a number or a tensor broadcast to ``x``) into ``x`` and record it:
    the gradient goes to a tensor value, none to what ``x`` held before."""
    if isinstance(value, Tensor):
        value = value.to(device=x.device, dtype=x.dtype)
    result = where(True, value, x.clone())  # a clone: backward must not see the overwrite
    if result.shape != x.shape:
        raise ShapeError(
            f"{op_name}: cannot write a value of shape {format_shape(result.shape)} into a "
            f"tensor of shape {format_shape(x.shape)}"
        )
    _commit(x, result, op_name)


def copy_(x: Tensor, source: Any) -> Tensor:
    if _check_autograd(x, (source,), "copy_"):
        _record_overwrite(x, source, "copy_")  # the gradient flows to the source
        return x
    copy_into(x, source, "copy_")
    return x
