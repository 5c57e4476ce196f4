"""``kg.autograd.Function`` (PyTorch's ``torch.autograd.Function``): forward and backward
written by hand, ctx.save_for_backward / saved_tensors / needs_input_grad /
mark_non_differentiable, several outputs, non-tensor arguments, the newer
``setup_context`` form, double backward, and the errors."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import BackwardError, InplaceError, ShapeError
from tests.helpers import assert_close, check_grad


class Legendre3(kg.autograd.Function):
    """The tutorial's P3(x) = (5x^3 - 3x) / 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * (5 * x**3 - 3 * x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * x**2 - 1)


class ScaleShift(kg.autograd.Function):
    """Two outputs, a non-tensor argument, and a record of each backward call."""

    calls: ClassVar[list] = []

    @staticmethod
    def forward(ctx, x, scale, shift):
        ctx.scale = scale
        ctx.seen = ctx.needs_input_grad
        return x * scale + shift, x * 2.0

    @staticmethod
    def backward(ctx, grad_scaled, grad_doubled):
        ScaleShift.calls.append((grad_scaled, grad_doubled))
        return grad_scaled * ctx.scale + grad_doubled * 2.0, None, grad_scaled


def test_a_function_gives_its_values_and_hand_written_gradient(device):
    values = np.array([-1.5, -0.2, 0.3, 2.0])
    x = kg.tensor(values, dtype=kg.float32, device=device, requires_grad=True)
    y = Legendre3.apply(x)
    assert_close(y, 0.5 * (5 * values**3 - 3 * values), rtol=1e-5)
    y.sum().backward()
    assert_close(x.grad, 1.5 * (5 * values**2 - 1), rtol=1e-5)
    assert y.grad_fn.name() == "Legendre3Backward0"
    check_grad(lambda t: Legendre3.apply(t * 0.5), values, device=device)


def test_several_outputs_get_one_backward_call_with_every_gradient(device):
    ScaleShift.calls.clear()
    x = kg.tensor([1.0, 2.0], device=device, requires_grad=True)
    shift = kg.tensor([0.5, 0.5], device=device, requires_grad=True)
    scaled, doubled = ScaleShift.apply(x, 3.0, shift)
    (scaled.sum() + (doubled * 4).sum()).backward()
    assert len(ScaleShift.calls) == 1
    assert_close(ScaleShift.calls[0][0], [1.0, 1.0])
    assert_close(ScaleShift.calls[0][1], [4.0, 4.0])
    assert_close(x.grad, [3 + 8, 3 + 8])
    assert_close(shift.grad, [1.0, 1.0])


