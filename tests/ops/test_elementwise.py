"""Elementwise ops: values against NumPy on tensors with random layouts and broadcasting,
dtype promotion, and gradients against central differences."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kernelgrad as kg
from kernelgrad.ops import elementwise as ew
from tests.helpers import assert_close, check_grad, float_arrays, tensor_with_layout, tensors

_erf = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


# name -> (kernelgrad function, NumPy reference, input range)
UNARY = {
    "neg": (lambda t: -t, np.negative, (-3, 3)),
    "exp": (kg.exp, np.exp, (-3, 3)),
    "log": (kg.log, np.log, (0.1, 5)),
    "log1p": (kg.log1p, np.log1p, (-0.5, 3)),
    "expm1": (kg.expm1, np.expm1, (-3, 3)),
    "sqrt": (kg.sqrt, np.sqrt, (0.1, 5)),
    "sin": (kg.sin, np.sin, (-3, 3)),
    "cos": (kg.cos, np.cos, (-3, 3)),
    "tanh": (kg.tanh, np.tanh, (-3, 3)),
    "sigmoid": (kg.sigmoid, _sigmoid, (-8, 8)),
    "relu": (kg.relu, lambda x: np.maximum(x, 0), (-3, 3)),
    "abs": (kg.abs, np.abs, (-3, 3)),
    "sign": (kg.sign, np.sign, (-3, 3)),
    "reciprocal": (lambda t: t.reciprocal(), np.reciprocal, (0.5, 3)),
    "erf": (kg.erf, _erf, (-2, 2)),
    "gelu": (ew.GELU, _gelu, (-3, 3)),
    "tan": (kg.tan, np.tan, (-1.4, 1.4)),
    "asin": (kg.asin, np.arcsin, (-0.95, 0.95)),
    "acos": (kg.acos, np.arccos, (-0.95, 0.95)),
    "atan": (kg.atan, np.arctan, (-4, 4)),
    "sinh": (kg.sinh, np.sinh, (-3, 3)),
    "cosh": (kg.cosh, np.cosh, (-3, 3)),
    "asinh": (kg.asinh, np.arcsinh, (-4, 4)),
    "acosh": (kg.acosh, np.arccosh, (1.05, 5)),
    "atanh": (kg.atanh, np.arctanh, (-0.95, 0.95)),
    # piecewise constant: the gradient is zero (as in PyTorch), checked away from the jumps
    "floor": (kg.floor, np.floor, (-3, 3)),
    "ceil": (kg.ceil, np.ceil, (-3, 3)),
    "trunc": (kg.trunc, np.trunc, (-3, 3)),
    "round": (kg.round, np.round, (-3, 3)),
}
# Every gradient is checked (away from kinks: relu, abs and sign get |x| >= 0.1).
DIFFERENTIABLE_UNARY = list(UNARY)

BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "maximum": (kg.maximum, np.maximum),
    "minimum": (kg.minimum, np.minimum),
    "pow": (lambda a, b: a.abs() ** b if isinstance(a, kg.Tensor) else abs(a) ** b, None),
}
COMPARISONS = {
    "eq": (lambda a, b: a == b, np.equal),
    "ne": (lambda a, b: a != b, np.not_equal),
    "lt": (lambda a, b: a < b, np.less),
    "le": (lambda a, b: a <= b, np.less_equal),
    "gt": (lambda a, b: a > b, np.greater),
    "ge": (lambda a, b: a >= b, np.greater_equal),
}
LOGICAL = {
    "logical_and": (lambda a, b: a & b, np.logical_and),
    "logical_or": (lambda a, b: a | b, np.logical_or),
    "logical_xor": (lambda a, b: a ^ b, np.logical_xor),
}

# Primitives this module tests (checked by tests/test_registry.py).
COVERED = (
    set(UNARY)
    | set(BINARY)
    | set(COMPARISONS)
    | set(LOGICAL)
    | {
        "floor_divide",
        "remainder",
        "int_pow",
        "where",
        "clamp",
        "identity",
        "logical_not",
        "isnan",
        "relu_grad",
        "sigmoid_grad",
        "tanh_grad",
        "gelu_grad",
        "log2",
        "log10",
        "exp2",
        "fmod",
        "copysign",
        "atan2",
        "hypot",
    }
)


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_matches_numpy(name, data, device):
    fn, reference, (low, high) = UNARY[name]
    values, t = data.draw(tensors(device, low=low, high=high))
    expected = reference(values.astype(np.float64)).astype(np.float32)
    assert_close(fn(t), expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", DIFFERENTIABLE_UNARY)
def test_unary_gradient(name, device):
    fn, _, (low, high) = UNARY[name]
    values = np.random.default_rng(1).uniform(low, high, (2, 3))
    if name in ("relu", "abs", "sign"):
        values = np.where(np.abs(values) < 0.1, 0.5, values)
    check_grad(fn, values, device=device)


@st.composite
def broadcast_pair(draw, device, low=-3.0, high=3.0):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4))
    a_shape, b_shape = shapes.input_shapes
    a = draw(tensors(device, shape=a_shape, low=low, high=high))
    b = draw(tensors(device, shape=b_shape, low=low, high=high))
    return a, b


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_matches_numpy_with_broadcasting(name, data, device):
    fn, reference = BINARY[name]
    low = 0.5 if name in ("div", "pow") else -3.0
    (a, ta), (b, tb) = data.draw(broadcast_pair(device, low=low))
    if name == "pow":
        expected = np.abs(a.astype(np.float64)) ** b
    else:
        expected = reference(a.astype(np.float64), b.astype(np.float64))
    assert_close(fn(ta, tb), expected.astype(np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradient_with_broadcasting(name, device):
    fn, _ = BINARY[name]
    rng = np.random.default_rng(2)
    a = rng.uniform(0.5, 2.0, (2, 3))
    b = rng.uniform(0.5, 2.0, (3,))
    if name in ("maximum", "minimum"):
        b = b + 0.05  # keep away from ties
    check_grad(fn, a, b, device=device)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow"])
def test_binary_with_python_scalars_on_both_sides(name, device):
    fn, _ = BINARY[name]
    a = np.array([[0.5, 1.5, 2.0]], dtype=np.float32)
    t = kg.tensor(a, device=device)
    if name == "pow":
        assert_close(t**2, a**2)
        assert_close(2.0**t, 2.0**a, rtol=1e-6)
        return
    reference = BINARY[name][1]
    assert_close(fn(t, 2.5), reference(a, np.float32(2.5)))
    assert_close(fn(2.5, t), reference(np.float32(2.5), a))


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@given(data=st.data())
def test_comparisons_return_bool(name, data, device):
    fn, reference = COMPARISONS[name]
    (a, ta), (b, tb) = data.draw(broadcast_pair(device, low=-2, high=2))
    # Round so that ties actually occur.
    a, b = np.round(a), np.round(b)
    ta, tb = kg.tensor(a, device=device), kg.tensor(b, device=device)
    result = fn(ta, tb)
    assert result.dtype == kg.bool
    assert_close(result, reference(a, b))
    assert not result.requires_grad


@pytest.mark.parametrize("name", sorted(LOGICAL))
def test_logical_ops(name, device):
    fn, reference = LOGICAL[name]
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    result = fn(kg.tensor(a, device=device), kg.tensor(b, device=device))
    assert result.dtype == kg.bool
    assert_close(result, reference(a, b))
    assert_close(~kg.tensor(a, device=device), ~a)
    assert_close(kg.logical_not(kg.tensor([0, 2], device=device)), [True, False])


def test_floor_divide_and_remainder_follow_python_semantics(device):
    a = np.array([7, -7, 7, -7])
    b = np.array([2, 2, -2, -2])
    ta, tb = kg.tensor(a, device=device), kg.tensor(b, device=device)
    assert_close(ta // tb, a // b)
    assert_close(ta % tb, a % b)
    x = np.array([5.5, -5.5], dtype=np.float32)
    assert_close(kg.tensor(x, device=device) % 2.0, np.mod(x, 2.0))
    assert_close(kg.tensor(x, device=device) // 2.0, np.floor_divide(x, 2.0))


def test_remainder_gradient(device):
    check_grad(
        lambda a, b: a % b, np.array([2.3, -1.7, 5.1]), np.array([1.5, 1.5, 2.0]), device=device
    )


def test_nan_propagates_through_maximum_and_minimum(device):
    a = kg.tensor([math.nan, 1.0, 2.0], device=device)
    b = kg.tensor([0.0, math.nan, 1.0], device=device)
    assert_close(kg.maximum(a, b), [math.nan, math.nan, 2.0])
    assert_close(kg.minimum(a, b), [math.nan, math.nan, 1.0])
    assert_close(kg.relu(a), [math.nan, 1.0, 2.0])
    assert_close(a.isnan(), [True, False, False])


def test_maximum_splits_gradient_on_ties(device):
    a = kg.tensor([1.0, 2.0, 3.0], requires_grad=True, device=device)
    b = kg.tensor([1.0, 1.0, 4.0], requires_grad=True, device=device)
    kg.maximum(a, b).sum().backward()
    assert_close(a.grad, [0.5, 1.0, 0.0])
    assert_close(b.grad, [0.5, 0.0, 1.0])


def test_where_values_and_gradient(device):
    condition = np.array([[True, False, True]])
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = np.array([-1.0, -2.0, -3.0])
    c = kg.tensor(condition, device=device)
    assert_close(
        kg.where(c, kg.tensor(a, device=device), kg.tensor(b, device=device)),
        np.where(condition, a, b),
    )
    assert_close(kg.where(c, 1.0, 0.0), np.where(condition, 1.0, 0.0))
    check_grad(lambda x, y: kg.where(c, x, y), a, b, device=device)
    # A non-bool condition means "non-zero".
    assert_close(kg.where(kg.tensor([0, 3], device=device), 1, 2), [2, 1])


def test_clamp_values_and_gradient(device):
    values = np.array([-2.0, -0.5, 0.3, 0.9, 2.0])
    t = kg.tensor(values, device=device)
    assert_close(t.clamp(-1, 1), np.clip(values, -1, 1))
    assert_close(t.clamp(min=0), np.maximum(values, 0))
    assert_close(t.clamp(max=0), np.minimum(values, 0))
    assert_close(kg.tensor([5, -5], device=device).clamp(0, 3), [3, 0])
    check_grad(lambda x: x.clamp(-1, 1), values, device=device)
    with pytest.raises(ValueError, match="at least one"):
        t.clamp()


def test_clamp_with_min_above_max_gives_max(device):
    """`x.clip(3, 0)` gave 3 below 3 and 0 above 0; PyTorch and NumPy compute
    min(max(x, 3), 0), so the upper bound wins everywhere."""
    values = np.arange(5.0)
    assert_close(kg.tensor(values, device=device).clip(3, 0), np.clip(values, 3, 0))
    assert_close(kg.arange(5, device=device).clamp(3, 0), [0, 0, 0, 0, 0])
    # A NaN input or bound gives NaN (PyTorch 2.13: clamp(nan, 0, 2) = nan,
    # clamp(1, min=nan) = nan).
    assert_close(kg.tensor([math.nan, 1.0], device=device).clamp(0, 2), [math.nan, 1.0])
    assert_close(kg.tensor([1.0], device=device).clamp(min=math.nan), [math.nan])
    # Gradients as PyTorch 2.13 gives them: with min > max all of it goes to max.
    x = kg.tensor(values, requires_grad=True, device=device)
    low = kg.full((5,), 3.0, requires_grad=True, device=device)
    high = kg.zeros(5, requires_grad=True, device=device)
    kg.clamp(x, low, high).sum().backward()
    assert_close(x.grad, [0.0] * 5)
    assert_close(low.grad, [0.0] * 5)
    assert_close(high.grad, [1.0] * 5)


def test_clamp_with_tensor_bounds(device):
    values = np.array([[0.0, 5.0], [-5.0, 2.0]])
    low = np.array([1.0, -1.0])
    high = np.array([[2.0], [3.0]])
    result = kg.tensor(values, device=device).clamp(
        kg.tensor(low, device=device), kg.tensor(high, device=device)
    )
    assert_close(result, np.minimum(np.maximum(values, low), high))
    check_grad(
        lambda x, lo: x.clamp(lo, 10.0), np.array([[0.5, 5.0], [-5.0, 2.0]]), low, device=device
    )


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "gelu"])
def test_fused_activation_gradients_are_twice_differentiable(name, device):
    fn = UNARY[name][0]
    values = np.array([-1.5, 0.5, 2.0])

    def first_derivative(points):
        x = kg.tensor(points, dtype=kg.float64, requires_grad=True, device=device)
        fn(x).sum().backward()
        return x.grad.cpu().numpy()

    x = kg.tensor(values, dtype=kg.float64, requires_grad=True, device=device)
    fn(x).sum().backward(create_graph=True)
    grad = x.grad
    assert grad.requires_grad
    x.grad = None
    grad.sum().backward()
    eps = 1e-5
    numeric = (first_derivative(values + eps) - first_derivative(values - eps)) / (2 * eps)
    assert_close(x.grad, numeric, rtol=1e-4, atol=1e-6)


def test_relu_gradient_fused_kernel(device):
    t = kg.tensor([-1.0, 0.0, 2.0], requires_grad=True, device=device)
    t.relu().sum().backward()
    assert_close(t.grad, [0.0, 0.0, 1.0])


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (kg.int32, kg.int64, kg.int64),
        (kg.int64, kg.float32, kg.float32),
        (kg.float32, kg.float64, kg.float64),
        (kg.bool, kg.int32, kg.int32),
        (kg.bool, kg.float32, kg.float32),
    ],
)
def test_binary_dtype_promotion(left, right, expected, device):
    a = kg.ones(2, dtype=left, device=device)
    b = kg.ones(2, dtype=right, device=device)
    assert (a + b).dtype == expected
    assert (b * a).dtype == expected


def test_python_scalars_are_weak(device):
    f32 = kg.ones(2, device=device)
    i32 = kg.ones(2, dtype=kg.int32, device=device)
    assert (f32 * 2).dtype == kg.float32
    assert (f32 * 2.5).dtype == kg.float32
    assert (i32 + 1).dtype == kg.int32
    assert (i32 * 0.5).dtype == kg.float32
    assert (i32 / 2).dtype == kg.float32
    assert_close(i32 / 2, [0.5, 0.5])
    assert (kg.tensor([True], device=device) + 1).dtype == kg.int64


def test_unary_float_ops_promote_integers(device):
    t = kg.tensor([1, 4], device=device)
    assert t.sqrt().dtype == kg.float32
    assert_close(t.sqrt(), [1.0, 2.0])
    assert (-t).dtype == kg.int64


def test_negating_bool_is_an_error(device):
    with pytest.raises(TypeError, match="logical_not"):
        -kg.tensor([True, False], device=device)


def test_float64_is_computed_in_float64(device):
    x = kg.tensor([1e-10], dtype=kg.float64, device=device)
    assert_close(x + 1.0 - 1.0, [1e-10], rtol=1e-6, atol=0)


def test_cast_roundtrip_and_gradient(device):
    values = np.array([1.7, -1.7, 0.2], dtype=np.float32)
    t = kg.tensor(values, device=device)
    assert_close(t.to(kg.int32), values.astype(np.int32))
    assert_close(t.to(kg.bool), values.astype(bool))
    x = kg.tensor(values, requires_grad=True, device=device)
    (x.to(kg.float64) * 3).sum().backward()
    assert x.grad.dtype == kg.float32
    assert_close(x.grad, [3.0, 3.0, 3.0])


def test_special_values(device):
    t = kg.tensor([0.0, -1.0, math.inf, -math.inf], device=device)
    assert_close(t.log(), [-math.inf, math.nan, math.inf, math.nan])
    assert_close(t.exp(), [1.0, math.exp(-1), math.inf, 0.0], rtol=1e-6)
    assert_close(t.sigmoid(), [0.5, _sigmoid(-1.0), 1.0, 0.0], rtol=1e-6)
    assert_close(kg.tensor([1000.0], device=device).exp(), [math.inf])


@given(data=st.data())
def test_float64_inputs_with_layouts(data, device):
    values, t = data.draw(tensors(device, dtype=np.float64))
    assert_close(t * 2 + 1, values * 2 + 1)


@given(values=float_arrays(hnp.array_shapes(max_dims=3, max_side=4)))
def test_layout_does_not_change_results(values):
    expected = np.tanh(values.astype(np.float64)) * 2
    for layout in ("contiguous", "permuted", "strided", "offset"):
        t = tensor_with_layout(values, layout, "cpu")
        assert_close(t.tanh() * 2, expected.astype(np.float32), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum"])
@given(data=st.data())
def test_binary_gradients_on_generated_shapes_and_layouts(name, data, device):
    fn, _ = BINARY[name]
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    a_shape, b_shape = shapes.input_shapes
    a = data.draw(float_arrays(a_shape, np.float64, 0.5, 2.0))
    b = data.draw(float_arrays(b_shape, np.float64, 0.5, 2.0))
    if name == "maximum":
        # a on a 0.1 grid, b halfway between grid points: never within 0.05 of each other.
        a, b = np.round(a, 1), np.round(b, 1) + 0.05
    layout = data.draw(st.sampled_from(["contiguous", "permuted", "strided", "offset"]))
    check_grad(fn, a, b, device=device, layout=layout)


def _pow_grads(device, base, exponent, base_grad=True, exponent_grad=True):
    x = kg.tensor(base, requires_grad=base_grad, device=device)
    y = kg.tensor(exponent, requires_grad=exponent_grad, device=device)
    (x**y).sum().backward()
    return x.grad, y.grad


def test_pow_gradients_follow_pytorch_at_the_edges(device):
    """A nan gradient poisons training. The expected values are PyTorch 2.13's for the
    same expressions (computed once with torch and written here, so that CI without
    PyTorch checks them too)."""
    nan, inf = math.nan, math.inf
    # x ** y at zero and negative bases, both operands requiring grad.
    grad_x, grad_y = _pow_grads(
        device, [0.0, 0.0, 0.0, 0.0, 2.0, -2.0, -2.0], [0.0, 1.0, 2.0, -1.0, 0.0, 0.0, 2.0]
    )
    assert_close(grad_x, [0.0, 1.0, 0.0, -inf, 0.0, 0.0, -4.0])
    assert_close(grad_y, [0.0, 0.0, 0.0, -inf, 0.6931471824645996, nan, nan])
    # (-2) ** y: nan with respect to y (was 0), for a tensor or a Python base.
    _, grad_y = _pow_grads(device, [-2.0] * 3, [2.0, 0.5, 3.0], base_grad=False)
    assert_close(grad_y, [nan, nan, nan])
    y = kg.tensor([2.0, 0.5, 3.0], requires_grad=True, device=device)
    ((-2) ** y).sum().backward()
    assert_close(y.grad, [nan, nan, nan])
    # 0 ** y: -inf for negative y (was nan), 0 otherwise.
    _, grad_y = _pow_grads(device, [0.0] * 5, [-1.0, -0.5, 0.0, 0.5, 2.0], base_grad=False)
    assert_close(grad_y, [-inf, -inf, 0.0, 0.0, 0.0])
    y = kg.tensor([-1.0, -0.5, 0.0, 0.5, 2.0], requires_grad=True, device=device)
    (0**y).sum().backward()
    assert_close(y.grad, [-inf, -inf, 0.0, 0.0, 0.0])
    # x ** 0: 0 everywhere (was nan at x = 0), for a Python or a tensor exponent.
    x = kg.tensor([0.0, 2.0, -1.0], requires_grad=True, device=device)
    (x**0.0).sum().backward()
    assert_close(x.grad, [0.0, 0.0, 0.0])
    x = kg.tensor([0.0, 1.0], requires_grad=True, device=device)
    (x ** kg.tensor(0.0, device=device)).sum().backward()
    assert_close(x.grad, [0.0, 0.0])
    # Unchanged elsewhere: x ** 0.5 and x ** -1 at 0 and below.
    x = kg.tensor([0.0, -2.0], requires_grad=True, device=device)
    (x**0.5).sum().backward()
    assert_close(x.grad, [inf, nan])
    x = kg.tensor([0.0, -2.0], requires_grad=True, device=device)
    (x**-1.0).sum().backward()
    assert_close(x.grad, [-inf, -0.25])


def test_pow_second_derivative_at_zero(device):
    x = kg.tensor([0.0, 1.0], dtype=kg.float64, requires_grad=True, device=device)
    (x**2).sum().backward(create_graph=True)
    grad = x.grad
    x.grad = None
    grad.sum().backward()
    assert_close(x.grad, [2.0, 2.0])  # PyTorch 2.13: [2.0, 2.0]


def test_integer_pow_follows_pytorch(device):
    """Integer tensors: a negative Python exponent raises (PyTorch: "Integers to negative
    integer powers are not allowed."); a negative exponent *tensor* gives PyTorch's
    values (1 for a base of 1, +-1 for -1, else 0; 0 ** -1 was INT64_MIN here)."""
    with pytest.raises(ValueError, match="pow: integers to negative integer powers"):
        kg.tensor([2], device=device) ** -1
    with pytest.raises(kg.errors.ArgumentError, match="int32"):
        kg.tensor([2], dtype=kg.int32, device=device) ** -2
    assert_close(kg.tensor([2], device=device) ** -1.0, [0.5])
    base = kg.tensor([1, -1, 2, 0, -2, -1, 3], device=device)
    exponent = kg.tensor([-1, -1, -1, 0, -3, -2, 2], device=device)
    result = base**exponent
    assert result.dtype == kg.int64
    assert_close(result, [1, -1, 0, 1, 0, 1, 9])  # PyTorch 2.13, same expression
    assert_close(kg.tensor([0], device=device) ** kg.tensor([-1], device=device), [0])
    assert_close(2 ** kg.tensor([-1, 2], device=device), [0, 4])


def test_integer_division_by_zero_raises(device):
    """`kg.tensor([5]) // 0` returned 0. PyTorch 2.13 raises `RuntimeError:
    ZeroDivisionError` for integer floor division and remainder by zero on the CPU."""
    numbers = kg.tensor([5, -5], device=device)
    for divide in (
        lambda: numbers // 0,
        lambda: numbers % 0,
        lambda: numbers // kg.tensor([1, 0], device=device),
        lambda: numbers % kg.tensor([0, 2], device=device),
        lambda: 7 // kg.tensor([0], device=device),
    ):
        with pytest.raises(RuntimeError, match="integer division by zero"):
            divide()
    with pytest.raises(ZeroDivisionError, match="floor_divide"):
        numbers.to(kg.int32) // 0
    assert_close(numbers // kg.tensor([2, 3], device=device), [2, -2])
    # Floats give inf and nan, as in PyTorch 2.13: [inf, -inf, nan] and [nan] * 3.
    floats = kg.tensor([5.0, -5.0, 0.0], device=device)
    assert_close(floats // 0, [math.inf, -math.inf, math.nan])
    assert_close(floats % 0, [math.nan] * 3)


# --- regressions found by the fuzz campaign (tests/fuzz) -------------------------------------
def test_bool_minus_bool_is_refused(device):
    """PyTorch and NumPy refuse `-` between two bool tensors; it returned a bool."""
    masks = kg.tensor([True, False], device=device)
    with pytest.raises(kg.errors.DTypeError, match=r"sub is not defined for bool.*a \^ b"):
        masks - masks
    with pytest.raises(TypeError, match="sub"):
        masks - True
    assert_close(masks - 1, [0, -1])  # an int operand promotes: allowed


def test_clamp_of_bool_and_integer_tensors(device):
    """A bool tensor with one bound leaked NumPy's `Invalid integer data type 'b'`, and
    the missing bound was chosen for the input's dtype, not the result's:
    `kg.tensor(False).clamp(min=2)` gave 1 (PyTorch 2.13: 2)."""
    masks = kg.tensor([True, False], device=device)
    assert_close(masks.clamp(min=False), [True, False])
    assert_close(masks.clamp(max=0.5), [0.5, 0.0])
    assert kg.tensor(False, device=device).clamp(min=2).item() == 2
    assert_close(kg.tensor([1, 5], device=device).clamp(max=2.5), [1.0, 2.5])


def test_inplace_clamp_checks_the_result_dtype(device):
    """`int_tensor.clamp_(float_tensor)` truncated silently; PyTorch refuses a float
    result in place in an integer tensor, as add_ does here."""
    numbers = kg.tensor([0, 5], dtype=kg.int32, device=device)
    with pytest.raises(kg.errors.DTypeError, match=r"clamp_: the result has dtype kg\.float32"):
        numbers.clamp_(kg.tensor([0.5, 0.5], device=device))
    with pytest.raises(kg.ShapeError, match="clamp_"):
        numbers.clamp_(kg.zeros(2, 2, dtype=kg.int32, device=device))
    numbers.clamp_(1, 3)
    assert_close(numbers, [1, 3])


def test_python_numbers_that_do_not_fit_an_integer_dtype_are_refused(device):
    """`int32.fill_(inf)`, `kg.full(..., nan, dtype=int64)` and `int32 + 2**40` leaked
    OverflowError / ValueError from the backend's conversion. PyTorch 2.13 raises "value
    cannot be converted to type int without overflow" for the fills."""
    numbers = kg.zeros(2, dtype=kg.int32, device=device)
    with pytest.raises(kg.errors.ArgumentError, match="fill_: the value inf cannot"):
        numbers.fill_(math.inf)
    with pytest.raises(ValueError, match=r"fill_: the value 1099511627776 .* without overflow"):
        numbers.fill_(2**40)
    with pytest.raises(ValueError, match="full: the value nan cannot be converted"):
        kg.full((2,), math.nan, dtype=kg.int64, device=device)
    with pytest.raises(ValueError, match=r"add: .* without overflow"):
        numbers + 2**40
    with pytest.raises(ValueError, match=r"x\.double\(\)"):
        kg.tensor([1], device=device) + 2**70
    with pytest.raises(ValueError, match="indexing \\(assignment\\): the value nan"):
        numbers[0:1] = math.nan
    numbers.fill_(2.7)  # truncated, as PyTorch's fill_(2.7) of an int tensor gives 2
    assert_close(numbers, [2, 2])
