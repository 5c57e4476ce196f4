"""Reductions: the primitives ``sum``, ``max``, ``min``, ``argmax``, ``argmin``, and the
composites built from them (``mean``, ``var``, ``std``, ``logsumexp``, ``softmax``, ...).

``dim`` may be None (every dim), an int, or a tuple of ints; ``keepdim`` keeps reduced
dims as size 1. An empty tuple or list means every dim, as in PyTorch, for ``sum``,
``mean``, ``amax``/``amin`` (and ``max``/``min`` given a tuple), ``var``, ``std`` and
``logsumexp``; ``any`` and ``all`` reduce nothing then, as PyTorch's do. As in PyTorch,
``x.max(dim=int)`` returns ``(values, indices)``, while ``x.max()`` and ``x.amax(dims)``
return values only.
"""

from __future__ import annotations

import builtins
from math import prod
from typing import Any

from .. import autograd
from ..dtypes import as_dtype, bool_, default_float, int64
from ..errors import ArgumentError, DTypeError, ShapeError, format_shape
from ..shapes import contiguous_strides, normalize_dim, normalize_dims
from ..tensor import Storage, Tensor, ValuesIndices
from . import register
from .elementwise import cast, where

register("sum", "reduce", ("Tensor.sum", "Tensor.mean", "kg.sum"), True)
register("max", "reduce", ("Tensor.max", "Tensor.amax", "kg.max"), True)
register("min", "reduce", ("Tensor.min", "Tensor.amin", "kg.min"), True)
register("argmax", "reduce", ("Tensor.argmax", "kg.argmax"), False)
register("argmin", "reduce", ("Tensor.argmin", "kg.argmin"), False)


def _kept_shape(x: Tensor, axes: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if d in axes else s for d, s in enumerate(x._shape))
    return tuple(s for d, s in enumerate(x._shape) if d not in axes)


def _run(kind: str, x: Tensor, axes: tuple[int, ...], out_dtype: Any) -> Tensor:
    """The backend reduction; returns the result without kept dims."""
    shape = _kept_shape(x, axes, keepdim=False)
    result = Tensor._empty(shape, out_dtype, x.device)
    if not axes:
        from .elementwise import IDENTITY

        result._backend.elementwise(IDENTITY.scalar, [result._view()], [x._view()], [out_dtype])
        return result
    x._backend.reduce(kind, result._view(), x._view(), axes)
    return result


# --- cached decisions ----------------------------------------------------------------------------
# What a reduction decides depends only on its kind, the ``dim`` and ``keepdim`` given, the
# input's dtype, shape and strides, and its backend: the axes, the result's shape and
# dtype, and the backend's launcher (``prepare_reduce``, optional in the Backend protocol).
# A repeated ``x.sum(1)`` looks them up instead of normalising dims and building views.
_PLANS: dict[tuple, tuple] = {}
_PLAN_LIMIT = 4096
_NO_PLAN = (None, None, None, None, 0)


def clear_plans() -> None:
    """Forget every cached reduction decision."""
    _PLANS.clear()


def _planned(
    kind: str, x: Tensor, dim: Any, keepdim: bool, out_dtype: Any
) -> tuple[Tensor, tuple[int, ...]] | None:
    """The reduction's result and axes through the cached launcher, or None (the caller
    takes the general path: an empty reduction, or a backend without the launcher)."""
    if type(dim) is list:
        return None
    storage = x._storage
    key = (kind, dim, keepdim, x.dtype, x._shape, x._strides, storage.backend)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _make_plan(kind, x, dim, keepdim, out_dtype, key)
    axes, shape, dtype, launch, numel = plan
    if launch is None or "reduce" in storage.backend.__dict__:
        return None  # nothing to launch, or something watches the backend (kg.compile)
    backend = storage.backend
    buffer = backend.empty(numel, dtype)
    launch(storage.buffer, x._offset, buffer)
    result = Tensor._make(Storage(buffer, storage.device, backend), shape,
                          contiguous_strides(shape), 0, dtype)  # fmt: skip
    return result, axes


