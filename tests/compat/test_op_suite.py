"""The common PyTorch tensor API, case by case: each case is a lambda written against
PyTorch's names, run on kernelgrad tensors and compared with a NumPy reference and, when
PyTorch is installed, with PyTorch itself (values, dtype kinds and shapes; gradients of
every floating point input where the case is differentiable).

``python -m tests.compat.test_op_suite`` prints the pass rate and every failing case
with its reason. The test passes while the failing cases are exactly those listed in
:data:`EXPECTED_FAILURES` (a case that starts to pass must leave the list, a case that
starts to fail makes the test fail), so the list is the honest account of what is
missing.

Gradients: compared with PyTorch's when it is installed, otherwise with central
differences of the NumPy reference in float64.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import kernelgrad as kg

try:
    import torch
except ImportError:  # the NumPy references still run
    torch = None


# --- inputs -------------------------------------------------------------------------------
# An input spec is (kind, shape): "f" normal floats, "p" positive floats, "u" floats in
# (-0.9, 0.9), "g" floats >= 1.1, "i" integers in [-5, 5], "n" integers in [1, 5], "b" bools.
def F(*shape: int) -> tuple[str, tuple[int, ...]]:
    return ("f", shape)


def P(*shape: int) -> tuple[str, tuple[int, ...]]:
    return ("p", shape)


def U(*shape: int) -> tuple[str, tuple[int, ...]]:
    return ("u", shape)


def G(*shape: int) -> tuple[str, tuple[int, ...]]:
    return ("g", shape)


def I(*shape: int) -> tuple[str, tuple[int, ...]]:  # noqa: E743
    return ("i", shape)


def N(*shape: int) -> tuple[str, tuple[int, ...]]:
    return ("n", shape)


def B(*shape: int) -> tuple[str, tuple[int, ...]]:
    return ("b", shape)


X34 = (F(3, 4),)


def _array(spec: tuple[str, tuple[int, ...]], rng: np.random.Generator) -> np.ndarray:
    kind, shape = spec
    if kind == "f":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "p":
        return rng.uniform(0.5, 2.0, shape).astype(np.float32)
    if kind == "u":
        return rng.uniform(-0.9, 0.9, shape).astype(np.float32)
    if kind == "g":
        return rng.uniform(1.1, 3.0, shape).astype(np.float32)
    if kind == "i":
        return rng.integers(-5, 6, shape).astype(np.int64)
    if kind == "n":
        return rng.integers(1, 6, shape).astype(np.int64)
    return rng.random(shape) < 0.5


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., Any]  # fn(lib, *tensors), lib being kernelgrad or torch
    ref: Callable[..., Any] | None  # ref(*arrays) -> the NumPy value(s)
    inputs: tuple = X34
    grad: bool = True
    raises: type[BaseException] | None = None  # the built-in exception PyTorch raises


CASES: list[Case] = []


def case(
    name: str,
    fn: Callable[..., Any],
    ref: Callable[..., Any] | None = None,
    inputs: tuple = X34,
    grad: bool = True,
    raises: type[BaseException] | None = None,
) -> None:
    CASES.append(Case(name, fn, ref, inputs, grad, raises))


# --- the cases ------------------------------------------------------------------------------
def _f(m: Any) -> Any:
    return m.nn.functional


def _softmax(a: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _sigmoid(a: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-a))


def _erf(a: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf)(a.astype(np.float64))


def _creation_cases() -> None:
    case("zeros", lambda m: m.zeros(2, 3), lambda: np.zeros((2, 3), np.float32), ())
    case("zeros_tuple", lambda m: m.zeros((2, 3)), lambda: np.zeros((2, 3), np.float32), ())
    case("ones", lambda m: m.ones(2, 3), lambda: np.ones((2, 3), np.float32), ())
    case("full", lambda m: m.full((2, 2), 7.0), lambda: np.full((2, 2), 7.0, np.float32), ())
    case("arange", lambda m: m.arange(5), lambda: np.arange(5), ())
    case("arange_step", lambda m: m.arange(1, 10, 2), lambda: np.arange(1, 10, 2), ())
    case("arange_float", lambda m: m.arange(0.0, 1.0, 0.25), lambda: np.arange(0, 1, 0.25), ())
    case("linspace", lambda m: m.linspace(0, 1, 5), lambda: np.linspace(0, 1, 5), ())
    case("eye", lambda m: m.eye(3), lambda: np.eye(3), ())
    case("eye_rect", lambda m: m.eye(2, 3), lambda: np.eye(2, 3), ())
    case(
        "tensor_list", lambda m: m.tensor([[1, 2], [3, 4]]), lambda: np.array([[1, 2], [3, 4]]), ()
    )
    case("tensor_float", lambda m: m.tensor([1.5, 2.5]), lambda: np.array([1.5, 2.5]), ())
    case("zeros_like", lambda m, x: m.zeros_like(x), np.zeros_like, grad=False)
    case("ones_like", lambda m, x: m.ones_like(x), np.ones_like, grad=False)
    case("full_like", lambda m, x: m.full_like(x, 3.0), lambda a: np.full_like(a, 3), grad=False)
    case("empty_shape", lambda m: m.empty(2, 5).shape, lambda: (2, 5), ())
    case("randn_shape", lambda m: m.randn(3, 4).shape, lambda: (3, 4), ())
    case("rand_range", lambda m: (m.rand(100) < 1).all(), lambda: True, ())
    case("randint_range", lambda m: (m.randint(0, 3, (50,)) >= 0).all(), lambda: True, ())
    case("randperm", lambda m: m.randperm(6).sort().values, lambda: np.arange(6), ())
    case(
        "multinomial",
        lambda m: m.multinomial(m.tensor([0.0, 1.0, 0.0]), 4, replacement=True),
        lambda: np.ones(4, np.int64),
        (),
    )
    case("tril_ones", lambda m: m.tril(m.ones(3, 3)), lambda: np.tril(np.ones((3, 3))), ())
    case(
        "triu_mask",
        lambda m: m.triu(m.ones(3, 3, dtype=m.bool), diagonal=1),
        lambda: np.triu(np.ones((3, 3), bool), 1),
        (),
    )


def _unary_cases() -> None:
    rows: list[tuple[str, Callable, Callable, tuple]] = [
        ("exp", lambda m, x: m.exp(x), np.exp, X34),
        ("log", lambda m, x: m.log(x), np.log, (P(3, 4),)),
        ("log1p", lambda m, x: m.log1p(x), np.log1p, (P(3, 4),)),
        ("expm1", lambda m, x: m.expm1(x), np.expm1, X34),
        ("log2", lambda m, x: m.log2(x), np.log2, (P(3, 4),)),
        ("log10", lambda m, x: m.log10(x), np.log10, (P(3, 4),)),
        ("exp2", lambda m, x: m.exp2(x), np.exp2, X34),
        ("sqrt", lambda m, x: m.sqrt(x), np.sqrt, (P(3, 4),)),
        ("rsqrt", lambda m, x: m.rsqrt(x), lambda a: 1 / np.sqrt(a), (P(3, 4),)),
        ("square", lambda m, x: m.square(x), np.square, X34),
        ("abs", lambda m, x: m.abs(x), np.abs, X34),
        ("neg", lambda m, x: m.neg(x), np.negative, X34),
        ("reciprocal", lambda m, x: m.reciprocal(x), np.reciprocal, (P(3, 4),)),
        ("sin", lambda m, x: m.sin(x), np.sin, X34),
        ("cos", lambda m, x: m.cos(x), np.cos, X34),
        ("tan", lambda m, x: m.tan(x), np.tan, (U(3, 4),)),
        ("asin", lambda m, x: m.asin(x), np.arcsin, (U(3, 4),)),
        ("acos", lambda m, x: m.acos(x), np.arccos, (U(3, 4),)),
        ("atan", lambda m, x: m.atan(x), np.arctan, X34),
        ("arcsin", lambda m, x: m.arcsin(x), np.arcsin, (U(3, 4),)),
        ("arctan", lambda m, x: m.arctan(x), np.arctan, X34),
        ("sinh", lambda m, x: m.sinh(x), np.sinh, X34),
        ("cosh", lambda m, x: m.cosh(x), np.cosh, X34),
        ("tanh", lambda m, x: m.tanh(x), np.tanh, X34),
        ("asinh", lambda m, x: m.asinh(x), np.arcsinh, X34),
        ("acosh", lambda m, x: m.acosh(x), np.arccosh, (G(3, 4),)),
        ("atanh", lambda m, x: m.atanh(x), np.arctanh, (U(3, 4),)),
        ("sigmoid", lambda m, x: m.sigmoid(x), _sigmoid, X34),
        ("relu", lambda m, x: m.relu(x), lambda a: np.maximum(a, 0), X34),
        ("erf", lambda m, x: m.erf(x), _erf, X34),
        ("sign", lambda m, x: m.sign(x), np.sign, X34),
        ("floor", lambda m, x: m.floor(x * 3), lambda a: np.floor(a * 3), X34),
        ("ceil", lambda m, x: m.ceil(x * 3), lambda a: np.ceil(a * 3), X34),
        ("round", lambda m, x: m.round(x * 3), lambda a: np.round(a * 3), X34),
        (
            "round_half_even",
            lambda m: m.round(m.tensor([0.5, 1.5, 2.5, -0.5, -1.5])),
            lambda: np.array([0.0, 2.0, 2.0, -0.0, -2.0]),
            (),
        ),
        ("round_decimals", lambda m, x: m.round(x, decimals=2), lambda a: np.round(a, 2), X34),
        ("trunc", lambda m, x: m.trunc(x * 3), lambda a: np.trunc(a * 3), X34),
        ("frac", lambda m, x: m.frac(x * 3), lambda a: a * 3 - np.trunc(a * 3), X34),
        ("fix", lambda m, x: m.fix(x * 3), lambda a: np.trunc(a * 3), X34),
        ("isnan", lambda m, x: m.isnan(x), np.isnan, X34),
        ("isinf", lambda m, x: m.isinf(x / 0), lambda a: np.isinf(a / 0), X34),
        ("isfinite", lambda m, x: m.isfinite(x), np.isfinite, X34),
        (
            "nan_to_num",
            lambda m, x: m.nan_to_num(m.log(x)),
            lambda a: np.nan_to_num(np.log(a)),
            (P(3, 4),),
        ),
    ]
    for name, fn, ref, inputs in rows:
        case(name, fn, ref, inputs)
    methods = [
        "exp",
        "log",
        "sqrt",
        "sin",
        "cos",
        "tan",
        "tanh",
        "sigmoid",
        "abs",
        "floor",
        "ceil",
        "round",
        "trunc",
        "asin",
        "atan",
        "sinh",
        "cosh",
        "neg",
        "square",
        "rsqrt",
        "reciprocal",
        "sign",
        "relu",
        "erf",
    ]
    by_name = {name: (ref, inputs) for name, _, ref, inputs in rows}
    for name in methods:
        ref, inputs = by_name[name]
        scale = 3 if name in ("floor", "ceil", "round", "trunc") else 1  # as in the rows above
        case(f"Tensor.{name}", lambda m, x, n=name, s=scale: getattr(x * s, n)(), ref, inputs)


def _binary_cases() -> None:
    XY = (F(3, 4), F(3, 4))
    XP = (F(3, 4), P(3, 4))
    rows = [
        ("add", lambda m, x, y: m.add(x, y), np.add, XY),
        ("add_alpha", lambda m, x, y: m.add(x, y, alpha=2), lambda a, b: a + 2 * b, XY),
        ("sub", lambda m, x, y: m.sub(x, y), np.subtract, XY),
        ("mul", lambda m, x, y: m.mul(x, y), np.multiply, XY),
        ("div", lambda m, x, y: m.div(x, y), np.divide, XP),
        ("true_divide", lambda m, x, y: m.true_divide(x, y), np.divide, XP),
        (
            "div_floor",
            lambda m, x, y: m.div(x, y, rounding_mode="floor"),
            lambda a, b: np.floor(a / b),
            XP,
        ),
        (
            "div_trunc",
            lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
            lambda a, b: np.trunc(a / b),
            XP,
        ),
        (
            "div_int_floor",
            lambda m, x, y: m.div(x, y, rounding_mode="floor"),
            lambda a, b: a // b,
            (I(3, 4), N(3, 4)),
        ),
        (
            "div_int_trunc",
            lambda m, x, y: m.div(x, y, rounding_mode="trunc"),
            lambda a, b: np.trunc(a / b).astype(np.int64),
            (I(3, 4), N(3, 4)),
        ),
        ("floor_divide", lambda m, x, y: m.floor_divide(x, y), np.floor_divide, XP),
        ("pow_scalar", lambda m, x: m.pow(x, 2), lambda a: a**2, X34),
        ("pow_tensor", lambda m, x, y: m.pow(x, y), np.power, (P(3, 4), F(3, 4))),
        ("pow_rscalar", lambda m, x: m.pow(2.0, x), lambda a: 2.0**a, X34),
        ("maximum", lambda m, x, y: m.maximum(x, y), np.maximum, XY),
        ("minimum", lambda m, x, y: m.minimum(x, y), np.minimum, XY),
        ("fmax", lambda m, x, y: m.fmax(x, y), np.fmax, XY),
        ("fmod", lambda m, x, y: m.fmod(x, y), np.fmod, XP),
        ("fmod_scalar", lambda m, x: m.fmod(x, 0.7), lambda a: np.fmod(a, np.float32(0.7)), X34),
        ("fmod_neg", lambda m, x, y: m.fmod(x, -y), lambda a, b: np.fmod(a, -b), XP),
        ("remainder", lambda m, x, y: m.remainder(x, y), np.remainder, XP),
        (
            "remainder_scalar",
            lambda m, x: m.remainder(x, 0.7),
            lambda a: np.remainder(a, np.float32(0.7)),
            X34,
        ),
        ("remainder_int", lambda m, x, y: m.remainder(x, y), np.remainder, (I(3, 4), N(3, 4))),
        ("fmod_int", lambda m, x, y: m.fmod(x, y), np.fmod, (I(3, 4), N(3, 4))),
        ("copysign", lambda m, x, y: m.copysign(x, y), np.copysign, XY),
        ("copysign_scalar", lambda m, x: m.copysign(x, -1.0), lambda a: np.copysign(a, -1), X34),
        ("logaddexp", lambda m, x, y: m.logaddexp(x, y), np.logaddexp, XY),
        ("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), np.logaddexp2, XY),
        ("atan2", lambda m, x, y: m.atan2(x, y), np.arctan2, XY),
        ("hypot", lambda m, x, y: m.hypot(x, y), np.hypot, XY),
        ("xlogy", lambda m, x, y: m.xlogy(x, y), lambda a, b: a * np.log(b), XP),
        ("lerp", lambda m, x, y: m.lerp(x, y, 0.3), lambda a, b: a + 0.3 * (b - a), XY),
        ("clamp", lambda m, x: m.clamp(x, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), X34),
        ("clamp_min", lambda m, x: m.clamp(x, min=0.1), lambda a: np.maximum(a, 0.1), X34),
        ("clip", lambda m, x: m.clip(x, -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), X34),
        ("where", lambda m, x, y: m.where(x > 0, x, y), lambda a, b: np.where(a > 0, a, b), XY),
        ("where_scalar", lambda m, x: m.where(x > 0, x, 0.0), lambda a: np.where(a > 0, a, 0), X34),
        ("broadcast_row", lambda m, x, y: x + y, np.add, (F(3, 4), F(4))),
        ("broadcast_outer", lambda m, x, y: x * y, np.multiply, (F(3, 1), F(1, 4))),
        ("op_radd", lambda m, x: 1.5 + x, lambda a: 1.5 + a, X34),
        ("op_rsub", lambda m, x: 1.5 - x, lambda a: 1.5 - a, X34),
        ("op_rmul", lambda m, x: 2 * x, lambda a: 2 * a, X34),
        ("op_rdiv", lambda m, x: 1 / x, lambda a: 1 / a, (P(3, 4),)),
        ("op_pow", lambda m, x: x**3, lambda a: a**3, X34),
        ("op_rpow", lambda m, x: 2**x, lambda a: 2.0**a, X34),
        ("op_floordiv", lambda m, x: x // 0.3, lambda a: a // np.float32(0.3), X34),
        ("op_mod", lambda m, x: x % 0.3, lambda a: a % np.float32(0.3), X34),
        ("op_neg", lambda m, x: -x, np.negative, X34),
        ("op_abs", lambda m, x: abs(x), np.abs, X34),
        ("op_matmul", lambda m, x, y: x @ y, np.matmul, (F(3, 4), F(4, 2))),
        ("int_plus_float", lambda m, x: x + 0.5, lambda a: a + 0.5, (I(3, 4),)),
        ("int_times_int", lambda m, x, y: x * y, np.multiply, (I(3, 4), I(3, 4))),
        (
            "int_true_div",
            lambda m, x, y: x / y,
            lambda a, b: (a / b).astype(np.float32),
            (I(3, 4), N(3, 4)),
        ),
        ("int_floordiv", lambda m, x, y: x // y, np.floor_divide, (I(3, 4), N(3, 4))),
        ("bool_and", lambda m, x, y: x & y, np.logical_and, (B(3, 4), B(3, 4))),
        ("bool_or", lambda m, x, y: x | y, np.logical_or, (B(3, 4), B(3, 4))),
        ("bool_xor", lambda m, x, y: x ^ y, np.logical_xor, (B(3, 4), B(3, 4))),
        ("bool_not", lambda m, x: ~x, np.logical_not, (B(3, 4),)),
        ("logical_and", lambda m, x, y: m.logical_and(x, y), np.logical_and, (B(3, 4), B(3, 4))),
        ("logical_or", lambda m, x, y: m.logical_or(x, y), np.logical_or, (B(3, 4), B(3, 4))),
        ("logical_not", lambda m, x: m.logical_not(x), np.logical_not, (B(3, 4),)),
    ]
    for name, fn, ref, inputs in rows:
        case(name, fn, ref, inputs)
    comparisons = {
        "eq": np.equal,
        "ne": np.not_equal,
        "lt": np.less,
        "le": np.less_equal,
        "gt": np.greater,
        "ge": np.greater_equal,
    }
    for name, ref in comparisons.items():
        operands = (I(3, 4), I(3, 4))
        case(name, lambda m, x, y, name=name: getattr(m, name)(x, y), ref, operands)
        case(f"Tensor.{name}", lambda m, x, y, name=name: getattr(x, name)(y), ref, operands)
        case(
            f"Tensor.{name}_scalar",
            lambda m, x, name=name: getattr(x, name)(0),
            lambda a, ref=ref: ref(a, 0),
            (I(3, 4),),
        )
    case(
        "isclose",
        lambda m, x, y: m.isclose(x, x + y * 1e-9),
        lambda a, b: np.isclose(a, a),
        (F(3, 4), F(3, 4)),
    )
    case("isclose_far", lambda m, x: m.isclose(x, x + 1), lambda a: np.isclose(a, a + 1))
    case(
        "isclose_tol",
        lambda m, x: m.isclose(x, x + 0.01, atol=0.1),
        lambda a: np.isclose(a, a + 0.01, atol=0.1),
    )
    case("allclose", lambda m, x: m.allclose(x, x * (1 + 1e-7)), lambda a: True)
    case("allclose_false", lambda m, x: m.allclose(x, x + 1), lambda a: False)
    case("equal", lambda m, x: m.equal(x, x.clone()), lambda a: True)
    for name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "fmod", "remainder"):
        ref = {
            "add": np.add,
            "sub": np.subtract,
            "mul": np.multiply,
            "div": np.divide,
            "pow": np.power,
            "maximum": np.maximum,
            "minimum": np.minimum,
            "fmod": np.fmod,
            "remainder": np.remainder,
        }[name]
        case(
            f"Tensor.{name}",
            lambda m, x, y, name=name: getattr(x, name)(y),
            ref,
            (P(3, 4), P(3, 4)),
        )


def _reduction_cases() -> None:
    rows = [
        ("sum", lambda m, x: m.sum(x), np.sum),
        ("sum_dim", lambda m, x: x.sum(1), lambda a: a.sum(1)),
        ("sum_keepdim", lambda m, x: x.sum(0, keepdim=True), lambda a: a.sum(0, keepdims=True)),
        ("sum_dims", lambda m, x: x.sum((0, 1)), np.sum),
        ("sum_neg_dim", lambda m, x: x.sum(-1), lambda a: a.sum(-1)),
        ("sum_axis", lambda m, x: m.sum(x, axis=1), lambda a: a.sum(1)),
        ("mean", lambda m, x: x.mean(), np.mean),
        ("mean_dim", lambda m, x: x.mean(dim=0), lambda a: a.mean(0)),
        ("mean_axis", lambda m, x: m.mean(x, axis=1), lambda a: a.mean(1)),
        ("mean_keepdim", lambda m, x: x.mean(1, keepdim=True), lambda a: a.mean(1, keepdims=True)),
        ("max", lambda m, x: x.max(), np.max),
        ("max_dim_values", lambda m, x: x.max(dim=1).values, lambda a: a.max(1)),
        ("max_dim_indices", lambda m, x: x.max(dim=1).indices, lambda a: a.argmax(1)),
        ("max_dim_tuple", lambda m, x: tuple(x.max(0)), lambda a: (a.max(0), a.argmax(0))),
        ("max_axis", lambda m, x: m.amax(x, axis=0), lambda a: a.max(0)),
        ("min", lambda m, x: x.min(), np.min),
        ("min_dim", lambda m, x: x.min(1)[0], lambda a: a.min(1)),
        ("amax", lambda m, x: m.amax(x, dim=1), lambda a: a.max(1)),
        ("amin", lambda m, x: m.amin(x, dim=0), lambda a: a.min(0)),
        ("argmax", lambda m, x: m.argmax(x), np.argmax),
        ("argmax_dim", lambda m, x: x.argmax(dim=1), lambda a: a.argmax(1)),
        ("argmin_dim", lambda m, x: x.argmin(0), lambda a: a.argmin(0)),
        ("prod", lambda m, x: m.prod(x), np.prod),
        ("prod_dim", lambda m, x: x.prod(1), lambda a: a.prod(1)),
        ("prod_keepdim", lambda m, x: x.prod(0, keepdim=True), lambda a: a.prod(0, keepdims=True)),
        ("var", lambda m, x: x.var(), lambda a: a.var(ddof=1)),
        ("var_dim", lambda m, x: x.var(1), lambda a: a.var(1, ddof=1)),
        ("var_unbiased_false", lambda m, x: x.var(0, unbiased=False), lambda a: a.var(0)),
        ("var_correction", lambda m, x: m.var(x, dim=1, correction=0), lambda a: a.var(1)),
        ("var_axis", lambda m, x: m.var(x, axis=1), lambda a: a.var(1, ddof=1)),
        ("std", lambda m, x: x.std(), lambda a: a.std(ddof=1)),
        (
            "std_dim",
            lambda m, x: m.std(x, 0, keepdim=True),
            lambda a: a.std(0, ddof=1, keepdims=True),
        ),
        ("var_mean", lambda m, x: m.var_mean(x, 1), lambda a: (a.var(1, ddof=1), a.mean(1))),
        ("std_mean", lambda m, x: m.std_mean(x, dim=0), lambda a: (a.std(0, ddof=1), a.mean(0))),
        ("std_mean_all", lambda m, x: m.std_mean(x), lambda a: (a.std(ddof=1), a.mean())),
        ("logsumexp", lambda m, x: m.logsumexp(x, 1), lambda a: np.log(np.exp(a).sum(1))),
        ("softmax", lambda m, x: m.softmax(x, 1), lambda a: _softmax(a, 1)),
        ("log_softmax", lambda m, x: m.log_softmax(x, dim=0), lambda a: np.log(_softmax(a, 0))),
        ("any", lambda m, x: (x > 1).any(), lambda a: (a > 1).any()),
        ("all_dim", lambda m, x: (x > -1).all(1), lambda a: (a > -1).all(1)),
        ("count_nonzero", lambda m, x: m.count_nonzero(x > 0), lambda a: np.count_nonzero(a > 0)),
        ("cumsum", lambda m, x: m.cumsum(x, 1), lambda a: np.cumsum(a, 1)),
        ("cumsum_dim0", lambda m, x: x.cumsum(dim=0), lambda a: np.cumsum(a, 0)),
        ("cumprod", lambda m, x: m.cumprod(x, 1), lambda a: np.cumprod(a, 1)),
        ("cummax", lambda m, x: m.cummax(x, 1).values, lambda a: np.maximum.accumulate(a, 1)),
        ("cummin", lambda m, x: m.cummin(x, 0)[0], lambda a: np.minimum.accumulate(a, 0)),
        (
            "logcumsumexp",
            lambda m, x: m.logcumsumexp(x, 1),
            lambda a: np.log(np.cumsum(np.exp(a.astype(np.float64)), 1)),
        ),
        ("norm", lambda m, x: x.norm(), lambda a: np.sqrt((a * a).sum())),
        ("norm_dim", lambda m, x: m.linalg.norm(x, dim=1), lambda a: np.sqrt((a * a).sum(1))),
        ("median", lambda m, x: m.median(x), lambda a: np.sort(a.ravel())[(a.size - 1) // 2]),
        ("aminmax", lambda m, x: tuple(m.aminmax(x)), lambda a: (a.min(), a.max())),
    ]
    for name, fn, ref in rows:
        case(name, fn, ref)
    case("sum_int", lambda m, x: x.sum(), np.sum, (I(3, 4),))
    case("sum_bool", lambda m, x: x.sum(), np.sum, (B(3, 4),))
    case("cumsum_int", lambda m, x: x.cumsum(0), lambda a: np.cumsum(a, 0), (I(3, 4),))
    case("prod_int", lambda m, x: x.prod(1), lambda a: a.prod(1), (I(3, 4),))
    case("mean_int_raises", lambda m, x: x.mean(), None, (I(3, 4),), raises=RuntimeError)


def _shape_cases() -> None:
    rows = [
        ("reshape", lambda m, x: x.reshape(4, 3), lambda a: a.reshape(4, 3)),
        ("reshape_infer", lambda m, x: x.reshape(-1), lambda a: a.reshape(-1)),
        ("reshape_fn", lambda m, x: m.reshape(x, (2, 6)), lambda a: a.reshape(2, 6)),
        ("view", lambda m, x: x.view(2, 6), lambda a: a.reshape(2, 6)),
        ("view_tuple", lambda m, x: x.view((6, 2)), lambda a: a.reshape(6, 2)),
        ("permute", lambda m, x: x.permute(1, 0), lambda a: a.T),
        ("transpose", lambda m, x: m.transpose(x, 0, 1), lambda a: a.T),
        ("t", lambda m, x: x.t(), lambda a: a.T),
        ("T", lambda m, x: x.T, lambda a: a.T),
        ("mT", lambda m, x: x.mT, lambda a: a.T),
        ("flatten", lambda m, x: m.flatten(x), np.ravel),
        ("unflatten", lambda m, x: x.unflatten(1, (2, 2)), lambda a: a.reshape(3, 2, 2)),
        ("unsqueeze", lambda m, x: x.unsqueeze(1), lambda a: a[:, None]),
        ("squeeze", lambda m, x: x.unsqueeze(0).squeeze(), lambda a: a),
        ("squeeze_dim", lambda m, x: x[:1].squeeze(0), lambda a: a[0]),
        ("expand", lambda m, x: x[:1].expand(3, 4), lambda a: np.broadcast_to(a[:1], (3, 4))),
        (
            "expand_neg",
            lambda m, x: x[:, :1].expand(-1, 5),
            lambda a: np.broadcast_to(a[:, :1], (3, 5)),
        ),
        ("expand_as", lambda m, x: x[:1].expand_as(x), lambda a: np.broadcast_to(a[:1], (3, 4))),
        (
            "broadcast_to",
            lambda m, x: m.broadcast_to(x[0], (2, 4)),
            lambda a: np.broadcast_to(a[0], (2, 4)),
        ),
        ("repeat", lambda m, x: x.repeat(2, 1), lambda a: np.tile(a, (2, 1))),
        ("cat", lambda m, x: m.cat([x, x], 0), lambda a: np.concatenate([a, a], 0)),
        (
            "cat_dim1",
            lambda m, x: m.cat((x, x * 2), dim=1),
            lambda a: np.concatenate([a, a * 2], 1),
        ),
        ("concat", lambda m, x: m.concat([x, x], 1), lambda a: np.concatenate([a, a], 1)),
        ("stack", lambda m, x: m.stack([x, x], 1), lambda a: np.stack([a, a], 1)),
        ("hstack", lambda m, x: m.hstack([x, x]), lambda a: np.hstack([a, a])),
        ("vstack", lambda m, x: m.vstack([x, x]), lambda a: np.vstack([a, a])),
        ("chunk", lambda m, x: x.chunk(2, 1), lambda a: tuple(np.split(a, 2, 1))),
        ("split", lambda m, x: x.split(2, dim=1), lambda a: tuple(np.split(a, 2, 1))),
        ("split_sizes", lambda m, x: m.split(x, [1, 3], 1), lambda a: (a[:, :1], a[:, 1:])),
        ("unbind", lambda m, x: x.unbind(0), lambda a: tuple(a)),
        ("narrow", lambda m, x: x.narrow(1, 1, 2), lambda a: a[:, 1:3]),
        ("flip", lambda m, x: m.flip(x, [0]), lambda a: a[::-1]),
        ("flip_both", lambda m, x: x.flip((0, 1)), lambda a: a[::-1, ::-1]),
        ("fliplr", lambda m, x: m.fliplr(x), np.fliplr),
        ("roll", lambda m, x: m.roll(x, 1, 0), lambda a: np.roll(a, 1, 0)),
        ("roll_neg", lambda m, x: x.roll(-2, 1), lambda a: np.roll(a, -2, 1)),
        ("roll_flat", lambda m, x: m.roll(x, 5), lambda a: np.roll(a, 5)),
        ("roll_dims", lambda m, x: m.roll(x, (1, 2), (0, 1)), lambda a: np.roll(a, (1, 2), (0, 1))),
        ("diagonal", lambda m, x: m.diagonal(x), np.diagonal),
        ("diagonal_offset", lambda m, x: x.diagonal(1), lambda a: np.diagonal(a, 1)),
        ("diagonal_neg", lambda m, x: x.diagonal(offset=-1), lambda a: np.diagonal(a, -1)),
        ("diag_matrix", lambda m, x: m.diag(x), np.diag),
        ("trace", lambda m, x: m.trace(x), np.trace),
        ("tril", lambda m, x: m.tril(x), np.tril),
        ("tril_k", lambda m, x: x.tril(-1), lambda a: np.tril(a, -1)),
        ("triu", lambda m, x: m.triu(x), np.triu),
        ("triu_k", lambda m, x: x.triu(diagonal=2), lambda a: np.triu(a, 2)),
        ("movedim", lambda m, x: m.movedim(x, 0, 1), lambda a: a.T),
        ("swapaxes", lambda m, x: m.swapaxes(x, 0, 1), lambda a: a.T),
        ("masked_fill", lambda m, x: x.masked_fill(x > 0, 0.0), lambda a: np.where(a > 0, 0, a)),
        (
            "masked_fill_inf",
            lambda m, x: m.masked_fill(x, x < 0, float("-inf")).exp(),
            lambda a: np.exp(np.where(a < 0, -np.inf, a)),
        ),
        (
            "masked_fill_row",
            lambda m, x: x.masked_fill(m.tensor([True, False, True, False]), 1.0),
            lambda a: np.where(np.array([True, False, True, False]), 1, a),
        ),
        ("masked_select", lambda m, x: m.masked_select(x, x > 0), lambda a: a[a > 0]),
        ("sort", lambda m, x: m.sort(x, 1).values, lambda a: np.sort(a, 1)),
        ("sort_indices", lambda m, x: x.sort(dim=1)[1], lambda a: np.argsort(a, 1)),
        ("sort_desc", lambda m, x: x.sort(0, descending=True).values, lambda a: -np.sort(-a, 0)),
        ("argsort", lambda m, x: m.argsort(x, 1), lambda a: np.argsort(a, 1)),
        (
            "argsort_desc",
            lambda m, x: x.argsort(dim=0, descending=True),
            lambda a: np.argsort(-a, 0),
        ),
        ("topk", lambda m, x: m.topk(x, 2, 1).values, lambda a: -np.sort(-a, 1)[:, :2]),
        ("topk_indices", lambda m, x: x.topk(2).indices, lambda a: np.argsort(-a, 1)[:, :2]),
        (
            "topk_smallest",
            lambda m, x: x.topk(3, dim=0, largest=False)[0],
            lambda a: np.sort(a, 0)[:3],
        ),
        ("kthvalue", lambda m, x: m.kthvalue(x, 2, 1).values, lambda a: np.sort(a, 1)[:, 1]),
        ("einsum_mm", lambda m, x: m.einsum("ij,kj->ik", x, x), lambda a: a @ a.T),
        ("einsum_trace_like", lambda m, x: m.einsum("ij->j", x), lambda a: a.sum(0)),
        ("einsum_transpose", lambda m, x: m.einsum("ij->ji", x), lambda a: a.T),
        (
            "einsum_outer",
            lambda m, x: m.einsum("i,j->ij", x[0], x[1]),
            lambda a: np.outer(a[0], a[1]),
        ),
        (
            "einsum_batch",
            lambda m, x: m.einsum("bi,bj->bij", x, x),
            lambda a: np.einsum("bi,bj->bij", a, a),
        ),
        ("einsum_ellipsis", lambda m, x: m.einsum("...j,j->...", x, x[0]), lambda a: a @ a[0]),
        ("einsum_list", lambda m, x: m.einsum("ii", x[:, :3]), lambda a: np.trace(a[:, :3])),
        ("nonzero", lambda m, x: m.nonzero(x > 0), lambda a: np.argwhere(a > 0)),
        (
            "nonzero_tuple",
            lambda m, x: m.nonzero(x > 0, as_tuple=True),
            lambda a: np.nonzero(a > 0),
        ),
        ("argwhere", lambda m, x: m.argwhere(x > 0), lambda a: np.argwhere(a > 0)),
        (
            "repeat_interleave",
            lambda m, x: m.repeat_interleave(x, 2, 0),
            lambda a: np.repeat(a, 2, 0),
        ),
        ("repeat_interleave_flat", lambda m, x: x.repeat_interleave(2), lambda a: np.repeat(a, 2)),
        (
            "repeat_interleave_tensor",
            lambda m, x: x.repeat_interleave(m.tensor([1, 0, 2]), dim=0),
            lambda a: np.repeat(a, [1, 0, 2], 0),
        ),
        ("index_select", lambda m, x: x.index_select(1, m.tensor([0, 2])), lambda a: a[:, [0, 2]]),
        (
            "gather",
            lambda m, x: x.gather(1, m.tensor([[0], [1], [3]])),
            lambda a: a[[0, 1, 2], [0, 1, 3]][:, None],
        ),
        (
            "take_along_dim",
            lambda m, x: m.take_along_dim(x, x.argmax(1, keepdim=True), 1),
            lambda a: a.max(1, keepdims=True),
        ),
        ("where_cond", lambda m, x: m.where(x > 0), lambda a: np.nonzero(a > 0)),
        ("clone", lambda m, x: x.clone(), lambda a: a),
        ("contiguous", lambda m, x: x.t().contiguous(), lambda a: a.T),
        (
            "unfold",
            lambda m, x: x.unfold(1, 2, 1),
            lambda a: np.stack([a[:, i : i + 2] for i in range(3)], 1),
        ),
        ("outer", lambda m, x: m.outer(x[0], x[1]), lambda a: np.outer(a[0], a[1])),
        ("matmul", lambda m, x: m.matmul(x, x.t()), lambda a: a @ a.T),
        ("mm", lambda m, x: m.mm(x, x.t()), lambda a: a @ a.T),
        ("Tensor.mm", lambda m, x: x.mm(x.T), lambda a: a @ a.T),
        ("bmm", lambda m, x: m.bmm(x[None], x.t()[None]), lambda a: (a @ a.T)[None]),
        ("mv", lambda m, x: m.mv(x, x[0]), lambda a: a @ a[0]),
        ("dot", lambda m, x: m.dot(x[0], x[1]), lambda a: a[0] @ a[1]),
        (
            "cross_like_outer_sum",
            lambda m, x: (x[:, :, None] * x[:, None, :]).sum(0),
            lambda a: a.T @ a,
        ),
    ]
    for name, fn, ref in rows:
        case(name, fn, ref)
    case("tril_batched", lambda m, x: m.tril(x), lambda a: np.tril(a), (F(2, 3, 3),))
    case("triu_batched", lambda m, x: m.triu(x, 1), lambda a: np.triu(a, 1), (F(2, 3, 3),))
    case(
        "diagonal_3d",
        lambda m, x: m.diagonal(x, 0, 1, 2),
        lambda a: np.diagonal(a, 0, 1, 2),
        (F(2, 3, 3),),
    )
    case(
        "einsum_bmm",
        lambda m, x, y: m.einsum("bij,bjk->bik", x, y),
        lambda a, b: a @ b,
        (F(2, 3, 4), F(2, 4, 2)),
    )
    case(
        "einsum_operand_list",
        lambda m, x, y: m.einsum("ij,jk", [x, y]),
        lambda a, b: a @ b,
        (F(3, 4), F(4, 2)),
    )
    case("cumsum_3d", lambda m, x: x.cumsum(1), lambda a: np.cumsum(a, 1), (F(2, 3, 4),))
    case("sort_3d", lambda m, x: x.sort(-1).values, lambda a: np.sort(a, -1), (F(2, 3, 4),))


def _index_cases() -> None:
    rows = [
        ("index_int", lambda m, x: x[1], lambda a: a[1]),
        ("index_neg", lambda m, x: x[-1], lambda a: a[-1]),
        ("index_col", lambda m, x: x[:, 1], lambda a: a[:, 1]),
        ("index_slice", lambda m, x: x[1:3], lambda a: a[1:3]),
        ("index_step", lambda m, x: x[::2, 1::2], lambda a: a[::2, 1::2]),
        ("index_ellipsis", lambda m, x: x[..., 0], lambda a: a[..., 0]),
        ("index_none", lambda m, x: x[None, :, None], lambda a: a[None, :, None]),
        ("index_list", lambda m, x: x[[0, 2]], lambda a: a[[0, 2]]),
        ("index_tensor", lambda m, x: x[m.tensor([2, 0])], lambda a: a[[2, 0]]),
        (
            "index_two_tensors",
            lambda m, x: x[m.tensor([0, 1]), m.tensor([3, 2])],
            lambda a: a[[0, 1], [3, 2]],
        ),
        ("index_mask", lambda m, x: x[x > 0], lambda a: a[a > 0]),
        (
            "index_row_mask",
            lambda m, x: x[m.tensor([True, False, True])],
            lambda a: a[[True, False, True]],
        ),
        ("index_range", lambda m, x: x[range(2)], lambda a: a[list(range(2))]),
        ("index_range_col", lambda m, x: x[:, range(1, 4)], lambda a: a[:, 1:4]),
        ("index_scalar_tensor", lambda m, x: x[m.tensor(1)], lambda a: a[1]),
    ]
    for name, fn, ref in rows:
        case(name, fn, ref)
    setitem = [
        ("setitem_slice", "x[0] = 0", lambda a: np.concatenate([np.zeros((1, 4), a.dtype), a[1:]])),
        ("setitem_mask", "x[x < 0] = 0", lambda a: np.where(a < 0, 0, a)),
    ]
    for name, statement, ref in setitem:

        def fn(m: Any, x: Any, statement: str = statement) -> Any:
            x = x * 1  # not a leaf: in-place is allowed
            exec(statement, {"x": x})
            return x

        case(name, fn, ref)


def _method_cases() -> None:
    rows = [
        ("size", lambda m, x: x.size(), lambda a: a.shape),
        ("size_dim", lambda m, x: x.size(1), lambda a: 4),
        ("size_neg_dim", lambda m, x: x.size(-1), lambda a: 4),
        ("size_is_tuple", lambda m, x: isinstance(x.size(), tuple), lambda a: True),
        ("size_equals_tuple", lambda m, x: x.size() == (3, 4), lambda a: True),
        ("size_numel", lambda m, x: x.size().numel(), lambda a: 12),
        ("size_slice", lambda m, x: x.size()[1:], lambda a: (4,)),
        ("shape", lambda m, x: x.shape, lambda a: a.shape),
        ("dim", lambda m, x: x.dim(), lambda a: 2),
        ("ndim", lambda m, x: x.ndim, lambda a: 2),
        ("numel", lambda m, x: x.numel(), lambda a: 12),
        ("nelement", lambda m, x: x.nelement(), lambda a: 12),
        ("len", lambda m, x: len(x), lambda a: 3),
        ("is_cuda", lambda m, x: x.is_cuda, lambda a: False),
        ("is_floating_point", lambda m, x: x.is_floating_point(), lambda a: True),
        ("is_contiguous_t", lambda m, x: x.t().is_contiguous(), lambda a: False),
        ("item", lambda m, x: x.sum().item(), lambda a: float(a.sum())),
        ("tolist", lambda m, x: x[0].tolist(), lambda a: a[0].tolist()),
        ("float", lambda m, x: x.float(), lambda a: a.astype(np.float32), (I(3, 4),)),
        ("double", lambda m, x: x.double(), lambda a: a.astype(np.float64)),
        ("long", lambda m, x: x.long(), lambda a: a.astype(np.int64), (P(3, 4),)),
        ("int", lambda m, x: x.int(), lambda a: a.astype(np.int32), (P(3, 4),)),
        ("bool", lambda m, x: x.bool(), lambda a: a != 0, (I(3, 4),)),
        ("to_dtype", lambda m, x: x.to(m.float64), lambda a: a.astype(np.float64)),
        ("type_dtype", lambda m, x: x.type(m.float64), lambda a: a.astype(np.float64)),
        ("type_long", lambda m, x: x.type(m.long), lambda a: a.astype(np.int64), (P(3, 4),)),
        (
            "type_as",
            lambda m, x, y: x.type_as(y),
            lambda a, b: a.astype(np.float32),
            (I(3, 4), F(3, 4)),
        ),
        ("new_zeros", lambda m, x: x.new_zeros(2, 3), lambda a: np.zeros((2, 3), np.float32)),
        ("new_zeros_tuple", lambda m, x: x.new_zeros((2,)), lambda a: np.zeros(2, np.float32)),
        ("new_ones", lambda m, x: x.new_ones((2, 3)), lambda a: np.ones((2, 3), np.float32)),
        ("new_full", lambda m, x: x.new_full((2,), 5.0), lambda a: np.full(2, 5.0, np.float32)),
        ("new_empty_shape", lambda m, x: x.new_empty(2, 3).shape, lambda a: (2, 3)),
        (
            "new_tensor",
            lambda m, x: x.new_tensor([1.0, 2.0]),
            lambda a: np.array([1, 2], np.float32),
        ),
        ("new_zeros_int", lambda m, x: x.new_zeros(2), lambda a: np.zeros(2, np.int64), (I(3, 4),)),
        ("dtype_name", lambda m, x: str(x.dtype).split(".")[-1], lambda a: "float32"),
        ("device_type", lambda m, x: x.device.type, lambda a: "cpu"),
        ("detach", lambda m, x: x.detach(), lambda a: a),
        ("requires_grad_flag", lambda m, x: (x.requires_grad_() * 2).requires_grad, lambda a: True),
        ("numpy", lambda m, x: x.detach().numpy(), lambda a: a),
        ("fill_", lambda m, x: x.clone().fill_(2.0), lambda a: np.full_like(a, 2)),
        ("zero_", lambda m, x: x.clone().zero_(), np.zeros_like),
        ("add_", lambda m, x: x.clone().add_(1.0), lambda a: a + 1),
        ("mul_", lambda m, x: x.clone().mul_(2.0), lambda a: a * 2),
        ("clamp_", lambda m, x: x.clone().clamp_(0, 1), lambda a: np.clip(a, 0, 1)),
        (
            "masked_fill_",
            lambda m, x: x.clone().masked_fill_(x > 0, 1.0),
            lambda a: np.where(a > 0, 1, a),
        ),
        ("copy_", lambda m, x: m.zeros(3, 4).copy_(x), lambda a: a),
        (
            "from_numpy",
            lambda m, x: m.from_numpy(np.arange(6.0).reshape(2, 3)),
            lambda a: np.arange(6.0).reshape(2, 3),
        ),
        (
            "from_numpy_strided",
            lambda m, x: m.from_numpy(np.arange(12.0).reshape(3, 4)[:, ::2]),
            lambda a: np.arange(12.0).reshape(3, 4)[:, ::2],
        ),
        (
            "from_numpy_transposed",
            lambda m, x: m.from_numpy(np.arange(12.0).reshape(3, 4).T),
            lambda a: np.arange(12.0).reshape(3, 4).T,
        ),
        ("as_tensor", lambda m, x: m.as_tensor([1, 2, 3]), lambda a: np.array([1, 2, 3])),
        ("is_tensor", lambda m, x: m.is_tensor(x), lambda a: True),
        ("numel_fn", lambda m, x: m.numel(x), lambda a: 12),
        ("is_floating_point_fn", lambda m, x: m.is_floating_point(x), lambda a: True),
    ]
    for row in rows:
        name, fn, ref, *inputs = row
        case(name, fn, ref, inputs[0] if inputs else X34)


def _functional_cases() -> None:
    rows = [
        ("F.relu", lambda m, x: _f(m).relu(x), lambda a: np.maximum(a, 0)),
        ("F.gelu", lambda m, x: _f(m).gelu(x), lambda a: 0.5 * a * (1 + _erf(a / np.sqrt(2)))),
        ("F.silu", lambda m, x: _f(m).silu(x), lambda a: a * _sigmoid(a)),
        ("F.softplus", lambda m, x: _f(m).softplus(x), lambda a: np.log1p(np.exp(a))),
        ("F.elu", lambda m, x: _f(m).elu(x), lambda a: np.where(a > 0, a, np.expm1(a))),
        (
            "F.leaky_relu",
            lambda m, x: _f(m).leaky_relu(x, 0.1),
            lambda a: np.where(a > 0, a, 0.1 * a),
        ),
        ("F.sigmoid", lambda m, x: _f(m).sigmoid(x), _sigmoid),
        ("F.tanh", lambda m, x: _f(m).tanh(x), np.tanh),
        ("F.softmax", lambda m, x: _f(m).softmax(x, dim=-1), lambda a: _softmax(a, -1)),
        ("F.log_softmax", lambda m, x: _f(m).log_softmax(x, 1), lambda a: np.log(_softmax(a, 1))),
        ("F.hardtanh", lambda m, x: _f(m).hardtanh(x), lambda a: np.clip(a, -1, 1)),
        ("F.relu6", lambda m, x: _f(m).relu6(x * 4), lambda a: np.clip(a * 4, 0, 6)),
        ("F.logsigmoid", lambda m, x: _f(m).logsigmoid(x), lambda a: np.log(_sigmoid(a))),
        ("F.softsign", lambda m, x: _f(m).softsign(x), lambda a: a / (1 + np.abs(a))),
        ("F.mish", lambda m, x: _f(m).mish(x), lambda a: a * np.tanh(np.log1p(np.exp(a)))),
        (
            "F.hardsigmoid",
            lambda m, x: _f(m).hardsigmoid(x * 4),
            lambda a: np.clip(a * 4 / 6 + 0.5, 0, 1),
        ),
        (
            "F.normalize",
            lambda m, x: _f(m).normalize(x, dim=1),
            lambda a: a / np.sqrt((a * a).sum(1, keepdims=True)),
        ),
        ("F.dropout_eval", lambda m, x: _f(m).dropout(x, 0.5, training=False), lambda a: a),
        ("F.linear", lambda m, x: _f(m).linear(x, x[:2]), lambda a: a @ a[:2].T),
        ("F.pad", lambda m, x: _f(m).pad(x, (1, 1)), lambda a: np.pad(a, ((0, 0), (1, 1)))),
        (
            "F.mse_loss",
            lambda m, x, y: _f(m).mse_loss(x, y),
            lambda a, b: ((a - b) ** 2).mean(),
            (F(3, 4), F(3, 4)),
        ),
        (
            "F.l1_loss",
            lambda m, x, y: _f(m).l1_loss(x, y),
            lambda a, b: np.abs(a - b).mean(),
            (F(3, 4), F(3, 4)),
        ),
        (
            "F.smooth_l1_loss",
            lambda m, x, y: _f(m).smooth_l1_loss(x, y),
            lambda a, b: np.where(
                np.abs(a - b) < 1, 0.5 * (a - b) ** 2, np.abs(a - b) - 0.5
            ).mean(),
            (F(3, 4), F(3, 4)),
        ),
        (
            "F.cross_entropy",
            lambda m, x: _f(m).cross_entropy(x, m.tensor([0, 3, 1])),
            lambda a: -np.log(_softmax(a, 1))[[0, 1, 2], [0, 3, 1]].mean(),
        ),
        (
            "F.nll_loss",
            lambda m, x: _f(m).nll_loss(x, m.tensor([0, 3, 1])),
            lambda a: -a[[0, 1, 2], [0, 3, 1]].mean(),
        ),
        (
            "F.bce_with_logits",
            lambda m, x, y: _f(m).binary_cross_entropy_with_logits(x, (y > 0).float()),
            lambda a, b: (np.logaddexp(0, a) - a * (b > 0)).mean(),
            (F(3, 4), F(3, 4)),
        ),
        (
            "F.one_hot",
            lambda m, x: _f(m).one_hot(m.tensor([0, 2, 1]), 3),
            lambda a: np.eye(3, dtype=np.int64)[[0, 2, 1]],
        ),
    ]
    for row in rows:
        name, fn, ref, *inputs = row
        case(name, fn, ref, inputs[0] if inputs else X34)


def _error_cases() -> None:
    case("error_dim_out_of_range", lambda m, x: x.sum(5), None, raises=IndexError)
    case("error_softmax_dim", lambda m, x: x.softmax(2), None, raises=IndexError)
    case("error_broadcast", lambda m, x: x + x[:, :3], None, raises=RuntimeError)
    case("error_matmul", lambda m, x: x @ x, None, raises=RuntimeError)
    case("error_reshape", lambda m, x: x.reshape(5, 5), None, raises=RuntimeError)
    case("error_index", lambda m, x: x[7], None, raises=IndexError)
    case("error_cat_shapes", lambda m, x: m.cat([x, x[:, :2]]), None, raises=RuntimeError)
    case("error_transpose_dim", lambda m, x: x.transpose(0, 3), None, raises=IndexError)


def _special_cases() -> None:
    """Special functions, bit operations, statistics and scatter reductions (ops/special.py,
    ops/torch_math.py)."""
    import math

    lgamma = np.vectorize(math.lgamma)
    erfc = np.vectorize(math.erfc)
    XY = (F(3, 4), F(3, 4))
    INTS = (I(3, 4), I(3, 4))
    rows = [
        ("lgamma", lambda m, x: m.lgamma(x), lgamma, (P(3, 4),)),
        ("Tensor.lgamma", lambda m, x: x.lgamma(), lgamma, (F(3, 4),)),
        ("digamma", lambda m, x: m.digamma(x), None, (P(3, 4),)),
        ("digamma_negative", lambda m, x: m.digamma(x - 2.5), None, (U(3, 4),)),
        ("polygamma_1", lambda m, x: m.polygamma(1, x), None, (P(3, 4),)),
        ("polygamma_3", lambda m, x: m.polygamma(3, x), None, (P(3, 4),)),
        ("Tensor.polygamma", lambda m, x: x.polygamma(2), None, (P(3, 4),)),
        ("mvlgamma", lambda m, x: m.mvlgamma(x + 1, 3), None, (P(3, 4),)),
        ("erfc", lambda m, x: m.erfc(x), erfc, X34),
        ("erfinv", lambda m, x: m.erfinv(x), None, (U(3, 4),)),
        ("Tensor.erfinv", lambda m, x: x.erfinv(), None, (U(3, 4),)),
        ("i0", lambda m, x: m.i0(x), np.i0, X34),
        ("special.i1", lambda m, x: m.special.i1(x), None, X34),
        ("special.gammaln", lambda m, x: m.special.gammaln(x), lgamma, (P(3, 4),)),
        ("special.ndtri", lambda m, x: m.special.ndtri(x), None, (U(3, 4),)),
        ("igamma", lambda m, a, x: m.igamma(a.detach(), x), None, (G(3, 4), P(3, 4))),
        ("igammac", lambda m, a, x: m.igammac(a.detach(), x), None, (P(3, 4), G(3, 4))),
        (
            "xlogy_method",
            lambda m, x, y: x.xlogy(y),
            lambda a, b: a * np.log(b),
            (F(3, 4), P(3, 4)),
        ),
        ("heaviside", lambda m, x: m.heaviside(x.round(), m.tensor([0.5])), None, X34),
        ("float_power", lambda m, x, y: m.float_power(x, y), None, (P(3, 4), F(3, 4))),
        # positive exponents: PyTorch's ldexp gradient is 0 for negative integer exponents
        ("ldexp", lambda m, x, e: m.ldexp(x, e), lambda a, b: a * 2.0**b, (F(3, 4), N(3, 4))),
        ("frexp", lambda m, x: m.frexp(x), lambda a: np.frexp(a), X34),
        ("nextafter", lambda m, x, y: m.nextafter(x, y), np.nextafter, XY),
        ("sinc_method", lambda m, x: x.sinc(), None, X34),
        ("fmax_method", lambda m, x, y: x.fmax(y), np.fmax, XY),
        ("fmin_method", lambda m, x, y: x.fmin(y), np.fmin, XY),
        ("hypot_method", lambda m, x, y: x.hypot(y), np.hypot, XY),
        ("logaddexp2_method", lambda m, x, y: x.logaddexp2(y), np.logaddexp2, XY),
        ("bitwise_and", lambda m, x, y: m.bitwise_and(x, y), np.bitwise_and, INTS),
        ("bitwise_or", lambda m, x, y: x.bitwise_or(y), np.bitwise_or, INTS),
        ("bitwise_xor", lambda m, x, y: x ^ y, np.bitwise_xor, INTS),
        ("bitwise_not", lambda m, x: ~x, np.invert, (I(3, 4),)),
        (
            "bitwise_and_bool",
            lambda m, x, y: m.bitwise_and(x, y),
            np.logical_and,
            (B(3, 4), B(3, 4)),
        ),
        ("left_shift", lambda m, x, y: x << y.abs(), lambda a, b: a << np.abs(b), INTS),
        (
            "right_shift",
            lambda m, x, y: m.bitwise_right_shift(x, y.abs()),
            lambda a, b: a >> np.abs(b),
            INTS,
        ),
        ("gcd", lambda m, x, y: m.gcd(x, y), np.gcd, INTS),
        ("lcm", lambda m, x, y: x.lcm(y), np.lcm, INTS),
        ("msort", lambda m, x: m.msort(x), lambda a: np.sort(a, 0), X34),
        ("unique", lambda m, x: m.unique(x), np.unique, (I(3, 4),)),
        (
            "unique_inverse_counts",
            lambda m, x: m.unique(x, return_inverse=True, return_counts=True),
            lambda a: np.unique(a, return_inverse=True, return_counts=True),
            (I(3, 4),),
        ),
        (
            "unique_dim",
            lambda m, x: m.unique(m.cat([x, x]), dim=0),
            lambda a: np.unique(a, axis=0),
            (I(2, 3),),
        ),
        ("unique_consecutive", lambda m, x: m.unique_consecutive(x.sort().values), None, (I(12),)),
        ("mode", lambda m, x: m.mode(x, 1), None, (I(3, 8),)),
        ("Tensor.mode_float", lambda m, x: x.round().mode(0), None, X34),
        ("nanmedian", lambda m, x: m.nanmedian(m.where(x > 1, m.nan, x), 1), None, X34),
        ("nanmedian_all", lambda m, x: m.where(x > 1, m.nan, x).nanmedian(), None, X34),
        ("quantile", lambda m, x: m.quantile(x, 0.3), lambda a: np.quantile(a, 0.3), X34),
        (
            "quantile_dim_q",
            lambda m, x: m.quantile(x, m.tensor([0.25, 0.9]), dim=1, keepdim=True),
            lambda a: np.quantile(a, [0.25, 0.9], axis=1, keepdims=True),
            X34,
        ),
        (
            "quantile_nearest",
            lambda m, x: x.quantile(0.4, dim=0, interpolation="nearest"),
            None,
            X34,
        ),
        (
            "quantile_midpoint",
            lambda m, x: m.quantile(x, 0.4, dim=1, interpolation="midpoint"),
            lambda a: np.quantile(a, 0.4, axis=1, method="midpoint"),
            X34,
        ),
        (
            "nanquantile",
            lambda m, x: m.nanquantile(m.where(x > 1, m.nan, x), 0.5, dim=1),
            None,
            X34,
        ),
        (
            "histc",
            lambda m, x: m.histc(x, 5, -1, 1),
            lambda a: np.histogram(a, 5, (-1, 1))[0].astype(np.float32),
            X34,
        ),
        (
            "histogram",
            lambda m, x: m.histogram(x, 4),
            lambda a: [v.astype(np.float32) for v in np.histogram(a, 4)],
            X34,
        ),
        ("dist", lambda m, x, y: m.dist(x, y), lambda a, b: np.linalg.norm(a - b), XY),
        ("dist_p1", lambda m, x, y: x.dist(y, 1), lambda a, b: np.abs(a - b).sum(), XY),
        ("renorm", lambda m, x: x.renorm(2, 0, 1.0), None, X34),
        ("cov", lambda m, x: m.cov(x), np.cov, X34),
        (
            "cov_weights",
            lambda m, x, w: m.cov(x, correction=0, aweights=w),
            lambda a, w: np.cov(a, aweights=w, ddof=0),
            (F(3, 4), P(4)),
        ),
        ("corrcoef", lambda m, x: x.corrcoef(), np.corrcoef, X34),
    ]
    for name, fn, ref, inputs in rows:
        case(name, fn, ref, inputs)
    index = [[0, 1, 0, 2], [2, 2, 1, 0], [0, 0, 0, 1]]
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for include_self in (True, False):
            case(
                f"scatter_reduce_{reduce}{'' if include_self else '_excl'}",
                lambda m, x, s, r=reduce, i=include_self: x.scatter_reduce(
                    0, m.tensor(index), s, r, include_self=i
                ),
                None,
                (F(3, 4), F(3, 4)),
            )
    case(
        "scatter_reduce_int_mean",
        lambda m, x, s: m.scatter_reduce(x, 1, m.tensor(index), s, "mean"),
        None,
        INTS,
    )
    for reduce in ("prod", "mean", "amax", "amin"):
        case(
            f"index_reduce_{reduce}",
            lambda m, x, s, r=reduce: x.index_reduce(1, m.tensor([0, 2, 0]), s, r),
            None,
            (F(3, 4), F(3, 3)),
        )
    more = [
        (
            "take_flat",
            lambda m, x: m.take(x, m.tensor([[0, 5], [11, 3]])),
            lambda a: a.reshape(-1)[[[0, 5], [11, 3]]],
        ),
        ("Tensor.take", lambda m, x: x.take(m.tensor([1, 7])), lambda a: a.reshape(-1)[[1, 7]]),
        ("put", lambda m, x: x.put(m.tensor([0, 5]), x[0, :2] * 2), None),
        ("put_accumulate", lambda m, x: x.put(m.tensor([1, 1]), x[1, :2], accumulate=True), None),
        ("diagonal_scatter", lambda m, x: m.diagonal_scatter(x, x[0, :3] * 3, 1), None),
        ("select_scatter", lambda m, x: m.select_scatter(x, x[0] * 2, 0, 2), None),
        ("slice_scatter", lambda m, x: m.slice_scatter(x, x[:, :2] * 2, 1, 0, 4, 2), None),
        ("fill_diagonal_", lambda m, x: (x * 1).fill_diagonal_(5.0), None),
        ("fill_diagonal_wrap", lambda m: m.zeros(7, 3).fill_diagonal_(2.0, wrap=True), None, ()),
        ("sum_to_size", lambda m, x: x.sum_to_size(1, 4), lambda a: a.sum(0, keepdims=True)),
        ("fliplr_method", lambda m, x: x.fliplr(), np.fliplr),
        ("flipud_method", lambda m, x: x.flipud(), np.flipud),
        ("acos_", lambda m, x: (x * 0.5).acos_(), lambda a: np.arccos(a * 0.5)),
        ("atan2_", lambda m, x, y: (x * 1).atan2_(y), np.arctan2, (F(3, 4), F(3, 4))),
        (
            "lerp_",
            lambda m, x, y: (x * 1).lerp_(y, 0.25),
            lambda a, b: a + 0.25 * (b - a),
            (F(3, 4), F(3, 4)),
        ),
        ("fmod_", lambda m, x: (x * 1).fmod_(0.7), lambda a: np.fmod(a, np.float32(0.7))),
        (
            "remainder_",
            lambda m, x: (x * 1).remainder_(0.7),
            lambda a: np.remainder(a, np.float32(0.7)),
        ),
        ("copysign_", lambda m, x, y: (x * 1).copysign_(y), np.copysign, (F(3, 4), F(3, 4))),
        ("cumsum_", lambda m, x: (x * 1).cumsum_(1), lambda a: np.cumsum(a, 1)),
        (
            "xlogy_",
            lambda m, x, y: (x * 1).xlogy_(y),
            lambda a, b: a * np.log(b),
            (F(3, 4), P(3, 4)),
        ),
        ("true_divide_", lambda m, x, y: (x * 1).true_divide_(y), np.divide, (F(3, 4), P(3, 4))),
        ("floor_divide_", lambda m, x: (x * 1).floor_divide_(0.3), lambda a: a // np.float32(0.3)),
        ("hypot_", lambda m, x, y: (x * 1).hypot_(y), np.hypot, (F(3, 4), F(3, 4))),
        ("lgamma_", lambda m, x: (x * 1).lgamma_(), lgamma, (P(3, 4),)),
        ("bitwise_and_", lambda m, x, y: x.clone().bitwise_and_(y), np.bitwise_and, INTS),
        ("torch.abs_", lambda m, x: m.abs_(x * 1), np.abs),
        ("itemsize", lambda m, x: x.itemsize, lambda a: 4),
        ("is_complex", lambda m, x: x.is_complex(), lambda a: False),
        ("is_same_size", lambda m, x: x.is_same_size(x[0]), lambda a: False),
        (
            "is_sparse",
            lambda m, x: (x.is_sparse, x.is_quantized, x.is_meta),
            lambda a: (False,) * 3,
        ),
        (
            "result_type",
            lambda m, x: str(m.result_type(x, 2.5)).split(".")[-1],
            lambda a: "float32",
        ),
        (
            "can_cast",
            lambda m: (m.can_cast(m.int64, m.float32), m.can_cast(m.float32, m.int32)),
            lambda: (True, False),
            (),
        ),
        ("finfo_eps", lambda m: m.finfo(m.float32).eps, lambda: np.finfo(np.float32).eps, ()),
        ("iinfo_max", lambda m: m.iinfo(m.int32).max, lambda: 2**31 - 1, ()),
        ("scalar_tensor", lambda m: m.scalar_tensor(3), lambda: np.float32(3), ()),
        ("empty_strided", lambda m: m.empty_strided((2, 3), (1, 2)).stride(), lambda: (1, 2), ()),
        ("asarray", lambda m: m.asarray([1.0, 2.0]), lambda: np.array([1.0, 2.0], np.float32), ()),
        ("new_method", lambda m, x: x.new([1, 2]), lambda a: np.array([1.0, 2.0], np.float32)),
        ("hann_window", lambda m: m.hann_window(8), None, ()),
        (
            "hann_window_symmetric",
            lambda m: m.hann_window(8, periodic=False),
            lambda: np.hanning(8),
            (),
        ),
        (
            "hamming_window",
            lambda m: m.hamming_window(7, periodic=False),
            lambda: np.hamming(7),
            (),
        ),
        (
            "blackman_window",
            lambda m: m.blackman_window(9, periodic=False),
            lambda: np.blackman(9),
            (),
        ),
        (
            "bartlett_window",
            lambda m: m.bartlett_window(6, periodic=False),
            lambda: np.bartlett(6),
            (),
        ),
        (
            "kaiser_window",
            lambda m: m.kaiser_window(6, periodic=False, beta=5.0),
            lambda: np.kaiser(6, 5.0),
            (),
        ),
        ("kaiser_window_periodic", lambda m: m.kaiser_window(6), None, ()),
    ]
    for row in more:
        name, fn, ref, *inputs = row
        case(name, fn, ref, inputs[0] if inputs else X34)
    case("error_bitwise_float", lambda m, x: m.bitwise_and(x, x), None, raises=RuntimeError)
    case("error_half", lambda m, x: x.byte(), None, raises=Exception)


_creation_cases()
_unary_cases()
_binary_cases()
_reduction_cases()
_shape_cases()
_index_cases()
_method_cases()
_functional_cases()
_error_cases()
_special_cases()

# The cases kernelgrad does not pass yet, each for the reason given by the run.
EXPECTED_FAILURES: set[str] = set()


# --- running a case -------------------------------------------------------------------------
def _leaves(lib: Any, arrays: Sequence[np.ndarray], grad: bool, device: str = "cpu") -> list[Any]:
    tensors = []
    for a in arrays:
        floating = a.dtype.kind == "f"
        if lib is kg:
            tensors.append(kg.tensor(a, requires_grad=grad and floating, device=device))
        else:
            tensors.append(torch.tensor(a, requires_grad=grad and floating))
    return tensors


def _flatten(value: Any) -> list[np.ndarray]:
    """The result as a list of NumPy arrays (tuples and named tuples flattened)."""
    if isinstance(value, (tuple, list)):
        if all(isinstance(v, (int, bool, float)) for v in value):
            return [np.asarray(value)]
        return [item for v in value for item in _flatten(v)]
    if isinstance(value, kg.Tensor) or (torch is not None and isinstance(value, torch.Tensor)):
        return [np.asarray(value.detach().cpu().numpy())]
    if isinstance(value, (str, int, float, bool, np.ndarray, np.generic)):
        return [np.asarray(value)]
    return [np.asarray(tuple(value))]  # a shape


def _kind(a: np.ndarray) -> str:
    return {"f": "float", "i": "int", "u": "int", "b": "bool"}.get(a.dtype.kind, a.dtype.kind)


def _compare(got: list[np.ndarray], want: list[np.ndarray], what: str, kinds: bool = True) -> str:
    if len(got) != len(want):
        return f"{what}: {len(got)} results, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"{what}[{k}]: shape {g.shape}, expected {w.shape}"
        if kinds and _kind(g) != _kind(w) and w.dtype.kind not in "OU":
            return f"{what}[{k}]: dtype {g.dtype}, expected a {_kind(w)} dtype ({w.dtype})"
        if g.dtype.kind in "OU" or w.dtype.kind in "OU":
            if not np.array_equal(g, w):
                return f"{what}[{k}]: {g!r}, expected {w!r}"
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        if not np.allclose(g64, w64, rtol=2e-4, atol=2e-5, equal_nan=True):
            error = np.nanmax(np.abs(g64 - w64)) if g.size else 0
            return f"{what}[{k}]: values differ (max abs error {error:.3g})"
    return ""


def _cotangents(outputs: list[Any], lib: Any) -> list[Any]:
    rng = np.random.default_rng(7)
    weights = []
    for out in outputs:
        w = rng.standard_normal(tuple(out.shape)).astype(np.float32)
        weights.append(kg.tensor(w, device=out.device) if lib is kg else torch.tensor(w))
    return weights


def _differentiable_outputs(value: Any, lib: Any) -> list[Any]:
    tensor_type = kg.Tensor if lib is kg else torch.Tensor
    if isinstance(value, tensor_type):
        return [value] if value.dtype.is_floating_point and value.requires_grad else []
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _differentiable_outputs(v, lib)]
    return []


def _gradients(
    case: Case, lib: Any, arrays: Sequence[np.ndarray], device: str = "cpu"
) -> list[np.ndarray] | None:
    leaves = _leaves(lib, arrays, True, device)
    outputs = _differentiable_outputs(case.fn(lib, *leaves), lib)
    if not outputs:
        return None
    loss = sum((o * w).sum() for o, w in zip(outputs, _cotangents(outputs, lib)))
    loss.backward()
    grads = []
    for leaf, a in zip(leaves, arrays):
        if a.dtype.kind == "f":
            grad = leaf.grad
            grads.append(np.zeros_like(a) if grad is None else grad.detach().cpu().numpy())
    return grads


def _numerical_gradients(case: Case, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Central differences of the NumPy reference, weighted like _gradients."""
    arrays64 = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    outputs = [o for o in _flatten(case.ref(*arrays64)) if o.dtype.kind == "f"]
    rng = np.random.default_rng(7)
    weights = [rng.standard_normal(o.shape) for o in outputs]

    def loss(values: list[np.ndarray]) -> float:
        outs = [o for o in _flatten(case.ref(*values)) if o.dtype.kind == "f"]
        return float(sum((o * w).sum() for o, w in zip(outs, weights)))

    grads = []
    for k, a in enumerate(arrays64):
        if a.dtype.kind != "f":
            continue
        grad = np.zeros_like(a)
        for index in np.ndindex(a.shape):
            for sign in (1, -1):
                shifted = [v.copy() for v in arrays64]
                shifted[k][index] += sign * 1e-6
                grad[index] += sign * loss(shifted) / 2e-6
        grads.append(grad)
    return grads


