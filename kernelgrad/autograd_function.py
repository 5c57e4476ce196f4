"""``kg.autograd.Function``: PyTorch's way of writing an operation with a hand-written
backward (``torch.autograd.Function``), on top of the graph nodes of ``autograd/__init__.py``.

>>> import kernelgrad as kg
>>> class Cube(kg.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x * x
...
...     @staticmethod
...     def backward(ctx, grad_output):
...         (x,) = ctx.saved_tensors
...         return grad_output * 3 * x * x
>>> x = kg.tensor([1.0, 2.0], requires_grad=True)
>>> Cube.apply(x).sum().backward()
>>> x.grad.tolist()
[3.0, 12.0]

``apply(*args)`` runs ``forward(ctx, *args)`` with gradient recording off (what it does
inside is not recorded) and gives its results one backward: ``backward(ctx,
*grad_outputs)`` receives one gradient per output (zeros for an output that did not
reach the loss, unless ``ctx.set_materialize_grads(False)``: then None) and returns one
gradient per argument of ``forward`` (None for arguments that are not tensors or need
no gradient). The context ``ctx`` holds ``save_for_backward`` / ``saved_tensors``
(checked against later in-place changes), ``needs_input_grad``,
``mark_non_differentiable`` and any attribute you set on it. The newer form, a
``forward(*args)`` without ``ctx`` and a ``setup_context(ctx, inputs, output)``, works
too.

A function with several outputs gets one backward call for all of them: the outputs'
nodes feed one joint node (whose gradient is the outputs' gradients laid end to end),
so ``backward`` runs once with every output's gradient, as in PyTorch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import autograd
from .errors import (
    BackwardError,
    DTypeError,
    InplaceError,
    ShapeError,
    UnsupportedError,
    format_shape,
)

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` object that ``forward`` and ``backward`` of a :class:`Function`
    share. Any attribute may be set on it (``ctx.scale = 2``)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._saved: tuple[Any, ...] = ()
        self._versions: tuple[int | None, ...] = ()
        self._non_differentiable: set[int] = set()
        self.needs_input_grad: tuple[bool, ...] = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors (or None) for ``backward``, where ``ctx.saved_tensors`` returns
        them. A saved tensor changed in place before backward makes backward raise."""
        from .tensor import Tensor

        for position, value in enumerate(tensors):
            if value is not None and not isinstance(value, Tensor):
                raise DTypeError(
                    f"{self._name}: save_for_backward takes tensors (or None); argument "
                    f"{position} is a {type(value).__name__}: store other values as "
                    f"attributes of ctx (ctx.value = ...)"
                )
        self._saved = tensors
        self._versions = tuple(None if t is None else t._storage.version for t in tensors)

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors given to ``save_for_backward``."""
        for tensor, version in zip(self._saved, self._versions):
            if tensor is not None and tensor._storage.version != version:
                raise InplaceError(
                    f"{self._name}: a tensor of shape {format_shape(tensor.shape)} saved with "
                    f"save_for_backward was modified in place afterwards (version "
                    f"{tensor._storage.version}, saved at version {version}), so the gradient "
                    "would be wrong. Use the out-of-place form of the later operation, or "
                    "save a `.clone()`."
                )
        return self._saved

    saved_variables = saved_tensors

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """Declare outputs (returned by ``forward``) that get no gradient (indices, masks)."""
        self._non_differentiable.update(id(t) for t in outputs)

    def mark_dirty(self, *tensors: Any) -> None:
        raise UnsupportedError(
            f"{self._name}: mark_dirty (a Function that changes its inputs in place) is not "
            "supported; return a new tensor from forward instead"
        )

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` receives None (instead of zeros) for outputs whose
        gradient was not computed."""
        self.materialize_grads = bool(value)


class _FunctionMeta(type):
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            raise DTypeError(
                f"{cls.__name__} is an autograd Function: call `{cls.__name__}.apply(...)`, "
                "not the class itself"
            )
        return super().__call__()


class Function(metaclass=_FunctionMeta):
    """Base class of operations with a hand-written backward; see the module docstring.
    Subclasses define the static methods ``forward`` and ``backward`` and are used
    through ``apply``."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define forward()")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define backward()")

    @staticmethod
    def setup_context(ctx: FunctionCtx, inputs: tuple[Any, ...], output: Any) -> None:
        raise NotImplementedError  # optional: the forward-without-ctx form

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` on ``args`` and attach ``backward`` to its results."""
        from .tensor import Tensor

        name = cls.__name__
        ctx = FunctionCtx(name)
        recording = autograd.needs_grad(*args)
        ctx.needs_input_grad = tuple(
            recording and isinstance(a, Tensor) and a.requires_grad for a in args
        )
        separate_setup = cls.setup_context is not Function.setup_context
        with autograd.no_grad():
            if separate_setup:
                result = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, result)
            else:
                result = cls.forward(ctx, *args, **kwargs)
        if not recording:
            return result
        if cls.backward is Function.backward:
            raise BackwardError(
                f"{name} received tensors that require grad but defines no backward(); "
                f"define `@staticmethod def backward(ctx, *grad_outputs)`, or call it under "
                "`with kg.no_grad():`"
            )
        single = not isinstance(result, tuple)
        outputs = [result] if single else list(result)
        input_ids = {id(a) for a in args if isinstance(a, Tensor)}
        for position, output in enumerate(outputs):
            if isinstance(output, Tensor) and id(output) in input_ids:
                # An input returned as it is: the output is a new tensor on its memory.
                outputs[position] = output.detach()
        differentiable = [
            position
            for position, output in enumerate(outputs)
            if isinstance(output, Tensor)
            and output.dtype.is_floating_point
            and id(result if single else result[position]) not in ctx._non_differentiable
        ]
        backward = functools.partial(_run_backward, cls, ctx, args, outputs)
        if len(differentiable) == 1:
            position = differentiable[0]
            autograd.record(
                name,
                args,
                outputs[position],
                lambda grad: backward({position: grad}),
            )
        elif differentiable:
            _record_joint(name, args, outputs, differentiable, backward)
        return outputs[0] if single else tuple(outputs)


