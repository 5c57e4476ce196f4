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
            kernels.cross_entropy_rows(*arguments, ndrange=rows)
        results.append(stats.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6, atol=1e-6)
    assert results[0][2] == 0 and results[0][rows + 2] == 0  # the ignored row