def run_case(case: Case, device: str = "cpu") -> str:
    """'' when the case passes on ``device``, else the reason it fails."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    arrays = [_array(spec, rng) for spec in case.inputs]
    if case.raises is not None:
        try:
            case.fn(kg, *_leaves(kg, arrays, False, device))
        except case.raises:
            return ""
        except Exception as error:
            return f"raised {type(error).__name__}, PyTorch raises {case.raises.__name__}: {error}"
        return f"no error; PyTorch raises {case.raises.__name__}"
    try:
        got = _flatten(case.fn(kg, *_leaves(kg, arrays, False, device)))
    except Exception as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if case.ref is not None:
        problem = _compare(got, _flatten(case.ref(*arrays)), "numpy")
        if problem:
            return problem
    if torch is not None:
        problem = _compare(got, _flatten(case.fn(torch, *_leaves(torch, arrays, False))), "torch")
        if problem:
            return problem
    differentiable = case.grad and any(a.dtype.kind == "f" for a in arrays)
    if not differentiable:
        return ""
    try:
        grads = _gradients(case, kg, arrays, device)
    except Exception as error:
        return (
            f"backward: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        )
    if torch is not None:
        try:
            want = _gradients(case, torch, arrays)
        except RuntimeError:  # PyTorch has no derivative for it: nothing to compare
            return ""
    elif case.ref is not None and grads is not None:
        want = _numerical_gradients(case, arrays)
    else:
        return ""
    if want is None or grads is None:
        return "" if want is None and grads is None else "gradient: differentiable in one only"
    return _compare(grads, want, "gradient", kinds=False)


def run_all() -> dict[str, str]:
    return {c.name: run_case(c) for c in CASES}


def report(results: dict[str, str]) -> str:
    failed = {name: why for name, why in results.items() if why}
    passed = len(results) - len(failed)
    lines = [f"op suite: {passed}/{len(results)} cases pass ({passed / len(results):.1%})"]
    lines += [f"  FAIL {name}: {why}" for name, why in sorted(failed.items())]
    return "\n".join(lines)


def test_case_names_are_unique():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)) and len(names) >= 300


def test_op_suite_pass_rate():
    results = run_all()
    print(report(results))
    failed = {name for name, why in results.items() if why}
    newly_failing = sorted(failed - EXPECTED_FAILURES)
    newly_passing = sorted(EXPECTED_FAILURES - failed)
    assert not newly_failing, "\n".join(f"{n}: {results[n]}" for n in newly_failing)
    assert not newly_passing, (
        f"these cases pass now: remove them from EXPECTED_FAILURES: {newly_passing}"
    )


# What the CUDA-simulator pass runs (the CPU pass runs every case above): the operations
# of ops/composite.py and the new primitives, on cases that create no tensors of their
# own (those would be on the CPU).
DEVICE_SLICE = [
    "tan", "asinh", "floor", "round", "fmod", "copysign", "logaddexp", "div_floor",
    "div_int_trunc", "isclose", "prod_dim", "var_mean", "cumsum", "cummax", "logcumsumexp",
    "sort", "topk", "argsort_desc", "tril", "triu_k", "masked_fill", "roll_dims",
    "diagonal_offset", "einsum_mm", "einsum_batch", "nonzero", "repeat_interleave",
    "new_zeros", "type_dtype", "Tensor.mm", "index_range",
    # ops/special.py and ops/torch_math.py
    "lgamma", "polygamma_1", "erfinv", "i0", "igamma", "nextafter", "frexp", "left_shift",
    "gcd", "msort", "nanmedian", "quantile", "renorm", "cov", "acos_", "lerp_",
]  # fmt: skip


@pytest.mark.parametrize("name", DEVICE_SLICE)
def test_the_new_operations_on_the_device(name, device):
    if device == "cpu":
        pytest.skip("the CPU runs every case in test_op_suite_pass_rate")
    by_name = {c.name: c for c in CASES}
    assert run_case(by_name[name], device) == ""


@pytest.mark.torch
def test_the_suite_agrees_with_pytorch_on_its_own_references():
    """The NumPy references are right: PyTorch passes them (a wrong reference would make
    the kernelgrad comparison meaningless)."""
    wrong = []
    for c in CASES:
        if c.ref is None or c.raises is not None:
            continue
        rng = np.random.default_rng(zlib.crc32(c.name.encode()))
        arrays = [_array(spec, rng) for spec in c.inputs]
        try:
            value = c.fn(torch, *_leaves(torch, arrays, False))
        except Exception as error:
            wrong.append(f"{c.name}: PyTorch raised {type(error).__name__}: {error}")
            continue
        problem = _compare(_flatten(value), _flatten(c.ref(*arrays)), "numpy")
        if problem:
            wrong.append(f"{c.name}: {problem}")
    assert wrong == [], "\n".join(wrong)


if __name__ == "__main__":
    print(report(run_all()))
