"""F.interpolate / nn.Upsample: against NumPy (nearest indices, linear blends) on every
backend, central differences, and PyTorch for every mode and option where installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, UnsupportedError
from tests.helpers import assert_close, check_grad

RNG = np.random.default_rng(7)


def _linear_1d(row, size_out, align_corners):
    size_in = row.shape[-1]
    out = np.arange(size_out, dtype=np.float64)
    if align_corners:
        src = out * (size_in - 1) / (size_out - 1) if size_out > 1 else out * 0
    else:
        src = np.maximum((out + 0.5) * size_in / size_out - 0.5, 0)
    low = np.minimum(np.floor(src).astype(int), size_in - 1)
    high = np.minimum(low + 1, size_in - 1)
    return row[..., low] * (1 - (src - low)) + row[..., high] * (src - low)


def test_interpolate_matches_numpy(device):
    x = RNG.standard_normal((1, 2, 3, 4))
    t = kg.tensor(x, device=device)
    nearest = F.interpolate(t, size=(5, 2))
    rows, cols = np.floor(np.arange(5) * 3 / 5).astype(int), np.floor(np.arange(2) * 2).astype(int)
    assert_close(nearest, x[:, :, rows][:, :, :, cols])
    for align in (False, True):
        expected = _linear_1d(np.swapaxes(_linear_1d(x, 7, align), 2, 3), 5, align)
        got = F.interpolate(t, size=(5, 7), mode="bilinear", align_corners=align)
        assert_close(got, np.swapaxes(expected, 2, 3), rtol=1e-9, atol=1e-9)
    check_grad(
        lambda a: F.interpolate(a, scale_factor=1.5, mode="linear"), x[0, :1, :2], device=device
    )
    assert kg.nn.Upsample(scale_factor=2)(t).shape == (1, 2, 6, 8)


def test_interpolate_checks_its_arguments():
    x = kg.zeros(1, 1, 2, 2)
    with pytest.raises(ArgumentError, match="exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(UnsupportedError, match="mode 'bicubic'"):
        F.interpolate(x, size=3, mode="bicubic")
    with pytest.raises(ArgumentError, match="align_corners is only for linear modes"):
        F.interpolate(x, size=3, align_corners=True)


@pytest.mark.torch
@pytest.mark.parametrize(
    "shape, options",
    [
        ((1, 2, 5), {"scale_factor": 2.5, "mode": "linear"}),
        ((1, 2, 5), {"size": 3, "mode": "linear", "align_corners": True}),
        ((2, 1, 3, 4), {"scale_factor": (1.7, 0.5), "mode": "bilinear"}),
        ((2, 1, 3, 4), {"size": (6, 9), "mode": "bilinear", "align_corners": True}),
        ((2, 1, 3, 4), {"scale_factor": 1.5, "mode": "bilinear", "recompute_scale_factor": True}),
        ((1, 1, 2, 3, 2), {"size": (3, 4, 5), "mode": "trilinear"}),
        ((2, 1, 5, 4), {"size": (3, 7)}),
        ((2, 1, 5, 4), {"scale_factor": 1.5, "mode": "nearest-exact"}),
        ((1, 2, 7), {"scale_factor": 0.6, "mode": "nearest"}),
    ],
)
def test_interpolate_matches_pytorch(shape, options):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(shape).astype(np.float32)
    ours, theirs = kg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_k = F.interpolate(ours, **options)
    out_t = torch.nn.functional.interpolate(theirs, **options)
    np.testing.assert_allclose(out_k.detach().numpy(), out_t.detach().numpy(), 1e-5, 1e-6)
    weight = RNG.standard_normal(out_t.shape).astype(np.float32)
    (out_k * kg.tensor(weight)).sum().backward()
    (out_t * torch.tensor(weight)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), 1e-5, 1e-5)
