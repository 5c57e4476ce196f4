"""Fuzz: unary, binary and ternary elementwise ops, casts and in-place updates on random
dtypes, layouts (expanded ones too), special values and empty tensors."""

from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import strategies as st

import kernelgrad as kg
from kernelgrad.dtypes import result_type
from tests.fuzz.oracle import UndefinedError, check
from tests.fuzz.strategies import broadcastable, python_scalars, tensors

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sign(x):
    return np.where(np.isnan(x), 0.0, np.sign(x))  # PyTorch: sign(nan) = 0


UNARY = {  # name -> (kernelgrad, NumPy on float64 values, result is floating point)
    "exp": (kg.exp, np.exp, True),
    "log": (kg.log, np.log, True),
    "log1p": (kg.log1p, np.log1p, True),
    "expm1": (kg.expm1, np.expm1, True),
    "sqrt": (kg.sqrt, np.sqrt, True),
    "sin": (kg.sin, np.sin, True),
    "cos": (kg.cos, np.cos, True),
    "tanh": (kg.tanh, np.tanh, True),
    "sigmoid": (kg.sigmoid, lambda x: 1 / (1 + np.exp(-x)), True),
    "erf": (kg.erf, _erf, True),
    "reciprocal": (lambda t: t.reciprocal(), lambda x: 1 / x, True),
    "neg": (kg.neg, np.negative, False),
    "abs": (kg.abs, np.abs, False),
    "relu": (kg.relu, lambda x: np.where((x > 0) | np.isnan(x), x, 0), False),
    "sign": (kg.sign, _sign, False),
    "isnan": (kg.isnan, np.isnan, False),
    "logical_not": (kg.logical_not, np.logical_not, False),
    "tan": (kg.tan, np.tan, True),
    "asin": (kg.asin, np.arcsin, True),
    "acos": (kg.acos, np.arccos, True),
    "atan": (kg.atan, np.arctan, True),
    "sinh": (kg.sinh, np.sinh, True),
    "cosh": (kg.cosh, np.cosh, True),
    "asinh": (kg.asinh, np.arcsinh, True),
    "acosh": (kg.acosh, np.arccosh, True),
    "atanh": (kg.atanh, np.arctanh, True),
    "floor": (kg.floor, np.floor, False),
    "ceil": (kg.ceil, np.ceil, False),
    "trunc": (kg.trunc, np.trunc, False),
    "round": (kg.round, np.round, False),
}
# refused for bool tensors, as in PyTorch (NumPy's answer does not apply)
REFUSE_BOOL = {"neg", "floor", "ceil", "trunc", "round"}


def _tolerance(dtype: kg.DType) -> tuple[float, float]:
    return (1e-5, 1e-6) if dtype is kg.float32 else (1e-9, 1e-12)


def test_unary_ops(fuzz, device):
    def body(case):
        name, (values, x) = case
        fn, reference, floating = UNARY[name]
        if name in REFUSE_BOOL and x.dtype is kg.bool:
            reference = None  # refused as in PyTorch; NumPy's answer does not apply
        out_dtype = kg.float32 if floating and not x.dtype.is_floating_point else x.dtype

        def expected():
            if reference is None:
                raise TypeError(f"{name} of bool")
            with np.errstate(all="ignore"):
                return reference(values.astype(np.float64))

        check(name, lambda: fn(x), expected, *_tolerance(out_dtype))

    fuzz.run(
        st.tuples(st.sampled_from(sorted(UNARY)), tensors(device, max_side=fuzz.max_side)),
        body,
    )


BINARY = {  # name -> (kernelgrad, NumPy reference on arrays of the compute dtype)
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.true_divide),
    "pow": (lambda a, b: a**b, None),
    "maximum": (kg.maximum, np.maximum),
    "minimum": (kg.minimum, np.minimum),
    "floor_divide": (lambda a, b: a // b, np.floor_divide),
    "remainder": (lambda a, b: a % b, np.remainder),
    "eq": (kg.eq, np.equal),
    "lt": (kg.lt, np.less),
    "ge": (kg.ge, np.greater_equal),
    "logical_and": (kg.logical_and, np.logical_and),
    "logical_xor": (kg.logical_xor, np.logical_xor),
}


