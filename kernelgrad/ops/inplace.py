"""In-place operations (``add_``, ``x += y``, ``fill_``, ``copy_``, ...).

Without autograd involvement they write straight into the tensor's memory (no new
buffer) and bump its storage version. When autograd is involved:

* a leaf that requires grad cannot be changed in place (that would lose the value its
  gradient is defined at): do parameter updates under ``kg.no_grad()``;
* an intermediate result can: the operation is recorded out of place and the tensor's
  history is rebased onto it, as PyTorch does. Tensors saved for backward that the
  write overwrote are caught by the version check at backward time.
"""

from __future__ import annotations

from typing import Any

from .. import autograd
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
        raise InplaceError(
            f"{op_name}: in-place modification of a view of another tensor is not recorded "
            "by autograd. Use the out-of-place form (e.g. `y = y + 1`), or `.clone()` first."
        )
    return True


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
        if type(t) is not Tensor and not isinstance(t, Tensor):
            continue
        if t._storage is storage and t is not x and _overlaps(t, x):
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
    copy_into(x, result.detach(), f"{op.name}_")
    x._node = result._node
    x.requires_grad = True
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
    copy_into(x, result.detach(), "clamp_")
    if recorded:
        x._node = result._node
        x.requires_grad = True
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
    copy_into(x, value, "fill_")
    if x.requires_grad and x._node is not None:
        x._node = None
        x.requires_grad = False
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
    fill(x, first, second)
    if x.requires_grad and x._node is not None:
        x._node = None
        x.requires_grad = False
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
    copy_into(x, result.detach(), op_name)
    x._node = result._node
    x.requires_grad = True


def copy_(x: Tensor, source: Any) -> Tensor:
    if _check_autograd(x, (source,), "copy_"):
        _record_overwrite(x, source, "copy_")  # the gradient flows to the source
        return x
    copy_into(x, source, "copy_")
    return x
