"""``ASGD`` and ``Rprop``: PyTorch's formulas as fused kernels (see
``_fused_optimizer``). For every parameter, with gradient ``g`` at step ``t``::

    ASGD:   g = g + weight_decay * p   (after the sign of maximize)
            p = p * (1 - lambd * eta) - eta * g
            ax = ax + mu * (p - ax)     (ax = p while mu is 1)
            eta = lr / (1 + lambd * lr * t)**alpha;  mu = 1 / max(1, t - t0)

    Rprop:  s = g * prev  (g after the sign of maximize)
            step_size = clamp(step_size * (etaplus if s > 0, etaminus if s < 0, else 1),
                              step_size_min, step_size_max)
            g = 0 where s < 0
            p = p - sign(g) * step_size;  prev = g

ASGD's ``eta`` and ``mu`` (0-d tensors on the parameter's device, as ``step``) are
those of the step before: a new learning rate reaches the update one step later, as in
PyTorch. Rprop reads ``lr`` only when it creates a parameter's ``step_size``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..backends.base import ScalarFunction
from ..ops.creation import full_like, ones, tensor, zeros, zeros_like
from ..tensor import Tensor
from ._fused_optimizer import FusedOptimizer, check_range

__all__ = ["ASGD", "Rprop"]


def asgd_step(step, eta, mu, lr, lambd, alpha, t0):
    used_eta = eta
    used_mu = mu
    step = step + 1
    eta = lr / (1 + lambd * lr * step) ** alpha
    late = step - t0
    if late < 1.0:
        late = 1.0
    return step, eta, 1.0 / late, used_eta, used_mu


def asgd_update(p, g, ax, eta, mu, lambd, l2, sign):
    g = g * sign + l2 * p
    p = p * (1 - lambd * eta) - eta * g
    if mu != 1:
        ax = ax + (p - ax) * mu
    else:
        ax = p
    return p, ax


def rprop_step(step, lr):
    return step + 1


def rprop_update(p, g, prev, step_size, etaminus, etaplus, smallest, largest, sign):
    g = g * sign
    s = g * prev
    if s > 0:
        step_size = step_size * etaplus
    elif s < 0:
        step_size = step_size * etaminus
        g = 0.0
    if step_size < smallest:
        step_size = smallest
    if step_size > largest:
        step_size = largest
    if g > 0:
        p = p - step_size
    elif g < 0:
        p = p + step_size
    return p, g, step_size


class ASGD(FusedOptimizer):
    """Averaged SGD (Polyak & Juditsky), with PyTorch's arguments and state (``step``,
    ``eta``, ``mu``: 0-d tensors on the parameter's device; ``ax``, the average).
    ``foreach``, ``differentiable`` and ``capturable`` are accepted and ignored.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0, -1.0]))
    >>> opt = kg.optim.ASGD([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.8, -0.8]
    """

    _scalar_names = ("step", "eta", "mu")
    _tensor_names = ("ax",)
    _scalar_python = staticmethod(asgd_step)
    _scalar_fn = ScalarFunction.from_python(asgd_step, nout=5)
    _update_fn = ScalarFunction.from_python(asgd_update, nout=2)

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        check_range("ASGD", lr >= 0, f"invalid learning rate {lr} (must be >= 0)")
        check_range("ASGD", weight_decay >= 0, f"invalid weight_decay {weight_decay}")
        defaults = {
            "lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0, "weight_decay": weight_decay,
            "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
            "capturable": capturable,
        }  # fmt: skip
        super().__init__(params, defaults)

    def _new_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Tensor]:
        return {
            "step": zeros((), dtype=p.dtype, device=p.device),
            "eta": tensor(float(group["lr"]), dtype=p.dtype, device=p.device),
            "mu": ones((), dtype=p.dtype, device=p.device),
            "ax": zeros_like(p),
        }

    def _settings(self, group: dict[str, Any]) -> list[float]:
        return [group["lambd"], group["alpha"], group["t0"]]

    def _constants(self, group: dict[str, Any], dtype: Any) -> list[float]:
        sign = -1.0 if group["maximize"] else 1.0
        return [group["lambd"], group["weight_decay"], sign]


class Rprop(FusedOptimizer):
    """Resilient backpropagation, with PyTorch's arguments (``etas``, ``step_sizes``)
    and state (``step``, a 0-d tensor on the parameter's device; ``prev``,
    ``step_size``). Meant for full-batch training: only the signs of the gradients
    count. ``foreach``, ``capturable`` and ``differentiable`` are accepted and ignored.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0, -1.0]))
    >>> opt = kg.optim.Rprop([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -0.9]
    """

    _tensor_names = ("prev", "step_size")
    _scalar_python = staticmethod(rprop_step)
    _scalar_fn = ScalarFunction.from_python(rprop_step, nout=1)
    _update_fn = ScalarFunction.from_python(rprop_update, nout=3)
    _reads_lr = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        check_range("Rprop", lr >= 0, f"invalid learning rate {lr} (must be >= 0)")
        check_range(
            "Rprop", 0.0 < etas[0] < 1.0 < etas[1], f"invalid eta values {etas[0]}, {etas[1]}"
        )
        defaults = {
            "lr": lr, "etas": tuple(etas), "step_sizes": tuple(step_sizes), "foreach": foreach,
            "maximize": maximize, "differentiable": differentiable, "capturable": capturable,
        }  # fmt: skip
        super().__init__(params, defaults)

    def _new_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Tensor]:
        return {
            "step": zeros((), dtype=p.dtype, device=p.device),
            "prev": zeros_like(p),
            "step_size": full_like(p, float(group["lr"])),
        }

    def _constants(self, group: dict[str, Any], dtype: Any) -> list[float]:
        (etaminus, etaplus), (smallest, largest) = group["etas"], group["step_sizes"]
        sign = -1.0 if group["maximize"] else 1.0
        return [etaminus, etaplus, smallest, largest, sign]
