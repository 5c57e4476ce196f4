"""Transposed convolution (1-d, 2-d, 3-d): against a NumPy scatter reference (every
input element adds its weighted kernel into the output) on every backend, central
differences, and PyTorch's layers with the same weights where PyTorch is installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, ShapeError
from tests.helpers import assert_close, check_grad

RNG = np.random.default_rng(3)


def _conv_transpose_reference(x, w, b, stride, padding, output_padding, groups, dilation):
    """The scatter definition over any number of spatial dims: input position i, through
    kernel tap t, adds into output position i * stride + t * dilation - padding."""
    n, c_in, *size = x.shape
    per_group_in, per_group_out, *kernel = c_in // groups, *w.shape[1:]
    full = np.zeros(
        (n, per_group_out * groups)
        + tuple(
            (i - 1) * s + d * (k - 1) + 1 + e
            for i, s, d, k, e in zip(size, stride, dilation, kernel, output_padding)
        )
    )
    for g in range(groups):
        inputs = slice(g * per_group_in, (g + 1) * per_group_in)
        outputs = slice(g * per_group_out, (g + 1) * per_group_out)
        for tap in np.ndindex(*kernel):
            part = np.einsum("ni...,io->no...", x[:, inputs], w[(inputs, slice(None)) + tap])
            target = tuple(
                slice(t * d, t * d + (i - 1) * s + 1, s)
                for t, d, i, s in zip(tap, dilation, size, stride)
            )
            full[(slice(None), outputs) + target] += part
    crop = tuple(slice(p, f - p) for p, f in zip(padding, full.shape[2:]))
    out = full[(slice(None), slice(None)) + crop]
    return out + (b.reshape((1, -1) + (1,) * len(size)) if b is not None else 0)


CASES = [
    {
        "stride": (1, 1),
        "padding": (0, 0),
        "output_padding": (0, 0),
        "groups": 1,
        "dilation": (1, 1),
    },
    {
        "stride": (2, 2),
        "padding": (1, 0),
        "output_padding": (1, 0),
        "groups": 1,
        "dilation": (1, 1),
    },
    {
        "stride": (2, 1),
        "padding": (0, 1),
        "output_padding": (0, 0),
        "groups": 2,
        "dilation": (1, 2),
    },
]


@pytest.mark.parametrize("case", CASES)
def test_conv_transpose2d_matches_the_scatter_reference(case, device, simulated):
    if simulated and case["groups"] == 1 and case["stride"] == (1, 1):
        pytest.skip("the simulated pass runs the strided cases (each convolution is slow there)")
    x = RNG.standard_normal((2, 4, 3, 3))
    w = RNG.standard_normal((4, 3 if case["groups"] == 1 else 2, 2, 3))
    b = RNG.standard_normal(w.shape[1] * case["groups"])
    got = F.conv_transpose2d(
        kg.tensor(x, device=device), kg.tensor(w, device=device), kg.tensor(b, device=device),
        **case,
    )  # fmt: skip
    assert_close(got, _conv_transpose_reference(x, w, b, **case), rtol=1e-9, atol=1e-9)
    weight = kg.tensor(w, device=device)
    check_grad(
        lambda a: F.conv_transpose2d(a, weight, None, **case), x[:1, :, :1, :2], device=device
    )
    if not simulated:  # the weight's gradient (also compared with PyTorch's below)
        check_grad(lambda c: F.conv_transpose2d(kg.tensor(x[:1], device=device), c, **case), w)


def test_conv_transpose1d_and_layers(device):
    x = RNG.standard_normal((2, 2, 4))
    w = RNG.standard_normal((2, 3, 3))
    expected = _conv_transpose_reference(
        x[:, :, None], w[:, :, None], None, (1, 2), (0, 1), (0, 1), 1, (1, 1)
    )[:, :, 0]
    got = F.conv_transpose1d(
        kg.tensor(x, device=device), kg.tensor(w, device=device), stride=2, padding=1,
        output_padding=1,
    )  # fmt: skip
    assert_close(got, expected, rtol=1e-9, atol=1e-9)
    layer = kg.nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1).to(device)
    assert layer.weight.shape == (4, 2, 4, 4)
    assert layer(kg.zeros(1, 4, 5, 5, device=device)).shape == (1, 2, 10, 10)
    assert kg.nn.ConvTranspose1d(2, 4, 3)(kg.zeros(2, 5)).shape == (4, 7)  # unbatched
    with pytest.raises(ArgumentError, match="output_padding"):
        F.conv_transpose2d(kg.zeros(1, 1, 2, 2), kg.zeros(1, 1, 2, 2), output_padding=1)


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES)
def test_conv_transpose_layers_match_pytorch(case):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    out_channels = 6 if case["groups"] == 1 else 4
    theirs = torch.nn.ConvTranspose2d(4, out_channels, (2, 3), **case)
    ours = kg.nn.ConvTranspose2d(4, out_channels, (2, 3), **case)
    ours.load_state_dict({k: kg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)
    x_t, x_k = torch.tensor(x, requires_grad=True), kg.tensor(x, requires_grad=True)
    out_t, out_k = theirs(x_t), ours(x_k)
    np.testing.assert_allclose(out_k.detach().numpy(), out_t.detach().numpy(), 1e-5, 1e-5)
    (out_t * out_t).sum().backward()
    (out_k * out_k).sum().backward()
    np.testing.assert_allclose(x_k.grad.numpy(), x_t.grad.numpy(), 1e-4, 1e-4)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), 1e-4, 1e-4)
    np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), 1e-4, 1e-4)
    # PyTorch's initialisation bound for the weight of shape (in, out / groups, kh, kw)
    bound = 1 / np.sqrt(theirs.weight.shape[1] * 6)
    assert (
        float(kg.nn.ConvTranspose2d(4, out_channels, (2, 3), **case).weight.abs().amax().item())
        <= bound
    )


CASES_3D = [
    {
        "stride": (2, 1, 2),
        "padding": (1, 0, 0),
        "output_padding": (1, 0, 1),
        "groups": 1,
        "dilation": (1, 1, 1),
    },
    {
        "stride": (1, 2, 1),
        "padding": (0, 1, 1),
        "output_padding": (0, 1, 0),
        "groups": 2,
        "dilation": (2, 1, 1),
    },
]


@pytest.mark.parametrize("case", CASES_3D)
def test_conv_transpose3d_matches_the_scatter_reference(case, device, simulated):
    x = RNG.standard_normal((1 if simulated else 2, 4, 2, 2, 2))
    w = RNG.standard_normal((4, 3 if case["groups"] == 1 else 1, 2, 2, 3))
    b = RNG.standard_normal(w.shape[1] * case["groups"])
    got = F.conv_transpose3d(
        kg.tensor(x, device=device), kg.tensor(w, device=device), kg.tensor(b, device=device),
        **case,
    )  # fmt: skip
    assert_close(got, _conv_transpose_reference(x, w, b, **case), rtol=1e-9, atol=1e-9)
    if not simulated:
        weight = kg.tensor(w, device=device)
        check_grad(lambda a: F.conv_transpose3d(a, weight, None, **case), x[:1])
        check_grad(lambda c: F.conv_transpose3d(kg.tensor(x[:1]), c, **case), w)
        check_grad(lambda c: F.conv_transpose3d(kg.tensor(x[:1]), weight, c, **case), b)
        return
    # Central differences run the convolution dozens of times, slow in the simulator:
    # compare this backend's gradients with the CPU's (checked by the CPU pass).
    gradients = []
    for where in (device, "cpu"):
        tensors = [kg.tensor(a, device=where, requires_grad=True) for a in (x, w, b)]
        out = F.conv_transpose3d(*tensors, **case)
        (out * out).sum().backward()
        gradients.append([t.grad for t in tensors])
    for got, expected in zip(*gradients):
        assert_close(got, expected.numpy(), rtol=1e-9, atol=1e-9)


def test_conv_transpose3d_layer_and_checks(device):
    layer = kg.nn.ConvTranspose3d(2, 4, (2, 3, 1), stride=2, groups=2).to(device)
    assert layer.weight.shape == (2, 2, 2, 3, 1) and layer.bias.shape == (4,)
    assert layer(kg.zeros(1, 2, 3, 2, 2, device=device)).shape == (1, 4, 6, 5, 3)
    assert layer(kg.zeros(2, 3, 2, 2, device=device)).shape == (4, 6, 5, 3)  # unbatched
    sized = layer(kg.zeros(2, 3, 2, 2, device=device), output_size=(7, 6, 4))
    assert sized.shape == (4, 7, 6, 4)
    with pytest.raises(ValueError, match=r"output_size \(8, 6, 4\) is out of reach"):
        layer(kg.zeros(2, 3, 2, 2), output_size=(8, 6, 4))
    with pytest.raises(ShapeError, match=r"conv_transpose3d: the weight must be"):
        F.conv_transpose3d(kg.zeros(1, 1, 2, 2, 2), kg.zeros(1, 1, 2, 2))
    with pytest.raises(ArgumentError, match="output_padding"):
        F.conv_transpose3d(kg.zeros(1, 1, 2, 2, 2), kg.zeros(1, 1, 2, 2, 2), output_padding=1)
    with pytest.raises(ValueError, match="padding_mode"):
        kg.nn.ConvTranspose3d(1, 1, 2, padding_mode="reflect")


@pytest.mark.torch
@pytest.mark.parametrize("case", CASES_3D)
def test_conv_transpose3d_layer_matches_pytorch(case):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    out_channels = 6 if case["groups"] == 1 else 4
    theirs = torch.nn.ConvTranspose3d(4, out_channels, (2, 2, 3), **case)
    ours = kg.nn.ConvTranspose3d(4, out_channels, (2, 2, 3), **case)
    ours.load_state_dict({k: kg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((2, 4, 3, 2, 3)).astype(np.float32)
    x_t, x_k = torch.tensor(x, requires_grad=True), kg.tensor(x, requires_grad=True)
    size = list(theirs(x_t).shape)  # output_size gives back the case's output_padding
    out_t, out_k = theirs(x_t, output_size=size), ours(x_k, output_size=size)
    np.testing.assert_allclose(out_k.detach().numpy(), out_t.detach().numpy(), 1e-5, 1e-5)
    (out_t * out_t).sum().backward()
    (out_k * out_k).sum().backward()
    np.testing.assert_allclose(x_k.grad.numpy(), x_t.grad.numpy(), 1e-4, 1e-4)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), 1e-4, 1e-4)
    np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), 1e-4, 1e-4)
    bound = 1 / np.sqrt(theirs.weight.shape[1] * 12)  # PyTorch's fan-in initialisation
    fresh = kg.nn.ConvTranspose3d(4, out_channels, (2, 2, 3), **case)
    assert float(fresh.weight.abs().amax().item()) <= bound
