"""Cross-entropy on class indices as ``@kg.kernel`` kernels: the loss's row statistics
in one kernel, the gradient in another.

Written with tensor ops, the loss and its gradient take about thirty small kernels (a
maximum, a shift, an exponential, a sum, a logarithm, a gather, masks, weights, the
reduction, and as many again backward). For the (N, C) logits of a classifier each of
those kernels is a few microseconds of work and several of Python, so the loss cost more
than a fully connected layer. Here the forward pass is one kernel over the rows plus the
final sum, and the backward pass one kernel over the rows.

Each kernel has two forms, chosen by :func:`row_statistics` and :func:`gradient` from the
backend's ``work_groups`` capability (``backends/base.py``), never from the device type:

* without work groups (the CPU), one work item per row (one work item per element made
  the gradient kernel about 100x slower there: Numba compiled the per-element index
  arithmetic and branches into slow code);
* with work groups (CUDA), a workgroup of 32-256 threads per row (a warp for up to 32 classes): the
  threads stride over the row, so neighbouring threads read neighbouring logits, and
  combine their partial results in shared memory. (One thread per row read the rows
  with a stride of C elements: uncoalesced.)

Both compute in the logits' precision (float32 for float32 logits: the float32 rule of
``docs/kernels.md``; C, the class count, is passed as a float so that ``smoothing / C``
stays float32), with compensated sums (TwoSum) per thread, and give the same results
within rounding. Every tensor argument is flat (1-D, contiguous); ``x`` holds N rows of
C logits.

For row i with peak p = max_j x_ij, its log-sum-exp L = p + log sum_j exp(x_ij - p), and
the label-smoothing spread sum_j w_j (x_ij - L) = sum_j w_j (x_ij - p) - (L - p) sum_j w_j
(w = 1 without ``weight``; both sums of small, shifted terms).
"""

from __future__ import annotations

from typing import Any

import kernelgrad as kg

from ..backends.base import backend_capability
from ..ops.creation import empty
from ..ops.movement import make_view
from ._fused import asked_before

# The largest workgroup of the CUDA forms (shared arrays have a constant size).
GROUP = 256


def _two_sum(total, error, value):
    """(total + value, error + its rounding error): Knuth's TwoSum, so that total + error
    carries about twice the working precision."""
    summed = total + value
    back = summed - total
    return summed, error + ((total - (summed - back)) + (value - back))


def _finish_row(
    stats, error, rows, i, t, target_logit, target_weight, peak, log_total, shifted, weights,
    classes, class_count, ignore_index, smoothing,
):  # fmt: skip
    """Store row i's loss, sample weight and log-sum-exp, computed from its sums:
    ``log_total`` = log sum_j exp(x_j - p), ``shifted`` = sum_j w_j (x_j - p),
    ``weights`` = sum_j w_j; report a bad target in ``error``. (Helpers take numbers and
    the arrays they write: an array passed to a helper counts as written, and the
    logits' version counter would change.)"""
    lse = peak + log_total
    loss = 0.0
    sample_weight = 0.0
    if t != ignore_index:
        if t < 0 or t >= classes:
            error[0] = t
            error[1] = 1
        else:
            sample_weight = target_weight
            loss = -(target_logit - lse) * sample_weight * (1.0 - smoothing)
            if smoothing > 0.0:
                loss -= (shifted - log_total * weights) * (smoothing / class_count)
    stats[i] = loss
    stats[rows + i] = sample_weight
    stats[2 * rows + i] = lse


def _gradient_factors(
    sample_weight, scale, denominator, mean, total_weight, class_count, smoothing
):  # fmt: skip
    """Per row: (a_i * scale_i, smoothing / C * scale_i, w_t (1 - smoothing) * scale_i),
    with scale_i divided by the denominator for a mean."""
    if mean:
        scale = scale / denominator
    keep = sample_weight * (1.0 - smoothing)
    spread = smoothing / class_count
    return (keep + total_weight * spread) * scale, spread * scale, keep * scale


def _gradient_value(logit, lse, a, spread, keep, class_weight, is_target, ignored):
    if ignored:
        return 0.0
    value = kg.exp(logit - lse) * a - class_weight * spread
    if is_target:
        value -= keep
    return value


