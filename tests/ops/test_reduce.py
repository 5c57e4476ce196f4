"""Reductions against NumPy over none, one or several dims, with keepdim, on tensors
with random layouts; their gradients against central differences."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kernelgrad as kg
from tests.helpers import assert_close, check_grad, tensors

COVERED = {"sum", "max", "min", "argmax", "argmin"}


@st.composite
def tensor_and_dims(draw, device, dtype=np.float32, low=-3.0, high=3.0):
    values, t = draw(tensors(device, dtype=dtype, low=low, high=high))
    ndim = values.ndim
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none" or ndim == 0:
        dims = None
    elif kind == "int":
        dims = draw(st.integers(-ndim, ndim - 1))
    else:
        dims = tuple(
            draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
        )
    keepdim = draw(st.booleans())
    return values, t, dims, keepdim


def _np_axis(dims):
    return tuple(dims) if isinstance(dims, tuple) else dims


@given(data=st.data())
def test_sum_and_mean(data, device):
    values, t, dims, keepdim = data.draw(tensor_and_dims(device))
    reference = values.astype(np.float64)
    assert_close(
        t.sum(dim=dims, keepdim=keepdim),
        reference.sum(axis=_np_axis(dims), keepdims=keepdim).astype(np.float32),
        rtol=1e-5,
        atol=1e-5,
    )
    assert_close(
        t.mean(dim=dims, keepdim=keepdim),
        reference.mean(axis=_np_axis(dims), keepdims=keepdim).astype(np.float32),
        rtol=1e-5,
        atol=1e-5,
    )


@given(data=st.data())
def test_amax_and_amin(data, device):
    values, t, dims, keepdim = data.draw(tensor_and_dims(device))
    axis = _np_axis(dims)
    assert_close(t.amax(dim=dims, keepdim=keepdim), values.max(axis=axis, keepdims=keepdim))
    assert_close(t.amin(dim=dims, keepdim=keepdim), values.min(axis=axis, keepdims=keepdim))


@given(data=st.data())
def test_max_min_with_dim_return_values_and_indices(data, device):
    values, t = data.draw(tensors(device, low=-2, high=2))
    values = np.round(values)  # ties: the first occurrence wins, as in NumPy
    t = kg.tensor(values, device=device)
    if values.ndim == 0:
        return
    dim = data.draw(st.integers(0, values.ndim - 1))
    keepdim = data.draw(st.booleans())
    maximum = t.max(dim, keepdim=keepdim)
    assert_close(maximum.values, values.max(axis=dim, keepdims=keepdim))
    assert_close(maximum.indices, np.argmax(values, axis=dim, keepdims=keepdim))
    minimum = t.min(dim=dim, keepdim=keepdim)
    assert_close(minimum.values, values.min(axis=dim, keepdims=keepdim))
    assert_close(minimum.indices, np.argmin(values, axis=dim, keepdims=keepdim))


@given(data=st.data())
def test_argmax_argmin(data, device):
    values, t = data.draw(tensors(device, low=-2, high=2))
    values = np.round(values)
    t = kg.tensor(values, device=device)
    assert_close(t.argmax(), np.argmax(values))
    assert_close(t.argmin(), np.argmin(values))
    if values.ndim:
        dim = data.draw(st.integers(-values.ndim, values.ndim - 1))
        assert_close(t.argmax(dim), np.argmax(values, axis=dim))
        assert_close(t.argmin(dim, keepdim=True), np.argmin(values, axis=dim, keepdims=True))
    assert t.argmax().dtype == kg.int64


@given(data=st.data())
def test_var_std(data, device):
    values, t, dims, keepdim = data.draw(tensor_and_dims(device))
    axis = _np_axis(dims)
    reference = values.astype(np.float64)
    count = (
        reference.size
        if dims is None
        else np.prod([reference.shape[d] for d in np.atleast_1d(dims)])
    )
    if count < 2:
        return
    assert_close(
        t.var(dim=dims, keepdim=keepdim),
        reference.var(axis=axis, ddof=1, keepdims=keepdim).astype(np.float32),
        rtol=1e-4,
        atol=1e-5,
    )
    assert_close(
        t.std(dim=dims, correction=0, keepdim=keepdim),
        reference.std(axis=axis, keepdims=keepdim).astype(np.float32),
        rtol=1e-4,
        atol=1e-5,
    )


def test_var_unbiased_flag(device):
    t = kg.tensor([1.0, 2.0, 3.0, 4.0], device=device)
    assert_close(t.var(unbiased=False), np.var([1, 2, 3, 4]))
    assert_close(t.var(), np.var([1, 2, 3, 4], ddof=1))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_and_bool_sums_are_int64(dtype, device):
    values = np.arange(12).reshape(3, 4).astype(dtype)
    t = kg.tensor(values, device=device)
    assert t.sum().dtype == kg.int64
    assert_close(t.sum(0), values.sum(0).astype(np.int64))
    assert t.max().dtype == kg.as_dtype(values.dtype) if hasattr(kg, "as_dtype") else True
    assert_close(t.max(1).values, values.max(1))
    # PyTorch refuses the mean of integers and bools (it cannot infer the output dtype)
    with pytest.raises(RuntimeError, match=r"x\.float\(\)\.mean\(\)"):
        t.mean()
    assert t.mean(dtype=kg.float32).dtype == kg.float32
    assert_close(t.float().mean(0), values.astype(np.float32).mean(0))


def test_sum_dtype_argument(device):
    t = kg.tensor([1, 2, 3], device=device)
    assert t.sum(dtype=kg.float64).dtype == kg.float64


def test_sum_returns_the_dtype_asked_for(device):
    """`sum(dtype=kg.int32)` returned int64 (and `dtype=kg.bool` int64 too): the input
    was converted, then summed to int64 as every integer sum. PyTorch returns the dtype
    given: int32 (wrapping as an int32 sum does), bool (True where any is)."""
    t = kg.tensor([1, 2], device=device)
    assert t.sum(dtype=kg.int32).dtype == kg.int32 and t.sum(dtype=kg.int32).item() == 3
    assert kg.sum(t, 0, True, dtype=kg.int32).dtype == kg.int32
    assert kg.sum(t, 0, True, dtype=kg.int32).shape == (1,)
    flags = kg.tensor([[0, 0], [0, 5]], device=device).sum(1, dtype=kg.bool)
    assert flags.dtype == kg.bool and flags.cpu().tolist() == [False, True]
    assert kg.tensor([1.5, 2.5], device=device).sum(dtype=kg.int32).item() == 3  # 1 + 2
    wrapped = kg.tensor([2**31 - 1, 1], device=device).sum(dtype=kg.int32)
    assert wrapped.item() == -(2**31)
    assert kg.nansum(t, dtype=kg.int32).dtype == kg.int32
    assert t.sum(dtype=kg.int64).dtype == kg.int64


def test_large_reductions_split_across_threads(device, simulated):
    if simulated:
        pytest.skip("large reductions are exercised by the CUDA backend's own tests")
    rng = np.random.default_rng(0)
    values = rng.standard_normal(300_001).astype(np.float32)
    t = kg.tensor(values)
    assert_close(t.sum(), values.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
    assert_close(t.max(), values.max())
    assert_close(t.argmin(), values.argmin())
    wide = rng.standard_normal((3, 70_000)).astype(np.float32)
    assert_close(kg.tensor(wide).sum(1), wide.astype(np.float64).sum(1), rtol=1e-5, atol=1e-3)
    assert_close(kg.tensor(wide).argmax(1), wide.argmax(1))
    assert_close(kg.tensor(wide).T.sum(0), wide.astype(np.float64).sum(1), rtol=1e-5, atol=1e-3)


def test_nan_handling(device):
    t = kg.tensor([[1.0, math.nan, 3.0], [4.0, 5.0, 6.0]], device=device)
    assert_close(t.max(1).values, [math.nan, 6.0])
    assert_close(t.argmax(1), [1, 2])
    assert_close(t.sum(1), [math.nan, 15.0])
    assert_close(t.min(), math.nan)


def test_empty_reductions(device):
    empty = kg.zeros(0, 3, device=device)
    assert_close(empty.sum(0), [0.0, 0.0, 0.0])
    assert_close(empty.sum(), 0.0)
    with pytest.raises(kg.ShapeError, match="empty"):
        empty.max()
    with pytest.raises(kg.ShapeError, match="empty"):
        empty.argmax(0)


def test_bad_dims_name_the_problem(device):
    t = kg.zeros(2, 3, device=device)
    with pytest.raises(kg.ShapeError, match="out of range"):
        t.sum(2)
    with pytest.raises(kg.ShapeError, match="out of range"):
        t.max(dim=-3)


def test_any_all(device):
    t = kg.tensor([[0, 1], [0, 0]], device=device)
    assert t.any().item() is True
    assert t.all().item() is False
    assert_close(t.any(1), [True, False])
    assert_close((t == 0).all(0), [True, False])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.sum(),
        lambda x: x.sum(1),
        lambda x: x.sum((0, 2), keepdim=True),
        lambda x: x.mean(0),
        lambda x: x.var(1),
        lambda x: x.std(),
        lambda x: x.amax(1),
        lambda x: x.amin((0, 1)),
        lambda x: x.max(2).values,
        lambda x: x.min(0).values,
        lambda x: x.max(),
        lambda x: x.logsumexp(1),
        lambda x: x.softmax(-1),
        lambda x: x.log_softmax(1),
    ],
)
def test_reduction_gradients(fn, device):
    values = np.random.default_rng(3).standard_normal((2, 3, 4))
    check_grad(fn, values, device=device)


def test_max_gradient_is_shared_between_ties(device):
    t = kg.tensor([1.0, 3.0, 3.0], requires_grad=True, device=device)
    t.max().backward()
    assert_close(t.grad, [0.0, 0.5, 0.5])
    u = kg.tensor([[3.0, 3.0]], requires_grad=True, device=device)
    u.max(1).values.sum().backward()
    assert_close(u.grad, [[1.0, 0.0]])  # with dim: the returned index gets it


def test_softmax_is_stable_for_large_inputs(device):
    t = kg.tensor([[1000.0, 1000.0], [-1000.0, 0.0]], device=device)
    assert_close(t.softmax(1), [[0.5, 0.5], [0.0, 1.0]])
    assert_close(t.log_softmax(1), [[-math.log(2), -math.log(2)], [-1000.0, 0.0]])
    assert_close(t.logsumexp(1), [1000 + math.log(2), 0.0])


def test_argmax_when_every_value_equals_the_start_value(device):
    inf = float("inf")
    assert kg.tensor([[-inf, -inf, -inf]], device=device).argmax(dim=1).cpu().tolist() == [0]
    assert kg.tensor([[inf, inf]], device=device).argmin(dim=1).cpu().tolist() == [0]
    lowest = np.iinfo(np.int64).min
    assert kg.tensor([lowest, lowest], device=device).argmax().item() == 0


def test_repeated_and_out_of_range_dims_are_refused(device):
    """`sum(dim=(0, 0))` summed once, and `sum(1)` of a 0-d tensor returned it; PyTorch
    raises (RuntimeError "dim 0 appears multiple times", IndexError "Dimension out of
    range"). The dimension error is an IndexError too, as PyTorch's."""
    x = kg.ones(2, 3, device=device)
    with pytest.raises(kg.ShapeError, match=r"sum: dim 0 appears more than once"):
        x.sum(dim=(0, 0))
    with pytest.raises(kg.errors.DimensionError, match=r"amax: dim 1 appears more than once"):
        x.amax(dim=(1, -1))
    scalar = kg.tensor(1.0, device=device)
    with pytest.raises(IndexError, match="sum: dim 1 is out of range"):
        scalar.sum(1)
    with pytest.raises(IndexError, match="mean: dim -2 is out of range"):
        scalar.mean(-2)
    # 0 and -1 remain valid dims of a 0-d tensor, as in PyTorch.
    assert scalar.sum(0).item() == scalar.sum(-1).item() == scalar.amax((0,)).item() == 1.0


def test_exp_sums_of_empty_and_bool_tensors(device):
    """Fuzz findings: softmax, log_softmax and logsumexp of empty tensors raised "max:
    cannot reduce over an empty dimension" (PyTorch 2.13 returns an empty result, and
    -inf for logsumexp over an empty dim); logsumexp of a bool tensor failed in `x - max`
    (PyTorch: logsumexp([True, False]) = 1.3133)."""
    empty = kg.zeros(0, device=device)
    assert empty.softmax(0).shape == (0,)
    assert empty.log_softmax(0).shape == (0,)
    assert kg.zeros(3, 0, device=device).softmax(0).shape == (3, 0)
    assert_close(kg.zeros(2, 0, device=device).logsumexp(1), [-np.inf, -np.inf])
    assert_close(kg.zeros(0, 3, device=device).logsumexp(0), [-np.inf] * 3)
    assert kg.zeros(0, device=device).logsumexp(0).item() == -np.inf
    masks = kg.tensor([True, False], device=device)
    assert masks.logsumexp(0).item() == pytest.approx(np.log(1 + np.e), rel=1e-6)


def test_amax_of_nothing_names_amax(device):
    with pytest.raises(kg.ShapeError, match="amax: cannot reduce over an empty dimension"):
        kg.zeros(0, device=device).amax()
    with pytest.raises(kg.ShapeError, match="amin: cannot reduce"):
        kg.zeros(2, 0, device=device).amin(1)


def test_an_empty_dim_list_reduces_every_dim(device):
    """`sum(dim=[])` returned the tensor unreduced and `std(dim=())` all NaN; PyTorch 2.13
    reads an empty dim list as every dim for sum, mean, amax, amin, var, std (and
    nansum, nanmean, count_nonzero, var_mean, vector_norm), while any and all reduce
    nothing."""
    x = kg.tensor([[1.0, -2.0], [3.0, 4.0]], device=device)
    for dim in ([], ()):
        assert x.sum(dim=dim).cpu().tolist() == 6.0
        assert kg.sum(x, dim).cpu().tolist() == 6.0
        assert x.sum(dim, keepdim=True).cpu().tolist() == [[6.0]]
        assert x.mean(dim).item() == 1.5
        assert x.amax(dim).item() == 4.0 and x.amin(dim).item() == -2.0
        assert x.max(dim=dim).item() == 4.0 and kg.min(x, dim).item() == -2.0
        assert x.var(dim).item() == pytest.approx(np.var([1, -2, 3, 4], ddof=1))
        assert x.std(dim, keepdim=True).shape == (1, 1)
        assert x.std(dim).item() == pytest.approx(np.std([1, -2, 3, 4], ddof=1))
        assert x.logsumexp(dim, keepdim=True).shape == (1, 1)
        assert kg.nansum(x, dim).item() == 6.0
        assert kg.nanmean(x, dim).item() == 1.5
        assert kg.count_nonzero(x, dim).item() == 4
        assert kg.var_mean(x, dim)[1].item() == 1.5
        assert kg.linalg.vector_norm(x, 1, dim).item() == 10.0
        assert kg.tensor([1, 2], device=device).sum(dim).dtype == kg.int64
        assert x.any(dim).cpu().tolist() == [[True, True], [True, True]]
        assert (x > 0).all(dim).cpu().tolist() == [[True, False], [True, True]]
    grad = kg.ones(2, 2, device=device, requires_grad=True)
    grad.sum(dim=[]).backward()
    assert grad.grad.cpu().tolist() == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize(
    "name", ["sum", "mean", "amax", "amin", "nansum", "nanmean", "var", "std", "count_nonzero"]
)
@pytest.mark.parametrize("dim", [[], ()])
def test_an_empty_dim_list_matches_pytorch(name, dim, device):
    torch = pytest.importorskip("torch")
    values = [[1.0, -2.0], [3.0, 4.0]]
    got = getattr(kg, name)(kg.tensor(values, device=device), dim=dim)
    want = getattr(torch, name)(torch.tensor(values), dim=dim)
    assert got.shape == tuple(want.shape)
    assert got.item() == pytest.approx(want.item())


def test_max_and_min_of_two_tensors_are_elementwise(device):
    """`kg.max(a, b)` read the tensor `b` as `dim` (the method form `a.max(b)` worked);
    PyTorch's torch.max(a, b) and torch.max(a, other=b) are torch.maximum(a, b)."""
    a = kg.tensor([1.0, 5.0], device=device)
    b = kg.tensor([3.0, 2.0], device=device)
    assert kg.max(a, b).cpu().tolist() == [3.0, 5.0]
    assert kg.min(a, b).cpu().tolist() == [1.0, 2.0]
    assert kg.max(a, other=b).cpu().tolist() == [3.0, 5.0]
    assert a.min(other=b).cpu().tolist() == [1.0, 2.0]
    assert kg.max(a, kg.tensor(4.0, device=device)).cpu().tolist() == [4.0, 5.0]
    mixed = kg.max(kg.tensor([1, 5], device=device), kg.tensor([2.5], device=device))
    assert mixed.dtype == kg.float32 and mixed.cpu().tolist() == [2.5, 5.0]
    values, indices = kg.max(kg.tensor([[1, 5], [7, 2]], device=device), 1)  # still a dim
    assert values.cpu().tolist() == [5, 7] and indices.cpu().tolist() == [1, 0]
    with pytest.raises(kg.errors.ArgumentError, match="keepdim"):
        kg.max(a, b, True)
    source = kg.tensor([1.0, 5.0], device=device, requires_grad=True)
    kg.max(source, b).sum().backward()
    assert source.grad.cpu().tolist() == [0.0, 1.0]
