"""Samplers built on kernelgrad's uniform and normal draws (``kg.rand``, ``kg.randn``,
so ``kg.manual_seed`` fixes them): gamma variates (Marsaglia and Tsang) with the
implicit reparameterisation gradient, Poisson (inversion below a rate of 10, Hörmann's
transformed rejection above) and binomial counts.

Rejection samplers draw a proposal for every element, keep the accepted ones and draw
again for the rest until none is left: one host check per round, a handful of rounds.
"""

from __future__ import annotations

from typing import Any

import kernelgrad as kg

from ..autograd_function import Function
from ..tensor import Tensor

_MAX_ROUNDS = 1000


def _rand(like: Tensor) -> Tensor:
    return kg.rand(tuple(like.shape), dtype=like.dtype, device=like.device)


def _randn(like: Tensor) -> Tensor:
    return kg.randn(tuple(like.shape), dtype=like.dtype, device=like.device)


def _all(mask: Tensor) -> bool:
    return bool(mask.all().item())


def standard_gamma_sample(concentration: Tensor) -> Tensor:
    """Gamma(concentration, 1) variates, elementwise (no gradient)."""
    with kg.no_grad():
        alpha = concentration.detach()
        boosted = alpha < 1
        a = kg.where(boosted, alpha + 1, alpha)
        d = a - 1.0 / 3.0
        c = 1.0 / kg.sqrt(9.0 * d)
        result = kg.zeros_like(alpha)
        done = kg.zeros_like(alpha, dtype=kg.bool)
        for _ in range(_MAX_ROUNDS):
            x = _randn(alpha)
            u = _rand(alpha)
            v = (1 + c * x) ** 3
            safe_v = kg.where(v > 0, v, kg.ones_like(v))
            accept = (v > 0) & (kg.log(u) < 0.5 * x * x + d - d * safe_v + d * kg.log(safe_v))
            accept = accept & ~done
            result = kg.where(accept, d * safe_v, result)
            done = done | accept
            if _all(done):
                break
        else:  # pragma: no cover - acceptance is above 95% per round
            raise RuntimeError("gamma sampling did not converge; report this as a bug")
        u = _rand(alpha)
        scale = kg.where(boosted, u ** (1.0 / alpha), kg.ones_like(alpha))
        tiny = kg.finfo(alpha.dtype).tiny
        return (result * scale).clamp(min=tiny)


def standard_gamma_grad(concentration: Tensor, sample: Tensor) -> Tensor:
    """``d sample / d concentration`` at fixed CDF value (the implicit reparameterisation
    gradient): ``-(dF/d alpha) / (dF/dx)`` with F the regularised incomplete gamma
    function; dF/d alpha by a central difference in float64."""
    alpha = concentration.detach().double()
    x = sample.detach().double()
    h = 1e-5 * kg.maximum(alpha, kg.ones_like(alpha))
    df_dalpha = (kg.special.gammainc(alpha + h, x) - kg.special.gammainc(alpha - h, x)) / (2 * h)
    log_density = (alpha - 1) * kg.log(x) - x - kg.lgamma(alpha)
    density = kg.exp(log_density)
    grad = kg.where(density > 0, -df_dalpha / density, kg.zeros_like(x))
    return grad.to(concentration.dtype)


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx: Any, concentration: Tensor) -> Tensor:
        sample = standard_gamma_sample(concentration)
        ctx.save_for_backward(concentration, sample)
        return sample

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> Tensor:
        concentration, sample = ctx.saved_tensors
        return grad_output * standard_gamma_grad(concentration, sample)


def standard_gamma(concentration: Tensor) -> Tensor:
    """Gamma(concentration, 1) variates, differentiable in ``concentration``."""
    return _StandardGamma.apply(concentration)


def poisson_sample(rate: Tensor) -> Tensor:
    """Poisson(rate) counts as floats of the rate's dtype (no gradient)."""
    with kg.no_grad():
        lam = rate.detach()
        small = lam < 10
        # inversion for the small rates: add terms of the pmf until they pass u
        lam_small = kg.where(small, lam, kg.zeros_like(lam))
        u = _rand(lam)
        k = kg.zeros_like(lam)
        term = kg.exp(-lam_small)
        total = term.clone()
        going = small & (u > total)
        for _ in range(_MAX_ROUNDS):
            if not going.any().item():
                break
            k = kg.where(going, k + 1, k)
            term = kg.where(going, term * lam_small / kg.maximum(k, kg.ones_like(k)), term)
            total = total + kg.where(going, term, kg.zeros_like(term))
            going = going & (u > total) & (term > 0)
        result = k
        big = ~small
        if big.any().item():
            result = kg.where(big, _poisson_ptrs(kg.where(big, lam, kg.full_like(lam, 10.0))), k)
        return result


def _poisson_ptrs(lam: Tensor) -> Tensor:
    """Hörmann's PTRS for rates of at least 10."""
    slam = kg.sqrt(lam)
    loglam = kg.log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    invalpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)
    result = kg.zeros_like(lam)
    done = kg.zeros_like(lam, dtype=kg.bool)
    for _ in range(_MAX_ROUNDS):
        u = _rand(lam) - 0.5
        v = _rand(lam)
        us = 0.5 - kg.abs(u)
        safe_us = kg.maximum(us, kg.full_like(us, 1e-12))
        k = kg.floor((2 * a / safe_us + b) * u + lam + 0.43)
        quick = (us >= 0.07) & (v <= vr)
        reject = (k < 0) | ((us < 0.013) & (v > us))
        safe_k = kg.maximum(k, kg.zeros_like(k))
        log_ratio = (
            kg.log(kg.maximum(v, kg.full_like(v, 1e-300)))
            + kg.log(invalpha)
            - kg.log(a / (safe_us * safe_us) + b)
        )
        slow = ~reject & (log_ratio <= -lam + safe_k * loglam - kg.lgamma(safe_k + 1))
        accept = (quick | slow) & ~done
        result = kg.where(accept, safe_k, result)
        done = done | accept
        if _all(done):
            return result
    raise RuntimeError(
        "Poisson sampling did not converge; report this as a bug"
    )  # pragma: no cover


def binomial_sample(total_count: Tensor, probs: Tensor) -> Tensor:
    """Binomial(total_count, probs) counts as floats: the number of ``total_count``
    uniform draws below ``probs`` (memory of the shape times the largest count)."""
    with kg.no_grad():
        n_max = int(total_count.max().item()) if total_count.numel() else 0
        if n_max <= 0:
            return kg.zeros_like(probs)
        draws = kg.rand(tuple(probs.shape) + (n_max,), dtype=probs.dtype, device=probs.device)
        trial = kg.arange(n_max, device=probs.device).to(probs.dtype)
        hits = (draws < probs.unsqueeze(-1)) & (trial < total_count.unsqueeze(-1))
        return hits.to(probs.dtype).sum(-1)


def uniform_like(shape: Any, low: float, high: float, like: Tensor) -> Tensor:
    """Uniform draws in ``[low, high)`` of ``like``'s dtype and device."""
    u = kg.rand(tuple(shape), dtype=like.dtype, device=like.device)
    return low + (high - low) * u


__all__ = [
    "binomial_sample",
    "poisson_sample",
    "standard_gamma",
    "standard_gamma_grad",
    "standard_gamma_sample",
    "uniform_like",
]
