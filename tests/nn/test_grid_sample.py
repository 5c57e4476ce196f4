"""``F.affine_grid`` and ``F.grid_sample`` (2-d and 3-d; bilinear and nearest; zeros,
border and reflection padding; both align_corners): values against a NumPy loop,
gradients with respect to the input and the grid against central differences, and both
against PyTorch where it is installed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from tests.helpers import as_numpy, assert_close, check_grad

RNG = np.random.default_rng(12)


def _reflect(p, low2, high2):
    if low2 == high2:
        return 0.0
    low, span = low2 / 2, (high2 - low2) / 2
    d = abs(p - low)
    flips = np.floor(d / span)
    extra = d - flips * span
    return extra + low if flips % 2 == 0 else span - extra + low


def _position(g, size, padding_mode, align_corners):
    p = (g + 1) * (size - 1) / 2 if align_corners else ((g + 1) * size - 1) / 2
    if padding_mode == "border":
        p = min(max(p, 0.0), size - 1.0)
    elif padding_mode == "reflection":
        p = _reflect(p, 0, 2 * (size - 1)) if align_corners else _reflect(p, -1, 2 * size - 1)
        p = min(max(p, 0.0), size - 1.0)
    return p


def _reference(x, grid, mode, padding_mode, align_corners):
    """grid_sample one output element at a time."""
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    dims = len(sizes)
    out_sizes = grid.shape[1:-1]
    out = np.zeros((n, c) + out_sizes)
    for b in range(n):
        for cell in itertools.product(*(range(s) for s in out_sizes)):
            g = grid[(b,) + cell]
            pos = [_position(g[dims - 1 - k], sizes[k], padding_mode, align_corners)
                   for k in range(dims)]  # fmt: skip
            if mode == "nearest":
                corners = [([int(np.round(p))], [1.0]) for p in pos]
            else:
                corners = [([int(np.floor(p)), int(np.floor(p)) + 1],
                            [1 - (p - np.floor(p)), p - np.floor(p)]) for p in pos]  # fmt: skip
            value = np.zeros(c)
            for choice in itertools.product(*(range(len(k[0])) for k in corners)):
                idx = [corners[k][0][choice[k]] for k in range(dims)]
                w = np.prod([corners[k][1][choice[k]] for k in range(dims)])
                if all(0 <= i < sizes[k] for k, i in enumerate(idx)):
                    value = value + w * x[(b, slice(None)) + tuple(idx)]
            out[(b, slice(None)) + cell] = value
    return out


CASES = [
    (mode, padding, align)
    for mode in ("bilinear", "nearest")
    for padding in ("zeros", "border", "reflection")
    for align in (False, True)
]


def _grid(shape):
    # away from the half-pixel and integer positions where nearest or a clamp has a kink
    return RNG.uniform(-1.4, 1.4, shape)


@pytest.mark.parametrize(("mode", "padding_mode", "align_corners"), CASES)
def test_grid_sample_2d_matches_numpy_and_central_differences(
    mode, padding_mode, align_corners, device, simulated
):
    # the simulator runs a Python thread per element: one sample, fewer positions
    x = RNG.standard_normal((1, 1, 3, 4) if simulated else (2, 2, 3, 4))
    grid = _grid((1, 2, 2, 2) if simulated else (2, 2, 3, 2))
    expected = _reference(x, grid, mode, padding_mode, align_corners)
    got = F.grid_sample(
        kg.tensor(x, device=device), kg.tensor(grid, device=device), mode, padding_mode,
        align_corners,
    )  # fmt: skip
    assert_close(got, expected)
    if mode == "bilinear":
        check_grad(
            lambda a, g: F.grid_sample(a, g, mode, padding_mode, align_corners), x, grid,
            device=device,
        )  # fmt: skip
    else:
        check_grad(
            lambda a: F.grid_sample(a, kg.tensor(grid, device=device), mode, padding_mode,
                                    align_corners), x, device=device,
        )  # fmt: skip


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflection"])
def test_grid_sample_3d_matches_numpy(mode, padding_mode, device, simulated):
    x = RNG.standard_normal((1, 1 if simulated else 2, 2, 3, 3))
    grid = _grid((1, 2, 2, 1, 3))
    for align_corners in (False, True):
        expected = _reference(x, grid, mode, padding_mode, align_corners)
        got = F.grid_sample(
            kg.tensor(x, device=device), kg.tensor(grid, device=device), mode, padding_mode,
            align_corners,
        )  # fmt: skip
        assert_close(got, expected)
    if mode == "bilinear" and not simulated:  # the 2-d test checks gradients there
        check_grad(
            lambda a, g: F.grid_sample(a, g, mode, padding_mode, True), x, grid, device=device
        )


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_maps_pixels_and_differentiates_theta(align_corners, device):
    theta = RNG.standard_normal((2, 2, 3))
    size = (2, 1, 3, 4)
    got = F.affine_grid(kg.tensor(theta, device=device), size, align_corners=align_corners)
    assert got.shape == (2, 3, 4, 2)

    def base(n):
        if align_corners:
            return np.linspace(-1, 1, n)
        return (np.arange(n) * 2 + 1) / n - 1

    ys, xs = np.meshgrid(base(3), base(4), indexing="ij")
    points = np.stack([xs, ys, np.ones_like(xs)], -1)  # (H, W, 3)
    expected = np.einsum("hwk,njk->nhwj", points, theta)
    assert_close(got, expected)
    check_grad(lambda t: F.affine_grid(t, size, align_corners=align_corners), theta, device=device)
    theta3 = RNG.standard_normal((1, 3, 4))
    grid3 = F.affine_grid(kg.tensor(theta3, device=device), (1, 1, 2, 3, 2), align_corners)
    assert grid3.shape == (1, 2, 3, 2, 3)
    check_grad(lambda t: F.affine_grid(t, (1, 1, 2, 3, 2), align_corners), theta3, device=device)


def test_the_identity_transform_samples_the_input_back(device):
    x = RNG.standard_normal((1, 2, 4, 5))
    identity = kg.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], device=device, dtype=kg.float64)
    for align_corners in (False, True):
        grid = F.affine_grid(identity, (1, 2, 4, 5), align_corners=align_corners)
        back = F.grid_sample(kg.tensor(x, device=device), grid, align_corners=align_corners)
        assert_close(back, x, atol=1e-12)


def test_grid_sample_and_affine_grid_refuse_bad_arguments():
    x, grid = kg.zeros(1, 1, 3, 3), kg.zeros(1, 2, 2, 2)
    with pytest.raises(ValueError, match="mode must be"):
        F.grid_sample(x, grid, mode="area")
    with pytest.raises(ValueError, match="padding_mode must be"):
        F.grid_sample(x, grid, padding_mode="circular")
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.grid_sample(x, grid, mode="bicubic")
    with pytest.raises(RuntimeError, match="the grid must be"):
        F.grid_sample(x, kg.zeros(1, 2, 2, 3))
    with pytest.raises(RuntimeError, match="must match"):
        F.grid_sample(x, grid.double())
    with pytest.raises(ValueError, match="affine matrices of shape"):
        F.affine_grid(kg.zeros(1, 3, 4), (1, 1, 3, 3))
    with pytest.raises(ValueError, match="size must be"):
        F.affine_grid(kg.zeros(1, 2, 3), (1, 3, 3))


@pytest.mark.torch
@pytest.mark.parametrize(("mode", "padding_mode", "align_corners"), CASES)
@pytest.mark.parametrize("dims", [2, 3])
def test_grid_sample_matches_pytorch(dims, mode, padding_mode, align_corners):
    torch = pytest.importorskip("torch")
    shape = (2, 3, 5, 6) if dims == 2 else (2, 2, 4, 5, 3)
    grid_shape = (2, 4, 3, 2) if dims == 2 else (2, 3, 2, 4, 3)
    x, grid = RNG.standard_normal(shape), RNG.uniform(-1.6, 1.6, grid_shape)
    ours_x, ours_g = kg.tensor(x, requires_grad=True), kg.tensor(grid, requires_grad=True)
    theirs_x, theirs_g = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    ours = F.grid_sample(ours_x, ours_g, mode, padding_mode, align_corners)
    theirs = torch.nn.functional.grid_sample(theirs_x, theirs_g, mode, padding_mode, align_corners)
    np.testing.assert_allclose(as_numpy(ours), theirs.detach().numpy(), 1e-12, 1e-12)
    projection = RNG.standard_normal(theirs.shape)
    (ours * kg.tensor(projection)).sum().backward()
    (theirs * torch.tensor(projection)).sum().backward()
    np.testing.assert_allclose(as_numpy(ours_x.grad), theirs_x.grad.numpy(), 1e-12, 1e-12)
    np.testing.assert_allclose(as_numpy(ours_g.grad), theirs_g.grad.numpy(), 1e-10, 1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_pytorch(align_corners):
    torch = pytest.importorskip("torch")
    for size in ((2, 3, 4, 5), (2, 3, 2, 4, 5)):
        dims = len(size) - 2
        theta = RNG.standard_normal((2, dims, dims + 1))
        ours_t, theirs_t = (
            kg.tensor(theta, requires_grad=True),
            torch.tensor(theta, requires_grad=True),
        )
        ours = F.affine_grid(ours_t, size, align_corners=align_corners)
        theirs = torch.nn.functional.affine_grid(theirs_t, size, align_corners=align_corners)
        np.testing.assert_allclose(as_numpy(ours), theirs.detach().numpy(), 1e-12, 1e-12)
        projection = RNG.standard_normal(theirs.shape)
        (ours * kg.tensor(projection)).sum().backward()
        (theirs * torch.tensor(projection)).sum().backward()
        np.testing.assert_allclose(as_numpy(ours_t.grad), theirs_t.grad.numpy(), 1e-10, 1e-12)
