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
    "erfcx",
    "i0e",
    "i1e",
    "ndtri",
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


# --- kg.special's scaled and tail functions: finite where the naive closed forms are not ------
def _erfcx_asymptotic(x):
    """erfcx(x) = (1 - 1/(2x^2) + 3/(2x^2)^2 - 15/(2x^2)^3 ...) / (x sqrt(pi)), for x >= 20."""
    total, term, k = 1.0, 1.0, 1
    while abs(term) > 1e-18:
        term *= -(2 * k - 1) / (2 * x * x)
        total += term
        k += 1
    return total / (x * math.sqrt(math.pi))


def _i0_series(x, nu):
    """I_nu(x) for nu in (0, 1) by its power series (Python floats; x up to a few hundred)."""
    q, term = x * x / 4, (x / 2) ** nu
    total, k = term, 1
    while term > total * 1e-18:
        term *= q / (k * (k + nu))
        total += term
        k += 1
    return total


@pytest.mark.parametrize("dtype", [kg.float32, kg.float64])
def test_erfcx_is_finite_and_accurate_for_large_arguments(dtype, device):
    x = [-3.0, 0.5, 1.9, 2.1, 10.0, 27.0, 30.0, 1e4, 1e10, math.inf]
    got = kg.special.erfcx(_t(x, device, dtype=dtype)).cpu().numpy()
    want = [math.exp(v * v) * math.erfc(v) for v in x[:5]]
    want += [_erfcx_asymptotic(v) for v in x[5:9]] + [0.0]
    rtol = 1e-6 if dtype is kg.float32 else 1e-14
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    ends = kg.special.erfcx(_t([-math.inf, math.nan], device, dtype=dtype)).cpu().tolist()
    assert ends[0] == math.inf and math.isnan(ends[1])


@pytest.mark.parametrize("dtype", [kg.float32, kg.float64])
def test_log_ndtr_in_both_tails(dtype, device):
    x = [-35.0, -20.0, -1.5, -1.0, 0.0, 5.0, 9.0]
    got = kg.special.log_ndtr(_t(x, device, dtype=dtype)).cpu().numpy()
    want = [math.log(0.5 * math.erfc(-v / math.sqrt(2))) for v in x[:5]]
    want += [math.log1p(-0.5 * math.erfc(v / math.sqrt(2))) for v in x[5:]]
    # float32: x / sqrt(2) rounds, and erfc's condition number 2 t^2 multiplies that
    rtol = 1e-5 if dtype is kg.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
    ends = kg.special.log_ndtr(_t([-math.inf, math.inf], device, dtype=dtype)).cpu().tolist()
    assert ends == [-math.inf, 0.0]


@pytest.mark.parametrize("dtype", [kg.float32, kg.float64])
def test_ndtri_inverts_ndtr_in_the_tails(dtype, device):
    p = [1e-30, 1e-8, 0.025, 0.3, 0.5, 0.7, 0.975, 1 - 1e-6]
    z = kg.special.ndtri(_t(p, device, dtype=dtype)).cpu().numpy().astype(np.float64)
    p = np.array(p, dtype.numpy).astype(np.float64)  # what the kernel saw
    # the tail probability of z, from erfc (no cancellation), against p
    lower = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in z])
    upper = np.array([0.5 * math.erfc(v / math.sqrt(2)) for v in z])
    rtol = 1e-5 if dtype is kg.float32 else 1e-13
    np.testing.assert_allclose(np.where(p < 0.5, lower, upper), np.minimum(p, 1 - p), rtol=rtol)
    assert abs(z[4]) < 1e-15 and z[1] == pytest.approx(-5.612001244174789, rel=rtol)
    ends = kg.special.ndtri(_t([0.0, 1.0, -0.5, math.nan], device, dtype=dtype)).cpu().tolist()
    assert ends[:2] == [-math.inf, math.inf] and all(math.isnan(v) for v in ends[2:])


@pytest.mark.parametrize("dtype", [kg.float32, kg.float64])
def test_i0e_and_i1e_are_finite_for_large_arguments(dtype, device):
    x = [0.0, 0.5, -3.0, 20.0, -26.0, 40.0, 500.0]
    xs = _t(x, device, dtype=dtype)
    rtol = 2e-6 if dtype is kg.float32 else 5e-15
    for fn, nu in ((kg.special.i0e, 0), (kg.special.i1e, 1)):
        want = [_i0_series(abs(v), nu) * math.exp(-abs(v)) for v in x]
        want = [math.copysign(w, v) if nu else w for w, v in zip(want, x)]
        np.testing.assert_allclose(fn(xs).cpu().numpy(), want, rtol=rtol, atol=0)
        ends = fn(_t([math.inf, -math.inf, math.nan], device, dtype=dtype)).cpu().tolist()
        assert ends[:2] == [0.0, 0.0] and math.isnan(ends[2])
    assert math.copysign(1, kg.special.i1e(_t([-math.inf], device)).item()) == -1


def test_special_tails_match_pytorch(device):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-40, 40, 200), [-27.0, -1.0, 0.0, 2.0, 30.0, 1e9]])
    p = np.concatenate([rng.uniform(0, 1, 100), 10.0 ** rng.uniform(-30, 0, 100), [0.5, 1e-8]])
    for dtype, rtol in (("float32", 2e-6), ("float64", 1e-14)):
        for name, values in (("erfcx", x), ("log_ndtr", x), ("i0e", x), ("i1e", x),
                             ("ndtri", p)):  # fmt: skip
            got = getattr(kg.special, name)(_t(values.astype(dtype), device)).cpu().numpy()
            want = getattr(torch.special, name)(torch.tensor(values.astype(dtype))).numpy()
            atol = 1e-15 if name == "ndtri" else 0  # near ndtri(0.5) = 0
            if name == "log_ndtr":  # log1p(-erfc/2) = -erfc/2 far right: two erfc's
                rtol = max(rtol, 1e-12)
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{name} {dtype}")