def test_outputs_of_mixed_precision_keep_their_gradients_exact():
    """The outputs' gradients travel to the joint backward in the widest dtype: a float64
    output's gradient is not rounded through float32 because the first output is."""

    class Pair(kg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * 1.0, b * 1.0

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return grad_a, grad_b

    a = kg.ones(1, requires_grad=True)
    b = kg.ones(1, dtype=kg.float64, requires_grad=True)
    first, second = Pair.apply(a, b)
    (first.sum() + (second * (1 + 1e-12)).sum()).backward()
    assert b.grad.dtype is kg.float64 and a.grad.dtype is kg.float32
    assert b.grad.item() - 1 == pytest.approx(1e-12, rel=1e-3)


def test_unused_outputs_get_zeros_or_none(device):
    ScaleShift.calls.clear()
    x = kg.tensor([1.0, 2.0], device=device, requires_grad=True)
    scaled, _ = ScaleShift.apply(x, 3.0, kg.zeros(2, device=device))
    scaled.sum().backward()
    assert_close(ScaleShift.calls[0][1], [0.0, 0.0])  # materialised as zeros
    assert_close(x.grad, [3.0, 3.0])

    class Lazy(kg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1.0, x * 2.0

        @staticmethod
        def backward(ctx, first, second):
            assert second is None
            return first

    x.grad = None
    Lazy.apply(x)[0].sum().backward()
    assert_close(x.grad, [1.0, 1.0])


def test_needs_input_grad_follows_the_arguments_and_grad_mode(device):
    x = kg.ones(2, device=device, requires_grad=True)
    constant = kg.ones(2, device=device)
    ScaleShift.calls.clear()
    scaled, _ = ScaleShift.apply(x, 2.0, constant)
    assert scaled.grad_fn is not None
    seen = []

    class Probe(kg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            seen.append(ctx.needs_input_grad)
            return a + b

        @staticmethod
        def backward(ctx, grad):
            return grad, grad, None

    Probe.apply(x, constant, 1.0)
    with kg.no_grad():
        out = Probe.apply(x, constant, 1.0)
    assert seen == [(True, False, False), (False, False, False)]
    assert not out.requires_grad


def test_non_differentiable_outputs_and_integer_outputs_get_no_graph(device):
    class MaxWithIndex(kg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            index = x.argmax()
            mask = (x > 0).to(kg.float32)
            ctx.mark_non_differentiable(mask)
            ctx.save_for_backward(x, index)
            return x.max(), index, mask

        @staticmethod
        def backward(ctx, grad, grad_index, grad_mask):
            x, index = ctx.saved_tensors
            # as in PyTorch, outputs without a gradient get zeros
            assert grad_index.cpu().tolist() == 0 and grad_mask.cpu().tolist() == [0.0] * 3
            one_hot = (kg.arange(x.shape[0], device=x.device) == index).to(x.dtype)
            return grad * one_hot

    x = kg.tensor([1.0, 3.0, 2.0], device=device, requires_grad=True)
    top, index, mask = MaxWithIndex.apply(x)
    assert top.requires_grad and not index.requires_grad and not mask.requires_grad
    top.backward()
    assert_close(x.grad, [0.0, 1.0, 0.0])


def test_the_setup_context_form():
    class Square(kg.autograd.Function):
        @staticmethod
        def forward(x, power):
            return x**power

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.power = inputs[1]

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * ctx.power * x ** (ctx.power - 1), None

    x = kg.tensor([3.0], requires_grad=True)
    Square.apply(x, 2).backward()
    assert_close(x.grad, [6.0])


def test_second_derivatives_flow_through_a_backward_written_in_tensor_ops():
    x = kg.tensor([0.5, -1.0], requires_grad=True)
    (grad,) = _grad(Legendre3.apply(x).sum(), x)
    grad.sum().backward()
    assert_close(x.grad, 15 * np.array([0.5, -1.0]), rtol=1e-6)  # d2/dx2 P3 = 15x

    class Once(Legendre3):
        @staticmethod
        @kg.autograd.once_differentiable
        def backward(ctx, grad_output):
            return Legendre3.backward(ctx, grad_output)

    with pytest.raises(BackwardError, match="once_differentiable"):
        Once.apply(x).sum().backward(create_graph=True)


def _grad(output, x):
    output.backward(create_graph=True)
    grad = x.grad
    x.grad = None
    return (grad,)


def test_returning_an_input_unchanged_gives_a_new_tensor_with_the_backward():
    class Identity(kg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 5

    x = kg.ones(2, requires_grad=True)
    y = Identity.apply(x)
    assert y is not x
    y.sum().backward()
    assert_close(x.grad, [5.0, 5.0])


def test_errors_name_the_function_and_the_fix():
    x = kg.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"Legendre3.apply"):
        Legendre3(x)

    class TooMany(kg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad, grad

    with pytest.raises(BackwardError, match=r"TooMany\.backward returned 2 gradient"):
        TooMany.apply(x).sum().backward()

    class WrongShape(TooMany):
        @staticmethod
        def backward(ctx, grad):
            return kg.ones(3)

    with pytest.raises(ShapeError, match=r"shape \(3,\) for argument 0"):
        WrongShape.apply(x).sum().backward()

    class GradientForANumber(TooMany):
        @staticmethod
        def forward(ctx, x, scale):
            return x * scale

        @staticmethod
        def backward(ctx, grad):
            return grad * 2.0, grad

    with pytest.raises(BackwardError, match=r"argument 1, which is a float"):
        GradientForANumber.apply(x, 2.0).sum().backward()

    class SavesANumber(TooMany):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 2.0)
            return x * 2

    with pytest.raises(TypeError, match=r"save_for_backward takes tensors"):
        SavesANumber.apply(x)

    class NoBackward(kg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    with pytest.raises(BackwardError, match="defines no backward"):
        NoBackward.apply(x)
    assert NoBackward.apply(kg.ones(2)).tolist() == [2.0, 2.0]  # fine without gradients

    a = x * 1.0
    y = Legendre3.apply(a)
    a.add_(1.0)
    with pytest.raises(InplaceError, match="Legendre3"):
        y.sum().backward()


@pytest.mark.torch
def test_the_same_function_class_matches_pytorch():
    torch = pytest.importorskip("torch")

    def define(library):
        class Clip(library.autograd.Function):
            @staticmethod
            def forward(ctx, x, low, high):
                ctx.save_for_backward(x)
                ctx.bounds = (low, high)
                return x.clamp(low, high), x * x

            @staticmethod
            def backward(ctx, grad, grad_square):
                (x,) = ctx.saved_tensors
                low, high = ctx.bounds
                inside = ((x > low) & (x < high)).to(x.dtype)
                return grad * inside + grad_square * 2 * x, None, None

        return Clip

    values = np.array([-2.0, -0.5, 0.25, 3.0], dtype=np.float32)
    results = []
    for library, make in ((kg, kg.tensor), (torch, torch.tensor)):
        x = make(values, requires_grad=True)
        clipped, square = define(library).apply(x, -1.0, 1.0)
        (clipped * 3 + square).sum().backward()
        results.append((np.asarray(clipped.detach().numpy()), np.asarray(x.grad.numpy())))
    np.testing.assert_allclose(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1])
