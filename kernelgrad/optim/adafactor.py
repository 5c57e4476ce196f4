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

A step is a few sums per parameter (of ``p * p``; of ``g * g`` over rows and
columns; of ``R`` over its rows; of ``U * U``) and fused elementwise kernels
(``nn._fused``), one launch per group and dtype where the backend runs a foreach
kernel: the scalar kernel (count, ``beta``, ``alpha`` and the weight decay's factor as
0-d tensors), the moments' ``lerp`` (PyTorch's two-sided formula), the update ``U``
(one per parameter) and the parameter's update. Every scalar PyTorch reads to the host
with ``.item()`` (the step count, the norms of ``p`` and ``U``) stays a 0-d tensor on
the parameter's device, so a step never synchronises and ``kg.compile`` records the
whole of it: replays advance the count, and the learning rate is a fed 0-d tensor
(``Optimizer._lr_operand``), so a scheduler needs no new trace.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import tracing
from ..backends.base import ScalarFunction
from ..nn._fused import launch, launch_each
from ..ops.creation import empty, tensor, zeros, zeros_like
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

    def _state_of(self, p: Tensor, g: Tensor) -> dict[str, Any]:
        state = self.state.get(p)
        if not state:
            state = self.state[p] = {"step": zeros((), dtype=p.dtype, device=p.device)}
            if g.ndim > 1:
                for name in ("row_var", "col_var"):
                    shape = self._state_shape(name, p)
                    state[name] = zeros(shape, dtype=g.dtype, device=g.device)
            else:
                state["variance"] = zeros_like(g)
        if not isinstance(state["step"], Tensor):  # a number, from a checkpoint
            state["step"] = tensor(float(state["step"]), dtype=p.dtype, device=p.device)
        return state

    def _update_group(self, group: dict[str, Any]) -> None:
        eps1, eps2 = group["eps"]
        decay, d = group["beta2_decay"], group["d"]
        sign = -1.0 if group["maximize"] else 1.0
        recording = tracing.active_recorder() is not None
        work = []  # (p, g, state, the 0-d coefficients step -> beta, alpha, keep)
        scalars, lerps, squares = [], [], []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if eps1 is None:  # as PyTorch: the first parameter's dtype, for the group
                eps1 = finfo(p.dtype).eps
            state = self._state_of(p, g)
            lr = self._lr_operand(group, p.device)
            if isinstance(lr, Tensor) and not recording:
                lr = float(lr)  # a tensor lr of eager steps (a traced step's feed stays)
            beta, alpha, keep = (empty((), dtype=p.dtype, device=p.device) for _ in range(3))
            size = math.sqrt(p.numel())
            squares_sum = (p * p).sum()  # of the parameter before its weight decay
            scalars.append(
                ([state["step"], beta, alpha, keep],
                 [state["step"], lr, squares_sum, decay, eps2, size, group["weight_decay"]])
            )  # fmt: skip
            if g.ndim > 1:
                square = g * g
                for name, dim in (("row_var", -1), ("col_var", -2)):
                    moment, total = state[name], square.sum(dim, keepdim=True)
                    lerps.append(([moment], [moment, total, g.shape[dim], beta]))
            else:
                squares.append(([state["variance"]], [state["variance"], g, beta]))
            work.append((p, g, state, alpha, keep, size))
        if not work:
            return
        _launch_by_dtype(ADAFACTOR_SCALARS, scalars)
        _launch_by_dtype(ADAFACTOR_LERP, lerps)
        _launch_by_dtype(ADAFACTOR_LERP_SQUARE, squares)
        updates = []
        for p, g, state, alpha, keep, size in work:
            update = empty(g.shape, dtype=g.dtype, device=g.device)
            if g.ndim > 1:
                row, col = state["row_var"], state["col_var"]
                total = row.sum(-2, keepdim=True)
                inputs = [g, row, col, total, row.shape[-2], sign, eps1, eps1 * eps1]
                launch(ADAFACTOR_FACTORED, [update], inputs, g.dtype)
            else:
                inputs = [g, state["variance"], sign, eps1 * eps1]
                launch(ADAFACTOR_UNFACTORED, [update], inputs, g.dtype)
            total = (update * update).sum()
            updates.append(([p], [p, update, alpha, total, keep, size * d]))
        _launch_by_dtype(ADAFACTOR_APPLY, updates)


# --- the fused kernels (``nn._fused``), each a scalar function -----------------------------
def adafactor_scalars(step, lr, squares, decay, eps2, size, weight_decay):
    """The step count, ``1 - beta2_t``, the step size ``alpha`` and the weight decay's
    factor, from the parameter's sum of squares."""
    step = step + 1
    rho = 1.0 / math.sqrt(step)
    if lr < rho:
        rho = lr
    rms = math.sqrt(squares) / size
    if rms < eps2:
        rms = eps2
    return step, step**decay, rms * rho, 1.0 - lr * weight_decay


def adafactor_lerp(s, total, count, w):
    """PyTorch's ``lerp`` towards the mean ``total / count``: from the nearer end."""
    x = total / count
    if abs(w) < 0.5:
        return s + w * (x - s)
    return x - (x - s) * (1.0 - w)


def adafactor_lerp_square(s, g, w):
    x = g * g
    if abs(w) < 0.5:
        return s + w * (x - s)
    return x - (x - s) * (1.0 - w)


def adafactor_factored(g, row, col, total, count, sign, eps1, floor):
    row_mean = total / count
    if row_mean < eps1:
        row_mean = eps1
    v = row * col / row_mean
    if v < floor:
        v = floor
    return (1.0 / math.sqrt(v)) * (g * sign)


def adafactor_unfactored(g, v, sign, floor):
    if v < floor:
        v = floor
    return (1.0 / math.sqrt(v)) * (g * sign)


def adafactor_apply(p, u, alpha, squares, keep, scale):
    denominator = math.sqrt(squares) / scale
    if denominator < 1.0:
        denominator = 1.0
    return p * keep - alpha / denominator * u


ADAFACTOR_SCALARS = ScalarFunction.from_python(adafactor_scalars, nout=4)
ADAFACTOR_LERP = ScalarFunction.from_python(adafactor_lerp)
ADAFACTOR_LERP_SQUARE = ScalarFunction.from_python(adafactor_lerp_square)
ADAFACTOR_FACTORED = ScalarFunction.from_python(adafactor_factored)
ADAFACTOR_UNFACTORED = ScalarFunction.from_python(adafactor_unfactored)
ADAFACTOR_APPLY = ScalarFunction.from_python(adafactor_apply)


def _launch_by_dtype(fn: ScalarFunction, items: list) -> None:
    """``launch_each`` of the items of each dtype (one kernel per group and dtype on a
    backend with ``elementwise_foreach``), computing in that dtype."""
    by_dtype: dict[Any, list] = {}
    for item in items:
        by_dtype.setdefault(item[0][0].dtype, []).append(item)
    for dtype, same in by_dtype.items():
        launch_each(fn, same, dtype)
