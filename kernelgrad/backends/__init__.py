"""Backend registry. Backends are found by device type and imported on first use, so
``import kernelgrad`` never imports Numba or anything CUDA-related."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..device import Device

if TYPE_CHECKING:
    from .base import Backend, KernelLaunch, KernelProgram

# device type -> (module, factory function)
_REGISTRY: dict[str, tuple[str, str]] = {
    "cpu": ("kernelgrad.backends.cpu", "create_backend"),
    "cuda": ("kernelgrad.backends.cuda", "create_backend"),
}
_INSTANCES: dict[Device, Backend] = {}
# called with each backend created from now on (kg.compile.count_launches wraps it)
CREATION_HOOKS: list[Any] = []


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
        for hook in list(CREATION_HOOKS):
            hook(backend)
    return backend


def loaded_backends() -> dict[Device, Backend]:
    """Backends created so far in this process."""
    return dict(_INSTANCES)


def kernel_launches_recorded() -> bool:
    """Whether the CUDA compile check's recording is active (every launch must then go
    through :func:`record_kernel_launch`)."""
    recording: Any = importlib.import_module("kernelgrad.backends.cuda.recording")
    return bool(recording.active())


def record_kernel_launch(program: KernelProgram, launch: KernelLaunch) -> None:
    """Report a ``@kg.kernel`` launch, on any device, in its CUDA form to the CUDA compile
    check's recording when one is active (``backends/cuda/recording.py``, docs/cuda.md):
    examples too large for the simulator run on the CPU and are still checked. Costs one
    test of an empty list otherwise (``recording`` imports no numba)."""
    recording: Any = importlib.import_module("kernelgrad.backends.cuda.recording")
    if recording.active():
        kernel_module = importlib.import_module("kernelgrad.backends.cuda.kernel_module")
        kernel_module.record(program, launch)


# torch.backends' modules (torch.backends.cudnn.benchmark = True, torch.backends.mps.
# is_available(), torch.backends.cuda.matmul): see torch_settings.py
_TORCH_SETTINGS = ("cpu", "cuda", "cudnn", "mkl", "mkldnn", "mps", "openmp", "opt_einsum")


def __getattr__(name: str) -> Any:
    if name in _TORCH_SETTINGS:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'kernelgrad.backends' has no attribute {name!r}")