def _int_pow(a, b):
    """PyTorch's integer power (NumPy refuses negative exponents), wrapping around in
    the operands' dtype as the kernels (and PyTorch's) do."""
    dtype = a.dtype
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    out = np.empty(a.shape, np.int64)
    for index in np.ndindex(a.shape):
        x, y = int(a[index]), int(b[index])
        if y >= 0:
            out[index] = np.int64(x) ** np.int64(y)
        else:
            out[index] = 1 if x == 1 else (0 if x != -1 else (1 if y % 2 == 0 else -1))
    return out.astype(dtype)


def test_binary_ops(fuzz, device):
    @st.composite
    def cases(draw):
        name = draw(st.sampled_from(sorted(BINARY)))
        left_values, left = draw(tensors(device, max_side=fuzz.max_side))
        kind = draw(st.sampled_from(["tensor", "tensor", "scalar right", "scalar left"]))
        if kind == "tensor":
            shape = draw(broadcastable(left_values.shape, fuzz.max_side))
            right_values, right = draw(tensors(device, shape=shape, max_side=fuzz.max_side))
        else:
            scalar = draw(python_scalars())
            right_values, right = scalar, scalar
        if kind == "scalar left":
            return name, (right_values, right), (left_values, left)
        return name, (left_values, left), (right_values, right)

    def body(case):
        name, (a_values, a), (b_values, b) = case
        kg_fn, np_fn = BINARY[name]
        tensors_ = [t for t in (a, b) if isinstance(t, kg.Tensor)]
        dtype = result_type(a, b)
        compute = kg.float32 if name == "div" and not dtype.is_floating_point else dtype
        if name in ("logical_and", "logical_xor"):
            compute = kg.bool

        def expected():
            if len(tensors_) == 2:
                np.broadcast_shapes(a_values.shape, b_values.shape)  # raises if they clash
            left = np.asarray(a_values).astype(compute.numpy)
            right = np.asarray(b_values).astype(compute.numpy)
            if name == "sub" and compute is kg.bool:
                raise TypeError("PyTorch and NumPy refuse bool - bool")
            integer = not compute.is_floating_point
            if name in ("floor_divide", "remainder") and integer and np.any(right == 0):
                raise ZeroDivisionError("PyTorch raises for integer division by zero")
            if name == "pow" and not compute.is_floating_point:
                if isinstance(b_values, int) and not isinstance(b_values, bool) and b_values < 0:
                    raise ValueError("PyTorch refuses integers to negative Python powers")
                return _int_pow(left, right)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if name == "pow":
                    return np.power(left, right)
                return np_fn(left, right)

        check(name, lambda: kg_fn(a, b), expected, *_tolerance(compute))

    fuzz.run(cases(), body)


def test_where_and_clamp(fuzz, device):
    @st.composite
    def cases(draw):
        x_values, x = draw(tensors(device, max_side=fuzz.max_side))
        shape = draw(broadcastable(x_values.shape, fuzz.max_side))
        other_values, other = draw(tensors(device, shape=shape, max_side=fuzz.max_side))
        kind = draw(st.sampled_from(["where", "clamp scalars", "clamp tensors", "clamp one"]))
        low = draw(python_scalars())
        high = draw(python_scalars())
        return kind, (x_values, x), (other_values, other), low, high

    def body(case):
        kind, (x_values, x), (other_values, other), low, high = case
        if kind == "where":
            condition = x != 0  # NaN counts as true

            def expected():
                return np.where(
                    np.asarray(x_values) != 0, x_values, other_values.astype(np.float64)
                )

            check("where", lambda: kg.where(condition, x, other), expected)
            return
        if kind == "clamp one":
            high = None
        if kind == "clamp tensors":
            low, high = other, None if high is None else other * 0 + high
            low_values, high_values = other_values, np.asarray(other_values) * 0 + case[4]
        else:
            low_values, high_values = low, high

        def expected():
            out = np.asarray(x_values).astype(np.float64)
            with np.errstate(all="ignore"):
                if low_values is not None:
                    out = np.maximum(out, np.asarray(low_values, dtype=np.float64))
                if high_values is not None:
                    out = np.minimum(out, np.asarray(high_values, dtype=np.float64))
            if x.dtype.is_integer or x.dtype is kg.bool:
                dtype = result_type(x, low, high) if high is not None else result_type(x, low)
                if not dtype.is_floating_point:
                    return out.astype(dtype.numpy)
            return out

        check(("clamp", "where"), lambda: x.clamp(low, high), expected, 1e-6, 1e-6)

    fuzz.run(cases(), body)