@kg.kernel
def cross_entropy_rows(
    stats, error, x, target, weight, classes, class_count, rows, ignore_index, smoothing,
    has_weight, per_item, totals, total, mean,
):  # fmt: skip
    """Row i: its log-sum-exp L, and with p = the target class t,

    loss_i = -w_t * (1 - smoothing) * (x[i, t] - L) - smoothing / C * sum_j w_j (x[i, j] - L)

    ``stats`` is (3, N): the losses, the sample weights w_t (0 for rows whose target is
    ``ignore_index``, so that they drop out of the mean) and L. A target outside [0, C)
    that is not ``ignore_index`` is written to ``error`` (its value, and a 1 in
    ``error[1]``). The CPU form: each work item takes ``per_item`` rows in turn (one
    per work item, or all of them in one). With ``total`` (one work item for all rows)
    it also writes ``totals``: [the summed losses, divided by the summed sample weights
    for a ``mean``; the summed sample weights], so that a small loss is one kernel, not
    the rows' kernel, a sum and a division (``totals`` is not read otherwise). The
    totals are a buffer of their own: the loss is returned, and a program may change it
    in place, while the statistics are saved for the backward pass."""
    first_row = kg.index() * per_item
    loss_total = 0.0
    loss_error = 0.0
    weight_total = 0.0
    weight_error = 0.0
    for i in range(first_row, min(first_row + per_item, rows)):
        row = x[i * classes : i * classes + classes]
        peak = row[0]
        for j in range(1, classes):
            peak = max(peak, row[j])
        sum_exp = 0.0
        sum_exp_error = 0.0
        for j in range(classes):
            sum_exp, sum_exp_error = _two_sum(sum_exp, sum_exp_error, kg.exp(row[j] - peak))
        shifted = 0.0
        shifted_error = 0.0
        weights = 0.0
        if smoothing > 0.0:  # the spread's sums: read by _finish_row only with smoothing
            for j in range(classes):
                w = weight[j] if has_weight else 1.0
                shifted, shifted_error = _two_sum(shifted, shifted_error, w * (row[j] - peak))
                weights += w
        t = target[i]
        valid = t >= 0 and t < classes
        _finish_row(
            stats, error, rows, i, t, row[t] if valid else peak,
            weight[t] if has_weight and valid else 1.0, peak, kg.log(sum_exp + sum_exp_error),
            shifted + shifted_error, weights, classes, class_count, ignore_index, smoothing,
        )  # fmt: skip
        if total:
            loss_total, loss_error = _two_sum(loss_total, loss_error, stats[i])
            weight_total, weight_error = _two_sum(weight_total, weight_error, stats[rows + i])
    if total:
        summed = loss_total + loss_error
        weight_sum = weight_total + weight_error
        totals[0] = summed / weight_sum if mean else summed
        totals[1] = weight_sum


_GROUPED_ROWS: dict[str, Any] = {}


