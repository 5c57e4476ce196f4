"""``kg.custom_vjp``: kernels with a hand-written backward join autograd."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import BackwardError, ShapeError
from tests.helpers import assert_close, check_grad


@kg.kernel
def scaled_cube_kernel(out, x, scale):
    i = kg.index()
    v = x[i]
    out[i] = scale * v * v * v


@kg.kernel
def scaled_cube_grad_kernel(grad_x, grad_out, x, scale):
    i = kg.index()
    v = x[i]
    grad_x[i] = 3.0 * scale * v * v * grad_out[i]


@kg.custom_vjp
def scaled_cube(x, scale):
    out = kg.empty_like(x)
    scaled_cube_kernel(out, x.contiguous(), scale, ndrange=x.numel())
    return out


@scaled_cube.defvjp
def scaled_cube_vjp(grad_output, output, x, scale):
    grad_x = kg.empty_like(x)
    scaled_cube_grad_kernel(
        grad_x, grad_output.contiguous(), x.detach().contiguous(), scale, ndrange=x.numel()
    )
    return grad_x, None


@kg.custom_vjp
def split_signs(x):
    positive = x.relu()
    return positive, x - positive


@split_signs.defvjp
def split_signs_vjp(grads, outputs, x):
    grad_positive, grad_negative = grads
    mask = (x > 0).to(x.dtype)
    total = kg.zeros_like(x)
    if grad_positive is not None:
        total = total + grad_positive * mask
    if grad_negative is not None:
        total = total + grad_negative * (1 - mask)
    return (total,)


def test_kernel_with_custom_backward_passes_a_gradient_check(device):
    x = np.random.default_rng(0).uniform(-2, 2, (3, 4))
    check_grad(lambda t: scaled_cube(t, 0.5), x, device=device)
    check_grad(lambda t: scaled_cube(t, 2.0) * t, x, device=device, layout="permuted")


def test_forward_value_and_no_recording_without_grad(device):
    x = kg.tensor([1.0, -2.0], device=device)
    out = scaled_cube(x, 2.0)
    assert_close(out, [2.0, -16.0])
    assert not out.requires_grad


def test_tuple_outputs_each_get_a_node(device):
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (5,))
    x[np.abs(x) < 0.05] = 0.5
    check_grad(lambda t: split_signs(t)[0] * 3 + split_signs(t)[1], x, device=device)
    check_grad(lambda t: split_signs(t)[1], x, device=device)


def test_missing_backward_is_an_error_at_call_time():
    @kg.custom_vjp
    def no_backward(x):
        return x * 2

    with pytest.raises(BackwardError, match=r"no backward.*defvjp"):
        no_backward(kg.ones(2, requires_grad=True))
    assert no_backward(kg.ones(2)).tolist() == [2.0, 2.0]


def test_backward_results_are_checked():
    @kg.custom_vjp
    def bad_count(x, y):
        return x + y

    bad_count.defvjp(lambda g, out, x, y: (g,))
    x = kg.ones(2, requires_grad=True)
    with pytest.raises(BackwardError, match="returned 1 gradient"):
        bad_count(x, kg.ones(2)).sum().backward()

    @kg.custom_vjp
    def bad_shape(x):
        return x * 1

    bad_shape.defvjp(lambda g, out, x: (g.sum(),))
    x = kg.ones(3, requires_grad=True)
    with pytest.raises(ShapeError, match=r"shape \(\) for argument 0"):
        bad_shape(x).sum().backward()


def test_returning_an_input_is_refused():
    @kg.custom_vjp
    def identity(x):
        return x

    identity.defvjp(lambda g, out, x: (g,))
    with pytest.raises(ValueError, match="must return new tensors"):
        identity(kg.ones(2, requires_grad=True))
