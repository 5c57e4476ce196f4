"""``kg.cuda``: the CUDA device, its memory pool and its random generator.

Importing this module is cheap: numba-cuda is imported by the first function that needs
it, and a backend (with its memory pool) is created on first use of a device.

>>> import kernelgrad as kg
>>> if kg.cuda.is_available():
...     x = kg.ones(3, device="cuda")
...     stats = kg.cuda.memory_stats()

Without a GPU, ``NUMBA_ENABLE_CUDASIM=1`` (set before numba is imported) runs the CUDA
backend in numba's simulator: ``is_available()`` is then True and ``is_simulated()``
tells the difference. See docs/cuda.md.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Any

from .backends.cuda.memory import OutOfMemoryError, zero_stats
from .device import Device, as_device, default_device

__all__ = [
    "OutOfMemoryError",
    "current_device",
    "current_stream",
    "device_count",
    "empty_cache",
    "get_device_name",
    "is_available",
    "is_simulated",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
    "set_memory_limit",
    "synchronize",
    "vendor_libraries",
]


def is_available() -> bool:
    """True when CUDA tensors can be created: a GPU with a working driver, or numba's
    CUDA simulator.

    Without the simulator and without a loadable CUDA driver library it answers False
    in about a millisecond, without importing numba-cuda (half a second), so that
    ``device = "cuda" if kg.cuda.is_available() else "cpu"`` costs nothing on a machine
    without a GPU."""
    from .backends.cuda import runtime

    if not runtime.simulated() and not _driver_library_loads():
        return False
    return runtime.cuda_available()


@functools.cache
def _driver_library_loads() -> bool:
    """Whether the CUDA driver library loads under one of the names numba-cuda tries
    (``NUMBA_CUDA_DRIVER`` names another: then numba-cuda decides)."""
    if os.environ.get("NUMBA_CUDA_DRIVER"):
        return True
    if sys.platform == "win32":
        names = ["nvcuda.dll", "\\windows\\system32\\nvcuda.dll"]
    elif sys.platform == "darwin":
        names = ["libcuda.dylib", "/usr/local/cuda/lib/libcuda.dylib"]
    else:
        names = ["libcuda.so", "libcuda.so.1"]
        names += [f"{folder}/{name}" for folder in ("/usr/lib", "/usr/lib64") for name in names]
    for name in names:
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def is_simulated() -> bool:
    """True when the CUDA backend runs in numba's simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    from .backends.cuda import runtime

    return runtime.simulated()


def device_count() -> int:
    """The number of CUDA devices (0 when CUDA is unavailable; 1 in the simulator)."""
    from .backends.cuda import runtime

    return runtime.device_count()


def current_device() -> int:
    """The index of the default CUDA device: that of ``with kg.device("cuda:N")`` when
    one is active, else 0."""
    device = default_device()
    return device.index if device.type == "cuda" and device.index is not None else 0


def _device(device: Any) -> Device:
    if device is None:
        return Device("cuda", current_device())
    if isinstance(device, int):
        return Device("cuda", device)
    parsed = as_device(device)
    if parsed.type != "cuda":
        raise ValueError(f"expected a CUDA device such as 'cuda:0', got {parsed}")
    return parsed


def _backend(device: Any) -> Any:
    from .backends import get_backend

    return get_backend(_device(device))


def _loaded_backend(device: Any) -> Any:
    """The device's backend if it was ever used, else None (creates nothing)."""
    from .backends import loaded_backends

    return loaded_backends().get(_device(device))


def get_device_name(device: Any = None) -> str:
    return _backend(device).properties.name


def current_stream(device: Any = None) -> Any:
    """The stream the device's kernels, copies and cuBLAS calls are queued on (one per
    device, owned by kernelgrad): a numba-cuda ``Stream``. Order your own work on a
    tensor's memory after kernelgrad's with it, e.g. numba kernels
    ``kernel[grid, block, kg.cuda.current_stream()]`` or CuPy
    ``cupy.cuda.ExternalStream(int(kg.cuda.current_stream().handle))``; or call
    :func:`synchronize` first."""
    return _backend(device).stream


