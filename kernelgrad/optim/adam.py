"""Adam and AdamW (Kingma & Ba; Loshchilov & Hutter), with PyTorch's formulas.

For every parameter, with gradient ``g`` at step ``t``::

    g = g + weight_decay * p            (Adam: L2 penalty in the gradient)
    p = p * (1 - lr * weight_decay)     (AdamW, Adam(decoupled_weight_decay=True))
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    v_max = max(v_max, v)               (amsgrad only; used instead of v below)
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

With ``fused=True`` or None (the default) all of it is one elementwise kernel per parameter
that reads p, g, m, v and writes p, m, v in place (one kernel for the parameters of a
group where the backend has ``elementwise_foreach``, the CPU and CUDA; see
``nn._fused.launch_each``); it sets ``m`` and ``v`` to zero where they fall below the
smallest normal float (see ``optimizer.normal_floor``). The step count ``t`` is a 0-d
tensor on the parameter's device, as in PyTorch. Eager steps compute the bias
corrections on the host: on the CPU from the count itself, on a GPU from a copy of it
kept on the host (read once), writing the new counts with one launch per group. While
kg.compile traces, a one-element kernel per parameter advances the count and computes
the corrections on the device, so that replays advance them too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import tracing
from ..backends.base import ScalarFunction, backend_capability
from ..dtypes import float64
from ..nn._fused import FedLaunch, launch, launch_each, prefetch_each, prepare_each_fed
from ..ops.creation import empty, tensor, zeros, zeros_like
from ..tensor import Tensor
from .optimizer import Optimizer, fused_update, normal_floor

__all__ = ["Adam", "AdamW"]


def adam_update(p, g, m, v, step_size, beta1, beta2, eps, l2, keep, correction2_sqrt, sign, floor):
    g = g * sign + l2 * p
    m = m + (1 - beta1) * (g - m)
    if abs(m) < floor:  # subnormal: see optimizer.normal_floor
        m = 0.0
    v = beta2 * v + (1 - beta2) * g * g
    if v < floor:
        v = 0.0
    p = p * keep - step_size * m / (math.sqrt(v) / correction2_sqrt + eps)
    return p, m, v


def adam_amsgrad_update(
    p, g, m, v, v_max, step_size, beta1, beta2, eps, l2, keep, correction2_sqrt, sign, floor
):
    g = g * sign + l2 * p
    m = m + (1 - beta1) * (g - m)
    if abs(m) < floor:
        m = 0.0
    v = beta2 * v + (1 - beta2) * g * g
    if v < floor:
        v = 0.0
    if v > v_max:
        v_max = v
    p = p * keep - step_size * m / (math.sqrt(v_max) / correction2_sqrt + eps)
    return p, m, v, v_max


def adam_step(step, lr, beta1, beta2, decay):
    step = step + 1
    step_size = lr / (1 - beta1**step)
    correction2_sqrt = math.sqrt(1 - beta2**step)
    return step, step_size, correction2_sqrt, 1 - lr * decay


def set_count(count):
    return count


ADAM_STEP = ScalarFunction.from_python(adam_step, nout=4)
SET_COUNT = ScalarFunction.from_python(set_count)
ADAM_UPDATE = ScalarFunction.from_python(adam_update, nout=3)
ADAM_AMSGRAD_UPDATE = ScalarFunction.from_python(adam_amsgrad_update, nout=4)


class Adam(Optimizer):
    """Adam. ``weight_decay`` adds an L2 penalty to the gradient, or with
    ``decoupled_weight_decay=True`` decays the parameter as :class:`AdamW` does (the
    same optimizer then, as in PyTorch). State per parameter: ``step`` (a 0-d tensor on
    the parameter's device), ``exp_avg``, ``exp_avg_sq`` (and ``max_exp_avg_sq`` with
    ``amsgrad``), as in PyTorch. The arguments are PyTorch's, in its order (``amsgrad``
    is the last positional one). ``fused`` keeps kernelgrad's meaning: None (the
    default) or True is one fused kernel per group, False separate in-place tensor
    operations (the same results). ``foreach``, ``capturable`` and ``differentiable``
    are accepted and ignored.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.tensor([1.0, -1.0]))
    >>> opt = kg.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -0.9]
    """

    _decoupled = False
    _feeds_lr = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(
                f"{type(self).__name__}: lr, eps and weight_decay must be non-negative (got "
                f"lr={lr}, eps={eps}, weight_decay={weight_decay})"
            )
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"{type(self).__name__}: betas must be in [0, 1), got {betas}")
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)
        # parameter id -> (its step tensor, the count it holds): see _host_count
        self._host_counts: dict[int, tuple[Tensor, int]] = {}
        # id(group) -> its update prepared for the next eager steps: see _planned_update
        self._update_plans: dict[int, _UpdatePlan] = {}
        # id(group) -> (group, steps to wait before planning again, the last wait)
        self._plan_waits: dict[int, tuple[dict[str, Any], int, int]] = {}
        self._prefetch_updates()

    def _prefetch_updates(self) -> None:
        """Have the fused update kernels the first step will launch compiled ahead where
        the backend can (``nn._fused.prefetch_each``: a compile worker on the CPU), while
        the first forward and backward passes run."""
        for group in self.param_groups:
            if not fused_update(group):
                continue
            fn = ADAM_AMSGRAD_UPDATE if group["amsgrad"] else ADAM_UPDATE
            states = 4 if group["amsgrad"] else 3  # p, m, v (, v_max): updated in place
            kinds = ["out0", "array", *(f"out{k}" for k in range(1, states))]
            kinds += ["scalar"] * (fn.nin - len(kinds))
            same: dict[tuple, list[Tensor]] = {}
            for p in group["params"]:
                if p.requires_grad:
                    same.setdefault((p._storage.backend, p.dtype), []).append(p)
            for (_, dtype), params in same.items():
                prefetch_each(fn, kinds, params, dtype)

    def _decays(self, group: dict[str, Any]) -> tuple[float, float]:
        """``(l2, decay)``: ``weight_decay`` as an L2 penalty in the gradient (Adam) or as
        the decoupled decay ``p *= 1 - lr * decay`` (AdamW, and Adam with
        ``decoupled_weight_decay=True``, as in PyTorch 2.13); the other one is 0."""
        weight_decay = group["weight_decay"]
        if self._decoupled or group.get("decoupled_weight_decay", False):
            return 0.0, weight_decay
        return weight_decay, 0.0

    def _update_group(self, group: dict[str, Any]) -> None:
        fused = fused_update(group)
        if fused and self._planned_update(group):
            return
        self._unplanned_update(group)
        if fused:
            self._plan_update(group)

    def _unplanned_update(self, group: dict[str, Any]) -> None:
        (beta1, beta2), eps = group["betas"], group["eps"]
        amsgrad = group["amsgrad"]
        sign = -1.0 if group["maximize"] else 1.0
        l2, decay = self._decays(group)
        fused = fused_update(group)
        updates: dict[Any, list[tuple[list[Tensor], list[Any]]]] = {}  # per dtype
        counts: dict[Any, list[tuple[list[Tensor], list[Any]]]] = {}  # device step counts
        recorder = tracing.active_recorder()
        if recorder is not None:
            # The traced kernels advance the device counts, now and in every replay
            # (which does not run this code): the host copies are stale afterwards.
            self._forget_host_counts()
            recorder.before_replay(self._forget_host_counts)
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state.setdefault(p, {})
            if not state:
                state["step"] = zeros((), dtype=p.dtype, device=p.device)
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros_like(p)
            step = state["step"]
            if not isinstance(step, Tensor):  # a number, from an older checkpoint
                step = state["step"] = tensor(float(step), dtype=p.dtype, device=p.device)
            rate = self._lr_operand(group, p.device)
            if recorder is not None or backend_capability(step._backend, "host_memory"):
                step_size, correction2_sqrt, keep = _advance(step, rate, beta1, beta2, decay)
            else:
                # Eager on a GPU: the count is known on the host, the corrections are
                # computed there, and the device copy is written by one launch for the
                # whole group below (instead of a one-thread kernel per parameter).
                count = self._host_count(p, step) + 1
                step_size, correction2_sqrt, keep = _corrections(
                    count, rate, beta1, beta2, decay, step.dtype
                )
                counts.setdefault(step.dtype, []).append(([step], [float(count)]))
            m, v = state["exp_avg"], state["exp_avg_sq"]
            scalars = [step_size, beta1, beta2, eps, l2, keep, correction2_sqrt, sign]
            scalars.append(normal_floor(p.dtype))
            if fused:
                if amsgrad:
                    v_max = state["max_exp_avg_sq"]
                    item = ([p, m, v, v_max], [p, p.grad, m, v, v_max, *scalars])
                else:
                    item = ([p, m, v], [p, p.grad, m, v, *scalars])
                updates.setdefault(p.dtype, []).append(item)
            else:
                _adam_reference(
                    p,
                    state,
                    beta1,
                    beta2,
                    eps,
                    l2,
                    keep if decay else None,
                    sign,
                    step_size,
                    correction2_sqrt,
                    amsgrad,
                )
        fn = ADAM_AMSGRAD_UPDATE if amsgrad else ADAM_UPDATE
        for dtype, items in updates.items():
            launch_each(fn, items, dtype)
        for dtype, items in counts.items():
            launch_each(SET_COUNT, items, dtype)

    # --- the prepared update of eager steps ----------------------------------------------
    # An eager fused step of a group whose parameters, state tensors and gradient layouts
    # are those of the step before launches the kernels that step launched, with the new
    # gradients and step sizes (``nn._fused.prepare_each_fed``): the grouping of
    # parameters into kernels, the views and the kernel lookups are done once, not per
    # step (an MLP's step: ~100 -> ~20 us of Python for its 4 parameters). Every
    # decision of the plan is checked on each step against what it was made from; any
    # difference (another parameter list, a gradient missing or of another layout,
    # state replaced by load_state_dict, a parameter's memory swapped, step counts that
    # differ between parameters, kg.compile tracing or count_launches watching) takes
    # the path above, which plans again after it ran.

    def _planned_update(self, group: dict[str, Any]) -> bool:
        """Run the group's update from its plan if the plan still holds; False if not
        (nothing was changed then)."""
        plan = self._update_plans.get(id(group))
        if plan is None or plan.group is not group or not plan.launch.ready():
            return False
        params = group["params"]
        if len(params) != len(plan.params) or bool(group["amsgrad"]) is not plan.amsgrad:
            return self._plan_failed(plan)
        grads = _plan_gradients(plan, params, self.state)
        if grads is None or not plan.launch.accepts(grads):
            return self._plan_failed(plan)
        counts = plan.counts
        count = counts[0][()]
        for array in counts:
            if array[()] != count:
                return self._plan_failed(plan)  # the general path keeps each one's count
        for array in counts:
            array += 1  # as _advance does, in the count's dtype
        (beta1, beta2), eps = group["betas"], group["eps"]
        l2, decay = self._decays(group)
        step_size, correction2_sqrt, keep = _corrections(
            float(counts[0]), group["lr"], beta1, beta2, decay, plan.count_dtype
        )
        sign = -1.0 if group["maximize"] else 1.0
        scalars = [step_size, beta1, beta2, eps, l2, keep, correction2_sqrt, sign, plan.floor]
        plan.launch(grads, scalars)
        plan.used = True
        return True

    def _plan_failed(self, plan: _UpdatePlan) -> bool:
        """Drop a plan that no longer holds. One that failed before it was ever used
        makes the next ones wait (1, 3, 7, ... up to 64 steps): a group whose gradients
        change layout on every step would otherwise plan again on every step."""
        del self._update_plans[id(plan.group)]
        wait = 0 if plan.used else min(2 * plan.wait + 1, 64)
        self._plan_waits[id(plan.group)] = (plan.group, wait, wait)
        return False

    def _plan_update(self, group: dict[str, Any]) -> None:
        """Prepare the group's update for the next eager steps (see above), unless it
        waits after failed plans or cannot be planned: a traced step, parameters of more
        than one dtype or device, a device without host memory (the counts are updated
        in Python), or views that are not contiguous."""
        if tracing.active_recorder() is not None:
            return
        existing = self._update_plans.get(id(group))
        if existing is not None and existing.group is group:
            return  # it holds, but could not launch (count_launches watched the backend)
        waiting = self._plan_waits.get(id(group))
        wait = 0
        if waiting is not None and waiting[0] is group:
            wait = waiting[2]
            if waiting[1] > 0:
                self._plan_waits[id(group)] = (group, waiting[1] - 1, wait)
                return
        amsgrad = bool(group["amsgrad"])
        entries: list[tuple[dict, tuple] | None] = []
        items = []
        counts = []
        dtype = count_dtype = None
        for p in group["params"]:
            g = p.grad
            if g is None:
                entries.append(None)
                continue
            state = self.state.get(p)
            if not state or not isinstance(state.get("step"), Tensor):
                return
            step = state["step"]
            tensors = [p, state["exp_avg"], state["exp_avg_sq"]]
            if amsgrad:
                tensors.append(state["max_exp_avg_sq"])
            if dtype is None:
                dtype, count_dtype = p.dtype, step.dtype
            if p.dtype is not dtype or step.dtype is not count_dtype or step.numel() != 1:
                return
            if not backend_capability(step._backend, "host_memory"):
                return
            names = (None, "exp_avg", "exp_avg_sq", "max_exp_avg_sq")[: len(tensors)]
            layouts = [_layout(name, t) for name, t in zip(names, tensors)]
            entries.append((state, (*layouts, _layout("step", step))))
            counts.append(step.numpy())
            items.append((tensors, [p, g, *tensors[1:], *[0.0] * 9]))
        if not items:
            return
        fn = ADAM_AMSGRAD_UPDATE if amsgrad else ADAM_UPDATE
        first_scalar = len(items[0][0]) + 1
        launch = prepare_each_fed(fn, items, dtype, 1, range(first_scalar, fn.nin))
        if launch is None:
            return
        plan = _UpdatePlan(group, amsgrad, entries, counts, launch, count_dtype)
        plan.floor, plan.wait = normal_floor(dtype), wait
        self._update_plans[id(group)] = plan

    def _host_count(self, p: Tensor, step: Tensor) -> int:
        """The count of ``p``'s device step tensor before this step, known on the host
        after the first read (one device read per parameter after creation, loading a
        checkpoint or running compiled steps)."""
        known = self._host_counts.get(id(p))
        if known is not None and known[0] is step:  # the same tensor (not reloaded)
            count = known[1]
        else:
            count = round(float(step.item()))
        self._host_counts[id(p)] = (step, count + 1)
        return count

    def _forget_host_counts(self) -> None:
        self._host_counts.clear()


class _UpdatePlan:
    """A group's update prepared for the next eager steps (see Adam._planned_update):
    the parameters, per parameter with a gradient its state dict and the layouts of its
    tensors (None for one without), the step counts (NumPy views of the 0-d tensors),
    and the prepared launch."""

    __slots__ = ("amsgrad", "count_dtype", "counts", "entries", "floor", "group", "launch",
                 "params", "used", "wait")  # fmt: skip

    def __init__(self, group: dict[str, Any], amsgrad: bool, entries: list, counts: list,
                 launch: FedLaunch, count_dtype: Any) -> None:  # fmt: skip
        self.group = group
        self.params = list(group["params"])
        self.amsgrad = amsgrad
        self.entries = entries
        self.counts = counts
        self.launch = launch
        self.count_dtype = count_dtype
        self.floor = 0.0
        self.used = False
        self.wait = 0


def _layout(name: str | None, t: Tensor) -> tuple:
    return name, t, t._storage, t._shape, t._strides, t._offset, t.dtype


def _plan_gradients(plan: Any, params: list[Tensor], states: dict) -> list[Tensor] | None:
    """The gradients a prepared update (``plan.params``, ``plan.entries``: per parameter
    its state and layouts, or None for one without a gradient then) runs on, if the plan
    still holds for ``params``: the same parameters, gradients where it had them, the
    same state tensors in the same memory and layouts. None where it does not."""
    grads = []
    for p, q, entry in zip(params, plan.params, plan.entries):
        if p is not q:
            return None
        if entry is None:
            if p.grad is not None:
                return None
            continue
        g = p.grad
        state = states.get(p)
        if g is None or state is not entry[0] or not _same_layouts(entry[1], state):
            return None
        grads.append(g)
    return grads


def _same_layouts(layouts: tuple, state: dict[str, Any]) -> bool:
    """Whether each tensor is still the one in ``state`` under its name (the parameter
    has none) and has the memory and layout it had (its storage, shape, strides, offset
    and dtype: ``_swap_memory``, ``t_()`` and the like change them)."""
    for name, t, storage, shape, strides, offset, dtype in layouts:
        if (
            (name is not None and state.get(name) is not t)
            or t._storage is not storage
            or t._shape is not shape
            or t._strides is not strides
            or t._offset != offset
            or t.dtype is not dtype
        ):
            return False
    return True


def _advance(
    step: Tensor, lr: float | Tensor, beta1: float, beta2: float, decay: float
) -> tuple[Tensor | float, Tensor | float, Tensor | float]:
    """``step += 1``, the bias corrections ``lr / (1 - beta1**step)`` and
    ``sqrt(1 - beta2**step)``, and AdamW's factor ``1 - lr * decay``, in one kernel of one
    thread on the parameter's device (eager steps on the CPU do the same arithmetic on
    the host). ``lr`` is a 0-d tensor when kg.compile traces (see
    ``Optimizer._lr_operand``).

    The step count is a 0-d tensor (as in PyTorch) and the corrections are computed from
    it on the device, in float64, rather than on the host from a Python number: no
    device-to-host copy per step, and a step traced by ``kg.compile`` records this
    kernel, so every replay advances the count and recomputes the corrections (a Python
    number would be frozen at its value when the step was traced)."""
    if tracing.active_recorder() is None and backend_capability(step._backend, "host_memory"):
        # Eager with the count in host memory (the CPU): the same arithmetic in Python (a
        # launch per parameter and step cost ~40 us here, 0.4 ms per LeNet-5 step).
        count = step.numpy()
        count += 1
        return _corrections(float(count), lr, beta1, beta2, decay, step.dtype)
    outputs = [step] + [empty((), dtype=step.dtype, device=step.device) for _ in range(3)]
    launch(ADAM_STEP, outputs, [step, lr, beta1, beta2, decay], float64)
    return outputs[1], outputs[2], outputs[3]


def _corrections(
    count: float, lr: float, beta1: float, beta2: float, decay: float, dtype: Any
) -> tuple[float, float, float]:
    """:func:`adam_step`'s results for step ``count`` computed on the host, rounded to the
    count's dtype as the kernel stores them."""
    rounded = dtype.numpy.type
    step_size = float(rounded(lr / (1 - beta1**count)))
    return step_size, float(rounded(math.sqrt(1 - beta2**count))), 1.0 - lr * decay


