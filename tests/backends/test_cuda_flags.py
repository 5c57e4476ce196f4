"""The CUDA backend's deferred kernel errors (backends/cuda/flags.py), on a host stand-in
for device memory: which error a synchronisation raises."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from kernelgrad.backends.cuda.flags import SLOTS, DeferredErrors


class _Stream:
    def synchronize(self) -> None:
        pass


class _DeviceArray:
    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __getitem__(self, index: slice) -> np.ndarray:
        return self.array[index]

    def copy_to_device(self, source: np.ndarray, stream: object = None) -> None:
        self.array[:] = source

    def copy_to_host(self, out: np.ndarray, stream: object = None) -> None:
        out[:] = self.array


class _Memory:
    stream = _Stream()

    def context(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def to_device(self, array: np.ndarray) -> _DeviceArray:
        return _DeviceArray(array.copy())


def _error(name: str):
    return lambda value: IndexError(f"{name}: index {value}")


def test_the_earliest_launch_is_reported_after_the_slots_wrap_around():
    errors = DeferredErrors(_Memory())
    for _ in range(SLOTS - 1):  # move the next slot to the end of the table
        errors.slot(_error("unused"))
    errors.check()
    earlier = errors.slot(_error("earlier"))  # the table's last slot
    later = errors.slot(_error("later"))  # wraps around to slot 0
    earlier[:] = [5, 1]
    later[:] = [7, 1]
    with pytest.raises(IndexError, match="earlier: index 5"):
        errors.check()
    errors.check()  # raised once: the table was cleared


def test_a_full_table_is_checked_before_a_slot_is_reused():
    errors = DeferredErrors(_Memory())
    first = errors.slot(_error("first"))
    first[:] = [3, 1]
    for _ in range(SLOTS - 1):
        errors.slot(_error("other"))
    with pytest.raises(IndexError, match="first: index 3"):
        errors.slot(_error("next"))
