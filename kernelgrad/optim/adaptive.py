"""``RMSprop`` and ``Adadelta``: PyTorch's formulas, written as in-place tensor
operations (a handful of elementwise kernels per parameter; no fused kernel yet)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import ArgumentError
from ..ops.creation import zeros_like
from .optimizer import Optimizer

__all__ = ["RMSprop", "Adadelta"]


def _check_non_negative(name: str, **values: float) -> None:
    for key, value in values.items():
        if value < 0:
            raise ArgumentError(f"{name}: {key} must be non-negative, got {value}")


def _direction(p: Any, group: dict[str, Any]) -> Any:
    """The gradient, negated with ``maximize``, plus ``weight_decay * p``."""
    grad = -p.grad if group["maximize"] else p.grad
    if group["weight_decay"]:
        grad = grad + p * group["weight_decay"]
    return grad


class RMSprop(Optimizer):
    """``v = alpha * v + (1 - alpha) * g^2``; ``p -= lr * g / (sqrt(v) + eps)``, with
    ``centered`` (v minus the squared running mean of g), ``momentum`` and
    ``weight_decay`` as in PyTorch (state ``square_avg``, ``momentum_buffer``,
    ``grad_avg``).

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0]))
    >>> opt = kg.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)
    0.9
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_non_negative(
            "RMSprop", lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum
        )
        defaults = {
            "lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
            "momentum": momentum, "centered": centered, "maximize": maximize,
            "capturable": capturable, "foreach": foreach, "differentiable": differentiable,
        }  # fmt: skip
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        alpha, eps, momentum = group["alpha"], group["eps"], group["momentum"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = _direction(p, group)
            state = self.state.setdefault(p, {})
            if "square_avg" not in state:
                state["step"] = 0
                state["square_avg"] = zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if group["centered"]:
                    state["grad_avg"] = zeros_like(p)
            state["step"] += 1
            square_avg = state["square_avg"]
            square_avg.mul_(alpha).add_(grad * grad * (1 - alpha))
            if group["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.mul_(alpha).add_(grad * (1 - alpha))
                denominator = (square_avg - grad_avg * grad_avg).sqrt() + eps
            else:
                denominator = square_avg.sqrt() + eps
            if momentum > 0:
                buffer = state["momentum_buffer"]
                buffer.mul_(momentum).add_(grad / denominator)
                p.sub_(buffer * group["lr"])
            else:
                p.sub_(grad / denominator * group["lr"])


class Adadelta(Optimizer):
    """``v = rho * v + (1 - rho) * g^2``; ``d = sqrt(u + eps) / sqrt(v + eps) * g``;
    ``u = rho * u + (1 - rho) * d^2``; ``p -= lr * d``, as in PyTorch (state
    ``square_avg``, ``acc_delta``).

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0]))
    >>> opt = kg.optim.Adadelta([w])
    >>> (w * w).sum().backward(); opt.step()
    >>> round(w.item(), 4)
    0.9968
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        _check_non_negative("Adadelta", lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ArgumentError(f"Adadelta: rho must be in [0, 1], got {rho}")
        defaults = {
            "lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay, "maximize": maximize,
            "foreach": foreach, "capturable": capturable, "differentiable": differentiable,
        }  # fmt: skip
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        rho, eps = group["rho"], group["eps"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = _direction(p, group)
            state = self.state.setdefault(p, {})
            if "square_avg" not in state:
                state["step"] = 0
                state["square_avg"] = zeros_like(p)
                state["acc_delta"] = zeros_like(p)
            state["step"] += 1
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            square_avg.mul_(rho).add_(grad * grad * (1 - rho))
            delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
            acc_delta.mul_(rho).add_(delta * delta * (1 - rho))
            p.sub_(delta * group["lr"])
