"""torch.distributions.utils: broadcasting parameters, probabilities and logits, and the
lazily computed properties the distributions share."""

from __future__ import annotations

import functools
from numbers import Number
from typing import Any

import kernelgrad as kg

from ..errors import ArgumentError
from ..tensor import Tensor

__all__ = [
    "broadcast_all",
    "clamp_probs",
    "euler_constant",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
]

euler_constant = 0.57721566490153286060  # Euler Mascheroni Constant


def broadcast_all(*values: Any) -> tuple[Tensor, ...]:
    """The values broadcast to one shape: numbers become tensors of the first tensor's
    dtype and device (the default dtype when there is no tensor)."""
    for value in values:
        if not isinstance(value, Tensor | Number):
            raise ArgumentError(
                "Input arguments must all be instances of numbers.Number or Tensor, got "
                f"{type(value).__name__}; pass a number or a kg.tensor"
            )
    if not all(isinstance(value, Tensor) for value in values):
        options: dict[str, Any] = {"dtype": kg.get_default_dtype()}
        for value in values:
            if isinstance(value, Tensor):
                options = {"dtype": value.dtype, "device": value.device}
                break
        values = tuple(
            value if isinstance(value, Tensor) else kg.tensor(value, **options) for value in values
        )
    return tuple(kg.broadcast_tensors(*values))


def _standard_normal(shape: Any, dtype: Any, device: Any) -> Tensor:
    return kg.randn(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum out the ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    required_shape = tuple(value.shape[: value.dim() - dim]) + (-1,)
    return value.reshape(required_shape).sum(-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities clamped into ``[eps, 1 - eps]`` of their dtype."""
    eps = kg.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Sigmoid of binary logits; softmax over the last dim of categorical ones."""
    if is_binary:
        return kg.sigmoid(logits)
    return kg.softmax(logits, dim=-1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds of binary probabilities, logs of categorical ones (clamped first)."""
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return kg.log(ps_clamped) - kg.log1p(-ps_clamped)
    return kg.log(ps_clamped)


class lazy_property:
    """A property computed on first access (with grad enabled) and then stored on the
    instance, as PyTorch's ``lazy_property``."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with kg.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    """What the class attribute gives, so that documentation tools see a property."""

    def __init__(self, wrapped: Any) -> None:
        property.__init__(self, wrapped)
