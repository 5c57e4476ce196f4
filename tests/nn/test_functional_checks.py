"""Inputs that kg.nn.functional used to accept with a silently wrong result: one_hot
of out-of-range classes, cross_entropy of integer logits."""

from __future__ import annotations

import math

import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import DTypeError, IndexingError, ShapeError
from tests.helpers import assert_close


def test_one_hot_refuses_classes_out_of_range(device):
    """An out-of-range or negative class gave an all-zero row (PyTorch raises)."""
    with pytest.raises(IndexingError, match="one_hot: class value 5 is out of range"):
        F.one_hot(kg.tensor([0, 5], device=device), 3)
    with pytest.raises(IndexError, match=r"one_hot: class values must be non-negative.*-1"):
        F.one_hot(kg.tensor([0, -1], device=device), 3)
    with pytest.raises(ShapeError, match="one_hot: cannot infer the number of classes"):
        F.one_hot(kg.tensor([], dtype=kg.int64, device=device))
    with pytest.raises(DTypeError, match=r"one_hot: .*integer"):
        F.one_hot(kg.tensor([0.0], device=device), 2)
    assert F.one_hot(kg.tensor([], dtype=kg.int64, device=device), 3).shape == (0, 3)
    assert_close(F.one_hot(kg.tensor([[2, 0]], device=device)), [[[0, 0, 1], [1, 0, 0]]])


def test_cross_entropy_of_integer_logits_is_computed_in_floating_point(device):
    """Its statistics buffer took the input's dtype: logits [[1, 0]] with target 1 gave
    1.0 (truncated) instead of log(1 + e) = 1.3133."""
    expected = math.log(1 + math.e)
    logits = kg.tensor([[1, 0]], device=device)
    loss = F.cross_entropy(logits, kg.tensor([1], device=device))
    assert loss.dtype == kg.float32
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    per_row = F.cross_entropy(logits, kg.tensor([1], device=device), reduction="none")
    assert_close(per_row, [expected])
    soft = F.cross_entropy(logits, kg.tensor([[0.0, 1.0]], device=device))
    assert soft.item() == pytest.approx(expected, rel=1e-6)


def test_cross_entropy_checks_its_input_before_computing(device):
    """Fuzz findings: a 0-d input leaked `IndexError: tuple index out of range`; zero
    classes, and a weight of the wrong size with probability targets, failed inside
    reshape with a message that did not name cross_entropy."""
    with pytest.raises(ShapeError, match=r"cross_entropy: the input of shape \(\) has no classes"):
        F.cross_entropy(kg.tensor(0.0, device=device), kg.tensor(0.0, device=device))
    with pytest.raises(ShapeError, match=r"cross_entropy: .* has no classes"):
        F.cross_entropy(kg.zeros(2, 0, device=device), kg.zeros(2, dtype=kg.int64, device=device))
    with pytest.raises(ShapeError, match=r"cross_entropy: weight must have shape \(1,\)"):
        F.cross_entropy(
            kg.zeros(0, 1, device=device),
            kg.zeros(0, 1, device=device),
            weight=kg.ones(2, device=device),
        )
