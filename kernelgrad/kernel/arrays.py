"""Which device a raw array argument of a kernel lives on.

Tensors reach a kernel as the array their backend makes of them
(``Backend.kernel_array``: the tensor's shape and strides over its buffer, sharing
memory). NumPy arrays are CPU arrays; objects with ``__cuda_array_interface__`` (Numba
device arrays, CuPy arrays) are CUDA arrays. Both are passed through unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def is_cuda_array(value: Any) -> bool:
    """Whether ``value`` is a CUDA array (or, under Numba's simulator, a fake one)."""
    simulated = type(value).__name__ == "FakeCUDAArray" and hasattr(value, "_ary")
    return hasattr(value, "__cuda_array_interface__") or simulated


def device_of_array(value: Any) -> str | None:
    """``"cpu"``, ``"cuda"`` or None (not an array)."""
    if isinstance(value, np.ndarray):
        return "cpu"
    if is_cuda_array(value):
        return "cuda"
    return None
