"""``kg.autograd.functional``: PyTorch's ``torch.autograd.functional`` (``vjp``, ``jvp``,
``jacobian``, ``hessian``, ``hvp``, ``vhp``), built on :func:`kernelgrad.autograd.grad`.

Every function takes ``func`` and ``inputs`` (a tensor or a tuple of tensors) and
returns results shaped as PyTorch returns them: a tensor where ``inputs`` (and the
outputs) are single tensors, tuples where they are tuples. Jacobians are built row by
row with one reverse pass per output element (PyTorch's default ``"reverse-mode"``
strategy without ``vectorize``); ``jvp`` uses the double-backward trick, as PyTorch's
does. ``create_graph=True`` keeps the results differentiable; ``strict=True`` raises when
an output does not depend on an input instead of giving zeros.

>>> import kernelgrad as kg
>>> from kernelgrad.autograd.functional import jacobian, hessian
>>> jacobian(lambda x: x ** 2, kg.tensor([1.0, 3.0])).tolist()
[[2.0, 0.0], [0.0, 6.0]]
>>> hessian(lambda x: (x ** 3).sum(), kg.tensor([1.0, 2.0])).tolist()
[[6.0, 0.0], [0.0, 12.0]]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError, UnsupportedError
from . import enable_grad, grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(value: Any, what: str, fn: str) -> tuple[bool, tuple]:
    """(was it a tuple or list, its tensors as a tuple)."""
    from ..tensor import Tensor

    if isinstance(value, Tensor):
        return False, (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(v, Tensor) for v in value):
        return True, tuple(value)
    raise ArgumentError(
        f"{fn}: {what} must be a Tensor or a tuple of Tensors, got {type(value).__name__}"
    )


def _prepared(inputs: tuple, create_graph: bool) -> tuple:
    """Inputs that require grad: new leaves (detached), or, with ``create_graph``, views
    that keep the inputs' own history so that the results differentiate through it."""
    prepared = []
    for x in inputs:
        if create_graph and x.requires_grad:
            prepared.append(x.view_as(x))
        else:
            prepared.append(x.detach().requires_grad_(x.dtype.is_floating_point))
    return tuple(prepared)


def _filled(grads: tuple, like: tuple, strict: bool, fn: str, what: str) -> tuple:
    """None gradients (an output that does not depend on an input) as zeros, or an error
    with ``strict``."""
    from ..ops.creation import zeros_like

    result = []
    for position, (g, x) in enumerate(zip(grads, like)):
        if g is None:
            if strict:
                raise RuntimeError(
                    f"{fn}: the output is independent of input {position} ({what}); "
                    "strict=True does not allow that (strict=False gives zeros)"
                )
            g = zeros_like(x)
        result.append(g)
    return tuple(result)


def _call(func: Callable, inputs: tuple, fn: str) -> tuple[bool, tuple]:
    outputs = func(*inputs)
    return _as_tuple(outputs, "the function's outputs", fn)


def _input_vectors(inputs: tuple, v: Any, fn: str) -> tuple:
    """The vectors ``v`` (one per input), or ones for a single one-element input."""
    from ..ops.creation import ones_like

    if v is not None:
        return _as_tuple(v, "v", fn)[1]
    if len(inputs) != 1 or inputs[0].numel() != 1:
        raise ArgumentError(f"{fn}: v may be None only when the input has one element")
    return (ones_like(inputs[0]),)


def _finish(values: tuple, create_graph: bool) -> tuple:
    return values if create_graph else tuple(v.detach() for v in values)


def _grads(outputs, inputs, grad_outputs, create_graph) -> tuple:
    """``grad`` with unused inputs and outputs that need no gradient allowed (None)."""
    live = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not live:
        return (None,) * len(inputs)
    return grad(
        [o for o, _ in live],
        inputs,
        [g for _, g in live],
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
    )


