"""The primitives of ops/special.py (special functions, bit operations) and the in-place
forms bound by ops/torch_math.py: values against Python's math module, NumPy and PyTorch,
the edge values PyTorch defines, the dtype errors, and the in-place rule with autograd.
Gradients of the new functions against PyTorch's are in tests/compat/test_op_suite.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ArgumentError, DTypeError

# Primitives this module tests (checked by tests/test_registry.py).
COVERED = {
    "lgamma",
    "digamma",
    "polygamma",
    "erfc",
    "erfinv",
    "i0",
    "i1",
    "igamma",
    "frexp_mantissa",
    "frexp_exponent",
    "nextafter",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "gcd",
}

X = np.array([-2.5, -0.7, 0.3, 1.0, 1.5, 4.0, 12.0], np.float32)


def _t(values, device, **kwargs):
    return kg.tensor(np.asarray(values), device=device, **kwargs)


def test_lgamma_and_erfc_match_math(device):
    x = _t(X, device)
    np.testing.assert_allclose(
        kg.lgamma(x).cpu().numpy(), [math.lgamma(v) for v in X.astype(float)], rtol=2e-6, atol=1e-6
    )
    np.testing.assert_allclose(
        kg.erfc(x).cpu().numpy(), [math.erfc(v) for v in X.astype(float)], rtol=2e-6, atol=1e-7
    )
    # the poles: lgamma is inf at the non-positive integers, as in PyTorch
    assert kg.lgamma(_t([0.0, -3.0], device)).cpu().tolist() == [math.inf, math.inf]


def test_digamma_polygamma_at_known_values(device):
    euler = 0.5772156649015329
    x = _t([1.0, 0.5, 2.0], device, dtype=kg.float64)
    np.testing.assert_allclose(
        kg.digamma(x).cpu().numpy(), [-euler, -euler - 2 * math.log(2), 1 - euler], rtol=1e-12
    )
    # trigamma(1) = pi^2/6, psi''(1) = -2 zeta(3), psi'(0.5) = pi^2/2
    np.testing.assert_allclose(
        kg.polygamma(1, x).cpu().numpy()[[0, 1]], [math.pi**2 / 6, math.pi**2 / 2]
    )
    np.testing.assert_allclose(kg.polygamma(2, x[:1]).cpu().numpy(), [-2 * 1.2020569031595942])
    assert kg.polygamma(0, x).cpu().tolist() == kg.digamma(x).cpu().tolist()
    edges = kg.digamma(_t([0.0, -2.0], device)).cpu().tolist()
    assert edges[0] == -math.inf and math.isnan(edges[1])


def test_erfinv_inverts_erf(device):
    y = _t([-0.999, -0.5, 0.0, 0.25, 0.9999], device, dtype=kg.float64)
    np.testing.assert_allclose(
        kg.erf(kg.erfinv(y)).cpu().numpy(), y.cpu().numpy(), rtol=1e-13, atol=1e-15
    )
    ends = kg.erfinv(_t([1.0, -1.0, 1.5], device)).cpu().tolist()
    assert ends[0] == math.inf and ends[1] == -math.inf and math.isnan(ends[2])


def test_bessel_and_incomplete_gamma(device):
    x = _t([0.0, 0.5, 3.0], device, dtype=kg.float64)
    np.testing.assert_allclose(kg.i0(x).cpu().numpy(), np.i0(x.cpu().numpy()), rtol=1e-12)
    np.testing.assert_allclose(kg.special.i1(x).cpu().numpy()[0], 0.0)
    a = _t([1.0, 2.0, 0.5], device, dtype=kg.float64)
    z = _t([0.7, 3.0, 2.0], device, dtype=kg.float64)
    # P(1, x) = 1 - exp(-x); P(2, x) = 1 - (1 + x) exp(-x); P(1/2, x) = erf(sqrt(x))
    want = [1 - math.exp(-0.7), 1 - 4 * math.exp(-3.0), math.erf(math.sqrt(2.0))]
    np.testing.assert_allclose(kg.igamma(a, z).cpu().numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(kg.igammac(a, z).cpu().numpy(), 1 - np.array(want), rtol=1e-11)


def test_frexp_ldexp_nextafter(device):
    x = _t([8.0, -3.0, 0.0, 0.1], device)
    mantissa, exponent = kg.frexp(x)
    assert exponent.dtype == kg.int32
    m, e = np.frexp(x.cpu().numpy())
    np.testing.assert_array_equal(mantissa.cpu().numpy(), m)
    np.testing.assert_array_equal(exponent.cpu().numpy(), e)
    np.testing.assert_array_equal(kg.ldexp(mantissa, exponent).cpu().numpy(), x.cpu().numpy())
    for dtype in (kg.float32, kg.float64):
        a = _t([1.0, 0.0, 2.0, -1.0, 1.0], device, dtype=dtype)
        b = _t([0.0, 1.0, 3.0, -2.0, 1.0], device, dtype=dtype)
        np.testing.assert_array_equal(
            kg.nextafter(a, b).cpu().numpy(), np.nextafter(a.cpu().numpy(), b.cpu().numpy())
        )


def test_bit_operations_match_numpy(device):
    rng = np.random.default_rng(0)
    for dtype in (np.int32, np.int64):
        a = rng.integers(-100, 100, 6).astype(dtype)
        b = rng.integers(-100, 100, 6).astype(dtype)
        x, y = _t(a, device), _t(b, device)
        np.testing.assert_array_equal((x & y).cpu().numpy(), a & b)
        np.testing.assert_array_equal((x | y).cpu().numpy(), a | b)
        np.testing.assert_array_equal((x ^ y).cpu().numpy(), a ^ b)
        np.testing.assert_array_equal((~x).cpu().numpy(), ~a)
        np.testing.assert_array_equal(kg.gcd(x, y).cpu().numpy(), np.gcd(a, b))
        np.testing.assert_array_equal(kg.lcm(x, y).cpu().numpy(), np.lcm(a, b))
        shifts = _t(np.array([0, 1, 5, 31, -1, 64], dtype), device)
        bits = 8 * np.dtype(dtype).itemsize
        left = [
            0 if s < 0 or s >= bits else int(np.array(v, dtype) << s)
            for v, s in zip(a, shifts.cpu().tolist())
        ]
        right = [
            v >> (bits - 1) if s < 0 or s >= bits else v >> s
            for v, s in zip(a, shifts.cpu().tolist())
        ]
        assert (x << shifts).cpu().tolist() == left
        assert (x >> shifts).cpu().tolist() == right
    masks = _t([True, False, True], device)
    assert (masks & _t([True, True, False], device)).dtype == kg.bool
    assert (~masks).cpu().tolist() == [False, True, False]
    assert kg.bitwise_xor(masks, True).cpu().tolist() == [False, True, False]


def test_bit_operations_refuse_floats(device):
    x = _t([1.0, 2.0], device)
    for fn in (kg.bitwise_and, kg.bitwise_or, kg.gcd, kg.bitwise_left_shift):
        with pytest.raises(DTypeError, match="integer"):
            fn(x, x)
    with pytest.raises(TypeError):
        ~x  # noqa: B018
    with pytest.raises(RuntimeError):
        kg.nextafter(_t([1, 2], device), _t([1, 2], device))


def test_gradient_errors_and_argument_checks():
    a = kg.tensor([1.0, 2.0], requires_grad=True)
    y = kg.igamma(a, kg.tensor([0.5, 1.0]))
    with pytest.raises(NotImplementedError, match="first argument"):
        y.sum().backward()
    with pytest.raises(ArgumentError):
        kg.polygamma(-1, kg.tensor([1.0]))
    with pytest.raises(ArgumentError, match=r"\(p-1\)/2"):
        kg.mvlgamma(kg.tensor([0.5]), 3)
    with pytest.raises(AttributeError, match="int8"):
        kg.ones(2).char()


# --- in-place forms ------------------------------------------------------------------------------
# (method, arguments) pairs: each name_ must equal the out-of-place name on a copy
INPLACE = [
    ("acos", ()),
    ("asinh", ()),
    ("atan2", ("other",)),
    ("arctan2", ("other",)),
    ("hypot", ("other",)),
    ("lerp", ("other", 0.3)),
    ("fmod", (0.7,)),
    ("remainder", (0.7,)),
    ("copysign", ("other",)),
    ("cumsum", (1,)),
    ("xlogy", ("positive",)),
    ("true_divide", ("positive",)),
    ("floor_divide", ("positive",)),
    ("lgamma", ()),
    ("digamma", ()),
    ("erfc", ()),
    ("erfinv", ()),
    ("i0", ()),
    ("logaddexp", ("other",)),
    ("fmax", ("other",)),
    ("float_power", (2,)),
    ("ldexp", ("int",)),
    ("nan_to_num", ()),
]


def _arguments(spec, other, positive):
    table = {"other": other, "positive": positive, "int": kg.tensor([[1, 2, 0]])}
    return [table.get(a, a) if isinstance(a, str) else a for a in spec]


@pytest.mark.parametrize("name", [n for n, _ in INPLACE])
def test_inplace_forms_write_the_out_of_place_result(name):
    spec = dict(INPLACE)[name]
    rng = np.random.default_rng(1)
    base = kg.tensor(
        rng.uniform(-0.9, 0.9, (2, 3)), dtype=kg.float64 if name == "float_power" else None
    )
    other = kg.tensor(rng.uniform(-0.9, 0.9, (2, 3)))
    positive = kg.tensor(rng.uniform(0.5, 2.0, (2, 3)))
    args = _arguments(spec, other, positive)
    want = getattr(base, name)(*args)
    target = base.clone()
    version = target._storage.version
    assert getattr(target, name + "_")(*args) is target
    np.testing.assert_allclose(target.cpu().numpy(), want.cpu().numpy(), rtol=1e-6)
    assert target._storage.version > version


def test_inplace_forms_follow_the_autograd_rule():
    x = kg.tensor([0.2, -0.4, 0.5], requires_grad=True)
    with pytest.raises(kg.errors.InplaceError, match="leaf"):
        x.acos_()
    y = x * 1
    y.erfinv_()  # an intermediate: recorded out of place, its history rebased
    y.sum().backward()
    np.testing.assert_allclose(
        x.grad.cpu().numpy(),
        math.sqrt(math.pi) / 2 * np.exp(kg.erfinv(x.detach()).cpu().numpy() ** 2),
    )
    z = kg.tensor([1, 2, 3])
    z.bitwise_xor_(1)
    z <<= 2
    assert z.cpu().tolist() == [0, 12, 8]
    with pytest.raises(DTypeError):
        kg.tensor([1, 2]).lgamma_()  # the float result cannot be stored in an int tensor


def test_torch_level_inplace_functions():
    x = kg.tensor([-1.0, 4.0])
    assert kg.abs_(x) is x and x.cpu().tolist() == [1.0, 4.0]
    kg.sqrt_(x)
    assert x.cpu().tolist() == [1.0, 2.0]


def test_properties_and_small_helpers():
    x = kg.ones(2, 3)
    assert x.itemsize == 4 and not x.is_sparse and not x.is_quantized and not x.is_meta
    assert not x.is_complex() and x.is_same_size(kg.zeros(2, 3)) and not x.is_inference()
    assert x.data_ptr() != 0 and x[1].data_ptr() == x.data_ptr() + 12
    assert kg.tensor([2.0]).is_nonzero() and not kg.tensor([0]).is_nonzero()
    with pytest.raises(RuntimeError):
        x.is_nonzero()
    assert kg.can_cast(kg.int32, kg.float32) and not kg.can_cast(kg.float32, kg.int64)
    assert kg.result_type(kg.tensor([1]), 2.5) == kg.float32
    assert kg.finfo(kg.float32).eps == float(np.finfo(np.float32).eps)
    assert kg.iinfo(kg.int32).max == 2**31 - 1
    s = kg.empty_strided((2, 3), (1, 2))
    assert s.stride() == (1, 2) and s.shape == (2, 3)
    assert kg.scalar_tensor(3).dtype == kg.float32 and kg.scalar_tensor(3).ndim == 0
    seed = kg.seed()
    assert kg.initial_seed() == seed
    kg.manual_seed(0)
    assert x.new(2).shape == (2,) and x.new([1.0, 2.0]).cpu().tolist() == [1.0, 2.0]
    y = kg.zeros(2, 3)
    y.swapaxes_(0, 1)
    assert y.shape == (3, 2)