def _grouped_rows(dtype: Any) -> Any:
    """The CUDA form of :func:`cross_entropy_rows` for logits of ``dtype``: a workgroup
    of ``width`` threads (a power of two up to :data:`GROUP`) per row."""
    kernel = _GROUPED_ROWS.get(dtype.name)
    if kernel is not None:
        return kernel
    element = dtype

    @kg.kernel
    def cross_entropy_rows_grouped(
        stats, error, x, target, weight, classes, class_count, rows, ignore_index, smoothing,
        has_weight, width,
    ):  # fmt: skip
        lane = kg.local_index()
        i = kg.group_index()
        first = i * classes
        partial_a = kg.shared(GROUP, element)
        partial_b = kg.shared(GROUP, element)
        partial_c = kg.shared(GROUP, element)
        peak = x[first]
        j = lane
        while j < classes:
            peak = max(peak, x[first + j])
            j += width
        partial_a[lane] = peak
        kg.barrier()
        half = width // 2
        while half > 0:
            if lane < half:
                partial_a[lane] = max(partial_a[lane], partial_a[lane + half])
            kg.barrier()
            half //= 2
        peak = partial_a[0]
        kg.barrier()  # everyone has read the peak before partial_a is reused
        total = 0.0
        total_error = 0.0
        shifted = 0.0
        shifted_error = 0.0
        weights = 0.0
        j = lane
        while j < classes:
            total, total_error = _two_sum(total, total_error, kg.exp(x[first + j] - peak))
            w = weight[j] if has_weight else 1.0
            shifted, shifted_error = _two_sum(shifted, shifted_error, w * (x[first + j] - peak))
            weights += w
            j += width
        partial_a[lane] = total + total_error
        partial_b[lane] = shifted + shifted_error
        partial_c[lane] = weights
        kg.barrier()
        half = width // 2
        while half > 0:
            if lane < half:
                partial_a[lane] += partial_a[lane + half]
                partial_b[lane] += partial_b[lane + half]
                partial_c[lane] += partial_c[lane + half]
            kg.barrier()
            half //= 2
        if lane == 0:
            t = target[i]
            valid = t >= 0 and t < classes
            _finish_row(
                stats, error, rows, i, t, x[first + t] if valid else peak,
                weight[t] if has_weight and valid else 1.0, peak, kg.log(partial_a[0]),
                partial_b[0], partial_c[0], classes, class_count, ignore_index, smoothing,
            )  # fmt: skip

    _GROUPED_ROWS[dtype.name] = cross_entropy_rows_grouped
    return cross_entropy_rows_grouped


@kg.kernel
def cross_entropy_grad(
    grad_x, x, target, weight, stats, grad, denominator, class_total, classes, class_count,
    rows, ignore_index, smoothing, has_weight, per_row, mean,
):  # fmt: skip
    """d loss / d x[i, j] = (p_ij * a_i - b_ij) * scale_i, with p = softmax(x[i]),
    a_i = w_t (1 - smoothing) + W smoothing / C (W = sum of the class weights, or C),
    b_ij = w_t (1 - smoothing) [j = t] + w_j smoothing / C, and 0 for ignored rows.
    scale_i is the incoming gradient (``grad[i]`` with ``per_row``, else ``grad[0]``),
    divided by ``denominator[0]`` (the sum of sample weights) for a mean.
    One work item per row (the CPU form); ``stats`` is the forward kernel's (3, N)."""
    i = kg.index()
    t = target[i]
    a, spread, keep = _gradient_factors(
        stats[rows + i], grad[i] if per_row else grad[0], denominator[0], mean,
        class_total[0] if has_weight else class_count, class_count, smoothing,
    )  # fmt: skip
    lse = stats[2 * rows + i]
    first = i * classes
    for j in range(classes):
        class_weight = weight[j] if has_weight else 1.0
        grad_x[first + j] = _gradient_value(
            x[first + j], lse, a, spread, keep, class_weight, j == t, t == ignore_index
        )


@kg.kernel
def cross_entropy_grad_grouped(
    grad_x, x, target, weight, stats, grad, denominator, class_total, classes, class_count,
    rows, ignore_index, smoothing, has_weight, per_row, mean, width,
):  # fmt: skip
    """The CUDA form of :func:`cross_entropy_grad`: a workgroup of ``width`` threads
    per row, striding over its classes (coalesced loads and stores)."""
    lane = kg.local_index()
    i = kg.group_index()
    t = target[i]
    a, spread, keep = _gradient_factors(
        stats[rows + i], grad[i] if per_row else grad[0], denominator[0], mean,
        class_total[0] if has_weight else class_count, class_count, smoothing,
    )  # fmt: skip
    lse = stats[2 * rows + i]
    first = i * classes
    j = lane
    while j < classes:
        class_weight = weight[j] if has_weight else 1.0
        grad_x[first + j] = _gradient_value(
            x[first + j], lse, a, spread, keep, class_weight, j == t, t == ignore_index
        )
        j += width


