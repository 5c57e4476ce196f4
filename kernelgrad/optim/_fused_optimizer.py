"""The shared machinery of the optimizers whose whole update is two fused kernels:
``Adagrad``, ``Adamax``, ``NAdam``, ``RAdam``, ``ASGD`` and ``Rprop``.

Each of them keeps, per parameter, some 0-d state (the step count, NAdam's
``mu_product``, ASGD's ``eta`` and ``mu``) and some state of the parameter's shape
(``exp_avg``, ``sum``, ...). A step is:

1. the *scalar* function ``(0-d state..., lr, settings...) -> (new 0-d state...,
   coefficients...)``: the count advances and the bias corrections and step sizes that
   depend on it are computed;
2. the *update* function ``(p, g, state..., coefficients..., constants...) -> (p,
   state...)``: one elementwise kernel that reads every operand once and writes the
   parameter and its state in place (one launch for all the parameters of a group
   where the backend has ``elementwise_foreach``: the CPU and CUDA; see
   ``nn._fused.launch_each``).

The scalar function is plain Python that is also compiled as a kernel. Eager steps on
a backend with host memory (the CPU) call it in Python on the 0-d state and write the
new values through NumPy views (no launch); the coefficients are rounded to the
parameter's dtype, as the kernel stores them. On a GPU, and whenever ``kg.compile``
traces a step, it runs as a one-element kernel per parameter (one launch per group)
whose outputs feed the update kernel as 0-d tensors, so that every replay advances the
count and recomputes the coefficients on the device. The learning rate is then a 0-d
tensor refreshed before every replay (``Optimizer._lr_operand``): a scheduler changing
it between calls needs no new trace.

The running averages that decay geometrically are set to zero once below the smallest
normal float, as in Adam's kernel (``optimizer.normal_floor``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import tracing
from ..backends.base import ScalarFunction, backend_capability
from ..dtypes import float64
from ..errors import ArgumentError
from ..nn._fused import FedLaunch, launch_each, prefetch_each, prepare_each_fed
from ..ops.creation import empty, tensor
from ..tensor import Tensor
from .adam import _layout, _plan_gradients
from .optimizer import Optimizer

__all__ = ["FusedOptimizer", "check_range"]


def check_range(name: str, ok: bool, message: str) -> None:
    """Raise PyTorch's ``ValueError`` (as ``ArgumentError``) naming the optimizer."""
    if not ok:
        raise ArgumentError(f"{name}: {message}")


