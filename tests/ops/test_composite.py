"""The operations of ops/composite.py and PyTorch's tensor bookkeeping: the edges and
errors that tests/compat/test_op_suite.py (values and gradients of ordinary inputs)
does not reach."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close, check_grad


# --- values at the edges -------------------------------------------------------------------------
def test_rounding_keeps_the_dtype_halves_go_to_even_and_large_values_pass_through():
    values = [0.5, 1.5, 2.5, -0.5, -2.5, 2.0**60, -math.inf, math.nan, -0.3]
    assert_close(kg.round(kg.tensor(values, dtype=kg.float64)), np.round(values))
    assert_close(kg.floor(kg.tensor(values)), np.floor(np.float32(values)))
    assert_close(kg.ceil(kg.tensor(values)), np.ceil(np.float32(values)))
    assert_close(kg.trunc(kg.tensor(values)), np.trunc(np.float32(values)))
    integers = kg.tensor([3, -2])
    assert kg.floor(integers).dtype == kg.int64 and kg.floor(integers).tolist() == [3, -2]


def test_rounding_gradient_is_zero_even_for_an_infinite_incoming_gradient():
    x = kg.tensor([1.5, -2.5], requires_grad=True)
    (kg.floor(x) * kg.tensor([math.inf, 1.0])).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_inverse_trigonometric_functions_are_nan_outside_their_domain():
    assert_close(kg.asin(kg.tensor([2.0, -1.0])), np.arcsin([np.nan, -1.0]))
    assert_close(kg.acosh(kg.tensor([0.5])), [np.nan])
    assert kg.atanh(kg.tensor([1.0, -1.0])).tolist() == [math.inf, -math.inf]


def test_integer_division_rounding_modes_match_python_and_refuse_zero():
    x = kg.tensor([-7, 7, -6, 5])
    y = kg.tensor([2, -2, 3, 5])
    assert kg.div(x, y, rounding_mode="floor").tolist() == [-4, -4, -2, 1]
    assert kg.div(x, y, rounding_mode="trunc").tolist() == [-3, -3, -2, 1]
    assert kg.fmod(x, y).tolist() == [
        math.fmod(a, b) for a, b in zip([-7, 7, -6, 5], [2, -2, 3, 5])
    ]
    with pytest.raises(ZeroDivisionError):
        kg.div(x, 0, rounding_mode="trunc")
    with pytest.raises(ValueError, match="rounding_mode"):
        kg.div(x, y, rounding_mode="round")


def test_copysign_reads_the_sign_of_negative_zero():
    assert kg.copysign(kg.tensor([1.0, 1.0]), kg.tensor([-0.0, 0.0])).tolist() == [-1.0, 1.0]


def test_logaddexp_of_two_minus_infinities_is_minus_infinity():
    result = kg.logaddexp(kg.tensor([-math.inf, 1000.0]), kg.tensor([-math.inf, 1000.0]))
    assert_close(result, [-math.inf, 1000.0 + math.log(2)])


def test_isclose_and_allclose_follow_pytorch_for_infinities_and_nan():
    x = kg.tensor([math.inf, -math.inf, math.nan, 1.0])
    y = kg.tensor([math.inf, math.inf, math.nan, 1.0 + 1e-6])
    assert kg.isclose(x, y).tolist() == [True, False, False, True]
    assert kg.isclose(x, y, equal_nan=True).tolist() == [True, False, True, True]
    assert kg.allclose(x[3:], y[3:]) is True


def test_prod_and_cumprod_gradients_through_zeros():
    check_grad(lambda t: t.prod(1), np.array([[0.0, 2.0, 3.0], [1.5, 0.0, 0.0]]))
    check_grad(lambda t: t.cumprod(1), np.array([[0.0, 2.0, 3.0], [1.5, -1.0, 0.5]]))
    assert kg.tensor([[1, 2, 3]], dtype=kg.int32).prod().dtype == kg.int64


def test_scans_on_long_rows_match_numpy():
    values = np.random.default_rng(0).standard_normal((3, 37))
    t = kg.tensor(values)
    assert_close(t.cumsum(1), np.cumsum(values, 1), rtol=1e-5, atol=1e-5)
    assert_close(t.cummax(1).values, np.maximum.accumulate(values, 1))
    expected = np.log(np.cumsum(np.exp(values), 1))
    assert_close(t.logcumsumexp(1), expected, rtol=1e-5, atol=1e-5)
    assert_close(t.cummin(1).indices, _running_argmin(values))


def _running_argmin(values: np.ndarray) -> np.ndarray:
    result = np.zeros(values.shape, np.int64)
    for row in range(values.shape[0]):
        for k in range(values.shape[1]):
            result[row, k] = int(np.argmin(values[row, : k + 1]))
    return result


def test_sort_is_stable_puts_nan_last_ascending_and_first_descending():
    x = kg.tensor([2.0, math.nan, 1.0, 2.0])
    assert kg.sort(x).indices.tolist() == [2, 0, 3, 1]
    assert kg.sort(x, descending=True).indices.tolist() == [1, 0, 3, 2]


def test_topk_and_kthvalue_refuse_k_out_of_range():
    with pytest.raises(ValueError, match=r"topk: k \(5\)"):
        kg.topk(kg.ones(4), 5)
    with pytest.raises(ValueError, match="kthvalue"):
        kg.kthvalue(kg.ones(4), 0)


def test_einsum_checks_its_operands():
    with pytest.raises(ValueError, match="2 operand"):
        kg.einsum("ij,jk->ik", kg.ones(2, 2))
    with pytest.raises(RuntimeError, match="subscript 'j'"):
        kg.einsum("ij,jk->ik", kg.ones(2, 3), kg.ones(4, 2))
    with pytest.raises(RuntimeError, match="name 3 dims"):
        kg.einsum("ijk->i", kg.ones(2, 3))
    assert_close(kg.einsum("ii->i", kg.eye(3) * 2), [2.0, 2.0, 2.0])
    assert_close(kg.einsum("i,i->", kg.ones(3), kg.ones(3)), 3.0)


def test_nonzero_and_repeat_interleave_of_empty_selections():
    assert kg.nonzero(kg.zeros(2, 3)).shape == (0, 2)
    assert kg.tensor([1.0, 2.0]).repeat_interleave(kg.tensor([0, 0])).shape == (0,)
    assert kg.repeat_interleave(kg.tensor([2, 1])).tolist() == [0, 0, 1]


def test_masked_fill_keeps_the_dtype_and_checks_its_arguments():
    x = kg.tensor([1, 2, 3])
    assert x.masked_fill(x > 1, 0).tolist() == [1, 0, 0]
    assert x.masked_fill(x > 1, 0).dtype == kg.int64
    with pytest.raises(TypeError, match="boolean masks"):
        x.masked_fill(x, 0)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        kg.ones(2, 3).masked_fill(kg.ones(4, 2, 3, dtype=kg.bool), 0.0)
    with pytest.raises(RuntimeError, match=r"\(2, 3\) and \(3, 3\)"):
        kg.ones(2, 3).masked_fill(kg.ones(3, 3, dtype=kg.bool), 0.0)


def test_masked_fill_in_place_is_recorded_by_autograd():
    x = kg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 2
    y.masked_fill_(x < 0, 0.0)
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 2.0]


def test_tril_and_triu_need_a_matrix():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        kg.tril(kg.ones(3))


def test_multinomial_and_randperm_are_reproducible_and_follow_the_weights():
    kg.manual_seed(3)
    first = kg.multinomial(kg.tensor([0.1, 0.0, 0.9]), 400, replacement=True)
    kg.manual_seed(3)
    assert kg.multinomial(kg.tensor([0.1, 0.0, 0.9]), 400, replacement=True).tolist() == (
        first.tolist()
    )
    counts = np.bincount(first.numpy(), minlength=3)
    assert counts[1] == 0 and 300 < counts[2] < 395
    draws = kg.multinomial(kg.tensor([[1.0, 1.0, 0.0, 1.0]]), 3)
    assert sorted(draws[0].tolist()) == [0, 1, 3]  # without replacement: each once
    with pytest.raises(ValueError, match="without replacement"):
        kg.multinomial(kg.tensor([1.0, 0.0]), 2)
    kg.manual_seed(5)
    permutation = kg.randperm(10)
    kg.manual_seed(5)
    assert kg.randperm(10).tolist() == permutation.tolist()
    assert sorted(permutation.tolist()) == list(range(10))


# --- tensor bookkeeping ---------------------------------------------------------------------------
def test_size_is_a_tuple_with_pytorch_extras():
    size = kg.zeros(2, 3, 4).size()
    assert isinstance(size, tuple) and isinstance(size, kg.Size)
    assert size == (2, 3, 4) and size.numel() == 24
    assert isinstance(size[1:], kg.Size) and size[1:] == (3, 4) and size[-1] == 4
    assert repr(size) == "kg.Size([2, 3, 4])"


def test_shape_is_a_size_like_torch_size(device):
    x = kg.zeros(2, 3, 4, device=device)
    assert type(x.shape) is kg.Size and x.shape == x.size() == (2, 3, 4)
    assert x.shape.numel() == x.numel() == 24
    assert type(x.shape[1:]) is kg.Size and x.shape[1:].numel() == 12 and x.shape[-1] == 4
    assert type(x[0].shape) is kg.Size and x.sum().shape.numel() == 1
    assert kg.zeros(2, 3, 4).reshape(x.shape[:1] + (12,)).shape == (2, 12)
    x.data = kg.ones(5)  # the shape follows the new data
    assert x.shape == (5,) and type(x.shape) is kg.Size
    torch = pytest.importorskip("torch")
    t = torch.zeros(2, 3, 4)
    assert type(t.shape) is torch.Size and t.shape.numel() == kg.zeros(2, 3, 4).shape.numel()
    assert repr(kg.zeros(2, 3).shape) == repr(torch.zeros(2, 3).shape).replace("torch", "kg")


def test_new_tensors_take_dtype_and_device_from_the_tensor():
    x = kg.zeros(2, dtype=kg.float64)
    assert x.new_zeros(3).dtype == kg.float64 and x.new_ones((2, 2)).shape == (2, 2)
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0]
    assert x.new_tensor([1, 2]).dtype == kg.float64
    assert x.new_zeros(2, dtype=kg.int32).dtype == kg.int32


def test_type_converts_and_names_the_type():
    x = kg.tensor([1.5])
    assert x.type() == "kernelgrad.FloatTensor"
    assert x.type(kg.int64).dtype == kg.int64
    assert x.type("torch.DoubleTensor").dtype == kg.float64


def test_integer_mean_is_refused_with_the_fix():
    with pytest.raises(RuntimeError, match=r"x\.float\(\)\.mean\(\)"):
        kg.tensor([1, 2]).mean()
    assert kg.mean(kg.tensor([1, 2]), dtype=kg.float32).item() == 1.5


def test_axis_is_an_alias_of_dim():
    x = kg.tensor([[1.0, 2.0], [3.0, 5.0]])
    assert kg.sum(x, axis=1).tolist() == [3.0, 8.0]
    assert x.mean(axis=0).tolist() == [2.0, 3.5]
    with pytest.raises(ValueError, match="not both"):
        x.sum(0, axis=1)


def test_indexing_with_a_range():
    x = kg.arange(12).reshape(3, 4)
    assert x[range(1, 3)].tolist() == x[1:3].tolist()
    assert x[:, range(0, 4, 2)].tolist() == [[0, 2], [4, 6], [8, 10]]


def test_from_numpy_shares_memory_with_strided_arrays_and_refuses_negative_strides():
    array = np.arange(12.0).reshape(3, 4)
    transposed = kg.from_numpy(array.T)
    stepped = kg.from_numpy(array[:, ::2])
    array[2, 2] = 100.0
    assert transposed[2, 2].item() == 100.0 and stepped[2, 1].item() == 100.0
    stepped[0, 1] = -1.0  # writes through to the array
    assert array[0, 2] == -1.0
    with pytest.raises(ValueError, match="negative"):
        kg.from_numpy(array[::-1])


def test_from_numpy_of_a_read_only_array_shares_it_and_warns_that_writes_fail():
    array = np.arange(4.0)
    array.flags.writeable = False
    with pytest.warns(UserWarning, match=r"read-only.*kg\.tensor\(array\)"):
        shared = kg.from_numpy(array)
    assert shared.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert np.shares_memory(shared.numpy(), array)


# --- names PyTorch has and kernelgrad does not ----------------------------------------------------
def test_missing_names_give_advice_instead_of_a_spelling_guess():
    with pytest.raises(AttributeError, match="float32 and float64 only") as error:
        kg.tensor([1.0]).half()
    assert "Did you mean" not in str(error.value)
    with pytest.raises(AttributeError, match=r"no vmap"):
        kg.vmap  # noqa: B018
    with pytest.raises(AttributeError, match=r"torch\.Tensor\.not_a_method"):
        kg.tensor([1.0]).not_a_method()
    assert not hasattr(kg.tensor([1.0]), "__cuda_array_interface__")  # CPU tensors lack it


def test_random_draws_are_the_same_on_every_device(device):
    draws = {}
    for where in ("cpu", device):
        kg.manual_seed(11)
        weights = kg.tensor([[0.2, 0.3, 0.5], [1.0, 0.0, 1.0]], device=where)
        draws[where] = (
            kg.randperm(8, device=where).cpu().tolist(),
            kg.multinomial(weights, 2).cpu().tolist(),
            kg.multinomial(weights, 3, replacement=True).cpu().tolist(),
        )
    assert draws[device] == draws["cpu"]


def test_fill_and_copy_into_a_tensor_in_a_graph_are_recorded_as_in_pytorch():
    x = kg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.fill_(5.0)  # y stays in the graph: a zero gradient to what it held
    assert y.requires_grad
    (y * x).sum().backward()
    assert x.grad.tolist() == [5.0, 5.0]
    source = kg.tensor([1.0, 2.0], requires_grad=True)
    target = kg.zeros(2, 2, requires_grad=True) * 1
    target.copy_(source)  # broadcast: the gradient is summed back to the source
    (target * kg.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert source.grad.tolist() == [4.0, 6.0]
    with pytest.raises(RuntimeError, match="cannot write a value of shape"):
        (kg.zeros(2, requires_grad=True) * 1).copy_(kg.ones(3, 2, requires_grad=True))


def test_tensor_uniform_and_normal_fill_in_place_and_follow_pytorch_in_graphs():
    kg.manual_seed(0)
    w = kg.empty(2000)
    assert w.uniform_(-0.5, 0.25) is w
    values = w.numpy()
    assert values.min() >= -0.5 and values.max() < 0.25 and abs(values.mean() + 0.125) < 0.02
    w.normal_(3.0, 0.5)
    assert abs(w.numpy().mean() - 3.0) < 0.05 and abs(w.numpy().std() - 0.5) < 0.05
    leaf = kg.zeros(3, requires_grad=True)
    with pytest.raises(kg.errors.InplaceError, match="uniform_"):
        leaf.uniform_()
    with kg.no_grad():
        leaf.uniform_(2.0, 3.0)
    assert leaf.requires_grad and (leaf.numpy() >= 2.0).all()
    # in a graph the filled tensor passes no gradient back to what it held
    x = kg.ones(3, requires_grad=True)
    y = x * 2.0
    y.normal_()
    (y * 1.0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


# --- eager math that lost exactness or NaN (each checked against closed values) ------------------
NAN, INF = math.nan, math.inf
# dividends and divisors for fmod and the rounding divisions: signs, zeros, tiny and huge
# magnitudes, infinities and NaN
EDGES = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 2.5, -7.0, 5.5, 1e30, -1e-30, INF, -INF, NAN]


def _grid(dtype):
    x, y = np.meshgrid(np.array(EDGES, dtype), np.array(EDGES, dtype))
    return x.ravel(), y.ravel()


def _same(got, want):
    """Equal as floats, NaN equal to NaN and the signs of zeros compared."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    same &= (np.signbit(got) == np.signbit(want)) | np.isnan(want)
    assert same.all(), (got[~same], want[~same])


