"""NumPy references for the optimizers and learning-rate schedules: PyTorch's documented
algorithms (torch.optim.SGD, Adam, AdamW as implemented in torch 2.x: ``maximize``
negates the gradient before weight decay), in float64, and the schedules' closed forms."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def sgd(
    start: np.ndarray,
    grads: Sequence[np.ndarray],
    lr: float = 1e-3,
    momentum: float = 0.0,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    maximize: bool = False,
) -> np.ndarray:
    """The parameter after one SGD step per gradient."""
    p, buffer = start.astype(np.float64), None
    for grad in grads:
        d = -grad if maximize else grad.astype(np.float64)
        d = d + weight_decay * p
        if momentum:
            buffer = d if buffer is None else momentum * buffer + (1 - dampening) * d
            d = d + momentum * buffer if nesterov else buffer
        p = p - lr * d
    return p


def adam(
    start: np.ndarray,
    grads: Sequence[np.ndarray],
    lr: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    amsgrad: bool = False,
    maximize: bool = False,
    decoupled: bool = False,
) -> np.ndarray:
    """The parameter after one Adam step per gradient; ``decoupled`` is AdamW (the weights
    shrink by ``lr * weight_decay`` instead of the decay joining the gradient)."""
    beta1, beta2 = betas
    p = start.astype(np.float64)
    m = v = v_max = np.zeros_like(p)
    for t, grad in enumerate(grads, start=1):
        g = -grad if maximize else grad.astype(np.float64)
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = np.maximum(v_max, v)
        second = v_max if amsgrad else v
        denominator = np.sqrt(second) / math.sqrt(1 - beta2**t) + eps
        p = p - lr / (1 - beta1**t) * m / denominator
    return p


def adamw(start: np.ndarray, grads: Sequence[np.ndarray], **options) -> np.ndarray:
    options.setdefault("weight_decay", 1e-2)  # AdamW's default, unlike Adam's 0
    return adam(start, grads, decoupled=True, **options)


# --- schedules: the factor of the base rate at each epoch ------------------------------------
def cosine(epoch: int, period: int, floor: float = 0.0, base: float = 1.0) -> float:
    """Cosine annealing's closed form (it keeps going past ``period``, back up again)."""
    return floor + (base - floor) * (1 + math.cos(math.pi * epoch / period)) / 2


def linear(epoch: int, start: float, end: float, total: int) -> float:
    return start + (end - start) * min(epoch, total) / total


def step(epoch: int, size: int, gamma: float) -> float:
    return gamma ** (epoch // size)


def multistep(epoch: int, milestones: Sequence[int], gamma: float) -> float:
    return gamma ** sum(epoch >= m for m in milestones)


def sequential(
    epoch: int, schedules: Sequence[Callable[[int], float]], milestones: Sequence[int]
) -> float:
    """The schedule whose span holds ``epoch``, counted from the start of that span."""
    starts = [0, *milestones]
    index = sum(epoch >= m for m in milestones)
    return schedules[index](epoch - starts[index])


def rmsprop(
    start: np.ndarray,
    grads: Sequence[np.ndarray],
    lr: float = 1e-2,
    alpha: float = 0.99,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    momentum: float = 0.0,
    centered: bool = False,
    maximize: bool = False,
) -> np.ndarray:
    """The parameter after one RMSprop step per gradient (torch.optim.RMSprop)."""
    p = start.astype(np.float64)
    square_avg, grad_avg, buffer = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for grad in grads:
        g = (-grad if maximize else grad).astype(np.float64) + weight_decay * p
        square_avg = alpha * square_avg + (1 - alpha) * g * g
        if centered:
            grad_avg = alpha * grad_avg + (1 - alpha) * g
            denominator = np.sqrt(square_avg - grad_avg**2) + eps
        else:
            denominator = np.sqrt(square_avg) + eps
        if momentum:
            buffer = momentum * buffer + g / denominator
            p = p - lr * buffer
        else:
            p = p - lr * g / denominator
    return p


def adadelta(
    start: np.ndarray,
    grads: Sequence[np.ndarray],
    lr: float = 1.0,
    rho: float = 0.9,
    eps: float = 1e-6,
    weight_decay: float = 0.0,
    maximize: bool = False,
) -> np.ndarray:
    """The parameter after one Adadelta step per gradient (torch.optim.Adadelta)."""
    p = start.astype(np.float64)
    square_avg, acc_delta = np.zeros_like(p), np.zeros_like(p)
    for grad in grads:
        g = (-grad if maximize else grad).astype(np.float64) + weight_decay * p
        square_avg = rho * square_avg + (1 - rho) * g * g
        delta = np.sqrt(acc_delta + eps) / np.sqrt(square_avg + eps) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta * delta
        p = p - lr * delta
    return p
