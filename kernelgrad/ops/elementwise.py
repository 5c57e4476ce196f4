"""Elementwise primitives: each is one scalar Python function plus a dtype rule and a VJP.

The scalar function is the whole definition of the operation: the CPU backend compiles
it with ``numba.njit``, the CUDA backend with ``numba.cuda.jit(device=True)``. Adding an
operation means adding one record here, never a per-device rewrite.

VJPs are written in Tensor ops, so they run on every backend and are differentiable
themselves. Gradients of broadcast inputs are reduced to the input's shape by the
autograd engine, so a VJP may return a gradient of the broadcast (output) shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from .. import autograd
from .. import dtypes as _dtypes
from ..backends.base import ScalarFunction, View
from ..dtypes import DType, bool_, default_float, result_type
from ..errors import (
    ArgumentError,
    DeviceMismatchError,
    DivisionByZeroError,
    DTypeError,
    InplaceError,
    ShapeError,
    format_shape,
)
from ..shapes import broadcast_shapes, broadcast_strides, contiguous_strides, overlaps_itself
from ..tensor import Storage, Tensor
from . import register

DtypeRule = Callable[[Sequence[Any]], tuple[list[DType], DType]]


# --- dtype rules ------------------------------------------------------------------------
def _same_dtype(operands: Sequence[Any]) -> DType | None:
    """The common dtype when every operand is a tensor of one dtype (the usual case)."""
    first = getattr(operands[0], "dtype", None)
    for x in operands:
        if type(x) is not Tensor or x.dtype is not first:
            return None
    return first


def promote(operands: Sequence[Any]) -> tuple[list[DType], DType]:
    dtype = _same_dtype(operands) or result_type(*operands)
    return [dtype] * len(operands), dtype


def to_float(operands: Sequence[Any]) -> tuple[list[DType], DType]:
    dtype = result_type(*operands)
    if not dtype.is_floating_point:
        dtype = default_float()
    return [dtype] * len(operands), dtype


def compare(operands: Sequence[Any]) -> tuple[list[DType], DType]:
    dtype = result_type(*operands)
    return [dtype] * len(operands), bool_


def logical(operands: Sequence[Any]) -> tuple[list[DType], DType]:
    return [bool_] * len(operands), bool_


def select(operands: Sequence[Any]) -> tuple[list[DType], DType]:
    dtype = result_type(*operands[1:])
    return [bool_, dtype, dtype], dtype


@dataclass(eq=False)
class ElementwiseOp:
    name: str
    scalar: ScalarFunction
    dtype_rule: DtypeRule
    vjp: Callable[..., Sequence[Tensor | None]] | None = None
    # what the VJP reads: "inputs", "output", "both" or "none"; "others" where each input
    # is read only for the other inputs' gradients (a product: ``y * 3`` reads nothing, so
    # writing into ``y`` afterwards is fine, as in PyTorch)
    saves: str = "inputs"
    reject_bool: bool = False
    # Refuses operands the kernel would silently get wrong: check(operands, out_dtype).
    check: Callable[[Sequence[Any], DType], None] | None = None
    # The op that runs instead when the result is an integer (its semantics differ).
    integer_variant: ElementwiseOp | None = None

    def __call__(self, *operands: Any) -> Tensor:  # replaced by ``apply`` below
        return apply(self, *operands)


OPS: dict[str, ElementwiseOp] = {}


def defop(
    fn: Callable,
    dtype_rule: DtypeRule,
    vjp: Callable | None = None,
    saves: str = "inputs",
    bindings: tuple[str, ...] = (),
    name: str | None = None,
    reject_bool: bool = False,
    library: str | None = None,
) -> ElementwiseOp:
    """Register one elementwise primitive. ``library`` names the standard math function
    the scalar function equals, which backends may call from a vendor library."""
    op_name = name or fn.__name__
    scalar = ScalarFunction.from_python(fn, library=library)
    op = ElementwiseOp(op_name, scalar, dtype_rule, vjp, saves, reject_bool)
    OPS[op_name] = op
    register(op_name, "elementwise", bindings, vjp is not None)
    return op


# --- applying an elementwise op ------------------------------------------------------------
def _common_device(op_name: str, tensors: Sequence[Tensor]):
    device = tensors[0].device
    for t in tensors[1:]:
        if t.device != device:
            raise DeviceMismatchError(
                f"{op_name}: expected all tensors on one device, but found {device} and "
                f"{t.device}. Move them first, e.g. `b = b.to({str(device)!r})`; kernelgrad "
                "never moves data between devices implicitly"
            )
    return device


def _as_operand(value: Any, op_name: str) -> Any:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, (list, tuple, np.ndarray)):
        from .creation import tensor

        return tensor(value)
    raise DTypeError(
        f"{op_name}: unsupported operand of type {type(value).__name__}; expected a Tensor "
        "or a Python number"
    )


def _scalar_from_tensor(t: Tensor) -> Any:
    """A 0-dim CPU tensor that needs no gradient mixes with tensors on any device as a
    plain number (as in PyTorch)."""
    return t.item()


# --- cached decisions ------------------------------------------------------------------------
# What ``apply`` decides for an operation depends only on the operation, each operand's
# dtype, shape, strides and backend (one per device), the Python type of each scalar, the
# output tensor's layout for ``out=`` and the default float dtype: the op actually run
# (an integer variant), the dtypes the kernel computes in, the result's dtype, shape and
# strides, and the broadcast strides of each input. A repeated op looks the decisions up
# under that key instead of redoing them (about half of an eager op's host time). What
# depends on values (an op's ``check``, whether a scalar fits an integer dtype) and on
# state (grad mode, requires_grad, version counters) is still done on every call.
_SCALAR_TYPES = (bool, int, float)
_OUT = object()  # separates the ``out=`` tensor's layout from the operands' in a key
_PLANS: dict[tuple, _Plan] = {}
_PLAN_LIMIT = 4096  # distinct keys kept; the cache starts again when full


class _Plan:
    """The decisions of one ``apply`` key (see above)."""

    __slots__ = ("compute_dtypes", "first", "flat", "input_strides", "numel", "op",
                 "out_dtype", "scalar_checks", "shape", "strides")  # fmt: skip

    def __init__(self, op: ElementwiseOp, operands: Sequence[Any], compute_dtypes: list[DType],
                 out_dtype: DType, shape: tuple[int, ...]) -> None:  # fmt: skip
        self.op = op
        self.compute_dtypes = compute_dtypes
        self.out_dtype = out_dtype
        self.shape = shape
        self.strides = contiguous_strides(shape)
        self.numel = prod(shape)
        # position of the first tensor operand (the result goes on its device)
        self.first = next(k for k, x in enumerate(operands) if isinstance(x, Tensor))
        # per operand: its strides broadcast to the result's shape, or None for a scalar
        self.input_strides = tuple(
            (x._strides if x._shape == shape else broadcast_strides(x._shape, x._strides, shape))
            if isinstance(x, Tensor)
            else None
            for x in operands
        )
        self.scalar_checks = any(
            not isinstance(x, Tensor) and not dtype.is_floating_point
            for x, dtype in zip(operands, compute_dtypes)
        )
        self.flat = None  # the backend's launcher for contiguous operands (set_flat)

    def set_flat(self, backend: Any, out: Tensor | None) -> None:
        """Ask the backend for a launcher of this op's common case, a result (new, or an
        ``out=`` tensor laid out contiguously, as in ``a.add_(b)``) from
        tensor inputs of these layouts and scalars (``prepare_flat_elementwise`` for
        contiguous inputs of the result's shape, ``prepare_strided_elementwise`` for
        broadcast or strided ones; both optional in the Backend protocol); ``apply``
        then hands it buffers, offsets and numbers, with no views in between."""
        if self.op.scalar.nout != 1:
            return
        if out is not None and (out._strides != self.strides or out.dtype != self.out_dtype):
            return  # a strided ``out=``, or one holding another dtype: the general path
        kinds = tuple("scalar" if s is None else "array" for s in self.input_strides)
        arguments = (self.op.scalar, kinds, self.compute_dtypes, self.out_dtype, self.shape)
        if all(s is None or s == self.strides for s in self.input_strides):
            prepare = getattr(backend, "prepare_flat_elementwise", None)
            self.flat = prepare(*arguments) if prepare is not None else None
            return
        # a broadcast or strided input (``prepare_strided_elementwise``, also optional)
        prepare = getattr(backend, "prepare_strided_elementwise", None)
        self.flat = prepare(*arguments, self.input_strides) if prepare is not None else None


def _plan_key(op: ElementwiseOp, operands: Sequence[Any], out: Tensor | None) -> tuple | None:
    """The key of ``apply``'s decisions for these operands, or None when an operand is
    neither a tensor nor a Python bool, int or float (that case is never cached)."""
    key: list[Any] = [op, _dtypes._default_float]
    for x in operands:
        if isinstance(x, Tensor):
            key += (x.dtype, x._shape, x._strides, x._storage.backend)
        elif type(x) in _SCALAR_TYPES:
            key.append(type(x))
        else:
            return None
    if out is not None:
        key += (_OUT, out.dtype, out._shape, out._strides, out._storage.backend)
    return tuple(key)


# View(...) through tuple.__new__: the named tuple's own __new__ is a Python function
_new_view = tuple.__new__


def clear_plans() -> None:
    """Forget every cached ``apply`` decision."""
    _PLANS.clear()


def apply(op: ElementwiseOp, *raw_operands: Any, out: Tensor | None = None) -> Tensor:
    key = _plan_key(op, raw_operands, out)
    plan = _PLANS.get(key) if key is not None else None
    if plan is None:
        return _apply_first(op, raw_operands, out, key)
    operands = raw_operands
    out_dtype = plan.out_dtype
    compute_dtypes = plan.compute_dtypes
    op = plan.op
    if op.check is not None:
        op.check(operands, out_dtype)
    if plan.scalar_checks:
        _check_scalars(operands, compute_dtypes, op.name)
    shape = plan.shape
    if out is None:
        like = operands[plan.first]._storage
        backend = like.backend
        buffer = backend.empty(plan.numel, out_dtype)
        strides = plan.strides
        result = Tensor._make(Storage(buffer, like.device, backend), shape, strides, 0, out_dtype)
        flat = plan.flat
        # the launcher, unless something watches the backend's primitives (kg.compile's
        # trace, count_launches): those wrap ``elementwise`` on the instance
        if flat is not None and "elementwise" not in backend.__dict__:
            _launch_flat(flat, buffer, operands)
            _after(op, operands, result)
            return result
        output = _new_view(View, (buffer, shape, strides, 0, out_dtype))
    else:
        result = out
        backend = out._storage.backend
        flat = plan.flat
        if flat is not None and "elementwise" not in backend.__dict__:
            _launch_flat_into(flat, out, plan.numel, operands)
            return result
        output = out._view()
    inputs = [
        x
        if strides is None
        else _new_view(View, (x._storage.buffer, shape, strides, x._offset, x.dtype))
        for x, strides in zip(operands, plan.input_strides)
    ]
    backend.elementwise(op.scalar, [output], inputs, compute_dtypes)
    if out is None:
        _after(op, operands, result)
    return result


def _launch_flat_into(
    flat: Callable[..., None], out: Tensor, numel: int, operands: Sequence[Any]
) -> None:
    """Run a plan's launcher writing into ``out`` (contiguous, as the plan's key says)."""
    buffer = out._storage.buffer
    offset = out._offset
    if offset or len(buffer) != numel:
        buffer = buffer[offset : offset + numel]
    _launch_flat(flat, buffer, operands)


def _launch_flat(flat: Callable[..., None], buffer: Any, operands: Sequence[Any]) -> None:
    """Call a plan's launcher: the output buffer, then each tensor operand as its buffer
    and offset, each scalar as itself."""
    arguments = []
    for x in operands:
        if isinstance(x, Tensor):
            arguments += (x._storage.buffer, x._offset)
        else:
            arguments.append(x)
    flat(buffer, *arguments)


def apply_into(op: ElementwiseOp, operands: Sequence[Any], out: Tensor, key: tuple | None) -> bool:
    """``apply(op, *operands, out=out)`` for a key whose decisions are cached and whose
    launcher is at hand (the in-place ops' common case, ``ops/inplace.py``, which has
    computed ``key`` already); False, having done nothing, otherwise."""
    plan = _PLANS.get(key) if key is not None else None
    if plan is None or plan.flat is None:
        return False
    backend = out._storage.backend
    if "elementwise" in backend.__dict__:
        return False
    op = plan.op
    if op.check is not None:
        op.check(operands, plan.out_dtype)
    if plan.scalar_checks:
        _check_scalars(operands, plan.compute_dtypes, op.name)
    _launch_flat_into(plan.flat, out, plan.numel, operands)
    return True


def _after(op: ElementwiseOp, operands: Sequence[Any], result: Tensor) -> None:
    """Record the backward of a new result when grad mode is on and an input needs it."""
    if op.vjp is not None and autograd._mode.enabled:
        for x in operands:
            if getattr(x, "requires_grad", False):
                _record(op, operands, [x for x in operands if isinstance(x, Tensor)], result)
                break


# Calling an op is applying it, without a frame in between (``ElementwiseOp.__call__``
# forwarding to ``apply`` cost ~0.2 us per op).
ElementwiseOp.__call__ = apply  # type: ignore[method-assign,assignment]


def _check_scalars(operands: Sequence[Any], compute_dtypes: Sequence[DType], name: str) -> None:
    for value, dtype in zip(operands, compute_dtypes):
        if not isinstance(value, Tensor) and not dtype.is_floating_point:
            check_scalar_fits(value, dtype, name)


def _apply_first(
    op: ElementwiseOp, raw_operands: Sequence[Any], out: Tensor | None, key: tuple | None
) -> Tensor:
    """``apply`` making every decision, and caching them under ``key`` (when not None)."""
    # isinstance, not type(x) is Tensor: subclasses (kg.nn.Parameter) are tensors too
    operands = [x if isinstance(x, Tensor) else _as_operand(x, op.name) for x in raw_operands]
    tensors = [x for x in operands if isinstance(x, Tensor)]
    if not tensors:
        from .creation import tensor

        operands[0] = tensor(operands[0])
        tensors = [operands[0]]
        key = None
    first = tensors[0]
    if len(tensors) > 1 and any(t._storage.device != first._storage.device for t in tensors):
        # 0-dim CPU tensors act as numbers next to tensors on another device.
        if any(t.device.type != "cpu" for t in tensors):
            operands = [
                _scalar_from_tensor(x)
                if isinstance(x, Tensor)
                and x.ndim == 0
                and x.device.type == "cpu"
                and not x.requires_grad
                else x
                for x in operands
            ]
            tensors = [x for x in operands if isinstance(x, Tensor)]
        _common_device(op.name, tensors)  # raises, naming both devices, if still mixed
        first = tensors[0]
        key = None  # operands were converted: not the common case, not cached
    compute_dtypes, out_dtype = op.dtype_rule(operands)
    if op.integer_variant is not None and out_dtype.is_integer:
        op = op.integer_variant
    if op.check is not None:
        op.check(operands, out_dtype)
    if op.reject_bool and out_dtype is bool_:
        raise DTypeError(
            f"{op.name} is not defined for bool tensors (PyTorch refuses it too); convert "
            "first, e.g. `x.to(kg.int64)`, or use `~x` / `kg.logical_not(x)` to invert a "
            "mask and `a ^ b` for the difference of two masks"
        )
    shape = first._shape
    if len(tensors) > 1 and any(t._shape != shape for t in tensors):
        shape = broadcast_shapes(*(t._shape for t in tensors), op=op.name)
    if out is None:
        result = Tensor._empty_on(first._storage, shape, out_dtype)
    else:
        check_writable(out, f"{op.name}_")
        result = out
    inputs = [x._broadcast_view(shape) if isinstance(x, Tensor) else x for x in operands]
    if len(tensors) != len(operands):
        _check_scalars(operands, compute_dtypes, op.name)
    if key is not None:
        if len(_PLANS) >= _PLAN_LIMIT:
            _PLANS.clear()
        plan = _PLANS[key] = _Plan(op, operands, compute_dtypes, out_dtype, shape)
        plan.set_flat(result._backend, out)
    result._backend.elementwise(op.scalar, [result._view()], inputs, compute_dtypes)
    if op.vjp is not None and out is None and autograd.needs_grad(*tensors):
        _record(op, operands, tensors, result)
    return result


def _record(
    op: ElementwiseOp, operands: Sequence[Any], tensors: list[Tensor], result: Tensor
) -> None:
    """Attach ``op``'s backward to ``result`` (grad mode is on, an input requires grad).
    Only a VJP that reads the output keeps a :class:`autograd.SavedOutput`."""
    vjp = op.vjp
    if op.saves == "output" or op.saves == "both":
        saved_output = autograd.SavedOutput(result)
        if op.saves == "output":
            saved: tuple[Tensor, ...] = (saved_output.data,)

            def backward(grad: Tensor) -> Sequence[Tensor | None]:
                return vjp(grad, saved_output.get())
        else:
            saved = (*tensors, saved_output.data)

            def backward(grad: Tensor) -> Sequence[Tensor | None]:
                return vjp(grad, saved_output.get(), *operands)

        autograd.record(op.name, operands, result, backward, saved)
        saved_output.bind(result._node)
        return

    def backward(grad: Tensor) -> Sequence[Tensor | None]:
        return vjp(grad, *operands)

    if op.saves == "inputs":
        saved = tuple(tensors)
    elif op.saves == "others":  # each input is read only for the others' gradients
        saved = tuple(
            t
            for i, t in enumerate(tensors)
            if any(u.requires_grad for j, u in enumerate(tensors) if j != i)
        )
    else:
        saved = ()
    # a VJP that reads no input (add, sub, neg) can run again after its graph was freed,
    # as in PyTorch; its operands stay referenced as long as the node, as before a backward
    autograd.record(op.name, operands, result, backward, saved, reusable=op.saves == "none")


def _grad_if(x: Any, value: Callable[[], Tensor]) -> Tensor | None:
    """Compute a gradient only for inputs that are tensors requiring grad."""
    return value() if isinstance(x, Tensor) and x.requires_grad else None


# --- unary ------------------------------------------------------------------------------------
def neg(x):
    return -x


def exp(x):
    return math.exp(x)


def log(x):
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def log1p(x):
    return math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)


def expm1(x):
    return math.expm1(x)


def sqrt(x):
    return math.sqrt(x) if x >= 0 else math.nan


def sin(x):
    return math.sin(x)


def cos(x):
    return math.cos(x)


def tanh(x):
    return math.tanh(x)


def sigmoid(x):
    if x >= 0:
        z = math.exp(-x)
        return 1.0 / (1.0 + z)
    z = math.exp(x)
    return z / (1.0 + z)


def relu(x):
    return 0 if x <= 0 else x


def abs_(x):
    return abs(x)


def sign(x):
    return (x > 0) - (x < 0)


def reciprocal(x):
    return 1.0 / x


def erf(x):
    return math.erf(x)


def gelu(x):
    return 0.5 * x * (1.0 + math.erf(x * 0.7071067811865476))


def logical_not(x):
    return not x


def identity(x):
    return x


def isnan(x):
    return x != x


NEG = defop(
    neg, promote, lambda g, x: (-g,), "none", ("Tensor.__neg__", "kg.neg"), reject_bool=True
)
EXP = defop(exp, to_float, lambda g, y: (g * y,), "output", ("Tensor.exp", "kg.exp"), library="exp")
LOG = defop(log, to_float, lambda g, x: (g / x,), "inputs", ("Tensor.log", "kg.log"), library="log")
LOG1P = defop(
    log1p,
    to_float,
    lambda g, x: (g / (x + 1),),
    "inputs",
    ("Tensor.log1p", "kg.log1p"),
    library="log1p",
)
EXPM1 = defop(
    expm1,
    to_float,
    lambda g, y: (g * (y + 1),),
    "output",
    ("Tensor.expm1", "kg.expm1"),
    library="expm1",
)
SQRT = defop(
    sqrt,
    to_float,
    lambda g, y: (g / (y * 2),),
    "output",
    ("Tensor.sqrt", "kg.sqrt"),
    library="sqrt",
)
SIN = defop(
    sin, to_float, lambda g, x: (g * x.cos(),), "inputs", ("Tensor.sin", "kg.sin"), library="sin"
)
COS = defop(
    cos, to_float, lambda g, x: (-g * x.sin(),), "inputs", ("Tensor.cos", "kg.cos"), library="cos"
)
RECIPROCAL = defop(
    reciprocal, to_float, lambda g, y: (-g * y * y,), "output", ("Tensor.reciprocal",)
)
ERF = defop(
    erf,
    to_float,
    lambda g, x: (g * (x * x * -1).exp() * (2 / math.sqrt(math.pi)),),
    "inputs",
    ("Tensor.erf", "kg.erf"),
)
ABS = defop(
    abs_, promote, lambda g, x: (g * x.sign(),), "inputs", ("Tensor.abs", "kg.abs"), name="abs"
)
# piecewise constant: a zero gradient, as PyTorch (the VJP is defined further down)
SIGN = defop(sign, promote, lambda g, x: _zero_gradient(g, x), "none", ("Tensor.sign", "kg.sign"))
LOGICAL_NOT = defop(
    logical_not,
    logical,
    None,
    bindings=("Tensor.logical_not", "Tensor.__invert__", "kg.logical_not"),
)
ISNAN = defop(isnan, compare, None, bindings=("Tensor.isnan", "kg.isnan"))
# A cast: the output dtype is chosen by the caller (see ``cast``).
IDENTITY = defop(
    identity, promote, lambda g, x: (g,), "none", ("Tensor.to", "Tensor.contiguous", "Tensor.clone")
)


# Gradients of the activations are fused into one kernel each (the "explicitly fused"
# ops DESIGN.md allows): relu'(x) * g would otherwise take two or three kernels.
def relu_grad(g, y):
    return g if y > 0 else 0


def sigmoid_grad(g, y):
    return g * y * (1.0 - y)


def tanh_grad(g, y):
    return g * (1.0 - y * y)


def gelu_grad(g, x):
    cdf = 0.5 * (1.0 + math.erf(x * 0.7071067811865476))
    pdf = math.exp(-0.5 * x * x) * 0.3989422804014327
    return g * (cdf + x * pdf)


RELU_GRAD = defop(
    relu_grad,
    promote,
    lambda gg, g, y: (RELU_GRAD(gg, y), None),
    "inputs",
    ("kg.ops.elementwise.RELU_GRAD",),
)
SIGMOID_GRAD = defop(
    sigmoid_grad,
    to_float,
    lambda gg, g, y: (SIGMOID_GRAD(gg, y), _grad_if(y, lambda: gg * g * (1 - y * 2))),
    "inputs",
    ("kg.ops.elementwise.SIGMOID_GRAD",),
)
TANH_GRAD = defop(
    tanh_grad,
    to_float,
    lambda gg, g, y: (TANH_GRAD(gg, y), _grad_if(y, lambda: gg * g * y * -2)),
    "inputs",
    ("kg.ops.elementwise.TANH_GRAD",),
)


def _gelu_grad_vjp(gg, g, x):
    # d/dx [g * (cdf(x) + x * pdf(x))] = g * pdf(x) * (2 - x^2)
    pdf = (x * x * -0.5).exp() * 0.3989422804014327
    return GELU_GRAD(gg, x), _grad_if(x, lambda: gg * g * pdf * (2 - x * x))


GELU_GRAD = defop(
    gelu_grad,
    to_float,
    _gelu_grad_vjp,
    "inputs",
    ("kg.ops.elementwise.GELU_GRAD",),
)
RELU = defop(relu, promote, lambda g, y: (RELU_GRAD(g, y),), "output", ("Tensor.relu", "kg.relu"))
SIGMOID = defop(
    sigmoid,
    to_float,
    lambda g, y: (SIGMOID_GRAD(g, y),),
    "output",
    ("Tensor.sigmoid", "kg.sigmoid"),
)
TANH = defop(
    tanh,
    to_float,
    lambda g, y: (TANH_GRAD(g, y),),
    "output",
    ("Tensor.tanh", "kg.tanh"),
    library="tanh",
)
GELU = defop(
    gelu, to_float, lambda g, x: (GELU_GRAD(g, x),), "inputs", ("kg.ops.elementwise.GELU",)
)


# --- binary -----------------------------------------------------------------------------------
def add(x, y):
    return x + y


def sub(x, y):
    return x - y


def mul(x, y):
    return x * y


def div(x, y):
    return x / y


def pow_(x, y):
    return x**y


def maximum(x, y):
    return x if (x > y or x != x) else y


def minimum(x, y):
    return x if (x < y or x != x) else y


def floor_divide(x, y):
    return x // y


def remainder(x, y):
    return x % y


def eq(x, y):
    return x == y


def ne(x, y):
    return x != y


def lt(x, y):
    return x < y


def le(x, y):
    return x <= y


def gt(x, y):
    return x > y


def ge(x, y):
    return x >= y


def logical_and(x, y):
    return (x != 0) and (y != 0)


def logical_or(x, y):
    return (x != 0) or (y != 0)


def logical_xor(x, y):
    return (x != 0) != (y != 0)


def int_pow(x, y):
    # PyTorch's integer power: a negative exponent gives 1 for a base of 1, +-1 for -1
    # and 0 otherwise (0 ** -1 too), where x ** y would divide by zero or go to floats.
    if y >= 0:
        return x**y
    if x == 1:
        return 1
    if x == -1:
        return 1 if y % 2 == 0 else -1
    return 0


def _pow_vjp(g, x, y):
    # PyTorch's conventions at the edges (its pow_backward and pow_backward_exponent):
    # d/dx is 0 where the exponent is 0 (y * x ** (y - 1) would be 0 * inf = nan at
    # x = 0); d/dy is 0 where the base is 0 and the exponent >= 0, else x**y * log(x),
    # which is -inf for a zero base and a negative exponent and nan for a negative base.
    def grad_x() -> Tensor:
        if not isinstance(y, Tensor):
            return g * 0 if y == 0 else g * y * x ** (y - 1)
        return where(y == 0, 0.0, g * y * x ** (y - 1))

    grad_y = None
    if isinstance(y, Tensor) and y.requires_grad:
        base = x if isinstance(x, Tensor) else y * 0 + x
        grad_y = g * where((base == 0) & (y >= 0), 0.0, base**y * base.log())
    return _grad_if(x, grad_x), grad_y


def _check_pow(operands: Sequence[Any], out_dtype: DType) -> None:
    exponent = operands[1]
    if not out_dtype.is_floating_point and isinstance(exponent, int) and exponent < 0:
        raise ArgumentError(
            f"pow: integers to negative integer powers are not allowed (a {out_dtype} "
            f"tensor to the power {exponent}); convert first, e.g. `x.float() ** "
            f"{exponent}`, or use a float exponent ({float(exponent)})"
        )


def _check_integer_divisor(name: str) -> Callable[[Sequence[Any], DType], None]:
    """Integer division and remainder by zero raise, as in PyTorch on the CPU (the
    kernels would return an arbitrary value: 0, or -1 on a GPU). Floats give inf/nan."""

    def check(operands: Sequence[Any], out_dtype: DType) -> None:
        if out_dtype.is_floating_point:
            return
        divisor = operands[1]
        if isinstance(divisor, Tensor):
            if divisor.numel() == 0 or not (divisor == 0).any().item():
                return
            which = "the divisor tensor holds a zero"
        elif divisor != 0:
            return
        else:
            which = "the divisor is 0"
        raise DivisionByZeroError(
            f"{name}: integer division by zero ({which}; PyTorch raises "
            "`RuntimeError: ZeroDivisionError` here too). Divide in floating point "
            "(`x.float() // y` gives inf or nan), or replace the zeros first, e.g. "
            "`kg.where(y == 0, 1, y)`"
        )

    return check


def _max_min_vjp(pick: Callable) -> Callable:
    def vjp(g, x, y):
        chosen = pick(x, y).to(g.dtype)
        ties = (x == y).to(g.dtype) * 0.5
        weight_x = chosen + ties
        return (
            _grad_if(x, lambda: g * weight_x),
            _grad_if(y, lambda: g * (1 - weight_x)),
        )

    return vjp


ADD = defop(add, promote, lambda g, x, y: (g, g), "none", ("Tensor.__add__", "kg.add"))
SUB = defop(
    sub, promote, lambda g, x, y: (g, -g), "none", ("Tensor.__sub__", "kg.sub"), reject_bool=True
)
MUL = defop(
    mul,
    promote,
    lambda g, x, y: (_grad_if(x, lambda: g * y), _grad_if(y, lambda: g * x)),
    "others",
    ("Tensor.__mul__", "kg.mul"),
)
DIV = defop(
    div,
    to_float,
    lambda g, x, y: (_grad_if(x, lambda: g / y), _grad_if(y, lambda: -g * x / (y * y))),
    "inputs",
    ("Tensor.__truediv__", "kg.div"),
)
POW = defop(pow_, promote, _pow_vjp, "inputs", ("Tensor.__pow__", "kg.pow"), name="pow")
INT_POW = defop(int_pow, promote, None, bindings=("Tensor.__pow__", "kg.pow"))
POW.integer_variant = INT_POW
INT_POW.check = POW.check = _check_pow
MAXIMUM = defop(maximum, promote, _max_min_vjp(lambda x, y: x > y), "inputs", ("kg.maximum",))
MINIMUM = defop(minimum, promote, _max_min_vjp(lambda x, y: x < y), "inputs", ("kg.minimum",))
FLOOR_DIVIDE = defop(floor_divide, promote, None, bindings=("Tensor.__floordiv__",))
FLOOR_DIVIDE.check = _check_integer_divisor("floor_divide")
REMAINDER = defop(
    remainder,
    promote,
    lambda g, x, y: (_grad_if(x, lambda: g), _grad_if(y, lambda: -g * (x // y))),
    "inputs",
    ("Tensor.__mod__",),
)
REMAINDER.check = _check_integer_divisor("remainder")
EQ = defop(eq, compare, None, bindings=("Tensor.__eq__", "kg.eq"))
NE = defop(ne, compare, None, bindings=("Tensor.__ne__", "kg.ne"))
LT = defop(lt, compare, None, bindings=("Tensor.__lt__", "kg.lt"))
LE = defop(le, compare, None, bindings=("Tensor.__le__", "kg.le"))
GT = defop(gt, compare, None, bindings=("Tensor.__gt__", "kg.gt"))
GE = defop(ge, compare, None, bindings=("Tensor.__ge__", "kg.ge"))
LOGICAL_AND = defop(logical_and, logical, None, bindings=("Tensor.__and__", "kg.logical_and"))
LOGICAL_OR = defop(logical_or, logical, None, bindings=("Tensor.__or__", "kg.logical_or"))
LOGICAL_XOR = defop(logical_xor, logical, None, bindings=("Tensor.__xor__", "kg.logical_xor"))


# --- ternary ---------------------------------------------------------------------------------
def where_(condition, x, y):
    return x if condition else y


def clamp_(x, low, high):
    # min(max(x, low), high): with low > high the upper bound wins, as in PyTorch and
    # NumPy; a NaN bound gives NaN.
    raised = low if (x < low or low != low) else x
    return high if (raised > high or high != high) else raised


WHERE = defop(
    where_,
    select,
    lambda g, c, x, y: (
        None,
        _grad_if(x, lambda: where(c, g, 0)),
        _grad_if(y, lambda: where(c, 0, g)),
    ),
    "inputs",
    ("kg.where",),
    name="where",
)


def _clamp_vjp(g, x, low, high):
    # As PyTorch: with low > high the output is `high` everywhere, and so is the gradient.
    inside = (x >= low) & (x <= high)
    return (
        where(inside, g, 0),
        _grad_if(low, lambda: where((x < low) & (low < high), g, 0)),
        _grad_if(high, lambda: where((x > high) | (high < low), g, 0)),
    )


CLAMP = defop(clamp_, promote, _clamp_vjp, "inputs", ("Tensor.clamp", "kg.clamp"), name="clamp")


# --- public helpers ---------------------------------------------------------------------------
def where(condition: Any, x: Any, y: Any) -> Tensor:
    """``x`` where ``condition`` is true, else ``y`` (broadcast together).

    >>> import kernelgrad as kg
    >>> kg.where(kg.tensor([True, False]), kg.tensor([1.0, 2.0]), 0.0).tolist()
    [1.0, 0.0]
    """
    if isinstance(condition, Tensor) and condition.dtype is not bool_:
        condition = condition != 0
    return apply(WHERE, condition, x, y)


def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """Limit every element to ``[min, max]``; either bound may be None or a tensor.

    >>> import kernelgrad as kg
    >>> kg.tensor([-2.0, 0.5, 3.0]).clamp(0, 1).tolist()
    [0.0, 0.5, 1.0]
    """
    if min is None and max is None:
        raise ArgumentError("clamp: give at least one of min and max")
    dtype = result_type(x, *(bound for bound in (min, max) if bound is not None))
    low, high = min, max
    if low is None:
        low = _lowest(dtype)
    if high is None:
        high = -_lowest(dtype) if dtype.is_floating_point else _highest(dtype)
    return apply(CLAMP, x, low, high)


def _lowest(dtype: DType) -> Any:
    if dtype.is_floating_point:
        return -math.inf
    return False if dtype is bool_ else int(np.iinfo(dtype.numpy).min)


def _highest(dtype: DType) -> Any:
    return True if dtype is bool_ else int(np.iinfo(dtype.numpy).max)


def cast(x: Tensor, dtype: DType) -> Tensor:
    """Convert to ``dtype`` (a copy); differentiable between floating types."""
    result = Tensor._empty(x._shape, dtype, x.device)
    result._backend.elementwise(IDENTITY.scalar, [result._view()], [x._view()], [dtype])
    if dtype.is_floating_point and x.dtype.is_floating_point and autograd.needs_grad(x):
        source_dtype = x.dtype
        autograd.record("cast", (x,), result, lambda g: (cast(g, source_dtype),), reusable=True)
    return result


def check_scalar_fits(value: Any, dtype: DType, op_name: str) -> None:
    """A Python number that meets an integer or bool dtype must have a value there:
    ``kg.zeros(2, dtype=kg.int32).fill_(math.inf)`` or ``+ 2**40`` is refused (PyTorch:
    "value cannot be converted to type int without overflow"), not converted to garbage
    or failed inside the backend."""
    if dtype.is_bool or isinstance(value, bool):
        return
    if isinstance(value, float):
        if math.isfinite(value) and dtype.is_integer:
            value = int(value)  # truncated on conversion, as PyTorch's fill_(2.7) gives 2
        else:
            raise ArgumentError(
                f"{op_name}: the value {value} cannot be converted to {dtype} (it has no "
                "integer value); use a floating point tensor"
            )
    limits = np.iinfo(dtype.numpy)
    if not limits.min <= value <= limits.max:
        wider = "`x.to(kg.int64)`" if dtype.itemsize < 8 else "`x.double()`"
        raise ArgumentError(
            f"{op_name}: the value {value} cannot be converted to {dtype} without overflow "
            f"(range {limits.min} to {limits.max}); convert to a wider dtype first, e.g. "
            f"{wider}"
        )


def check_writable(target: Tensor, op_name: str) -> None:
    """Refuse to write through a view in which several elements share memory (an
    expanded tensor): ``kg.zeros(1, 4).expand(3, 4).add_(1)`` would add 1 three times
    to each element. PyTorch refuses it too."""
    if target.numel() > 1 and overlaps_itself(target._shape, target._strides):
        raise InplaceError(
            f"{op_name}: more than one element of the written-to tensor (shape "
            f"{format_shape(target._shape)}, strides {target._strides}) refers to a single "
            "memory location, as after `expand` or an overlapping `unfold`, so an in-place "
            "write would change one element several times. Write into a tensor that owns "
            "its memory instead: `x = x.clone()` (or `.contiguous()`) first, or use the "
            "out-of-place form"
        )


def copy_into(target: Tensor, source: Any, op_name: str = "copy_") -> None:
    """Write ``source`` (a tensor broadcast to ``target``'s shape, or a number) into the
    memory of ``target`` (any view without self-overlap), converting dtype. No autograd;
    bumps the version."""
    check_writable(target, op_name)
    if isinstance(source, Tensor):
        if source.device != target.device:
            source = source.to(target.device)
        shape = broadcast_shapes(target._shape, source._shape, op=op_name)
        if shape != target._shape:
            raise ShapeError(
                f"{op_name}: cannot copy a tensor of shape {format_shape(source._shape)} into "
                f"one of shape {format_shape(target._shape)}"
            )
        if source._storage is target._storage and _overlaps(source, target):
            source = source.clone()
        inputs: list[Any] = [source._broadcast_view(target._shape)]
    else:
        inputs = [_as_operand(source, op_name)]
        if not target.dtype.is_floating_point:
            check_scalar_fits(inputs[0], target.dtype, op_name)
    target._backend.elementwise(IDENTITY.scalar, [target._view()], inputs, [target.dtype])
    target._storage.version += 1


def _overlaps(a: Tensor, b: Tensor) -> bool:
    """Conservative: do two views of one buffer touch any common element range?"""
    if a._view()[1:] == b._view()[1:]:
        return False  # identical views: elementwise in place is safe

    def extent(t: Tensor) -> tuple[int, int]:
        low = high = t._offset
        for size, stride in zip(t._shape, t._strides):
            if size > 1:
                if stride > 0:
                    high += (size - 1) * stride
                else:
                    low += (size - 1) * stride
        return low, high

    (a0, a1), (b0, b1) = extent(a), extent(b)
    return a0 <= b1 and b0 <= a1


# --- trigonometric, hyperbolic and rounding functions (PyTorch's names) -----------------------
def tan(x):
    return math.tan(x)


def asin(x):
    return math.asin(x) if -1 <= x <= 1 else math.nan


def acos(x):
    return math.acos(x) if -1 <= x <= 1 else math.nan


def atan(x):
    return math.atan(x)


def sinh(x):
    return math.sinh(x)


def cosh(x):
    return math.cosh(x)


def asinh(x):
    return math.asinh(x)


def acosh(x):
    return math.acosh(x) if x >= 1 else math.nan


def atanh(x):
    if -1 < x < 1:
        return math.atanh(x)
    if x == 1 or x == -1:
        return x * math.inf
    return math.nan


# Rounding without math.floor/ceil (which give integers in compiled code): magnitudes of
# 2**52 and more, infinities and NaN are already integral (or not numbers) and pass
# through; int() truncates toward zero below that.
def trunc(x):
    if not abs(x) < 4503599627370496.0:
        return x
    t = float(int(x))
    return x if t == x else t


def floor(x):
    if not abs(x) < 4503599627370496.0:
        return x
    t = float(int(x))
    return x if t == x else (t - 1.0 if t > x else t)


def ceil(x):
    if not abs(x) < 4503599627370496.0:
        return x
    t = float(int(x))
    return x if t == x else (t + 1.0 if t < x else t)


def round_half_even(x):
    # to the nearest integer, halves to the even one (as PyTorch and NumPy)
    if not abs(x) < 4503599627370496.0:
        return x
    t = float(int(x))
    fraction = x - t
    if fraction > 0.5 or (fraction == 0.5 and t % 2 != 0):
        return t + 1.0
    if fraction < -0.5 or (fraction == -0.5 and t % 2 != 0):
        return t - 1.0
    return x if t == x else t


def _zero_gradient(g, x):
    # piecewise constant: PyTorch's derivative is zero everywhere (not NaN at the jumps).
    # Selecting 0 (rather than zeros_like) keeps it in the graph for create_graph=True,
    # and unlike g * 0 it stays 0 where g is inf or NaN.
    return (where(True, 0.0, g),)


TAN = defop(tan, to_float, lambda g, y: (g * (y * y + 1),), "output", ("Tensor.tan", "kg.tan"))
ASIN = defop(
    asin, to_float, lambda g, x: (g / (1 - x * x).sqrt(),), "inputs", ("Tensor.asin", "kg.asin")
)
ACOS = defop(
    acos, to_float, lambda g, x: (-g / (1 - x * x).sqrt(),), "inputs", ("Tensor.acos", "kg.acos")
)
ATAN = defop(atan, to_float, lambda g, x: (g / (x * x + 1),), "inputs", ("Tensor.atan", "kg.atan"))
SINH = defop(sinh, to_float, lambda g, x: (g * COSH(x),), "inputs", ("Tensor.sinh", "kg.sinh"))
COSH = defop(cosh, to_float, lambda g, x: (g * SINH(x),), "inputs", ("Tensor.cosh", "kg.cosh"))
ASINH = defop(
    asinh,
    to_float,
    lambda g, x: (g / (x * x + 1).sqrt(),),
    "inputs",
    ("Tensor.asinh", "kg.asinh"),
)
ACOSH = defop(
    acosh,
    to_float,
    lambda g, x: (g / (x * x - 1).sqrt(),),
    "inputs",
    ("Tensor.acosh", "kg.acosh"),
)
ATANH = defop(
    atanh, to_float, lambda g, x: (g / (1 - x * x),), "inputs", ("Tensor.atanh", "kg.atanh")
)
TRUNC = defop(
    trunc, promote, _zero_gradient, "none", ("Tensor.trunc", "kg.trunc"), reject_bool=True
)
FLOOR = defop(
    floor, promote, _zero_gradient, "none", ("Tensor.floor", "kg.floor"), reject_bool=True
)
CEIL = defop(ceil, promote, _zero_gradient, "none", ("Tensor.ceil", "kg.ceil"), reject_bool=True)
ROUND = defop(
    round_half_even,
    promote,
    _zero_gradient,
    "none",
    ("Tensor.round", "kg.round"),
    name="round",
    reject_bool=True,
)


# --- exact where PyTorch's libm calls are: powers, fmod, copysign, atan2, hypot ------------
def log2(x):
    return math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def log10(x):
    # log10(10**k) is k exactly, as in PyTorch. A log10 (libm's, the GPU's, NumPy's under
    # the CUDA simulator) may miss it by an ulp, so a result within 1e-4 of a whole k in
    # [0, 22] (the powers of ten a float64 holds exactly; float32 holds 10**0 to 10**10)
    # is checked against 10**k, made by k exact products: in x's own precision (a float32
    # kernel computes in float32 on the GPU) and at no cost for other values.
    if not x > 0:
        return -math.inf if x == 0 else math.nan
    r = math.log10(x)
    t = r + 0.5
    fraction = t % 1.0  # exact: t - floor(t)
    if abs(fraction - 0.5) < 1e-4 and t > 0.0 and t < 23.0:
        k = t - fraction  # floor(t), exactly: the whole number r is close to
        power = 1.0
        n = 0.0
        while n < k:
            power *= 10.0
            n += 1.0
        if power == x:
            return k
    return r


def exp2(x):
    # 2**n * 2**f with n = trunc(x) and f = x - n (exact): 2**x is exact at the integers,
    # and ldexp rounds once into the denormals
    if not abs(x) < 2048.0:
        if x != x:
            return x
        return math.inf if x > 0 else 0.0
    n = float(int(x))
    return math.ldexp(math.exp((x - n) * 0.6931471805599453), int(n))


def fmod(x, y):
    # C's fmod, exact: of non-negative operands Python's % is C's fmod (it adds y only
    # where the signs differ), and the result takes the sign of x
    return math.copysign(abs(x) % abs(y), x)


def copysign(x, y):
    return math.copysign(x, y)


def atan2(y, x):
    return math.atan2(y, x)


def hypot(x, y):
    return math.hypot(x, y)


def _copysign_vjp(g, result, x, y):
    # as PyTorch: result / x (0 where x is 0) for x, a zero gradient for y
    return (
        _grad_if(x, lambda: g * where(x == 0, 0.0, result / x)),
        _grad_if(y, lambda: _zero_gradient(g, y)[0]),
    )


def _atan2_vjp(g, y, x):
    scale = g / (x * x + y * y)
    return _grad_if(y, lambda: scale * x), _grad_if(x, lambda: scale * -y)


LOG2 = defop(
    log2, to_float, lambda g, x: (g / (x * math.log(2)),), "inputs", ("Tensor.log2", "kg.log2")
)
LOG10 = defop(
    log10,
    to_float,
    lambda g, x: (g / (x * math.log(10)),),
    "inputs",
    ("Tensor.log10", "kg.log10"),
)
EXP2 = defop(
    exp2, to_float, lambda g, y: (g * y * math.log(2),), "output", ("Tensor.exp2", "kg.exp2")
)
FMOD = defop(
    fmod,
    to_float,
    lambda g, x, y: (_grad_if(x, lambda: g), _grad_if(y, lambda: -g * TRUNC(DIV(x, y)))),
    "inputs",
    ("Tensor.fmod", "kg.fmod"),
)
COPYSIGN = defop(copysign, to_float, _copysign_vjp, "both", ("Tensor.copysign", "kg.copysign"))
ATAN2 = defop(atan2, to_float, _atan2_vjp, "inputs", ("Tensor.atan2", "kg.atan2"))
HYPOT = defop(
    hypot,
    to_float,
    lambda g, result, x, y: (
        _grad_if(x, lambda: g * x / result),
        _grad_if(y, lambda: g * y / result),
    ),
    "both",
    ("Tensor.hypot", "kg.hypot"),
)