def _record_joint(
    name: str,
    args: tuple[Any, ...],
    outputs: list[Any],
    differentiable: list[int],
    backward: Callable[[dict[int, Any]], Any],
) -> None:
    """One node for all outputs: each output's node passes its gradient, laid into a flat
    vector at the output's place, to a joint node, which splits the accumulated vector
    and calls ``backward`` once."""
    from .ops.creation import zeros

    first = outputs[differentiable[0]]
    # the joint vector holds every output's gradient: in the widest of their dtypes, so
    # that a float64 output's gradient is not rounded to float32 on its way
    wide = max((outputs[p] for p in differentiable), key=lambda o: o.dtype.itemsize)
    places = {}
    start = 0
    for position in differentiable:
        places[position] = (start, outputs[position].numel(), outputs[position].shape)
        start += outputs[position].numel()
    total = start
    joint = zeros((), dtype=wide.dtype, device=first.device).expand(total)
    reached: set[int] = set()  # the outputs whose nodes passed a gradient in this pass

    def joint_backward(grad: Any) -> Any:
        grads = {
            position: grad[offset : offset + size].reshape(shape).to(outputs[position].dtype)
            for position, (offset, size, shape) in places.items()
            if position in reached
        }
        reached.clear()
        return backward(grads)

    autograd.record(name, args, joint, joint_backward)
    for position in differentiable:
        offset, size, _ = places[position]

        def lay_out(
            grad: Any, position: int = position, offset: int = offset, size: int = size
        ) -> tuple[Any]:
            from .ops.movement import pad

            reached.add(position)
            flat = grad.reshape(-1).to(wide.dtype)
            return (pad(flat, (offset, total - offset - size)),)

        autograd.record(f"{name}_output", (joint,), outputs[position], lay_out)


def _run_backward(
    cls: type,
    ctx: FunctionCtx,
    args: tuple[Any, ...],
    outputs: list[Any],
    grads: dict[int, Any],
) -> list[Any]:
    from .ops.creation import zeros_like
    from .tensor import Tensor

    name = cls.__name__
    grad_outputs = []
    for position, output in enumerate(outputs):
        grad = grads.get(position)
        if grad is None and ctx.materialize_grads and isinstance(output, Tensor):
            grad = zeros_like(output)
        grad_outputs.append(grad)
    returned = cls.backward(ctx, *grad_outputs)
    if not isinstance(returned, tuple | list):
        returned = (returned,)
    returned = list(returned)
    if len(returned) > len(args) and all(g is None for g in returned[len(args) :]):
        returned = returned[: len(args)]
    if len(returned) != len(args):
        raise BackwardError(
            f"{name}.backward returned {len(returned)} gradient(s) for {len(args)} "
            "argument(s) of forward; return one per argument (None where there is none)"
        )
    for position, (grad, arg) in enumerate(zip(returned, args)):
        if grad is None:
            continue
        if not isinstance(arg, Tensor):
            raise BackwardError(
                f"{name}.backward returned a gradient for argument {position}, which is a "
                f"{type(arg).__name__}, not a tensor; return None at that position"
            )
        if not isinstance(grad, Tensor):
            raise BackwardError(
                f"{name}.backward returned a {type(grad).__name__} as the gradient of "
                f"argument {position}; return a tensor or None"
            )
        if not _sums_to(grad.shape, arg.shape):
            raise ShapeError(
                f"{name}.backward returned a gradient of shape {format_shape(grad.shape)} for "
                f"argument {position}, whose shape is {format_shape(arg.shape)}"
            )
    return returned


def _sums_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether a gradient of ``shape`` reduces to ``target`` by summing broadcast dims."""
    if len(shape) < len(target):
        return False
    lead = len(shape) - len(target)
    return all(s == t or t == 1 for s, t in zip(shape[lead:], target))


def once_differentiable(backward: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for a ``backward`` that cannot itself be differentiated: it runs with
    gradient recording off, and ``backward(create_graph=True)`` through it raises."""

    @functools.wraps(backward)
    def wrapper(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        if autograd.is_grad_enabled():
            raise BackwardError(
                f"{getattr(ctx, '_name', 'Function')}: its backward is marked "
                "@once_differentiable; a second-order gradient (create_graph=True) through "
                "it is not available"
            )
        return backward(ctx, *grad_outputs)

    return wrapper
