"""More of PyTorch's top-level functions and Tensor methods that training programs use,
composed from kernelgrad's operations (gradients come from the composition):

* random fills in place: ``random_``, ``exponential_``, ``geometric_``, ``cauchy_``,
  ``log_normal_`` (from kernelgrad's generator: ``kg.manual_seed`` makes them repeat);
* shapes and views: ``split_with_sizes``, ``unsafe_split``, ``unsafe_chunk``,
  ``narrow_copy``, ``adjoint`` / ``H`` / ``mH``, ``row_stack``, ``constant_pad_nd``,
  ``unravel_index``, ``combinations``;
* calculus on samples: ``gradient``, ``cumulative_trapezoid``; ``rsub``;
* questions: ``is_nonzero``, ``is_same_size``, ``is_signed``, ``is_complex``,
  ``typename``, ``get_device``, ``Tensor.is_set_to``, ``Tensor.dim_order``, ``layout``;
* settings: ``use_deterministic_algorithms`` (``determinism.py``: kernelgrad's one
  nondeterministic kernel, the CUDA scatter-add's atomics, then raises or warns),
  ``set_float32_matmul_precision`` (a permission to be less precise that kernelgrad
  does not use: products stay full float32), ``set_default_tensor_type``,
  ``set_flush_denormal``;
* ``frombuffer`` (shares the buffer's memory, as PyTorch), ``Tensor.apply_`` /
  ``map_`` (a Python function per element on the host: CPU tensors only, as in
  PyTorch).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import autograd
from ..determinism import (
    are_deterministic_algorithms_enabled,
    is_deterministic_algorithms_warn_only_enabled,
    use_deterministic_algorithms,
)
from ..errors import ArgumentError, DeviceMismatchError, ShapeError
from ..shapes import normalize_dim
from ..tensor import Tensor

__all__ = [
    "are_deterministic_algorithms_enabled",
    "combinations",
    "constant_pad_nd",
    "cumulative_trapezoid",
    "frombuffer",
    "get_device",
    "get_float32_matmul_precision",
    "gradient",
    "is_complex",
    "is_deterministic_algorithms_warn_only_enabled",
    "is_nonzero",
    "is_same_size",
    "is_signed",
    "layout",
    "row_stack",
    "rsub",
    "set_default_tensor_type",
    "set_float32_matmul_precision",
    "set_flush_denormal",
    "split_with_sizes",
    "strided",
    "typename",
    "unravel_index",
    "use_deterministic_algorithms",
]


# --- layouts ------------------------------------------------------------------------------------
class layout:  # PyTorch's name
    """A tensor memory layout; kernelgrad has one, ``kg.strided`` (dense, with strides)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"kernelgrad.{self.name}"


strided = layout("strided")


# --- random fills in place ----------------------------------------------------------------------
def _fill_random(x: Tensor, samples: Tensor, name: str) -> Tensor:
    from . import inplace

    if inplace._check_autograd(x, (), name):
        inplace._record_overwrite(x, samples, name)
        return x
    with autograd.no_grad():
        x.copy_(samples)
    return x


def _uniform_like(x: Tensor) -> Tensor:
    """U[0, 1) samples of ``x``'s shape in float64 on its device (kernelgrad's generator)."""
    from .creation import rand

    return rand(*x.shape, dtype=_float_for(x), device=x.device)


def _float_for(x: Tensor) -> Any:
    from ..dtypes import float64

    return x.dtype if x.dtype.is_floating_point else float64


def random_(
    self: Tensor, from_: int = 0, to: int | None = None, *, generator: Any = None
) -> Tensor:
    """Whole numbers drawn uniformly from ``[from_, to - 1]`` (``random_(to)``: from 0);
    with no bound, from 0 to the largest whole number the dtype holds exactly (2**24 for
    float32, 2**53 for float64, the maximum for integers), as PyTorch."""
    from .creation import randint

    if to is None and from_ != 0:
        from_, to = 0, from_
    if to is None:
        if self.dtype.is_floating_point:
            to = 2 ** (24 if self.dtype.itemsize == 4 else 53) + 1
        elif self.dtype.is_bool:
            to = 2
        else:
            to = int(np.iinfo(self.dtype.numpy).max)
    if to <= from_:
        raise ArgumentError(f"random_: expects from < to, got from={from_}, to={to}")
    values = randint(int(from_), int(to), self.shape, device=self.device)
    return _fill_random(self, values.to(self.dtype), "random_")


