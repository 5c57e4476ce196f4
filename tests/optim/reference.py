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


# --- the optimizers with fused kernels of _fused_optimizer (torch.optim's single-tensor
# implementations, in float64) ------------------------------------------------------------
def _direction(grad: np.ndarray, p: np.ndarray, weight_decay: float, maximize: bool):
    return (-grad if maximize else grad).astype(np.float64) + weight_decay * p


def adagrad(
    start, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
    eps=1e-10, maximize=False,
):  # fmt: skip
    p = start.astype(np.float64)
    total = np.full_like(p, initial_accumulator_value)
    for t, grad in enumerate(grads, start=1):
        g = _direction(grad, p, weight_decay, maximize)
        total = total + g * g
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(total) + eps)
    return p


def adamax(start, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    (beta1, beta2), p = betas, start.astype(np.float64)
    m, u = np.zeros_like(p), np.zeros_like(p)
    for t, grad in enumerate(grads, start=1):
        g = _direction(grad, p, weight_decay, maximize)
        m = beta1 * m + (1 - beta1) * g
        u = np.maximum(beta2 * u, np.abs(g) + eps)
        p = p - lr / (1 - beta1**t) * m / u
    return p


def nadam(
    start, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
    decoupled_weight_decay=False, maximize=False,
):  # fmt: skip
    (beta1, beta2), p = betas, start.astype(np.float64)
    m, v, mu_product = np.zeros_like(p), np.zeros_like(p), 1.0
    for t, grad in enumerate(grads, start=1):
        g = _direction(grad, p, 0.0 if decoupled_weight_decay else weight_decay, maximize)
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        mu = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_product *= mu
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        denominator = np.sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu) / (1 - mu_product) * g / denominator
        p = p - lr * mu_next / (1 - mu_product * mu_next) * m / denominator
    return p


def radam(
    start, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
    decoupled_weight_decay=False, maximize=False,
):  # fmt: skip
    (beta1, beta2), p = betas, start.astype(np.float64)
    m, v = np.zeros_like(p), np.zeros_like(p)
    rho_inf = 2 / (1 - beta2) - 1
    for t, grad in enumerate(grads, start=1):
        g = _direction(grad, p, 0.0 if decoupled_weight_decay else weight_decay, maximize)
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)
        rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho_t > 5:
            rect = math.sqrt(
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            )
            p = p - lr * m_hat * rect * math.sqrt(1 - beta2**t) / (np.sqrt(v) + eps)
        else:
            p = p - lr * m_hat
    return p


def asgd(start, grads, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, maximize=False):
    p = start.astype(np.float64)
    ax, eta, mu = np.zeros_like(p), lr, 1.0
    for t, grad in enumerate(grads, start=1):
        g = _direction(grad, p, weight_decay, maximize)
        p = p * (1 - lambd * eta) - eta * g
        ax = ax + (p - ax) * mu
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)
    return p


def rprop(start, grads, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    p = start.astype(np.float64)
    prev, size = np.zeros_like(p), np.full_like(p, lr)
    for grad in grads:
        g = (-grad if maximize else grad).astype(np.float64)
        product = g * prev
        size = np.clip(size * np.where(product > 0, etas[1], np.where(product < 0, etas[0], 1)),
                       *step_sizes)  # fmt: skip
        g = np.where(product < 0, 0.0, g)
        p = p - np.sign(g) * size
        prev = g
    return p