def _adam_reference(
    p: Tensor,
    state: dict[str, Any],
    beta1: float,
    beta2: float,
    eps: float,
    l2: float,
    keep: Tensor | float | None,
    sign: float,
    step_size: Tensor | float,
    correction2_sqrt: Tensor | float,
    amsgrad: bool,
) -> None:
    """The same update with separate in-place tensor operations (``keep`` is None
    without decoupled decay)."""
    g = p.grad * sign
    if l2:
        g = g + p * l2
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m.add_((g - m) * (1 - beta1))
    v.mul_(beta2).add_(g * g * (1 - beta2))
    if amsgrad:
        v_max = state["max_exp_avg_sq"]
        v_max.copy_(v_max.maximum(v))
        v = v_max
    if keep is not None:  # AdamW's decay (a 0-d tensor while kg.compile traces)
        p.mul_(keep)
    p.sub_(m / (v.sqrt() / correction2_sqrt + eps) * step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` each step;
    default ``weight_decay=0.01``, as in PyTorch).

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.ones(3))
    >>> opt = kg.optim.AdamW([w], lr=1e-2)
    >>> w.sum().backward(); opt.step()
    >>> round(w.tolist()[0], 4)
    0.9899
    """

    _decoupled = True

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
            capturable=capturable, differentiable=differentiable, fused=fused,
            decoupled_weight_decay=True,
        )  # fmt: skip
