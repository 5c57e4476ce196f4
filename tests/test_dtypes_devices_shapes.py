"""dtypes and promotion, device parsing and the default device, shape helpers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kernelgrad as kg
from kernelgrad.dtypes import as_dtype, result_type
from kernelgrad.shapes import broadcast_shapes, coalesce, contiguous_strides, reshape_strides


def test_promotion_table():
    assert kg.promote_types(kg.int32, kg.int64) is kg.int64
    assert kg.promote_types(kg.bool, kg.int32) is kg.int32
    assert kg.promote_types(kg.int64, kg.float32) is kg.float32
    assert kg.promote_types(kg.float64, kg.float32) is kg.float64


def test_weak_python_scalars():
    f32 = kg.zeros(1)
    i32 = kg.zeros(1, dtype=kg.int32)
    assert result_type(f32, 2.5) is kg.float32
    assert result_type(i32, 3) is kg.int32
    assert result_type(i32, 3.0) is kg.float32
    assert result_type(2, 3.0) is kg.float32
    assert result_type(True) is kg.bool


def test_as_dtype():
    assert as_dtype("int32") is kg.int32
    assert as_dtype(np.float64) is kg.float64
    assert as_dtype(float) is kg.float32
    assert as_dtype(int) is kg.int64
    assert as_dtype(bool) is kg.bool
    assert repr(kg.float32) == "kg.float32"
    with pytest.raises(TypeError, match="supports"):
        as_dtype(np.complex64)


def test_device_parsing_and_equality():
    assert kg.device("cpu") == "cpu"
    assert str(kg.device("cuda")) == "cuda:0"
    assert kg.device("cuda:1").index == 1
    assert kg.device("cuda:0") == kg.device("cuda")
    assert kg.device("cuda") != "cpu"
    with pytest.raises(ValueError, match="unknown device type"):
        kg.device("gpu")
    with pytest.raises(ValueError, match="cuda:0"):
        kg.device("cuda:x")


def test_default_device_context_nests():
    assert kg.default_device() == "cpu"
    with kg.device("cuda:1"):
        assert kg.default_device() == "cuda:1"
        with kg.device("cpu"):
            assert kg.default_device() == "cpu"
            assert kg.zeros(1).device == "cpu"
        assert kg.default_device() == "cuda:1"
    assert kg.default_device() == "cpu"


def test_broadcast_error_lists_all_shapes():
    with pytest.raises(kg.ShapeError, match=r"\(2, 3\) and \(4,\)"):
        broadcast_shapes((2, 3), (4,), op="add")


@given(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4))
def test_broadcast_matches_numpy(shapes):
    assert broadcast_shapes(*shapes.input_shapes) == shapes.result_shape


@given(hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), st.data())
def test_reshape_strides_agree_with_numpy(shape, data):
    base = np.arange(int(np.prod(shape))).reshape(shape)
    order = data.draw(st.permutations(list(range(len(shape)))))
    view = base.transpose(order)
    strides = tuple(s // base.itemsize for s in view.strides)
    target = data.draw(st.sampled_from([(-1,), view.shape[::-1], (1,) + view.shape]))
    target = (view.size,) if target == (-1,) else target
    computed = reshape_strides(view.shape, strides, target)
    try:
        expected_view = view.view()
        expected_view.shape = target  # raises when NumPy would need a copy
        expected = tuple(s // base.itemsize for s in expected_view.strides)
    except AttributeError:
        expected = None
    if expected is None:
        assert computed is None
    else:
        assert computed is not None
        # Strides of size-1 dims are arbitrary; compare the addressed elements instead.
        rebuilt = np.lib.stride_tricks.as_strided(
            base, target, tuple(s * base.itemsize for s in computed)
        )
        np.testing.assert_array_equal(rebuilt, view.reshape(target))


def test_coalesce_merges_contiguous_dims():
    shape = (2, 3, 4)
    assert coalesce(shape, [contiguous_strides(shape)]) == ((24,), [(1,)])
    # A broadcast operand keeps the dims apart.
    assert coalesce(shape, [contiguous_strides(shape), (0, 4, 1)]) == ((2, 12), [(12, 1), (0, 1)])
    assert coalesce((1, 1), [(0, 0)]) == ((1,), [(0,)])
