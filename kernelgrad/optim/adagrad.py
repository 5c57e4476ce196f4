"""``Adagrad`` and ``Adamax``: PyTorch's formulas as fused kernels (see
``_fused_optimizer``). For every parameter, with gradient ``g`` at step ``t``::

    g = -g (maximize);  g = g + weight_decay * p

    Adagrad:  s = s + g * g
              p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    Adamax:   m = m + (1 - beta1) * (g - m)
              u = max(beta2 * u, |g| + eps)
              p = p - lr / (1 - beta1**t) * m / u
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..backends.base import ScalarFunction
from ..ops.creation import full_like, zeros, zeros_like
from ..tensor import Tensor
from ._fused_optimizer import FusedOptimizer, check_range
from .optimizer import normal_floor

__all__ = ["Adagrad", "Adamax"]


def adagrad_step(step, lr, lr_decay):
    return step + 1, lr / (1 + step * lr_decay)


def adagrad_update(p, g, s, clr, eps, l2, sign):
    g = g * sign + l2 * p
    s = s + g * g
    p = p - clr * g / (math.sqrt(s) + eps)
    return p, s


def adamax_step(step, lr, beta1):
    step = step + 1
    return step, lr / (1 - beta1**step)


def adamax_update(p, g, m, u, clr, beta1, beta2, eps, l2, sign, floor):
    g = g * sign + l2 * p
    m = m + (1 - beta1) * (g - m)
    if abs(m) < floor:  # subnormal: see optimizer.normal_floor
        m = 0.0
    u = beta2 * u
    bound = abs(g) + eps
    if bound > u:
        u = bound
    p = p - clr * m / u
    return p, m, u


class Adagrad(FusedOptimizer):
    """Adagrad (Duchi et al.) with PyTorch's arguments and state (``step``, a 0-d tensor
    on the parameter's device, and ``sum``). As in PyTorch the state of every parameter
    is created with the optimizer (``sum`` filled with ``initial_accumulator_value``).
    ``foreach``, ``differentiable`` and ``fused`` are accepted and ignored (the update
    is always one fused kernel).

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0, -1.0]))
    >>> opt = kg.optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -0.9]
    """

    _tensor_names = ("sum",)
    _scalar_python = staticmethod(adagrad_step)
    _scalar_fn = ScalarFunction.from_python(adagrad_step, nout=2)
    _update_fn = ScalarFunction.from_python(adagrad_update, nout=2)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        for key, value in (
            ("learning rate", lr), ("lr_decay", lr_decay), ("weight_decay", weight_decay),
            ("initial_accumulator_value", initial_accumulator_value), ("epsilon", eps),
        ):  # fmt: skip
            check_range("Adagrad", value >= 0, f"invalid {key} {value} (must be >= 0)")
        defaults = {
            "lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable, "fused": fused,
        }  # fmt: skip
        super().__init__(params, defaults)
        for group in self.param_groups:  # PyTorch creates the state with the optimizer
            for p in group["params"]:
                self.state[p] = self._new_state(p, group)

    def _new_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Tensor]:
        # PyTorch reads the optimizer's default here, not the group's
        value = self.defaults["initial_accumulator_value"]
        return {
            "step": zeros((), dtype=p.dtype, device=p.device),
            "sum": full_like(p, value),
        }

    def _settings(self, group: dict[str, Any]) -> list[float]:
        return [group["lr_decay"]]

    def _constants(self, group: dict[str, Any], dtype: Any) -> list[float]:
        sign = -1.0 if group["maximize"] else 1.0
        return [group["eps"], group["weight_decay"], sign]


class Adamax(FusedOptimizer):
    """Adamax (Adam with the infinity norm), with PyTorch's arguments and state
    (``step``, ``exp_avg``, ``exp_inf``). ``foreach``, ``differentiable`` and
    ``capturable`` are accepted and ignored.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0, -1.0]))
    >>> opt = kg.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -0.9]
    """

    _tensor_names = ("exp_avg", "exp_inf")
    _scalar_python = staticmethod(adamax_step)
    _scalar_fn = ScalarFunction.from_python(adamax_step, nout=2)
    _update_fn = ScalarFunction.from_python(adamax_update, nout=3)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        check_adam_arguments("Adamax", lr, betas, eps, weight_decay)
        defaults = {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
            "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
            "capturable": capturable,
        }  # fmt: skip
        super().__init__(params, defaults)

    def _new_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Tensor]:
        return {
            "step": zeros((), dtype=p.dtype, device=p.device),
            "exp_avg": zeros_like(p),
            "exp_inf": zeros_like(p),
        }

    def _settings(self, group: dict[str, Any]) -> list[float]:
        return [group["betas"][0]]

    def _constants(self, group: dict[str, Any], dtype: Any) -> list[float]:
        (beta1, beta2), sign = group["betas"], -1.0 if group["maximize"] else 1.0
        return [beta1, beta2, group["eps"], group["weight_decay"], sign, normal_floor(dtype)]


def check_adam_arguments(
    name: str, lr: float, betas: tuple[float, float], eps: float, weight_decay: float
) -> None:
    """PyTorch's checks of the arguments the Adam family shares."""
    check_range(name, lr >= 0, f"invalid learning rate {lr} (must be >= 0)")
    check_range(name, eps >= 0, f"invalid epsilon {eps} (must be >= 0)")
    check_range(name, weight_decay >= 0, f"invalid weight_decay {weight_decay} (must be >= 0)")
    for index, beta in enumerate(betas):
        check_range(name, 0 <= beta < 1, f"invalid beta parameter at index {index}: {beta}")