def _make_plan(kind: str, x: Tensor, dim: Any, keepdim: bool, out_dtype: Any, key: tuple) -> tuple:
    prepare = getattr(x._storage.backend, "prepare_reduce", None)
    plan = _NO_PLAN
    if prepare is not None:
        axes = normalize_dims(dim, x.ndim, kind)
        if axes and builtins.all(x._shape[d] for d in axes):  # empty axes: not this path
            launch = prepare(kind, x._shape, x._strides, x.dtype, axes, out_dtype)
            shape = _kept_shape(x, axes, keepdim)
            plan = (axes, shape, out_dtype, launch, prod(shape))
    if len(_PLANS) >= _PLAN_LIMIT:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _every_dim_if_empty(dim: Any) -> Any:
    """``dim`` with an empty tuple or list read as None (every dim), PyTorch's rule for
    ``sum``, ``mean``, ``amax``, ``var``, ``std`` ... (``sum(dim=[])`` is the total)."""
    if type(dim) is int or dim is None:
        return dim
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        return None
    return dim


def _expand_back(g: Tensor, x_shape: tuple[int, ...], axes: tuple[int, ...]) -> Tensor:
    """Reshape a reduced gradient to keepdim form and broadcast it to ``x_shape``."""
    kept = tuple(1 if d in axes else s for d, s in enumerate(x_shape))
    return g.reshape(kept).expand(*x_shape)


