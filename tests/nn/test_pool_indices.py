"""max_pool2d(return_indices=True) and MaxPool2d(return_indices=True): the values and
the flat input positions of the maxima, against a NumPy reference (ties go to the first
maximum) on every backend and against PyTorch (ceil_mode, dilation) where installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from tests.helpers import assert_close

RNG = np.random.default_rng(4)


def _max_pool_indices(x, kernel, stride, padding, dilation):
    n, c, height, width = x.shape
    padded = np.pad(
        x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2), constant_values=-np.inf
    )
    out_h = (height + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    out_w = (width + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    values = np.empty((n, c, out_h, out_w))
    indices = np.empty((n, c, out_h, out_w), dtype=np.int64)
    for i in range(out_h):
        for j in range(out_w):
            best = None
            for a in range(kernel[0]):
                for b in range(kernel[1]):
                    row, col = i * stride[0] + a * dilation[0], j * stride[1] + b * dilation[1]
                    value = padded[:, :, row, col]
                    flat = (row - padding[0]) * width + (col - padding[1])
                    if best is None:
                        best, where = value.copy(), np.full(value.shape, flat)
                    else:
                        better = value > best
                        best, where = np.where(better, value, best), np.where(better, flat, where)
            values[:, :, i, j], indices[:, :, i, j] = best, where
    return values, indices


@pytest.mark.parametrize(
    "kernel, stride, padding, dilation",
    [
        ((2, 2), (2, 2), (0, 0), (1, 1)),
        ((3, 2), (1, 2), (1, 1), (1, 1)),
        ((2, 2), (1, 1), (0, 1), (2, 1)),
    ],
)
def test_max_pool2d_returns_the_positions_of_the_maxima(kernel, stride, padding, dilation, device):
    x = RNG.standard_normal((2, 2, 5, 4))
    x[0, 0, 0, :2] = 7.0  # a tie: the first maximum wins
    values, indices = F.max_pool2d(
        kg.tensor(x, device=device), kernel, stride, padding, dilation, return_indices=True
    )
    expected_values, expected_indices = _max_pool_indices(x, kernel, stride, padding, dilation)
    assert_close(values, expected_values)
    assert indices.dtype == kg.int64
    np.testing.assert_array_equal(indices.cpu().numpy(), expected_indices)
    layer = kg.nn.MaxPool2d(kernel, stride, padding, dilation, return_indices=True)
    assert len(kg.nn.Sequential(layer)(kg.tensor(x, device=device))) == 2


@pytest.mark.torch
def test_max_pool2d_indices_match_pytorch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    for options in ({"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
                    {"kernel_size": (2, 3), "dilation": (2, 1)}):  # fmt: skip
        ours = F.max_pool2d(kg.tensor(x), return_indices=True, **options)
        theirs = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **options)
        np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
        np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())
