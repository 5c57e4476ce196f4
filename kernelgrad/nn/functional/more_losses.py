"""``multilabel_margin_loss``, ``triplet_margin_with_distance_loss`` and
``linear_cross_entropy``: PyTorch's remaining loss functions, composed of existing
differentiable operations (so they run on every backend and their gradients come from
the composition)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...dtypes import int64
from ...errors import ArgumentError, DTypeError, IndexValueError, ShapeError, format_shape
from ...ops.creation import arange
from ...tensor import Tensor
from .loss import _check_reduction, _reduce, cross_entropy, legacy_reduction

__all__ = ["multilabel_margin_loss", "triplet_margin_with_distance_loss", "linear_cross_entropy"]


def multilabel_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class multi-label hinge loss of (C,) or (N, C) scores. Each row of
    ``target`` (the input's shape, integer) lists the sample's classes and ends at its
    first -1; per sample ``sum_{j listed} sum_{i not listed} max(0, 1 - (x[j] - x[i])) / C``
    (a class listed twice counts twice, as in PyTorch).

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> x = kg.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> round(F.multilabel_margin_loss(x, kg.tensor([[3, 0, -1, 1]])).item(), 4)
    0.85
    """
    op = "multilabel_margin_loss"
    reduction = legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, op)
    if input.ndim > 2 or (input.ndim == 2 and input.shape[1] == 0) or input.ndim == 0:
        raise ShapeError(
            f"{op}: expected a non-empty (C,) or (N, C) input (N may be 0), got shape "
            f"{format_shape(input.shape)}"
        )
    if target.shape != input.shape:
        raise ShapeError(
            f"{op}: the target must have the input's shape {format_shape(input.shape)}, got "
            f"{format_shape(target.shape)}"
        )
    if target.dtype.is_floating_point or target.dtype.name == "bool":
        raise DTypeError(f"{op}: the target must hold integer class indices, got {target.dtype}")
    classes = input.shape[-1]
    from .._range_check import check_within

    check_within(
        target,
        -1,
        classes - 1,
        lambda position: IndexValueError(
            f"{op}: the target at flat position {position} is out of range: the input has "
            f"{classes} classes (targets are 0 to {classes - 1}, and -1 ends a list)"
        ),
    )
    x = input.reshape(1, -1) if input.ndim == 1 else input
    t = target.reshape(x.shape).to(int64)
    listed = (t >= 0).to(int64).cumprod(1)  # the positions before the first -1
    classes_row = arange(classes, device=x.device)
    # counts[n, j]: how often class j is listed for sample n
    counts = ((t.unsqueeze(2) == classes_row) * listed.unsqueeze(2)).sum(1)
    others = (counts == 0).to(x.dtype)  # the classes not listed
    # hinge[n, j, i] = max(0, 1 - x[j] + x[i])
    hinge = (1.0 - x.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0.0)
    loss = (hinge * others.unsqueeze(1)).sum(2)
    loss = (loss * counts.to(x.dtype)).sum(1) / classes
    if input.ndim == 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction, op)


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with any distance
    function ``d`` of two tensors (default ``pairwise_distance``); ``swap`` uses
    ``min(d(a, n), d(p, n))`` as the negative distance.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> a, pos, neg = kg.tensor([[0.0, 0.0]]), kg.tensor([[0.0, 1.0]]), kg.tensor([[0.0, 1.5]])
    >>> l1 = lambda x, y: (x - y).abs().sum(-1)
    >>> F.triplet_margin_with_distance_loss(a, pos, neg, distance_function=l1).item()
    0.5
    """
    op = "triplet_margin_with_distance_loss"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(
            f"{op}: the anchor, positive and negative tensors must have the same number of "
            f"dims, got anchor {anchor.ndim}-d, positive {positive.ndim}-d and negative "
            f"{negative.ndim}-d"
        )
    if distance_function is None:
        from .distance import pairwise_distance

        distance_function = pairwise_distance
    positive_distance = distance_function(anchor, positive)
    negative_distance = distance_function(anchor, negative)
    if swap:
        negative_distance = negative_distance.minimum(distance_function(positive, negative))
    loss = (positive_distance - negative_distance + margin).clamp(min=0.0)
    return _reduce(loss, reduction, op)


def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Tensor | None = None,
    weight: Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options: Any = None,
) -> Tensor:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``
    (PyTorch 2.13). ``input`` is (in_features,) or (N, in_features); ``linear_weight``
    (C, in_features), or (C, d1, ..., dK, in_features) for a K-dimensional loss (batched
    input only), whose logits are (N, C, d1, ..., dK). ``ignore_index=None`` means -100
    for class-index targets; it must stay None for probability targets. ``options``
    (PyTorch's chunking settings) is accepted and ignored: the logits are always made
    whole, which gives the same values.

    >>> import kernelgrad as kg
    >>> F = kg.nn.functional
    >>> loss = F.linear_cross_entropy(kg.ones(2, 3), kg.zeros(4, 3), kg.tensor([0, 3]))
    >>> round(loss.item(), 4)
    1.3863
    """
    op = "linear_cross_entropy"
    if input.ndim not in (1, 2):
        raise ShapeError(
            f"{op}: expected a 1-d or 2-d input, got shape {format_shape(input.shape)}"
        )
    if linear_weight.ndim < 2:
        raise ShapeError(
            f"{op}: expected linear_weight with at least 2 dims (C, ..., in_features), got "
            f"shape {format_shape(linear_weight.shape)}"
        )
    lead = input.shape[:-1]
    in_features = input.shape[-1]
    if linear_weight.shape[-1] != in_features:
        raise ShapeError(
            f"{op}: the last dims of input {format_shape(input.shape)} and linear_weight "
            f"{format_shape(linear_weight.shape)} (in_features) must be equal"
        )
    classes = linear_weight.shape[0]
    out_features = linear_weight.shape[1:-1]
    if linear_bias is not None and linear_bias.shape != (classes, *out_features):
        raise ShapeError(
            f"{op}: expected linear_bias of shape {format_shape((classes, *out_features))}, "
            f"got {format_shape(linear_bias.shape)}"
        )
    if out_features and not lead:
        raise ShapeError(
            f"{op}: the K-dimensional loss of linear_weight "
            f"{format_shape(linear_weight.shape)} needs a batched (N, {in_features}) input, "
            f"got shape {format_shape(input.shape)}"
        )
    logits_shape = (*lead, classes, *out_features)
    if target.shape == logits_shape and ignore_index is not None:
        raise ArgumentError(f"{op}: ignore_index cannot be given when target holds probabilities")
    rows = math.prod(out_features) * classes
    from .linear import linear

    logits = linear(
        input,
        linear_weight.reshape(rows, in_features),
        None if linear_bias is None else linear_bias.reshape(rows),
    ).reshape(logits_shape)
    return cross_entropy(
        logits,
        target,
        weight,
        ignore_index=-100 if ignore_index is None else ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )
