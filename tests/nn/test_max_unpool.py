"""Max pooling indices in 1, 2 and 3 dims (plain and adaptive, and the
``*_with_indices`` names), and their inverse ``max_unpool{1,2,3}d`` / ``MaxUnpool*d``:
against a NumPy reference (ties go to the first maximum in scan order) on every backend,
gradients against central differences, and against PyTorch where installed."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from tests.helpers import as_numpy, assert_close, check_grad

RNG = np.random.default_rng(8)


def _reference_pool(x, windows):
    """Values and flat positions of the first maximum of each window; ``windows[k]`` is a
    list, per output cell along spatial dim k, of the input positions its taps read (None
    for a tap in the padding)."""
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    outs = tuple(len(w) for w in windows)
    values = np.empty((n, c) + outs)
    indices = np.empty((n, c) + outs, dtype=np.int64)
    for cell in itertools.product(*(range(o) for o in outs)):
        best = np.full((n, c), -np.inf)
        where = np.full((n, c), -1)
        for tap in itertools.product(*(windows[k][cell[k]] for k in range(len(cell)))):
            if any(t is None for t in tap):
                continue
            value = x[(slice(None), slice(None)) + tap]
            flat = int(np.ravel_multi_index(tap, spatial))
            better = (value > best) | (where < 0)
            best, where = np.where(better, value, best), np.where(better, flat, where)
        values[(slice(None), slice(None)) + cell] = best
        indices[(slice(None), slice(None)) + cell] = where
    return values, indices


def _sliding(size, kernel, stride, padding, dilation, ceil_mode):
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    cells = []
    for o in range(out):
        taps = [o * stride - padding + t * dilation for t in range(kernel)]
        cells.append([t if 0 <= t < size else None for t in taps])
    return cells


def _adaptive(size, out):
    return [list(range((i * size) // out, -(-((i + 1) * size) // out))) for i in range(out)]


# (dims, input shape, kernel, stride, padding, dilation, ceil_mode)
POOLS = [
    (1, (2, 3, 9), 3, 2, 1, 1, False),
    (1, (1, 2, 10), 2, 3, 0, 2, True),
    (2, (2, 2, 5, 6), 2, 2, 0, 1, False),
    (2, (1, 2, 7, 5), (3, 2), (2, 1), (1, 0), (1, 2), True),
    (3, (1, 2, 4, 5, 3), 2, 2, 0, 1, False),
    (3, (1, 1, 5, 4, 4), 3, 2, 1, 1, True),
]


def _per_dim(value, n):
    return value if isinstance(value, tuple) else (value,) * n


@pytest.mark.parametrize("case", POOLS, ids=str)
def test_max_pool_indices_match_numpy(case, device):
    n, shape, kernel, stride, padding, dilation, ceil_mode = case
    x = RNG.standard_normal(shape)
    x[..., 0] = x[..., 1]  # a tie: the first maximum wins
    windows = [
        _sliding(shape[2 + k], *(_per_dim(v, n)[k] for v in (kernel, stride, padding, dilation)),
                 ceil_mode)
        for k in range(n)
    ]  # fmt: skip
    expected_values, expected_indices = _reference_pool(x, windows)
    pool = getattr(F, f"max_pool{n}d")
    values, indices = pool(
        kg.tensor(x, device=device), kernel, stride, padding, dilation, ceil_mode,
        return_indices=True,
    )  # fmt: skip
    assert indices.dtype == kg.int64
    assert_close(values, expected_values)
    assert np.array_equal(as_numpy(indices), expected_indices)
    alias_values, alias_indices = getattr(F, f"max_pool{n}d_with_indices")(
        kg.tensor(x, device=device), kernel, stride, padding, dilation, ceil_mode
    )
    assert np.array_equal(as_numpy(alias_indices), expected_indices)
    assert_close(alias_values, expected_values)


@pytest.mark.parametrize(
    ("n", "shape", "out"),
    [(1, (2, 2, 7), 3), (2, (1, 2, 5, 7), (3, 4)), (3, (1, 1, 3, 5, 4), (2, 3, 3))],
)
def test_adaptive_max_pool_indices_match_numpy(n, shape, out, device):
    x = RNG.standard_normal(shape)
    sizes = _per_dim(out, n)
    windows = [_adaptive(shape[2 + k], sizes[k]) for k in range(n)]
    expected_values, expected_indices = _reference_pool(x, windows)
    values, indices = getattr(F, f"adaptive_max_pool{n}d")(
        kg.tensor(x, device=device), out, return_indices=True
    )
    assert_close(values, expected_values)
    assert np.array_equal(as_numpy(indices), expected_indices)
    _, alias = getattr(F, f"adaptive_max_pool{n}d_with_indices")(kg.tensor(x, device=device), out)
    assert np.array_equal(as_numpy(alias), expected_indices)
    module = getattr(kg.nn, f"AdaptiveMaxPool{n}d")(out, return_indices=True)
    assert np.array_equal(as_numpy(module(kg.tensor(x, device=device))[1]), expected_indices)


# unpooling inverts pooling without dilation and with floor sizes
UNPOOLABLE = [case for case in POOLS if case[5] == 1 and not case[6]]


@pytest.mark.parametrize("case", UNPOOLABLE, ids=str)
def test_max_unpool_puts_values_back_and_reads_gradients_there(case, device):
    n, shape, kernel, stride, padding = case[:5]
    x = RNG.standard_normal(shape)
    pool = getattr(F, f"max_pool{n}d")
    unpool = getattr(F, f"max_unpool{n}d")
    values, indices = pool(
        kg.tensor(x, device=device), kernel, stride, padding, return_indices=True
    )
    out = unpool(values, indices, kernel, stride, padding, output_size=shape[2:])
    expected = np.zeros(shape).reshape(shape[0], shape[1], -1)
    flat_indices = as_numpy(indices).reshape(shape[0], shape[1], -1)
    np.put_along_axis(expected, flat_indices, as_numpy(values).reshape(flat_indices.shape), 2)
    assert out.shape == shape
    assert_close(out, expected.reshape(shape))
    if all(k <= s for k, s in zip(_per_dim(kernel, n), _per_dim(stride, n))):
        # disjoint windows: each output element comes from one value. (Overlapping ones
        # can name a position twice; its gradient then goes to both, as PyTorch's does,
        # which central differences cannot see: the PyTorch test checks that case.)
        check_grad(
            lambda v: unpool(v, indices, kernel, stride, padding, output_size=shape[2:]),
            as_numpy(values),
            device=device,
        )
    module = getattr(kg.nn, f"MaxUnpool{n}d")(kernel, stride, padding)
    assert_close(module(values, indices, shape[2:]), expected.reshape(shape))


def test_max_unpool_default_size_and_pool_unpool_round_trip(device):
    x = RNG.standard_normal((2, 3, 4, 6))
    pool = kg.nn.MaxPool2d(2, return_indices=True)
    unpool = kg.nn.MaxUnpool2d(2)
    leaf = kg.tensor(x, device=device, requires_grad=True)
    out = unpool(*pool(leaf))
    assert out.shape == (2, 3, 4, 6)
    kept = as_numpy(out) != 0
    assert kept.reshape(2, 3, 2, 2, 3, 2).sum(axis=(3, 5)).max() == 1  # one per window
    assert_close(as_numpy(out)[kept], x[kept])
    out.sum().backward()
    assert_close(leaf.grad, kept.astype(np.float64))  # gradient back to each window's max
    unbatched = F.max_unpool2d(
        *F.max_pool2d(kg.tensor(x[0], device=device), 2, return_indices=True), 2
    )
    assert unbatched.shape == (3, 4, 6)


def test_max_unpool_refuses_what_pytorch_refuses():
    values, indices = F.max_pool2d(
        kg.tensor(RNG.standard_normal((1, 1, 4, 4))), 2, return_indices=True
    )
    with pytest.raises(RuntimeError, match="outside the output's 16 positions"):
        F.max_unpool2d(values, indices + 100, 2)
    with pytest.raises(ValueError, match="output_size"):
        F.max_unpool2d(values, indices, 2, output_size=(9, 9))
    with pytest.raises(RuntimeError, match="integer tensor"):
        F.max_unpool2d(values, indices.float(), 2)
    with pytest.raises(RuntimeError, match="do not match the input"):
        F.max_unpool2d(values, indices[..., :1], 2)
    assert F.max_unpool2d(values, indices, 2, output_size=(1, 1, 5, 5)).shape == (1, 1, 5, 5)


@pytest.mark.torch
@pytest.mark.parametrize("case", POOLS, ids=str)
def test_indices_and_unpooling_match_pytorch(case):
    torch = pytest.importorskip("torch")
    n, shape, kernel, stride, padding, dilation, ceil_mode = case
    x = RNG.standard_normal(shape)
    args = (kernel, stride, padding, dilation, ceil_mode)
    ours = getattr(F, f"max_pool{n}d")(kg.tensor(x), *args, return_indices=True)
    theirs = getattr(torch.nn.functional, f"max_pool{n}d")(
        torch.tensor(x), *args, return_indices=True
    )
    np.testing.assert_array_equal(as_numpy(ours[0]), theirs[0].numpy())
    np.testing.assert_array_equal(as_numpy(ours[1]), theirs[1].numpy())
    adaptive_out = tuple(max(1, s - 2) for s in shape[2:])
    ours_a = getattr(F, f"adaptive_max_pool{n}d")(kg.tensor(x), adaptive_out, return_indices=True)
    theirs_a = getattr(torch.nn.functional, f"adaptive_max_pool{n}d")(
        torch.tensor(x), adaptive_out, return_indices=True
    )
    np.testing.assert_array_equal(as_numpy(ours_a[1]), theirs_a[1].numpy())
    if dilation != 1 or ceil_mode:
        return
    size = shape[2:]
    ours_v = kg.tensor(as_numpy(ours[0]), requires_grad=True)
    theirs_v = theirs[0].clone().requires_grad_()
    ours_out = getattr(F, f"max_unpool{n}d")(ours_v, ours[1], kernel, stride, padding, size)
    theirs_out = getattr(torch.nn.functional, f"max_unpool{n}d")(
        theirs_v, theirs[1], kernel, stride, padding, size
    )
    np.testing.assert_array_equal(as_numpy(ours_out), theirs_out.detach().numpy())
    projection = RNG.standard_normal(theirs_out.shape)
    (ours_out * kg.tensor(projection)).sum().backward()
    (theirs_out * torch.tensor(projection)).sum().backward()
    np.testing.assert_allclose(as_numpy(ours_v.grad), theirs_v.grad.numpy(), 1e-12, 1e-12)
    module = getattr(kg.nn, f"MaxUnpool{n}d")(kernel, stride, padding)
    assert repr(module) == repr(getattr(torch.nn, f"MaxUnpool{n}d")(kernel, stride, padding))


def test_overlapping_windows_sharing_a_maximum_unpool_it_once():
    x = np.zeros((1, 1, 1, 5))
    x[0, 0, 0, 2] = 3.0  # the maximum of windows [1, 2, 3] and [2, 3, 4]
    values, indices = F.max_pool2d(kg.tensor(x), (1, 3), (1, 1), return_indices=True)
    out = F.max_unpool2d(values, indices, (1, 3), (1, 1), output_size=(1, 5))
    assert as_numpy(out)[0, 0, 0, 2] == 3.0
    assert math.isclose(float(as_numpy(out).sum()), 3.0)
