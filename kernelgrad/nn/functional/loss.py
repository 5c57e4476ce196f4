"""Losses."""

from __future__ import annotations

import math
import warnings
from typing import Any

from ... import autograd
from ...errors import ArgumentError, IndexingError, ShapeError, UnsupportedError, format_shape
from ...ops.creation import arange, ones
from ...ops.creation import full as _full
from ...ops.elementwise import where
from ...ops.indexing import take
from ...ops.movement import make_view
from ...tensor import Tensor
from .. import _fused
from ._layout import _flat


def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ArgumentError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check_reduction(reduction: str, op: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ArgumentError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """PyTorch's reading of the deprecated ``size_average`` / ``reduce`` arguments: when
    either is given it decides the reduction (with PyTorch's warning), else
    ``reduction`` does. Every loss function and module that takes them calls this."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    result = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{result}' "
        "instead.",
        stacklevel=3,
    )
    return result


def _weighted(loss: Tensor, weight: Tensor | None, input: Tensor, op: str) -> Tensor:
    """``loss * weight`` for the elementwise ``weight`` of ``mse_loss`` / ``l1_loss`` /
    ``huber_loss`` (PyTorch 2.13), which must have the input's shape."""
    if weight is None:
        return loss
    if weight.shape != input.shape:
        raise ShapeError(
            f"{op}: weight must have the input's shape {format_shape(input.shape)}, got "
            f"{format_shape(weight.shape)}"
        )
    return loss * weight


def _classes_last(input: Tensor, target: Tensor, op: str) -> tuple[Tensor, Tensor, tuple]:
    """(N*, C) logits and (N*,) targets from (C,), (N, C) or (N, C, d1, ...) inputs."""
    if input.ndim == 1:
        if target.ndim != 0:
            raise ShapeError(
                f"{op}: an unbatched input of shape {format_shape(input.shape)} needs a 0-d "
                f"target, got shape {format_shape(target.shape)}"
            )
        return input.reshape(1, -1), target.reshape(1), ()
    if input.ndim < 1:
        raise ShapeError(f"{op}: the input needs a class dimension")
    expected = (input._shape[0],) + input._shape[2:]
    if target._shape != expected:
        raise ShapeError(
            f"{op}: for an input of shape {format_shape(input.shape)} (classes in dim 1) the "
            f"target must have shape {format_shape(expected)}, got {format_shape(target.shape)}"
        )
    if input.ndim == 2:
        return input, target, expected
    classes = input.shape[1]
    order = (0,) + tuple(range(2, input.ndim)) + (1,)
    return input.permute(*order).reshape(-1, classes), target.reshape(-1), expected


def _class_count(input: Tensor, op: str) -> int:
    """The size of ``input``'s class dimension (dim 0 of a 1-d input, else dim 1), which
    must be at least 1."""
    classes = input._shape[0 if input.ndim == 1 else 1] if input.ndim else 0
    if classes == 0:
        raise ShapeError(
            f"{op}: the input of shape {format_shape(input.shape)} has no classes (a 0-d "
            "tensor, or a class dimension of size 0); give scores of shape (C,) or "
            "(N, C, ...) with C >= 1"
        )
    return classes


def _class_weights(
    target: Tensor, weight: Tensor | None, ignore_index: int, classes: int, op: str, dtype: Any
) -> tuple[Tensor, Tensor]:
    """Per-sample weights (weight[target], 0 where ignored) and the valid mask; raises
    an error naming the bad class index if a target is out of range."""
    from .._range_check import check_within

    valid = target != ignore_index
    safe = where(valid, target, 0)
    # Checked here rather than by `take`, which would wrap a negative index around (as
    # Python indexing does); on CUDA the error comes at the next device-to-host read.
    check_within(
        safe,
        0,
        classes - 1,
        lambda position: _class_index_error(
            op, f"the target class index at flat position {position}", classes, ignore_index
        ),
    )
    table = weight if weight is not None else ones(classes, dtype=dtype, device=target.device)
    picked = take(table, 0, safe)
    return where(valid, picked, 0.0), valid


def _class_index_error(op: str, which: str, classes: int, ignore_index: int) -> IndexingError:
    return IndexingError(
        f"{op}: {which} is out of range: the input has {classes} classes "
        f"(valid targets: 0 to {classes - 1}, or ignore_index={ignore_index})"
    )


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between logits ``input`` ((N, C), (N, C, d1, ...) or (C,)) and
    ``target``: class indices (int, shape without C) or class probabilities (float,
    same shape as ``input``). Computed from a stable log-sum-exp. ``weight`` rescales
    classes; targets equal to ``ignore_index`` contribute nothing (and are left out of
    the mean); ``label_smoothing`` mixes the target with the uniform distribution. The
    deprecated ``size_average`` / ``reduce`` decide the reduction when given, as in PyTorch.

    >>> import kernelgrad as kg
    >>> logits = kg.tensor([[2.0, 0.0, 0.0]])
    >>> round(kg.nn.functional.cross_entropy(logits, kg.tensor([0])).item(), 4)
    0.2395
    """
    op = "cross_entropy"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    classes = _class_count(input, op)
    if weight is not None and weight.shape != (classes,):
        raise ShapeError(
            f"{op}: weight must have shape ({classes},), got {format_shape(weight.shape)}"
        )
    if not input.dtype.is_floating_point:
        # Integer logits: the loss and its statistics are computed in floating point (a
        # buffer of the input's dtype truncated the loss, 1.3133 -> 1).
        from ...dtypes import default_float

        input = input.to(default_float())  # noqa: A001
    if target.dtype.is_floating_point:
        return _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing)
    x, t, out_shape = _classes_last(input, target, op)

    needs_grad = autograd.needs_grad(x, weight)
    if needs_grad and weight is not None and weight.requires_grad:
        raise UnsupportedError(f"{op}: gradients with respect to `weight` are not supported")
    from .. import _loss_kernels as kernels

    rows = x._shape[0]
    smoothing = float(label_smoothing)
    has_weight = weight is not None
    with autograd.no_grad():
        logits = x.detach().contiguous()
        targets = t.contiguous()
        # without class weights the kernels never read `weights`; any flat tensor will do
        weights = weight.detach().contiguous() if has_weight else logits
        # (made directly on the logits' backend: ops.creation.empty's checks cost ~2 us)
        stats = Tensor._empty_on(logits._storage, (3, rows), x.dtype)
        # a small loss: one kernel computes the rows and their reduction (into totals)
        totals = (
            Tensor._empty_on(logits._storage, (2,), x.dtype)
            if rows and kernels.one_item(x, rows, classes, reduction)
            else None
        )
        if rows:
            # A target out of range is reported through a flag: read at once on the CPU,
            # at the next synchronisation on CUDA (no device round trip per call).
            error, check = _fused.error_flag(
                x.device,
                lambda bad: _class_index_error(
                    op, f"target class index {bad}", classes, ignore_index
                ),
            )
            # (flat logits and statistics: the kernel slices rows out of the one and hands
            # the other to a helper; the launch flattens the others itself)
            kernels.row_statistics(
                _flat(stats), error, _flat(logits), targets, weights, classes, rows,
                ignore_index, smoothing, has_weight, totals, reduction == "mean",
            )  # fmt: skip
            check()
        denominator = None
        if totals is not None:  # the reduced loss, and the mean's denominator
            result = Tensor._make(totals._storage, (), (), 0, totals.dtype)
            if reduction == "mean":
                denominator = Tensor._make(totals._storage, (1,), (1,), 1, totals.dtype)
        elif reduction == "mean":
            # (the views that stats[:2], totals[1:], totals[0] and totals[1] are, made
            # directly: indexing's general path cost ~4 us each)
            totals = make_view(stats, (2, rows), stats._strides, 0).sum(1)
            denominator = make_view(totals, (1,), totals._strides, 1)
            result = make_view(totals, (), (), 0) / make_view(totals, (), (), 1)
        elif reduction == "sum":
            result = stats[0].sum()
        else:
            result = stats[0].contiguous().reshape(out_shape)

    if needs_grad:
        if rows:  # compiled while the forward pass goes on, where the backend can
            kernels.prefetch_gradient(
                logits, targets, classes, rows, ignore_index, smoothing, has_weight,
                reduction == "none", reduction == "mean",
            )  # fmt: skip

        def backward(grad: Tensor) -> tuple[Tensor, None]:
            if autograd.is_grad_enabled():  # create_graph: differentiable ops
                return _cross_entropy_index_grad(
                    x, t, weight, ignore_index, reduction, smoothing, grad
                ), None
            grad_x = Tensor._empty_on(logits._storage, (rows, classes), x.dtype)
            if rows:  # (the kernels index every tensor as flat, contiguous memory)
                class_total = weight.sum().reshape(1) if has_weight else logits
                upstream = grad.detach().contiguous()
                kernels.gradient(
                    grad_x, logits, targets, weights, stats, upstream,
                    denominator if denominator is not None else upstream, class_total,
                    classes, rows, ignore_index, smoothing, has_weight, reduction == "none",
                    reduction == "mean",
                )  # fmt: skip
            return grad_x, None

        autograd.record(op, (x, weight), result, backward, (stats,))
    return result


def _cross_entropy_index_grad(
    x: Tensor,
    t: Tensor,
    weight: Tensor | None,
    ignore_index: int,
    reduction: str,
    smoothing: float,
    grad: Tensor,
) -> Tensor:
    """The gradient of cross_entropy with class-index targets, written in differentiable
    tensor ops (for ``backward(create_graph=True)``):
    d loss_i / d x_ij = (a_i * p_ij - b_ij) * scale_i (see docs/nn.md for the derivation)."""
    classes = x.shape[1]
    sample_weight, valid = _class_weights(
        t, weight, ignore_index, classes, "cross_entropy", x.dtype
    )
    valid_float = valid.to(x.dtype)
    probs = x.softmax(1)
    if reduction == "none":
        scale = grad.reshape(-1)
    elif reduction == "mean":
        scale = grad / sample_weight.sum()
    else:
        scale = grad
    per_sample = sample_weight * (1.0 - smoothing)
    class_total = float(classes) if weight is None else weight.sum()
    a = per_sample + valid_float * (class_total * (smoothing / classes))
    target_mask = t.unsqueeze(1) == arange(classes, device=x.device)
    b = where(target_mask, per_sample.unsqueeze(1), 0.0)
    if smoothing > 0:
        spread = weight if weight is not None else 1.0
        b = b + valid_float.unsqueeze(1) * spread * (smoothing / classes)
    return (probs * a.unsqueeze(1) - b) * scale.unsqueeze(-1)


def _cross_entropy_probabilities(
    input: Tensor, target: Tensor, weight: Tensor | None, reduction: str, label_smoothing: float
) -> Tensor:
    if target.shape != input.shape:
        raise ShapeError(
            f"cross_entropy: probability targets must have the input's shape "
            f"{format_shape(input.shape)}, got {format_shape(target.shape)}"
        )
    class_dim = 0 if input.ndim == 1 else 1
    classes = input.shape[class_dim]
    if label_smoothing > 0:
        target = target * (1.0 - label_smoothing) + label_smoothing / classes
    log_probs = input.log_softmax(class_dim)
    if weight is not None:
        shape = [1] * input.ndim
        shape[class_dim] = classes
        log_probs = log_probs * weight.reshape(tuple(shape))
    loss = -(log_probs * target).sum(class_dim)
    return _reduce(loss, reduction, "cross_entropy")


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices ``target`` under log-probabilities
    ``input`` ((N, C), (N, C, d1, ...) or (C,)); pair it with ``log_softmax``.

    >>> import kernelgrad as kg
    >>> logp = kg.tensor([[-0.5, -1.0]])
    >>> kg.nn.functional.nll_loss(logp, kg.tensor([1])).item()
    1.0
    """
    op = "nll_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    _class_count(input, op)
    x, t, out_shape = _classes_last(input, target, op)
    classes = x.shape[1]
    sample_weight, _ = _class_weights(t, weight, ignore_index, classes, op, x.dtype)
    target_mask = t.unsqueeze(1) == arange(classes, device=x.device)
    loss = -where(target_mask, x, 0.0).sum(1) * sample_weight
    if reduction == "mean":
        return loss.sum() / sample_weight.sum()
    if reduction == "sum":
        return loss.sum()
    return loss.reshape(out_shape)


def _check_same_shape(input: Tensor, target: Tensor, op: str) -> None:
    if input.shape != target.shape:
        warnings.warn(
            f"{op}: the target shape {format_shape(target.shape)} differs from the input shape "
            f"{format_shape(input.shape)}; they will be broadcast, which is rarely intended",
            stacklevel=3,
        )


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """Mean squared error ``(input - target)**2`` (reduced by ``reduction``); an
    elementwise ``weight`` (the input's shape) multiplies it, and the mean is then
    ``sum(weight * loss) / sum(weight)``, as in PyTorch.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.mse_loss(kg.tensor([1.0, 3.0]), kg.tensor([0.0, 0.0])).item()
    5.0
    """
    op = "mse_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_same_shape(input, target, op)
    difference = input - target
    return _weighted_reduce(difference * difference, weight, input, reduction, op)


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """Mean absolute error ``|input - target|``; ``weight`` as in ``mse_loss``."""
    op = "l1_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_same_shape(input, target, op)
    return _weighted_reduce((input - target).abs(), weight, input, reduction, op)


def _weighted_reduce(
    loss: Tensor, weight: Tensor | None, input: Tensor, reduction: str, op: str
) -> Tensor:
    """``mse_loss`` / ``l1_loss`` reduction: with a weight, the mean is
    ``sum(weight * loss) / sum(weight)`` (PyTorch's)."""
    if weight is None or reduction != "mean":
        return _reduce(_weighted(loss, weight, input, op), reduction, op)
    return _weighted(loss, weight, input, op).sum() / weight.sum()


def _check_probabilities(input: Tensor, op: str) -> None:
    """Refuse inputs outside [0, 1] (and NaN), as PyTorch does; on CUDA the error comes
    at the next device-to-host read."""
    from .._range_check import check_within

    def outside(position: int) -> ArgumentError:
        return ArgumentError(
            f"{op}: all elements of the input must be probabilities in [0, 1], but the "
            f"element at flat position {position} of the input of shape "
            f"{format_shape(input.shape)} is not (or is NaN); apply `sigmoid` first, or use "
            "binary_cross_entropy_with_logits on the raw scores"
        )

    check_within(input, 0.0, 1.0, outside)


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Binary cross-entropy of probabilities ``input`` (in [0, 1]) against ``target``;
    each log is clamped at -100, as PyTorch does.

    >>> import kernelgrad as kg
    >>> round(kg.nn.functional.binary_cross_entropy(kg.tensor([0.5]), kg.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_same_shape(input, target, "binary_cross_entropy")
    _check_probabilities(input, "binary_cross_entropy")
    log_p = input.log().clamp(min=-100.0)
    log_not_p = (1.0 - input).log().clamp(min=-100.0)
    loss = -(target * log_p + (1.0 - target) * log_not_p)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta`` (d = input -
    target); ``beta = 0`` is the L1 loss.

    >>> import kernelgrad as kg
    >>> loss = kg.nn.functional.smooth_l1_loss(kg.tensor([0.5, 3.0]), kg.zeros(2), reduction="none")
    >>> loss.tolist()
    [0.125, 2.5]
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise ArgumentError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    _check_same_shape(input, target, "smooth_l1_loss")
    difference = (input - target).abs()
    if beta == 0:
        return _reduce(difference, reduction, "smooth_l1_loss")
    # the quadratic branch gets |d| clamped at beta, so neither branch overflows
    inner = difference.clamp(max=beta)
    loss = where(difference < beta, inner * inner * (0.5 / beta), difference - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def huber_loss(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Tensor | None = None,
) -> Tensor:
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``: the
    smooth L1 loss with beta = delta, times delta. An elementwise ``weight`` (the
    input's shape) multiplies it before the reduction (a plain mean, as in PyTorch)."""
    if delta <= 0:
        raise ArgumentError(f"huber_loss: delta must be positive, got {delta}")
    _check_same_shape(input, target, "huber_loss")
    difference = (input - target).abs()
    inner = difference.clamp(max=delta)
    loss = where(difference < delta, inner * inner * 0.5, (difference - 0.5 * delta) * delta)
    return _reduce(_weighted(loss, weight, input, "huber_loss"), reduction, "huber_loss")


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)``, computed stably from the logits:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * log(1 + exp(-x))``.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> round(F.binary_cross_entropy_with_logits(kg.tensor([0.0]), kg.tensor([1.0])).item(), 4)
    0.6931
    """
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_same_shape(input, target, "binary_cross_entropy_with_logits")
    # log(1 + exp(-x)) without overflow: log1p(exp(-|x|)) + max(-x, 0)
    softplus_negative = (-input.abs()).exp().log1p() + (-input).relu()
    if pos_weight is not None:
        log_weight = (pos_weight - 1.0) * target + 1.0
        loss = (1.0 - target) * input + log_weight * softplus_negative
    else:
        loss = (1.0 - target) * input + softplus_negative
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


# --- the other losses of torch.nn.functional, in tensor ops -----------------------------


def _softplus(x: Tensor) -> Tensor:
    """log(1 + exp(x)) without overflow."""
    return (-x.abs()).exp().log1p() + x.relu()


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """Kullback-Leibler divergence of ``target`` from the distribution whose
    log-probabilities are ``input``: ``target * (log(target) - input)`` (0 where target
    is 0), or ``exp(target) * (target - input)`` with ``log_target``. ``"batchmean"``
    divides the sum by the batch size (the mathematical KL divergence); ``"mean"``
    divides by the element count (PyTorch warns about it, and so does this).

    >>> import kernelgrad as kg
    >>> logp = kg.tensor([[0.5, 0.5]]).log()
    >>> target = kg.tensor([[1.0, 0.0]])
    >>> round(kg.nn.functional.kl_div(logp, target, reduction="batchmean").item(), 4)
    0.6931
    """
    legacy = size_average is not None or reduce is not None
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ArgumentError(
            f"kl_div: reduction must be 'mean', 'batchmean', 'sum' or 'none', got {reduction!r}"
        )
    if reduction == "mean" and not legacy:  # (PyTorch warns only about an explicit 'mean')
        warnings.warn(
            "kl_div: reduction 'mean' divides the total loss by both the batch size and the "
            "support size; 'batchmean' divides only by the batch size, and aligns with the "
            "KL divergence's definition",
            stacklevel=2,
        )
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # xlogy(t, t) - t * input: 0 where t == 0, NaN where t < 0 (as PyTorch)
        zero = target == 0
        loss = where(zero, 0.0, target * where(zero, 1.0, target).log()) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction, "kl_div")


def _check_ndims(op: str, names: tuple[str, ...], *tensors: Tensor) -> None:
    if len({t.ndim for t in tensors}) > 1:
        shapes = ", ".join(f"{n} {format_shape(t.shape)}" for n, t in zip(names, tensors))
        raise ShapeError(f"{op}: all inputs must have the same number of dimensions, got {shapes}")


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``: target 1 asks for input1 to rank
    higher than input2, target -1 for the reverse.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> x1, x2 = kg.tensor([1.0, 1.0]), kg.tensor([2.0, 0.0])
    >>> F.margin_ranking_loss(x1, x2, kg.tensor([1.0, 1.0])).item()
    0.5
    """
    op = "margin_ranking_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    _check_ndims(op, ("input1", "input2", "target"), input1, input2, target)
    loss = (-target * (input1 - input2) + margin).clamp(min=0.0)
    return _reduce(loss, reduction, op)


def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``input`` where target is 1, ``max(0, margin - input)`` where target is -1 (as
    PyTorch: other target values get both terms).

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> target = kg.tensor([1.0, -1.0])
    >>> F.hinge_embedding_loss(kg.tensor([0.3, 0.4]), target, reduction="none").tolist()
    [0.30000001192092896, 0.6000000238418579]
    """
    op = "hinge_embedding_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    margin_term = where(target != 1, (margin - input).clamp(min=0.0), 0.0)
    self_term = where(target != -1, input, 0.0)
    return _reduce(margin_term + self_term, reduction, op)


def soft_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """The two-class logistic loss ``log(1 + exp(-target * input))`` (target 1 or -1),
    computed without overflow.

    >>> import kernelgrad as kg
    >>> round(kg.nn.functional.soft_margin_loss(kg.tensor([0.0]), kg.tensor([1.0])).item(), 4)
    0.6931
    """
    op = "soft_margin_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    _check_same_shape(input, target, op)
    return _reduce(_softplus(-target * input), reduction, op)


def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """One-versus-all logistic loss of (N, C) scores against (N, C) 0/1 targets, averaged
    over the C classes (``weight`` rescales them): one loss per sample.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> round(F.multilabel_soft_margin_loss(kg.zeros(1, 3), kg.tensor([[1.0, 0.0, 1.0]])).item(), 4)
    0.6931
    """
    op = "multilabel_soft_margin_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    if input.ndim == 0:
        raise ShapeError(f"{op}: the input needs a class dimension, got a 0-d tensor")
    # -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x)), with logsigmoid(x) = -softplus(-x)
    loss = target * _softplus(-input) + (1.0 - target) * _softplus(input)
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(-1) / input.shape[-1]
    return _reduce(loss, reduction, op)


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class hinge loss of (N, C) or (C,) scores against class indices:
    ``sum_{j != y} max(0, margin - x[y] + x[j])**p / C`` per sample, times ``weight[y]``.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> round(F.multi_margin_loss(kg.tensor([[0.1, 0.2, 0.4, 0.8]]), kg.tensor([3])).item(), 4)
    0.325
    """
    op = "multi_margin_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    if p not in (1, 2):
        raise ArgumentError(f"{op}: only p == 1 and p == 2 are supported, got p={p!r}")
    if input.ndim not in (1, 2):
        raise ShapeError(
            f"{op}: the input must be (N, C) or (C,), got shape {format_shape(input.shape)}"
        )
    x = input.reshape(1, -1) if input.ndim == 1 else input
    t = target.reshape(-1)
    if target.ndim > 1 or t.shape[0] != x.shape[0]:
        raise ShapeError(
            f"{op}: for an input of shape {format_shape(input.shape)} the target must hold "
            f"{x.shape[0]} class indices (shape ({x.shape[0]},) or ()), got shape "
            f"{format_shape(target.shape)}"
        )
    if target.dtype.is_floating_point:
        raise ArgumentError(f"{op}: the target must hold integer class indices, got {target.dtype}")
    classes = _class_count(input, op)
    if weight is not None and weight.shape != (classes,):
        raise ShapeError(
            f"{op}: weight must have shape ({classes},), got {format_shape(weight.shape)}"
        )
    from .._range_check import check_within

    check_within(
        t,
        0,
        classes - 1,
        lambda position: IndexingError(
            f"{op}: the target class index at flat position {position} is out of range: the "
            f"input has {classes} classes (valid targets: 0 to {classes - 1})"
        ),
    )
    is_target = t.unsqueeze(1) == arange(classes, device=x.device)
    picked = where(is_target, x, 0.0).sum(1, keepdim=True)
    hinge = (x - picked + margin).clamp(min=0.0)
    if p == 2:
        hinge = hinge * hinge
    loss = where(is_target, 0.0, hinge).sum(1) / classes
    if weight is not None:
        loss = loss * take(weight, 0, t)
    if input.ndim == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction, op)


def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where it is
    -1; the cosine over the last dim of (N, D) or (D,) inputs (eps 1e-12 added to each
    squared norm, as PyTorch).

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> x1, x2 = kg.tensor([[1.0, 0.0]]), kg.tensor([[0.0, 1.0]])
    >>> F.cosine_embedding_loss(x1, x2, kg.tensor([1])).item()
    1.0
    """
    op = "cosine_embedding_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    _check_ndims(op, ("input1", "input2"), input1, input2)
    if target.ndim > 1 or input1.ndim != target.ndim + 1:
        raise ShapeError(
            f"{op}: a target of shape (N,) needs (N, D) inputs, a 0-d target (D,) inputs; "
            f"got inputs {format_shape(input1.shape)} and {format_shape(input2.shape)} with "
            f"target {format_shape(target.shape)}"
        )
    dim = target.ndim
    epsilon = 1e-12
    products = (input1 * input2).sum(dim)
    squares1 = (input1 * input1).sum(dim) + epsilon
    squares2 = (input2 * input2).sum(dim) + epsilon
    cos = products / (squares1 * squares2).sqrt()
    loss = where(target == 1, 1.0 - cos, 0.0) + where(
        target == -1, (cos - margin).clamp(min=0.0), 0.0
    )
    return _reduce(loss, reduction, op)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with ``d`` the
    ``pairwise_distance`` (p-norm, eps); ``swap`` uses min(d(a, n), d(p, n)).

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> a, pos, neg = kg.tensor([[0.0, 0.0]]), kg.tensor([[0.0, 1.0]]), kg.tensor([[0.0, 3.0]])
    >>> round(F.triplet_margin_loss(a, pos, neg, eps=0.0).item(), 4)
    0.0
    """
    from .distance import pairwise_distance

    op = "triplet_margin_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    _check_ndims(op, ("anchor", "positive", "negative"), anchor, positive, negative)
    if anchor.ndim not in (1, 2):
        raise ShapeError(
            f"{op}: the inputs must be (N, D) or (D,), got shape {format_shape(anchor.shape)}"
        )
    if margin <= 0:
        raise ArgumentError(f"{op}: margin must be greater than 0, got {margin}")
    positive_distance = pairwise_distance(anchor, positive, p, eps)
    negative_distance = pairwise_distance(anchor, negative, p, eps)
    if swap:
        negative_distance = negative_distance.minimum(pairwise_distance(positive, negative, p, eps))
    loss = (positive_distance - negative_distance + margin).clamp(min=0.0)
    return _reduce(loss, reduction, op)


def _straight_through_clamp(x: Tensor, minimum: float) -> Tensor:
    """``x`` clamped at ``minimum`` in value, with the gradient of ``x`` itself (PyTorch
    clamps in place under ``no_grad``)."""
    return x + (x.detach().clamp(min=minimum) - x.detach())


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Tensor | float,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of ``target`` under a Gaussian of mean ``input`` and
    variance ``var``: ``0.5 * (log(var) + (input - target)**2 / var)`` (+ 0.5 * log(2 pi)
    with ``full``); ``var`` is clamped at ``eps`` (without affecting its gradient). ``var``
    has the input's shape, or one dimension of size 1 (or missing at the end), or is a
    float.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> F.gaussian_nll_loss(kg.tensor([1.0]), kg.tensor([3.0]), kg.tensor([1.0])).item()
    2.0
    """
    op = "gaussian_nll_loss"
    if isinstance(var, (int, float)):
        if var < 0:
            raise ArgumentError(f"{op}: var must be non-negative, got {var}")
        var = _full(input.shape, float(var), dtype=input.dtype, device=input.device)
    else:
        from .._range_check import check_within

        check_within(
            var.detach(),
            0.0,
            math.inf,
            lambda position: ArgumentError(
                f"{op}: var has a negative (or NaN) entry at flat position {position}; "
                "variances must be non-negative"
            ),
        )
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (
            input.ndim == var.ndim and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1
        ):
            raise ShapeError(
                f"{op}: var of shape {format_shape(var.shape)} does not fit the input of shape "
                f"{format_shape(input.shape)}: give the input's shape, that shape with one "
                "dimension of size 1, or without its last dimension"
            )
    _check_reduction(reduction, op)
    var = _straight_through_clamp(var, eps)
    difference = input - target
    loss = 0.5 * (var.log() + difference * difference / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, op)


def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: Any = None,
    eps: float = 1e-8,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of ``target`` under a Poisson distribution of rate
    ``exp(input)`` (``log_input``) or ``input``: ``exp(input) - target * input``, or
    ``input - target * log(input + eps)``; ``full`` adds Stirling's approximation of
    ``log(target!)`` where target > 1.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.poisson_nll_loss(kg.tensor([0.0]), kg.tensor([2.0])).item()
    1.0
    """
    op = "poisson_nll_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        large = target > 1
        t = where(large, target, 2.0)
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + where(large, stirling, 0.0)
    return _reduce(loss, reduction, op)
