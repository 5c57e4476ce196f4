"""``kg.autograd.gradcheck`` and ``gradgradcheck``: PyTorch's checks that a function's
gradients (and gradients of gradients) equal finite differences.

The numerical Jacobian comes from central differences: each element of each input that
requires grad is moved by ``eps`` down and up (on a host copy, then back on the input's
device) and the function evaluated without recording; the analytical one from one
reverse pass per output element (:func:`kernelgrad.autograd.grad`). They must agree
within ``atol + rtol * |numerical|``, as in PyTorch. Check in float64: float32 inputs
get PyTorch's warning, and finite differences in float32 rarely pass.

>>> import kernelgrad as kg
>>> x = kg.tensor([0.5, -1.0, 2.0], dtype=kg.float64, requires_grad=True)
>>> kg.autograd.gradcheck(lambda x: (x.sin() * x).sum(), (x,))
True
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from . import enable_grad, grad, no_grad

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """The analytical and numerical gradients differ (PyTorch's
    ``torch.autograd.gradcheck.GradcheckError``)."""


def _tensors(value: Any) -> tuple:
    from ..tensor import Tensor

    return (value,) if isinstance(value, Tensor) else tuple(value)


def _outputs(func: Callable, inputs: tuple) -> tuple:
    from ..tensor import Tensor

    result = func(*inputs)
    result = (result,) if isinstance(result, Tensor) else tuple(result)
    return tuple(r for r in result if isinstance(r, Tensor) and r.dtype.is_floating_point)


def _numerical(func: Callable, inputs: tuple, position: int, eps: float) -> list[np.ndarray]:
    """d outputs / d inputs[position] by central differences: one (numel_out,
    numel_in) array per output."""
    from ..ops.creation import tensor

    x = inputs[position]
    base = x.detach().cpu().numpy().astype(np.float64)
    columns: list[list[np.ndarray]] = []
    for k in range(base.size):
        values = []
        for step in (-eps, eps):
            moved = base.copy()
            moved.reshape(-1)[k] += step
            replaced = list(inputs)
            # (still requiring grad: gradgradcheck's function differentiates inside)
            replaced[position] = tensor(
                moved, dtype=x.dtype, device=x.device, requires_grad=x.requires_grad
            )
            with no_grad():
                outputs = _outputs(func, replaced)
            values.append([o.detach().cpu().numpy().astype(np.float64) for o in outputs])
        columns.append([(high - low).reshape(-1) / (2 * eps) for low, high in zip(*values)])
    count = len(columns[0]) if columns else 0
    return [np.stack([column[i] for column in columns], axis=1) for i in range(count)]


def _analytical(outputs: tuple, inputs: tuple, position: int) -> list[np.ndarray]:
    x = inputs[position]
    result = []
    for output in outputs:
        flat = output.reshape(-1)
        rows = []
        for k in range(flat.numel()):
            g = None
            if flat[k].requires_grad:
                (g,) = grad(flat[k], (x,), retain_graph=True, allow_unused=True)
            rows.append(
                np.zeros(x.numel()) if g is None else g.cpu().numpy().astype(np.float64).reshape(-1)
            )
        result.append(np.stack(rows) if rows else np.zeros((0, x.numel())))
    return result


def gradcheck(
    func: Callable,
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Whether the gradients of ``func`` at ``inputs`` (a tensor or a tuple; those that
    require grad are checked) equal central finite differences (PyTorch's
    ``torch.autograd.gradcheck``). A mismatch raises :class:`GradcheckError` naming the
    output and input, with both Jacobians, or returns False with
    ``raise_exception=False``. Batched and forward-mode checks are not run (kernelgrad
    has neither ``vmap`` nor forward-mode AD): asking for them raises."""
    from ..errors import UnsupportedError

    if check_batched_grad or check_batched_forward_grad or check_forward_ad:
        raise UnsupportedError(
            "gradcheck: batched and forward-mode checks need vmap / forward-mode AD, which "
            "kernelgrad does not have; leave check_batched_grad, "
            "check_batched_forward_grad and check_forward_ad False"
        )
    inputs = _tensors(inputs)
    checked = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    if not checked:
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    for i in checked:
        if inputs[i].dtype.name != "float64":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point. "
                "This check will likely fail if all the inputs are not of double precision "
                "floating point.",
                UserWarning,
                stacklevel=2,
            )
    if not check_backward_ad:
        return True
    outputs = _outputs(func, inputs)
    for i in checked:
        numerical = _numerical(func, inputs, i, eps)
        analytical = _analytical(outputs, inputs, i)
        for o, (n, a) in enumerate(zip(numerical, analytical)):
            if np.allclose(a, n, rtol=rtol, atol=atol):
                continue
            if not raise_exception:
                return False
            raise GradcheckError(
                f"Jacobian mismatch for output {o} with respect to input {i},\n"
                f"numerical:{n}\nanalytical:{a}\n"
            )
    return True


def gradgradcheck(
    func: Callable,
    inputs: Any,
    grad_outputs: Any = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """Whether the gradients of ``func``'s gradients equal finite differences (PyTorch's
    ``torch.autograd.gradgradcheck``): :func:`gradcheck` of the function
    ``(inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs,
    create_graph=True)``; ``grad_outputs`` default to random values that require grad."""
    from ..ops.creation import tensor

    inputs = _tensors(inputs)
    checked = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    outputs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            tensor(rng.standard_normal(o.shape), dtype=o.dtype, device=o.device).requires_grad_()
            for o in outputs
        )
    else:
        grad_outputs = _tensors(grad_outputs)
    count = len(inputs)

    def first_derivatives(*values: Any) -> tuple:
        xs, gs = values[:count], values[count:]
        with enable_grad():
            result = grad(
                _outputs(func, xs),
                tuple(xs[i] for i in checked),
                gs,
                create_graph=True,
                allow_unused=True,
            )
        return tuple(r for r in result if r is not None)

    if not check_rev_over_rev:
        return True
    return gradcheck(
        first_derivatives,
        inputs + tuple(grad_outputs),
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
    )
