"""Turning kernel arguments into the arrays a compiled kernel receives.

* A CPU tensor becomes a NumPy array of its shape and strides over its buffer (no copy):
  writes reach the tensor, whatever view it is.
* A CUDA tensor becomes a Numba device array of its shape and strides over its buffer
  (a 1-D device array of the whole storage; views are (shape, strides, offset) over it).
  Under Numba's CUDA simulator the buffer is a fake device array wrapping a NumPy array.
* NumPy arrays are CPU arrays; objects with ``__cuda_array_interface__`` (Numba device
  arrays, CuPy arrays) are CUDA arrays. Both are passed through unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..backends.base import strided_array as cpu_view


def is_simulated_cuda_array(value: Any) -> bool:
    return type(value).__name__ == "FakeCUDAArray" and hasattr(value, "_ary")


def is_cuda_array(value: Any) -> bool:
    return hasattr(value, "__cuda_array_interface__") or is_simulated_cuda_array(value)


def cuda_view(buffer: Any, shape: tuple, strides: tuple, offset: int, dtype: np.dtype) -> Any:
    """A device array of ``shape``/``strides`` (in elements) starting ``offset`` elements
    into ``buffer``, sharing its memory."""
    if is_simulated_cuda_array(buffer):
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(cpu_view(buffer._ary, shape, strides, offset))
    from numba import cuda

    interface = buffer.__cuda_array_interface__
    itemsize = np.dtype(dtype).itemsize
    pointer = interface["data"][0] + offset * itemsize
    description = {
        "shape": tuple(shape),
        "strides": tuple(s * itemsize for s in strides),
        "typestr": np.dtype(dtype).str,
        "data": (pointer, False),
        "version": 3,
    }
    return cuda.from_cuda_array_interface(description, owner=buffer, sync=False)


def device_of_array(value: Any) -> str | None:
    """``"cpu"``, ``"cuda"`` or None (not an array)."""
    if isinstance(value, np.ndarray):
        return "cpu"
    if is_cuda_array(value):
        return "cuda"
    return None
