"""Creation primitives (full, from_data, random) beyond tests/test_tensor.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close

COVERED = {"full", "from_data", "random"}


def test_full_fills_every_dtype(device):
    for dtype, value in (
        (kg.float32, 1.5),
        (kg.float64, -2.0),
        (kg.int32, 3),
        (kg.int64, -4),
        (kg.bool, True),
    ):
        t = kg.full((2, 2), value, dtype=dtype, device=device)
        assert t.dtype == dtype
        assert_close(t, np.full((2, 2), value, dtype=dtype.numpy))


def test_tensor_from_nested_lists_and_arrays(device):
    assert_close(kg.tensor([[1, 2], [3, 4]], device=device), [[1, 2], [3, 4]])
    assert_close(kg.as_tensor(np.arange(3), device=device), [0, 1, 2])
    t = kg.ones(2, device=device)
    assert kg.as_tensor(t) is t


def test_as_tensor_shares_a_numpy_arrays_memory_on_the_cpu_as_pytorch():
    """``torch.as_tensor(array)`` shares a writable CPU array of a tensor dtype (any
    non-negative strides); another dtype, a read-only array or another device copy."""
    shared = [np.zeros(3, np.float32), np.zeros(3), np.zeros(3, np.int64), np.zeros((3, 4)).T]
    for array in shared:
        t = kg.as_tensor(array)
        array.flat[1] = 7
        assert t.reshape(-1).tolist()[1] == 7 and t.dtype.numpy == array.dtype
    converted = np.zeros(3, np.float32)
    t = kg.as_tensor(converted, dtype=kg.float64)
    converted[1] = 7
    assert t.tolist() == [0.0, 0.0, 0.0] and t.dtype == kg.float64
    frozen = np.zeros(3, np.float32)
    frozen.flags.writeable = False
    assert kg.as_tensor(frozen).tolist() == [0.0, 0.0, 0.0]
    assert kg.as_tensor(np.zeros(3, np.float32), device="cpu").dtype == kg.float32


def test_uniform_and_normal_fill_in_place(device):
    from kernelgrad.ops.creation import normal_, uniform_

    kg.manual_seed(0)
    t = kg.zeros(500, device=device)
    uniform_(t, -2.0, 2.0)
    values = t.cpu().numpy()
    assert values.min() >= -2 and values.max() < 2 and values.std() > 0.5
    normal_(t, 3.0, 0.1)
    assert abs(t.mean().item() - 3.0) < 0.05


def test_rng_state_round_trip(device):
    kg.manual_seed(5)
    kg.rand(3, device=device)
    state = kg.get_rng_state(device)
    first = kg.randn(6, device=device).cpu().numpy()
    kg.rand(10, device=device)  # move on
    kg.set_rng_state(state, device)
    np.testing.assert_array_equal(kg.randn(6, device=device).cpu().numpy(), first)
    kg.manual_seed(5)  # manual_seed still takes precedence afterwards
    a = kg.rand(4, device=device).cpu().numpy()
    kg.manual_seed(5)
    np.testing.assert_array_equal(kg.rand(4, device=device).cpu().numpy(), a)


def test_ranges_of_bools_and_infinite_ranges_are_refused(device):
    """`kg.linspace(0, 1, 3, dtype=kg.bool)` gave [False, True, True]; PyTorch 2.13
    raises (`"linspace_cpu" not implemented for 'Bool'`, and the same for arange)."""
    with pytest.raises(TypeError, match="linspace: dtype bool is not supported"):
        kg.linspace(0, 1, 3, dtype=kg.bool, device=device)
    with pytest.raises(kg.errors.DTypeError, match="arange: dtype bool"):
        kg.arange(3, dtype=kg.bool, device=device)
    with pytest.raises(ValueError, match="arange: start, end and step must be finite"):
        kg.arange(0, math.inf, device=device)  # was an OverflowError from math.ceil
    with pytest.raises(kg.errors.ArgumentError, match="finite"):
        kg.arange(math.nan, device=device)
    assert_close(kg.linspace(0, 10, 4, dtype=kg.int64, device=device), [0, 3, 6, 10])


def test_integer_data_must_fit_and_sizes_must_be_valid(device):
    """Fuzz findings: `kg.tensor([[0, inf]], dtype=kg.int32)` leaked NumPy's
    OverflowError, `kg.tensor([2**40], dtype=kg.int32)` wrapped silently (PyTorch 2.13:
    "value cannot be converted to type int32 without overflow" for both), `kg.eye(0, -1)`
    leaked NumPy's ValueError, and an integer linspace to infinity failed in `tensor`."""
    with pytest.raises(kg.errors.ArgumentError, match="tensor: the data holds NaN or infinity"):
        kg.tensor([[0, math.inf]], dtype=kg.int32, device=device)
    with pytest.raises(ValueError, match=r"tensor: the data.s values 1099511627776 .* kg\.int32"):
        kg.tensor([2**40], dtype=kg.int32, device=device)
    assert_close(kg.tensor(np.array([1.5, -2.7]), dtype=kg.int64, device=device), [1, -2])
    with pytest.raises(kg.ShapeError, match="eye: negative dimension -1"):
        kg.eye(0, -1, device=device)
    with pytest.raises(ValueError, match=r"linspace: a range of kg\.int32 needs finite ends"):
        kg.linspace(0, math.inf, 3, dtype=kg.int32, device=device)
