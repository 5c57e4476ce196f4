"""``LBFGS``: PyTorch's limited-memory BFGS (``torch.optim.LBFGS``): each
``step(closure)`` runs up to ``max_iter`` iterations, each a direction from the last
``history_size`` curvature pairs (the two-loop recursion) and a step along it: of ``lr``
without a line search, or found by PyTorch's strong-Wolfe line search (cubic
interpolation with bracketing and zoom, ``line_search_fn="strong_wolfe"``). Like
PyTorch's, it reads scalars back to the host every iteration (the stopping tests and
the line search's conditions), and it keeps its state on the first parameter."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

from .. import autograd
from ..errors import ArgumentError
from ..ops.movement import cat
from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _dot(a: Tensor, b: Tensor) -> float:
    return float((a * b).sum().item())


def _cubic_interpolate(
    x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
    bounds: tuple[float, float] | None = None,
) -> float:  # fmt: skip
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2,
    clamped to ``bounds`` (default: between x1 and x2); their middle where the cubic
    has no minimum (PyTorch's ``_cubic_interpolate``)."""
    if bounds is not None:
        low, high = bounds
    else:
        low, high = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            position = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            position = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(position, low), high)
    return (low + high) / 2.0


def _strong_wolfe(
    evaluate: Callable[[float], tuple[float, Tensor]],
    t: float, d: Tensor, f: float, g: Tensor, gtd: float,
    c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9, max_ls: int = 25,
) -> tuple[float, Tensor, float, int]:  # fmt: skip
    """PyTorch's ``_strong_wolfe``: a step ``t`` along ``d`` satisfying the strong Wolfe
    conditions (sufficient decrease ``c1``, curvature ``c2``), found by bracketing and
    then zooming with cubic interpolation. ``evaluate(t)`` gives the loss and flat
    gradient at the parameters plus ``t * d``. Returns the loss, gradient and step
    chosen and the number of evaluations."""
    d_norm = float(d.abs().amax().item())
    f_new, g_new = evaluate(t)
    evaluations = 1
    gtd_new = _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    iteration = 0
    # bracketing: a step interval that holds one satisfying the conditions
    while iteration < max_ls:
        if f_new > (f + c1 * t * gtd) or (iteration > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        # extrapolate
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        previous = t
        t = _cubic_interpolate(
            t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step)
        )
        t_prev, f_prev, g_prev, gtd_prev = previous, f_new, g_new, gtd_new
        f_new, g_new = evaluate(t)
        evaluations += 1
        gtd_new = _dot(g_new, d)
        iteration += 1
    if iteration == max_ls:  # reached the most evaluations
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
    # zoom: shrink the bracket until a step satisfies the conditions
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and iteration < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(
            bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]
        )
        # a step too close to an end of the bracket: move it in, unless the last one
        # already was close without progress
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evaluations += 1
        gtd_new = _dot(g_new, d)
        iteration += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evaluations