def test_median_is_nan_with_the_index_of_the_first_nan_where_a_nan_is_present(device):
    assert math.isnan(kg.tensor([4.0, NAN, 3.0, 2.0], device=device).median().item())
    x = kg.tensor([[4.0, NAN, 3.0, NAN], [1.0, 2.0, 3.0, 0.0]], device=device)
    values, indices = x.median(1)
    _same(values.cpu().numpy(), [NAN, 1.0])
    assert indices.cpu().tolist() == [1, 0]
    values, indices = x.median(0, keepdim=True)
    _same(values.cpu().numpy(), [[1.0, NAN, 3.0, NAN]])
    assert indices.cpu().tolist() == [[1, 0, 0, 0]]
    assert kg.tensor([[3, 1, 2]], device=device).median(1).values.cpu().tolist() == [2]


def test_cummax_and_cummin_carry_nan_forward_with_the_index_of_the_last_nan(device):
    x = kg.tensor([1.0, NAN, 3.0, NAN, 0.0], device=device)
    for op in (kg.cummax, kg.cummin):
        values, indices = op(x, 0)
        _same(values.cpu().numpy(), [1.0, NAN, NAN, NAN, NAN])
        assert indices.cpu().tolist() == [0, 1, 1, 3, 3]
    values, indices = kg.cummin(kg.tensor([[2.0, 1.0, 2.0, 1.0]], device=device), 1)
    assert values.cpu().tolist() == [[2.0, 1.0, 1.0, 1.0]]
    assert indices.cpu().tolist() == [[0, 1, 1, 3]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fmod_of_floats_is_c_fmod_exactly(dtype, device):
    x, y = _grid(dtype)
    got = kg.fmod(kg.tensor(x, device=device), kg.tensor(y, device=device))
    with np.errstate(all="ignore"):
        want = np.fmod(x.astype(np.float64), y.astype(np.float64)).astype(dtype)  # exact
    _same(got.cpu().numpy(), want)
    small = kg.fmod(kg.tensor([1.0, 5.5, 7.0], dtype=kg.float64, device=device), 0.1)
    assert small.cpu().tolist() == [math.fmod(v, 0.1) for v in (1.0, 5.5, 7.0)]
    by_inf = kg.fmod(kg.tensor([1.0, -5.3], device=device), INF).cpu().tolist()
    assert by_inf == [1.0, float(np.float32(-5.3))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floor_division_is_pythons_floor_division(dtype, device):
    x, y = _grid(dtype)
    with np.errstate(all="ignore"):  # NumPy's // is Python's (and IEEE by zero)
        want = np.floor_divide(x, y)
        assert np.array_equal(want[y != 0], [a // b for a, b in zip(x[y != 0], y[y != 0])], True)
    xs, ys = kg.tensor(x, device=device), kg.tensor(y, device=device)
    _same(kg.floor_divide(xs, ys).cpu().numpy(), want)
    _same(kg.div(xs, ys, rounding_mode="floor").cpu().numpy(), want)
    _same((xs // ys).cpu().numpy(), want)
    one = kg.tensor([1.0, 1.0, INF], device=device)
    quotient = kg.floor_divide(one, kg.tensor([0.1, -INF, 0.1], device=device)).cpu().tolist()
    assert quotient[:2] == [9.0, -1.0] and math.isnan(quotient[2])


def test_floor_division_of_floats_has_a_zero_gradient():
    x = kg.tensor([1.0, 3.0], dtype=kg.float64, requires_grad=True)
    result = kg.div(x, 0.1, rounding_mode="floor")
    assert result.requires_grad and result.tolist() == [1.0 // 0.1, 3.0 // 0.1]
    result.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_rounding_divisions_and_fmod_match_pytorch(device):
    torch = pytest.importorskip("torch")
    for dtype in ("float32", "float64"):
        x, y = _grid(dtype)
        xs, ys = kg.tensor(x, device=device), kg.tensor(y, device=device)
        tx, ty = torch.tensor(x), torch.tensor(y)
        for mode in ("floor", "trunc"):
            got = kg.div(xs, ys, rounding_mode=mode).cpu().numpy()
            want = torch.div(tx, ty, rounding_mode=mode).numpy()
            np.testing.assert_array_equal(got, want)  # (the sign of zero is not compared)
        finite = np.abs(y) > 1e-30  # PyTorch's float32 fmod gives NaN for denormal results
        got = kg.fmod(xs, ys).cpu().numpy()[finite]
        np.testing.assert_array_equal(got, torch.fmod(tx, ty).numpy()[finite])


def test_xlogy_with_a_number_as_y(device):
    x = kg.tensor([0.0, 1.0], device=device)
    assert kg.xlogy(x, 0).cpu().tolist() == [0.0, -INF]
    assert kg.xlogy(x, INF).cpu().tolist() == [0.0, INF]
    assert all(math.isnan(v) for v in kg.xlogy(x, NAN).cpu().tolist())
    result = kg.xlogy(kg.tensor([2.5], dtype=kg.float64, device=device), 2)
    assert result.dtype == kg.float64 and result.item() == 2.5 * math.log(2)
    assert kg.xlogy(kg.tensor([1, 2], device=device), 2).dtype == kg.float32


def test_atan2_in_float64_is_c_atan2(device):
    x, y = _grid("float64")
    got = kg.atan2(kg.tensor(y, device=device), kg.tensor(x, device=device)).cpu().numpy()
    want = [math.atan2(b, a) for a, b in zip(x, y)]
    np.testing.assert_allclose(got, want, rtol=4e-16, atol=0)
    _same(got, want)  # the signs of zero too
    axis = kg.atan2(
        kg.tensor([1.0, -1.0], dtype=kg.float64), kg.tensor([0.0, 0.0], dtype=kg.float64)
    )
    assert axis.tolist() == [math.pi / 2, -math.pi / 2]


def test_log2_log10_and_exp2_are_exact_at_the_powers(device):
    powers = np.arange(-1074, 1024)
    got = kg.log2(kg.tensor(2.0**powers, dtype=kg.float64, device=device)).cpu().numpy()
    np.testing.assert_array_equal(got, powers)
    powers32 = np.arange(-149, 128)
    got = kg.log2(kg.tensor(2.0**powers32, dtype=kg.float32, device=device)).cpu().numpy()
    np.testing.assert_array_equal(got, powers32)
    tens = np.arange(0, 23)  # the powers of ten a float64 holds exactly
    got = kg.log10(kg.tensor(10.0**tens, dtype=kg.float64, device=device)).cpu().numpy()
    np.testing.assert_array_equal(got, tens)
    got = kg.log10(kg.tensor(10.0 ** tens[:11], dtype=kg.float32, device=device)).cpu().numpy()
    np.testing.assert_array_equal(got, tens[:11])
    assert kg.log10(kg.tensor([0.1], dtype=kg.float64, device=device)).item() == -1.0
    for dtype, low, high in ((kg.float32, -149, 128), (kg.float64, -1074, 1024)):
        exponents = np.arange(low - 2, high + 2)
        got = kg.exp2(kg.tensor(exponents, dtype=dtype, device=device)).cpu().numpy()
        with np.errstate(over="ignore"):
            want = np.ldexp(np.ones(exponents.shape, dtype.numpy), exponents)
        np.testing.assert_array_equal(got, want)
    assert kg.exp2(kg.tensor([15.0], device=device)).long().cpu().tolist() == [32768]
    ends = kg.exp2(kg.tensor([NAN, INF, -INF, 0.5], dtype=kg.float64, device=device)).cpu()
    np.testing.assert_allclose(ends.numpy(), [NAN, INF, 0.0, math.sqrt(2)], rtol=3e-16)


def test_hypot_neither_overflows_nor_underflows(device):
    got = kg.hypot(kg.tensor([1e30, 1e-30], device=device), kg.tensor([1e30, 1e-30], device=device))
    want = [math.hypot(1e30, 1e30), math.hypot(1e-30, 1e-30)]
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-7)
    mixed = kg.hypot(
        kg.tensor([0.1], dtype=kg.float64, device=device), kg.tensor([0.3], device=device)
    )
    assert mixed.dtype == kg.float64
    assert mixed.item() == math.hypot(0.1, float(np.float32(0.3)))
    ends = kg.hypot(kg.tensor([INF, NAN], device=device), kg.tensor([NAN, -INF], device=device))
    assert ends.cpu().tolist() == [INF, INF]


def test_copysign_promotes_both_operands_and_reads_the_sign_bit_of_nan(device):
    f64 = kg.tensor([-1.0], dtype=kg.float64, device=device)
    assert kg.copysign(kg.tensor([1], device=device), f64).dtype == kg.float64
    assert kg.copysign(kg.tensor([1.0], device=device), f64).dtype == kg.float64
    assert kg.copysign(kg.tensor([1, 2], device=device), 1).dtype == kg.float32
    negative_nan = kg.tensor(np.array([-np.nan]), device=device)
    assert kg.copysign(kg.tensor([3.0], device=device), negative_nan).cpu().tolist() == [-3.0]
    assert kg.copysign(kg.tensor([3.0], device=device), -NAN).cpu().tolist() == [-3.0]


def test_integer_prod_and_scans_keep_the_requested_dtype():
    x = kg.tensor([1, 2, 3])
    for result in (
        x.prod(dtype=kg.int32),
        x.cumsum(0, dtype=kg.int32),
        x.cumprod(0, dtype=kg.int32),
    ):
        assert result.dtype == kg.int32
    assert x.prod(dtype=kg.int32).item() == 6 and x.cumprod(0, dtype=kg.int32).tolist() == [1, 2, 6]
    assert x.to(kg.int32).prod().dtype == kg.int64  # without a dtype: int64, as PyTorch
    assert kg.tensor([True, True]).cumsum(0, dtype=kg.float64).dtype == kg.float64
