"""Second-order gradients through conv2d and 2-d max / average pooling, against PyTorch:
under ``create_graph=True`` their VJPs are recorded (the convolution's as the VJP of a
composite of pad, unfold windows and a batched matrix product; the poolings' as the VJP
of weighted window sums), so that a gradient penalty (WGAN-GP's critic) or MAML's inner
loop through a CNN can be differentiated again. The first-order pass keeps the
kernels. tests/compat/programs/wgan_gp.py and maml_sinusoid.py are the programs."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg

CASES = {
    "conv2d": (
        lambda t, x, w, b: t.nn.functional.conv2d(x, w, b, padding=1),
        [(2, 3, 6, 6), (4, 3, 3, 3), (4,)],
    ),
    "conv2d_strided_grouped": (
        lambda t, x, w, b: t.nn.functional.conv2d(x, w, b, stride=2, padding=1, groups=2),
        [(2, 4, 7, 7), (6, 2, 3, 3), (6,)],
    ),
    "conv2d_dilated_same": (
        lambda t, x, w, b: t.nn.functional.conv2d(x, w, b, padding="same", dilation=2),
        [(2, 3, 6, 6), (4, 3, 2, 2), (4,)],
    ),
    "conv2d_1x1_no_bias": (
        lambda t, x, w: t.nn.functional.conv2d(x, w),
        [(2, 3, 5, 5), (4, 3, 1, 1)],
    ),
    "max_pool2d": (
        lambda t, x: t.nn.functional.max_pool2d(x * x, 3, 2, 1, ceil_mode=True),
        [(2, 3, 7, 7)],
    ),
    "max_pool2d_then_relu": (
        lambda t, x: t.nn.functional.relu(t.nn.functional.max_pool2d(x * x - 1, 2)),
        [(2, 3, 6, 6)],
    ),
    "avg_pool2d": (lambda t, x: t.nn.functional.avg_pool2d(x * x, 2), [(2, 3, 6, 6)]),
    "avg_pool2d_padded": (
        lambda t, x: t.nn.functional.avg_pool2d(
            x * x, 3, 2, 1, ceil_mode=True, count_include_pad=False
        ),
        [(2, 3, 7, 7)],
    ),
}


def _first_and_second(library, f, arrays, weights):
    """The gradients of sum(weights * f(inputs)) with a graph, then the gradients of the
    sum of their squares (zeros for a bias, which they do not depend on)."""
    inputs = [library.tensor(a, requires_grad=True) for a in arrays]
    y = f(library, *inputs)
    seed = library.tensor(weights[: y.numel()].reshape(tuple(y.shape)))
    first = library.autograd.grad((y * seed).sum(), inputs, create_graph=True)
    squares = sum((g * g).sum() for g in first)
    second = library.autograd.grad(squares, inputs, allow_unused=True, materialize_grads=True)
    return [g.detach().cpu().numpy() for g in first + second]


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_second_order_gradients_match_pytorch(name):
    torch = pytest.importorskip("torch")
    f, shapes = CASES[name]
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    weights = rng.standard_normal(1000)
    expected = _first_and_second(torch, f, arrays, weights)
    got = _first_and_second(kg, f, arrays, weights)
    for ours, theirs in zip(got, expected):
        np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9)


@pytest.mark.torch
def test_a_gradient_penalty_through_a_conv_critic_matches_pytorch(device):
    """WGAN-GP's penalty: autograd.grad(critic(interpolates), interpolates,
    grad_outputs=ones, create_graph=True), gradients.view(n, -1) (contiguous, as in
    PyTorch), then the penalty's gradient with respect to the critic's weights; through
    conv2d, max and average pooling, on each device (small: the simulator is slow)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2, 6, 6)).astype("f4")
    w1 = (rng.standard_normal((3, 2, 3, 3)) * 0.3).astype("f4")
    w2 = (rng.standard_normal((1, 3, 2, 2)) * 0.3).astype("f4")

    def penalty_grads(library, options):
        weights = [library.tensor(w, requires_grad=True, **options) for w in (w1, w2)]
        interpolates = library.tensor(x, **options).requires_grad_(True)
        h = library.nn.functional.conv2d(interpolates, weights[0], stride=2, padding=1)
        h = library.nn.functional.max_pool2d(library.nn.functional.leaky_relu(h, 0.2), 2, 1)
        h = library.nn.functional.avg_pool2d(h, 2, 1, 1)
        out = library.nn.functional.conv2d(h, weights[1]).mean((1, 2, 3))
        (gradients,) = library.autograd.grad(
            outputs=out,
            inputs=interpolates,
            grad_outputs=library.ones_like(out),
            create_graph=True,
            retain_graph=True,
        )
        gradients = gradients.view(gradients.size(0), -1)
        penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
        penalty.backward()
        return [penalty.item()] + [w.grad.cpu().numpy() for w in weights]

    expected = penalty_grads(torch, {})
    got = penalty_grads(kg, {"device": device})
    for ours, theirs in zip(got, expected):
        np.testing.assert_allclose(ours, theirs, rtol=2e-4, atol=1e-6)


def test_the_first_order_pass_is_unchanged():
    """Without create_graph the kernels' gradients come back, with no graph."""
    x = kg.randn(2, 3, 6, 6, requires_grad=True)
    w = kg.randn(4, 3, 3, 3, requires_grad=True)
    out = kg.nn.functional.max_pool2d(kg.nn.functional.conv2d(x, w, padding=1), 2)
    plain = kg.autograd.grad(out.sum(), (x, w), retain_graph=True)
    graphed = kg.autograd.grad(out.sum(), (x, w), create_graph=True)
    assert not any(g.requires_grad for g in plain) and all(g.requires_grad for g in graphed)
    for a, b in zip(plain, graphed):
        np.testing.assert_allclose(a.cpu().numpy(), b.detach().cpu().numpy(), rtol=1e-5, atol=1e-5)


def test_conv2d_holds_no_reference_to_its_input():
    """Its create_graph path re-attaches the input's history to the values the forward
    pass keeps anyway (the padded copy), so an input no other operation saves is freed
    with the forward pass, as before."""
    import weakref

    a = kg.randn(2, 3, 6, 6, requires_grad=True)
    w = kg.randn(4, 3, 3, 3, requires_grad=True)
    x = a * 2.0
    watcher = weakref.ref(x)
    y = kg.nn.functional.conv2d(x, w, padding=1)
    del x
    assert watcher() is None
    (g,) = kg.autograd.grad(y.pow(2).sum(), a, create_graph=True)
    (g2,) = kg.autograd.grad(g.pow(2).sum(), w)
    assert g2.shape == w.shape


def test_an_input_changed_in_place_is_refused_under_create_graph():
    """Without padding the convolution reads its input's own memory (a conv2d output is
    stored batch innermost, as conv2d reads it): a later in-place change would make
    second-order gradients wrong, so it raises."""
    a = kg.randn(2, 3, 7, 7, requires_grad=True)
    w1 = kg.randn(4, 3, 2, 2, requires_grad=True)
    w2 = kg.randn(2, 4, 2, 2, requires_grad=True)
    x = kg.nn.functional.conv2d(a, w1)
    y = kg.nn.functional.conv2d(x, w2, stride=2)  # patch matrix: the first order is safe
    with kg.no_grad():
        x.add_(1.0)
    kg.autograd.grad(y.sum(), a, retain_graph=True)
    with pytest.raises(kg.errors.InplaceError, match="modified in place"):
        kg.autograd.grad(y.sum(), a, create_graph=True)
