"""Views (no copies), copies (cat, stack, pad, transfer), and their gradients."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernelgrad as kg
from kernelgrad.ops.movement import pad
from tests.helpers import assert_close, check_grad, tensors

COVERED = {"reshape", "permute", "expand", "slice", "unfold", "transfer", "pad", "cat"}


def shares_memory(a: kg.Tensor, b: kg.Tensor) -> bool:
    return a._storage is b._storage


@given(data=st.data())
def test_reshape_matches_numpy_and_views_when_possible(data, device):
    values, t = data.draw(tensors(device))
    target = data.draw(st.sampled_from([(-1,), (values.size,), (1, -1), (-1, 1)]))
    result = t.reshape(*target)
    assert_close(result, values.reshape(target))
    if t.is_contiguous():
        assert shares_memory(result, t)


def test_view_refuses_to_copy_and_says_so(device):
    t = kg.arange(6, device=device).reshape(2, 3).T
    with pytest.raises(kg.ShapeError, match=r"reshape"):
        t.view(6)
    assert_close(t.reshape(6), np.arange(6).reshape(2, 3).T.reshape(6))
    assert_close(t.contiguous().view(6), np.arange(6).reshape(2, 3).T.reshape(6))


def test_reshape_errors(device):
    t = kg.zeros(2, 3, device=device)
    with pytest.raises(kg.ShapeError, match=r"\(2, 3\).*\(4, 2\)"):
        t.reshape(4, 2)
    with pytest.raises(kg.ShapeError, match="only one"):
        t.reshape(-1, -1)


def test_views_share_memory(device):
    t = kg.arange(24, device=device).reshape(2, 3, 4)
    for view in (
        t.permute(2, 0, 1),
        t.transpose(0, 1),
        t.T,
        t[:, 1:, ::2],
        t.unsqueeze(1),
        t[None],
        t.flatten(1),
        t.unfold(2, 2, 1),
        t.expand(5, 2, 3, 4),
    ):
        assert shares_memory(view, t)


@given(data=st.data())
def test_permute_transpose(data, device):
    values, t = data.draw(tensors(device, max_dims=4))
    order = data.draw(st.permutations(list(range(values.ndim))))
    assert_close(t.permute(*order), values.transpose(order))
    assert_close(t.T, values.T)
    if values.ndim >= 2:
        assert_close(t.transpose(0, -1), np.swapaxes(values, 0, -1))
        assert_close(t.mT, np.swapaxes(values, -1, -2))


def test_permute_errors(device):
    t = kg.zeros(2, 3, device=device)
    with pytest.raises(kg.ShapeError, match="one entry per dimension"):
        t.permute(0)
    with pytest.raises(kg.ShapeError, match="permutation"):
        t.permute(0, 0)


def test_expand(device):
    t = kg.tensor([[1.0], [2.0]], device=device)
    assert_close(t.expand(2, 3), np.array([[1.0] * 3, [2.0] * 3]))
    assert_close(t.expand(4, -1, 3), np.broadcast_to([[1.0], [2.0]], (4, 2, 3)))
    with pytest.raises(kg.ShapeError, match="not 1"):
        t.expand(3, 3)


def test_squeeze_unsqueeze_flatten(device):
    values = np.arange(6.0).reshape(1, 2, 1, 3)
    t = kg.tensor(values, device=device)
    assert t.squeeze().shape == (2, 3)
    assert t.squeeze(0).shape == (2, 1, 3)
    assert t.squeeze((0, 2)).shape == (2, 3)
    assert t.squeeze(1).shape == (1, 2, 1, 3)
    assert t.unsqueeze(-1).shape == (1, 2, 1, 3, 1)
    assert t.unsqueeze(0).shape == (1, 1, 2, 1, 3)
    assert t.flatten().shape == (6,)
    assert t.flatten(1, 2).shape == (1, 2, 3)
    assert t.unflatten(3, (3, 1)).shape == (1, 2, 1, 3, 1)
    assert kg.tensor(5.0, device=device).flatten().shape == (1,)


@given(data=st.data())
def test_basic_slicing_matches_numpy(data, device):
    values, t = data.draw(tensors(device, max_dims=3, max_side=6))
    if values.ndim == 0:
        return
    key = []
    for size in values.shape:
        kind = data.draw(st.sampled_from(["all", "int", "slice", "none"]))
        if kind == "int":
            key.append(data.draw(st.integers(-size, size - 1)))
        elif kind == "slice":
            start = data.draw(st.none() | st.integers(-size - 1, size + 1))
            stop = data.draw(st.none() | st.integers(-size - 1, size + 1))
            step = data.draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            key.append(slice(start, stop, step))
        elif kind == "none":
            key.append(None)
            key.append(slice(None))
        else:
            key.append(slice(None))
    key = tuple(key)
    assert_close(t[key], values[key])


def test_ellipsis_and_errors(device):
    values = np.arange(24).reshape(2, 3, 4)
    t = kg.tensor(values, device=device)
    assert_close(t[..., 1], values[..., 1])
    assert_close(t[0, ...], values[0, ...])
    assert_close(t[:, None, ..., ::-1], values[:, None, ..., ::-1])
    with pytest.raises(IndexError, match="out of bounds"):
        t[2]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]


def test_narrow_flip_split_chunk(device):
    values = np.arange(10.0)
    t = kg.tensor(values, device=device)
    assert_close(t.narrow(0, 2, 3), values[2:5])
    assert_close(t.flip(0), values[::-1])
    assert [p.shape for p in t.split(4)] == [(4,), (4,), (2,)]
    assert [p.shape for p in t.split([3, 7])] == [(3,), (7,)]
    assert [p.shape for p in t.chunk(3)] == [(4,), (4,), (2,)]
    with pytest.raises(kg.ShapeError):
        t.split([3, 3])


def test_unfold_windows(device):
    values = np.arange(10.0)
    t = kg.tensor(values, device=device)
    windows = np.lib.stride_tricks.sliding_window_view(values, 3)
    assert_close(t.unfold(0, 3, 1), windows)
    assert_close(t.unfold(0, 3, 2), windows[::2])
    assert_close(t.unfold(0, 2, 3, dilation=2), np.array([[0, 2], [3, 5], [6, 8]], dtype=float))
    image = np.arange(2 * 5 * 6.0).reshape(1, 2, 5, 6)
    patches = kg.tensor(image, device=device).unfold(2, 3, 1).unfold(3, 2, 2)
    assert patches.shape == (1, 2, 3, 3, 3, 2)
    assert_close(patches[0, 1, 2, 1], image[0, 1, 2:5, 2:4])
    with pytest.raises(kg.ShapeError, match="does not fit"):
        t.unfold(0, 11, 1)


def test_repeat(device):
    values = np.array([[1, 2], [3, 4]])
    t = kg.tensor(values, device=device)
    assert_close(t.repeat(2, 3), np.tile(values, (2, 3)))
    assert_close(t.repeat(2, 1, 1), np.tile(values, (2, 1, 1)))


def test_cat_and_stack(device):
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    b = np.arange(3.0, dtype=np.float32).reshape(1, 3)
    ta, tb = kg.tensor(a, device=device), kg.tensor(b, device=device)
    assert_close(kg.cat([ta, tb]), np.concatenate([a, b]))
    assert_close(kg.cat([ta, ta.T.T], dim=1), np.concatenate([a, a], 1))
    assert_close(kg.stack([ta, ta], dim=1), np.stack([a, a], 1))
    assert kg.cat([ta, kg.tensor([[1, 2, 3]], device=device)]).dtype == kg.float32
    with pytest.raises(kg.ShapeError, match=r"\(2, 3\), \(1, 2\)"):
        kg.cat([ta, kg.zeros(1, 2, device=device)])
    with pytest.raises(kg.ShapeError, match="same shape"):
        kg.stack([ta, tb])


def test_pad(device):
    values = np.arange(6.0).reshape(2, 3)
    t = kg.tensor(values, device=device)
    assert_close(pad(t, (1, 2)), np.pad(values, ((0, 0), (1, 2))))
    assert_close(
        pad(t, (1, 0, 0, 1), value=-1.0), np.pad(values, ((0, 1), (1, 0)), constant_values=-1)
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.reshape(3, 8),
        lambda x: x.T.reshape(-1),
        lambda x: x.permute(1, 2, 0) * 2,
        lambda x: x[:, 1:, ::2],
        lambda x: x[1, ::-1, None],
        lambda x: x.unsqueeze(1).expand(2, 4, 3, 4),
        lambda x: x.unfold(2, 2, 1),
        lambda x: x.unfold(1, 2, 1).unfold(2, 3, 1),
        lambda x: kg.cat([x, x * 2], dim=1),
        lambda x: kg.stack([x, x[:, ::-1]], dim=0),
        lambda x: pad(x, (1, 1, 2, 0)),
        lambda x: x.flip((0, 2)),
        lambda x: x.repeat(2, 1, 1),
        lambda x: x.squeeze().flatten(),
    ],
)
def test_movement_gradients(fn, device):
    check_grad(fn, np.random.default_rng(4).standard_normal((2, 3, 4)), device=device)


def test_transfer_to_same_device_is_identity(device):
    t = kg.ones(2, device=device)
    assert t.to(device) is t
    assert t.to(t.device, kg.float32) is t
