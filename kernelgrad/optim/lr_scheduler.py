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
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UnsupportedError
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
    "MultiplicativeLR",
    "PolynomialLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "OneCycleLR",
    "ReduceLROnPlateau",
]


EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler."
)


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

    def step(self, epoch: int | None = None) -> None:
        """Advance one step and set each group's ``lr``. ``step(epoch)`` goes to step
        ``epoch`` instead (PyTorch's deprecated form, which warns as PyTorch does; the
        schedules being closed forms, the rates are those of PyTorch's closed forms)."""
        if epoch is None:
            self.last_epoch += 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
            self.last_epoch = epoch
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
    """``lr = initial_lr * lr_lambda(epoch)`` (one function, or a list of one per
    group, as in PyTorch). The functions are not in ``state_dict``."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.lr_lambdas = _per_group("lr_lambda", optimizer, lr_lambda)
        for function in self.lr_lambdas:
            if not callable(function):
                raise TypeError(
                    f"lr_lambda should be a function, but got {type(function).__name__}"
                )
        super().__init__(optimizer, last_epoch)

    def _lrs_at(self, epoch: int) -> list[float]:
        return [base * float(f(epoch)) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def factor(self, epoch: int) -> float:  # pragma: no cover - _lrs_at is overridden
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}


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
            _check_closed_form(scheduler, "SequentialLR")
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

    def step(self) -> None:  # type: ignore[override] - no epoch, as PyTorch's
        """Advance one step and set each group's ``lr``."""
        super().step()


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
            _check_closed_form(scheduler, "ChainedScheduler")
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

    def step(self) -> None:  # type: ignore[override] - no epoch, as PyTorch's
        """Advance one step of every scheduler and set each group's ``lr``."""
        super().step()


# --- more of torch.optim.lr_scheduler ------------------------------------------------------
def _check_closed_form(scheduler: LRScheduler, combiner: str) -> None:
    if isinstance(scheduler, ReduceLROnPlateau):
        raise TypeError(
            f"{combiner}: ReduceLROnPlateau depends on the metrics, not on the step count, "
            "so it cannot be combined with other schedulers; step it on its own"
        )


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """``value`` for every parameter group: one value, or a list of one per group."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"expected {len(optimizer.param_groups)} values for {name}, got {len(value)}"
            )
        return list(value)
    return [value] * len(optimizer.param_groups)


class MultiplicativeLR(LRScheduler):
    """Multiply the rate by ``lr_lambda(epoch)`` at every step after the first (one
    function, or a list of one per group): ``initial_lr * lr_lambda(1) * ... *
    lr_lambda(epoch)``. Each function is called once per epoch, in order, as PyTorch's
    steps call it; the products are kept (``state_dict`` holds them)."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.lr_lambdas = _per_group("lr_lambda", optimizer, lr_lambda)
        for function in self.lr_lambdas:
            if not callable(function):
                raise TypeError(
                    f"lr_lambda should be a function, but got {type(function).__name__}"
                )
        self.products = [[1.0] for _ in self.lr_lambdas]  # per group, per epoch
        super().__init__(optimizer, last_epoch)

    def _lrs_at(self, epoch: int) -> list[float]:
        lrs = []
        for base, function, products in zip(self.base_lrs, self.lr_lambdas, self.products):
            while len(products) <= epoch:
                products.append(products[-1] * float(function(len(products))))
            lrs.append(base * products[max(epoch, 0)])
        return lrs

    def factor(self, epoch: int) -> float:  # pragma: no cover - _lrs_at is overridden
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}

    def step(self, epoch: int | None = None) -> None:
        """Advance one step (``step(epoch)`` only to the next one: PyTorch's multiplies
        the current rate by ``lr_lambda(epoch)`` once whatever the epoch, which the
        products kept here cannot reproduce)."""
        if epoch is not None and epoch != self.last_epoch + 1:
            raise UnsupportedError(
                f"MultiplicativeLR.step({epoch}) after step {self.last_epoch}: only the "
                "next epoch is supported (a jump multiplies by one factor in PyTorch); "
                "call step() once per epoch"
            )
        super().step(epoch)