def vendor_libraries(device: Any = None) -> dict[str, str]:
    """The vendor libraries the CUDA backend uses, and whether they load: ``cupy`` (the
    package), ``cublas`` ("loaded", or why not and the pip command that fixes it), and
    ``matmul`` (what the device's matmul runs: ``cublas`` or kernelgrad's own ``kernel``;
    only once the device has been used). Needs no GPU.

    >>> import kernelgrad as kg
    >>> sorted(kg.cuda.vendor_libraries())[:2]
    ['cublas', 'cupy']
    """
    from .backends.cuda import vendor

    status = vendor.library_status()
    backend = _loaded_backend(device) if is_available() else None
    if backend is not None:
        status["matmul"] = backend.matmul_impl
    return status


def synchronize(device: Any = None) -> None:
    """Wait until every kernel queued on the device has finished. Raises KernelError if
    one of them failed, and IndexError if one reported an index out of range."""
    backend = _loaded_backend(device)
    if backend is not None:
        backend.synchronize()


# --- memory ---------------------------------------------------------------------------------
def memory_stats(device: Any = None) -> dict[str, Any]:
    """Counters of the device's caching memory pool (zeros before the device is used).

    ``allocated_bytes``: held by live tensors (in whole pool blocks);
    ``requested_bytes``: what those tensors asked for; ``reserved_bytes``: obtained from
    the driver (in use or cached); ``cached_bytes``: reserved but free for reuse;
    ``peak_allocated_bytes`` / ``peak_reserved_bytes``; ``active_blocks`` /
    ``cached_blocks``; ``num_allocs`` (requests), ``num_frees``, ``num_cache_hits``,
    ``num_raw_allocs`` / ``num_raw_frees`` (driver allocations and frees),
    ``num_ooms``; ``limit_bytes`` (see :func:`set_memory_limit`);
    ``vendor_pool_used_bytes`` / ``vendor_pool_reserved_bytes``: CuPy's own pool on the
    device (cuBLAS calls through CuPy allocate there; 0 when CuPy is not in use)."""
    backend = _loaded_backend(device)
    if backend is None:
        return zero_stats()
    return backend.memory_stats()


def memory_allocated(device: Any = None) -> int:
    """Bytes of device memory held by tensors."""
    return int(memory_stats(device)["allocated_bytes"])


def memory_reserved(device: Any = None) -> int:
    """Bytes of device memory held by the pool (in use or cached)."""
    return int(memory_stats(device)["reserved_bytes"])


def max_memory_allocated(device: Any = None) -> int:
    """The peak of :func:`memory_allocated` since the start or the last reset."""
    return int(memory_stats(device)["peak_allocated_bytes"])


def reset_peak_memory_stats(device: Any = None) -> None:
    backend = _loaded_backend(device)
    if backend is not None:
        backend.pool.reset_peak()


def empty_cache(device: Any = None) -> None:
    """Return cached, unused blocks to the driver (for other processes). Memory held by
    live tensors stays; kernelgrad itself never needs this call."""
    backend = _loaded_backend(device)
    if backend is not None:
        backend.pool.empty_cache()


def set_memory_limit(limit_bytes: int | None, device: Any = None) -> None:
    """Cap the bytes the pool may reserve on the device (None removes the cap). A request
    beyond it first frees cached blocks, then raises :class:`OutOfMemoryError`."""
    _backend(device).pool.set_limit(limit_bytes)


# --- random numbers -------------------------------------------------------------------------
def manual_seed(seed: int, device: Any = None) -> None:
    """Seed the random generator of one CUDA device (the current one by default).

    ``kg.manual_seed`` seeds every device at once."""
    _backend(device).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed the random generators of every CUDA device."""
    for index in range(device_count()):
        _backend(index).manual_seed(int(seed))


# --- torch.cuda.amp ---------------------------------------------------------------------------
def __getattr__(name: str) -> Any:
    """``kg.cuda.amp`` (``torch.cuda.amp.GradScaler``, ``torch.cuda.amp.autocast``), loaded
    on first use; see kernelgrad/amp.py."""
    if name == "amp":
        from .amp import cuda_amp

        return cuda_amp
    if name in ("FloatTensor", "DoubleTensor", "IntTensor", "LongTensor", "BoolTensor"):
        from .legacy_types import CUDA_TYPES  # torch.cuda.FloatTensor(data), x.type(...)

        return CUDA_TYPES[name]
    raise AttributeError(f"module 'kernelgrad.cuda' has no attribute '{name}'")
