"""3-d convolution (``F.conv3d``, ``nn.Conv3d``): against a NumPy reference (each kernel
tap adds its weighted, strided input window into the output) on every backend, central
differences, and PyTorch's layer with the same weights where PyTorch is installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, DTypeError, ShapeError
from kernelgrad.torch_alias import aliased
from tests.helpers import assert_close, check_grad

RNG = np.random.default_rng(5)


def _same_padding(kernel, dilation):
    """PyTorch's 'same' amounts per dim: half before, the odd one after."""
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    return [(t // 2, t - t // 2) for t in totals]


def _conv3d_reference(x, w, b, stride, padding, dilation, groups):
    """The definition: output position o, through kernel tap t, reads input position
    o * stride + t * dilation - padding (zero outside the input)."""
    kernel = w.shape[2:]
    if padding == "same":
        amounts = _same_padding(kernel, dilation)
    elif padding == "valid":
        amounts = [(0, 0)] * 3
    else:
        amounts = [(p, p) for p in padding]
    xp = np.pad(x, [(0, 0), (0, 0)] + amounts)
    n, c, *size = xp.shape
    out_size = [
        (s - d * (k - 1) - 1) // st + 1 for s, d, k, st in zip(size, dilation, kernel, stride)
    ]
    out_channels = w.shape[0]
    per_in, per_out = c // groups, out_channels // groups
    out = np.zeros((n, out_channels, *out_size))
    for g in range(groups):
        inputs = slice(g * per_in, (g + 1) * per_in)
        outputs = slice(g * per_out, (g + 1) * per_out)
        for tap in np.ndindex(*kernel):
            window = tuple(
                slice(t * d, t * d + (o - 1) * st + 1, st)
                for t, d, o, st in zip(tap, dilation, out_size, stride)
            )
            part = xp[(slice(None), inputs) + window]
            out[:, outputs] += np.einsum("ni...,oi->no...", part, w[(outputs, slice(None)) + tap])
    return out + (b.reshape(1, -1, 1, 1, 1) if b is not None else 0)


CASES = [
    {"stride": (1, 1, 1), "padding": (0, 0, 0), "dilation": (1, 1, 1), "groups": 1},
    {"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (1, 1, 1), "groups": 1},
    {"stride": (1, 2, 1), "padding": (0, 1, 2), "dilation": (2, 1, 1), "groups": 2},
    {"stride": (1, 1, 1), "padding": "same", "dilation": (1, 2, 1), "groups": 1},
    {"stride": (3, 1, 1), "padding": "valid", "dilation": (1, 1, 2), "groups": 2},
]


def _arrays(case, batch, size, kernel=(2, 2, 3)):
    groups = case["groups"]
    x = RNG.standard_normal((batch, 4, *size))
    w = RNG.standard_normal((6 if groups == 1 else 4, 4 // groups, *kernel))
    b = RNG.standard_normal(w.shape[0])
    return x, w, b


@pytest.mark.parametrize("case", CASES)
def test_conv3d_matches_the_numpy_reference(case, device, simulated):
    # odd sizes, a different one per dim (tiny in the simulator: Python per GPU thread)
    x, w, b = _arrays(case, 1 if simulated else 2, (3, 4, 5) if simulated else (5, 4, 7))
    got = F.conv3d(
        kg.tensor(x, device=device), kg.tensor(w, device=device), kg.tensor(b, device=device),
        **case,
    )  # fmt: skip
    assert_close(got, _conv3d_reference(x, w, b, **case), rtol=1e-9, atol=1e-9)
    if not simulated:
        small = x[:1, :, :3, :4, :5]
        weight = kg.tensor(w)
        check_grad(lambda a: F.conv3d(a, weight, None, **case), small)
        check_grad(lambda c: F.conv3d(kg.tensor(small), c, **case), w)
        check_grad(lambda c: F.conv3d(kg.tensor(small), weight, c, **case), b)
        return
    # Central differences run the convolution dozens of times, slow in the simulator:
    # compare this backend's gradients with the CPU's (checked by the CPU pass).
    gradients = []
    for where in (device, "cpu"):
        tensors = [kg.tensor(a, device=where, requires_grad=True) for a in (x, w, b)]
        out = F.conv3d(*tensors, **case)
        (out * out).sum().backward()
        gradients.append([t.grad for t in tensors])
    for got, expected in zip(*gradients):
        assert_close(got, expected.numpy(), rtol=1e-9, atol=1e-9)


def test_conv3d_unbatched_without_bias_and_float32(device):
    x = RNG.standard_normal((2, 3, 3, 4))
    w = RNG.standard_normal((3, 2, 1, 2, 3))
    case = {"stride": 1, "padding": 1, "dilation": 1, "groups": 1}
    got = F.conv3d(kg.tensor(x, device=device), kg.tensor(w, device=device), **case)
    triples = {"stride": (1,) * 3, "padding": (1,) * 3, "dilation": (1,) * 3, "groups": 1}
    expected = _conv3d_reference(x[None], w, None, **triples)[0]
    assert_close(got, expected, rtol=1e-9, atol=1e-9)
    x32, w32 = (kg.tensor(a, dtype=kg.float32, device=device) for a in (x, w))
    single = F.conv3d(x32, w32, **case)
    assert single.dtype is kg.float32
    assert_close(single, expected, rtol=1e-5, atol=1e-5)


def test_conv3d_layer(device):
    layer = kg.nn.Conv3d(4, 6, (3, 2, 1), stride=(1, 2, 2), padding=(1, 0, 0), groups=2)
    layer = layer.to(device)
    assert layer.weight.shape == (6, 2, 3, 2, 1) and layer.bias.shape == (6,)
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
    assert layer(kg.zeros(2, 4, 3, 5, 5, device=device)).shape == (2, 6, 3, 2, 3)
    assert layer(kg.zeros(4, 3, 5, 5, device=device)).shape == (6, 3, 2, 3)  # unbatched
    assert "kernel_size=(3, 2, 1)" in repr(layer) and "groups=2" in repr(layer)
    same = kg.nn.Conv3d(2, 2, (2, 3, 4), padding="same", bias=False).to(device)
    assert same.bias is None and "bias" not in same.state_dict()
    assert same(kg.zeros(1, 2, 3, 4, 5, device=device)).shape == (1, 2, 3, 4, 5)
    # PyTorch's initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 2 * 3 * 2 * 1
    bound = 1 / np.sqrt(12)
    assert float(layer.weight.abs().amax().item()) <= bound
    assert float(layer.bias.abs().amax().item()) <= bound
    layer.weight.sum().backward()  # still a leaf parameter
    assert layer.weight.grad is not None


def test_conv3d_errors():
    x, w = kg.zeros(1, 2, 3, 3, 3), kg.zeros(4, 2, 2, 2, 2)
    with pytest.raises(RuntimeError, match=r"conv3d: expected a 5-d \(batched\) or 4-d"):
        F.conv3d(kg.zeros(2, 3, 3), w)
    with pytest.raises(ShapeError, match=r"conv3d: the weight must be \(out_channels"):
        F.conv3d(x, kg.zeros(4, 2, 2, 2))
    with pytest.raises(RuntimeError, match=r"conv3d: the input has 2 channels"):
        F.conv3d(x, kg.zeros(4, 3, 2, 2, 2))
    with pytest.raises(RuntimeError, match=r"groups=3 must divide"):
        F.conv3d(x, w, groups=3)
    with pytest.raises(RuntimeError, match=r"the bias must have shape \(4,\)"):
        F.conv3d(x, w, kg.zeros(3))
    with pytest.raises(ShapeError, match=r"larger than the padded input \(3x3x3\)"):
        F.conv3d(x, kg.zeros(4, 2, 4, 1, 1))
    with pytest.raises(RuntimeError, match="larger than the padded input"):
        F.conv3d(x, w, dilation=(1, 3, 1))
    with pytest.raises(RuntimeError, match="'same' is not supported for strided"):
        F.conv3d(x, w, stride=(1, 1, 2), padding="same")
    with pytest.raises(ValueError, match="'valid' or 'same', got 'full'"):
        F.conv3d(x, w, padding="full")
    with pytest.raises(ArgumentError, match="non-negative"):
        F.conv3d(x, w, padding=-1)
    with pytest.raises(ArgumentError, match="stride and dilation must be positive"):
        F.conv3d(x, w, stride=0)
    with pytest.raises(ArgumentError, match="a triple of ints"):
        F.conv3d(x, w, stride=(1, 1))
    with pytest.raises(TypeError, match=r"is kg\.float32 but the weight is kg\.float64"):
        F.conv3d(x, w.double())
    with pytest.raises(DTypeError, match="floating point"):
        F.conv3d(x.long(), w.long())
    with pytest.raises(ValueError, match="groups=2 must divide"):
        kg.nn.Conv3d(3, 2, 3, groups=2)
    with pytest.raises(ArgumentError, match="padding_mode must be one of"):
        kg.nn.Conv3d(1, 1, 3, padding_mode="mirror")


def test_conv3d_through_the_torch_alias():
    with aliased():
        import torch
        import torch.nn.functional as TF

        assert torch.nn.Conv3d is kg.nn.Conv3d and TF.conv3d is F.conv3d


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("case", CASES)
def test_conv3d_layer_matches_pytorch(case):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    out_channels = 6 if case["groups"] == 1 else 4
    theirs = torch.nn.Conv3d(4, out_channels, (2, 2, 3), **case)
    ours = kg.nn.Conv3d(4, out_channels, (2, 2, 3), **case)
    ours.load_state_dict({k: kg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    for batch in ((2,), ()):  # batched and unbatched
        x = RNG.standard_normal((*batch, 4, 5, 4, 7)).astype(np.float32)
        x_t, x_k = torch.tensor(x, requires_grad=True), kg.tensor(x, requires_grad=True)
        theirs.zero_grad()
        ours.zero_grad()
        out_t, out_k = theirs(x_t), ours(x_k)
        np.testing.assert_allclose(out_k.detach().numpy(), out_t.detach().numpy(), 1e-5, 1e-5)
        (out_t * out_t).sum().backward()
        (out_k * out_k).sum().backward()
        np.testing.assert_allclose(x_k.grad.numpy(), x_t.grad.numpy(), 1e-4, 1e-4)
        for name in ("weight", "bias"):
            np.testing.assert_allclose(
                getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(), 1e-4, 1e-4
            )
    # the same initialisation bounds: U(+-1/sqrt(fan_in)) for the weight and the bias
    bound = 1 / np.sqrt(theirs.weight.shape[1] * 12)
    fresh = kg.nn.Conv3d(4, out_channels, (2, 2, 3), **case)
    assert fresh.weight.shape == tuple(theirs.weight.shape)
    assert float(fresh.weight.abs().amax().item()) <= bound
    assert float(fresh.bias.abs().amax().item()) <= bound
    assert float(fresh.weight.abs().amax().item()) > bound / 2  # not a smaller init


@pytest.mark.torch
def test_conv3d_errors_are_pytorchs_exception_types():
    torch = pytest.importorskip("torch")
    z, w = np.zeros((1, 2, 3, 3, 3), np.float32), np.zeros((4, 2, 2, 2, 2), np.float32)
    calls = [
        ({}, z[0, 0], w),
        ({}, z, w[:, :1].repeat(3, 1)),
        ({"groups": 3}, z, w),
        ({}, z, np.zeros((4, 2, 4, 1, 1), np.float32)),
        ({"stride": 2, "padding": "same"}, z, w),
        ({"padding": "full"}, z, w),
        ({"padding": -1}, z, w),
        ({"stride": 0}, z, w),
    ]
    for options, x, weight in calls:
        with pytest.raises(Exception) as theirs:
            torch.nn.functional.conv3d(torch.tensor(x), torch.tensor(weight), **options)
        with pytest.raises(type(theirs.value)):
            F.conv3d(kg.tensor(x), kg.tensor(weight), **options)
