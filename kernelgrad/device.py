"""Devices and the default device.

A :class:`Device` names where a tensor's memory lives: ``"cpu"`` or ``"cuda:N"``.
Operations run where their inputs live ("compute follows data"); creation functions
use the default device, which ``with kg.device("cuda"):`` changes for a block.

>>> import kernelgrad as kg
>>> kg.device("cpu")
device(type='cpu')
>>> with kg.device("cpu"):
...     kg.zeros(2).device
device(type='cpu')
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["Device", "device", "as_device", "default_device"]

_KNOWN_TYPES = ("cpu", "cuda")


class Device:
    """A device: ``type`` is ``"cpu"`` or ``"cuda"``, ``index`` the GPU number (or None
    for the CPU). Also a context manager that sets the default device for creation."""

    __slots__ = ("_entered", "index", "type")

    def __init__(self, type: str, index: int | None = None) -> None:  # noqa: A002
        if type not in _KNOWN_TYPES:
            raise ValueError(
                f"unknown device type {type!r}; expected one of {', '.join(_KNOWN_TYPES)} "
                "(for example 'cpu', 'cuda' or 'cuda:1')"
            )
        if type == "cuda" and index is None:
            index = 0
        if type == "cpu" and index not in (None, 0):
            raise ValueError(f"the CPU has no device index; got 'cpu:{index}'")
        self.type = type
        self.index = None if type == "cpu" else index
        self._entered: list[Device] = []

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, str):
            try:
                other = as_device(other)
            except ValueError:
                return False
        return isinstance(other, Device) and self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __enter__(self) -> Device:
        _state.stack.append(self)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _state.stack.pop()


class _DeviceState(threading.local):
    def __init__(self) -> None:
        self.stack: list[Device] = []
        self.base: Device = _CPU  # set_default_device


_CPU = Device("cpu")
_state = _DeviceState()


def as_device(value: Any) -> Device:
    """Parse ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a :class:`Device`."""
    if isinstance(value, Device):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "cpu":
            return _CPU
        name, _, index = text.partition(":")
        if index:
            if not index.isdigit():
                raise ValueError(f"bad device string {value!r}; expected e.g. 'cuda:0'")
            return Device(name, int(index))
        return Device(name)
    raise TypeError(f"expected a device such as 'cpu' or 'cuda', got {value!r}")


def device(value: Any) -> Device:
    """``kg.device("cuda:0")``: a :class:`Device`; use it in ``with`` to make it the default."""
    # A fresh object each time, so that nested ``with`` blocks of equal devices work.
    parsed = as_device(value)
    return Device(parsed.type, parsed.index)


def default_device() -> Device:
    """The device creation functions use when none is given (the CPU unless changed)."""
    return _state.stack[-1] if _state.stack else _state.base


def set_default_device(device: Any) -> None:
    """``torch.set_default_device``: the device creation functions use, in this thread,
    outside ``with kg.device(...)`` blocks (which still take precedence); None means the
    CPU again."""
    _state.base = _CPU if device is None else as_device(device)


def get_default_device() -> Device:
    """``torch.get_default_device``: the device a creation function would use now."""
    return default_device()
