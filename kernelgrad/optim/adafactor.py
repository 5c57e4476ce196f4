"""``Adafactor`` (Shazeer and Stern), PyTorch 2.13's variant. For every parameter, with
gradient ``g`` at step ``t``::

    g = -g (maximize)
    beta = t ** beta2_decay                       (1 - beta2_t)
    rho = min(lr, 1 / sqrt(t));  alpha = max(eps2, RMS(p)) * rho
    p = p * (1 - lr * weight_decay)
    2-d and more (factored over the last two dims):
        R = lerp(R, mean(g * g, dim=-1), beta);  C = lerp(C, mean(g * g, dim=-2), beta)
        V = (R @ C) / max(mean(R, dim=-2), eps1)
    otherwise:
        V = lerp(V, g * g, beta)
    U = g / sqrt(max(V, eps1 ** 2));  p = p - alpha / max(1, RMS(U) / d) * U

The update is built from tensor operations (reductions, a batched outer product and a
few elementwise ops per parameter), not a fused kernel: the factored second moment
needs row and column means in the middle of the step. Every scalar PyTorch reads to
the host with ``.item()`` (the step count, the norms of ``p`` and ``U``) stays a 0-d
tensor on the parameter's device here, so a step never synchronises and ``kg.compile``
records the whole of it: replays advance the count, and the learning rate is a fed 0-d
tensor (``Optimizer._lr_operand``), so a scheduler needs no new trace.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import tracing
from ..ops.creation import zeros, zeros_like
from ..ops.torch_math import finfo
from ..tensor import Tensor
from ._fused_optimizer import check_range
from .optimizer import Optimizer

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor with PyTorch's arguments, defaults, errors and state (``step``, a 0-d
    tensor on the parameter's device; ``row_var`` and ``col_var`` of shapes
    ``(..., m, 1)`` and ``(..., 1, n)`` for a parameter of two or more dims,
    ``variance`` for the others). ``lr`` may be a one-element tensor, as in PyTorch
    (its value is read on every step). ``foreach`` is accepted and ignored.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([[1.0, -1.0], [2.0, 0.5]]))
    >>> opt = kg.optim.Adafactor([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.flatten().tolist()]
    [0.9078, -0.8156, 1.8735, 0.4368]
    """

    _feeds_lr = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float | Tensor = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            check_range("Adafactor", False, f"a tensor lr must have 1 element, got {lr.shape}")
        name = "Adafactor"
        check_range(name, float(lr) >= 0.0, f"learning rate should be >= 0 but is: {lr}")
        check_range(name, beta2_decay <= 0.0, f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None:
            check_range(name, eps[0] >= 0.0, f"epsilon1 should be >= 0 but is: {eps[0]}")
        check_range(name, eps[1] >= 0.0, f"epsilon2 should be >= 0 but is: {eps[1]}")
        check_range(name, d >= 1.0, f"clipping threshold d should be >= 1 but is: {d}")
        check_range(
            name, weight_decay >= 0.0, f"weight_decay should be >= 0 but is: {weight_decay}"
        )
        defaults = {
            "lr": lr, "beta2_decay": beta2_decay, "eps": eps, "d": d,
            "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
        }  # fmt: skip
        super().__init__(params, defaults)

    def _lr_is_fed(self, group: dict[str, Any]) -> bool:
        return True

    def _state_shape(self, name: str, p: Tensor) -> tuple[int, ...]:
        if name == "row_var":
            return (*p.shape[:-1], 1)
        if name == "col_var":
            return (*p.shape[:-2], 1, p.shape[-1])
        return tuple(p.shape)

    def _update_group(self, group: dict[str, Any]) -> None:
        eps1, eps2 = group["eps"]
        decay, d = group["beta2_decay"], group["d"]
        weight_decay = group["weight_decay"]
        recording = tracing.active_recorder() is not None
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            state = self.state.get(p)
            if not state:
                state = self.state[p] = {"step": zeros((), dtype=p.dtype, device=p.device)}
                if g.ndim > 1:
                    state["row_var"] = zeros(self._state_shape("row_var", p), dtype=g.dtype,
                                             device=g.device)  # fmt: skip
                    state["col_var"] = zeros(self._state_shape("col_var", p), dtype=g.dtype,
                                             device=g.device)  # fmt: skip
                else:
                    state["variance"] = zeros_like(g)
            step = state["step"]
            if not isinstance(step, Tensor):  # a number, from a checkpoint
                step = state["step"] = zeros((), dtype=p.dtype, device=p.device) + float(step)
            lr = self._lr_operand(group, p.device)
            if isinstance(lr, Tensor):
                # the feed of a traced step (float64), or a tensor lr of eager steps
                lr = lr.to(p.dtype) if recording else float(lr)
            if eps1 is None:  # as PyTorch: the first parameter's dtype, for the group
                eps1 = finfo(p.dtype).eps
            small = eps1
            if group["maximize"]:
                g = -g
            step.add_(1)
            beta = step**decay
            rho = step.rsqrt()
            rho = rho.clamp(max=lr) if not isinstance(lr, Tensor) else rho.minimum(lr)
            size = math.sqrt(p.numel())
            alpha = (p.norm() / size).clamp(min=eps2) * rho
            if weight_decay != 0:
                p.mul_(1 - lr * weight_decay)
            if g.ndim > 1:
                square = g * g
                row_var, col_var = state["row_var"], state["col_var"]
                row_var.lerp_(square.mean(-1, keepdim=True), beta)
                col_var.lerp_(square.mean(-2, keepdim=True), beta)
                estimate = row_var @ col_var
                estimate = estimate / row_var.mean(-2, keepdim=True).clamp(min=small)
            else:
                estimate = state["variance"]
                estimate.lerp_(g * g, beta)
            update = estimate.clamp(min=small * small).rsqrt() * g
            denominator = (update.norm() / (size * d)).clamp(min=1.0)
            p.sub_(update * (alpha / denominator))
