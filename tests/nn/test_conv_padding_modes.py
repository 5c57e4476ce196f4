"""``padding_mode`` of ``Conv1d``/``Conv2d``/``Conv3d`` (``"reflect"``, ``"replicate"``,
``"circular"``): the input padded the way NumPy's ``np.pad`` modes ``reflect``, ``edge``
and ``wrap`` pad it, then an unpadded convolution; gradients by central differences
(CPU) or against the CPU's (simulator); PyTorch's layers with the same weights where
PyTorch is installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ArgumentError
from tests.helpers import assert_close, check_grad

RNG = np.random.default_rng(11)
NUMPY_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
LAYERS = {1: kg.nn.Conv1d, 2: kg.nn.Conv2d, 3: kg.nn.Conv3d}


def _valid_conv(x, w, b, stride, dilation):
    """Unpadded, ungrouped convolution of (N, C, *size) by (O, C, *kernel)."""
    n, _, *size = x.shape
    kernel = w.shape[2:]
    out_size = [
        (s - d * (k - 1) - 1) // st + 1 for s, d, k, st in zip(size, dilation, kernel, stride)
    ]
    out = np.zeros((n, w.shape[0], *out_size))
    for tap in np.ndindex(*kernel):
        window = tuple(
            slice(t * d, t * d + (o - 1) * st + 1, st)
            for t, d, o, st in zip(tap, dilation, out_size, stride)
        )
        out += np.einsum("ni...,oi->no...", x[(slice(None), slice(None)) + window], w[(...,) + tap])
    return out + b.reshape(1, -1, *([1] * len(kernel)))


def _reference(x, w, b, mode, padding, stride, dilation):
    kernel = w.shape[2:]
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        amounts = [(t // 2, t - t // 2) for t in totals]
    else:
        amounts = [(p, p) for p in padding]
    padded = np.pad(x, [(0, 0), (0, 0), *amounts], mode=NUMPY_MODES[mode])
    return _valid_conv(padded, w, b, stride, dilation)


# dims, kernel, padding, stride, dilation (padding per dim, or "same")
CASES = [
    (1, (3,), (2,), (1,), (1,)),
    (2, (3, 2), (1, 2), (1, 2), (1, 1)),
    (2, (3, 3), "same", (1, 1), (2, 1)),
    (3, (2, 3, 2), (1, 1, 0), (1, 1, 2), (1, 1, 1)),
]
SIZES = {1: (7,), 2: (5, 6), 3: (3, 4, 5)}


def _layer(dims, kernel, padding, stride, dilation, mode, device):
    layer = LAYERS[dims](
        3, 2, kernel, stride=stride, padding=padding, dilation=dilation, padding_mode=mode
    )
    return layer.to(device)


@pytest.mark.parametrize("mode", sorted(NUMPY_MODES))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}d-{c[2]}")
def test_padding_modes_match_the_numpy_reference(case, mode, device, simulated):
    dims, kernel, padding, stride, dilation = case
    layer = _layer(dims, kernel, padding, stride, dilation, mode, device)
    w, b = layer.weight.cpu().numpy(), layer.bias.cpu().numpy()
    x = RNG.standard_normal((1 if simulated else 2, 3, *SIZES[dims])).astype(np.float32)
    expected = _reference(x, w, b, mode, padding, stride, dilation)
    got = layer(kg.tensor(x, device=device))
    assert got.shape == expected.shape
    assert_close(got, expected, rtol=1e-4, atol=1e-4)
    if dims == 3 and not simulated:
        return  # the 3-d gradient runs through the same F.pad as 1-d and 2-d
    if not simulated:
        layer64 = _layer(dims, kernel, padding, stride, dilation, mode, "cpu").double()
        check_grad(lambda a: layer64(a), x[:1].astype(np.float64))
        return
    gradients = []
    for where in (device, "cpu"):
        inputs = kg.tensor(x, device=where, requires_grad=True)
        layer.to(where).zero_grad()
        out = layer(inputs)
        (out * out).sum().backward()
        gradients.append([inputs.grad, layer.weight.grad])
    for got_grad, expected_grad in zip(*gradients):
        assert_close(got_grad, expected_grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
@pytest.mark.parametrize("mode", sorted(NUMPY_MODES))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}d-{c[2]}")
def test_padding_modes_match_pytorch(case, mode):
    torch = pytest.importorskip("torch")
    dims, kernel, padding, stride, dilation = case
    torch_layer = getattr(torch.nn, f"Conv{dims}d")
    theirs = torch_layer(3, 2, kernel, stride, padding, dilation, padding_mode=mode)
    ours = _layer(dims, kernel, padding, stride, dilation, mode, "cpu")
    ours.load_state_dict({k: kg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((2, 3, *SIZES[dims])).astype(np.float32)
    x_theirs = torch.tensor(x, requires_grad=True)
    x_ours = kg.tensor(x, requires_grad=True)
    out_theirs, out_ours = theirs(x_theirs), ours(x_ours)
    assert_close(out_ours, out_theirs.detach().numpy(), rtol=1e-5, atol=1e-5)
    out_theirs.square().sum().backward()
    out_ours.square().sum().backward()
    assert_close(x_ours.grad, x_theirs.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert_close(ours.weight.grad, theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert repr(ours) == repr(theirs)  # padding_mode unquoted, as PyTorch prints it


def test_padding_mode_unbatched_input_and_errors():
    layer = kg.nn.Conv2d(2, 1, 3, padding=1, padding_mode="circular")
    x = RNG.standard_normal((2, 4, 4)).astype(np.float32)
    batched = layer(kg.tensor(x[None]))
    assert_close(layer(kg.tensor(x)), batched.numpy()[0], rtol=1e-6, atol=1e-6)
    with pytest.raises(ArgumentError, match="padding_mode must be one of 'zeros', 'reflect'"):
        kg.nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="padding_mode"):  # PyTorch raises ValueError too
        kg.nn.Conv1d(1, 1, 3, padding_mode="symmetric")
    # reflect padding must be smaller than the dim it pads, as in PyTorch
    with pytest.raises(kg.errors.ShapeError, match="reflect padding"):
        kg.nn.Conv1d(1, 1, 3, padding=4, padding_mode="reflect")(kg.zeros(1, 1, 3))
    with pytest.raises(ValueError, match="padding_mode"):
        kg.nn.ConvTranspose2d(1, 1, 2, padding_mode="reflect")  # PyTorch: zeros only
