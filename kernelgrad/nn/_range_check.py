"""A value-range check as one ``@kg.kernel`` that reports through ``_fused.error_flag``:
on the CPU the error is raised at once, on CUDA at the next device-to-host read, so a
check in a training step does not wait for the device."""

from __future__ import annotations

from collections.abc import Callable

import kernelgrad as kg

from ..tensor import Tensor
from . import _fused


@kg.kernel
def _flag_outside(error, values, low, high):
    """Report (in ``error``: the flat position, and a 1) an element not in [low, high];
    NaN counts as outside."""
    i = kg.index()
    value = values[i]
    if not (value >= low and value <= high):
        error[0] = i
        error[1] = 1


def check_within(
    values: Tensor, low: float, high: float, make_error: Callable[[int], BaseException]
) -> None:
    """Raise ``make_error(flat_position)`` if an element of ``values`` lies outside
    [low, high] or is NaN (lazily on CUDA, see the module docstring)."""
    if not values.numel():
        return
    flat = values.detach().contiguous().reshape(-1)
    error, check = _fused.error_flag(values.device, make_error)
    _flag_outside(error, flat, low, high, ndrange=flat.numel())
    check()
