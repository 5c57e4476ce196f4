"""Vendor GEMM: cuBLAS through CuPy, used for float32/float64 matmul on a real GPU.

The backend's buffers are numba device arrays; CuPy arrays are laid over the same
memory without a copy (``UnownedMemory`` on the buffer's device pointer, which keeps
the numba array alive), with the view's shape, strides and offset. Both libraries use
the legacy default stream, so the product is ordered after the kernels that produced
its operands and before the ones that consume it, with no synchronisation.

CuPy leaves TF32 off unless ``CUPY_TF32=1`` (as PyTorch does by default), so float32
products are computed in full float32 precision.

Chosen automatically when CuPy imports on a real device (``KG_CUDA_MATMUL=auto``, the
default); ``KG_CUDA_MATMUL=kernel`` forces the backend's own tiled kernel and
``KG_CUDA_MATMUL=cublas`` requires CuPy. The simulator always uses the own kernel.
"""

from __future__ import annotations

import os
from typing import Any

from ..base import View

MATMUL_CHOICES = ("auto", "cublas", "kernel")


def requested_matmul() -> str:
    choice = os.environ.get("KG_CUDA_MATMUL", "auto").strip().lower() or "auto"
    if choice not in MATMUL_CHOICES:
        raise ValueError(f"KG_CUDA_MATMUL={choice!r} is not one of {', '.join(MATMUL_CHOICES)}")
    return choice


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
    """``out = a @ b`` on views of numba buffers, through ``cupy.matmul`` (cuBLAS)."""

    dtypes = ("float32", "float64")

    def __init__(self, cupy: Any, device_index: int) -> None:
        self.cupy = cupy
        self.device_index = device_index

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
        with self.cupy.cuda.Device(self.device_index):
            self.cupy.matmul(self.wrap(a), self.wrap(b), out=self.wrap(out))
