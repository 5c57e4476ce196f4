"""Tensor creation, metadata, conversion to Python/NumPy, repr, and errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close


def test_tensor_infers_dtypes_like_pytorch(device):
    assert kg.tensor([1.0, 2.0], device=device).dtype == kg.float32
    assert kg.tensor([1, 2], device=device).dtype == kg.int64
    assert kg.tensor([True], device=device).dtype == kg.bool
    assert kg.tensor(np.zeros(2, np.float64), device=device).dtype == kg.float64
    assert kg.tensor(np.zeros(2, np.int32), device=device).dtype == kg.int32
    assert kg.tensor(np.zeros(2, np.uint8), device=device).dtype == kg.int32
    assert kg.tensor(3.0, device=device).shape == ()
    assert kg.tensor([[1, 2]], dtype=kg.float64, device=device).dtype == kg.float64


def test_ragged_data_is_rejected_clearly(device):
    with pytest.raises(ValueError, match="rectangular"):
        kg.tensor([[1, 2], [3]], device=device)


def test_tensor_copies_its_data(device):
    data = np.zeros(3, dtype=np.float32)
    t = kg.tensor(data, device=device)
    data[0] = 5
    assert t.cpu().tolist() == [0.0, 0.0, 0.0]


def test_from_numpy_shares_memory():
    data = np.zeros(3, dtype=np.float32)
    t = kg.from_numpy(data)
    data[1] = 2.0
    assert t.tolist() == [0.0, 2.0, 0.0]
    assert t.numpy().base is not None
    # any non-negative strides are shared (as torch.from_numpy); negative ones refused
    square = np.zeros((3, 3), np.float32)
    transposed = kg.from_numpy(square.T)
    square[0, 2] = 5.0
    assert transposed[2, 0].item() == 5.0
    with pytest.raises(ValueError, match="negative"):
        kg.from_numpy(square[:, ::-1])


@pytest.mark.parametrize("fn", [kg.zeros, kg.ones, kg.empty, kg.rand, kg.randn])
def test_shapes_as_varargs_or_tuple(fn, device):
    assert fn(2, 3, device=device).shape == (2, 3)
    assert fn((2, 3), device=device).shape == (2, 3)
    assert fn([4], device=device).shape == (4,)
    assert fn(device=device).shape == ()
    assert fn(2, device=device).dtype == kg.float32


def test_creation_functions(device):
    assert_close(kg.full((2,), 7, device=device), [7, 7])
    assert kg.full((2,), 7, device=device).dtype == kg.int64
    assert kg.full((2,), 7.5, device=device).dtype == kg.float32
    assert_close(kg.arange(5, device=device), np.arange(5))
    assert_close(kg.arange(1, 10, 3, device=device), np.arange(1, 10, 3))
    assert_close(kg.arange(0, 1, 0.25, device=device), np.arange(0, 1, 0.25))
    assert_close(kg.arange(5, 0, -2, device=device), [5, 3, 1])
    assert_close(kg.linspace(0, 1, 5, device=device), np.linspace(0, 1, 5))
    assert_close(kg.eye(3, device=device), np.eye(3))
    assert_close(kg.eye(2, 3, device=device), np.eye(2, 3))
    x = kg.ones(2, 3, dtype=kg.int32, device=device)
    assert kg.zeros_like(x).dtype == kg.int32
    assert_close(kg.full_like(x, 4), np.full((2, 3), 4))
    assert kg.ones_like(x, dtype=kg.float64).dtype == kg.float64
    assert kg.randn_like(kg.ones(3, device=device)).shape == (3,)
    assert kg.empty_like(x).shape == (2, 3)
    with pytest.raises(kg.ShapeError, match="negative"):
        kg.zeros(-1, device=device)


def test_random_numbers_are_seeded_and_plausible(device):
    kg.manual_seed(123)
    a = kg.rand(1000, device=device)
    kg.manual_seed(123)
    b = kg.rand(1000, device=device)
    assert a.cpu().tolist() == b.cpu().tolist()
    values = a.cpu().numpy()
    assert values.min() >= 0 and values.max() < 1 and 0.4 < values.mean() < 0.6
    normal = kg.randn(2000, device=device).cpu().numpy()
    assert abs(normal.mean()) < 0.15 and 0.85 < normal.std() < 1.15
    ints = kg.randint(3, 7, (500,), device=device).cpu().numpy()
    assert ints.min() >= 3 and ints.max() < 7 and set(ints.tolist()) == {3, 4, 5, 6}
    assert kg.randint(5, (3,), device=device).dtype == kg.int64
    with pytest.raises(TypeError, match="randint"):
        kg.rand(3, dtype=kg.int64, device=device)


def test_metadata(device):
    t = kg.zeros(2, 3, 4, device=device)
    assert t.ndim == t.dim() == 3
    assert t.numel() == 24
    assert t.size() == (2, 3, 4) and t.size(-1) == 4
    assert t.stride() == (12, 4, 1)
    assert t.is_contiguous() and not t.T.is_contiguous()
    assert t.element_size() == 4 and t.nbytes == 96
    assert len(t) == 2
    assert t.is_leaf and t.grad_fn is None
    assert str(t.device) == ("cpu" if device == "cpu" else "cuda:0")


def test_item_tolist_numpy(device):
    t = kg.tensor([[1.5, 2.0]], device=device)
    assert t[0, 1].item() == 2.0
    assert kg.tensor(3, device=device).item() == 3
    assert t.cpu().tolist() == [[1.5, 2.0]]
    with pytest.raises(ValueError, match="exactly one element"):
        t.item()
    assert float(kg.tensor([2.5], device="cpu")) == 2.5
    assert int(kg.tensor(7)) == 7
    assert [1, 2, 3][kg.tensor(1)] == 2
    with pytest.raises(ValueError, match="ambiguous"):
        bool(kg.tensor([1, 2]))


def test_numpy_shares_memory_on_cpu():
    t = kg.zeros(3)
    t.numpy()[1] = 4.0
    assert t.tolist() == [0.0, 4.0, 0.0]
    assert np.asarray(kg.ones(2)).tolist() == [1.0, 1.0]


def test_iteration_over_cpu_tensors():
    rows = list(kg.tensor([[1, 2], [3, 4]]))
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4]]


def test_repr_looks_like_pytorch():
    assert repr(kg.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(kg.tensor([1, 2])) == "tensor([1, 2])"
    assert "requires_grad=True" in repr(kg.ones(2, requires_grad=True))
    assert "grad_fn=<mulBackward>" in repr(kg.ones(2, requires_grad=True) * 2)
    assert "dtype=kg.float64" in repr(kg.zeros(1, dtype=kg.float64))
    assert repr(kg.tensor(2.5)) == "tensor(2.5000)"
    assert "..." in repr(kg.zeros(2000))
    assert repr(kg.zeros(0)) == "tensor([])"


def test_to_and_conversions(device):
    t = kg.tensor([1.7, -2.2], device=device)
    assert t.to(kg.int64).dtype == kg.int64
    assert t.to("float64").dtype == kg.float64
    assert t.double().dtype == kg.float64
    assert t.long().cpu().tolist() == [1, -2]
    assert t.int().dtype == kg.int32
    assert t.bool().cpu().tolist() == [True, True]
    assert t.float() is t
    assert t.type_as(kg.zeros(1, dtype=kg.float64)).dtype == kg.float64
    assert t.to(kg.zeros(1, dtype=kg.int32, device=device)).dtype == kg.int32
    assert t.cpu().device == kg.device("cpu")
    with pytest.raises(ValueError, match="unknown device type"):
        t.to("tpu")


def test_clone_and_contiguous(device):
    t = kg.arange(6.0, device=device).reshape(2, 3)
    c = t.clone()
    assert c._storage is not t._storage
    assert t.contiguous() is t
    assert t.T.contiguous().is_contiguous()
    assert_close(t.T.contiguous(), np.arange(6.0).reshape(2, 3).T)


def test_inplace_ops(device):
    t = kg.zeros(3, device=device)
    t += 1
    t.mul_(4).sub_(1).div_(2)
    assert_close(t, [1.5, 1.5, 1.5])
    t.add_(kg.tensor([1.0, 2.0, 3.0], device=device), alpha=2)
    assert_close(t, [3.5, 5.5, 7.5])
    t.clamp_(4, 6)
    assert_close(t, [4.0, 5.5, 6.0])
    t.fill_(2.0)
    assert_close(t, [2.0, 2.0, 2.0])
    t.zero_()
    assert_close(t, [0.0, 0.0, 0.0])
    t.copy_(kg.tensor([1, 2, 3], device=device))
    assert_close(t, [1.0, 2.0, 3.0])
    i = kg.zeros(2, dtype=kg.int64, device=device)
    with pytest.raises(TypeError, match="in place"):
        i += 0.5
    with pytest.raises(kg.ShapeError, match="cannot be written"):
        t.add_(kg.ones(2, 3, device=device))


def test_floordiv_mod_and_pow_assignments_write_in_place(device):
    """`r //= 2` on a row of x left x unchanged: Tensor had no __ifloordiv__, __imod__ or
    __ipow__, so Python rebound `r` to a new tensor (and `int_tensor //= 2.5` became
    float). As in PyTorch, they write into the tensor (and what it views) and refuse a
    result its dtype cannot hold; `@=` stays out of place, as in PyTorch."""
    x = kg.tensor([[6, 7], [8, 9]], device=device)
    row = x[0]
    row //= 2
    assert x.cpu().tolist() == [[3, 3], [8, 9]]
    alias = x
    alias %= kg.tensor([2, 5], device=device)
    assert alias is x and x.cpu().tolist() == [[1, 3], [0, 4]]
    x **= 2
    assert x.cpu().tolist() == [[1, 9], [0, 16]] and x.dtype == kg.int64
    floats = kg.tensor([6.0, -7.0], device=device)
    same = floats
    same **= 2
    same //= 5
    same %= 4
    assert floats.cpu().tolist() == [3.0, 1.0]
    small = kg.tensor([6, 7], dtype=kg.int32, device=device)
    small //= kg.tensor([2], device=device)
    assert small.dtype == kg.int32 and small.cpu().tolist() == [3, 3]
    for write in (
        lambda t: t.__ifloordiv__(2.5),
        lambda t: t.__imod__(2.5),
        lambda t: t.__ipow__(kg.tensor([0.5, 2.0], device=device)),
    ):
        ints = kg.tensor([6, 7], device=device)
        with pytest.raises(TypeError, match="in place"):
            write(ints)
        assert ints.cpu().tolist() == [6, 7]
    bits = kg.tensor([[6, 7], [8, 9]], device=device)
    view = bits[0]
    view &= 3
    view |= 8
    view ^= 1
    view <<= 1
    view >>= 2
    assert bits.cpu().tolist() == [[5, 5], [8, 9]]
    matrix = kg.ones(2, 2, device=device)
    product = matrix
    product @= 2 * kg.eye(2, device=device)
    assert product is not matrix and matrix.cpu().tolist() == [[1.0, 1.0], [1.0, 1.0]]
    source = kg.tensor([2.0, 3.0], device=device, requires_grad=True)
    powered = source * 1
    powered **= 3
    powered.sum().backward()
    assert source.grad.cpu().tolist() == [12.0, 27.0]


def test_inplace_through_a_view_writes_the_base(device):
    t = kg.zeros(2, 3, device=device)
    t[:, 1] += 5
    t.T[0].fill_(1.0)
    assert_close(t, [[1, 5, 0], [1, 5, 0]])


def test_inplace_refuses_views_whose_elements_share_memory(device):
    """`kg.zeros(1, 4).expand(3, 4).add_(1)` added 1 three times to each element (3.0
    everywhere). PyTorch refuses writes where several elements share a location."""
    base = kg.zeros(1, 4, device=device)
    expanded = base.expand(3, 4)
    writes = [  # (the op the message names, the write)
        ("add_", lambda t: t.add_(1)),
        ("mul_", lambda t: t.mul_(2)),
        ("add_", lambda t: t.__iadd__(1)),
        ("fill_", lambda t: t.fill_(1.0)),
        ("fill_", lambda t: t.zero_()),
        ("clamp_", lambda t: t.clamp_(0, 1)),
        ("copy_", lambda t: t.copy_(kg.ones(3, 4, device=device))),
        ("indexing (assignment)", lambda t: t.__setitem__(slice(None), 2.0)),
    ]
    for name, write in writes:
        with pytest.raises(kg.InplaceError, match="single memory location") as caught:
            write(expanded)
        assert str(caught.value).startswith(name + ":")
    assert_close(base, [[0.0] * 4])
    windows = kg.arange(5.0, device=device).unfold(0, 2, 1)  # overlapping windows
    with pytest.raises(RuntimeError, match=r"clone\(\)"):
        windows.mul_(2)
    # Views without shared elements stay writable: a row of the expanded tensor, windows
    # that do not overlap, a permuted or strided view.
    expanded[0].add_(1)
    assert_close(base, [[1.0] * 4])
    apart = kg.arange(6.0, device=device)
    apart.unfold(0, 2, 2).mul_(2)
    assert_close(apart, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0])
    grid = kg.zeros(3, 4, device=device)
    grid.T[::2].add_(1)
    assert grid.sum().item() == 6.0
    kg.zeros(4, 1, device=device).expand(4, 1).add_(1)  # expanding size-1 to 1 is a no-op


def test_overlaps_itself():
    from kernelgrad.shapes import overlaps_itself

    assert overlaps_itself((3, 4), (0, 1))
    assert overlaps_itself((4, 2), (1, 1))  # unfold(0, 2, 1) of 5 elements
    assert not overlaps_itself((3, 2), (2, 1))  # unfold(0, 2, 2)
    assert not overlaps_itself((4, 3), (1, 4))  # a transpose
    assert not overlaps_itself((1, 4), (0, 1))  # a size-1 dim never repeats an element
    assert not overlaps_itself((2, 3), (-3, -1))  # flipped


def test_direct_construction_is_refused():
    with pytest.raises(TypeError, match=r"kg\.tensor"):
        kg.Tensor([1, 2])


def test_import_is_light():
    code = (
        "import sys, kernelgrad; "
        "heavy = [m for m in ('numba', 'numba.cuda', 'cupy', 'torch') if m in sys.modules]; "
        "print(heavy)"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert output.stdout.strip() == "[]"
