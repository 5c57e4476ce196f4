"""Data types and type promotion.

kernelgrad has five dtypes: ``float32`` (the default for floating point), ``float64``,
``int32``, ``int64`` (the default for integers) and ``bool``. Promotion follows PyTorch:

* categories are ordered ``bool < integer < floating``; the result takes the highest
  category among the operands, and the widest type within it;
* Python scalars are *weak*: ``float32_tensor * 2.5`` stays float32 and
  ``int32_tensor + 1`` stays int32; only a scalar of a higher category changes the
  result (``int_tensor * 0.5`` is float32, the default float type).

>>> import kernelgrad as kg
>>> kg.promote_types(kg.int32, kg.float32)
kg.float32
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "DType",
    "float32",
    "float64",
    "int32",
    "int64",
    "bool_",
    "promote_types",
    "as_dtype",
    "result_type",
    "default_float",
]


class DType:
    """A tensor element type. Compare with ``==``; print as ``kg.float32``."""

    __slots__ = ("category", "itemsize", "name", "numpy")

    # category: 0 = bool, 1 = integer, 2 = floating point
    def __init__(self, name: str, numpy_dtype: Any, category: int) -> None:
        self.name = name
        self.numpy = np.dtype(numpy_dtype)
        self.itemsize = self.numpy.itemsize
        self.category = category

    @property
    def is_floating_point(self) -> bool:
        return self.category == 2

    @property
    def is_integer(self) -> bool:
        return self.category == 1

    @property
    def is_bool(self) -> bool:
        return self.category == 0

    def __repr__(self) -> str:
        return f"kg.{self.name}"

    def __reduce__(self):  # pickle as the module-level singleton
        return (as_dtype, (self.name,))


float32 = DType("float32", np.float32, 2)
float64 = DType("float64", np.float64, 2)
int32 = DType("int32", np.int32, 1)
int64 = DType("int64", np.int64, 1)
bool_ = DType("bool", np.bool_, 0)

ALL_DTYPES = (float32, float64, int32, int64, bool_)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NUMPY = {d.numpy: d for d in ALL_DTYPES}
# NumPy types that have no kernelgrad twin are widened to the nearest one we have.
_WIDENED = {
    np.dtype(np.float16): float32,
    np.dtype(np.int8): int32,
    np.dtype(np.int16): int32,
    np.dtype(np.uint8): int32,
    np.dtype(np.uint16): int32,
    np.dtype(np.uint32): int64,
}

_default_float = float32


def default_float() -> DType:
    """The dtype given to Python floats and to results of true division of integers."""
    return _default_float


def as_dtype(dtype: Any) -> DType:
    """Turn a kernelgrad dtype, a NumPy dtype, a name (``"float32"``) or a Python type
    (``float``, ``int``, ``bool``) into a :class:`DType`."""
    if isinstance(dtype, DType):
        return dtype
    if dtype is float:
        return _default_float
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    try:
        numpy_dtype = np.dtype(dtype)
    except TypeError:
        numpy_dtype = None
    if numpy_dtype is not None:
        if numpy_dtype in _BY_NUMPY:
            return _BY_NUMPY[numpy_dtype]
        if numpy_dtype in _WIDENED:
            return _WIDENED[numpy_dtype]
    supported = ", ".join(d.name for d in ALL_DTYPES)
    raise TypeError(f"unsupported dtype {dtype!r}; kernelgrad supports {supported}")


def promote_types(a: DType, b: DType) -> DType:
    """The dtype of a binary operation between two tensors of dtypes ``a`` and ``b``."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    return a if a.itemsize >= b.itemsize else b


def scalar_category(value: Any) -> int:
    """Category (0 bool, 1 int, 2 float) of a Python or NumPy scalar."""
    if isinstance(value, (bool, np.bool_)):
        return 0
    if isinstance(value, (int, np.integer)):
        return 1
    if isinstance(value, (float, np.floating)):
        return 2
    raise TypeError(f"expected a number, got {type(value).__name__}")


_CATEGORY_DEFAULT = {0: bool_, 1: int64}


def result_type(*operands: Any) -> DType:
    """Promote a mix of tensors (anything with ``.dtype``) and Python scalars."""
    tensor_dtype: DType | None = None
    scalar_cat = -1
    for operand in operands:
        dtype = getattr(operand, "dtype", None)
        if isinstance(dtype, DType):
            tensor_dtype = dtype if tensor_dtype is None else promote_types(tensor_dtype, dtype)
        else:
            scalar_cat = max(scalar_cat, scalar_category(operand))
    if tensor_dtype is None:
        if scalar_cat == 2:
            return _default_float
        return _CATEGORY_DEFAULT[scalar_cat]
    if scalar_cat > tensor_dtype.category:
        return _default_float if scalar_cat == 2 else int64
    return tensor_dtype
