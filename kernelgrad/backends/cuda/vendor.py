"""Vendor libraries: cuBLAS through CuPy, for float32/float64 matmul on a real GPU.

The backend's buffers are numba device arrays; CuPy arrays are laid over the same
memory without a copy (``UnownedMemory`` on the buffer's device pointer, which keeps
the numba array alive), with the view's shape, strides and offset. Every CuPy call runs
on the backend's stream (``cupy.cuda.ExternalStream`` over it), so a product is ordered
after the kernels that produced its operands and before those that consume it, whatever
CuPy's current stream or default-stream setting is.

CuPy leaves TF32 off unless ``CUPY_TF32=1`` (as PyTorch does by default), so float32
products are computed in full float32 precision.

**Which libraries load.** CuPy's wheel brings no CUDA libraries of its own; the
``kernelgrad[cuda]`` extra installs cuBLAS (``cuda-toolkit[cublas]``) next to it.
:func:`library_status` says what loads, without a GPU (``kernelgrad info`` prints it).
When a backend is created on a GPU and cuBLAS cannot load, it says so once, with the
pip command that fixes it, and uses its own tiled kernel.

**Errors.** A product that runs out of memory inside CuPy (its pool, or cuBLAS's
workspace) is retried once after both pools hand their cached blocks back; a second
failure is kernelgrad's ``OutOfMemoryError``. Any other CuPy error is raised as a
``KernelError``: the backend never switches to its own kernel because one call failed.

Chosen automatically when cuBLAS loads on a real device (``KG_CUDA_MATMUL=auto``, the
default); ``KG_CUDA_MATMUL=kernel`` forces the backend's own tiled kernel and
``KG_CUDA_MATMUL=cublas`` requires cuBLAS. The simulator always uses the own kernel.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from typing import Any

from ..base import View

MATMUL_CHOICES = ("auto", "cublas", "kernel")
CUPY_PACKAGES = ("cupy-cuda13x", "cupy-cuda12x", "cupy")
_warned: set[str] = set()


def requested_matmul() -> str:
    choice = os.environ.get("KG_CUDA_MATMUL", "auto").strip().lower() or "auto"
    if choice not in MATMUL_CHOICES:
        raise ValueError(f"KG_CUDA_MATMUL={choice!r} is not one of {', '.join(MATMUL_CHOICES)}")
    return choice


def cupy_package() -> tuple[str, str] | None:
    """(distribution name, version) of the installed CuPy package, without importing it."""
    for name in CUPY_PACKAGES:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def fix_command() -> str:
    """The pip command that installs the CUDA libraries for the installed CuPy."""
    package = cupy_package()
    major = "12" if package is not None and package[0] == "cupy-cuda12x" else "13"
    extra = "cuda12" if major == "12" else "cuda"
    return (
        f'pip install "cuda-toolkit[cublas,cudart,nvrtc]=={major}.*" (what the '
        f'"kernelgrad[{extra}]" extra installs)'
    )


def cublas_error() -> str | None:
    """Why CuPy's cuBLAS module cannot load, or None when it loads. Needs no GPU: the
    module loads the shared libraries (libcublas, libcublasLt) when imported."""
    if cupy_package() is None:
        return "CuPy is not installed"
    try:
        from cupy_backends.cuda.libs import cublas  # noqa: F401
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def library_status() -> dict[str, str]:
    """What kernelgrad's CUDA backend can use, as text per library: ``cupy`` (the
    package and version), ``cublas`` ("loaded", or why not and the fix)."""
    package = cupy_package()
    if package is None:
        return {
            "cupy": 'not installed (pip install "kernelgrad[cuda]")',
            "cublas": "not available without CuPy (matmul uses kernelgrad's own kernel)",
        }
    error = cublas_error()
    cublas = "loaded" if error is None else f"cannot load ({error}); fix: {fix_command()}"
    return {"cupy": f"{package[0]} {package[1]}", "cublas": cublas}


def warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def load_cupy() -> Any:
    """CuPy if it imports and can see a GPU, else None."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        return cupy
    except Exception:
        return None


class CupyGemm:
    """``out = a @ b`` on views of numba buffers, through ``cupy.matmul`` (cuBLAS), on
    the backend's stream."""

    dtypes = ("float32", "float64")

    def __init__(self, cupy: Any, device_index: int, stream_handle: int) -> None:
        self.cupy = cupy
        self.device_index = device_index
        with cupy.cuda.Device(device_index):
            self.stream = cupy.cuda.ExternalStream(stream_handle, device_index)

    def supports(self, dtype_name: str) -> bool:
        return dtype_name in self.dtypes

    def wrap(self, view: View) -> Any:
        """A CuPy array over ``view`` (no copy)."""
        cupy = self.cupy
        buffer = view.buffer
        itemsize = view.dtype.itemsize
        pointer = buffer.device_ctypes_pointer.value
        memory = cupy.cuda.UnownedMemory(pointer, buffer.size * itemsize, buffer, self.device_index)
        return cupy.ndarray(
            view.shape,
            dtype=view.dtype.numpy,
            memptr=cupy.cuda.MemoryPointer(memory, view.offset * itemsize),
            strides=tuple(s * itemsize for s in view.strides),
        )

    def matmul(self, out: View, a: View, b: View) -> None:
        with self.cupy.cuda.Device(self.device_index), self.stream:
            self.cupy.matmul(self.wrap(a), self.wrap(b), out=self.wrap(out))

    def allocations_refused(self) -> Any:
        """A context in which CuPy may not allocate (a CUDA graph capture, ``graphs.py``):
        a temporary CuPy took from its own pool inside a graph would go back to the pool
        while the graph still writes it. The capture is then abandoned instead."""
        from ..base import CaptureUnsupportedError

        def refuse(nbytes: int) -> Any:
            raise CaptureUnsupportedError(
                f"cuBLAS through CuPy asked for {nbytes} bytes of temporary memory, which a "
                "CUDA graph cannot keep"
            )

        return self.cupy.cuda.using_allocator(refuse)

    def is_out_of_memory(self, error: BaseException) -> bool:
        if isinstance(error, self.cupy.cuda.memory.OutOfMemoryError):
            return True
        text = str(error)
        return "ALLOC_FAILED" in text or "out of memory" in text.lower()

    def free_cached(self) -> None:
        """Hand CuPy's cached (unused) blocks on this device back to the driver."""
        with self.cupy.cuda.Device(self.device_index):
            self.cupy.get_default_memory_pool().free_all_blocks()

    def pool_stats(self) -> dict[str, int]:
        """Bytes CuPy's pool holds on this device: in use by CuPy arrays, and reserved."""
        with self.cupy.cuda.Device(self.device_index):
            pool = self.cupy.get_default_memory_pool()
            return {
                "vendor_pool_used_bytes": int(pool.used_bytes()),
                "vendor_pool_reserved_bytes": int(pool.total_bytes()),
            }
