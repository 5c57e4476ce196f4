"""Cross-entropy on class indices as two ``@kg.kernel`` kernels (one source for the CPU
and CUDA).

Written with tensor ops, the loss and its gradient take about thirty small kernels (a
maximum, a shift, an exponential, a sum, a logarithm, a gather, masks, weights, the
reduction, and as many again backward). For the (N, C) logits of a classifier each of
those kernels is a few microseconds of work and several of Python, so the loss cost more
than a fully connected layer. Here the forward pass is one kernel over the rows plus the
final sum, and the backward pass one kernel over the rows. (One work item per element
made the gradient kernel about 100x slower on the CPU: Numba compiled the per-element
index arithmetic and branches into slow code.)

Every tensor argument is flat (1-D, contiguous); ``x`` holds N rows of C logits.
"""

from __future__ import annotations

import kernelgrad as kg


@kg.kernel
def cross_entropy_rows(
    stats, error, x, target, weight, classes, rows, ignore_index, smoothing, has_weight
):  # fmt: skip
    """Row i: its log-sum-exp L, and with p = the target class t,

    loss_i = -w_t * (1 - smoothing) * (x[i, t] - L) - smoothing / C * sum_j w_j (x[i, j] - L)

    (w = 1 without ``weight``). ``stats`` is (3, N): the losses, the sample weights w_t (0
    for rows whose target is ``ignore_index``, so that they drop out of the mean) and L.
    A target outside [0, C) that is not ``ignore_index`` is written to ``error`` (its
    value, and a 1 in ``error[1]``)."""
    i = kg.index()
    row = x[i * classes : i * classes + classes]
    peak = row[0]
    for j in range(1, classes):
        peak = max(peak, row[j])
    total = 0.0
    for j in range(classes):
        total += kg.exp(row[j] - peak)
    lse = peak + kg.log(total)
    t = target[i]
    loss = 0.0
    sample_weight = 0.0
    if t != ignore_index:
        if t < 0 or t >= classes:
            error[0] = t
            error[1] = 1
        else:
            sample_weight = 1.0
            if has_weight:
                sample_weight = weight[t]
            loss = -(row[t] - lse) * sample_weight * (1.0 - smoothing)
            if smoothing > 0.0:
                spread = 0.0
                for j in range(classes):
                    if has_weight:
                        spread += (row[j] - lse) * weight[j]
                    else:
                        spread += row[j] - lse
                loss -= spread * (smoothing / classes)
    stats[i] = loss
    stats[rows + i] = sample_weight
    stats[2 * rows + i] = lse


@kg.kernel
def cross_entropy_grad(
    grad_x, x, target, weight, stats, grad, denominator, class_total, classes, rows,
    ignore_index, smoothing, has_weight, per_row, mean,
):  # fmt: skip
    """d loss / d x[i, j] = (p_ij * a_i - b_ij) * scale_i, with p = softmax(x[i]),
    a_i = w_t (1 - smoothing) + W smoothing / C (W = sum of the class weights, or C),
    b_ij = w_t (1 - smoothing) [j = t] + w_j smoothing / C, and 0 for ignored rows.
    scale_i is the incoming gradient (``grad[i]`` with ``per_row``, else ``grad[0]``),
    divided by ``denominator[0]`` (the sum of sample weights) for a mean.
    One work item per row; ``stats`` is the forward kernel's (3, N)."""
    i = kg.index()
    out = grad_x[i * classes : i * classes + classes]
    row = x[i * classes : i * classes + classes]
    t = target[i]
    if t == ignore_index:
        for j in range(classes):
            out[j] = 0.0
    else:
        scale = grad[0]
        if per_row:
            scale = grad[i]
        if mean:
            scale = scale / denominator[0]
        keep = stats[rows + i] * (1.0 - smoothing)
        spread = smoothing / classes
        lse = stats[2 * rows + i]
        if has_weight:
            a = (keep + class_total[0] * spread) * scale
            for j in range(classes):
                out[j] = kg.exp(row[j] - lse) * a - weight[j] * spread * scale
        else:
            a = (keep + classes * spread) * scale
            b = spread * scale
            for j in range(classes):
                out[j] = kg.exp(row[j] - lse) * a - b
        out[t] -= keep * scale