def sum(x: Tensor, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Tensor:  # noqa: A001
    """Sum over ``dim`` (all dims when None). Integer and bool inputs sum to int64, or to
    ``dtype`` when given (the input is converted to it first, as in PyTorch).

    >>> import kernelgrad as kg
    >>> kg.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(dim=0).tolist()
    [4.0, 6.0]
    """
    if dim is not None and type(dim) is not int:
        dim = _every_dim_if_empty(dim)
    if dtype is None:
        out_dtype = x.dtype if x.dtype.is_floating_point else int64
        planned = _planned("sum", x, dim, keepdim, out_dtype)
        if planned is not None:
            result, axes = planned
            if autograd.needs_grad(x):
                shape = x._shape
                autograd.record(
                    "sum", (x,), result, lambda g: (_expand_back(g, shape, axes),), reusable=True
                )
            return result
    axes = normalize_dims(dim, x.ndim, "sum")
    if dtype is not None:
        dtype = as_dtype(dtype)
        x = x.to(dtype)
    out_dtype = x.dtype if x.dtype.is_floating_point else int64
    result = _run("sum", x, axes, out_dtype)
    if autograd.needs_grad(x):
        shape = x._shape
        autograd.record(
            "sum", (x,), result, lambda g: (_expand_back(g, shape, axes),), reusable=True
        )
    if dtype is not None and dtype is not out_dtype:
        # the dtype asked for, as PyTorch: int32 wraps as an int32 sum would, and a sum
        # of bools as bool is True where any is
        result = cast(result, dtype)
    return result.reshape(_kept_shape(x, axes, keepdim)) if keepdim else result


def mean(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Arithmetic mean of a floating point tensor (an integer or bool one is refused, as
    in PyTorch: convert it first)."""
    axes = normalize_dims(_every_dim_if_empty(dim), x.ndim, "mean")
    count = 1
    for d in axes:
        count *= x._shape[d]
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"mean(): could not infer the output dtype: the input dtype must be floating "
            f"point, got {x.dtype} (PyTorch refuses it too). Convert first: `x.float().mean()`"
            ", or `x.mean(dtype=kg.float32)`"
        )
    total = sum(x, axes, keepdim)
    return total / count if count else total * float("nan")


def _check_nonempty(x: Tensor, axes: tuple[int, ...], op: str) -> None:
    if builtins.any(x._shape[d] == 0 for d in axes) or (not axes and x.numel() == 0):
        raise ShapeError(
            f"{op}: cannot reduce over an empty dimension (shape {format_shape(x._shape)}); "
            "there is no identity value for this reduction"
        )


def _extreme_values(
    kind: str, x: Tensor, axes: tuple[int, ...], keepdim: bool, op: str | None = None
) -> Tensor:
    """max/min values over several dims; ties share the gradient equally. ``op`` is the
    public name errors use (``amax``)."""
    _check_nonempty(x, axes, op or kind)
    planned = _planned(kind, x, axes, keepdim, x.dtype)
    result = _run(kind, x, axes, x.dtype) if planned is None else planned[0]
    if autograd.needs_grad(x):
        shape = x._shape
        source = x.detach()
        values = result.detach()  # not `result`: that would be a reference cycle

        def backward(g: Tensor) -> tuple[Tensor]:
            best = _expand_back(values, shape, axes)
            mask = (source == best).to(g.dtype)
            count = mask.sum(dim=axes, keepdim=True)
            return (_expand_back(g, shape, axes) * mask / count,)

        autograd.record(kind, (x,), result, backward, (x,))
    if keepdim and planned is None:
        return result.reshape(_kept_shape(x, axes, keepdim))
    return result


def _extreme_with_indices(kind: str, x: Tensor, dim: int, keepdim: bool) -> ValuesIndices:
    d = normalize_dim(dim, x.ndim, kind)
    axes = (d,) if x.ndim else ()
    _check_nonempty(x, axes, kind)
    indices = _arg(f"arg{kind}", x, d)
    values = _run(kind, x, axes, x.dtype)
    if autograd.needs_grad(x):
        from .creation import arange

        shape = x._shape

        def backward(g: Tensor) -> tuple[Tensor]:
            positions = arange(shape[d], device=g.device).reshape(
                (-1,) + (1,) * (len(shape) - 1 - d)
            )
            chosen = positions == _expand_back(indices, shape, axes)
            return (where(chosen, _expand_back(g, shape, axes), 0),)

        autograd.record(kind, (x,), values, backward)
    if keepdim:
        kept = _kept_shape(x, axes, True)
        return ValuesIndices(values.reshape(kept), indices.reshape(kept))
    return ValuesIndices(values, indices)


def max(x: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:  # noqa: A001
    """``x.max()`` is the largest value; ``x.max(dim)`` returns ``(values, indices)``;
    ``kg.max(x, other)`` with a tensor ``other`` is ``kg.maximum(x, other)``, as in PyTorch.

    >>> import kernelgrad as kg
    >>> values, indices = kg.tensor([[1, 5], [7, 2]]).max(dim=1)
    >>> values.tolist(), indices.tolist()
    ([5, 7], [1, 0])
    >>> kg.max(kg.tensor([1.0, 5.0]), kg.tensor([3.0, 2.0])).tolist()
    [3.0, 5.0]
    """
    if other is not None or isinstance(dim, Tensor):
        return _elementwise_extreme("max", x, dim, keepdim, other)
    if dim is None or isinstance(dim, (tuple, list)):
        axes = normalize_dims(_every_dim_if_empty(dim), x.ndim, "max")
        return _extreme_values("max", x, axes, keepdim)
    return _extreme_with_indices("max", x, dim, keepdim)


def min(x: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:  # noqa: A001
    """``x.min()`` is the smallest value; ``x.min(dim)`` returns ``(values, indices)``;
    ``kg.min(x, other)`` with a tensor ``other`` is ``kg.minimum(x, other)``."""
    if other is not None or isinstance(dim, Tensor):
        return _elementwise_extreme("min", x, dim, keepdim, other)
    if dim is None or isinstance(dim, (tuple, list)):
        axes = normalize_dims(_every_dim_if_empty(dim), x.ndim, "min")
        return _extreme_values("min", x, axes, keepdim)
    return _extreme_with_indices("min", x, dim, keepdim)


def _elementwise_extreme(kind: str, x: Tensor, dim: Any, keepdim: bool, other: Any) -> Tensor:
    """``max(x, other)`` / ``min(x, other)``: PyTorch's ``maximum`` / ``minimum`` of two
    tensors (the second given in ``dim``'s place or as ``other=``)."""
    from .elementwise import MAXIMUM, MINIMUM

    if other is not None and dim is not None:
        raise ArgumentError(f"{kind}: give a dim or a tensor `other`, not both")
    other = dim if other is None else other
    if not isinstance(other, Tensor):
        raise ArgumentError(
            f"{kind}: `other` must be a tensor, got {type(other).__name__} (for a number, "
            f"use `x.clamp({'min' if kind == 'max' else 'max'}=...)`)"
        )
    if keepdim:
        raise ArgumentError(f"{kind}: keepdim applies to a reduction, not to {kind}(x, other)")
    return (MAXIMUM if kind == "max" else MINIMUM)(x, other)


def amax(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    axes = normalize_dims(_every_dim_if_empty(dim), x.ndim, "amax")
    return _extreme_values("max", x, axes, keepdim, "amax")


def amin(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    axes = normalize_dims(_every_dim_if_empty(dim), x.ndim, "amin")
    return _extreme_values("min", x, axes, keepdim, "amin")


def _arg(kind: str, x: Tensor, d: int) -> Tensor:
    if x.ndim == 0:
        from .creation import zeros

        return zeros((), dtype=int64, device=x.device)
    return _run(kind, x, (d,), int64)


def _argreduce(kind: str, x: Tensor, dim: Any, keepdim: bool) -> Tensor:
    if dim is None:
        _check_nonempty(x, tuple(range(x.ndim)), kind)
        flat = x.reshape(-1)
        result = _arg(kind, flat, 0)
        return result.reshape((1,) * x.ndim) if keepdim else result
    d = normalize_dim(dim, x.ndim, kind)
    _check_nonempty(x, (d,) if x.ndim else (), kind)
    result = _arg(kind, x, d)
    if keepdim and x.ndim:
        return result.reshape(_kept_shape(x, (d,), True))
    return result


def argmax(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """Position of the largest value (first one on ties; NaN counts as largest). With
    ``dim=None`` the position in the flattened tensor."""
    return _argreduce("argmax", x, dim, keepdim)


def argmin(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    return _argreduce("argmin", x, dim, keepdim)


def var(
    x: Tensor,
    dim: Any = None,
    correction: Any = None,
    keepdim: bool = False,
    unbiased: Any = None,
) -> Tensor:
    """Variance with Bessel's correction by default (``correction=1``), as PyTorch.

    >>> import kernelgrad as kg
    >>> kg.tensor([1.0, 2.0, 3.0, 4.0]).var().item()
    1.6666666269302368
    """
    if correction is None:
        correction = 1 if unbiased is None else int(bool(unbiased))
    axes = normalize_dims(_every_dim_if_empty(dim), x.ndim, "var")
    count = 1
    for d in axes:
        count *= x._shape[d]
    if not x.dtype.is_floating_point:
        x = x.to(default_float())
    centered = x - mean(x, axes, keepdim=True)
    total = sum(centered * centered, axes, keepdim)
    return total / (count - correction) if count > correction else total * float("nan")


def std(x: Tensor, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Tensor:
    return var(x, dim, correction, keepdim).sqrt()


def _peak(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """The maximum over ``axes`` (kept as size-1 dims) that stable exp-sums subtract, or
    0 where it is infinite or where the reduced dims are empty (no maximum exists;
    the sum of no exponentials is then 0, as in PyTorch: logsumexp of nothing is -inf)."""
    if builtins.any(x._shape[d] == 0 for d in axes) or (not axes and x.numel() == 0):
        from .creation import zeros

        return zeros(_kept_shape(x, axes, keepdim=True), dtype=x.dtype, device=x.device)
    peak = amax(x.detach(), axes, keepdim=True)
    return where(peak.abs() == float("inf"), 0.0, peak)


def logsumexp(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` computed stably (the maximum is subtracted first)."""
    axes = normalize_dims(_every_dim_if_empty(dim), x.ndim, "logsumexp")
    if not x.dtype.is_floating_point:
        x = x.to(default_float())
    peak = _peak(x, axes)
    shifted = (x - peak).exp().sum(dim=axes, keepdim=True).log() + peak
    return shifted if keepdim else shifted.squeeze(axes) if axes else shifted


def softmax(x: Tensor, dim: int) -> Tensor:
    """``exp(x) / exp(x).sum(dim)``, with the maximum subtracted for stability."""
    d = normalize_dim(dim, x.ndim, "softmax")
    if not x.dtype.is_floating_point:
        x = x.to(default_float())
    if x.numel() == 0:
        return x * 1.0  # nothing to normalise, as in PyTorch
    shifted = x - amax(x.detach(), d, keepdim=True)
    exps = shifted.exp()
    return exps / exps.sum(dim=d, keepdim=True)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """``x - logsumexp(x, dim)``, stable for large inputs."""
    d = normalize_dim(dim, x.ndim, "log_softmax")
    if not x.dtype.is_floating_point:
        x = x.to(default_float())
    # Subtracting the (constant) maximum first keeps the digits that x - logsumexp(x)
    # would lose when |x| is large.
    shifted = x - _peak(x, (d,) if x.ndim else ())
    return shifted - shifted.exp().sum(dim=d, keepdim=True).log()


def any(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """True where any element (over ``dim``) is non-zero."""
    mask = x if x.dtype is bool_ else x != 0
    axes = normalize_dims(dim, x.ndim, "any")
    if mask.numel() == 0:
        from .creation import zeros

        return zeros(_kept_shape(mask, axes, keepdim), dtype=bool_, device=x.device)
    return cast(_extreme_values("max", mask, axes, keepdim), bool_)


def all(x: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """True where every element (over ``dim``) is non-zero."""
    mask = x if x.dtype is bool_ else x != 0
    axes = normalize_dims(dim, x.ndim, "all")
    if mask.numel() == 0:
        from .creation import ones

        return ones(_kept_shape(mask, axes, keepdim), dtype=bool_, device=x.device)
    return cast(_extreme_values("min", mask, axes, keepdim), bool_)
