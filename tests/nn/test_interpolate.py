"""F.interpolate / nn.Upsample: against NumPy (nearest indices, linear and cubic blends,
window means) on every backend, central differences, and PyTorch for every mode and
option where installed."""

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


def _cubic_1d(row, size_out, align_corners, scale=None):
    """Keys' cubic convolution (A = -0.75) along the last axis, taps clamped at the
    borders, one output position at a time."""
    size_in = row.shape[-1]
    out = np.zeros(row.shape[:-1] + (size_out,))
    for i in range(size_out):
        if align_corners:
            src = i * (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
        else:
            src = (i + 0.5) * (scale or size_in / size_out) - 0.5
        base = int(np.floor(src))
        for tap in range(base - 1, base + 3):
            x = abs(src - tap)
            a = -0.75
            weight = (
                ((a + 2) * x - (a + 3)) * x * x + 1
                if x <= 1
                else ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
            )
            out[..., i] += weight * row[..., min(max(tap, 0), size_in - 1)]
    return out


def _area_1d(row, size_out):
    """The mean of each adaptive window along the last axis."""
    size_in = row.shape[-1]
    windows = [
        row[..., (i * size_in) // size_out : -(-((i + 1) * size_in) // size_out)].mean(-1)
        for i in range(size_out)
    ]
    return np.stack(windows, -1)


def _along(fn, x, axis, *args):
    return np.moveaxis(fn(np.moveaxis(x, axis, -1), *args), -1, axis)


def test_bicubic_and_area_match_numpy(device):
    x = RNG.standard_normal((1, 2, 4, 5))
    t = kg.tensor(x, device=device)
    for align in (False, True):
        expected = _along(_cubic_1d, _along(_cubic_1d, x, 2, 7, align), 3, 3, align)
        got = F.interpolate(t, size=(7, 3), mode="bicubic", align_corners=align)
        assert_close(got, expected, rtol=1e-9, atol=1e-9)
    # a scale factor maps positions by 1 / factor unless recomputed from the sizes
    expected = _along(_cubic_1d, _along(_cubic_1d, x, 2, 5, False, 1 / 1.3), 3, 6, False, 1 / 1.3)
    got = F.interpolate(t, scale_factor=1.3, mode="bicubic")
    assert_close(got, expected, rtol=1e-9, atol=1e-9)
    assert_close(
        kg.nn.Upsample(scale_factor=1.3, mode="bicubic", recompute_scale_factor=True)(t),
        _along(_cubic_1d, _along(_cubic_1d, x, 2, 5, False), 3, 6, False),
        rtol=1e-9, atol=1e-9,
    )  # fmt: skip
    area = F.interpolate(t, size=(3, 2), mode="area")
    assert_close(area, _along(_area_1d, _along(_area_1d, x, 2, 3), 3, 2), rtol=1e-9, atol=1e-9)
    line = F.interpolate(t[0], scale_factor=0.5, mode="area")  # 3-d: (N, C, L)
    assert_close(line, _along(_area_1d, x[0], 2, 2), rtol=1e-9, atol=1e-9)
    volume = x.reshape(1, 1, 2, 4, 5)
    got = F.interpolate(kg.tensor(volume, device=device), size=(1, 3, 4), mode="area")
    expected = _along(_area_1d, _along(_area_1d, _along(_area_1d, volume, 2, 1), 3, 3), 4, 4)
    assert_close(got, expected, rtol=1e-9, atol=1e-9)
    check_grad(
        lambda a: F.interpolate(a, size=(3, 4), mode="bicubic"), x[:, :1, :2, :3], device=device
    )
    check_grad(lambda a: F.interpolate(a, size=2, mode="area"), x[0, :1, :1], device=device)


def test_antialias_matches_the_stencils(device):
    """Halving with the stretched triangle averages 4 inputs with weights 1/8, 3/8, 3/8,
    1/8 (renormalised where the stencil leaves the image); upsampling with the triangle
    is plain bilinear (the filter is not stretched); a constant stays constant."""
    x = RNG.standard_normal((1, 2, 8, 6))
    t = kg.tensor(x, device=device)

    def halve(row):
        out = []
        for i in range(row.shape[-1] // 2):
            taps = [(j, w) for j, w in zip(range(2 * i - 1, 2 * i + 3), (1, 3, 3, 1))]
            taps = [(j, w) for j, w in taps if 0 <= j < row.shape[-1]]
            total = sum(w for _, w in taps)
            out.append(sum(w * row[..., j] for j, w in taps) / total)
        return np.stack(out, axis=-1)

    expected = _along(halve, _along(halve, x, 2), 3)
    got = F.interpolate(t, scale_factor=0.5, mode="bilinear", antialias=True)
    assert_close(got, expected, rtol=1e-9, atol=1e-9)
    up = F.interpolate(t, size=(11, 9), mode="bilinear", antialias=True)
    assert_close(up, F.interpolate(t, size=(11, 9), mode="bilinear").cpu().numpy(), 1e-9, 1e-9)
    constant = kg.full((1, 1, 9, 7), 2.5, dtype=kg.float64, device=device)
    flat = F.interpolate(constant, size=(4, 2), mode="bicubic", antialias=True)
    assert_close(flat, np.full((1, 1, 4, 2), 2.5), rtol=1e-9, atol=1e-9)
    for mode in ("bilinear", "bicubic"):
        check_grad(
            lambda a, mode=mode: F.interpolate(a, size=(2, 3), mode=mode, antialias=True),
            x[:, :1, :5, :6],
            device=device,
        )


def test_interpolate_checks_its_arguments():
    x = kg.zeros(1, 1, 2, 2)
    with pytest.raises(ArgumentError, match="exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(UnsupportedError, match="mode 'bicubic' needs a 4-d input"):
        F.interpolate(x[0], size=3, mode="bicubic")  # NotImplementedError, as in PyTorch
    with pytest.raises(UnsupportedError, match="mode 'lanczos' is not supported"):
        F.interpolate(x, size=3, mode="lanczos")
    with pytest.raises(ArgumentError, match="align_corners is only for the interpolating"):
        F.interpolate(x, size=3, align_corners=True)
    with pytest.raises(ValueError, match="align_corners is only for the interpolating"):
        F.interpolate(x, size=3, mode="area", align_corners=False)
    with pytest.raises(ValueError, match="recompute_scale_factor is only meaningful"):
        F.interpolate(x, size=3, recompute_scale_factor=True)
    with pytest.raises(TypeError, match="size must be an int or a tuple of ints"):
        F.interpolate(x, size=2.5)
    with pytest.raises(ValueError, match="antialias=True is only for modes bilinear and"):
        F.interpolate(x, size=3, mode="nearest", antialias=True)
    with pytest.raises(UnsupportedError, match="mode 'bilinear' needs a 4-d input"):
        F.interpolate(x[0], size=1, mode="bilinear", antialias=True)
    assert F.interpolate(x, size=3, mode="bicubic", antialias=False).shape == (1, 1, 3, 3)


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
        ((2, 2, 5, 6), {"size": (8, 4), "mode": "bicubic"}),
        ((2, 2, 5, 6), {"size": (3, 9), "mode": "bicubic", "align_corners": True}),
        ((2, 2, 5, 6), {"scale_factor": (1.7, 0.6), "mode": "bicubic"}),
        ((2, 2, 5, 6), {"scale_factor": 1.3, "mode": "bicubic", "recompute_scale_factor": True}),
        ((1, 2, 1, 4), {"size": (3, 2), "mode": "bicubic", "align_corners": True}),
        ((2, 2, 7), {"size": 3, "mode": "area"}),
        ((2, 2, 7, 6), {"size": (3, 4), "mode": "area"}),
        ((2, 2, 7, 6), {"scale_factor": (0.5, 1.6), "mode": "area"}),
        ((1, 2, 5, 4, 7), {"scale_factor": (0.5, 1.5, 0.7), "mode": "area"}),
        ((2, 2, 17, 23), {"size": (5, 7), "mode": "bilinear", "antialias": True}),
        ((1, 2, 9, 8), {"scale_factor": (0.37, 1.6), "mode": "bilinear", "antialias": True}),
        (
            (1, 2, 12, 10),
            {"size": (4, 3), "mode": "bilinear", "align_corners": True, "antialias": True},
        ),
        ((2, 1, 17, 23), {"size": (5, 7), "mode": "bicubic", "antialias": True}),
        (
            (1, 2, 9, 8),
            {
                "scale_factor": 0.3,
                "mode": "bicubic",
                "antialias": True,
                "recompute_scale_factor": True,
            },
        ),
        (
            (1, 2, 6, 5),
            {"size": (11, 2), "mode": "bicubic", "align_corners": True, "antialias": True},
        ),
    ],
)
def test_interpolate_matches_pytorch(shape, options):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(shape).astype(np.float32)
    ours, theirs = kg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_k = F.interpolate(ours, **options)
    out_t = torch.nn.functional.interpolate(theirs, **options)
    # float32 sums of up to 16 taps of values ~1: rounding differences reach ~2e-6
    np.testing.assert_allclose(out_k.detach().numpy(), out_t.detach().numpy(), 1e-5, 1e-5)
    weight = RNG.standard_normal(out_t.shape).astype(np.float32)
    (out_k * kg.tensor(weight)).sum().backward()
    (out_t * torch.tensor(weight)).sum().backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), 1e-5, 1e-5)
