"""Zero-copy exchange with other array libraries: DLPack and ``__cuda_array_interface__``.

* ``tensor.__dlpack__()`` / ``tensor.__dlpack_device__()``: the DLPack protocol, so
  ``numpy.from_dlpack(t)``, ``torch.from_dlpack(t)``, ``cupy.from_dlpack(t)`` and
  ``jax.dlpack.from_dlpack(t)`` view a kernelgrad tensor's memory without copying.
* ``kg.from_dlpack(obj)``: the other direction, for any object with ``__dlpack__``
  (NumPy arrays, PyTorch / CuPy / JAX arrays) or, on CUDA, ``__cuda_array_interface__``.
* ``tensor.__cuda_array_interface__`` on CUDA tensors (version 3), which Numba, CuPy and
  PyTorch (``torch.as_tensor(t, device="cuda")``) read.

CPU tensors export through NumPy's DLPack implementation (the tensor's memory as a
strided NumPy view). CUDA tensors export their device pointer through
``__cuda_array_interface__``; DLPack export on CUDA goes through CuPy (installed with
the ``cuda`` extra), which turns that interface into a DLPack capsule.

>>> import numpy as np, kernelgrad as kg
>>> t = kg.tensor([1.0, 2.0])
>>> shared = np.from_dlpack(t)
>>> shared[0] = 5.0
>>> t.tolist()
[5.0, 2.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .device import as_device
from .dtypes import as_dtype
from .errors import DTypeError, UnsupportedError
from .shapes import is_contiguous
from .tensor import Tensor

# DLPack's device types (dlpack.h: DLDeviceType)
DLPACK_CPU = 1
DLPACK_CUDA = 2


def dlpack_device(t: Tensor) -> tuple[int, int]:
    """``(device type, device index)`` in DLPack's numbering."""
    if t.device.type == "cpu":
        return (DLPACK_CPU, 0)
    return (DLPACK_CUDA, t.device.index or 0)


def to_dlpack(
    t: Tensor,
    *,
    stream: Any = None,
    max_version: Any = None,
    dl_device: Any = None,
    copy: Any = None,
) -> Any:
    """A DLPack capsule viewing ``t``'s memory (what ``t.__dlpack__()`` returns)."""
    if t.requires_grad:
        raise UnsupportedError(
            "__dlpack__: can't export a tensor that requires grad (the consumer would not "
            "be recorded by autograd, as PyTorch refuses too); export `t.detach()`"
        )
    options = {"max_version": max_version, "dl_device": dl_device, "copy": copy}
    options = {key: value for key, value in options.items() if value is not None}
    if t.device.type == "cpu":
        return t.numpy().__dlpack__(**options)
    try:
        import cupy
    except ImportError as error:
        raise UnsupportedError(
            "__dlpack__: exporting a CUDA tensor through DLPack needs CuPy (the `cuda` "
            "extra: pip install 'kernelgrad[cuda]'). Without it, consumers that read "
            "__cuda_array_interface__ share the memory too: torch.as_tensor(t, "
            "device='cuda'), cupy.asarray(t), numba.cuda.as_cuda_array(t)"
        ) from error
    with cupy.cuda.Device(t.device.index or 0):
        array = cupy.asarray(_InterfaceHolder(t))
        return array.__dlpack__(stream=stream, **options)


class _InterfaceHolder:
    """An object with only ``__cuda_array_interface__`` (CuPy reads it) that keeps the
    tensor, and so its memory, alive while CuPy's array exists."""

    def __init__(self, t: Tensor) -> None:
        self.tensor = t
        self.__cuda_array_interface__ = cuda_array_interface(t)


