"""PyTorch's legacy tensor types as constructors and for ``isinstance``:
``kg.FloatTensor``, ``kg.DoubleTensor``, ``kg.IntTensor``, ``kg.LongTensor`` and
``kg.BoolTensor`` (the dtypes kernelgrad has).

``kg.LongTensor(data)`` is ``kg.tensor(data, dtype=kg.int64)`` (a list, a NumPy array of
any numeric dtype, or a tensor: converted, as PyTorch's constructor does);
``kg.FloatTensor(2, 3)`` is a new (2, 3) tensor of that dtype (PyTorch leaves it
uninitialised, kernelgrad's ``empty``); ``kg.FloatTensor()`` is empty.
``isinstance(x, kg.FloatTensor)`` is true for a float32 tensor on the CPU, as in PyTorch
(a CUDA tensor is a ``torch.cuda.FloatTensor`` there, which kernelgrad does not have)."""

from __future__ import annotations

from typing import Any

from .device import as_device
from .dtypes import as_dtype
from .shapes import Size
from .tensor import Tensor

__all__ = ["BoolTensor", "DoubleTensor", "FloatTensor", "IntTensor", "LongTensor"]


class _LegacyType(type):
    _dtype_name: str

    def __instancecheck__(cls, obj: object) -> bool:
        return (
            isinstance(obj, Tensor)
            and obj.dtype is as_dtype(cls._dtype_name)
            and obj.device.type == "cpu"
        )

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:  # type: ignore[override]
        from .ops.creation import empty, tensor

        dtype = as_dtype(cls._dtype_name)
        if device is not None and as_device(device).type != "cpu":
            raise TypeError(
                f"legacy constructor kg.{cls.__name__} makes CPU tensors, got device={device!r}: "
                f"use kg.tensor(data, dtype=kg.{dtype.name}, device=...)"
            )
        if not args:
            return empty(0, dtype=dtype)
        if all(isinstance(arg, int) and not isinstance(arg, bool) for arg in args):
            return empty(*args, dtype=dtype)
        if len(args) == 1 and isinstance(args[0], Size):
            return empty(*args[0], dtype=dtype)
        if len(args) == 1:
            return tensor(args[0], dtype=dtype)
        raise TypeError(
            f"kg.{cls.__name__}() takes a sequence, an array or a tensor, or sizes as "
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
