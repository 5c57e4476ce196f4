"""``kg.custom_vjp``: a function of tensors (typically one that launches kernels) with a
hand-written backward, so that it joins autograd.

>>> import kernelgrad as kg
>>> @kg.kernel
... def cube_kernel(out, x):
...     i = kg.index()
...     out[i] = x[i] * x[i] * x[i]
>>> @kg.custom_vjp
... def cube(x):
...     out = kg.empty_like(x)
...     cube_kernel(out, x, ndrange=x.numel())
...     return out
>>> @cube.defvjp
... def cube_vjp(grad_output, output, x):
...     return (grad_output * 3 * x * x,)
>>> x = kg.tensor([1.0, 2.0], requires_grad=True)
>>> cube(x).sum().backward()
>>> x.grad.tolist()
[3.0, 12.0]

The forward runs under ``kg.no_grad()`` (what it does inside is not recorded); its
result gets one autograd node whose backward is ``vjp(grad_output, output, *args)``,
returning one gradient (or None) per positional argument. The backward is written in
Tensor ops (it may launch kernels too), so it runs on every device. A function that
returns a tuple of tensors gets one node per output; its ``vjp`` then receives a tuple
of output gradients (None for outputs that did not reach the loss) and the tuple of
outputs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import autograd
from ..errors import BackwardError, ShapeError, format_shape


class CustomFunction:
    """A function of tensors with a hand-written backward; see :func:`custom_vjp`."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = getattr(fn, "__name__", "custom_function")
        self.vjp: Callable[..., Any] | None = None

    def __repr__(self) -> str:
        return f"<kg.custom_vjp {self.name}>"

    def defvjp(self, vjp: Callable[..., Any]) -> Callable[..., Any]:
        """Set the backward: ``vjp(grad_output, output, *args) -> gradients``."""
        self.vjp = vjp
        return vjp

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ..tensor import Tensor

        tensors = [a for a in args if isinstance(a, Tensor)]
        recording = autograd.needs_grad(*tensors)
        with autograd.no_grad():
            result = self.fn(*args, **kwargs)
        if not recording:
            return result
        if self.vjp is None:
            raise BackwardError(
                f"custom function '{self.name}' received tensors that require grad but has "
                f"no backward; define one with `@{self.name}.defvjp`, or call it under "
                "`with kg.no_grad():`"
            )
        outputs = result if isinstance(result, tuple) else (result,)
        input_ids = {id(t) for t in tensors}
        for position, output in enumerate(outputs):
            if not isinstance(output, Tensor):
                raise TypeError(
                    f"custom function '{self.name}' must return a tensor or a tuple of "
                    f"tensors; output {position} is a {type(output).__name__}"
                )
            if id(output) in input_ids or any(output._storage is t._storage for t in tensors):
                raise ValueError(
                    f"custom function '{self.name}' returned (a view of) one of its inputs; "
                    "a differentiable custom function must return new tensors"
                )
        detached = tuple(o.detach() for o in outputs)
        multi = isinstance(result, tuple)
        vjp = self.vjp
        name = self.name

        for position, output in enumerate(outputs):
            if not output.dtype.is_floating_point:
                continue

            def backward(grad: Any, position: int = position) -> list[Any]:
                if multi:
                    grads_out = tuple(grad if k == position else None for k in range(len(outputs)))
                    grads = vjp(grads_out, detached, *args)
                else:
                    grads = vjp(grad, detached[0], *args)
                return _check_grads(name, grads, args)

            autograd.record(name, args, output, backward, tuple(tensors))
        return result


def _check_grads(name: str, grads: Any, args: tuple[Any, ...]) -> list[Any]:
    from ..tensor import Tensor

    if isinstance(grads, Tensor) or grads is None:
        grads = (grads,)
    grads = list(grads)
    if len(grads) != len(args):
        raise BackwardError(
            f"the backward of custom function '{name}' returned {len(grads)} gradient(s) for "
            f"{len(args)} argument(s); return one per argument (None where there is none)"
        )
    for position, (grad, arg) in enumerate(zip(grads, args)):
        if grad is None or not isinstance(arg, Tensor):
            continue
        if not isinstance(grad, Tensor):
            raise BackwardError(
                f"the backward of custom function '{name}' returned a "
                f"{type(grad).__name__} for argument {position}; return a tensor or None"
            )
        if grad.shape != arg.shape:
            raise ShapeError(
                f"the backward of custom function '{name}' returned a gradient of shape "
                f"{format_shape(grad.shape)} for argument {position}, whose shape is "
                f"{format_shape(arg.shape)}"
            )
    return grads


def custom_vjp(fn: Callable[..., Any]) -> CustomFunction:
    """Make ``fn`` (a function of tensors) differentiable with a backward you write:

    >>> import kernelgrad as kg
    >>> @kg.custom_vjp
    ... def double(x):
    ...     return x * 2
    >>> @double.defvjp
    ... def double_vjp(grad_output, output, x):
    ...     return (grad_output * 2,)

    See the module docstring for the full contract.
    """
    return CustomFunction(fn)
