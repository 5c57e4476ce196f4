"""The Tensor: a strided view (shape, strides, offset, dtype) of a device buffer.

Views (``reshape``, ``permute``, ``expand``, slicing, ...) share the buffer and never copy;
kernels receive the strides. Operations run on the device the tensor lives on; mixing
devices is an error. Every operation is implemented in ``kernelgrad.ops``; this class
only binds them as methods and operators, the way PyTorch users expect.

>>> import kernelgrad as kg
>>> x = kg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> y = (x * x).sum()
>>> y.backward()
>>> x.grad.tolist()
[[2.0, 4.0], [6.0, 8.0]]
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections import namedtuple
from math import prod
from typing import Any

import numpy as np

from . import autograd
from .backends import get_backend
from .backends.base import View
from .device import Device, as_device
from .dtypes import DType, as_dtype, bool_, default_float, float64, int32, int64
from .errors import (
    ArgumentError,
    DTypeError,
    PerformanceWarning,
    ScalarAccessError,
    ShapeError,
    format_shape,
)
from .shapes import Size, broadcast_strides, contiguous_strides, is_contiguous

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


class Storage:
    """A device buffer and the counter that in-place writes increment."""

    __slots__ = ("__weakref__", "backend", "buffer", "device", "version")

    def __init__(self, buffer: Any, device: Device, backend: Any) -> None:
        self.buffer = buffer
        self.device = device
        self.backend = backend
        self.version = 0


class AliasStorage(Storage):
    """The memory of another storage read as a different dtype (``x.view(kg.int32)``):
    ``buffer`` reinterprets ``root``'s buffer without copying. It keeps ``root`` alive
    (a device pool reuses a buffer once its storage is gone) and shares its version
    counter, so in-place writes through either are seen by autograd's checks on both."""

    __slots__ = ("root",)

    def __init__(self, buffer: Any, root: Storage) -> None:
        self.buffer = buffer
        self.device = root.device
        self.backend = root.backend
        self.root = root

    @property  # type: ignore[override]
    def version(self) -> int:
        return self.root.version

    @version.setter
    def version(self, value: int) -> None:
        self.root.version = value


# --- scalar access guard ----------------------------------------------------------------------
class _ScalarAccess(threading.local):
    def __init__(self) -> None:
        self.allowed = 0


_scalar_access = _ScalarAccess()


class allow_scalar:
    """Allow element-by-element reads and writes of accelerator tensors in a block.

    Each such access is a device round trip (microseconds, not nanoseconds), so a Python
    loop over a GPU tensor is thousands of times slower than one kernel; kernelgrad
    refuses it unless asked.

    >>> import kernelgrad as kg
    >>> with kg.allow_scalar():
    ...     pass
    """

    def __enter__(self) -> None:
        _scalar_access.allowed += 1

    def __exit__(self, *exc_info: Any) -> None:
        _scalar_access.allowed -= 1


def _check_scalar_access(t: Tensor, what: str) -> None:
    if t._storage.device.type == "cpu" or _scalar_access.allowed:
        return
    raise ScalarAccessError(
        f"{what} on a tensor in {t.device} memory: each element access is a separate "
        "device round trip, so a Python loop over it would be thousands of times slower "
        "than one kernel. Instead: use whole-tensor operations (`kg.where(t > 1, 1, t)`, "
        "`t.clamp(0, 1)`, masks, reductions), write the loop as a `@kg.kernel` that runs on "
        f"the device, or copy it to the host once with `t.cpu()`. If you really mean it, "
        "wrap the code in `with kg.allow_scalar():`. (`.item()` of a one-element tensor, "
        "such as a loss, is always allowed, and so are `bool()`, `int()` and `float()` of "
        "a one-element result such as `(x < 0).all()`.)"
    )


# ``bool()``, ``int()``, ``float()`` or indexing with a one-element result on an
# accelerator, this many times from one line of code: a Python loop over device values
# (``for i in range(n): if t[i] > 1:``), each a round trip; warned about once per line.
HOST_READS_BEFORE_WARNING = 100
_host_reads: dict[tuple[str, int], int] = {}


def _note_host_read(t: Tensor, what: str) -> None:
    """Count an implicit read of a one-element accelerator result by the line of code
    that made it (three frames up: the conversion, ``_one_element``, this), and warn
    once when one line has made :data:`HOST_READS_BEFORE_WARNING` of them."""
    if _scalar_access.allowed:
        return
    frame = sys._getframe(3)
    where = (frame.f_code.co_filename, frame.f_lineno)
    count = _host_reads.get(where, 0) + 1
    _host_reads[where] = count
    if count == HOST_READS_BEFORE_WARNING:
        warnings.warn(
            f"{what} of a one-element tensor in {t.device} memory ran {count} times at "
            f"{where[0]}:{where[1]}: each is a device round trip that waits for the device, "
            "so a Python loop over device values is thousands of times slower than one "
            "kernel. Instead: whole-tensor operations (`kg.where(t > 1, 1, t)`, masks, "
            "reductions), a `@kg.kernel` that runs the loop on the device, or one "
            "`t.cpu()` copy before the loop. (Inside `with kg.allow_scalar():` this is "
            "not counted.)",
            PerformanceWarning,
            stacklevel=4,
        )


