"""``kg.accelerator``: PyTorch's device-agnostic ``torch.accelerator`` functions.

kernelgrad's one accelerator is CUDA (a GPU, or numba's simulator under
``NUMBA_ENABLE_CUDASIM=1``). The idiom of PyTorch's tutorials runs unchanged and, on a
machine without a GPU, picks the CPU in about a millisecond:

>>> import kernelgrad as kg
>>> device = kg.accelerator.current_accelerator().type if kg.accelerator.is_available() else "cpu"
>>> kg.ones(2, device=device).device.type == device
True
"""

from __future__ import annotations

from typing import Any

from . import cuda
from .device import Device

__all__ = [
    "current_accelerator",
    "current_device_index",
    "device_count",
    "is_available",
    "synchronize",
]


def is_available() -> bool:
    """True when an accelerator (CUDA) can run tensors: see ``kg.cuda.is_available``."""
    return cuda.is_available()


def current_accelerator(check_available: bool = False) -> Device | None:
    """The accelerator's current device (``cuda:N``), or None when there is none.

    kernelgrad answers from what this machine has (PyTorch from what it was built for),
    so ``check_available`` changes nothing; it is accepted for PyTorch's signature."""
    del check_available
    if not cuda.is_available():
        return None
    return Device("cuda", cuda.current_device())


def device_count() -> int:
    """The number of accelerator devices (0 without one)."""
    return cuda.device_count() if cuda.is_available() else 0


def current_device_index() -> int:
    """The index of the current accelerator device (that of ``with kg.device("cuda:N")``,
    else 0)."""
    return cuda.current_device()


def synchronize(device: Any = None) -> None:
    """Wait until the accelerator's queued work has finished (nothing to do without one)."""
    if cuda.is_available():
        cuda.synchronize(device)