class FusedOptimizer(Optimizer):
    """Base class: subclasses set the class attributes below and implement
    :meth:`_new_state`, :meth:`_settings` and :meth:`_constants`."""

    _feeds_lr = True
    # 0-d state the scalar function advances, in its argument order
    _scalar_names: tuple[str, ...] = ("step",)
    # state of the parameter's shape the update writes, in its argument order
    _tensor_names: tuple[str, ...] = ()
    _scalar_python: Any  # staticmethod(the scalar function in Python)
    _scalar_fn: ScalarFunction  # ... compiled
    _update_fn: ScalarFunction
    # whether the scalar function reads the learning rate (Rprop's does not)
    _reads_lr = True

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        super().__init__(params, defaults)
        self._coefficients = self._scalar_fn.nout - len(self._scalar_names)
        # id(group) -> its update prepared for the next eager steps: see _planned_update
        self._plans: dict[int, _Plan] = {}
        # id(group) -> (group, steps to wait before planning again, the last wait)
        self._plan_waits: dict[int, tuple[dict[str, Any], int, int]] = {}
        self._prefetch_updates()

    # --- what subclasses define ---------------------------------------------------------
    def _new_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Tensor]:
        """The state of a parameter before its first step, in PyTorch's key order."""
        raise NotImplementedError

    def _settings(self, group: dict[str, Any]) -> list[float]:
        """The scalar function's arguments after the learning rate."""
        return []

    def _constants(self, group: dict[str, Any], dtype: Any) -> list[float]:
        """The update function's arguments after the coefficients."""
        raise NotImplementedError

    # --- the step ---------------------------------------------------------------------------
    def _lr_is_fed(self, group: dict[str, Any]) -> bool:
        return True  # every update is fused

    def _state_of(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        state = self.state.get(p)
        if not state:
            state = self.state[p] = self._new_state(p, group)
        for name in self._scalar_names:
            value = state[name]
            if not isinstance(value, Tensor):  # a number, from an older checkpoint
                state[name] = tensor(float(value), dtype=p.dtype, device=p.device)
        return state

    def _update_group(self, group: dict[str, Any]) -> None:
        if self._planned_update(group):
            return
        self._unplanned_update(group)
        self._plan_update(group)

    def _unplanned_update(self, group: dict[str, Any]) -> None:
        on_device = tracing.active_recorder() is not None
        settings = self._settings(group)
        scalar_items: dict[Any, list[tuple[list[Tensor], list[Any]]]] = {}
        updates: dict[Any, list[tuple[list[Tensor], list[Any]]]] = {}
        constants: dict[Any, list[float]] = {}
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self._state_of(p, group)
            scalars = [state[name] for name in self._scalar_names]
            rate = self._lr_operand(group, p.device) if self._reads_lr else 0.0
            if on_device or not backend_capability(p._backend, "host_memory"):
                coefficients = [
                    empty((), dtype=p.dtype, device=p.device) for _ in range(self._coefficients)
                ]
                item = ([*scalars, *coefficients], [*scalars, rate, *settings])
                scalar_items.setdefault(p.dtype, []).append(item)
            else:
                coefficients = self._host_step(scalars, rate, settings, p.dtype)
            if p.dtype not in constants:
                constants[p.dtype] = self._constants(group, p.dtype)
            tensors = [state[name] for name in self._tensor_names]
            inputs = [p, p.grad, *tensors, *coefficients, *constants[p.dtype]]
            updates.setdefault(p.dtype, []).append(([p, *tensors], inputs))
        for items in scalar_items.values():
            launch_each(self._scalar_fn, items, float64)
        for dtype, items in updates.items():
            launch_each(self._update_fn, items, dtype)

    def _host_step(
        self, scalars: list[Tensor], lr: float, settings: list[float], dtype: Any
    ) -> list[float]:
        """The scalar function in Python on the 0-d state in host memory: the new state
        is written in place, the coefficients are returned rounded to ``dtype``."""
        arrays = [t.numpy() for t in scalars]
        results = self._scalar_python(*(float(a) for a in arrays), lr, *settings)
        if not isinstance(results, tuple):
            results = (results,)
        for array, value in zip(arrays, results):
            array[()] = value
        for t in scalars:
            t._storage.version += 1
        rounded = dtype.numpy.type
        return [float(rounded(value)) for value in results[len(arrays) :]]

    # --- the prepared update of eager steps (as Adam's: see Adam._planned_update) -------
    # A group whose parameters, gradient layouts and state tensors are those of the step
    # before, on a backend with host memory, in one dtype, with equal 0-d state in every
    # parameter (the usual case: they were all created together), launches the update
    # prepared by ``nn._fused.prepare_each_fed`` with the new gradients and coefficients,
    # and runs the scalar function once for all of them. Anything else takes the path
    # above, which plans again after it ran.

    def _planned_update(self, group: dict[str, Any]) -> bool:
        """Run the group's update from its plan if the plan still holds; False if not
        (nothing was changed then)."""
        plan = self._plans.get(id(group))
        if plan is None or plan.group is not group or not plan.launch.ready():
            return False
        params = group["params"]
        if len(params) != len(plan.params):
            return self._plan_failed(plan)
        grads = _plan_gradients(plan, params, self.state)
        if grads is None or not plan.launch.accepts(grads):
            return self._plan_failed(plan)
        rows = plan.scalars
        first = [float(a) for a in rows[0]]
        for row in rows[1:]:
            for array, value in zip(row, first):
                if array[()] != value:
                    return self._plan_failed(plan)  # the general path keeps each one's
        results = self._scalar_python(*first, group["lr"], *self._settings(group))
        if not isinstance(results, tuple):
            results = (results,)
        count = len(first)
        for row in rows:
            for array, value in zip(row, results):
                array[()] = value
        for storage in plan.scalar_storages:
            storage.version += 1
        rounded = plan.dtype.numpy.type
        coefficients = [float(rounded(value)) for value in results[count:]]
        plan.launch(grads, [*coefficients, *self._constants(group, plan.dtype)])
        plan.used = True
        return True

    def _plan_failed(self, plan: _Plan) -> bool:
        """Drop a plan that no longer holds; one that failed before it was ever used
        makes the next ones wait (1, 3, 7, ... up to 64 steps), as Adam's does."""
        del self._plans[id(plan.group)]
        wait = 0 if plan.used else min(2 * plan.wait + 1, 64)
        self._plan_waits[id(plan.group)] = (plan.group, wait, wait)
        return False

    def _plan_update(self, group: dict[str, Any]) -> None:
        """Prepare the group's update for the next eager steps (see above) where it
        can be and it does not wait after failed plans."""
        if tracing.active_recorder() is not None:
            return
        existing = self._plans.get(id(group))
        if existing is not None and existing.group is group:
            return  # it holds, but could not launch (count_launches watched the backend)
        waiting = self._plan_waits.get(id(group))
        wait = 0
        if waiting is not None and waiting[0] is group:
            wait = waiting[2]
            if waiting[1] > 0:
                self._plan_waits[id(group)] = (group, waiting[1] - 1, wait)
                return
        entries: list[tuple[dict, tuple] | None] = []
        items, rows, storages = [], [], []
        dtype = None
        names = (None, *self._tensor_names, *self._scalar_names)
        for p in group["params"]:
            g = p.grad
            if g is None:
                entries.append(None)
                continue
            state = self.state.get(p)
            if not state or not all(isinstance(state.get(n), Tensor) for n in names[1:]):
                return
            scalars = [state[n] for n in self._scalar_names]
            if dtype is None:
                dtype = p.dtype
            if p.dtype is not dtype or not backend_capability(p._backend, "host_memory"):
                return
            if any(t.numel() != 1 for t in scalars):
                return
            tensors = [p, *(state[n] for n in self._tensor_names), *scalars]
            entries.append((state, tuple(_layout(n, t) for n, t in zip(names, tensors))))
            rows.append([t.numpy() for t in scalars])
            storages += [t._storage for t in scalars]
            outputs = tensors[: 1 + len(self._tensor_names)]
            scalar_count = self._update_fn.nin - 1 - len(outputs)
            items.append((outputs, [p, g, *outputs[1:], *[0.0] * scalar_count]))
        if not items:
            return
        first_scalar = len(items[0][0]) + 1
        fn = self._update_fn
        launch = prepare_each_fed(fn, items, dtype, 1, range(first_scalar, fn.nin))
        if launch is None:
            return
        self._plans[id(group)] = _Plan(group, entries, rows, storages, launch, dtype, wait)

    def _prefetch_updates(self) -> None:
        """Have the update kernel the first step launches compiled ahead where the
        backend can (``nn._fused.prefetch_each``)."""
        fn = self._update_fn
        states = 1 + len(self._tensor_names)
        kinds = ["out0", "array", *(f"out{k}" for k in range(1, states))]
        kinds += ["scalar"] * (fn.nin - len(kinds))
        same: dict[tuple, list[Tensor]] = {}
        for group in self.param_groups:
            for p in group["params"]:
                same.setdefault((p._storage.backend, p.dtype), []).append(p)
        for (_, dtype), params in same.items():
            prefetch_each(fn, kinds, params, dtype)


class _Plan:
    """A group's update prepared for the next eager steps (see
    FusedOptimizer._planned_update): the parameters, per parameter with a gradient its
    state dict and the layouts of its tensors (None for one without), the NumPy views
    of the 0-d state (a row per parameter) and their storages, the prepared launch."""

    __slots__ = ("dtype", "entries", "group", "launch", "params", "scalar_storages",
                 "scalars", "used", "wait")  # fmt: skip

    def __init__(self, group: dict[str, Any], entries: list, scalars: list, storages: list,
                 launch: FedLaunch, dtype: Any, wait: int) -> None:  # fmt: skip
        self.group = group
        self.params = list(group["params"])
        self.entries = entries
        self.scalars = scalars
        self.scalar_storages = storages
        self.launch = launch
        self.dtype = dtype
        self.used = False
        self.wait = wait
