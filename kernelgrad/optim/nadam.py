"""``NAdam`` and ``RAdam``: PyTorch's formulas as fused kernels (see
``_fused_optimizer``). Both share Adam's moments; for every parameter, with gradient
``g`` at step ``t``::

    g = -g (maximize)
    p = p * (1 - lr * weight_decay)     (decoupled_weight_decay)
    g = g + weight_decay * p            (otherwise)
    m = m + (1 - beta1) * (g - m)
    v = beta2 * v + (1 - beta2) * g * g

    NAdam:  mu_t = beta1 * (1 - 0.96**(t * momentum_decay) / 2);  mu_product *= mu_t
            d = sqrt(v / (1 - beta2**t)) + eps
            p = p - lr * (1 - mu_t) / (1 - mu_product) * g / d
                  - lr * mu_(t+1) / (1 - mu_product * mu_(t+1)) * m / d

    RAdam:  rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
            p = p - lr / (1 - beta1**t) * r_t * sqrt(1 - beta2**t) * m / (sqrt(v) + eps)
                                                    (rho_t > 5, r_t the rectification)
            p = p - lr / (1 - beta1**t) * m         (otherwise)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..backends.base import ScalarFunction
from ..ops.creation import ones, zeros, zeros_like
from ..tensor import Tensor
from ._fused_optimizer import FusedOptimizer, check_range
from .adagrad import check_adam_arguments
from .optimizer import normal_floor

__all__ = ["NAdam", "RAdam"]


def nadam_step(step, mu_product, lr, beta1, beta2, momentum_decay, decay):
    step = step + 1
    correction2 = 1 - beta2**step
    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
    mu_product = mu_product * mu
    grad_coefficient = -lr * (1.0 - mu) / (1.0 - mu_product)
    avg_coefficient = -lr * mu_next / (1.0 - mu_product * mu_next)
    return step, mu_product, grad_coefficient, avg_coefficient, correction2, 1 - lr * decay


def nadam_update(
    p, g, m, v, grad_coefficient, avg_coefficient, correction2, keep, beta1, beta2, eps, l2,
    sign, floor,
):  # fmt: skip
    g = g * sign + l2 * p
    p = p * keep
    m = m + (1 - beta1) * (g - m)
    if abs(m) < floor:  # subnormal: see optimizer.normal_floor
        m = 0.0
    v = beta2 * v + (1 - beta2) * g * g
    if v < floor:
        v = 0.0
    d = math.sqrt(v / correction2) + eps
    p = p + grad_coefficient * g / d
    p = p + avg_coefficient * m / d
    return p, m, v


def radam_step(step, lr, beta1, beta2, decay):
    step = step + 1
    correction1 = 1 - beta1**step
    correction2 = 1 - beta2**step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * beta2**step / correction2
    if rho_t > 5.0:
        rect = math.sqrt(
            (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
        )
        step_size = lr / correction1 * rect * math.sqrt(correction2)
        adaptive = 1.0
    else:
        step_size = lr / correction1
        adaptive = 0.0
    return step, step_size, adaptive, 1 - lr * decay


def radam_update(p, g, m, v, step_size, adaptive, keep, beta1, beta2, eps, l2, sign, floor):
    g = g * sign + l2 * p
    p = p * keep
    m = m + (1 - beta1) * (g - m)
    if abs(m) < floor:  # subnormal: see optimizer.normal_floor
        m = 0.0
    v = beta2 * v + (1 - beta2) * g * g
    if v < floor:
        v = 0.0
    if adaptive != 0:
        p = p - step_size * m / (math.sqrt(v) + eps)
    else:
        p = p - step_size * m
    return p, m, v


class _AdamFamily(FusedOptimizer):
    _tensor_names = ("exp_avg", "exp_avg_sq")

    def _decay(self, group: dict[str, Any]) -> tuple[float, float]:
        """(the L2 factor added to the gradient, the decoupled decay)"""
        weight_decay = group["weight_decay"]
        if group["decoupled_weight_decay"]:
            return 0.0, weight_decay
        return weight_decay, 0.0

    def _constants(self, group: dict[str, Any], dtype: Any) -> list[float]:
        (beta1, beta2), sign = group["betas"], -1.0 if group["maximize"] else 1.0
        l2 = self._decay(group)[0]
        return [beta1, beta2, group["eps"], l2, sign, normal_floor(dtype)]


class NAdam(_AdamFamily):
    """NAdam (Adam with Nesterov momentum, Dozat), with PyTorch's arguments
    (``momentum_decay``, ``decoupled_weight_decay``: NAdamW) and state (``step``,
    ``mu_product``: 0-d tensors on the parameter's device; ``exp_avg``,
    ``exp_avg_sq``). ``foreach``, ``capturable`` and ``differentiable`` are accepted
    and ignored.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0, -1.0]))
    >>> opt = kg.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.8944, -0.8944]
    """

    _scalar_names = ("step", "mu_product")
    _scalar_python = staticmethod(nadam_step)
    _scalar_fn = ScalarFunction.from_python(nadam_step, nout=6)
    _update_fn = ScalarFunction.from_python(nadam_update, nout=3)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_adam_arguments("NAdam", lr, betas, eps, weight_decay)
        check_range("NAdam", momentum_decay >= 0, f"invalid momentum_decay {momentum_decay}")
        defaults = {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
            "momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize, "foreach": foreach, "capturable": capturable,
            "differentiable": differentiable,
        }  # fmt: skip
        super().__init__(params, defaults)

    def _new_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Tensor]:
        return {
            "step": zeros((), dtype=p.dtype, device=p.device),
            "mu_product": ones((), dtype=p.dtype, device=p.device),
            "exp_avg": zeros_like(p),
            "exp_avg_sq": zeros_like(p),
        }

    def _settings(self, group: dict[str, Any]) -> list[float]:
        (beta1, beta2), decay = group["betas"], self._decay(group)[1]
        return [beta1, beta2, group["momentum_decay"], decay]


class RAdam(_AdamFamily):
    """RAdam (rectified Adam, Liu et al.), with PyTorch's arguments
    (``decoupled_weight_decay``) and state (``step``, a 0-d tensor on the parameter's
    device; ``exp_avg``, ``exp_avg_sq``): while the variance estimate is unreliable
    (rho_t <= 5, the first steps) the update is momentum SGD. ``foreach``,
    ``capturable`` and ``differentiable`` are accepted and ignored.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0, -1.0]))
    >>> opt = kg.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.8, -0.8]
    """

    _scalar_python = staticmethod(radam_step)
    _scalar_fn = ScalarFunction.from_python(radam_step, nout=4)
    _update_fn = ScalarFunction.from_python(radam_update, nout=3)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_adam_arguments("RAdam", lr, betas, eps, weight_decay)
        defaults = {
            "lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
            "maximize": maximize, "foreach": foreach, "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay, "differentiable": differentiable,
        }  # fmt: skip
        super().__init__(params, defaults)

    def _new_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Tensor]:
        return {
            "step": zeros((), dtype=p.dtype, device=p.device),
            "exp_avg": zeros_like(p),
            "exp_avg_sq": zeros_like(p),
        }

    def _settings(self, group: dict[str, Any]) -> list[float]:
        (beta1, beta2), decay = group["betas"], self._decay(group)[1]
        return [beta1, beta2, decay]
