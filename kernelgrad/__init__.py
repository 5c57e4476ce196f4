"""kernelgrad: tensors, autodiff and user kernels that run on the CPU or an NVIDIA GPU.

>>> import kernelgrad as kg
>>> x = kg.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> loss = (x * x).sum()
>>> loss.backward()
>>> x.grad.tolist()
[2.0, 4.0, 6.0]

``import kernelgrad`` is light: Numba is imported when the first kernel runs, and
nothing CUDA-related is imported until a CUDA device is used.
"""

from __future__ import annotations

__version__ = "0.1.0"

import importlib
from typing import Any

from .autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .device import Device, default_device, device
from .dtypes import (
    DType,
    default_float,
    float32,
    float64,
    int32,
    int64,
    promote_types,
)
from .dtypes import bool_ as bool
from .errors import (
    BackwardError,
    DeviceMismatchError,
    InplaceError,
    KernelError,
    ScalarAccessError,
    ShapeError,
)
from .ops import elementwise as _ew
from .ops import reduce as _reduce
from .ops.creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    get_rng_state,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    set_rng_state,
    tensor,
    zeros,
    zeros_like,
)
from .ops.elementwise import clamp, where
from .ops.indexing import gather, index_add, take
from .ops.linalg import matmul
from .ops.movement import cat, stack
from .placement import on
from .tensor import Tensor, allow_scalar

float = float32
long = int64
double = float64


def _unary(op: Any, doc: str) -> Any:
    def fn(x: Any) -> Tensor:
        return op(x)

    fn.__name__ = op.name
    fn.__doc__ = doc
    return fn


exp = _unary(_ew.EXP, "Elementwise e**x.")
log = _unary(_ew.LOG, "Elementwise natural logarithm.")
log1p = _unary(_ew.LOG1P, "Elementwise log(1 + x), accurate for small x.")
expm1 = _unary(_ew.EXPM1, "Elementwise e**x - 1, accurate for small x.")
sqrt = _unary(_ew.SQRT, "Elementwise square root.")
sin = _unary(_ew.SIN, "Elementwise sine.")
cos = _unary(_ew.COS, "Elementwise cosine.")
tanh = _unary(_ew.TANH, "Elementwise hyperbolic tangent.")
sigmoid = _unary(_ew.SIGMOID, "Elementwise logistic function 1 / (1 + e**-x).")
relu = _unary(_ew.RELU, "Elementwise max(x, 0).")
abs = _unary(_ew.ABS, "Elementwise absolute value.")
sign = _unary(_ew.SIGN, "Elementwise sign (-1, 0 or 1).")
erf = _unary(_ew.ERF, "Elementwise error function.")
neg = _unary(_ew.NEG, "Elementwise negation.")
logical_not = _unary(_ew.LOGICAL_NOT, "Elementwise boolean not.")
isnan = _unary(_ew.ISNAN, "True where the element is NaN.")


def _binary(op: Any, doc: str) -> Any:
    def fn(x: Any, y: Any) -> Tensor:
        return op(x, y)

    fn.__name__ = op.name
    fn.__doc__ = doc
    return fn


add = _binary(_ew.ADD, "Elementwise x + y (broadcast).")
sub = _binary(_ew.SUB, "Elementwise x - y (broadcast).")
mul = _binary(_ew.MUL, "Elementwise x * y (broadcast).")
div = _binary(_ew.DIV, "Elementwise x / y (true division, broadcast).")
pow = _binary(_ew.POW, "Elementwise x ** y (broadcast).")
maximum = _binary(_ew.MAXIMUM, "Elementwise larger of x and y (NaN propagates).")
minimum = _binary(_ew.MINIMUM, "Elementwise smaller of x and y (NaN propagates).")
eq = _binary(_ew.EQ, "Elementwise x == y.")
ne = _binary(_ew.NE, "Elementwise x != y.")
lt = _binary(_ew.LT, "Elementwise x < y.")
le = _binary(_ew.LE, "Elementwise x <= y.")
gt = _binary(_ew.GT, "Elementwise x > y.")
ge = _binary(_ew.GE, "Elementwise x >= y.")
logical_and = _binary(_ew.LOGICAL_AND, "Elementwise boolean and.")
logical_or = _binary(_ew.LOGICAL_OR, "Elementwise boolean or.")
logical_xor = _binary(_ew.LOGICAL_XOR, "Elementwise boolean xor.")

sum = _reduce.sum
mean = _reduce.mean
max = _reduce.max
min = _reduce.min
amax = _reduce.amax
amin = _reduce.amin
argmax = _reduce.argmax
argmin = _reduce.argmin
var = _reduce.var
std = _reduce.std
logsumexp = _reduce.logsumexp
softmax = _reduce.softmax
log_softmax = _reduce.log_softmax


def reshape(x: Tensor, shape: Any) -> Tensor:
    return x.reshape(shape)


def permute(x: Tensor, dims: Any) -> Tensor:
    return x.permute(dims)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    return x.transpose(dim0, dim1)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    return x.flatten(start_dim, end_dim)


def squeeze(x: Tensor, dim: Any = None) -> Tensor:
    return x.squeeze(dim)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    return x.unsqueeze(dim)


def is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def numel(x: Tensor) -> int:
    return x.numel()


# Sub-packages load on first attribute access (kg.nn, kg.optim, kg.data, kg.cuda, ...;
# kg.distributed imports mpi4py only in init_process_group).
# ``kg.kernel`` and ``kg.compile`` are packages that can be called (the decorators).
_LAZY_SUBMODULES = (
    "nn",
    "optim",
    "data",
    "utils",
    "accelerator",
    "cuda",
    "backends",
    "ops",
    "info",
    "codecache",
    "debug",
    "kernel",
    "compile",
    "models",
    "serialization",
    "distributed",
)
# Names that live in a lazily imported module: kg.index() and friends (kernel markers),
# kg.elementwise (fused scalar functions), kg.custom_vjp (user backward passes).
_LAZY_ATTRIBUTES = {
    "index": "kernel",
    "local_index": "kernel",
    "group_index": "kernel",
    "shared": "kernel",
    "private": "kernel",
    "barrier": "kernel",
    "elementwise": "kernel",
    "custom_vjp": "kernel",
    "save": "save_load",
    "load": "save_load",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_ATTRIBUTES:
        module = importlib.import_module(f".{_LAZY_ATTRIBUTES[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module 'kernelgrad' has no attribute {name!r}")
