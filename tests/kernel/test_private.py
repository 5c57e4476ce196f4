"""``kg.private(shape, dtype)``: per-work-item arrays in kernels and their helpers."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import KernelError
from tests.helpers import as_numpy, assert_close

WIDTH = 4


@kg.kernel
def reverse_rows(out, x):
    i = kg.index()
    row = kg.private(WIDTH, kg.float32)
    for k in range(WIDTH):
        row[k] = x[i, k]
    for k in range(WIDTH):
        out[i, k] = row[WIDTH - 1 - k]


def _prefix_sums(x, out, n):
    # a helper with its own private scratch (a 2-D one, to cover tuple shapes)
    scratch = kg.private((2, WIDTH), np.float64)
    total = 0.0
    for k in range(n):
        total += x[k]
        scratch[0, k] = total
        scratch[1, k] = 2.0 * total
    for k in range(n):
        out[k] = scratch[1, k] - scratch[0, k]


@kg.kernel
def prefix_sums(out, x):
    i = kg.index()
    _prefix_sums(x[i, :], out[i, :], WIDTH)


@kg.kernel
def per_group_reverse(out, x):
    # a workgroup kernel without barriers may use private arrays in its body
    i = kg.index()
    pair = kg.private(2, kg.int64)
    pair[0] = x[i]
    pair[1] = kg.local_index()
    out[i] = 100 * pair[1] + pair[0]


def test_private_array_in_a_kernel(device):
    x = kg.arange(12, dtype=kg.float32, device=device).reshape(3, WIDTH)
    out = kg.zeros(3, WIDTH, device=device)
    reverse_rows(out, x, ndrange=3)
    assert_close(as_numpy(out), as_numpy(x)[:, ::-1])


def test_private_array_in_a_helper_each_item_its_own(device):
    rows = 5
    values = np.random.default_rng(0).normal(size=(rows, WIDTH)).astype(np.float32)
    x = kg.tensor(values, device=device)
    out = kg.zeros(rows, WIDTH, device=device)
    prefix_sums(out, x, ndrange=rows)
    assert_close(as_numpy(out), np.cumsum(values, axis=1), rtol=1e-5, atol=1e-6)


def test_private_array_in_a_workgroup_kernel(device):
    x = kg.arange(8, dtype=kg.int64, device=device)
    out = kg.zeros(8, dtype=kg.int64, device=device)
    per_group_reverse(out, x, ndrange=8, workgroup=4)
    assert as_numpy(out).tolist() == [100 * (i % 4) + i for i in range(8)]


def test_private_array_with_a_barrier_in_the_kernel_is_refused():
    def uses_both(out):
        scratch = kg.private(2, kg.float32)
        scratch[0] = 1.0
        kg.barrier()
        out[kg.index()] = scratch[0]

    with pytest.raises(KernelError, match=r"kg\.private cannot be used in the body"):
        kg.kernel(uses_both)


def test_private_array_needs_constant_shape_and_known_dtype():
    def variable_shape(out, n):
        scratch = kg.private(n, kg.float32)
        out[kg.index()] = scratch[0]

    with pytest.raises(KernelError, match=r"the shape of kg\.private must be a constant"):
        kg.kernel(variable_shape)

    def bad_shape(out):
        scratch = kg.private((2, 0), kg.float32)
        out[kg.index()] = scratch[0, 0]

    with pytest.raises(KernelError, match="positive int or tuple of ints"):
        kg.kernel(bad_shape)

    def bad_dtype(out):
        scratch = kg.private(2, "complex-ish")
        out[kg.index()] = scratch[0]

    with pytest.raises(KernelError, match=r"kg\.private: unsupported dtype"):
        kg.kernel(bad_dtype)


def test_private_outside_a_kernel_raises():
    with pytest.raises(KernelError, match="only has a meaning inside"):
        kg.private(3, kg.float32)
