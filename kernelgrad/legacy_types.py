"""PyTorch's legacy tensor types as constructors and for ``isinstance``:
``kg.FloatTensor``, ``kg.DoubleTensor``, ``kg.IntTensor``, ``kg.LongTensor`` and
``kg.BoolTensor`` (the dtypes kernelgrad has).

``kg.LongTensor(data)`` is ``kg.tensor(data, dtype=kg.int64)`` (a list, a NumPy array of
any numeric dtype, or a tensor: converted, as PyTorch's constructor does);
``kg.FloatTensor(2, 3)`` is a new (2, 3) tensor of that dtype (PyTorch leaves it
uninitialised, kernelgrad's ``empty``); ``kg.FloatTensor()`` is empty.
``isinstance(x, kg.FloatTensor)`` is true for a float32 tensor on the CPU, as in PyTorch
(a CUDA tensor is not). ``kg.cuda.FloatTensor`` and the other CUDA types are the same
on the current CUDA device: ``torch.cuda.FloatTensor(array)`` makes a CUDA tensor, and
``isinstance`` is true for a CUDA tensor of that dtype. ``x.type(kg.FloatTensor)`` (or
``kg.cuda.FloatTensor``) converts to the type's dtype and device, as PyTorch's
``Tensor.type`` does (kernelgrad/tensor.py)."""

from __future__ import annotations

from typing import Any

from .device import as_device
from .dtypes import as_dtype
from .shapes import Size
from .tensor import Tensor

__all__ = ["BoolTensor", "DoubleTensor", "FloatTensor", "IntTensor", "LongTensor"]


class _LegacyType(type):
    _dtype_name: str
    _device_type = "cpu"

    def __instancecheck__(cls, obj: object) -> bool:
        return (
            isinstance(obj, Tensor)
            and obj.dtype is as_dtype(cls._dtype_name)
            and obj.device.type == cls._device_type
        )

    def _type_name(cls) -> str:
        return ("kg.cuda." if cls._device_type == "cuda" else "kg.") + cls.__name__

    def _device(cls, device: Any = None) -> Any:
        """The device a tensor of this type is made on: ``device`` if given (of the type's
        kind), else the CPU or the current CUDA device."""
        if device is not None:
            if as_device(device).type != cls._device_type:
                kind = "CUDA" if cls._device_type == "cuda" else "CPU"
                raise TypeError(
                    f"legacy constructor {cls._type_name()} makes {kind} tensors, got "
                    f"device={device!r}: use kg.tensor(data, dtype=kg.{cls._dtype_name}, "
                    "device=...)"
                )
            return as_device(device)
        if cls._device_type == "cuda":
            from . import cuda

            return as_device(f"cuda:{cuda.current_device()}")
        return as_device("cpu")

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:  # type: ignore[override]
        from .ops.creation import empty, tensor

        options = {"dtype": as_dtype(cls._dtype_name), "device": cls._device(device)}
        if not args:
            return empty(0, **options)
        if all(isinstance(arg, int) and not isinstance(arg, bool) for arg in args):
            return empty(*args, **options)
        if len(args) == 1 and isinstance(args[0], Size):
            return empty(*args[0], **options)
        if len(args) == 1:
            return tensor(args[0], **options)
        raise TypeError(
            f"{cls._type_name()}() takes a sequence, an array or a tensor, or sizes as "
            f"integers, got {tuple(type(arg).__name__ for arg in args)}"
        )


class FloatTensor(metaclass=_LegacyType):
    _dtype_name = "float32"


class DoubleTensor(metaclass=_LegacyType):
    _dtype_name = "float64"


class IntTensor(metaclass=_LegacyType):
    _dtype_name = "int32"


class LongTensor(metaclass=_LegacyType):
    _dtype_name = "int64"


class BoolTensor(metaclass=_LegacyType):
    _dtype_name = "bool"


# ``torch.cuda.FloatTensor`` and friends, reached as ``kg.cuda.FloatTensor`` (kernelgrad/cuda.py)
CUDA_TYPES = {
    cls.__name__: _LegacyType(
        cls.__name__, (), {"_dtype_name": cls._dtype_name, "_device_type": "cuda"}
    )
    for cls in (FloatTensor, DoubleTensor, IntTensor, LongTensor, BoolTensor)
}
for _cls in CUDA_TYPES.values():
    _cls.__module__ = "kernelgrad.cuda"
