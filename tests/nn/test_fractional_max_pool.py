"""F.fractional_max_pool2d/3d (and their _with_indices forms, nn.FractionalMaxPool2d/3d):
values, indices and gradients against a NumPy reference of PyTorch's interval rule
(every backend; tiny under the CUDA simulator) and against PyTorch given the same
_random_samples (ties, NaN, overlapping windows, output_ratio, unbatched input), the
samples kernelgrad draws itself, and the refusals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, DTypeError, ShapeError
from tests.helpers import assert_close

RNG = np.random.default_rng(2014)


def _intervals(sample, size, out, pool):
    """PyTorch's generate_intervals, in the sample's precision."""
    kind = type(sample)
    starts = np.empty(out, dtype=np.int64)
    if out > 1:
        alpha = kind(size - pool) / kind(out - 1)
        for i in range(out - 1):
            starts[i] = int(kind(kind(i) + sample) * alpha) - int(sample * alpha)
    starts[out - 1] = size - pool
    return starts


def _reference(x, pools, outs, samples):
    """(values, indices) of fractional max pooling of (N, C, *spatial) ``x``: the first
    maximum of each window in scan order, or its last NaN."""
    n_dims = len(pools)
    spatial = x.shape[2:]
    values = np.empty(x.shape[:2] + tuple(outs), dtype=x.dtype)
    indices = np.empty(x.shape[:2] + tuple(outs), dtype=np.int64)
    order = (1, 0) if n_dims == 2 else (0, 1, 2)  # which sample each dim uses
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        starts = [
            _intervals(samples[n, c, order[k]], spatial[k], outs[k], pools[k])
            for k in range(n_dims)
        ]
        for cell in itertools.product(*[range(o) for o in outs]):
            best, where = -np.inf, None
            for tap in itertools.product(*[range(p) for p in pools]):
                position = tuple(starts[k][cell[k]] + tap[k] for k in range(n_dims))
                value = x[(n, c) + position]
                flat = int(np.ravel_multi_index(position, spatial))
                if where is None:
                    where = flat
                if value > best or np.isnan(value):
                    best, where = value, flat
            values[(n, c) + cell], indices[(n, c) + cell] = best, where
    return values, indices


def _scatter_gradient(shape, indices, upstream):
    grad = np.zeros((shape[0], shape[1], math.prod(shape[2:])))
    for n, c in itertools.product(range(shape[0]), range(shape[1])):
        np.add.at(grad[n, c], indices[n, c].reshape(-1), upstream[n, c].reshape(-1))
    return grad.reshape(shape)


def _input(shape, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    x.reshape(-1)[::7] = x.reshape(-1)[0]  # ties with the first element
    return x


@pytest.mark.parametrize(
    "n_dims, shape, pool, outs",
    [
        (2, (2, 2, 7, 6), (2, 3), (5, 3)),  # overlapping windows
        (2, (1, 2, 5, 5), 1, (3, 5)),
        (3, (1, 2, 5, 5, 5), (2, 2, 1), (3, 2, 4)),
    ],
)
def test_values_indices_and_gradients_match_the_reference(
    n_dims, shape, pool, outs, device, simulated
):
    if simulated:
        shape = (1, 1) + shape[2:]
    pools = pool if isinstance(pool, tuple) else (pool,) * n_dims
    for dtype in (np.float32,) if simulated else (np.float32, np.float64):
        x = _input(shape, dtype)
        x[0, 0].reshape(-1)[[1, 3]] = np.nan  # NaN wins its windows (the last NaN)
        samples = RNG.random(shape[:2] + (n_dims,)).astype(dtype)
        leaf = kg.tensor(x, device=device, requires_grad=True)
        pool_fn = F.fractional_max_pool2d if n_dims == 2 else F.fractional_max_pool3d
        values, indices = pool_fn(
            leaf, pool, outs, return_indices=True, _random_samples=kg.tensor(samples, device=device)
        )
        expected_values, expected_indices = _reference(x, pools, outs, samples)
        assert values.dtype == leaf.dtype and indices.dtype == kg.int64
        np.testing.assert_array_equal(indices.cpu().numpy(), expected_indices)
        assert_close(values, expected_values)
        upstream = RNG.standard_normal(values.shape)
        (values * kg.tensor(upstream, dtype=leaf.dtype, device=device)).sum().backward()
        assert_close(leaf.grad, _scatter_gradient(shape, expected_indices, upstream), rtol=1e-5)


def test_unbatched_input_ratio_and_drawn_samples(device):
    x = RNG.standard_normal((2, 6, 5)).astype(np.float32)
    kg.manual_seed(7)
    values, indices = F.fractional_max_pool2d_with_indices(
        kg.tensor(x, device=device), 2, output_ratio=0.5
    )
    assert values.shape == indices.shape == (2, 3, 2)
    kg.manual_seed(7)
    samples = kg.rand(1, 2, 2, device=device)  # what the call drew: rand(N, C, 2)
    expected_values, expected_indices = _reference(x[None], (2, 2), (3, 2), samples.cpu().numpy())
    np.testing.assert_array_equal(indices.cpu().numpy(), expected_indices[0])
    assert_close(values, expected_values[0])
    layer = kg.nn.FractionalMaxPool2d(2, output_size=(3, 2), return_indices=True)
    kg.manual_seed(7)
    _, again_indices = layer.to(device)(kg.tensor(x, device=device))
    np.testing.assert_array_equal(again_indices.cpu().numpy(), expected_indices[0])


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_indices_and_gradients_match_pytorch(dtype):
    torch = pytest.importorskip("torch")
    cases = [
        (2, (2, 3, 11, 9), 3, {"output_size": (6, 5)}),
        (2, (3, 2, 25, 17), (2, 3), {"output_size": (9, 11)}),
        (2, (2, 13, 10), 2, {"output_ratio": (0.5, 0.7)}),  # unbatched
        (3, (2, 2, 7, 6, 9), 2, {"output_size": (3, 4, 7)}),
        (3, (1, 2, 9, 8, 7), (3, 2, 2), {"output_ratio": 0.5}),
    ]
    for n_dims, shape, pool, options in cases:
        x = _input(shape, dtype)
        x.reshape(-1)[[4, 20, 21]] = np.nan
        batch, channels = (shape[0], shape[1]) if len(shape) == n_dims + 2 else (1, shape[0])
        samples = RNG.random((batch, channels, n_dims)).astype(dtype)
        samples[0, 0] = 0.0
        if n_dims == 2 and "output_ratio" in options:  # PyTorch's 2-d form takes only pairs
            options = {"output_ratio": tuple(options["output_ratio"])}
        ours = kg.tensor(x, requires_grad=True)
        theirs = torch.tensor(x, requires_grad=True)
        name = f"fractional_max_pool{n_dims}d"
        got = getattr(F, name)(
            ours, pool, return_indices=True, _random_samples=kg.tensor(samples), **options
        )
        want = getattr(torch.nn.functional, name)(
            theirs, pool, return_indices=True, _random_samples=torch.tensor(samples), **options
        )
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        np.testing.assert_array_equal(got[0].detach().numpy(), want[0].detach().numpy())
        upstream = RNG.standard_normal(got[0].shape).astype(dtype)
        (got[0] * kg.tensor(upstream)).sum().backward()
        (want[0] * torch.tensor(upstream)).sum().backward()
        assert_close(ours.grad, theirs.grad.numpy(), rtol=1e-6)


@pytest.mark.torch
def test_modules_and_with_indices_forms_match_pytorch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 3, 10, 8)).astype(np.float32)
    samples = RNG.random((2, 3, 2)).astype(np.float32)
    ours = kg.nn.FractionalMaxPool2d(3, output_ratio=0.5, _random_samples=kg.tensor(samples))
    theirs = torch.nn.FractionalMaxPool2d(
        3, output_ratio=0.5, _random_samples=torch.tensor(samples)
    )
    np.testing.assert_array_equal(ours(kg.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy())
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["_random_samples"]
    assert repr(ours) == repr(theirs) == "FractionalMaxPool2d()"
    assert list(kg.nn.FractionalMaxPool3d(2, output_size=3).state_dict()) == []
    got = F.fractional_max_pool2d_with_indices(
        kg.tensor(x), 2, 4, _random_samples=kg.tensor(samples)
    )
    want = torch.nn.functional.fractional_max_pool2d_with_indices(
        torch.tensor(x), 2, 4, _random_samples=torch.tensor(samples)
    )
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    volume = RNG.standard_normal((1, 2, 6, 6, 6)).astype(np.float32)
    samples3 = RNG.random((1, 2, 3)).astype(np.float32)
    got = kg.nn.FractionalMaxPool3d(
        2, output_size=3, return_indices=True, _random_samples=kg.tensor(samples3)
    )(kg.tensor(volume))
    want = torch.nn.FractionalMaxPool3d(
        2, output_size=3, return_indices=True, _random_samples=torch.tensor(samples3)
    )(torch.tensor(volume))
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


def test_refusals():
    x = kg.randn(2, 3, 7, 6)
    samples = kg.rand(2, 3, 2)
    with pytest.raises(ArgumentError, match="pool height 3 too large relative to input height 7"):
        F.fractional_max_pool2d(x, 3, (6, 4), _random_samples=samples)
    with pytest.raises(ArgumentError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 3)
    with pytest.raises(ArgumentError, match="kernel_size must be positive"):
        F.fractional_max_pool2d(x, 0, 3)
    with pytest.raises(ArgumentError, match="kernel_size"):
        F.fractional_max_pool2d(x, (3, 2, 1), 3)
    with pytest.raises(ShapeError, match="no less than the input batch size"):
        F.fractional_max_pool2d(x, 2, 3, _random_samples=kg.rand(1, 3, 2))
    with pytest.raises(ShapeError, match="size\\(2\\) to equal 2"):
        F.fractional_max_pool2d(x, 2, 3, _random_samples=kg.rand(2, 3, 3))
    with pytest.raises(ShapeError, match="3 dimensions"):
        F.fractional_max_pool2d(x, 2, 3, _random_samples=kg.rand(12))
    with pytest.raises(DTypeError, match="same dtype"):
        F.fractional_max_pool2d(x, 2, 3, _random_samples=samples.double())
    with pytest.raises(ShapeError, match="non-zero size"):
        F.fractional_max_pool2d(x[:, :, :0], 2, 3)
    with pytest.raises(ShapeError, match="4-d \\(batched\\)"):
        F.fractional_max_pool2d(x[None], 2, 3)
    with pytest.raises(DTypeError, match="float32 or float64"):
        F.fractional_max_pool2d(x.long(), 2, 3)
    with pytest.raises(ArgumentError, match="only one of output_size and output_ratio"):
        kg.nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5)
    with pytest.raises(ArgumentError, match=r"pool width 2 too large .* less than"):
        F.fractional_max_pool3d(kg.randn(1, 5, 6, 6), 2, (3, 4, 5))
    with pytest.raises(ArgumentError, match="between 0 and 1"):
        kg.nn.FractionalMaxPool3d(2, output_ratio=1.5)
    assert F.fractional_max_pool2d(x[:0], 2, 3).shape == (0, 3, 3, 3)
    assert F.fractional_max_pool2d(x, 2, 0).shape == (2, 3, 0, 0)
