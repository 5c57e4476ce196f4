"""kg.testing (torch.testing): assert_close passes and fails where PyTorch's does, with
PyTorch's message; make_tensor's ranges, layouts and refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.testing import assert_close, make_tensor

NAN = math.nan

# (actual, expected, options) as nested Python data: "t:" marks a tensor (with a dtype)
CASES = [
    (("t", [1.0, 2.0], "float32"), ("t", [1.0, 2.5], "float32"), {}),
    (("t", [1.0, 2.0], "float32"), ("t", [1.0, 2.0 + 1e-6], "float32"), {}),
    (("t", [1.0, 2.0], "float64"), ("t", [1.0, 2.0 + 1e-6], "float64"), {}),
    (("t", [[1.0, 2.0], [3, 4]], "float32"), ("t", [[1.0, 2.5], [3, 5]], "float32"), {}),
    (("t", [1.0, 2.0], "float32"), ("t", [1.0, 2.0], "float64"), {}),
    (("t", [1.0, 2.0], "float32"), ("t", [1.0, 2.0], "float64"), {"check_dtype": False}),
    (("t", [1, 2], "int64"), ("t", [1, 3], "int64"), {}),
    (("t", [True], "bool"), ("t", [False], "bool"), {}),
    (("t", [NAN], "float32"), ("t", [NAN], "float32"), {}),
    (("t", [NAN], "float32"), ("t", [NAN], "float32"), {"equal_nan": True}),
    (("t", [1.0, 2.0], "float32"), ("t", [1.0, 2.5], "float32"), {"rtol": 0.5, "atol": 0}),
    (("t", [1.0, 2.0], "float32"), ("t", [1.0, 2.5], "float32"), {"rtol": 0, "atol": 0}),
    (("t", [1.0, 2.0], "float32"), ("t", [1.0, 2.5], "float32"), {"msg": "custom"}),
    (("t", [1.0, 2.0], "float32"), ("t", [1.0, 2.5], "float32"), {"rtol": 0.5}),
    (("t", [1.0, 2.0], "float32"), 1.0, {}),
    (1.0, 1.0 + 1e-9, {}),
    (1.0, 1.1, {}),
    (1, 1.0, {}),
    (True, False, {}),
    (None, 1, {}),
    ([("t", [1.0], "float32"), 2], [("t", [1.0], "float32"), 3], {}),
    ({"a": ("t", [1.0], "float32")}, {"b": ("t", [1.0], "float32")}, {}),
    ({"a": [1, ("t", [1.0], "float32")]}, {"a": [1, ("t", [2.0], "float32")]}, {}),
    ([1, 2], [1, 2, 3], {}),
    ("a", "a", {}),
]


def _build(lib, value):
    if isinstance(value, tuple) and value and value[0] == "t":
        return lib.tensor(value[1], dtype=getattr(lib, value[2]))
    if isinstance(value, list):
        return [_build(lib, v) for v in value]
    if isinstance(value, dict):
        return {k: _build(lib, v) for k, v in value.items()}
    return value


def _outcome(lib, case):
    actual, expected, options = case
    try:
        lib.testing.assert_close(_build(lib, actual), _build(lib, expected), **options)
    except Exception as error:
        text = str(error).replace("kernelgrad.tensor.Tensor", "torch.Tensor")
        return type(error).__name__, text.replace("kg.", "torch.")
    return "passed", ""


@pytest.mark.torch
def test_assert_close_agrees_with_pytorch_on_outcome_and_message():
    import torch

    for case in CASES:
        assert _outcome(kg, case) == _outcome(torch, case), case


def test_assert_close_messages_and_arrays():
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 2 \(50.0%\)"):
        assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.1]))
    assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-8]))
    with pytest.raises(AssertionError, match="attribute 'shape' do not match"):
        assert_close(kg.ones(2, 2), kg.ones(3))
    with pytest.raises(AssertionError, match=r"'stride\(\)' do not match: \(1, 2\) != \(2, 1\)"):
        assert_close(kg.ones(2, 2).t(), kg.ones(2, 2), check_stride=True)
    assert_close(kg.ones(2, 2).t(), kg.ones(2, 2))
    with pytest.raises(AssertionError, match=r"^XTensor-likes are not close"):
        assert_close(kg.ones(2), kg.zeros(2), msg=lambda m: "X" + m)
    with pytest.raises(TypeError, match="No comparison pair"):
        assert_close(np.ones(2), kg.ones(2, dtype=kg.float64))


def test_assert_close_checks_the_device(device):
    a = kg.ones(2, device=device)
    assert_close(a, kg.ones(2, device=device))
    if device != "cpu":
        with pytest.raises(AssertionError, match="attribute 'device' do not match"):
            assert_close(a, kg.ones(2))
        assert_close(a, kg.ones(2), check_device=False)
    with pytest.raises(AssertionError, match=r"Greatest absolute difference: 1\.0 at index"):
        assert_close(a, kg.zeros(2, device=device))


def test_make_tensor_ranges_layouts_and_refusals():
    kg.manual_seed(0)
    x = make_tensor(4, 50, dtype=kg.float32, device="cpu")
    values = x.numpy()
    assert x.shape == (4, 50) and x.dtype is kg.float32 and not x.requires_grad
    assert values.min() >= -9 and values.max() < 9 and values.std() > 1
    i = make_tensor((200,), dtype=kg.int64, device="cpu", low=-2, high=3).numpy()
    assert set(i.tolist()) == {-2, -1, 0, 1, 2}
    b = make_tensor(100, dtype=kg.bool, device="cpu").numpy()
    assert b.dtype == np.bool_ and 0 < b.sum() < 100
    n = make_tensor(3, 4, dtype=kg.float64, device="cpu", noncontiguous=True, requires_grad=True)
    assert n.shape == (3, 4) and not n.is_contiguous() and n.requires_grad
    nz = make_tensor(300, dtype=kg.int32, device="cpu", low=0, high=2, exclude_zero=True)
    assert set(nz.numpy().tolist()) == {1}
    f = make_tensor(2, dtype=kg.float32, device="cpu", low=0.5, high=0.75).numpy()
    assert ((f >= 0.5) & (f < 0.75)).all()
    with pytest.raises(ValueError, match=r"requires_grad=True.* not supported"):
        make_tensor(2, dtype=kg.int64, device="cpu", requires_grad=True)
    with pytest.raises(ValueError, match="`low` must be less than `high`"):
        make_tensor(2, dtype=kg.int64, device="cpu", low=3, high=1)


def test_torch_testing_path():
    from kernelgrad.torch_alias import aliased

    with aliased():
        import torch.testing

    assert torch.testing.assert_close is assert_close