def vjp(
    func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """(``func(*inputs)``, the vector-Jacobian product ``v^T J``) (PyTorch's
    ``torch.autograd.functional.vjp``); ``v`` may be None for a one-element output."""
    from ..ops.creation import ones_like

    fn = "vjp"
    is_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    with enable_grad():
        inputs = _prepared(inputs, create_graph)
        out_tuple, outputs = _call(func, inputs, fn)
        if v is None:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise ArgumentError(
                    f"{fn}: v may be None only when the function returns one element"
                )
            vs = (ones_like(outputs[0]),)
        else:
            _, vs = _as_tuple(v, "v", fn)
        grads = _filled(_grads(outputs, inputs, vs, create_graph), inputs, strict, fn, "vjp")
    outputs = _finish(outputs, create_graph)
    grads = _finish(grads, create_graph)
    return (outputs if out_tuple else outputs[0]), (grads if is_tuple else grads[0])


def jvp(
    func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """(``func(*inputs)``, the Jacobian-vector product ``J v``) (PyTorch's
    ``torch.autograd.functional.jvp``, by the double-backward trick); ``v`` may be None
    for a one-element input."""
    from ..ops.creation import zeros_like

    fn = "jvp"
    _, inputs = _as_tuple(inputs, "inputs", fn)
    vs = _input_vectors(inputs, v, fn)
    with enable_grad():
        inputs = _prepared(inputs, create_graph)
        out_tuple, outputs = _call(func, inputs, fn)
        dummies = tuple(zeros_like(o).requires_grad_() for o in outputs)
        inner = _filled(_grads(outputs, inputs, dummies, True), inputs, strict, fn, "jvp")
        products = _filled(_grads(inner, dummies, vs, create_graph), outputs, strict, fn, "jvp")
    outputs = _finish(outputs, create_graph)
    products = _finish(products, create_graph)
    return (outputs if out_tuple else outputs[0]), (products if out_tuple else products[0])


def jacobian(
    func: Callable,
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    strategy: str = "reverse-mode",
) -> Any:
    """The Jacobian of ``func`` at ``inputs`` (PyTorch's
    ``torch.autograd.functional.jacobian``): for one output and one input a tensor of
    shape ``output.shape + input.shape``; ``jac[i][j]`` for tuples of outputs and inputs.
    ``vectorize`` gives the same values (one reverse pass per output element either way);
    ``strategy="forward-mode"`` is refused (kernelgrad has no forward-mode AD)."""
    from ..ops.movement import stack

    fn = "jacobian"
    if strategy != "reverse-mode":
        raise UnsupportedError(
            f"{fn}: strategy={strategy!r} needs forward-mode AD, which kernelgrad does not "
            "have; use the default strategy='reverse-mode'"
        )
    is_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    with enable_grad():
        inputs = _prepared(inputs, create_graph)
        out_tuple, outputs = _call(func, inputs, fn)
        rows: list[tuple] = []
        for i, output in enumerate(outputs):
            flat = output.reshape(-1)
            per_input: list[list] = [[] for _ in inputs]
            for k in range(flat.numel()):
                element = flat[k]
                grads = (None,) * len(inputs)
                if element.requires_grad:
                    grads = grad(
                        element,
                        inputs,
                        retain_graph=True,
                        create_graph=create_graph,
                        allow_unused=True,
                    )
                grads = _filled(grads, inputs, strict, fn, f"output {i}")
                for j, g in enumerate(grads):
                    per_input[j].append(g)
            row = []
            for j, x in enumerate(inputs):
                if per_input[j]:
                    block = stack(per_input[j]).reshape(output.shape + x.shape)
                else:
                    from ..ops.creation import zeros

                    block = zeros(output.shape + x.shape, dtype=x.dtype, device=x.device)
                row.append(block if create_graph else block.detach())
            rows.append(tuple(row))
    if out_tuple:
        return tuple(row if is_tuple else row[0] for row in rows)
    return rows[0] if is_tuple else rows[0][0]


def hessian(
    func: Callable,
    inputs: Any,
    create_graph: bool = False,
    strict: bool = False,
    vectorize: bool = False,
    outer_jacobian_strategy: str = "reverse-mode",
) -> Any:
    """The Hessian of the one-element function ``func`` at ``inputs`` (PyTorch's
    ``torch.autograd.functional.hessian``): a tensor of shape ``input.shape * 2`` for one
    input, ``h[i][j]`` for a tuple."""
    fn = "hessian"
    is_tuple, inputs = _as_tuple(inputs, "inputs", fn)

    def gradient(*xs: Any) -> tuple:
        out_tuple, outputs = _call(func, xs, fn)
        if out_tuple or outputs[0].numel() != 1:
            raise RuntimeError(
                f"{fn}: the function must return a single one-element tensor, got "
                f"{len(outputs)} output(s) of shape {tuple(outputs[0].shape)}"
            )
        grads = _grads(outputs, xs, (None,), True) if outputs[0].requires_grad else None
        grads = grads or (None,) * len(xs)
        return _filled(grads, xs, strict, fn, "its gradient")

    result = jacobian(
        gradient,
        inputs if is_tuple else inputs[0],
        create_graph=create_graph,
        strict=strict,
        strategy=outer_jacobian_strategy,
    )
    return result if is_tuple else result[0]


def _hessian_product(
    fn: str, func: Callable, inputs: Any, v: Any, create_graph: bool, strict: bool
) -> tuple[Any, Any]:
    is_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    vs = _input_vectors(inputs, v, fn)
    with enable_grad():
        inputs = _prepared(inputs, create_graph)
        out_tuple, outputs = _call(func, inputs, fn)
        if out_tuple or outputs[0].numel() != 1:
            raise RuntimeError(f"{fn}: the function must return a single one-element tensor")
        first = _filled(_grads(outputs, inputs, (None,), True), inputs, strict, fn, fn)
        products = _filled(_grads(first, inputs, vs, create_graph), inputs, strict, fn, fn)
    output = _finish(outputs, create_graph)[0]
    products = _finish(products, create_graph)
    return output, (products if is_tuple else products[0])


def vhp(
    func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """(``func(*inputs)``, ``v^T H``) for a one-element ``func`` (PyTorch's ``vhp``)."""
    return _hessian_product("vhp", func, inputs, v, create_graph, strict)


def hvp(
    func: Callable, inputs: Any, v: Any = None, create_graph: bool = False, strict: bool = False
) -> tuple[Any, Any]:
    """(``func(*inputs)``, ``H v``) for a one-element ``func`` (PyTorch's ``hvp``; the
    Hessian of a twice-differentiable function is symmetric, so this is ``vhp``'s
    product)."""
    return _hessian_product("hvp", func, inputs, v, create_graph, strict)