class Tensor:
    """An n-dimensional array on a device, with optional gradient tracking."""

    __slots__ = (
        "__weakref__",
        "_base",
        # set by ops.movement.make_view: the base's autograd node when the view was made
        # (ops/inplace.py rebases views on in-place writes); unset on other tensors
        "_base_node",
        "_node",
        "_offset",
        # the shape as a plain tuple: what kernelgrad's own code reads on the hot path
        # (``shape`` hands users a ``kg.Size`` made from it on each read)
        "_shape",
        "_storage",
        "_strides",
        "dtype",
        "grad",
        "requires_grad",
    )
    __array_priority__ = 1000  # make NumPy defer to our reflected operators

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("create tensors with kg.tensor(data), kg.zeros(shape), kg.ones(...), etc.")

    # --- construction helpers (used by ops) ---------------------------------------------
    @classmethod
    def _make(
        cls,
        storage: Storage,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int,
        dtype: DType,
    ) -> Tensor:
        t = object.__new__(cls)
        t._storage = storage
        # always a plain tuple (a ``kg.Size`` from ``x.shape`` is converted): internal
        # code indexes and slices it, which a ``Size`` does in Python
        t._shape = shape if shape.__class__ is tuple else tuple(shape)
        t._strides = strides
        t._offset = offset
        t.dtype = dtype
        t.requires_grad = False
        t.grad = None
        t._node = None
        t._base = None
        return t

    @classmethod
    def _empty(cls, shape: tuple[int, ...], dtype: DType, device: Device) -> Tensor:
        backend = get_backend(device)
        buffer = backend.empty(prod(shape), dtype)
        return cls._make(
            Storage(buffer, device, backend), shape, contiguous_strides(shape), 0, dtype
        )

    @classmethod
    def _from_buffer(
        cls, buffer: Any, shape: tuple[int, ...], dtype: DType, device: Device
    ) -> Tensor:
        storage = Storage(buffer, device, get_backend(device))
        return cls._make(storage, shape, contiguous_strides(shape), 0, dtype)

    @classmethod
    def _empty_on(cls, like: Storage, shape: tuple[int, ...], dtype: DType) -> Tensor:
        """A new contiguous tensor on the device (and backend) of the storage ``like``."""
        backend = like.backend
        buffer = backend.empty(prod(shape), dtype)
        return cls._make(
            Storage(buffer, like.device, backend), shape, contiguous_strides(shape), 0, dtype
        )

    def _view(self) -> View:
        return View(self._storage.buffer, self._shape, self._strides, self._offset, self.dtype)

    def _broadcast_view(self, shape: tuple[int, ...]) -> View:
        if shape == self._shape:
            return self._view()
        strides = broadcast_strides(self._shape, self._strides, shape)
        return View(self._storage.buffer, shape, strides, self._offset, self.dtype)

    @property
    def _backend(self) -> Any:
        return self._storage.backend

    # --- metadata -----------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        """The shape as a ``kg.Size`` (a tuple with ``numel()``), as ``torch.Size``."""
        return Size(self._shape)

    @shape.setter
    def shape(self, value: tuple[int, ...]) -> None:
        self._shape = tuple(value)

    @property
    def device(self) -> Device:
        return self._storage.device

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return prod(self._shape)

    def size(self, dim: int | None = None) -> Any:
        if dim is None:
            return Size(self._shape)
        from .shapes import normalize_dim

        return self._shape[normalize_dim(dim, self.ndim, "size")]

    def stride(self, dim: int | None = None) -> Any:
        if dim is None:
            return self._strides
        from .shapes import normalize_dim

        return self._strides[normalize_dim(dim, self.ndim, "stride")]

    def storage_offset(self) -> int:
        return self._offset

    def is_contiguous(self, memory_format: Any = None) -> bool:
        if memory_format is not None:  # kg.channels_last, ...: kernelgrad/memory_formats.py
            from . import memory_formats as formats

            return formats.is_contiguous(self, memory_format)
        return is_contiguous(self._shape, self._strides)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self) -> Any:
        if self._base is not None:  # a view whose base was changed in place since
            autograd.refresh_view(self)
        return self._node

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        """``x.data = y``: ``x`` now holds ``y``'s memory (shared: in-place changes to one
        show in the other), shape, dtype and device, keeping its own identity, gradient
        flag, ``.grad`` and history, as PyTorch does (``param.data = new_values``)."""
        if not isinstance(value, Tensor):
            raise TypeError(
                f"Tensor.data must be a Tensor, got {type(value).__name__}; use "
                "`x.data = kg.tensor(values)` or `x.data.copy_(values)`"
            )
        self._storage = value._storage
        self._shape = value._shape
        self._strides = value._strides
        self._offset = value._offset
        self.dtype = value.dtype
        self._base = None

    @property
    def T(self) -> Tensor:
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:
        return self.transpose(-2, -1)

    def __len__(self) -> int:
        if not self._shape:
            raise DTypeError("len() of a 0-d tensor")
        return self._shape[0]

    __hash__ = object.__hash__

    # --- conversion to Python / NumPy -------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A NumPy array with the same values. On the CPU it shares memory (as in PyTorch);
        tensors on another device must be copied with ``.cpu()`` first."""
        if self.device.type != "cpu":
            raise DTypeError(
                f"can't convert a tensor on {self.device} to NumPy directly; copy it to host "
                "memory first with `t.cpu().numpy()` (or `t.tolist()` for small tensors)"
            )
        return self._backend.numpy_view(self._view())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        array = self.cpu().numpy() if self.device.type != "cpu" else self.numpy()
        return array.astype(dtype) if dtype is not None else array

    def _host_copy(self) -> np.ndarray:
        return self._backend.to_numpy(self._view())

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (allowed on every device)."""
        if self.numel() != 1:
            raise ArgumentError(
                f"item() needs a tensor with exactly one element, but this one has shape "
                f"{format_shape(self._shape)} ({self.numel()} elements); reduce it first "
                "(e.g. `.sum()`, `.mean()`) or use `.tolist()`"
            )
        return self._host_copy().reshape(()).item()

    def tolist(self) -> Any:
        if self.numel() > 1:
            _check_scalar_access(self, "tolist()")
        return self._host_copy().tolist()

    def _one_element(self, what: str) -> Any:
        if self.numel() != 1:
            raise ArgumentError(
                f"{what} of a tensor with {self.numel()} elements is ambiguous; use "
                "`.any()` or `.all()` for a mask, or reduce the tensor first"
            )
        base = self._base
        if base is not None and base.numel() > 1:
            # one element of a larger tensor (``t[i]``): the element-by-element loop the
            # guard is for. A one-element result of its own (``(x < 0).all()``, a loss,
            # ``t[i] > 1``) is one synchronising read, like ``.item()``, and is allowed;
            # many from one line are a loop, and warned about (_note_host_read).
            _check_scalar_access(self, what)
        elif self._storage.device.type != "cpu":
            _note_host_read(self, what)
        return self._host_copy().reshape(()).item()

    def __bool__(self) -> bool:
        return bool(self._one_element("converting to bool (an `if` or `while` test)"))

    def __float__(self) -> float:
        return float(self._one_element("float()"))

    def __int__(self) -> int:
        return int(self._one_element("int()"))

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self.dtype is bool_:
            raise DTypeError(
                "only integer tensors of a single element can be used as an index, got "
                f"{self.dtype}"
            )
        return int(self._one_element("using a tensor as an index"))

    def __iter__(self):
        if not self._shape:
            raise DTypeError("iteration over a 0-d tensor")
        _check_scalar_access(self, "iterating over a tensor")
        return (self[i] for i in range(self._shape[0]))

    def __repr__(self) -> str:
        from .printing import tensor_repr

        return tensor_repr(self)

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self)

    # --- autograd -----------------------------------------------------------------------------
    def backward(
        self, gradient: Any = None, retain_graph: bool | None = None, create_graph: bool = False
    ) -> None:
        """Accumulate d(self)/d(leaf) into ``leaf.grad`` for every leaf requiring grad."""
        autograd.backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph)

    def detach(self) -> Tensor:
        """The same data (shared memory), cut from the graph."""
        t = Tensor._make(self._storage, self._shape, self._strides, self._offset, self.dtype)
        t._base = self._base
        return t

    def __deepcopy__(self, memo: dict) -> Tensor:
        """An independent copy with the same values, dtype, device and ``requires_grad``
        (and a copy of ``.grad``); the copy is a leaf, as in PyTorch."""
        if id(self) in memo:
            return memo[id(self)]
        with autograd.no_grad():
            result = self.clone()
        result.requires_grad = self.requires_grad
        memo[id(self)] = result
        if self.grad is not None:
            import copy

            result.grad = copy.deepcopy(self.grad, memo)
        return result

    def __reduce__(self) -> tuple:
        """Pickle through a host copy: ``(values, dtype name, device, requires_grad)``."""
        return (
            _rebuild_tensor,
            (self._host_copy(), self.dtype.name, str(self.device), self.requires_grad),
        )

    def detach_(self) -> Tensor:
        self._node = None
        self.requires_grad = False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if requires_grad and not self.dtype.is_floating_point:
            raise DTypeError(
                f"only floating point tensors can require gradients, but this one is "
                f"{self.dtype}; convert it first, e.g. `x.float()`"
            )
        if not requires_grad and self._node is not None:
            raise RuntimeError(
                "requires_grad_(False) only works on leaf tensors; use `.detach()` to cut a "
                "computed tensor from the graph"
            )
        self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor during backward (the gradient of its
        value when backward runs, after any in-place change, as in PyTorch)."""
        autograd.retain_grad(self)

    def sum_to_shape(self, shape: tuple[int, ...]) -> Tensor:
        """Sum over the dimensions that broadcasting added or expanded to reach ``shape``."""
        if self._shape == shape:
            return self
        lead = self.ndim - len(shape)
        dims = list(range(lead))
        dims += [lead + i for i, s in enumerate(shape) if s == 1 and self._shape[lead + i] != 1]
        result = self.sum(dim=tuple(dims), keepdim=True) if dims else self
        return result.reshape(shape)

    # --- device and dtype ---------------------------------------------------------------------
    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(other_tensor)``.

        Returns ``self`` when nothing changes. Moving between devices is differentiable."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                device, dtype = arg.device, arg.dtype
            elif isinstance(arg, (Device, str)) and not (
                isinstance(arg, str) and _is_dtype_name(arg)
            ):
                device = arg
            else:
                dtype = arg
        result = self
        if dtype is not None:
            dtype = as_dtype(dtype)
            if dtype is not self.dtype:
                from .ops.elementwise import cast

                result = cast(result, dtype)
        if device is not None:
            device = as_device(device)
            if device != result.device:
                from .ops.movement import transfer

                result = transfer(result, device)
        if memory_format is not None:
            from . import memory_formats as formats

            result = formats.convert(result, memory_format)
        return result

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> Tensor:
        return self.to("cuda" if device is None else f"cuda:{device}")

    def float(self) -> Tensor:
        return self.to(default_float())

    def double(self) -> Tensor:
        return self.to(float64)

    def int(self) -> Tensor:
        return self.to(int32)

    def long(self) -> Tensor:
        return self.to(int64)

    def bool(self) -> Tensor:
        return self.to(bool_)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def clone(self) -> Tensor:
        from .ops.elementwise import cast

        return cast(self, self.dtype)

    def contiguous(self, memory_format: Any = None) -> Tensor:
        if memory_format is not None:  # kg.channels_last, ...: kernelgrad/memory_formats.py
            from . import memory_formats as formats

            return formats.convert(self, memory_format)
        return self if self.is_contiguous() else self.clone()

    # --- arithmetic operators -----------------------------------------------------------------
    def __add__(self, other: Any) -> Tensor:
        return _ew.ADD(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _ew.ADD(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _ew.SUB(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _ew.SUB(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _ew.MUL(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _ew.MUL(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _ew.DIV(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _ew.DIV(other, self)

    def __floordiv__(self, other: Any) -> Tensor:
        return _ew.FLOOR_DIVIDE(self, other)

    def __rfloordiv__(self, other: Any) -> Tensor:
        return _ew.FLOOR_DIVIDE(other, self)

    def __mod__(self, other: Any) -> Tensor:
        return _ew.REMAINDER(self, other)

    def __rmod__(self, other: Any) -> Tensor:
        return _ew.REMAINDER(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return _ew.POW(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return _ew.POW(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return _linalg.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _linalg.matmul(other, self)

    def __neg__(self) -> Tensor:
        return _ew.NEG(self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return _ew.ABS(self)

    def __invert__(self) -> Tensor:
        if self.dtype is not bool_:
            raise DTypeError(
                f"~ is only defined for bool tensors here, got {self.dtype}; use -x - 1 for "
                "integers"
            )
        return _ew.LOGICAL_NOT(self)

    def __and__(self, other: Any) -> Tensor:
        return _ew.LOGICAL_AND(self, other)

    __rand__ = __and__

    def __or__(self, other: Any) -> Tensor:
        return _ew.LOGICAL_OR(self, other)

    __ror__ = __or__

    def __xor__(self, other: Any) -> Tensor:
        return _ew.LOGICAL_XOR(self, other)

    __rxor__ = __xor__

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _ew.EQ(self, other)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _ew.NE(self, other)

    def __lt__(self, other: Any) -> Tensor:
        return _ew.LT(self, other)

    def __le__(self, other: Any) -> Tensor:
        return _ew.LE(self, other)

    def __gt__(self, other: Any) -> Tensor:
        return _ew.GT(self, other)

    def __ge__(self, other: Any) -> Tensor:
        return _ew.GE(self, other)

    # in-place operators
    def __iadd__(self, other: Any) -> Tensor:
        return _inplace.apply_inplace(_ew.ADD, self, other)

    def __isub__(self, other: Any) -> Tensor:
        return _inplace.apply_inplace(_ew.SUB, self, other)

    def __imul__(self, other: Any) -> Tensor:
        return _inplace.apply_inplace(_ew.MUL, self, other)

    def __itruediv__(self, other: Any) -> Tensor:
        return _inplace.apply_inplace(_ew.DIV, self, other)

    # `x //= y`, `x %= y`, `x **= y` write into x (and so into what x views) through
    # floor_divide_, remainder_ and pow_ (bound by ops/torch_functions.py), with add_'s
    # dtype check: `int_tensor //= 2.5` raises, as in PyTorch. (`x @= y` stays
    # `x = x @ y`: PyTorch has no in-place matmul either.)
    def __ifloordiv__(self, other: Any) -> Tensor:
        return self.floor_divide_(other)

    def __imod__(self, other: Any) -> Tensor:
        return self.remainder_(other)

    def __ipow__(self, other: Any) -> Tensor:
        return self.pow_(other)

    # --- named elementwise methods ------------------------------------------------------------
    def add(self, other: Any, alpha: Any = 1) -> Tensor:
        return _ew.ADD(self, other if alpha == 1 else other * alpha)

    def sub(self, other: Any, alpha: Any = 1) -> Tensor:
        return _ew.SUB(self, other if alpha == 1 else other * alpha)

    def mul(self, other: Any) -> Tensor:
        return _ew.MUL(self, other)

    def div(self, other: Any, rounding_mode: str | None = None) -> Tensor:
        if rounding_mode is not None:
            return _composite.div(self, other, rounding_mode)
        return _ew.DIV(self, other)

    def pow(self, other: Any) -> Tensor:
        return _ew.POW(self, other)

    def neg(self) -> Tensor:
        return _ew.NEG(self)

    def exp(self) -> Tensor:
        return _ew.EXP(self)

    def log(self) -> Tensor:
        return _ew.LOG(self)

    def log1p(self) -> Tensor:
        return _ew.LOG1P(self)

    def expm1(self) -> Tensor:
        return _ew.EXPM1(self)

    def sqrt(self) -> Tensor:
        return _ew.SQRT(self)

    def rsqrt(self) -> Tensor:
        return _ew.RECIPROCAL(_ew.SQRT(self))

    def sin(self) -> Tensor:
        return _ew.SIN(self)

    def cos(self) -> Tensor:
        return _ew.COS(self)

    def tanh(self) -> Tensor:
        return _ew.TANH(self)

    def sigmoid(self) -> Tensor:
        return _ew.SIGMOID(self)

    def relu(self) -> Tensor:
        return _ew.RELU(self)

    def abs(self) -> Tensor:
        return _ew.ABS(self)

    def sign(self) -> Tensor:
        return _ew.SIGN(self)

    def reciprocal(self) -> Tensor:
        return _ew.RECIPROCAL(self)

    def erf(self) -> Tensor:
        return _ew.ERF(self)

    def square(self) -> Tensor:
        """``x * x``; a bool tensor squares to int64, as in PyTorch (``x * x`` is bool)."""
        x = self.long() if self.dtype is bool_ else self
        return _ew.MUL(x, x)

    def logical_not(self) -> Tensor:
        return _ew.LOGICAL_NOT(self)

    def isnan(self) -> Tensor:
        return _ew.ISNAN(self)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        return _ew.clamp(self, min, max)

    clip = clamp

    def maximum(self, other: Any) -> Tensor:
        return _ew.MAXIMUM(self, other)

    def minimum(self, other: Any) -> Tensor:
        return _ew.MINIMUM(self, other)

    def where(self, condition: Any, other: Any) -> Tensor:
        return _ew.where(condition, self, other)

    # --- in-place methods ---------------------------------------------------------------------
    def add_(self, other: Any, alpha: Any = 1) -> Tensor:
        return _inplace.apply_inplace(_ew.ADD, self, other if alpha == 1 else other * alpha)

    def sub_(self, other: Any, alpha: Any = 1) -> Tensor:
        return _inplace.apply_inplace(_ew.SUB, self, other if alpha == 1 else other * alpha)

    def mul_(self, other: Any) -> Tensor:
        return _inplace.apply_inplace(_ew.MUL, self, other)

    def div_(self, other: Any) -> Tensor:
        return _inplace.apply_inplace(_ew.DIV, self, other)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        return _inplace.clamp_(self, min, max)

    def relu_(self) -> Tensor:
        return _inplace.apply_inplace(_ew.RELU, self)

    def zero_(self) -> Tensor:
        return _inplace.fill_(self, 0)

    def fill_(self, value: Any) -> Tensor:
        return _inplace.fill_(self, value)

    def copy_(self, source: Any) -> Tensor:
        return _inplace.copy_(self, source)

    def uniform_(self, from_: float = 0.0, to: float = 1.0) -> Tensor:
        """Fill with samples from U(from_, to), in place (PyTorch's ``Tensor.uniform_``).

        >>> import kernelgrad as kg
        >>> w = kg.empty(3)
        >>> bool(((w.uniform_(-0.1, 0.1) >= -0.1) & (w < 0.1)).all())
        True
        """
        return _inplace.random_(self, "uniform", from_, to)

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> Tensor:
        """Fill with samples from N(mean, std**2), in place (PyTorch's ``Tensor.normal_``)."""
        return _inplace.random_(self, "normal", mean, std)

    # --- reductions ---------------------------------------------------------------------------
    # ``axis=`` is NumPy's name for ``dim=``, which PyTorch accepts too
    def sum(
        self, dim: Any = None, keepdim: bool = False, dtype: Any = None, *, axis: Any = None
    ) -> Tensor:
        return _reduce.sum(self, _axis(dim, axis, "sum"), keepdim, dtype)

    def mean(
        self, dim: Any = None, keepdim: bool = False, dtype: Any = None, *, axis: Any = None
    ) -> Tensor:
        x = self if dtype is None else self.to(dtype)
        return _reduce.mean(x, _axis(dim, axis, "mean"), keepdim)

    def max(
        self, dim: Any = None, keepdim: bool = False, *, axis: Any = None, other: Any = None
    ) -> Any:
        if isinstance(dim, Tensor) and other is None:
            return _ew.MAXIMUM(self, dim)
        return _reduce.max(self, _axis(dim, axis, "max"), keepdim, other=other)

    def min(
        self, dim: Any = None, keepdim: bool = False, *, axis: Any = None, other: Any = None
    ) -> Any:
        if isinstance(dim, Tensor) and other is None:
            return _ew.MINIMUM(self, dim)
        return _reduce.min(self, _axis(dim, axis, "min"), keepdim, other=other)

    def amax(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        return _reduce.amax(self, _axis(dim, axis, "amax"), keepdim)

    def amin(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        return _reduce.amin(self, _axis(dim, axis, "amin"), keepdim)

    def argmax(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        return _reduce.argmax(self, _axis(dim, axis, "argmax"), keepdim)

    def argmin(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        return _reduce.argmin(self, _axis(dim, axis, "argmin"), keepdim)

    def var(
        self,
        dim: Any = None,
        correction: Any = None,
        keepdim: bool = False,
        unbiased: Any = None,
        *,
        axis: Any = None,
    ) -> Tensor:
        return _reduce.var(self, _axis(dim, axis, "var"), correction, keepdim, unbiased)

    def std(
        self,
        dim: Any = None,
        correction: Any = None,
        keepdim: bool = False,
        unbiased: Any = None,
        *,
        axis: Any = None,
    ) -> Tensor:
        return _reduce.var(self, _axis(dim, axis, "std"), correction, keepdim, unbiased).sqrt()

    def logsumexp(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        return _reduce.logsumexp(self, _axis(dim, axis, "logsumexp"), keepdim)

    def any(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        return _reduce.any(self, _axis(dim, axis, "any"), keepdim)

    def all(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None) -> Tensor:
        return _reduce.all(self, _axis(dim, axis, "all"), keepdim)

    def softmax(self, dim: int) -> Tensor:
        return _reduce.softmax(self, dim)

    def log_softmax(self, dim: int) -> Tensor:
        return _reduce.log_softmax(self, dim)

    # --- movement -----------------------------------------------------------------------------
    def reshape(self, *shape: Any) -> Tensor:
        return _movement.reshape(self, shape)

    def view(self, *shape: Any) -> Tensor:
        """``view(shape)``: the same memory with a new shape (no copy; see ``reshape``).
        ``view(dtype)``: the same memory read as another dtype (bits reinterpreted, as in
        PyTorch); see :func:`kernelgrad.ops.movement.view_dtype`."""
        if (
            len(shape) == 1
            and not isinstance(shape[0], (tuple, list))
            and not hasattr(shape[0], "__index__")
        ):
            return _movement.view_dtype(self, shape[0])
        return _movement.view(self, shape)

    def view_as(self, other: Tensor) -> Tensor:
        return _movement.view(self, (other.shape,))

    def reshape_as(self, other: Tensor) -> Tensor:
        return _movement.reshape(self, (other.shape,))

    def permute(self, *dims: Any) -> Tensor:
        return _movement.permute(self, dims)

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return _movement.transpose(self, dim0, dim1)

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor with at most 2 dimensions, got {self.ndim}")
        return self.T

    def expand(self, *sizes: Any) -> Tensor:
        return _movement.expand(self, sizes)

    def expand_as(self, other: Tensor) -> Tensor:
        return _movement.expand(self, (other.shape,))

    def broadcast_to(self, shape: Any) -> Tensor:
        return _movement.expand(self, (shape,))

    def squeeze(self, dim: Any = None) -> Tensor:
        return _movement.squeeze(self, dim)

    def unsqueeze(self, dim: int) -> Tensor:
        return _movement.unsqueeze(self, dim)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        return _movement.flatten(self, start_dim, end_dim)

    def unflatten(self, dim: int, sizes: Any) -> Tensor:
        return _movement.unflatten(self, dim, sizes)

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        return _movement.narrow(self, dim, start, length)

    def unfold(self, dimension: int, size: int, step: int, dilation: int = 1) -> Tensor:
        return _movement.unfold(self, dimension, size, step, dilation)

    def flip(self, dims: Any) -> Tensor:
        return _movement.flip(self, dims)

    def as_strided(self, size: Any, stride: Any, storage_offset: Any = None) -> Tensor:
        return _movement.as_strided(self, size, stride, storage_offset)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        return _movement.chunk(self, chunks, dim)

    def split(self, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
        return _movement.split(self, split_size, dim)

    def repeat(self, *sizes: Any) -> Tensor:
        return _movement.repeat(self, sizes)

    # --- indexing -----------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Tensor:
        return _indexing.getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        _indexing.setitem(self, key, value)

    def take_along(self, dim: int, index: Tensor) -> Tensor:
        """``index_select``: pick entries of ``dim`` by an integer tensor of any shape."""
        return _indexing.take(self, dim, index)

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        return _indexing.take(self, dim, index)

    def gather(self, dim: int, index: Tensor) -> Tensor:
        return _indexing.gather(self, dim, index)

    # --- linear algebra -----------------------------------------------------------------------
    def matmul(self, other: Any) -> Tensor:
        return _linalg.matmul(self, other)

    # --- PyTorch's wider API (ops/composite.py and the trigonometric primitives) -------------
    def eq(self, other: Any) -> Tensor:
        return _ew.EQ(self, other)

    def ne(self, other: Any) -> Tensor:
        return _ew.NE(self, other)

    def lt(self, other: Any) -> Tensor:
        return _ew.LT(self, other)

    def le(self, other: Any) -> Tensor:
        return _ew.LE(self, other)

    def gt(self, other: Any) -> Tensor:
        return _ew.GT(self, other)

    def ge(self, other: Any) -> Tensor:
        return _ew.GE(self, other)

    def tan(self) -> Tensor:
        return _ew.TAN(self)

    def asin(self) -> Tensor:
        return _ew.ASIN(self)

    def acos(self) -> Tensor:
        return _ew.ACOS(self)

    def atan(self) -> Tensor:
        return _ew.ATAN(self)

    arcsin, arccos, arctan = asin, acos, atan

    def sinh(self) -> Tensor:
        return _ew.SINH(self)

    def cosh(self) -> Tensor:
        return _ew.COSH(self)

    def asinh(self) -> Tensor:
        return _ew.ASINH(self)

    def acosh(self) -> Tensor:
        return _ew.ACOSH(self)

    def atanh(self) -> Tensor:
        return _ew.ATANH(self)

    arcsinh, arccosh, arctanh = asinh, acosh, atanh

    def floor(self) -> Tensor:
        return _ew.FLOOR(self)

    def ceil(self) -> Tensor:
        return _ew.CEIL(self)

    def trunc(self) -> Tensor:
        return _ew.TRUNC(self)

    fix = trunc

    def round(self, decimals: int = 0) -> Tensor:
        return _composite.round(self, decimals)

    def frac(self) -> Tensor:
        return _composite.frac(self)

    def log2(self) -> Tensor:
        return _composite.log2(self)

    def log10(self) -> Tensor:
        return _composite.log10(self)

    def exp2(self) -> Tensor:
        return _composite.exp2(self)

    def isinf(self) -> Tensor:
        return _composite.isinf(self)

    def isfinite(self) -> Tensor:
        return _composite.isfinite(self)

    def nan_to_num(self, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Tensor:
        return _composite.nan_to_num(self, nan, posinf, neginf)

    def fmod(self, other: Any) -> Tensor:
        return _composite.fmod(self, other)

    def remainder(self, other: Any) -> Tensor:
        return _composite.remainder(self, other)

    def floor_divide(self, other: Any) -> Tensor:
        return _composite.floor_divide(self, other)

    def true_divide(self, other: Any) -> Tensor:
        return _ew.DIV(self, other)

    def copysign(self, other: Any) -> Tensor:
        return _composite.copysign(self, other)

    def logaddexp(self, other: Any) -> Tensor:
        return _composite.logaddexp(self, other)

    def atan2(self, other: Any) -> Tensor:
        return _composite.atan2(self, other)

    def hypot(self, other: Any) -> Tensor:
        return _composite.hypot(self, other)

    def lerp(self, end: Any, weight: Any) -> Tensor:
        return _composite.lerp(self, end, weight)

    def isclose(
        self, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
    ) -> Tensor:
        return _composite.isclose(self, other, rtol, atol, equal_nan)

    def allclose(
        self, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
    ) -> bool:
        return _composite.allclose(self, other, rtol, atol, equal_nan)

    def equal(self, other: Tensor) -> bool:
        return _composite.equal(self, other)

    def prod(
        self, dim: Any = None, keepdim: bool = False, dtype: Any = None, *, axis: Any = None
    ) -> Tensor:
        return _composite.prod(self, dim, keepdim, dtype, axis)

    def count_nonzero(self, dim: Any = None) -> Tensor:
        return _composite.count_nonzero(self, dim)

    def aminmax(self, *, dim: Any = None, keepdim: bool = False) -> Any:
        return _composite.aminmax(self, dim=dim, keepdim=keepdim)

    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False) -> Tensor:
        return _composite.norm(self, p, dim, keepdim)

    def cumsum(self, dim: int, dtype: Any = None) -> Tensor:
        return _composite.cumsum(self, dim, dtype)

    def cumprod(self, dim: int, dtype: Any = None) -> Tensor:
        return _composite.cumprod(self, dim, dtype)

    def cummax(self, dim: int) -> Any:
        return _composite.cummax(self, dim)

    def cummin(self, dim: int) -> Any:
        return _composite.cummin(self, dim)

    def logcumsumexp(self, dim: int) -> Tensor:
        return _composite.logcumsumexp(self, dim)

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        return _composite.sort(self, dim, descending, stable)

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
        return _composite.argsort(self, dim, descending, stable)

    def topk(
        self,
        k: int,
        dim: int = -1,
        largest: bool = True,
        sorted: bool = True,  # noqa: A002
    ) -> Any:
        return _composite.topk(self, k, dim, largest, sorted)

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> Any:
        return _composite.kthvalue(self, k, dim, keepdim)

    def median(self, dim: Any = None, keepdim: bool = False) -> Any:
        return _composite.median(self, dim, keepdim)

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        return _composite.nonzero(self, as_tuple=as_tuple)

    def argwhere(self) -> Tensor:
        return _composite.nonzero(self)

    def masked_select(self, mask: Tensor) -> Tensor:
        return _composite.masked_select(self, mask)

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        return _composite.masked_fill(self, mask, value)

    def masked_fill_(self, mask: Tensor, value: Any) -> Tensor:
        return _composite.masked_fill_(self, mask, value)

    def repeat_interleave(
        self, repeats: Any, dim: int | None = None, *, output_size: int | None = None
    ) -> Tensor:
        return _composite.repeat_interleave(self, repeats, dim)

    def roll(self, shifts: Any, dims: Any = None) -> Tensor:
        return _composite.roll(self, shifts, dims)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        return _composite.diagonal(self, offset, dim1, dim2)

    def diag(self, diagonal: int = 0) -> Tensor:
        return _composite.diag(self, diagonal)

    def trace(self) -> Tensor:
        return _composite.trace(self)

    def tril(self, diagonal: int = 0) -> Tensor:
        return _composite.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> Tensor:
        return _composite.triu(self, diagonal)

    def movedim(self, source: Any, destination: Any) -> Tensor:
        return _composite.movedim(self, source, destination)

    def swapaxes(self, axis0: int, axis1: int) -> Tensor:
        return self.transpose(axis0, axis1)

    swapdims = swapaxes

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        return _composite.unbind(self, dim)

    def take_along_dim(self, indices: Tensor, dim: int | None = None) -> Tensor:
        return _composite.take_along_dim(self, indices, dim)

    def mm(self, other: Tensor) -> Tensor:
        return _composite.mm(self, other)

    def bmm(self, other: Tensor) -> Tensor:
        return _composite.bmm(self, other)

    def mv(self, other: Tensor) -> Tensor:
        return _composite.mv(self, other)

    def dot(self, other: Tensor) -> Tensor:
        return _composite.dot(self, other)

    def outer(self, other: Tensor) -> Tensor:
        return _composite.outer(self, other)

    # --- PyTorch's tensor bookkeeping methods -------------------------------------------------
    def nelement(self) -> int:
        return self.numel()

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def type(self, dtype: Any = None) -> Any:
        """With no argument, the type's name (``'kernelgrad.FloatTensor'``,
        ``'kernelgrad.cuda.FloatTensor'`` on a CUDA device); with a dtype
        (or a name such as ``'torch.LongTensor'``), the tensor converted to it."""
        if dtype is None:
            cuda = "cuda." if self.device.type == "cuda" else ""  # 'torch.cuda.FloatTensor'
            return f"kernelgrad.{cuda}{_TYPE_NAMES[self.dtype.name]}"
        # a legacy type (x.type(torch.FloatTensor), torch.cuda.FloatTensor) or its name
        # ('torch.cuda.LongTensor'): its dtype, and its device, as PyTorch
        if isinstance(dtype, str) and dtype.rpartition(".")[2] in _TYPE_NAMES.values():
            from . import cuda, legacy_types

            types = cuda if dtype.rpartition(".")[0].endswith("cuda") else legacy_types
            dtype = getattr(types, dtype.rpartition(".")[2])
        if hasattr(dtype, "_dtype_name"):
            if dtype._device_type == self.device.type:
                return self.to(as_dtype(dtype._dtype_name))
            return self.to(dtype._device(), as_dtype(dtype._dtype_name))
        return self.to(as_dtype(dtype))

    def new_tensor(
        self, data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """A new tensor from ``data`` with this tensor's dtype and device by default."""
        from .ops.creation import tensor

        values = data.detach().tolist() if isinstance(data, Tensor) else data
        return tensor(values, **self._new_options(dtype, device), requires_grad=requires_grad)

    def new_full(
        self,
        size: Any,
        fill_value: Any,
        *,
        dtype: Any = None,
        device: Any = None,
        requires_grad: bool = False,
    ) -> Tensor:
        from .ops.creation import full

        options = self._new_options(dtype, device)
        return full(size, fill_value, **options, requires_grad=requires_grad)

    def new_zeros(
        self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        from .ops.creation import zeros

        options = self._new_options(dtype, device)
        return zeros(*size, **options, requires_grad=requires_grad)

    def new_ones(
        self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        from .ops.creation import ones

        options = self._new_options(dtype, device)
        return ones(*size, **options, requires_grad=requires_grad)

    def new_empty(
        self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        from .ops.creation import empty

        options = self._new_options(dtype, device)
        return empty(*size, **options, requires_grad=requires_grad)

    def _new_options(self, dtype: Any, device: Any) -> dict[str, Any]:
        """``new_*``: this tensor's dtype and device unless given."""
        return {
            "dtype": self.dtype if dtype is None else dtype,
            "device": self.device if device is None else device,
        }

    # --- interop (kernelgrad/interop.py) ------------------------------------------------------
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: Any = None,
        dl_device: Any = None,
        copy: Any = None,
    ) -> Any:
        """A DLPack capsule sharing this tensor's memory (``numpy.from_dlpack(t)``,
        ``torch.from_dlpack(t)``, ...)."""
        from .interop import to_dlpack

        return to_dlpack(
            self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        from .interop import dlpack_device

        return dlpack_device(self)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA tensors only (an AttributeError on the CPU, as in PyTorch)."""
        from .interop import cuda_array_interface

        return cuda_array_interface(self)

    def __getattr__(self, name: str) -> Any:
        # only reached for names the class does not have: say what kernelgrad offers
        from .errors import missing_attribute

        raise missing_attribute("Tensor", name)


# The names of PyTorch's legacy tensor types, by dtype (``x.type()``).
_TYPE_NAMES = {
    "float32": "FloatTensor",
    "float64": "DoubleTensor",
    "int32": "IntTensor",
    "int64": "LongTensor",
    "bool": "BoolTensor",
}


def _axis(dim: Any, axis: Any, op: str) -> Any:
    """``axis=`` is an alias of ``dim=`` (as in PyTorch); giving both is an error."""
    if axis is None:
        return dim
    if dim is not None:
        raise ArgumentError(f"{op}: give dim or its alias axis, not both (dim={dim}, axis={axis})")
    return axis


def _rebuild_tensor(values: np.ndarray, dtype: str, device: str, requires_grad: bool) -> Tensor:
    from .ops.creation import tensor

    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def _is_dtype_name(text: str) -> bool:
    try:
        as_dtype(text)
        return True
    except TypeError:
        return False


# Bound at the end: the op modules import Tensor from this module.
from .ops import composite as _composite  # noqa: E402
from .ops import elementwise as _ew  # noqa: E402
from .ops import indexing as _indexing  # noqa: E402
from .ops import inplace as _inplace  # noqa: E402
from .ops import linalg as _linalg  # noqa: E402
from .ops import movement as _movement  # noqa: E402
from .ops import reduce as _reduce  # noqa: E402
from .ops import torch_functions as _torch_functions  # noqa: E402, F401


# PyTorch's linear-algebra methods (x.inverse(), x.det(), x.svd(), ...): the functions of
# kernelgrad/linalg/_legacy.py, which is imported when one of them is first called.
def _linalg_method(name: str) -> Any:
    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        from .linalg import _legacy

        return _legacy.FUNCTIONS[name](self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``torch.Tensor.{name}``: ``kg.{name}(self, ...)``."
    return method


# the legacy linear-algebra names that are Tensor methods too (kg.<name> for all of them)
LINALG_METHODS = (
    "inverse",
    "det",
    "logdet",
    "slogdet",
    "cholesky",
    "cholesky_solve",
    "cholesky_inverse",
    "qr",
    "svd",
    "pinverse",
    "matrix_power",
    "matrix_exp",
    "triangular_solve",
    "ger",
)
for _name in LINALG_METHODS:
    setattr(Tensor, _name, _linalg_method(_name))
del _name
