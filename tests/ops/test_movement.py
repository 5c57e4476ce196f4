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
    flipped = t.flip(0)  # a copy, as PyTorch's: writing into it leaves t alone
    flipped.add_(1)
    assert_close(t, values)
    assert_close(kg.fliplr(t.reshape(2, 5)).add_(1), values.reshape(2, 5)[:, ::-1] + 1)
    assert_close(t, values)
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


def test_repeat_copies_as_pytorch_does(device):
    """Repeating only new leading dims (or nothing) was a stride-0 view of the input:
    PyTorch's repeat always copies, so in-place ops work on it and do not reach x."""
    t = kg.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    for reps in ((2, 1, 1), (1, 1), (3, 1, 1, 1)):
        r = t.repeat(*reps)
        assert not shares_memory(r, t) and r.is_contiguous()
        r.div_(2.0)  # refused on a stride-0 view
        assert_close(t, np.array([[1.0, 2.0], [3.0, 4.0]]))
        assert_close(r, np.tile([[0.5, 1.0], [1.5, 2.0]], reps))
    x = kg.tensor([1.0, 2.0], device=device, requires_grad=True)
    x.repeat(3, 1).sum().backward()
    assert_close(x.grad, np.array([3.0, 3.0]))


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


def test_view_dtype_reinterprets_the_bits(device):
    """`x.view(kg.int32)` on float32 converted the values (1.0 -> 1) instead of
    reinterpreting the bits as PyTorch's `view(dtype)` and NumPy's `view` do. Expected
    values: NumPy's `.view` of the same data (and PyTorch 2.13 agrees)."""
    values = np.array([[1.0, -2.5, 0.0], [3.0, 1e-3, -0.0]], dtype=np.float32)
    t = kg.tensor(values, device=device)
    bits = t.view(kg.int32)
    assert bits.dtype == kg.int32 and bits.shape == (2, 3)
    assert_close(bits, values.view(np.int32))
    assert_close(kg.tensor([1.0], device=device).view(kg.int32), [1065353216])
    assert t.view(kg.float32) is t
    # Writes through either view reach the other, and the version counter is shared.
    before = t._storage.version
    bits[0, :1] = 0
    assert t[0, 0].item() == 0.0
    assert t._storage.version == bits._storage.version > before
    # Larger elements: the last dimension shrinks (PyTorch's rules).
    pairs = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    wide = kg.tensor(pairs, device=device).view(kg.float64)
    assert wide.shape == (4, 1)
    assert_close(wide, pairs.view(np.float64))
    assert_close(kg.tensor(pairs, device=device)[2:].view(kg.float64), pairs[2:].view(np.float64))
    assert_close(kg.tensor([1.0, 2.0], device=device).view(kg.int64), [4611686019492741120])
    # Smaller elements: it grows, also from a strided view with a unit last stride.
    longs = np.array([[1, -1], [2**40, 7]], dtype=np.int64)
    halves = kg.tensor(longs, device=device).T[:, :].contiguous()[::2].view(kg.int32)
    assert_close(halves, np.ascontiguousarray(longs.T)[::2].view(np.int32))
    assert_close(kg.tensor([1], device=device).view(kg.float32), [1.401298464324817e-45, 0.0])
    assert_close(kg.tensor([1.0], device=device).view(kg.bool), [False, False, True, True])
    # Refused as PyTorch refuses it.
    with pytest.raises(kg.ShapeError, match="size \\(3\\) must be divisible by 2"):
        kg.tensor([1.0, 2.0, 3.0], device=device).view(kg.int64)
    with pytest.raises(kg.ShapeError, match="stride 1"):
        kg.arange(4.0, device=device).reshape(2, 2).T.view(kg.float64)
    with pytest.raises(kg.ShapeError, match="offset \\(1\\)"):
        kg.arange(8.0, device=device)[1:7].view(kg.float64)
    with pytest.raises(kg.ShapeError, match="0-d"):
        kg.tensor(1.0, device=device).view(kg.int64)
    # Not differentiable: the result is a new leaf.
    assert not kg.ones(2, requires_grad=True, device=device).view(kg.int32).requires_grad


def test_view_dtype_outlives_its_source(device):
    """The reinterpreting view keeps the source's memory alive (a pool must not reuse it)."""
    bits = kg.tensor([1.0, 2.0], device=device).view(kg.int32)
    import gc

    gc.collect()
    kg.ones(2, device=device) * 5  # would reuse a freed block
    assert_close(bits, np.array([1.0, 2.0], dtype=np.float32).view(np.int32))


def test_view_dtype_is_refused_inside_kg_compile():
    @kg.compile
    def reinterpret(x):
        return x.view(kg.int32) + 1

    x = kg.ones(3)
    reinterpret(x)  # the eager first call works
    with pytest.raises(kg.compile.TraceError, match=r"view\(dtype\)"):
        reinterpret(x)


def test_repeated_dims_and_0d_dims_are_refused_by_views(device):
    """`flip((0, 0))` and `squeeze(1)` of a 0-d tensor were accepted; PyTorch raises."""
    with pytest.raises(kg.ShapeError, match=r"flip: dim 0 appears more than once"):
        kg.ones(2, 3, device=device).flip((0, 0))
    with pytest.raises(IndexError, match="squeeze: dim 1 is out of range"):
        kg.tensor(1.0, device=device).squeeze(1)
    with pytest.raises(IndexError, match="squeeze: dim 0 appears more than once"):
        kg.ones(1, 2, device=device).squeeze((0, -2))
    assert kg.tensor(1.0, device=device).squeeze(0).shape == ()
    assert kg.tensor(1.0, device=device).squeeze(-1).shape == ()


def test_ops_along_a_dim_refuse_0d_tensors_and_bad_counts(device):
    """Fuzz findings: narrow, unfold, chunk, split and cat of a 0-d tensor leaked
    `IndexError: tuple index out of range`; chunk(0) and chunk/split of an empty dim
    leaked ZeroDivisionError; repeat(-1) of an empty tensor was accepted. PyTorch 2.13
    raises for each, except that an empty dim chunks into `chunks` empty pieces."""
    scalar = kg.tensor(1.0, device=device)
    for name, call in [
        ("narrow", lambda: scalar.narrow(0, 0, 1)),
        ("unfold", lambda: scalar.unfold(0, 1, 1)),
        ("chunk", lambda: scalar.chunk(2)),
        ("split", lambda: scalar.split(1)),
        ("cat", lambda: kg.cat([scalar, scalar])),
    ]:
        with pytest.raises(kg.ShapeError, match=f"{name}: a 0-d tensor has no dimension"):
            call()
    row = kg.arange(3.0, device=device)
    with pytest.raises(ValueError, match="chunk: the number of chunks must be positive"):
        row.chunk(0)
    with pytest.raises(kg.errors.ArgumentError, match="split: split_size must be positive"):
        row.split(0)
    with pytest.raises(ValueError, match="split_size must be positive"):
        row.split(-1)
    with pytest.raises(kg.ShapeError, match="non-negative"):
        row.split([1, -1, 3])
    assert [t.shape for t in kg.zeros(0, device=device).chunk(2)] == [(0,), (0,)]
    assert [t.shape for t in kg.zeros(2, 0, device=device).chunk(3, 1)] == [(2, 0)] * 3
    assert [t.shape for t in kg.zeros(0, device=device).split(0)] == [(0,)]
    with pytest.raises(ValueError, match="repeat: repeat counts must be non-negative"):
        kg.zeros(0, device=device).repeat(-1)