class PolynomialLR(LRScheduler):
    """``initial_lr * (1 - min(epoch, total_iters) / total_iters) ** power``: a polynomial
    decay to zero over ``total_iters`` steps."""

    def __init__(
        self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def factor(self, epoch: int) -> float:
        return (1.0 - min(self.total_iters, epoch) / self.total_iters) ** self.power


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from ``initial_lr`` to ``eta_min`` over ``T_0`` steps, then again
    from the top over ``T_0 * T_mult`` steps, and so on (SGDR, Loshchilov & Hutter).
    ``step(epoch)`` takes a fractional epoch as PyTorch's does (``scheduler.step(epoch +
    i / iters)`` within an epoch); ``T_cur`` and ``T_i`` are the position in the current
    cycle and its length."""

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,  # noqa: N803 - PyTorch's name
        T_mult: int = 1,  # noqa: N803 - PyTorch's name
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0 = self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def _position(self, epoch: float) -> tuple[float, int]:
        """(T_cur, T_i) at ``epoch``: the cycles before it are whole."""
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        position, length = epoch, self.T_0
        while position >= length:
            position -= length
            length *= self.T_mult
        return position, length

    def _lrs_at(self, epoch: float) -> list[float]:
        position, length = self._position(max(epoch, 0))
        cosine = (1 + math.cos(math.pi * position / length)) / 2
        return [self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs]

    def factor(self, epoch: int) -> float:  # pragma: no cover - _lrs_at is overridden
        raise NotImplementedError

    def step(self, epoch: float | None = None) -> None:
        """Advance one step, or go to ``epoch`` (a number >= 0, fractions allowed)."""
        if epoch is None:
            epoch = self.last_epoch + 1 if self.last_epoch >= 0 else 0
        elif epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        self.T_cur, self.T_i = self._position(epoch)
        self.last_epoch = math.floor(epoch)
        self._apply(self._lrs_at(epoch))

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        cosine = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        self._apply([self.eta_min + (base - self.eta_min) * cosine for base in self.base_lrs])


def _set_momentum(group: dict[str, Any], momentum: float, use_beta1: bool) -> None:
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


def _momentum_kind(optimizer: Optimizer, name: str) -> bool:
    """Whether the optimizer's momentum is ``betas[0]`` (else ``momentum``)."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(
            f"{name}: the optimizer has neither momentum nor betas, so cycle_momentum=True "
            "cannot cycle it; pass cycle_momentum=False"
        )
    return "betas" in optimizer.defaults


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (Smith): the rate goes from ``base_lr`` up to
    ``max_lr`` over ``step_size_up`` steps and back down over ``step_size_down``, its
    amplitude scaled per ``mode`` (``"triangular"``: constant, ``"triangular2"``: halved
    every cycle, ``"exp_range"``: ``gamma ** step``) or by ``scale_fn``. With
    ``cycle_momentum`` the momentum (``momentum``, or Adam's ``betas[0]``) cycles the
    other way between ``max_momentum`` and ``base_momentum``. Meant to be stepped every
    batch. Under ``kg.compile`` a cycled momentum is a new setting on every call, which
    traces the step again: pass ``cycle_momentum=False`` there."""

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float = 0.8,
        max_momentum: float = 0.9,
        last_epoch: int = -1,
    ) -> None:
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode {mode!r} is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        if scale_fn is None:  # the modes set their own scale mode, as in PyTorch
            self.scale_mode = "iterations" if mode == "exp_range" else "cycle"
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_kind(optimizer, "CyclicLR")
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(
                    self.max_momentums, self.base_momentums, optimizer.param_groups
                ):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        self._base_lrs = base_lrs
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def _lrs_at(self, epoch: int) -> list[float]:
        """The rates at ``epoch``; sets the groups' momentum with ``cycle_momentum`` (as
        PyTorch's ``get_lr`` does)."""
        cycle = math.floor(1 + epoch / self.total_size)
        x = 1.0 + epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else epoch)
        lrs = [
            low + (high - low) * scale_factor * scale
            for low, high in zip(self._base_lrs, self.max_lrs)
        ]
        if self.cycle_momentum:
            for low, high, group in zip(
                self.base_momentums, self.max_momentums, self.optimizer.param_groups
            ):
                _set_momentum(group, high - (high - low) * scale_factor * scale, self.use_beta1)
        return lrs

    def factor(self, epoch: int) -> float:  # pragma: no cover - _lrs_at is overridden
        raise NotImplementedError


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin): the rate rises from ``max_lr / div_factor`` to
    ``max_lr`` over the first ``pct_start`` of ``total_steps`` (or ``epochs *
    steps_per_epoch``), then anneals (``"cos"`` or ``"linear"``) to ``initial_lr /
    final_div_factor``; ``three_phase`` comes back down to the initial rate first. With
    ``cycle_momentum`` the momentum (``momentum``, or Adam's ``betas[0]``) moves the
    other way between ``max_momentum`` and ``base_momentum``. Stepping past
    ``total_steps`` raises ``ValueError``, as in PyTorch. Under ``kg.compile`` a cycled
    momentum is a new setting on every call, which traces the step again: pass
    ``cycle_momentum=False`` there."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self.anneal_strategy = anneal_strategy
        # (last step of the phase, start rate, end rate, start momentum, end momentum)
        up = float(pct_start * self.total_steps) - 1
        if three_phase:
            self.phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                 "base_momentum", "max_momentum"),
                (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]  # fmt: skip
        else:
            self.phases = [
                (up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for high, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = high / div_factor
                group["max_lr"] = high
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_kind(optimizer, "OneCycleLR")
            highs = _per_group("max_momentum", optimizer, max_momentum)
            lows = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for high, low, group in zip(highs, lows, optimizer.param_groups):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _lrs_at(self, epoch: int) -> list[float]:
        """The rates at ``epoch``; sets the groups' momentum with ``cycle_momentum`` (as
        PyTorch's ``get_lr`` does)."""
        if epoch > self.total_steps:
            raise ValueError(
                f"Tried to step {epoch} times. The specified number of total steps is "
                f"{self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr_from, lr_to, momentum_from, momentum_to) in enumerate(self.phases):
                if epoch <= end or i == len(self.phases) - 1:
                    pct = (epoch - start) / (end - start)
                    lrs.append(self._anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        momentum = self._anneal(group[momentum_from], group[momentum_to], pct)
                        _set_momentum(group, momentum, self.use_beta1)
                    break
                start = end
        return lrs

    def factor(self, epoch: int) -> float:  # pragma: no cover - _lrs_at is overridden
        raise NotImplementedError


class ReduceLROnPlateau(LRScheduler):
    """Multiply the rate by ``factor`` (down to ``min_lr``) once a metric has not improved
    for more than ``patience`` steps: ``step(metric)`` after each evaluation. ``mode``
    ``"min"`` or ``"max"``; an improvement beats the best by ``threshold`` (relative or
    absolute, ``threshold_mode``); ``cooldown`` steps after a reduction count no bad
    epochs; a change smaller than ``eps`` is not made. PyTorch's algorithm; not a
    closed form of the step count (it depends on the metrics), so it cannot run inside
    :class:`SequentialLR` or :class:`ChainedScheduler`, as in PyTorch."""

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | list[float] = 0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown (min or max)")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown (rel or abs)"
            )
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            self.default_min_lr = None
            self.min_lrs = _per_group("min_lr", optimizer, min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, value: float, best: float) -> bool:
        if self.mode == "min":
            if self.threshold_mode == "rel":
                return value < best * (1.0 - self.threshold)
            return value < best - self.threshold
        if self.threshold_mode == "rel":
            return value > best * (self.threshold + 1.0)
        return value > best + self.threshold

    def step(self, metrics: Any, epoch: int | None = None) -> None:  # type: ignore[override]
        """Count the metric (a number or a one-element tensor) and reduce the rate if
        it has not improved for more than ``patience`` steps."""
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in the cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter groups but "
                    f"min_lr lists {len(self.min_lrs)} (a group was added after the "
                    "scheduler was made); set min_lrs to one value per group"
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, smallest in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, smallest)
            if old - new > self.eps:
                group["lr"] = new

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
