"""``Muon`` (Keller Jordan's MomentUm Orthogonalized by Newton-Schulz), PyTorch 2.13's
form. For every (2-d) parameter, with gradient ``g``::

    B = lerp(B, g, 1 - momentum)                  (the momentum buffer)
    U = lerp(g, B, momentum) if nesterov else B
    X = U (transposed if it has more rows than columns);  X = X / max(||X||, eps)
    ns_steps times:  A = X @ X.T;  X = a * X + (b * A + c * A @ A) @ X
    p = p * (1 - lr * weight_decay);  p = p - adjusted_lr * X (transposed back)

where ``adjusted_lr`` is ``lr * sqrt(max(1, rows / cols))`` ("original", the default)
or ``lr * 0.2 * sqrt(max(rows, cols))`` ("match_rms_adamw").

One difference from PyTorch: PyTorch runs the Newton-Schulz iteration in bfloat16,
which kernelgrad does not have; it runs here in the parameter's dtype. The update then
differs from PyTorch's by bfloat16's rounding (relative 1e-2 of the update), and equals,
to float32 rounding, what PyTorch computes with the iteration in float32.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import tracing
from ..errors import ShapeError
from ..ops.creation import zeros_like
from ..tensor import Tensor
from ._fused_optimizer import check_range
from .optimizer import Optimizer

__all__ = ["Muon"]

# Keller Jordan's constants, as PyTorch's
EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5


def _orthogonalize(
    update: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float
) -> Tensor:
    """PyTorch's ``_zeropower_via_newtonschulz`` in ``update``'s dtype."""
    if steps >= 100:
        raise ValueError("Muon: ns_steps must be less than 100 for computational efficiency")
    if len(coefficients) != 3:
        raise ValueError(
            f"Muon: ns_coefficients must be a tuple of exactly 3 values, got {coefficients}"
        )
    a, b, c = coefficients
    tall = update.shape[0] > update.shape[1]
    x = update.T if tall else update
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.T if tall else x


def _adjusted_lr(lr: Any, adjust_lr_fn: str | None, shape: tuple[int, ...]) -> Any:
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    """Muon with PyTorch's arguments, defaults, errors and state (``momentum_buffer``).
    Only 2-d parameters: others are refused when the optimizer is made, as in PyTorch
    (with a ``ValueError``); optimize biases and embeddings with another optimizer,
    e.g. ``AdamW``. ``lr`` may be a one-element tensor.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([[1.0, 0.0], [0.0, 2.0]]))
    >>> opt = kg.optim.Muon([w], lr=0.1, weight_decay=0.0)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 2) for v in w.flatten().tolist()]
    [0.89, 0.0, 0.0, 1.93]
    """

    _feeds_lr = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
        eps: float = EPS,
        ns_steps: int = DEFAULT_NS_STEPS,
        adjust_lr_fn: str | None = None,
    ) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            check_range("Muon", False, f"a tensor lr must have 1 element, got {lr.shape}")
        check_range("Muon", float(lr) >= 0.0, f"learning rate should be >= 0 but is: {lr}")
        check_range("Muon", momentum >= 0.0, f"momentum should be >= 0 but is: {momentum}")
        check_range(
            "Muon", weight_decay >= 0.0, f"weight decay should be >= 0 but is: {weight_decay}"
        )
        check_range(
            "Muon",
            adjust_lr_fn in (None, "original", "match_rms_adamw"),
            f"adjust_lr_fn {adjust_lr_fn!r} is not supported (None, 'original' or "
            "'match_rms_adamw')",
        )
        defaults = {
            "lr": lr, "weight_decay": weight_decay, "momentum": momentum,
            "nesterov": nesterov, "ns_coefficients": ns_coefficients, "eps": eps,
            "ns_steps": ns_steps, "adjust_lr_fn": adjust_lr_fn,
        }  # fmt: skip
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ShapeError(
                        "Muon only supports 2D parameters whereas we found a parameter with "
                        f"size: {tuple(p.shape)}; optimize the others (biases, norms) with "
                        "another optimizer such as AdamW"
                    )

    def _lr_is_fed(self, group: dict[str, Any]) -> bool:
        return True

    def _update_group(self, group: dict[str, Any]) -> None:
        momentum, weight_decay = group["momentum"], group["weight_decay"]
        recording = tracing.active_recorder() is not None
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if g.ndim != 2:
                raise ShapeError(f"Muon: a parameter's gradient must be 2-d, got {g.shape}")
            state = self.state.setdefault(p, {})
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = zeros_like(g)
            buf = state["momentum_buffer"]
            lr = self._lr_operand(group, p.device)
            if isinstance(lr, Tensor):
                # the feed of a traced step (float64), or a tensor lr of eager steps
                lr = lr.to(p.dtype) if recording else float(lr)
            buf.lerp_(g, 1 - momentum)
            update = g.lerp(buf, momentum) if group["nesterov"] else buf
            update = _orthogonalize(update, group["ns_coefficients"], group["ns_steps"],
                                    group["eps"])  # fmt: skip
            p.mul_(1 - lr * weight_decay)
            p.sub_(update * _adjusted_lr(lr, group["adjust_lr_fn"], tuple(p.shape)))
