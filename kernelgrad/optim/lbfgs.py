"""``LBFGS``: PyTorch's limited-memory BFGS (``torch.optim.LBFGS``) without a line
search: each ``step(closure)`` runs up to ``max_iter`` iterations, each a direction
from the last ``history_size`` curvature pairs (the two-loop recursion) and a step of
``lr`` along it. Like PyTorch's, it reads scalars back to the host every iteration (the
stopping tests), and it keeps its state on the first parameter."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .. import autograd
from ..errors import ArgumentError, UnsupportedError
from ..ops.movement import cat
from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _dot(a: Tensor, b: Tensor) -> float:
    return float((a * b).sum().item())


class LBFGS(Optimizer):
    """Limited-memory BFGS with PyTorch's algorithm, defaults and stopping rules; one
    parameter group; ``step`` needs a ``closure`` that recomputes the loss (and calls
    ``backward``). ``line_search_fn="strong_wolfe"`` is not supported yet.

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
        if line_search_fn is not None:
            raise UnsupportedError(
                f"LBFGS: line_search_fn={line_search_fn!r} is not supported yet; use None "
                "(a fixed step of lr along each direction)"
            )
        if lr <= 0:
            raise ArgumentError(f"LBFGS: lr must be positive, got {lr}")
        defaults = {
            "lr": lr, "max_iter": max_iter,
            "max_eval": max_eval if max_eval is not None else max_iter * 5 // 4,
            "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
            "history_size": history_size, "line_search_fn": None,
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
                if _dot(flat_grad, d) > -tolerance_change:
                    break
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