def exponential_(self: Tensor, lambd: float = 1.0, *, generator: Any = None) -> Tensor:
    """Samples of Exp(``lambd``) (mean 1 / lambd), in place."""
    if not lambd > 0:
        raise ArgumentError(f"exponential_: lambd must be positive, got {lambd}")
    u = _uniform_like(self)
    return _fill_random(self, -(1.0 - u).log() / lambd, "exponential_")


def geometric_(self: Tensor, p: float, *, generator: Any = None) -> Tensor:
    """Samples of the number of Bernoulli(``p``) trials up to the first success (1, 2,
    ...), in place."""
    if not 0 < p < 1:
        raise ArgumentError(f"geometric_: p must be in (0, 1), got {p}")
    u = _uniform_like(self)
    trials = ((1.0 - u).log() / math.log1p(-p)).ceil().clamp(min=1.0)
    return _fill_random(self, trials, "geometric_")


def cauchy_(
    self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: Any = None
) -> Tensor:
    """Samples of the Cauchy distribution (``median``, scale ``sigma``), in place."""
    u = _uniform_like(self)
    return _fill_random(self, median + sigma * (math.pi * (u - 0.5)).tan(), "cauchy_")


def log_normal_(
    self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator: Any = None
) -> Tensor:
    """Samples whose logarithm is N(``mean``, ``std``**2), in place."""
    from .creation import randn

    z = randn(*self.shape, dtype=_float_for(self), device=self.device)
    return _fill_random(self, (z * std + mean).exp(), "log_normal_")


# --- shapes and views ---------------------------------------------------------------------------
def split_with_sizes(x: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """``x.split(list(split_sizes), dim)``: the sizes must add up to the dim's size."""
    dim = normalize_dim(dim, x.ndim)
    if sum(split_sizes) != x.shape[dim]:
        raise ShapeError(
            f"split_with_sizes expects split_sizes to sum exactly to {x.shape[dim]} (the size "
            f"of dimension {dim}), but got split_sizes={list(split_sizes)}"
        )
    return x.split(list(split_sizes), dim)


def adjoint(x: Tensor) -> Tensor:
    """The last two dims swapped (the conjugate transpose; kernelgrad has no complex)."""
    if x.ndim < 2:
        raise ShapeError(f"adjoint: the tensor needs at least 2 dims, got {x.ndim}")
    return x.transpose(-2, -1)


def _transpose_2d(x: Tensor) -> Tensor:
    if x.ndim not in (0, 2):
        raise ShapeError(
            f"Tensor.H is only supported on matrices (2-D tensors), got a {x.ndim}-D tensor; "
            "use .mH for batches of matrices"
        )
    return x if x.ndim == 0 else x.transpose(0, 1)


def row_stack(tensors: Sequence[Tensor], *, out: Any = None) -> Tensor:
    """``vstack`` (PyTorch's alias)."""
    from .composite import vstack

    return vstack(tensors)


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0.0) -> Tensor:
    """Pad with ``value``: ``pad`` gives (before, after) pairs from the last dim back."""
    from ..nn.functional import pad as functional_pad

    return functional_pad(input, list(pad), mode="constant", value=value)


