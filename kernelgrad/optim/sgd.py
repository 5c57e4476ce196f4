"""Stochastic gradient descent with momentum, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..backends.base import ScalarFunction
from ..nn._fused import launch_each
from ..ops.creation import zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, fused_update, normal_floor

__all__ = ["SGD"]


def sgd_plain_update(p, g, lr, weight_decay, sign):
    return p - lr * (g * sign + weight_decay * p)


def sgd_momentum_update(
    p, g, buf, lr, momentum, dampening, weight_decay, nesterov, first, sign, floor
):
    d = g * sign + weight_decay * p
    if first != 0:
        buf = d
    else:
        buf = momentum * buf + (1 - dampening) * d
        if abs(buf) < floor:  # subnormal: see optimizer.normal_floor
            buf = 0.0
    if nesterov != 0:
        d = d + momentum * buf
    else:
        d = buf
    return p - lr * d, buf


SGD_PLAIN = ScalarFunction.from_python(sgd_plain_update)
SGD_MOMENTUM = ScalarFunction.from_python(sgd_momentum_update, nout=2)


class SGD(Optimizer):
    """``p -= lr * d`` with ``d = g + weight_decay * p``, optionally through a momentum
    buffer ``b = momentum * b + (1 - dampening) * d`` (``d = b``, or ``d + momentum * b``
    with ``nesterov``). The formulas are PyTorch's.

    The arguments are PyTorch's, in its order. ``fused`` keeps kernelgrad's meaning:
    None (the default) or True does each parameter's update in one kernel (on the CPU
    one kernel for all the small parameters of a group); ``False``
    uses separate in-place tensor operations (same results, except that the kernel sets
    a momentum buffer that decays below the smallest normal float to zero; see
    ``optimizer.normal_floor``). ``foreach`` and ``differentiable`` are accepted and
    ignored.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0, 2.0]))
    >>> opt = kg.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.8, 1.6]
    """

    _feeds_lr = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(
                f"SGD: lr, momentum and weight_decay must be non-negative (got lr={lr}, "
                f"momentum={momentum}, weight_decay={weight_decay})"
            )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and dampening 0")
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)

    def _update_group(self, group: dict[str, Any]) -> None:
        momentum = group["momentum"]
        dampening, weight_decay = group["dampening"], group["weight_decay"]
        nesterov, sign = group["nesterov"], -1.0 if group["maximize"] else 1.0
        fused = fused_update(group)
        updates: dict[Any, list[tuple[list[Tensor], list[Any]]]] = {}  # per (kernel, dtype)
        for p in group["params"]:
            if p.grad is None:
                continue
            lr = self._lr_operand(group, p.device)
            state = self.state.setdefault(p, {})
            first = "momentum_buffer" not in state
            if momentum != 0 and first:
                state["momentum_buffer"] = zeros_like(p)
            buf = state.get("momentum_buffer")
            if fused:
                if buf is None:
                    item = ([p], [p, p.grad, lr, weight_decay, sign])
                    updates.setdefault((SGD_PLAIN, p.dtype), []).append(item)
                else:
                    inputs = [p, p.grad, buf, lr, momentum, dampening, weight_decay]
                    inputs += [float(nesterov), float(first), sign, normal_floor(p.dtype)]
                    updates.setdefault((SGD_MOMENTUM, p.dtype), []).append(([p, buf], inputs))
            else:
                _sgd_reference(
                    p, state, lr, momentum, dampening, weight_decay, nesterov, sign, first
                )
        for (fn, dtype), items in updates.items():
            launch_each(fn, items, dtype)


def _sgd_reference(
    p: Tensor,
    state: dict[str, Any],
    lr: float,
    momentum: float,
    dampening: float,
    weight_decay: float,
    nesterov: bool,
    sign: float,
    first: bool,
) -> None:
    d = p.grad * sign
    if weight_decay:
        d = d + p * weight_decay
    if momentum:
        buf = state["momentum_buffer"]
        if first:
            buf.copy_(d)
        else:
            buf.mul_(momentum).add_(d * (1 - dampening))
        d = d + buf * momentum if nesterov else buf
    p.sub_(d * lr)
