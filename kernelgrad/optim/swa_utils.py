"""``torch.optim.swa_utils``: stochastic weight averaging and exponential moving
averages of a model's weights.

* :class:`AveragedModel` keeps a copy of a model whose parameters (and, with
  ``use_buffers``, buffers) are a running average of the model's: the equal-weight
  average of SWA by default, or any ``avg_fn`` / ``multi_avg_fn`` such as
  :func:`get_ema_multi_avg_fn`'s exponential moving average;
* :class:`SWALR` anneals each group's learning rate to a constant ``swa_lr``;
* :func:`update_bn` recomputes batch normalisation's running statistics for the
  averaged weights with one pass over the data.

>>> import kernelgrad as kg
>>> model = kg.nn.Linear(2, 1)
>>> swa = kg.optim.swa_utils.AveragedModel(model)
>>> swa.update_parameters(model); int(swa.n_averaged)
1
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any

from .. import autograd
from ..dtypes import int64
from ..errors import ArgumentAssertionError, ArgumentError
from ..nn.module import Module
from ..nn.normalization import _BatchNorm, _InstanceNorm
from ..ops.creation import tensor
from ..tensor import Tensor
from .lr_scheduler import LRScheduler, _per_group
from .optimizer import Optimizer

__all__ = [
    "AveragedModel",
    "update_bn",
    "SWALR",
    "get_ema_multi_avg_fn",
    "get_swa_multi_avg_fn",
    "get_ema_avg_fn",
    "get_swa_avg_fn",
]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ArgumentError(
            f"Invalid decay value {decay} provided. Please provide a value in [0,1] range."
        )


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[..., None]:
    """An in-place exponential moving average of lists of tensors:
    ``ema = decay * ema + (1 - decay) * current`` (a ``lerp`` for floating tensors)."""
    _check_decay(decay)

    def ema_update(ema_param_list: Any, current_param_list: Any, _: Any) -> None:
        with autograd.no_grad():
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                if p_ema.dtype.is_floating_point:
                    p_ema.lerp_(p_model, 1 - decay)
                else:
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[..., None]:
    """An in-place equal-weight running average of lists of tensors:
    ``avg = avg + (current - avg) / (num_averaged + 1)``."""

    def swa_update(averaged_param_list: Any, current_param_list: Any, num_averaged: Any) -> None:
        with autograd.no_grad():
            weight = 1 / (num_averaged + 1)
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                if p_avg.dtype.is_floating_point:
                    p_avg.lerp_(p_model, weight)
                else:  # PyTorch's addcdiv_/add_ of the difference
                    p_avg.copy_(p_avg + (p_model - p_avg) * weight)

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[..., Tensor]:
    """``(ema, current, num_averaged) -> decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with autograd.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable[..., Tensor]:
    """``(avg, current, num_averaged) -> avg + (current - avg) / (num_averaged + 1)``."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with autograd.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` (moved to ``device`` if given) holding a running average
    of its weights, updated by :meth:`update_parameters`; ``forward`` runs the copy.
    ``n_averaged`` (an int64 buffer) counts the updates.

    Without ``avg_fn`` and ``multi_avg_fn`` the average is SWA's equal-weight one,
    computed as PyTorch does on the CPU (``avg + (current - avg) / (n + 1)`` per tensor;
    PyTorch's CUDA path uses a ``lerp``, which can differ in the last bit). With
    ``use_buffers`` the buffers are averaged too (as parameters); otherwise they are
    copied from ``model`` on every update.
    """

    def __init__(
        self,
        model: Module,
        device: Any = None,
        avg_fn: Callable[[Tensor, Tensor, Tensor | int], Tensor] | None = None,
        multi_avg_fn: Callable[[Any, Any, Tensor | int], None] | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ArgumentAssertionError(
                "AveragedModel: only one of avg_fn and multi_avg_fn should be provided (avg_fn "
                "averages one tensor at a time, multi_avg_fn lists of them in place)"
            )
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s current weights into this copy (the first call copies
        them)."""
        if self.use_buffers:
            own: Iterable[Tensor] = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs: Iterable[Tensor] = itertools.chain(model.parameters(), model.buffers())
        else:
            own, theirs = self.parameters(), model.parameters()
        own_detached: list[Tensor] = []
        their_detached: list[Tensor] = []
        count = int(self.n_averaged.item())
        with autograd.no_grad():
            for p_averaged, p_model in zip(own, theirs):
                p_model_ = p_model.detach().to(p_averaged.device)
                own_detached.append(p_averaged.detach())
                their_detached.append(p_model_)
                if count == 0:
                    p_averaged.detach().copy_(p_model_)
            if count > 0:
                if self.multi_avg_fn is not None:
                    groups: dict[tuple[str, Any], tuple[list[Tensor], list[Tensor]]] = {}
                    for a, b in zip(own_detached, their_detached):
                        group = groups.setdefault((str(a.device), a.dtype), ([], []))
                        group[0].append(a)
                        group[1].append(b)
                    for (device, _), (averaged, current) in groups.items():
                        self.multi_avg_fn(averaged, current, self.n_averaged.to(device))
                else:
                    avg_fn = self.avg_fn if self.avg_fn is not None else get_swa_avg_fn()
                    for a, b in zip(own_detached, their_detached):
                        a.copy_(avg_fn(a, b, self.n_averaged.to(a.device)))
            if not self.use_buffers:
                # the buffers are not averaged: keep them in sync with the model
                for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
            self.n_averaged.add_(1)


def _batch_norms(model: Module) -> list[_BatchNorm]:
    return [
        m for m in model.modules() if isinstance(m, _BatchNorm) and not isinstance(m, _InstanceNorm)
    ]


def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the running mean and variance of every batch-norm layer of ``model``
    as the plain average over one pass of ``loader`` (each item an input, or a list or
    tuple whose first element is the input), moved to ``device`` if given. The model's
    train/eval mode and the layers' ``momentum`` are restored afterwards."""
    momenta = {}
    with autograd.no_grad():
        for module in _batch_norms(model):
            module.reset_running_stats()
            momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None  # a cumulative average
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate from its value to ``swa_lr`` (one value, or
    a list of one per group) over ``anneal_epochs`` steps, along a cosine or a straight
    line, then keeps it there. As PyTorch's, each step derives the new rate from the
    group's current ``lr`` (not from a closed form of the step count)."""

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: float,
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"SWALR needs an Optimizer, got {type(optimizer).__name__}")
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for value, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ArgumentError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ArgumentError(
                f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}"
            )
        self.anneal_epochs = anneal_epochs
        self._step_count = 0
        self._get_lr_called_within_step = False
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        if anneal_strategy == "cos":
            self.anneal_func = self._cosine_anneal
        else:
            self.anneal_func = self._linear_anneal

    def get_lr(self) -> list[float]:
        """The rates of the current step (PyTorch warns when it is called outside
        ``step()``: use :meth:`get_last_lr`)."""
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, "
                "please use `get_last_lr()`.",
                UserWarning,
                stacklevel=2,
            )
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]

    def step(self, epoch: int | None = None) -> None:
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
        else:
            from .lr_scheduler import EPOCH_DEPRECATION_WARNING

            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
            self.last_epoch = epoch
        self._get_lr_called_within_step = True
        try:
            lrs = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        self._apply(lrs)

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
