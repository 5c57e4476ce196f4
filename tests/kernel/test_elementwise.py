"""``@kg.elementwise``: one fused op, broadcasting, dtypes and automatic gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernelgrad as kg
from kernelgrad.errors import BackwardError, KernelError
from tests.helpers import as_numpy, assert_close, check_grad, tensors


@kg.elementwise
def soft_clip(x, limit):
    return limit * kg.tanh(x / limit)


@kg.elementwise
def gelu_tanh(x):
    return 0.5 * x * (1 + kg.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


@kg.elementwise
def mixture(x, y):
    blend = kg.sigmoid(x - y)
    return kg.where(x > y, blend * kg.exp(-y * y), kg.log1p(x * x) + kg.maximum(x, 0.5 * y))


@kg.elementwise
def with_math(x, y):
    return math.sqrt(x * x + y * y + 1.0) + abs(x) * min(x, y) - max(y, 0.0) ** 2


@kg.elementwise
def polar(x, y):
    radius = kg.sqrt(x * x + y * y)
    return radius, kg.exp(-radius) * x


def _composite_soft_clip(x, limit):
    return (x / limit).tanh() * limit


def _composite_gelu(x):
    return x * 0.5 * ((x + x * x * x * 0.044715) * 0.7978845608028654).tanh().add(1)


def test_soft_clip_matches_composite_ops_with_broadcasting(device):
    x = kg.tensor(np.linspace(-5, 5, 12, dtype=np.float32).reshape(3, 4), device=device)
    limit = kg.tensor(np.array([[1.0], [2.0], [3.0]], dtype=np.float32), device=device)
    assert_close(soft_clip(x, limit), _composite_soft_clip(x, limit), rtol=1e-5, atol=1e-6)
    assert_close(soft_clip(x, 2.0), _composite_soft_clip(x, 2.0), rtol=1e-5, atol=1e-6)
    assert soft_clip(x, 2.0).dtype is kg.float32
    double = soft_clip(x.double(), 2.0)  # computed in float64, not only stored as float64
    assert double.dtype is kg.float64
    values = np.linspace(-5, 5, 12, dtype=np.float32).astype(np.float64).reshape(3, 4)
    assert_close(double, 2.0 * np.tanh(values / 2.0), rtol=1e-14, atol=1e-15)


def test_one_kernel_per_call(device, monkeypatch):
    x = kg.randn(4, 5, device=device)
    backend = x._backend
    calls = []
    original = backend.elementwise
    monkeypatch.setattr(
        backend, "elementwise", lambda *a, **k: calls.append(a[0].name) or original(*a, **k)
    )
    gelu_tanh(x)
    assert calls == ["ew_gelu_tanh"]


@given(data=st.data())
def test_gelu_and_mixture_against_composites(device, data):
    values, x = data.draw(tensors(device, low=-3, high=3, max_dims=3, max_side=4))
    assert_close(gelu_tanh(x), _composite_gelu(x), rtol=1e-4, atol=1e-5)
    y_values = np.flip(values).copy() * 0.5
    y = kg.tensor(y_values, device=device)
    xd, yd = values.astype(np.float64), y_values.astype(np.float64)
    blend = 1 / (1 + np.exp(-(xd - yd)))
    expected = np.where(
        xd > yd, blend * np.exp(-yd * yd), np.log1p(xd * xd) + np.maximum(xd, 0.5 * yd)
    )
    assert_close(mixture(x, y), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "fn, composite",
    [
        (soft_clip, None),
        (gelu_tanh, None),
        (mixture, None),
        (with_math, None),
    ],
)
def test_gradients_against_central_differences(device, fn, composite):
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (3, 4))
    if fn.nin == 1:
        check_grad(fn, x, device=device)
    elif fn is soft_clip:
        check_grad(fn, x, rng.uniform(1, 2, (3, 1)), device=device)
    else:
        y = rng.uniform(-2, 2, (4,))
        y[np.abs(y) < 0.05] = 0.3  # keep away from kinks
        check_grad(fn, x + 0.013, y, device=device)


def test_gradient_is_one_fused_kernel(device, monkeypatch):
    x = kg.randn(3, 4, device=device, requires_grad=True)
    y = kg.randn(4, device=device, requires_grad=True)
    out = mixture(x, y)
    backend = x._backend
    names = []
    original = backend.elementwise
    monkeypatch.setattr(
        backend, "elementwise", lambda *a, **k: names.append(a[0].name) or original(*a, **k)
    )
    out.backward(kg.ones(3, 4, device=device))
    grad_kernels = [n for n in names if n.startswith("ew_mixture_grad")]
    assert grad_kernels == ["ew_mixture_grad0_1"]


def test_multiple_outputs_and_their_gradients(device):
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0.5, 2, (2, 3)), rng.uniform(0.5, 2, (3,))
    radius, damped = polar(kg.tensor(x, device=device), kg.tensor(y, device=device))
    expected_radius = np.sqrt(x * x + y * y)
    assert_close(radius, expected_radius, rtol=1e-5)
    assert_close(damped, np.exp(-expected_radius) * x, rtol=1e-5)
    check_grad(lambda a, b: polar(a, b)[0] * 2 + polar(a, b)[1], x, y, device=device)
    check_grad(lambda a, b: polar(a, b)[1], x, y, device=device)


def test_double_backward(device):
    points = np.array([0.3, -1.2, 2.0])
    x = kg.tensor(points, device=device, requires_grad=True)
    gelu_tanh(x).sum().backward(create_graph=True, retain_graph=True)
    first = x.grad
    x.grad = None
    first.sum().backward()

    def gelu(v):
        return 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))

    h = 1e-4
    expected = (gelu(points + h) - 2 * gelu(points) + gelu(points - h)) / h**2
    assert_close(x.grad, expected, rtol=1e-5, atol=1e-6)


def test_dtypes_follow_the_computation(device):
    @kg.elementwise
    def inside(x, low, high):
        return (x >= low) & (x <= high)

    @kg.elementwise
    def twice(n):
        return n * 2 + 1

    x = kg.tensor([0.5, 1.5, -1.0], device=device)
    mask = inside(x, 0.0, 1.0)
    assert mask.dtype is kg.bool
    assert as_numpy(mask).tolist() == [True, False, False]
    counts = twice(kg.tensor([1, 2], dtype=kg.int32, device=device))
    assert counts.dtype is kg.int32
    assert as_numpy(counts).tolist() == [3, 5]
    halves = twice(kg.tensor([1.5], device=device))
    assert halves.dtype is kg.float32 and as_numpy(halves).tolist() == [4.0]

    @kg.elementwise(dtype=kg.float64)
    def as_double(x):
        return x + 1

    doubled = as_double(kg.tensor([1, 2**40 + 1], dtype=kg.int64, device=device))
    assert doubled.dtype is kg.float64
    assert as_numpy(doubled).tolist() == [2.0, 2.0**40 + 2]  # exact: no float32 on the way


# --- functions that cannot be traced -----------------------------------------------------------
@kg.elementwise
def leaky_step(x):
    if x > 0:
        return x
    return 0.1 * x


def test_untraceable_function_still_runs(device):
    assert not leaky_step.differentiable
    assert "line" in leaky_step.trace_error and "if x > 0" in leaky_step.trace_error
    out = leaky_step(kg.tensor([2.0, -3.0], device=device))
    assert_close(out, [2.0, -0.3])


def test_untraceable_function_asked_for_a_gradient(device):
    x = kg.tensor([2.0, -3.0], device=device, requires_grad=True)
    y = leaky_step(x).sum()
    with pytest.raises(BackwardError, match=r"not differentiable.*if x > 0.*defvjp"):
        y.backward()


def test_untraceable_function_with_a_backward(device):
    @kg.elementwise
    def clipped(x, limit):
        if x > limit:
            return limit
        elif x < -limit:
            return -limit
        return x

    @clipped.defvjp
    def clipped_vjp(x, limit, grad):
        return kg.where(abs(x) < limit, grad, 0.0), 0.0

    assert clipped.differentiable
    rng = np.random.default_rng(2)
    x = rng.uniform(-3, 3, (4, 3))
    x[np.abs(np.abs(x) - 1.5) < 0.05] = 0.2
    check_grad(lambda t: clipped(t, 1.5), x, device=device)


def test_defvjp_signature_is_checked():
    with pytest.raises(TypeError, match="must take 2 inputs and 1 output"):
        soft_clip.defvjp(lambda x, g: g)


def test_unsupported_names_are_reported():
    table = np.zeros(3)

    with pytest.raises(KernelError, match="uses 'table'"):

        @kg.elementwise
        def uses_table(x):
            if x > 0:
                return table[0]
            return x


def test_wrong_argument_count():
    with pytest.raises(TypeError, match="takes 2 arguments"):
        soft_clip(kg.zeros(2))
