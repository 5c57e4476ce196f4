"""Inputs that kg.nn.functional used to accept with a silently wrong result: one_hot
of out-of-range classes, cross_entropy of integer logits, and the findings of the fuzz
campaign (tests/fuzz/): bad class and embedding indices, non-probabilities, shapes."""

from __future__ import annotations

import math

import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, DTypeError, IndexingError, ShapeError
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


def test_nll_loss_refuses_class_indices_outside_the_classes(device):
    """Fuzz finding: a negative target (not ignore_index) wrapped around to the last
    class, and an input with 0 classes failed inside reshape (PyTorch raises)."""
    log_probs = kg.zeros(2, 3, device=device)
    with pytest.raises(
        IndexingError, match="nll_loss: the target class index at flat position 0 is out of range"
    ):
        F.nll_loss(log_probs, kg.tensor([-1, 0], device=device)).item()
    with pytest.raises(
        IndexingError, match="nll_loss: the target class index at flat position 1 is out of range"
    ):
        F.nll_loss(log_probs, kg.tensor([0, 3], device=device)).item()
    with pytest.raises(ShapeError, match=r"nll_loss: the input of shape \(2, 0\) has no classes"):
        F.nll_loss(kg.zeros(2, 0, device=device), kg.tensor([0, 0], device=device))
    ignored = F.nll_loss(log_probs - 1.0, kg.tensor([-100, 2], device=device))
    assert ignored.item() == pytest.approx(1.0)


def test_embedding_refuses_negative_indices(device):
    """Fuzz finding: index -1 picked the last row (Python's wrap-around); PyTorch raises."""
    table = kg.arange(6.0, device=device).reshape(3, 2)
    with pytest.raises(
        IndexingError, match=r"embedding: the index at flat position 1 .* outside the table of 3"
    ):
        F.embedding(kg.tensor([0, -1], device=device), table).cpu()
    with pytest.raises(
        IndexingError, match=r"embedding: the index at flat position 0 .* outside the table of 3"
    ):
        F.embedding(kg.tensor([3], dtype=kg.int32, device=device), table).cpu()
    assert_close(F.embedding(kg.tensor([2, 0], device=device), table), [[4.0, 5.0], [0.0, 1.0]])


def test_binary_cross_entropy_refuses_inputs_that_are_not_probabilities(device):
    """Fuzz finding: inputs outside [0, 1] gave a number (log of a negative clamped to
    -100) where PyTorch raises."""
    target = kg.tensor([1.0, 0.0], device=device)
    for bad in (1.5, -0.25, float("nan")):
        with pytest.raises(ArgumentError, match=r"binary_cross_entropy: .*\[0, 1\].*position 1 "):
            F.binary_cross_entropy(kg.tensor([0.5, bad], device=device), target).item()
    loss = F.binary_cross_entropy(kg.tensor([1.0, 0.0], device=device), target)
    assert loss.item() == pytest.approx(0.0)


def test_normalisation_checks_its_shapes(device):
    """Fuzz findings: layer_norm accepted normalized_shape=() (PyTorch raises), and
    batch_norm with running statistics of the wrong size failed inside reshape."""
    x = kg.ones(2, 3, device=device)
    with pytest.raises(ShapeError, match="layer_norm: normalized_shape is empty"):
        F.layer_norm(x, ())
    with pytest.raises(ShapeError, match=r"batch_norm: running_mean has shape \(5,\).*3 channels"):
        F.batch_norm(x, kg.zeros(5, device=device), kg.ones(5, device=device))
    with pytest.raises(ShapeError, match=r"batch_norm: weight has shape \(2,\)"):
        F.batch_norm(x, None, None, kg.ones(2, device=device), training=True)


def test_linear_with_no_input_features_and_mixed_dtypes(device):
    """Fuzz finding: 3-d input with 0 in_features failed in reshape (-1 with a 0 dim);
    and a float32 layer on float64 input returned float64 where PyTorch raises."""
    result = F.linear(kg.ones(2, 3, 0, device=device), kg.ones(4, 0, device=device))
    assert result.shape == (2, 3, 4)
    assert_close(result, kg.zeros(2, 3, 4))
    layer = kg.nn.Linear(3, 2).to(device)
    with pytest.raises(DTypeError, match=r"linear: the input is kg.float64 but the weight"):
        layer(kg.ones(1, 3, dtype=kg.float64, device=device))
    with pytest.raises(DTypeError, match=r"linear: the input is kg.float32 but the bias"):
        F.linear(
            kg.ones(3, device=device),
            kg.ones(2, 3, device=device),
            kg.ones(2, device=device).double(),
        )


def test_argument_checks_raise_kernelgrad_errors():
    """The campaign counted 13 checks in nn that raised the built-in classes; each is a
    kernelgrad error now (which still subclasses the built-in)."""
    with pytest.raises(ArgumentError, match="dropout: p must be between 0 and 1"):
        F.dropout(kg.ones(2), p=1.5)
    with pytest.raises(ArgumentError, match="gelu: approximate"):
        F.gelu(kg.ones(2), approximate="fast")
    with pytest.raises(ArgumentError, match="mse_loss: reduction"):
        F.mse_loss(kg.ones(2), kg.ones(2), reduction="avg")
    with pytest.raises(ArgumentError, match="conv: padding must be non-negative"):
        F.conv2d(kg.ones(1, 1, 3, 3), kg.ones(1, 1, 1, 1), padding=-1)
    with pytest.raises(ArgumentError, match="max_pool2d: kernel_size, stride and dilation"):
        F.max_pool2d(kg.ones(1, 1, 4, 4), 0)
    with pytest.raises(DTypeError, match="embedding: the indices must be an integer"):
        F.embedding(kg.ones(2), kg.ones(3, 2))
    with pytest.raises(ArgumentError, match="cross_entropy: label_smoothing"):
        F.cross_entropy(kg.ones(1, 2), kg.tensor([0]), label_smoothing=2.0)


@pytest.mark.parametrize("layer", ["BatchNorm1d", "LayerNorm"])
@pytest.mark.parametrize("training", [True, False])
def test_normalisation_refuses_mixed_dtypes_as_pytorch(layer, training):
    """A float32 layer given float64 input (or the other way) raised in PyTorch
    ("mixed dtype") but quietly returned float64 here."""
    module = getattr(kg.nn, layer)(3).train(training)
    with pytest.raises(DTypeError, match=r"the input is kg\.float64 but .* is kg\.float32"):
        module(kg.randn(4, 3, dtype=kg.float64))
    wide = getattr(kg.nn, layer)(3).to(kg.float64).train(training)
    with pytest.raises(RuntimeError, match="mixed dtypes"):  # PyTorch's exception type
        wide(kg.randn(4, 3))
    assert wide(kg.randn(4, 3, dtype=kg.float64)).dtype == kg.float64
