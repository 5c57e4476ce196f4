"""Transposed convolution: against a NumPy scatter reference (every input element adds
its weighted kernel into the output) on every backend, central differences, and
PyTorch's layers with the same weights where PyTorch is installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError
from tests.helpers import assert_close, check_grad

RNG = np.random.default_rng(3)


def _conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation):
    n, c_in, h, width = x.shape
    per_group_in, per_group_out, kh, kw = c_in // groups, w.shape[1], w.shape[2], w.shape[3]
    out_h = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    out_w = (
        (width - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    )
    full = np.zeros((n, per_group_out * groups, out_h + 2 * padding[0] + kh * dilation[0],
                     out_w + 2 * padding[1] + kw * dilation[1]))  # fmt: skip
    for c in range(c_in):
        g = c // per_group_in
        for i in range(h):
            for j in range(width):
                for a in range(kh):
                    for bb in range(kw):
                        y, z = i * stride[0] + a * dilation[0], j * stride[1] + bb * dilation[1]
                        channels = slice(g * per_group_out, (g + 1) * per_group_out)
                        full[:, channels, y, z] += x[:, c, i, j, None] * w[c, :, a, bb]
    out = full[:, :, padding[0] : padding[0] + out_h, padding[1] : padding[1] + out_w]
    return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)


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
    assert_close(got, _conv_transpose2d(x, w, b, **case), rtol=1e-9, atol=1e-9)
    weight = kg.tensor(w, device=device)
    check_grad(
        lambda a: F.conv_transpose2d(a, weight, None, **case), x[:1, :, :1, :2], device=device
    )
    if not simulated:  # the weight's gradient (also compared with PyTorch's below)
        check_grad(lambda c: F.conv_transpose2d(kg.tensor(x[:1], device=device), c, **case), w)


def test_conv_transpose1d_and_layers(device):
    x = RNG.standard_normal((2, 2, 4))
    w = RNG.standard_normal((2, 3, 3))
    expected = _conv_transpose2d(
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