class LBFGS(Optimizer):
    """Limited-memory BFGS with PyTorch's algorithm, defaults, stopping rules and
    line search (``line_search_fn="strong_wolfe"``, or None: a fixed step of ``lr``);
    one parameter group; ``step`` needs a ``closure`` that recomputes the loss (and
    calls ``backward``).

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([3.0, -2.0]))
    >>> opt = kg.optim.LBFGS([w])
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - 1.0) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> _ = opt.step(closure)
    >>> [round(v, 4) for v in w.tolist()]
    [1.0, 1.0]
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if line_search_fn not in (None, "strong_wolfe"):
            raise ArgumentError(
                f"LBFGS: line_search_fn={line_search_fn!r} is not a line search; use "
                "'strong_wolfe' or None (a fixed step of lr along each direction)"
            )
        if lr <= 0:
            raise ArgumentError(f"LBFGS: lr must be positive, got {lr}")
        defaults = {
            "lr": lr, "max_iter": max_iter,
            "max_eval": max_eval if max_eval is not None else max_iter * 5 // 4,
            "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
            "history_size": history_size, "line_search_fn": line_search_fn,
        }  # fmt: skip
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ArgumentError("LBFGS: only one parameter group is supported (as in PyTorch)")

    def _flat_grad(self) -> Tensor:
        from ..ops.creation import zeros_like

        params = self.param_groups[0]["params"]
        parts = [(p.grad if p.grad is not None else zeros_like(p)).reshape(-1) for p in params]
        return cat(parts, 0)

    def _add_to_params(self, step_size: float, direction: Tensor) -> None:
        offset = 0
        for p in self.param_groups[0]["params"]:
            size = p.numel()
            p.add_(direction[offset : offset + size].reshape(p.shape) * step_size)
            offset += size

    def _evaluate_at(
        self, closure: Callable[[], Any], start: list[Tensor], t: float, direction: Tensor
    ) -> tuple[float, Tensor]:
        """The loss and flat gradient at ``start + t * d``; the parameters are set back
        to ``start`` afterwards (PyTorch's ``_directional_evaluate``)."""
        self._add_to_params(t, direction)
        with autograd.enable_grad():
            loss = float(closure().item())
        flat_grad = self._flat_grad()
        for p, value in zip(self.param_groups[0]["params"], start):
            p.copy_(value)
        return loss, flat_grad

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Up to ``max_iter`` iterations; returns the loss the first closure call gave."""
        if closure is None:
            raise ArgumentError("LBFGS.step needs a closure that recomputes the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state.setdefault(group["params"][0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with autograd.enable_grad():
            original_loss = closure()
        loss = float(original_loss.item())
        evaluations = 1
        state["func_evals"] += 1
        with autograd.no_grad():
            flat_grad = self._flat_grad()
            if float(flat_grad.abs().amax().item()) <= tolerance_grad:
                return original_loss
            d, t = state.get("d"), state.get("t")
            old_dirs, old_steps = state.get("old_dirs", []), state.get("old_stps", [])
            ro, h_diag = state.get("ro", []), state.get("H_diag", 1.0)
            previous_grad, previous_loss = state.get("prev_flat_grad"), state.get("prev_loss")
            iteration = 0
            while iteration < max_iter:
                iteration += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat_grad
                    old_dirs, old_steps, ro, h_diag = [], [], [], 1.0
                else:
                    y = flat_grad - previous_grad
                    s = d * t
                    ys = _dot(y, s)
                    if ys > 1e-10:
                        if len(old_dirs) == history_size:
                            old_dirs.pop(0)
                            old_steps.pop(0)
                            ro.pop(0)
                        old_dirs.append(y)
                        old_steps.append(s)
                        ro.append(1.0 / ys)
                        h_diag = ys / _dot(y, y)
                    alphas = [0.0] * len(old_dirs)
                    q = -flat_grad
                    for i in range(len(old_dirs) - 1, -1, -1):
                        alphas[i] = _dot(old_steps[i], q) * ro[i]
                        q = q - old_dirs[i] * alphas[i]
                    d = q * h_diag
                    for i in range(len(old_dirs)):
                        beta = _dot(old_dirs[i], d) * ro[i]
                        d = d + old_steps[i] * (alphas[i] - beta)
                previous_grad = flat_grad.clone()
                previous_loss = loss
                if state["n_iter"] == 1:
                    t = min(1.0, 1.0 / float(flat_grad.abs().sum().item())) * lr
                else:
                    t = lr
                gtd = _dot(flat_grad, d)
                if gtd > -tolerance_change:
                    break
                if group["line_search_fn"] is not None:
                    # the search evaluates the closure at x + t * d and puts x back
                    start = [p.clone() for p in group["params"]]
                    loss, flat_grad, t, searched = _strong_wolfe(
                        functools.partial(self._evaluate_at, closure, start, direction=d),
                        t, d, loss, flat_grad, gtd, max_ls=max_eval - evaluations,
                    )  # fmt: skip
                    self._add_to_params(t, d)
                    converged = float(flat_grad.abs().amax().item()) <= tolerance_grad
                    evaluations += searched
                    state["func_evals"] += searched
                    if iteration == max_iter or evaluations >= max_eval or converged:
                        break
                    if float((d * t).abs().amax().item()) <= tolerance_change:
                        break
                    if abs(loss - previous_loss) < tolerance_change:
                        break
                    continue
                self._add_to_params(t, d)
                converged = False
                if iteration != max_iter:
                    with autograd.enable_grad():
                        loss = float(closure().item())
                    flat_grad = self._flat_grad()
                    converged = float(flat_grad.abs().amax().item()) <= tolerance_grad
                    evaluations += 1
                    state["func_evals"] += 1
                if iteration == max_iter or evaluations >= max_eval or converged:
                    break
                if float((d * t).abs().amax().item()) <= tolerance_change:
                    break
                if abs(loss - previous_loss) < tolerance_change:
                    break
            state.update(
                d=d, t=t, old_dirs=old_dirs, old_stps=old_steps, ro=ro, H_diag=h_diag,
                prev_flat_grad=previous_grad, prev_loss=previous_loss,
            )  # fmt: skip
        return original_loss