def test_casts(fuzz, device):
    @st.composite
    def cases(draw):
        values, x = draw(tensors(device, max_side=fuzz.max_side))
        return (
            values,
            x,
            draw(st.sampled_from([kg.float32, kg.float64, kg.int32, kg.int64, kg.bool])),
        )

    def body(case):
        values, x, dtype = case

        def expected():
            if dtype.is_integer and values.dtype.kind == "f" and not np.isfinite(values).all():
                raise UndefinedError  # NaN and inf have no integer value (C and PyTorch: UB)
            return values.astype(dtype.numpy)

        check("to", lambda: x.to(dtype), expected)

    fuzz.run(cases(), body)


INPLACE = {
    "add_": (lambda t, o: t.add_(o), np.add),
    "mul_": (lambda t, o: t.mul_(o), np.multiply),
    "sub_": (lambda t, o: t.sub_(o), np.subtract),
    "div_": (lambda t, o: t.div_(o), np.true_divide),
    "fill_": (lambda t, o: t.fill_(o), None),
    "copy_": (lambda t, o: t.copy_(o), None),
    "clamp_": (lambda t, o: t.clamp_(o), None),
}


def test_inplace_ops(fuzz, device):
    @st.composite
    def cases(draw):
        name = draw(st.sampled_from(sorted(INPLACE)))
        x_values, x = draw(tensors(device, max_side=fuzz.max_side))
        if draw(st.booleans()) or name == "fill_":
            other_values = other = draw(python_scalars())
        else:
            shape = draw(broadcastable(x_values.shape, fuzz.max_side))
            other_values, other = draw(tensors(device, shape=shape, max_side=fuzz.max_side))
        return name, x_values.copy(), x, other_values, other

    def body(case):
        name, x_values, x, other_values, other = case
        kg_fn, np_fn = INPLACE[name]
        target_dtype = x.dtype

        def expected():
            if x.numel() > 1 and 0 in [st_ for st_, s in zip(x._strides, x.shape) if s > 1]:
                raise ValueError("writing through an expanded view (PyTorch refuses)")
            if isinstance(other_values, np.ndarray):
                shape = np.broadcast_shapes(x_values.shape, other_values.shape)
                if shape != x_values.shape:
                    raise ValueError("the result does not fit the target")
            operand = np.asarray(other_values)
            if name in ("fill_", "copy_"):
                return np.broadcast_to(operand, x_values.shape).astype(target_dtype.numpy)
            if name == "clamp_":
                dtype = result_type(x, other)
                if dtype.category > target_dtype.category:
                    raise TypeError("the result dtype does not fit in place")
                with np.errstate(all="ignore"):
                    return np.maximum(x_values.astype(np.float64), operand).astype(
                        target_dtype.numpy
                    )
            dtype = result_type(x, other)
            if name == "div_" and not dtype.is_floating_point:
                dtype = kg.float32
            if dtype.category > target_dtype.category:
                raise TypeError("the result dtype does not fit in place")
            if name == "sub_" and dtype is kg.bool:
                raise TypeError("bool - bool is refused")
            with np.errstate(all="ignore"):
                result = np_fn(x_values.astype(dtype.numpy), operand.astype(dtype.numpy))
            return result.astype(target_dtype.numpy)

        def call():
            kg_fn(x, other)
            return x

        check((name, name.rstrip("_")), call, expected, 1e-5, 1e-6)

    fuzz.run(cases(), body)