def _width(classes: int, x: Any) -> int:
    """Threads per row of the CUDA forms: a power of two, at least a warp (32 threads),
    at most :data:`GROUP`. Under the CUDA simulator, whose threads are slow Python
    threads, its launch policy's one thread per short row and warp of 1 apply (the
    kernels' code does not depend on the width)."""
    policy = getattr(getattr(x, "_backend", None), "policy", None)
    if getattr(policy, "row_threads", 32) <= 1:
        return 1
    width = getattr(policy, "warp", 32)
    while width < classes and width < GROUP:
        width *= 2
    return width


# Up to this many logits a loss on a backend without work groups (the CPU) is one work
# item for all rows, with the sum (and mean) of its losses: three launches made one (~8
# us of host time saved) where the rows are too few to be worth splitting across cores
# (~10 ns a logit: 16,384 logits take ~0.15 ms on one core).
ONE_ITEM_LOGITS = 16384


def one_item(x, rows, classes, reduction) -> bool:
    """Whether :func:`row_statistics` computes the ``reduction`` itself, into
    ``totals`` (then the caller skips its sum and division)."""
    return (
        reduction != "none"
        and rows * classes <= ONE_ITEM_LOGITS
        and not backend_capability(x._backend, "work_groups")
    )


def row_statistics(
    stats, error, x, target, weight, classes, rows, ignore_index, smoothing, has_weight,
    totals=None, mean=False,
) -> None:  # fmt: skip
    """Launch the forward kernel in the form for ``x``'s device (see the module
    docstring); with ``totals`` (where :func:`one_item` said so) one work item that
    also writes the reduced loss and the summed sample weights into ``totals``.
    Tensors may have any shape: the kernels index them as flat, contiguous memory."""
    arguments = (stats, error, x, target, weight, classes, float(classes), rows)
    arguments += (ignore_index, smoothing, has_weight)
    if not backend_capability(x._backend, "work_groups"):
        if totals is not None:
            cross_entropy_rows(*arguments, rows, totals, True, mean, ndrange=1)
        else:  # (``totals`` unread: stats stands in)
            cross_entropy_rows(*arguments, 1, stats, False, mean, ndrange=rows)
    else:
        width = _width(classes, x)
        _grouped_rows(x.dtype)(*arguments, width, ndrange=rows * width, workgroup=width)


def prefetch_gradient(
    x, target, classes, rows, ignore_index, smoothing, has_weight, per_row, mean
) -> None:  # fmt: skip
    """Have the gradient kernel that :func:`gradient` will launch for these settings
    compiled ahead where the backend can (``Kernel.prefetch``), while the forward pass
    goes on. One-element stand-ins carry the dtypes."""
    if backend_capability(x._backend, "work_groups"):
        return  # the grouped form: nothing compiles ahead on such backends today
    if asked_before(
        ("cross_entropy_grad", x.dtype, target.dtype, x.device, has_weight, per_row, mean)
    ):
        return

    def stand_in(dtype=x.dtype):
        return empty(1, dtype=dtype, device=x.device)

    arrays = (stand_in(), stand_in(), stand_in(target.dtype), stand_in(), stand_in())
    arrays += (stand_in(), stand_in(), stand_in())
    cross_entropy_grad.prefetch(
        *arrays, classes, float(classes), rows, ignore_index, smoothing, has_weight,
        per_row, mean, ndrange=rows,
    )  # fmt: skip


def gradient(
    grad_x, x, target, weight, stats, grad, denominator, class_total, classes, rows,
    ignore_index, smoothing, has_weight, per_row, mean,
) -> None:  # fmt: skip
    """Launch the gradient kernel in the form for ``x``'s device (``class_total`` may be
    any contiguous tensor when it is not read)."""
    # the kernels pass it on: it is not seen flat (its 1-D view: it is contiguous)
    class_total = make_view(class_total, (class_total.numel(),), (1,), class_total._offset)
    arguments = (grad_x, x, target, weight, stats, grad, denominator, class_total, classes)
    arguments += (float(classes), rows, ignore_index, smoothing, has_weight, per_row, mean)
    if not backend_capability(x._backend, "work_groups"):
        cross_entropy_grad(*arguments, ndrange=rows)
    else:
        width = _width(classes, x)
        cross_entropy_grad_grouped(*arguments, width, ndrange=rows * width, workgroup=width)