def cuda_array_interface(t: Tensor) -> dict[str, Any]:
    """Numba's CUDA Array Interface (version 3) for a CUDA tensor."""
    if t.device.type != "cuda":
        raise AttributeError(
            f"__cuda_array_interface__ exists only on CUDA tensors (this one is on "
            f"{t.device}); use t.numpy() or __dlpack__ on the CPU"
        )
    if t.requires_grad:
        raise UnsupportedError(
            "__cuda_array_interface__: can't export a tensor that requires grad; export "
            "`t.detach()`"
        )
    itemsize = t.dtype.itemsize
    buffer_interface = getattr(t._storage.buffer, "__cuda_array_interface__", None)
    if buffer_interface is None:  # Numba's CUDA simulator: no device pointers
        raise AttributeError(
            "__cuda_array_interface__ is not available under Numba's CUDA simulator (its "
            "arrays have no device pointers)"
        )
    buffer_pointer = buffer_interface["data"][0]
    pointer = buffer_pointer + t._offset * itemsize if t.numel() else 0
    contiguous = is_contiguous(t.shape, t._strides)
    return {
        "shape": tuple(t.shape),
        "typestr": np.dtype(t.dtype.numpy).str,
        "data": (pointer, False),
        "strides": None if contiguous else tuple(s * itemsize for s in t._strides),
        "version": 3,
        # kernelgrad's kernels run on one stream per device; consumers synchronise on it
        "stream": _stream_handle(t),
    }


def _stream_handle(t: Tensor) -> int | None:
    stream = getattr(t._backend, "stream", None)
    handle = getattr(stream, "handle", None)
    value = getattr(handle, "value", handle)
    return int(value) if isinstance(value, int) and value not in (0, 1, 2) else None


def from_dlpack(obj: Any) -> Tensor:
    """A tensor sharing memory with ``obj``: anything with ``__dlpack__`` (NumPy,
    PyTorch, CuPy, JAX arrays) or, for GPU memory, ``__cuda_array_interface__``.

    >>> import numpy as np, kernelgrad as kg
    >>> array = np.arange(3.0)
    >>> t = kg.from_dlpack(array)
    >>> array[1] = 10.0
    >>> t.tolist()
    [0.0, 10.0, 2.0]
    """
    if isinstance(obj, Tensor):
        return obj
    device_type = DLPACK_CPU
    if hasattr(obj, "__dlpack_device__"):
        device_type, index = obj.__dlpack_device__()
    elif hasattr(obj, "__cuda_array_interface__"):
        device_type, index = DLPACK_CUDA, None
    if device_type == DLPACK_CPU:
        from .ops.creation import from_numpy

        array = np.from_dlpack(obj)
        if array.dtype == np.float16:
            raise DTypeError(
                "from_dlpack: float16 is not a kernelgrad dtype (float32, float64, int32, "
                "int64, bool); convert on the producer side first"
            )
        return from_numpy(array)
    if device_type == DLPACK_CUDA:
        return _from_cuda(obj, index)
    raise UnsupportedError(
        f"from_dlpack: DLPack device type {device_type} is not supported (kernelgrad has "
        "the CPU and CUDA devices)"
    )


def _from_cuda(obj: Any, index: int | None) -> Tensor:
    from numba import cuda

    if not hasattr(obj, "__cuda_array_interface__"):
        try:
            import cupy
        except ImportError as error:
            raise UnsupportedError(
                "from_dlpack: importing a CUDA array without __cuda_array_interface__ "
                "needs CuPy (the `cuda` extra)"
            ) from error
        obj = cupy.from_dlpack(obj)
    array = cuda.as_cuda_array(obj)
    dtype = as_dtype(array.dtype)
    strides = tuple(stride // array.dtype.itemsize for stride in array.strides)
    if not is_contiguous(array.shape, strides):
        raise UnsupportedError(
            "from_dlpack: CUDA arrays are shared only when contiguous; make the array "
            "contiguous on the producer side first (e.g. `.contiguous()`)"
        )
    if index is None:
        index = array.gpu_data.device.id if hasattr(array.gpu_data, "device") else 0
    device = as_device(f"cuda:{index}")
    flat = array.reshape(array.size) if array.size else array
    return Tensor._from_buffer(flat, tuple(array.shape), dtype, device)
