"""The connectionist temporal classification loss, ``F.ctc_loss`` (also ``kg.ctc_loss``,
PyTorch's ``torch.ctc_loss``).

The per-sequence losses and their gradient come from the two kernels of
``nn/_ctc_kernels.py`` (the alpha and beta recursions, one work item per sequence); the
rest is PyTorch's ``ctc_loss_impl`` in tensor ops: ``zero_infinity`` replaces infinite
losses by 0 (the kernel then gives those sequences a zero gradient), ``"mean"`` divides
each loss by its target length (at least 1) and averages over the batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import autograd
from ...dtypes import int64
from ...errors import ArgumentError, DTypeError, IndexValueError, ShapeError, format_shape
from ...ops.creation import empty, zeros
from ...ops.creation import tensor as tensor_from
from ...ops.elementwise import where
from ...tensor import Tensor
from ._layout import _flat, _no_double_backward

# torch.ctc_loss takes the reduction as PyTorch's enum (torch.nn._reduction.get_enum)
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction_name(reduction: Any, op: str) -> str:
    if isinstance(reduction, int) and not isinstance(reduction, bool):
        if reduction in _REDUCTIONS:
            return _REDUCTIONS[reduction]
    elif reduction in ("none", "mean", "sum"):
        return reduction
    raise ArgumentError(
        f"{op}: reduction must be 'none', 'mean' or 'sum' (or torch.ctc_loss's 0, 1, 2), "
        f"got {reduction!r}"
    )


def _lengths(values: Any, name: str, batch: int, op: str) -> list[int]:
    """``input_lengths`` / ``target_lengths`` as Python ints: a tensor of an integer
    dtype (any device; read to the host, as PyTorch does), a list or tuple of ints, or an
    int for an unbatched input."""
    if isinstance(values, Tensor):
        if values.dtype.is_floating_point or values.dtype.is_bool:
            raise DTypeError(
                f"{op}: {name} must be integral, got a {values.dtype.name} tensor; pass "
                f"{name}.long() or a list of ints"
            )
        lengths = [int(v) for v in values.detach().cpu().numpy().reshape(-1)]
    elif isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        lengths = [int(values)]
    elif isinstance(values, (list, tuple)):
        lengths = []
        for v in values:
            if isinstance(v, Tensor) and v.numel() == 1 and not v.dtype.is_floating_point:
                v = v.item()
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise DTypeError(f"{op}: {name} must hold ints, got {values!r}")
            lengths.append(int(v))
    else:
        raise DTypeError(
            f"{op}: {name} must be a tensor of ints or a list or tuple of ints, got "
            f"{type(values).__name__}"
        )
    if len(lengths) != batch:
        raise ShapeError(
            f"{op}: {name} must be of size batch_size ({batch}), got {len(lengths)} values"
        )
    return lengths


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    reduction: Any = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """The CTC loss of log-probabilities ``log_probs`` ((T, N, C), or (T, C) unbatched)
    against ``targets``: padded (N, S) rows, or all targets concatenated in one 1-d
    tensor, with ``input_lengths`` and ``target_lengths`` (tensors or lists of N ints).

    >>> import kernelgrad as kg
    >>> log_probs = kg.full((3, 1, 2), 0.5).log()  # two classes, blank 0
    >>> loss = kg.nn.functional.ctc_loss(log_probs, kg.tensor([[1]]), [3], [1], reduction="sum")
    >>> round(loss.item(), 4)  # -log(6 alignments / 8)
    0.2877
    """
    op = "ctc_loss"
    reduction = _reduction_name(reduction, op)
    if not isinstance(log_probs, Tensor) or not isinstance(targets, Tensor):
        raise DTypeError(f"{op}: log_probs and targets must be tensors")
    if not log_probs.dtype.is_floating_point:
        raise DTypeError(
            f"{op}: log_probs must be float32 or float64 (log-probabilities, e.g. from "
            f"log_softmax), got {log_probs.dtype.name}"
        )
    if log_probs.ndim not in (2, 3):
        raise ShapeError(
            f"{op}: log_probs must be (T, N, C) or unbatched (T, C), got shape "
            f"{format_shape(log_probs.shape)}"
        )
    if log_probs.numel() == 0:
        raise ShapeError(
            f"{op}: log_probs tensor must not be empty, got shape {format_shape(log_probs.shape)}"
        )
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    steps, batch, classes = lp.shape
    if not 0 <= blank < classes:
        raise ArgumentError(f"{op}: blank must be in label range [0, {classes}), got {blank}")
    in_lengths = _lengths(input_lengths, "input_lengths", batch, op)
    tg_lengths = _lengths(target_lengths, "target_lengths", batch, op)
    for name, lengths in (("input_lengths", in_lengths), ("target_lengths", tg_lengths)):
        low = min(lengths)
        if low < 0:
            raise ArgumentError(f"{op}: Expected {name} to have value at least 0, got {low}")
    if max(in_lengths) > steps:
        raise ArgumentError(
            f"{op}: Expected input_lengths to have value at most {steps} (log_probs has "
            f"{steps} steps), but got value {max(in_lengths)}"
        )
    if targets.ndim not in (1, 2):
        raise ShapeError(
            f"{op}: targets must be padded (N, S) or concatenated (sum(target_lengths),), "
            f"got shape {format_shape(targets.shape)}"
        )
    if targets.dtype.is_bool:
        raise DTypeError(f"{op}: targets must hold class indices (an integer tensor), got bool")
    if targets.ndim == 1:
        total = sum(tg_lengths)
        if targets.shape[0] != total:
            raise ShapeError(
                f"{op}: concatenated targets must have sum(target_lengths) = {total} "
                f"elements, got {targets.shape[0]}"
            )
        offsets = np.concatenate([[0], np.cumsum(tg_lengths)[:-1]])
    else:
        if targets.shape[0] != batch:
            raise ShapeError(
                f"{op}: padded targets must have one row per sequence ({batch}), got shape "
                f"{format_shape(targets.shape)}"
            )
        if max(tg_lengths) > targets.shape[1]:
            raise ShapeError(
                f"{op}: a target length of {max(tg_lengths)} does not fit the padded targets "
                f"of shape {format_shape(targets.shape)}"
            )
        offsets = np.arange(batch) * targets.shape[1]

    from .. import _ctc_kernels as kernels
    from .. import _fused

    device = lp.device
    width = 2 * max(tg_lengths) + 1
    with autograd.no_grad():
        logp = _flat(lp.detach().contiguous())
        # PyTorch moves the targets to log_probs' device too (cuDNN wants them on the CPU)
        labels = targets.detach().to(device=device, dtype=int64).contiguous().reshape(-1)
        if labels.numel() == 0:  # no labels to read; the kernel wants an array
            labels = zeros(1, dtype=int64, device=device)
        lengths_in = tensor_from(np.array(in_lengths, dtype=np.int64), device=device)
        lengths_tg = tensor_from(np.array(tg_lengths, dtype=np.int64), device=device)
        starts = tensor_from(offsets.astype(np.int64), device=device)
        log_alpha = empty(batch * steps * width, dtype=lp.dtype, device=device)
        nll = empty(batch, dtype=lp.dtype, device=device)
        error, check = _fused.error_flag(
            device,
            lambda bad: IndexValueError(
                f"{op}: target label {bad} is out of range: log_probs has {classes} classes "
                f"(valid labels: 0 to {classes - 1}; the blank is {blank})"
            ),
        )
        arguments = (logp, labels, starts, lengths_in, lengths_tg, steps, batch, classes)
        kernels.ctc_alpha(log_alpha, nll, error, *arguments, width, blank, ndrange=batch)
        check()

    if autograd.needs_grad(lp):
        losses = nll.detach()  # the backward's copy: no reference cycle through the node

        def backward(grad: Tensor) -> tuple[Tensor]:
            _no_double_backward(op)
            grad_lp = empty((steps, batch, classes), dtype=lp.dtype, device=device)
            log_beta = empty(batch * 2 * width, dtype=lp.dtype, device=device)
            upstream = _flat(grad.detach().contiguous())
            kernels.ctc_gradient(
                _flat(grad_lp), log_beta, logp, labels, starts, lengths_in, lengths_tg,
                log_alpha, losses, upstream, steps, batch, classes, width, blank,
                bool(zero_infinity), ndrange=batch,
            )  # fmt: skip
            return (grad_lp,)

        autograd.record(op, (lp,), nll, backward, (logp, losses))
    loss = nll
    if zero_infinity:
        loss = where(loss == float("inf"), 0.0, loss)
    if reduction == "mean":
        return (loss / lengths_tg.clamp_min(1).to(loss.dtype)).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.squeeze(0)