def unravel_index(indices: Any, shape: Sequence[int]) -> tuple[Tensor, ...]:
    """The coordinates of flat ``indices`` in a tensor of ``shape``, one tensor per dim
    (PyTorch's ``torch.unravel_index``)."""
    from ..dtypes import int64
    from .creation import tensor

    if not isinstance(indices, Tensor):
        indices = tensor(indices, dtype=int64)
    if indices.dtype.is_floating_point or indices.dtype.is_bool:
        raise ArgumentError(f"unravel_index: expected an integer tensor, got {indices.dtype}")
    shape = tuple(int(s) for s in ([shape] if isinstance(shape, int) else shape))
    total = math.prod(shape)
    flat = indices.to(int64)
    if indices.numel():
        low, high = int(flat.min().item()), int(flat.max().item())
        if low < -total or high >= total:
            raise IndexError(
                f"unravel_index: index out of bounds for a tensor of shape {shape} "
                f"({total} elements): got values from {low} to {high}"
            )
        flat = (flat + total) % total if low < 0 else flat
    coordinates = []
    for size in reversed(shape):
        coordinates.append(flat % size)
        flat = flat // size
    return tuple(reversed(coordinates))


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """Every combination of ``r`` elements of the 1-D ``input`` (as
    ``itertools.combinations`` / ``combinations_with_replacement``), one per row."""
    from ..dtypes import int64
    from .creation import empty, tensor

    if input.ndim != 1:
        raise ShapeError(f"combinations: expects a 1-D tensor, got {input.ndim} dims")
    if r == 0:
        return empty(0, dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if not rows:
        return empty((0, r), dtype=input.dtype, device=input.device)
    index = tensor(np.array(rows, dtype=np.int64).reshape(-1), dtype=int64, device=input.device)
    return input[index].reshape(len(rows), r)


# --- calculus on samples ------------------------------------------------------------------------
def gradient(
    input: Tensor, *, spacing: Any = 1, dim: Any = None, edge_order: int = 1
) -> tuple[Tensor, ...]:
    """Estimates of the derivative along each of ``dim`` (all dims by default): central
    differences inside, one-sided (``edge_order`` 1 or 2) at the edges, with a uniform
    ``spacing`` per dim or the coordinates of the samples (PyTorch's ``torch.gradient``)."""
    from .creation import tensor
    from .movement import cat

    if edge_order not in (1, 2):
        raise ArgumentError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    if dim is None:
        dims = list(range(input.ndim))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    dims = [normalize_dim(d, input.ndim) for d in dims]
    if isinstance(spacing, (int, float)):
        spacing = [spacing] * len(dims)
    elif isinstance(spacing, Tensor):
        spacing = [spacing]
    spacing = list(spacing)
    if len(spacing) == 1 and len(dims) > 1:
        spacing = spacing * len(dims)
    if len(spacing) != len(dims):
        raise ArgumentError(
            f"gradient: expected spacing to be unspecified, a scalar or a list of "
            f"{len(dims)} values (one per dim), got {len(spacing)}"
        )
    results = []
    for d, h in zip(dims, spacing):
        n = input.shape[d]
        if n < edge_order + 1:
            raise ShapeError(
                f"gradient: each dimension must have at least edge_order + 1 = "
                f"{edge_order + 1} samples; dim {d} has {n}"
            )

        def part(start: int, stop: int, d: int = d) -> Tensor:
            return input.narrow(d, start, stop - start)

        if isinstance(h, Tensor):  # coordinates of the samples
            if h.ndim != 1 or h.shape[0] != n:
                raise ShapeError(f"gradient: coordinates for dim {d} must be 1-D of length {n}")
            x = h.to(device=input.device, dtype=_float_for(input))
        else:
            x = tensor(np.arange(n, dtype=np.float64) * float(h), dtype=_float_for(input),
                       device=input.device)  # fmt: skip
        view = [1] * input.ndim
        view[d] = -1

        def dx(start: int, stop: int, shift: int, x: Tensor = x, view: list = view) -> Tensor:
            return (x[start + shift : stop + shift] - x[start:stop]).reshape(view)

        # interior: the second-order formula for uneven spacing (central when even)
        h1 = dx(0, n - 2, 1)  # x[i] - x[i-1] for i = 1..n-2
        h2 = dx(1, n - 1, 1)  # x[i+1] - x[i]
        left, middle, right = part(0, n - 2), part(1, n - 1), part(2, n)
        inner = (h1**2 * right - h2**2 * left + (h2**2 - h1**2) * middle) / (h1 * h2 * (h1 + h2))
        if edge_order == 1:
            first = (part(1, 2) - part(0, 1)) / dx(0, 1, 1)
            last = (part(n - 1, n) - part(n - 2, n - 1)) / dx(n - 2, n - 1, 1)
        else:
            a, b = dx(0, 1, 1), dx(1, 2, 1)
            first = (
                -(2 * a + b) / (a * (a + b)) * part(0, 1)
                + (a + b) / (a * b) * part(1, 2)
                - a / (b * (a + b)) * part(2, 3)
            )
            a, b = dx(n - 3, n - 2, 1), dx(n - 2, n - 1, 1)
            last = (
                b / (a * (a + b)) * part(n - 3, n - 2)
                - (a + b) / (a * b) * part(n - 2, n - 1)
                + (2 * b + a) / (b * (a + b)) * part(n - 1, n)
            )
        results.append(cat([first, inner, last], dim=d))
    return tuple(results)


def cumulative_trapezoid(
    y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1
) -> Tensor:
    """The running trapezoid-rule integral of ``y`` along ``dim`` (one element fewer),
    with sample coordinates ``x`` or a uniform spacing ``dx`` (1 by default)."""
    dim = normalize_dim(dim, y.ndim)
    n = y.shape[dim]
    if n == 0:
        return y.narrow(dim, 0, 0)
    pairs = (y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1)) / 2
    if x is not None:
        if x.ndim == 1:
            view = [1] * y.ndim
            view[dim] = -1
            steps = (x[1:] - x[:-1]).reshape(view)
        else:
            steps = x.narrow(dim, 1, n - 1) - x.narrow(dim, 0, n - 1)
        pairs = pairs * steps
    elif dx is not None:
        pairs = pairs * dx
    return pairs.cumsum(dim)


