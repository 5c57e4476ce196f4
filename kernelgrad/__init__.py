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
    PerformanceWarning,
    ScalarAccessError,
    ShapeError,
)
from .ops import elementwise as _ew
from .ops import reduce as _reduce
from .ops.creation import (
    Generator,
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
from .ops.elementwise import clamp
from .ops.indexing import gather, index_copy, index_fill, index_put, masked_scatter, take
from .ops.linalg import matmul
from .ops.movement import cat, stack
from .placement import on
from .shapes import Size
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


mul = _binary(_ew.MUL, "Elementwise x * y (broadcast).")
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

softmax = _reduce.softmax
log_softmax = _reduce.log_softmax

# PyTorch's wider API: the trigonometric, hyperbolic and rounding primitives, and the
# operations composed from primitives (kernelgrad/ops/composite.py).
tan = _unary(_ew.TAN, "Elementwise tangent.")
asin = arcsin = _unary(_ew.ASIN, "Elementwise inverse sine (NaN outside [-1, 1]).")
acos = arccos = _unary(_ew.ACOS, "Elementwise inverse cosine (NaN outside [-1, 1]).")
atan = arctan = _unary(_ew.ATAN, "Elementwise inverse tangent.")
sinh = _unary(_ew.SINH, "Elementwise hyperbolic sine.")
cosh = _unary(_ew.COSH, "Elementwise hyperbolic cosine.")
asinh = arcsinh = _unary(_ew.ASINH, "Elementwise inverse hyperbolic sine.")
acosh = arccosh = _unary(_ew.ACOSH, "Elementwise inverse hyperbolic cosine (NaN below 1).")
atanh = arctanh = _unary(_ew.ATANH, "Elementwise inverse hyperbolic tangent.")
floor = _unary(_ew.FLOOR, "Round down to an integer value (same dtype).")
ceil = _unary(_ew.CEIL, "Round up to an integer value (same dtype).")
trunc = fix = _unary(_ew.TRUNC, "Round toward zero to an integer value (same dtype).")
reciprocal = _unary(_ew.RECIPROCAL, "Elementwise 1 / x.")


def square(x: Tensor) -> Tensor:
    """Elementwise x * x (int64 for a bool tensor, as in PyTorch)."""
    return x.square()


def rsqrt(x: Tensor) -> Tensor:
    """Elementwise 1 / sqrt(x)."""
    return x.rsqrt()


def is_floating_point(x: Tensor) -> bool:
    return x.dtype.is_floating_point


def clip(x: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """Alias of :func:`clamp`."""
    return clamp(x, min, max)


def concat(tensors: Any, dim: int = 0) -> Tensor:
    """Alias of :func:`cat`."""
    return cat(tensors, dim)


concatenate = concat


def broadcast_to(x: Tensor, shape: Any) -> Tensor:
    return x.broadcast_to(shape)


def split(x: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    return x.split(split_size_or_sections, dim)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    return x.chunk(chunks, dim)


def flip(x: Tensor, dims: Any) -> Tensor:
    return x.flip(dims)


def as_strided(x: Tensor, size: Any, stride: Any, storage_offset: Any = None) -> Tensor:
    """A view of ``x``'s memory with these sizes, strides and offset (``Tensor.as_strided``)."""
    return x.as_strided(size, stride, storage_offset)


def fliplr(x: Tensor) -> Tensor:
    """Reverse the order of the columns (dim 1)."""
    return x.flip(1)


def flipud(x: Tensor) -> Tensor:
    """Reverse the order of the rows (dim 0)."""
    return x.flip(0)


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    return x.narrow(dim, start, length)


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    return x.index_select(dim, index)


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


from .ops.composite import (
    allclose,
    argsort,
    argwhere,
    atan2,
    bmm,
    copysign,
    count_nonzero,
    cummax,
    cummin,
    cumprod,
    cumsum,
    diag,
    diagonal,
    div,
    dot,
    einsum,
    equal,
    exp2,
    floor_divide,
    fmax,
    fmin,
    fmod,
    frac,
    hstack,
    hypot,
    isclose,
    isfinite,
    isinf,
    kthvalue,
    lerp,
    log2,
    log10,
    logaddexp,
    logaddexp2,
    logcumsumexp,
    masked_fill,
    masked_select,
    median,
    mm,
    movedim,
    multinomial,
    mv,
    nan_to_num,
    nonzero,
    norm,
    outer,
    prod,
    randperm,
    remainder,
    repeat_interleave,
    roll,
    round,
    sort,
    std_mean,
    swapaxes,
    take_along_dim,
    topk,
    trace,
    tril,
    triu,
    true_divide,
    unbind,
    var_mean,
    vstack,
    xlogy,
)
from .ops.composite import aminmax as _aminmax

arctan2 = atan2
swapdims = swapaxes


def aminmax(x: Tensor, *, dim: Any = None, keepdim: bool = False) -> Any:
    """``(min, max)`` of ``x`` (over ``dim``)."""
    return _aminmax(x, dim=dim, keepdim=keepdim)


def add(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    """Elementwise x + alpha * y (broadcast)."""
    return _ew.ADD(x, y if alpha == 1 else _ew.MUL(y, alpha))


def sub(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    """Elementwise x - alpha * y (broadcast)."""
    return _ew.SUB(x, y if alpha == 1 else _ew.MUL(y, alpha))


_NO_VALUE = object()


def where(condition: Any, x: Any = _NO_VALUE, y: Any = _NO_VALUE) -> Any:
    """``x`` where ``condition`` is true, else ``y`` (broadcast together); with the
    condition alone, ``kg.nonzero(condition, as_tuple=True)``.

    >>> import kernelgrad as kg
    >>> kg.where(kg.tensor([True, False]), kg.tensor([1.0, 2.0]), 0.0).tolist()
    [1.0, 0.0]
    """
    if x is _NO_VALUE and y is _NO_VALUE:
        return nonzero(condition, as_tuple=True)
    if x is _NO_VALUE or y is _NO_VALUE:
        raise TypeError("where: give both x and y, or neither (for the indices of the condition)")
    return _ew.where(condition, x, y)


def _accepting_axis(reduction: Any) -> Any:
    """A reduction that also takes NumPy's ``axis=`` for ``dim=``, as PyTorch does."""

    def fn(x: Tensor, dim: Any = None, *args: Any, axis: Any = None, **kwargs: Any) -> Any:
        from .tensor import _axis

        return reduction(x, _axis(dim, axis, reduction.__name__), *args, **kwargs)

    fn.__name__ = reduction.__name__
    fn.__doc__ = reduction.__doc__
    return fn


sum = _accepting_axis(_reduce.sum)
max = _accepting_axis(_reduce.max)
min = _accepting_axis(_reduce.min)
amax = _accepting_axis(_reduce.amax)
amin = _accepting_axis(_reduce.amin)
argmax = _accepting_axis(_reduce.argmax)
argmin = _accepting_axis(_reduce.argmin)
var = _accepting_axis(_reduce.var)
std = _accepting_axis(_reduce.std)
logsumexp = _accepting_axis(_reduce.logsumexp)
any = _accepting_axis(_reduce.any)
all = _accepting_axis(_reduce.all)


def mean(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None
) -> Tensor:
    """Arithmetic mean of a floating point tensor (convert integers first, or give
    ``dtype=``)."""
    return x.mean(dim, keepdim, dtype, axis=axis)


def is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def numel(x: Tensor) -> int:
    return x.numel()


# More of PyTorch's functions, composed from the operations above (ops/torch_functions.py);
# kg.index_add there also takes PyTorch's alpha=.
from .ops.torch_functions import (
    absolute,
    addbmm,
    addcdiv,
    addcmul,
    addmm,
    addmv,
    addr,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    baddbmm,
    bernoulli,
    bincount,
    block_diag,
    broadcast_shapes,
    broadcast_tensors,
    bucketize,
    cartesian_prod,
    cdist,
    clamp_max,
    clamp_min,
    clone,
    column_stack,
    cross,
    deg2rad,
    diag_embed,
    diagflat,
    diff,
    divide,
    dsplit,
    dstack,
    get_default_dtype,
    greater,
    greater_equal,
    hsplit,
    index_add,
    inner,
    isin,
    isneginf,
    isposinf,
    kron,
    less,
    less_equal,
    logit,
    logspace,
    meshgrid,
    moveaxis,
    multiply,
    nanmean,
    nansum,
    negative,
    normal,
    not_equal,
    positive,
    rad2deg,
    randint_like,
    ravel,
    rot90,
    scatter,
    scatter_add,
    searchsorted,
    select,
    set_default_dtype,
    sgn,
    signbit,
    sinc,
    subtract,
    t,
    tensor_split,
    tensordot,
    tile,
    trapezoid,
    trapz,
    tril_indices,
    triu_indices,
    unflatten,
    vdot,
    vsplit,
)

# Special functions, bit operations, statistics, scatter reductions, windows and small
# helpers (ops/special.py, ops/torch_math.py); kg.take also takes PyTorch's take(x, index).
from .ops.torch_math import (
    TORCH_INPLACE_FUNCTIONS as _TORCH_INPLACE_FUNCTIONS,
)
from .ops.torch_math import (
    asarray,
    bartlett_window,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    blackman_window,
    can_cast,
    corrcoef,
    cov,
    diagonal_scatter,
    digamma,
    dist,
    empty_strided,
    erfc,
    erfinv,
    finfo,
    float_power,
    frexp,
    gcd,
    get_num_interop_threads,
    get_num_threads,
    hamming_window,
    hann_window,
    heaviside,
    histc,
    histogram,
    histogramdd,
    i0,
    igamma,
    igammac,
    iinfo,
    index_reduce,
    initial_seed,
    kaiser_window,
    lcm,
    ldexp,
    lgamma,
    mode,
    msort,
    mvlgamma,
    nanmedian,
    nanquantile,
    nextafter,
    polygamma,
    put,
    quantile,
    renorm,
    result_type,
    scalar_tensor,
    scatter_reduce,
    seed,
    select_scatter,
    set_num_interop_threads,
    set_num_threads,
    slice_scatter,
    take,  # noqa: F811 (kg.take also takes PyTorch's take(input, index))
    unique,
    unique_consecutive,
)

globals().update(_TORCH_INPLACE_FUNCTIONS)
# PyTorch's constants (torch.nan, torch.inf, torch.pi, torch.e, torch.newaxis)
from math import e, inf, nan, pi

newaxis = None

# torch.set_default_device / get_default_device (per thread; kernelgrad/device.py)
from .device import get_default_device, set_default_device

# Sub-packages load on first attribute access (kg.nn, kg.optim, kg.data, kg.cuda, ...;
# kg.distributed imports mpi4py only in init_process_group).
# ``kg.kernel`` and ``kg.compile`` are packages that can be called (the decorators).
_LAZY_SUBMODULES = (
    "nn",
    "linalg",
    "special",
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
    "amp",
)
# torch.random, torch.testing, torch.jit, torch.profiler (kernelgrad/random.py, testing.py,
# jit.py, profiler.py)
_LAZY_SUBMODULES += ("random", "testing", "jit", "profiler")
# torch.distributions (kernelgrad/distributions/)
_LAZY_SUBMODULES += ("distributions",)
# torch.func: functional_call only (kernelgrad/func.py)
_LAZY_SUBMODULES += ("func",)
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
    "from_dlpack": "interop",
    "load": "save_load",
    "ctc_loss": "nn.functional.ctc",  # torch.ctc_loss (reduction may be its 0, 1, 2)
    "autocast": "amp",  # torch.autocast: accepted, keeps float32 (kernelgrad/amp.py)
    "memory_format": "memory_formats",  # torch.channels_last, ...
    "contiguous_format": "memory_formats",
    "channels_last": "memory_formats",
    "channels_last_3d": "memory_formats",
    "preserve_format": "memory_formats",
    "FloatTensor": "legacy_types",  # torch.LongTensor(data), isinstance(x, torch.FloatTensor)
    "DoubleTensor": "legacy_types",
    "IntTensor": "legacy_types",
    "LongTensor": "legacy_types",
    "BoolTensor": "legacy_types",
}

from . import dtypes as _dtypes_module

# More of torch's top level: random fills, calculus on samples, questions, settings
# (kernelgrad/ops/torch_rest.py; it also binds the Tensor methods of the same names).
from .ops.torch_rest import (
    adjoint,
    are_deterministic_algorithms_enabled,
    combinations,
    constant_pad_nd,
    cumulative_trapezoid,
    frombuffer,
    get_device,
    get_float32_matmul_precision,
    gradient,
    is_complex,
    is_deterministic_algorithms_warn_only_enabled,
    is_nonzero,
    is_same_size,
    is_signed,
    layout,
    row_stack,
    rsub,
    set_default_tensor_type,
    set_float32_matmul_precision,
    set_flush_denormal,
    split_with_sizes,
    strided,
    typename,
    unravel_index,
    use_deterministic_algorithms,
)
from .printing import set_printoptions

dtype = _dtypes_module.DType  # torch.dtype: isinstance(x.dtype, kg.dtype)

# torch's top-level nn operations (torch.conv2d, torch.dropout, torch.relu_, ...) with
# torch's signatures: kernelgrad/torch_nn_functions.py, imported on first use (it needs kg.nn).
from ._torch_nn_names import TORCH_NN_NAMES as _TORCH_NN_NAMES

_LAZY_ATTRIBUTES.update(dict.fromkeys(_TORCH_NN_NAMES, "torch_nn_functions"))

# torch's top-level linear algebra (torch.inverse, torch.det, torch.svd returning V, ...):
# kernelgrad/linalg/_legacy.py, imported on first use.
from .tensor import LINALG_METHODS as _LINALG_METHODS

_LINALG_NAMES = (*_LINALG_METHODS, "chain_matmul", "vander")
_LAZY_ATTRIBUTES.update(dict.fromkeys(_LINALG_NAMES, "linalg._legacy"))


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_ATTRIBUTES:
        module = importlib.import_module(f".{_LAZY_ATTRIBUTES[name]}", __name__)
        return getattr(module, name)
    from .errors import missing_attribute

    raise missing_attribute("module", name)
