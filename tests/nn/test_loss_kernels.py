"""Cross-entropy's row kernels (``nn/_loss_kernels.py``): both forms (one work item per
row, the CPU's; a workgroup per row, CUDA's) give the same results, and launching them
leaves the logits' version counter alone."""

from __future__ import annotations

import numpy as np

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.nn import _loss_kernels as kernels


def test_backward_through_an_activation_before_the_loss(device):
    # The loss kernels only read the logits: launching them must not count as a write
    # (the sigmoid saved its output for backward).
    x = kg.randn(3, 5, device=device, requires_grad=True)
    loss = F.cross_entropy(x.sigmoid(), kg.tensor([0, 4, 2], device=device))
    loss.backward()
    assert x.grad.shape == (3, 5)


def test_the_workgroup_form_matches_the_row_form_on_the_cpu():
    dtype = kg.float32
    rng = np.random.default_rng(3)
    rows, classes, width = 5, 11, 4  # rows longer than the group: threads stride
    logits = kg.tensor(rng.standard_normal((rows, classes)) * 4, dtype=dtype)
    target = kg.tensor([0, 10, -100, 3, 7])
    weight = kg.tensor(rng.uniform(0.5, 2, classes), dtype=dtype)
    results = []
    for grouped in (False, True):
        stats = kg.empty(3 * rows, dtype=dtype)
        error = kg.zeros(2, dtype=kg.int64)
        arguments = (stats, error, logits.reshape(-1), target, weight, classes, float(classes))
        arguments += (rows, -100, 0.1, True)
        if grouped:
            kernels._grouped_rows(dtype)(*arguments, width, ndrange=rows * width, workgroup=width)
        else:
            kernels.cross_entropy_rows(*arguments, 1, stats, False, False, ndrange=rows)
        results.append(stats.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-6)
    assert results[0][2] == 0 and results[0][rows + 2] == 0  # the ignored row


def test_one_work_item_for_all_rows_gives_the_rows_and_their_reduction():
    """The small-loss form (one work item: the rows' statistics and the reduced loss)
    agrees with one work item per row followed by the sum, for a mean and a sum, with
    ignored rows, class weights and label smoothing."""
    dtype = kg.float32
    rng = np.random.default_rng(4)
    rows, classes = 7, 6
    logits = kg.tensor(rng.standard_normal((rows, classes)) * 3, dtype=dtype)
    target = kg.tensor([0, 5, -100, 3, 2, -100, 1])
    weight = kg.tensor(rng.uniform(0.5, 2, classes), dtype=dtype)
    for mean in (True, False):
        per_row = kg.empty(3 * rows, dtype=dtype)
        arguments = (logits.reshape(-1), target, weight, classes, float(classes), rows)
        arguments += (-100, 0.2, True)
        error = kg.zeros(2, dtype=kg.int64)
        per_row_form = (1, per_row, False, mean)  # one row per work item; totals unread
        kernels.cross_entropy_rows(per_row, error, *arguments, *per_row_form, ndrange=rows)
        together, totals = kg.empty(3 * rows, dtype=dtype), kg.empty(2, dtype=dtype)
        kernels.cross_entropy_rows(together, error, *arguments, rows, totals, True, mean, ndrange=1)
        np.testing.assert_array_equal(together.numpy(), per_row.numpy())
        totals = totals.numpy()
        losses, weights = per_row.numpy()[:rows], per_row.numpy()[rows : 2 * rows]
        expected = losses.sum() / weights.sum() if mean else losses.sum()
        np.testing.assert_allclose(totals, [expected, weights.sum()], rtol=1e-6)
        assert error.tolist() == [0, 0]


def test_small_and_large_losses_take_their_forms_and_agree(monkeypatch):
    """A loss of at most ONE_ITEM_LOGITS logits is one kernel launch (rows and reduction
    together) on the CPU; above it, the rows' kernel, a sum and a division. Both agree
    with each other, forward and backward, and raise the same error for a bad target."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t = np.array([0, 3, 1, -100, 2, 2])
    results = []
    for limit in (kernels.ONE_ITEM_LOGITS, 0):
        monkeypatch.setattr(kernels, "ONE_ITEM_LOGITS", limit)
        for reduction in ("mean", "sum"):
            logits = kg.tensor(x, requires_grad=True)
            with kg.compile.count_launches() as launches:
                loss = F.cross_entropy(logits, kg.tensor(t), reduction=reduction)
            loss.backward()
            results.append((loss.item(), logits.grad.numpy(), launches.count))
        with np.testing.assert_raises(IndexError):
            F.cross_entropy(kg.tensor(x), kg.tensor([0, 4, 1, 1, 1, 1]))
    (small_mean, small_sum, large_mean, large_sum) = results
    for small, large in ((small_mean, large_mean), (small_sum, large_sum)):
        np.testing.assert_allclose(small[0], large[0], rtol=1e-6)
        np.testing.assert_allclose(small[1], large[1], rtol=1e-6, atol=1e-7)
    assert small_mean[2] == 1 and large_mean[2] == 3  # rows + sum + division
    assert small_sum[2] == 1 and large_sum[2] == 2  # rows + sum


def test_the_loss_may_be_changed_in_place_before_backward():
    """The reduced loss is a buffer of its own, not part of what the backward pass saved:
    ``loss /= steps`` (gradient accumulation's scaling) then ``backward()`` works, and
    the division is part of the gradient, as in PyTorch."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    t = np.array([0, 2, 1, 1])
    logits = kg.tensor(x, requires_grad=True)
    loss = F.cross_entropy(logits, kg.tensor(t))
    expected = loss.item()
    loss /= 4
    assert abs(loss.item() - expected / 4) < 1e-6
    loss.backward()
    reference = kg.tensor(x, requires_grad=True)
    F.cross_entropy(reference, kg.tensor(t)).backward()
    np.testing.assert_allclose(logits.grad.numpy(), reference.grad.numpy() / 4, rtol=1e-6)
