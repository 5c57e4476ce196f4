"""The ``Optimizer`` base class: parameter groups, per-parameter state, ``zero_grad``
and ``state_dict``.

Subclasses implement :meth:`Optimizer._update_group`. Updates run under ``no_grad``
and change the parameters in place, so references to them (in the model, in other
optimizers) stay valid.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import autograd, tracing
from ..errors import UnsupportedError
from ..tensor import Tensor

__all__ = ["Optimizer"]


@functools.cache
def normal_floor(dtype: Any) -> float:
    """The smallest normal (not subnormal) value of a floating dtype: the fused updates
    set a running average whose magnitude falls below it to zero.

    A parameter whose gradient stays zero (a unit that ReLU switched off) has its momentum
    multiplied by ``beta`` every step; after a few hundred steps it is subnormal, and
    arithmetic on subnormal numbers is handled by slow microcode on x86 CPUs: in LeNet-5
    training a fifth of the first fully connected layer's Adam moments got there in the
    second epoch and made each step 20% slower. Flushing changes an update by less than
    ``lr * 1.2e-38 / eps`` (float32), far below the parameter's own rounding. Cached:
    the updates ask for it per parameter and step."""
    return float(np.finfo(dtype.numpy).tiny) if dtype.is_floating_point else 0.0


def fused_update(group: dict[str, Any]) -> bool:
    """Whether a group of SGD, Adam or AdamW takes the fused kernel: ``fused`` True or
    None (PyTorch's default, which a state_dict saved by PyTorch holds); False takes the
    separate tensor operations."""
    fused = group.get("fused")
    return fused is None or bool(fused)


class _Required:
    def __repr__(self) -> str:
        return "<required>"


required = _Required()


class _LearningRateFeed:
    """A 0-d float64 tensor holding a parameter group's learning rate; calling it writes
    the group's current rate into the tensor if it changed (see
    :meth:`Optimizer._lr_operand`)."""

    def __init__(self, group: dict[str, Any], device: Any) -> None:
        from ..dtypes import float64
        from ..ops.creation import tensor

        self.group = group
        self.written = float(group["lr"])
        self.tensor = tensor(self.written, dtype=float64, device=device)

    def __call__(self) -> None:
        lr = float(self.group["lr"])
        if lr != self.written:
            with autograd.no_grad():
                self.tensor.fill_(lr)
            self.written = lr


class Optimizer:
    """Base class. ``params`` is an iterable of tensors, or of dicts (parameter groups)
    each holding ``"params"`` and optional per-group settings overriding ``defaults``.

    ``state_dict()`` has PyTorch's layout: ``{"state": {index: {name: value}},
    "param_groups": [{setting: value, "params": [index, ...]}]}``, where parameters are
    numbered in the order the groups list them.
    """

    # Subclasses whose fused kernels take the learning rate from :meth:`_lr_operand` set
    # this: under kg.compile a new rate (a scheduler's) is then written into a tensor
    # before each replay instead of tracing the step again.
    _feeds_lr = False

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.state: dict[Tensor, dict[str, Any]] = {}
        self._lr_feeds: dict[tuple[int, str], _LearningRateFeed] = {}
        self.param_groups: list[dict[str, Any]] = []
        groups = list(params)
        if not groups:
            raise ValueError(
                f"{type(self).__name__} got an empty parameter list; pass model.parameters()"
            )
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own settings (e.g. a smaller ``lr``)."""
        group = dict(param_group)
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"{type(self).__name__} can only optimize tensors, got {type(p).__name__}"
                )
            if not p.requires_grad:
                raise ValueError(
                    f"{type(self).__name__}: a parameter of shape {p.shape} does not require "
                    "grad, so it can never be updated"
                )
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = params
        for key, value in self.defaults.items():
            if value is required and key not in group:
                raise ValueError(f"parameter group didn't specify a value of required {key!r}")
            group.setdefault(key, value)
        if group.get("differentiable"):
            raise UnsupportedError(
                f"{type(self).__name__}(differentiable=True): differentiating through the "
                "optimizer's update (meta-learning) is not supported: kernelgrad's updates run "
                "outside autograd, so the gradients it asks for would silently be missing. "
                "Write the update with tensor operations instead (e.g. `p - lr * p.grad` after "
                "`loss.backward(create_graph=True)`), or pass differentiable=False"
            )
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every parameter (drop them, or fill with zeros)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    with autograd.no_grad():
                        p.grad = p.grad.detach()
                        p.grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient. ``closure`` (optional)
        re-computes and returns the loss, as in PyTorch."""
        loss = None
        if closure is not None:
            with autograd.enable_grad():
                loss = closure()
        recorder = tracing.active_recorder()
        if recorder is not None:
            # Traced by kg.compile: the kernels recorded now use this step's settings
            # and state tensors; a replay after either changed (a scheduler set a new lr,
            # load_state_dict replaced the state, state was created by this very call)
            # must trace again instead.
            recorder.watch(
                f"{type(self).__name__}'s settings, state or parameters' requires_grad",
                self._trace_snapshot,
            )
        with autograd.no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _trace_snapshot(self) -> tuple[Any, ...]:
        """What the kernels of a step depend on besides tensor values: every group's
        settings (but a learning rate that is fed, see :meth:`_lr_operand`) and
        parameters, which tensors (and numbers) hold the state, and each parameter's
        ``requires_grad``: freezing one (``requires_grad_(False)``) means backward no
        longer gives it a gradient, so the step skips it; unfreezing it, the reverse."""
        groups = tuple(
            (
                tuple(
                    (k, v)
                    for k, v in group.items()
                    if k != "params" and not (k == "lr" and self._lr_is_fed(group))
                ),
                tuple(map(id, group["params"])),
                tuple([p.requires_grad for p in group["params"]]),
            )
            for group in self.param_groups
        )
        state = tuple(
            (id(p), tuple((k, id(v) if isinstance(v, Tensor) else v) for k, v in s.items()))
            for p, s in self.state.items()
        )
        return groups, state

    def _update_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    def _lr_is_fed(self, group: dict[str, Any]) -> bool:
        return self._feeds_lr and fused_update(group)

    def _lr_operand(self, group: dict[str, Any], device: Any) -> float | Tensor:
        """The group's learning rate as a kernel operand: the number itself, or, while
        kg.compile traces a step of a fused optimizer, a 0-d float64 tensor on ``device``
        that holds it. The trace registers a feed that writes the group's current rate
        into that tensor before every replay, so a scheduler changing ``lr`` between
        calls needs no new trace (as PyTorch's ``capturable`` optimizers read a tensor
        rate inside CUDA graphs)."""
        recorder = tracing.active_recorder()
        if recorder is None or not self._lr_is_fed(group):
            return group["lr"]
        key = (id(group), str(device))
        feed = self._lr_feeds.get(key)
        if feed is None or feed.written != float(group["lr"]):
            # A new tensor (recorded as a constant of this trace) rather than writing the
            # old one, which the trace would record and every replay would then repeat.
            feed = self._lr_feeds[key] = _LearningRateFeed(group, device)
        recorder.before_replay(feed)
        return feed.tensor

    # --- state -------------------------------------------------------------------------------
    def _indexed_params(self) -> list[Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state (tensors are shared, not copied) and its settings."""
        index = {id(p): i for i, p in enumerate(self._indexed_params())}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore settings and state saved by :meth:`state_dict` (tensors are copied to
        each parameter's device and dtype)."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(
                f"the state_dict has {len(groups)} parameter groups but the optimizer has "
                f"{len(self.param_groups)}"
            )
        for saved, own in zip(groups, self.param_groups):
            if len(saved["params"]) != len(own["params"]):
                raise ValueError(
                    f"a parameter group of the state_dict has {len(saved['params'])} "
                    f"parameters but the optimizer's has {len(own['params'])}"
                )
        by_index = {
            saved_index: p
            for saved, own in zip(groups, self.param_groups)
            for saved_index, p in zip(saved["params"], own["params"])
        }
        self.state = {}
        for key, values in state_dict["state"].items():
            p = by_index.get(int(key))
            if p is None:
                raise ValueError(f"the state_dict holds state for unknown parameter {key}")
            restored: dict[str, Any] = {}
            for name, value in values.items():
                if isinstance(value, Tensor):
                    expected = self._state_shape(name, p)
                    if tuple(value.shape) != expected and value.ndim:
                        raise ValueError(
                            f"optimizer state {name!r} of parameter {key} has shape "
                            f"{value.shape}, but it must have shape {expected} (the "
                            f"parameter's is {p.shape})"
                        )
                    dtype = p.dtype if value.dtype.is_floating_point else value.dtype
                    restored[name] = value.detach().to(device=p.device, dtype=dtype).clone()
                else:
                    restored[name] = copy.deepcopy(value)
            self.state[p] = restored
        for saved, own in zip(groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    own[k] = copy.deepcopy(v)

    def _state_shape(self, name: str, p: Tensor) -> tuple[int, ...]:
        """The shape state ``name`` of parameter ``p`` has (but a 0-d one): the
        parameter's, unless an optimizer keeps another (Adafactor's factored moments)."""
        return tuple(p.shape)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)
