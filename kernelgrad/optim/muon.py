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
from ..backends.base import ScalarFunction
from ..errors import ShapeError
from ..nn._fused import launch, launch_each
from ..ops.creation import empty, zeros_like
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


def muon_momentum(buf, g, w):
    """``buf.lerp_(g, w)`` with PyTorch's two-sided formula (``w = 1 - momentum``)."""
    if abs(w) < 0.5:
        return buf + w * (g - buf)
    return g - (g - buf) * (1.0 - w)


def muon_nesterov(buf, g, w, m):
    """The momentum buffer and ``g.lerp(buf, m)``, the Nesterov update."""
    if abs(w) < 0.5:
        buf = buf + w * (g - buf)
    else:
        buf = g - (g - buf) * (1.0 - w)
    if abs(m) < 0.5:
        return buf, g + m * (buf - g)
    return buf, buf - (buf - g) * (1.0 - m)


def muon_normalize(u, squares, eps):
    norm = math.sqrt(squares)
    if norm < eps:
        norm = eps
    return u / norm


def muon_polynomial(gram, gram2, b, c):
    return b * gram + c * gram2


def muon_combine(x, y, a):
    return a * x + y


def muon_apply(p, x, lr, weight_decay, ratio):
    return p * (1.0 - lr * weight_decay) - (lr * ratio) * x


MUON_MOMENTUM = ScalarFunction.from_python(muon_momentum)
MUON_NESTEROV = ScalarFunction.from_python(muon_nesterov, nout=2)
MUON_NORMALIZE = ScalarFunction.from_python(muon_normalize)
MUON_POLYNOMIAL = ScalarFunction.from_python(muon_polynomial)
MUON_COMBINE = ScalarFunction.from_python(muon_combine)
MUON_APPLY = ScalarFunction.from_python(muon_apply)


def _orthogonalize(
    update: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float
) -> Tensor:
    """PyTorch's ``_zeropower_via_newtonschulz`` in ``update``'s dtype (transposed
    back by the caller when ``update`` has more rows than columns), its ``addmm``s as a
    matmul and a fused kernel each."""
    if steps >= 100:
        raise ValueError("Muon: ns_steps must be less than 100 for computational efficiency")
    if len(coefficients) != 3:
        raise ValueError(
            f"Muon: ns_coefficients must be a tuple of exactly 3 values, got {coefficients}"
        )
    a, b, c = coefficients
    dtype, device = update.dtype, update.device
    u = update.T if update.shape[0] > update.shape[1] else update
    x = empty(u.shape, dtype=dtype, device=device)
    launch(MUON_NORMALIZE, [x], [u, (update * update).sum(), eps], dtype)
    for _ in range(steps):
        gram = x @ x.T
        polynomial = empty(gram.shape, dtype=dtype, device=device)
        launch(MUON_POLYNOMIAL, [polynomial], [gram, gram @ gram, b, c], dtype)
        combined = empty(x.shape, dtype=dtype, device=device)
        launch(MUON_COMBINE, [combined], [x, polynomial @ x, a], dtype)
        x = combined
    return x


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
        momenta, nesterov, applies, updates = [], [], [], []
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
            if group["nesterov"]:
                update = empty(g.shape, dtype=g.dtype, device=g.device)
                nesterov.append(([buf, update], [buf, g, 1 - momentum, momentum]))
            else:
                update = buf
                momenta.append(([buf], [buf, g, 1 - momentum]))
            updates.append((p, update))
        if not updates:
            return
        _launch_by_dtype(MUON_NESTEROV, nesterov)
        _launch_by_dtype(MUON_MOMENTUM, momenta)
        for p, update in updates:
            x = _orthogonalize(update, group["ns_coefficients"], group["ns_steps"],
                               group["eps"])  # fmt: skip
            if x.shape != p.shape:
                x = x.T
            lr = self._lr_operand(group, p.device)
            if isinstance(lr, Tensor) and not recording:
                lr = float(lr)  # a tensor lr of eager steps (a traced step's feed stays)
            ratio = _adjusted_lr(1.0, group["adjust_lr_fn"], tuple(p.shape))
            applies.append(([p], [p, x, lr, weight_decay, ratio]))
        _launch_by_dtype(MUON_APPLY, applies)


def _launch_by_dtype(fn: ScalarFunction, items: list) -> None:
    """``launch_each`` of the items of each dtype, computing in that dtype."""
    by_dtype: dict[Any, list] = {}
    for item in items:
        by_dtype.setdefault(item[0][0].dtype, []).append(item)
    for dtype, same in by_dtype.items():
        launch_each(fn, same, dtype)
