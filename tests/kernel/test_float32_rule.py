"""The float32 rule of user kernels: a kernel whose floating-point arrays are all float32
computes in float32 (float literals, float constants of its module and Python float
arguments become float32); float64 kernels, explicit casts and integer kernels are
unchanged. Runs on every backend (the CUDA form under the simulator too)."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg

SCALE = 0.1


@kg.kernel
def scale_by_literal(out, x):
    i = kg.index()
    out[i] = x[i] * 0.1 + SCALE


@kg.kernel
def scale_by_argument(out, x, factor):
    i = kg.index()
    out[i] = x[i] * factor


@kg.kernel
def scale_in_float64(out, x):
    i = kg.index()
    out[i] = x[i] * np.float64(0.1)


@kg.kernel
def running_total(out, x, n):
    i = kg.index()
    total = 0.0
    for k in range(n):
        total += x[i * n + k]
    out[i] = total


@kg.kernel
def halve_integers(out, x):
    i = kg.index()
    out[i] = x[i] // 2


def _values(dtype):
    # Values whose products with 0.1 round differently in float32 and float64.
    return (np.arange(1, 65) * 1.37).astype(dtype)


def test_float_literals_and_module_constants_are_float32_in_float32_kernels(device):
    values = _values(np.float32)
    out = kg.empty(64, device=device)
    scale_by_literal(out, kg.tensor(values, device=device), ndrange=64)
    tenth = np.float32(0.1)
    expected = values * tenth + tenth  # float32 arithmetic throughout
    wide = (values.astype(np.float64) * 0.1 + 0.1).astype(np.float32)
    assert not np.array_equal(expected, wide)  # the two precisions differ on these values
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


def test_python_float_arguments_are_float32_in_float32_kernels(device):
    values = _values(np.float32)
    out = kg.empty(64, device=device)
    scale_by_argument(out, kg.tensor(values, device=device), 0.1, ndrange=64)
    np.testing.assert_array_equal(out.cpu().numpy(), values * np.float32(0.1))
    # A NumPy scalar keeps its type: the product is taken in float64.
    scale_by_argument(out, kg.tensor(values, device=device), np.float64(0.1), ndrange=64)
    wide = (values.astype(np.float64) * 0.1).astype(np.float32)
    np.testing.assert_array_equal(out.cpu().numpy(), wide)


def test_float64_kernels_and_explicit_casts_keep_double_precision(device):
    values = _values(np.float64)
    out = kg.empty(64, dtype=kg.float64, device=device)
    scale_by_literal(out, kg.tensor(values, device=device), ndrange=64)
    np.testing.assert_array_equal(out.cpu().numpy(), values * 0.1 + 0.1)
    single = _values(np.float32)
    out32 = kg.empty(64, device=device)
    scale_in_float64(out32, kg.tensor(single, device=device), ndrange=64)
    wide = (single.astype(np.float64) * 0.1).astype(np.float32)
    np.testing.assert_array_equal(out32.cpu().numpy(), wide)


def test_a_float32_accumulator_starts_from_a_float32_literal(device, simulated):
    n = 8 if simulated else 64
    values = np.random.default_rng(0).standard_normal((4, n)).astype(np.float32)
    out = kg.empty(4, device=device)
    running_total(out, kg.tensor(values.reshape(-1), device=device), n, ndrange=4)
    expected = np.zeros(4, np.float32)
    for k in range(n):
        expected += values[:, k]  # in float32, in order
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


@pytest.mark.parametrize("dtype", [kg.int32, kg.int64])
def test_integer_kernels_are_unchanged(device, dtype):
    x = kg.tensor([7, -7, 9, 0], dtype=dtype, device=device)
    out = kg.empty(4, dtype=dtype, device=device)
    halve_integers(out, x, ndrange=4)
    assert out.cpu().tolist() == [3, -4, 4, 0]


LOWEST = -float("inf")
EDGES = (float("inf"), float("nan"))


@kg.kernel
def clamp_below_with_constants(out, x):
    i = kg.index()
    value = x[i]
    out[i] = LOWEST if value < 0.0 else (EDGES[0] if value > 1.0 else value)


def test_infinite_module_constants_compile_in_both_precisions(device):
    """Module constants that are infinite or NaN (alone or in a tuple) are written into
    the generated module as ``float('inf')`` (their repr, ``inf``, is no Python name)."""
    for dtype in (np.float32, np.float64):
        values = np.array([-1.0, 0.5, 2.0], dtype=dtype)
        out = kg.empty(3, dtype=kg.float32 if dtype == np.float32 else kg.float64, device=device)
        clamp_below_with_constants(out, kg.tensor(values, device=device), ndrange=3)
        np.testing.assert_array_equal(out.cpu().numpy(), [-np.inf, 0.5, np.inf])
