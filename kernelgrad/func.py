"""``torch.func``: ``functional_call`` (kernelgrad/nn/utils/stateless.py).

kernelgrad has no function transforms: ``grad``, ``vjp``, ``jacrev``, ``vmap`` and the
rest raise ``AttributeError`` with the kernelgrad way to get the same result."""

from __future__ import annotations

from typing import Any

from .nn.utils.stateless import call_with as functional_call

__all__ = ["functional_call"]

_ADVICE = {
    "grad": "kg.autograd.grad(f(x), x) gives the gradient",
    "grad_and_value": "kg.autograd.grad(f(x), x) gives the gradient",
    "vjp": "kg.autograd.grad(outputs, inputs, grad_outputs) gives vector-Jacobian products",
    "jvp": "kg.autograd.functional.jvp computes Jacobian-vector products",
    "jacrev": "kg.autograd.functional.jacobian computes Jacobians",
    "jacfwd": "kg.autograd.functional.jacobian computes Jacobians",
    "hessian": "kg.autograd.functional.hessian computes Hessians",
    "vmap": "write the batch dimension explicitly, or a @kg.kernel",
}


def __getattr__(name: str) -> Any:
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(f"module 'kernelgrad.func' has no attribute {name!r}")
    advice = _ADVICE.get(name, "kernelgrad.func has functional_call only (docs/pytorch-compat.md)")
    raise AttributeError(f"kernelgrad has no torch.func.{name} (no function transforms): {advice}")
