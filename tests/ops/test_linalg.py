"""matmul with NumPy's rules: 1-D operands, batching, broadcasting, errors, gradients."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close, check_grad, tensor_with_layout

COVERED = {"matmul"}

CASES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((2, 1, 2, 3), (4, 3, 2)),
    ((33, 17), (17, 35)),
    ((2, 33, 17), (17, 35)),
]


@pytest.mark.parametrize(("left", "right"), CASES)
@pytest.mark.parametrize("layout", ["contiguous", "permuted", "strided"])
def test_matmul_matches_numpy(left, right, layout, device):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(left).astype(np.float32)
    b = rng.standard_normal(right).astype(np.float32)
    result = tensor_with_layout(a, layout, device) @ tensor_with_layout(b, layout, device)
    assert_close(result, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("left", "right"), CASES[:7])
def test_matmul_gradients(left, right, device):
    rng = np.random.default_rng(1)
    check_grad(
        lambda a, b: a @ b, rng.standard_normal(left), rng.standard_normal(right), device=device
    )


def test_matmul_errors_show_both_shapes(device):
    with pytest.raises(kg.ShapeError, match=r"\(2, 3\) and \(4, 5\)"):
        kg.ones(2, 3, device=device) @ kg.ones(4, 5, device=device)
    with pytest.raises(kg.ShapeError, match="batch"):
        kg.ones(2, 2, 3, device=device) @ kg.ones(3, 3, 4, device=device)
    with pytest.raises(kg.ShapeError, match="at least one dimension"):
        kg.tensor(2.0, device=device) @ kg.ones(2, device=device)


def test_matmul_dtypes(device):
    a = kg.tensor([[1, 2], [3, 4]], device=device)
    assert (a @ a).dtype == kg.int64
    assert_close(a @ a, np.array([[7, 10], [15, 22]]))
    assert (a @ a.float()).dtype == kg.float32
    assert (a.double() @ a.float()).dtype == kg.float64


def test_matmul_with_empty_inner_dimension(device):
    result = kg.ones(2, 0, device=device) @ kg.ones(0, 3, device=device)
    assert_close(result, np.zeros((2, 3)))
