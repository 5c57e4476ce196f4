"""Learning-rate schedulers.

Each scheduler is a function of its own step count ``last_epoch``: the learning rate
of every parameter group is ``initial_lr * factor(last_epoch)`` (closed forms, equal
to PyTorch's values). Call ``scheduler.step()`` once per epoch (or per batch, for
warmup), after ``optimizer.step()``.

Schedulers combine in two ways:

* :class:`SequentialLR` runs one scheduler after another, switching at milestones (each
  scheduler counts its steps from its own start), e.g. a linear warmup then cosine;
* :class:`ChainedScheduler` applies several at once (their factors multiply).

>>> import kernelgrad as kg
>>> w = kg.nn.Parameter(kg.zeros(1))
>>> opt = kg.optim.SGD([w], lr=1.0)
>>> warmup = kg.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
>>> cosine = kg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
>>> schedule = kg.optim.lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[3])
>>> rates = []
>>> for _ in range(7):
...     rates.append(round(opt.param_groups[0]["lr"], 4))
...     opt.step(); schedule.step()
>>> rates
[0.25, 0.5, 0.75, 1.0, 0.8536, 0.5, 0.1464]
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

from .optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LinearLR",
    "ConstantLR",
    "SequentialLR",
    "ChainedScheduler",
]


class LRScheduler:
    """Base class: subclasses define ``factor(epoch)`` (1.0 at the start)."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(
                f"{type(self).__name__} needs an Optimizer, got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr: list[float] = []
        self.step()

    def factor(self, epoch: int) -> float:
        raise NotImplementedError

    def _lrs_at(self, epoch: int) -> list[float]:
        return [base * self.factor(epoch) for base in self.base_lrs]

    def _apply(self, lrs: Sequence[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = list(lrs)

    def step(self) -> None:
        """Advance one step and set each group's ``lr``."""
        self.last_epoch += 1
        self._apply(self._lrs_at(self.last_epoch))

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last ``step()`` (one per parameter group)."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Plain values (numbers, lists): everything except the optimizer and callables."""
        return {
            key: value
            for key, value in self.__dict__.items()
            if key != "optimizer"
            and not callable(value)
            and not isinstance(value, LRScheduler)
            and not (isinstance(value, list) and value and isinstance(value[0], LRScheduler))
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._apply(self._lrs_at(self.last_epoch))


class LambdaLR(LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``."""

    def __init__(
        self, optimizer: Optimizer, lr_lambda: Callable[[int], float], last_epoch: int = -1
    ) -> None:
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return float(self.lr_lambda(epoch))


class StepLR(LRScheduler):
    """Multiply by ``gamma`` every ``step_size`` steps.

    >>> import kernelgrad as kg
    >>> opt = kg.optim.SGD([kg.nn.Parameter(kg.zeros(1))], lr=1.0)
    >>> schedule = kg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> rates = []
    >>> for _ in range(5):
    ...     rates.append(schedule.get_last_lr()[0]); schedule.step()
    >>> rates
    [1.0, 1.0, 0.5, 0.5, 0.25]
    """

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return self.gamma ** (epoch // self.step_size)


class MultiStepLR(LRScheduler):
    """Multiply by ``gamma`` at each of the ``milestones``."""

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Sequence[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self.milestones = sorted(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return self.gamma ** bisect.bisect_right(self.milestones, epoch)


class ExponentialLR(LRScheduler):
    """Multiply by ``gamma`` every step."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return self.gamma**epoch


class CosineAnnealingLR(LRScheduler):
    """Cosine from ``initial_lr`` down to ``eta_min`` over ``T_max`` steps (and back up
    after, periodically, as in PyTorch):
    ``eta_min + (initial_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``."""

    def __init__(
        self,
        optimizer: Optimizer,
        T_max: int,  # noqa: N803 - PyTorch's name
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _lrs_at(self, epoch: int) -> list[float]:
        cosine = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]

    def factor(self, epoch: int) -> float:
        return (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class LinearLR(LRScheduler):
    """Linear change of the factor from ``start_factor`` to ``end_factor`` over
    ``total_iters`` steps, then constant: a linear warmup with the defaults."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not (0 < start_factor <= 1 and 0 <= end_factor <= 1):
            raise ValueError("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        progress = min(epoch, self.total_iters) / self.total_iters if self.total_iters else 1.0
        return self.start_factor + (self.end_factor - self.start_factor) * progress


class ConstantLR(LRScheduler):
    """``factor`` for the first ``total_iters`` steps, then 1."""

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        self.constant = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return self.constant if epoch < self.total_iters else 1.0


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another; scheduler k takes over at
    ``milestones[k - 1]`` and counts its steps from there."""

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Sequence[LRScheduler],
        milestones: Sequence[int],
        last_epoch: int = -1,
    ) -> None:
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR: expected {len(schedulers) - 1} milestones for "
                f"{len(schedulers)} schedulers, got {len(milestones)}"
            )
        for scheduler in schedulers:
            if scheduler.optimizer is not optimizer:
                raise ValueError("SequentialLR: every scheduler must use the same optimizer")
        self.schedulers = list(schedulers)
        self.milestones = [int(m) for m in milestones]
        super().__init__(optimizer, last_epoch)

    def _lrs_at(self, epoch: int) -> list[float]:
        index = bisect.bisect_right(self.milestones, epoch)
        start = self.milestones[index - 1] if index > 0 else 0
        scheduler = self.schedulers[index]
        scheduler.last_epoch = epoch - start
        return scheduler._lrs_at(epoch - start)

    def factor(self, epoch: int) -> float:  # pragma: no cover - _lrs_at is overridden
        raise NotImplementedError


class ChainedScheduler(LRScheduler):
    """Apply several schedulers at once: their factors multiply (e.g. a warmup and a
    step decay). Stepping the chain steps every scheduler."""

    def __init__(
        self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None
    ) -> None:
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler: give at least one scheduler")
        optimizer = optimizer or schedulers[0].optimizer
        for scheduler in schedulers:
            if scheduler.optimizer is not optimizer:
                raise ValueError("ChainedScheduler: every scheduler must use the same optimizer")
        self.schedulers = schedulers
        super().__init__(optimizer, schedulers[0].last_epoch - 1)

    def _lrs_at(self, epoch: int) -> list[float]:
        lrs = list(self.base_lrs)
        for scheduler in self.schedulers:
            scheduler.last_epoch = epoch
            own = scheduler._lrs_at(epoch)
            lrs = [
                lr * (o / base if base else 0.0)
                for lr, o, base in zip(lrs, own, scheduler.base_lrs)
            ]
        return lrs

    def factor(self, epoch: int) -> float:  # pragma: no cover - _lrs_at is overridden
        raise NotImplementedError
