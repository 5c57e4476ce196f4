"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_`` as in PyTorch.

Both work in place on ``.grad`` without reading anything back to the host (the scale
factor stays a device tensor), so on CUDA they do not wait for the device; only
``error_if_nonfinite=True`` reads the total norm."""

from __future__ import annotations

import math
import types
import warnings
from collections.abc import Iterable
from typing import Any

from ... import autograd
from ...errors import ArgumentError, DeviceMismatchError
from ...linalg import vector_norm
from ...ops.creation import tensor
from ...ops.movement import stack
from ...tensor import Tensor


def _gradients(parameters: Any) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(
    tensors: Iterable[Tensor] | Tensor,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together, as if concatenated into one
    vector (a 0-d tensor; 0.0 for no tensors)."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device != device:
            raise DeviceMismatchError(
                f"clip_grad_norm_: gradients on {device} and {t.device}; the total norm is "
                "computed on one device (move the model to one device)"
            )
    with autograd.no_grad():
        norms = stack([vector_norm(t, norm_type).to(tensors[0].dtype) for t in tensors])
        total = vector_norm(norms, norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise ArgumentError(
            f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
            f"{total.item()}, so they cannot be clipped; pass error_if_nonfinite=False to "
            "scale them anyway (the result is then NaN)"
        )
    return total


def clip_grad_norm_(
    parameters: Iterable[Tensor] | Tensor,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their total
    ``norm_type``-norm is at most ``max_norm``; returns the total norm before clipping.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.zeros(2))
    >>> w.grad = kg.tensor([3.0, 4.0])
    >>> kg.nn.utils.clip_grad_norm_([w], 1.0).item()
    5.0
    >>> [round(v, 4) for v in w.grad.tolist()]
    [0.6, 0.8]
    """
    if not isinstance(parameters, Tensor):
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and not parameters:
            warnings.warn(
                "`parameters` is an empty generator, no gradient clipping will occur.",
                stacklevel=2,
            )
    grads = _gradients(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grads_with_norm_(
    parameters: Iterable[Tensor] | Tensor,
    max_norm: float,
    total_norm: Tensor,
    foreach: bool | None = None,
) -> None:
    """Scale the gradients of ``parameters`` in place by
    ``min(max_norm / (total_norm + 1e-6), 1)``, a total norm computed before (by
    :func:`get_total_norm`, possibly over several groups); the second half of
    :func:`clip_grad_norm_`.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.zeros(2))
    >>> w.grad = kg.tensor([3.0, 4.0])
    >>> kg.nn.utils.clip_grads_with_norm_([w], 1.0, kg.tensor(10.0))
    >>> [round(v, 4) for v in w.grad.tolist()]
    [0.3, 0.4]
    """
    grads = _gradients(parameters)
    max_norm = float(max_norm)
    if not grads:
        return
    if not isinstance(total_norm, Tensor):
        total_norm = tensor(float(total_norm))
    with autograd.no_grad():
        # PyTorch's factor: max_norm / (total + 1e-6), capped at 1 (no device read)
        scale = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
        for grad in grads:
            grad.mul_(scale.to(grad.device).to(grad.dtype))


def clip_grad_norm(
    parameters: Iterable[Tensor] | Tensor,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Deprecated: :func:`clip_grad_norm_` (with PyTorch's ``FutureWarning``)."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
        "`torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(
    parameters: Iterable[Tensor] | Tensor, clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient of ``parameters`` in place to ``[-clip_value, clip_value]``.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.zeros(2))
    >>> w.grad = kg.tensor([3.0, -0.5])
    >>> kg.nn.utils.clip_grad_value_([w], 1.0)
    >>> w.grad.tolist()
    [1.0, -0.5]
    """
    clip_value = float(clip_value)
    with autograd.no_grad():
        for grad in _gradients(parameters):
            grad.clamp_(-clip_value, clip_value)
