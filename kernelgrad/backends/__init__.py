"""Backend registry. Backends are found by device type and imported on first use, so
``import kernelgrad`` never imports Numba or anything CUDA-related."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..device import Device

if TYPE_CHECKING:
    from .base import Backend

# device type -> (module, factory function)
_REGISTRY: dict[str, tuple[str, str]] = {
    "cpu": ("kernelgrad.backends.cpu", "create_backend"),
    "cuda": ("kernelgrad.backends.cuda", "create_backend"),
}
_INSTANCES: dict[Device, Backend] = {}


def get_backend(device: Device) -> Backend:
    """The backend object that owns memory on ``device`` (created on first use)."""
    backend = _INSTANCES.get(device)
    if backend is None:
        if device.type not in _REGISTRY:
            raise ValueError(f"no backend is registered for device type {device.type!r}")
        module_name, factory = _REGISTRY[device.type]
        module = importlib.import_module(module_name)
        backend = getattr(module, factory)(device)
        _INSTANCES[device] = backend
    return backend


def loaded_backends() -> dict[Device, Backend]:
    """Backends created so far in this process."""
    return dict(_INSTANCES)