def rsub(input: Tensor, other: Any, alpha: float = 1) -> Tensor:
    """``other - alpha * input``."""
    return other - input * alpha if alpha != 1 else other - input


# --- questions ----------------------------------------------------------------------------------
def is_nonzero(input: Tensor) -> bool:
    """Whether a one-element tensor is not zero (PyTorch raises for other sizes)."""
    if input.numel() != 1:
        count = "no values" if input.numel() == 0 else "more than one value"
        raise RuntimeError(f"Boolean value of Tensor with {count} is ambiguous")
    return bool(input.item() != 0)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input: Tensor) -> bool:
    """Whether the dtype holds negative values (every kernelgrad dtype but bool)."""
    return not input.dtype.is_bool


def is_complex(input: Tensor) -> bool:
    """False: kernelgrad has no complex dtypes."""
    return False


def typename(obj: Any) -> str:
    """PyTorch's ``torch.typename``: ``'kernelgrad.FloatTensor'`` for a tensor, the
    qualified class name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    kind = type(obj)
    module = kind.__module__
    return kind.__qualname__ if module in ("builtins", None) else f"{module}.{kind.__qualname__}"


def get_device(input: Tensor) -> int:
    """-1 for a CPU tensor, the device index for a CUDA one."""
    device = input.device
    return -1 if device.type == "cpu" else int(device.index or 0)


def is_set_to(self: Tensor, other: Tensor) -> bool:
    """Whether both are the same view of the same memory (storage, offset, shape,
    strides)."""
    return (
        self._storage.buffer is other._storage.buffer
        and self._offset == other._offset
        and self.shape == other.shape
        and self._strides == other._strides
    )


def dim_order(self: Tensor) -> tuple[int, ...]:
    """The dims from the outermost in memory (largest stride) to the innermost."""
    return tuple(sorted(range(self.ndim), key=lambda d: (-self._strides[d], d)))


def apply_(self: Tensor, callable: Callable[[Any], Any]) -> Tensor:
    """Replace each element by ``callable(element)`` in place, in Python on the host
    (slow, as in PyTorch); CPU tensors only."""
    return _host_map(self, lambda value, _: callable(value), None, "apply_")


def map_(self: Tensor, other: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
    """``self[i] = callable(self[i], other[i])`` in place, ``other`` broadcast to
    ``self``; in Python on the host, CPU tensors only (as in PyTorch)."""
    return _host_map(self, callable, other, "map_")


def _host_map(self: Tensor, fn: Callable, other: Tensor | None, name: str) -> Tensor:
    from .creation import tensor

    for t in (self, other):
        if t is not None and t.device.type != "cpu":
            raise DeviceMismatchError(
                f"{name} is only implemented on CPU tensors (it calls a Python function per "
                f"element), as in PyTorch; got a tensor on {t.device}: use a vectorised "
                "expression or a @kg.kernel instead"
            )
    if self.requires_grad and autograd.is_grad_enabled():
        raise RuntimeError(f"{name}: a tensor that requires grad cannot be changed in place by it")
    values = self.numpy().copy()
    seconds = np.broadcast_to(other.numpy(), values.shape) if other is not None else None
    flat = values.reshape(-1)
    others = seconds.reshape(-1) if seconds is not None else None
    for i in range(flat.size):
        flat[i] = fn(flat[i].item(), None if others is None else others[i].item())
    with autograd.no_grad():
        self.copy_(tensor(values, dtype=self.dtype))
    return self


# --- settings -----------------------------------------------------------------------------------
class _Settings:
    matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """PyTorch's permission to compute float32 products in less precise formats
    ("high": TF32, "medium": bfloat16). kernelgrad records it and computes float32
    products in float32 whatever it is (as "highest"): a permission it does not use."""
    if precision not in ("highest", "high", "medium"):
        raise ArgumentError(
            f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got "
            f"{precision!r}"
        )
    _Settings.matmul_precision = precision


def get_float32_matmul_precision() -> str:
    return _Settings.matmul_precision


def set_flush_denormal(mode: bool) -> bool:
    """PyTorch's switch for flushing denormal floats to zero on the CPU: kernelgrad does
    not change the CPU's floating-point mode, so this returns False (not supported), as
    PyTorch does on CPUs without the feature."""
    return False


def set_default_tensor_type(t: Any) -> None:
    """The legacy form of ``set_default_dtype`` (and device): ``kg.DoubleTensor`` or
    ``'torch.cuda.FloatTensor'`` sets float64, or float32 on CUDA."""
    from ..device import set_default_device
    from .torch_functions import set_default_dtype

    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    kind = name.rpartition(".")[2]
    dtypes = {"FloatTensor": "float32", "DoubleTensor": "float64"}
    if kind not in dtypes:
        raise TypeError(
            f"set_default_tensor_type: only floating point types are supported as the "
            f"default type, got {name}"
        )
    from .. import dtypes as kinds

    set_default_dtype(getattr(kinds, dtypes[kind]))
    set_default_device("cuda" if ".cuda." in f".{name}" or "cuda" in name.split(".") else "cpu")


# --- memory -------------------------------------------------------------------------------------
def frombuffer(
    buffer: Any, *, dtype: Any, count: int = -1, offset: int = 0, requires_grad: bool = False
) -> Tensor:
    """A 1-D tensor over an object with the buffer protocol (``bytes`` are copied: they
    cannot be written), sharing its memory as PyTorch's ``torch.frombuffer``."""
    from ..dtypes import as_dtype
    from .creation import from_numpy

    kind = as_dtype(dtype)
    array = np.frombuffer(buffer, dtype=kind.numpy, count=count, offset=offset)
    if not array.flags.writeable:
        array = array.copy()
    result = from_numpy(array)
    return result.requires_grad_() if requires_grad else result


def _bind() -> None:
    methods = {
        "random_": random_,
        "exponential_": exponential_,
        "geometric_": geometric_,
        "cauchy_": cauchy_,
        "log_normal_": log_normal_,
        "split_with_sizes": split_with_sizes,
        "unsafe_split": lambda self, split_size, dim=0: self.split(split_size, dim),
        "unsafe_chunk": lambda self, chunks, dim=0: self.chunk(chunks, dim),
        "narrow_copy": lambda self, dim, start, length: self.narrow(dim, start, length).clone(),
        "adjoint": adjoint,
        "is_set_to": is_set_to,
        "dim_order": dim_order,
        "get_device": get_device,
        "apply_": apply_,
        "map_": map_,
        "is_nonzero": is_nonzero,
        "is_same_size": is_same_size,
        "is_signed": is_signed,
        "is_complex": is_complex,
        "register_post_accumulate_grad_hook": (
            lambda self, hook: autograd.register_post_accumulate_grad_hook(self, hook)
        ),
    }
    for name, method in methods.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, method)
    properties = {
        "H": _transpose_2d,
        "mH": adjoint,
        "layout": lambda self: strided,
    }
    for name, getter in properties.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, property(getter))


_bind()
