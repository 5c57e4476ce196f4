"""Fuzz: losses (cross_entropy with class indices or probabilities, weights,
ignore_index and label smoothing; nll_loss; mse_loss; l1_loss; binary cross-entropy)
with random shapes, out-of-range classes and bad arguments, against NumPy."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import kernelgrad as kg
import kernelgrad.nn.functional as F
from tests.fuzz.oracle import check
from tests.fuzz.strategies import FLOAT_DTYPES, tensors

REDUCTIONS = ("mean", "sum", "none", "average")


def _reduce(loss, reduction, denominator=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / (loss.size if denominator is None else denominator)
    raise ValueError("bad reduction")


def _classes_last(x):
    """(rows, classes) logits of an (N, C, d...) or (C,) input."""
    if x.ndim == 1:
        return x[None, :]
    rows = x.shape[0] * int(np.prod(x.shape[2:]))
    return np.moveaxis(x, 1, -1).reshape(rows, x.shape[1])


def _log_softmax(rows):
    """As PyTorch's: an infinite maximum makes the row nan."""
    peak = rows.max(axis=1, keepdims=True) if rows.shape[1] else 0.0
    shifted = rows - peak
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _cross_entropy(x, t, weight, ignore_index, reduction, smoothing):
    if x.ndim == 0 or not 0 <= smoothing <= 1 or reduction not in REDUCTIONS[:3]:
        raise ValueError("arguments")
    classes = x.shape[0] if x.ndim == 1 else x.shape[1]
    w = np.ones(classes) if weight is None else weight.astype(np.float64)
    if w.shape != (classes,):
        raise ValueError("weight shape")
    logp = _log_softmax(_classes_last(x.astype(np.float64)))
    if t.dtype.kind == "f":  # class probabilities
        if t.shape != x.shape:
            raise ValueError("target shape")
        if classes == 0:
            raise ValueError("no classes")
        target = _classes_last(t.astype(np.float64)) * (1 - smoothing) + smoothing / classes
        loss = -(target * logp * w).sum(axis=1)
        out_shape = (x.shape[0],) + x.shape[2:] if x.ndim > 1 else ()
        return _reduce(loss.reshape(out_shape), reduction, loss.size)
    expected_shape = () if x.ndim == 1 else (x.shape[0],) + x.shape[2:]
    if t.shape != expected_shape:
        raise ValueError("target shape")
    flat = t.reshape(-1)
    ignored = flat == ignore_index
    if np.any(~ignored & ((flat < 0) | (flat >= classes))):
        raise IndexError("class index out of range")
    safe = np.where(ignored, 0, flat)
    rows = np.arange(flat.size)
    picked = w[safe] * logp[rows, safe]
    loss = -(1 - smoothing) * picked
    if smoothing:
        loss = loss - smoothing * (logp * w).sum(axis=1) / classes
    loss = np.where(ignored, 0.0, loss)
    return _reduce(loss.reshape(expected_shape), reduction, np.where(ignored, 0.0, w[safe]).sum())


def _nll(x, t, reduction):
    if x.ndim == 0 or reduction not in REDUCTIONS[:3]:
        raise ValueError("arguments")
    rows = _classes_last(x.astype(np.float64))
    expected_shape = () if x.ndim == 1 else (x.shape[0],) + x.shape[2:]
    if t.shape != expected_shape:
        raise ValueError("target shape")
    flat = t.reshape(-1)
    ignored = flat == -100
    if np.any(~ignored & ((flat < 0) | (flat >= rows.shape[1]))):
        raise IndexError("class index out of range")
    safe = np.where(ignored, 0, flat)
    loss = np.where(ignored, 0.0, -rows[np.arange(flat.size), safe])
    return _reduce(loss.reshape(t.shape), reduction, (~ignored).sum())


def _pointwise(kind, x, t, reduction):
    if reduction not in REDUCTIONS[:3]:
        raise ValueError("bad reduction")
    x, t = np.broadcast_arrays(x, t)  # PyTorch broadcasts (with a warning)
    x, t = x.astype(np.float64), t.astype(np.float64)
    if kind == "mse_loss":
        loss = (x - t) ** 2
    elif kind == "l1_loss":
        loss = np.abs(x - t)
    elif kind == "binary_cross_entropy":
        if np.any((x < 0) | (x > 1)):
            raise ValueError("probabilities outside [0, 1]")
        loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log1p(-x), -100))
    else:
        # PyTorch's formula, (1 - t) * x - log_sigmoid(x), so that infinite logits give
        # what PyTorch 2.13 gives (nan for x = -inf, t = 0)
        log_sigmoid = np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))
        loss = (1 - t) * x - log_sigmoid
    return _reduce(loss, reduction)


def test_cross_entropy_and_nll(fuzz, device):
    side = fuzz.max_side

    @st.composite
    def cases(draw):
        kind = draw(st.sampled_from(["cross_entropy", "cross_entropy", "nll_loss"]))
        shape = tuple(draw(st.lists(st.integers(0, side), min_size=0, max_size=3)))
        x = draw(tensors(device, shape=shape, dtypes=(*FLOAT_DTYPES, kg.int64)))
        classes = shape[0] if len(shape) == 1 else (shape[1] if len(shape) > 1 else 1)
        if draw(st.booleans()):
            target_shape = () if len(shape) == 1 else (shape[:1] + shape[2:] if shape else ())
            if draw(st.integers(0, 5)) == 0:
                target_shape = target_shape + (1,)
            values = draw(
                st.lists(
                    st.sampled_from([0, classes - 1, classes, -1, -100, -100]),
                    min_size=int(np.prod(target_shape)),
                    max_size=int(np.prod(target_shape)),
                )
            )
            target = np.array(values, dtype=np.int64).reshape(target_shape)
        else:
            target = np.abs(draw(tensors(device, shape=shape, dtype=kg.float32))[0])
            target = np.where(np.isfinite(target), target, 0.5).astype(np.float32)
        weight = None
        if kind == "cross_entropy" and draw(st.booleans()):
            weight = (
                np.abs(
                    draw(
                        tensors(
                            device,
                            shape=(draw(st.sampled_from([classes, classes + 1])),),
                            dtype=kg.float32,
                        )
                    )[0]
                )
                + 0.25
            )
            weight = np.where(np.isfinite(weight), weight, 1.0).astype(np.float32)
        reduction = draw(st.sampled_from(REDUCTIONS))
        smoothing = draw(st.sampled_from([0.0, 0.0, 0.1, 1.5]))
        return kind, x, target, weight, reduction, smoothing

    def body(case):
        kind, (x_values, x), target_values, weight_values, reduction, smoothing = case
        target = kg.tensor(target_values, device=device)
        weight = None if weight_values is None else kg.tensor(weight_values, device=device)
        if kind == "nll_loss":
            if target_values.dtype.kind == "f":
                return
            check(
                "nll_loss",
                lambda: F.nll_loss(x, target, reduction=reduction),
                lambda: _nll(x_values, target_values, reduction),
                1e-5,
                1e-5,
            )
            return
        check(
            "cross_entropy",
            lambda: F.cross_entropy(
                x, target, weight=weight, reduction=reduction, label_smoothing=smoothing
            ),
            lambda: _cross_entropy(
                x_values, target_values, weight_values, -100, reduction, smoothing
            ),
            1e-4,
            1e-5,
        )

    fuzz.run(cases(), body)


def test_pointwise_losses(fuzz, device):
    @st.composite
    def cases(draw):
        kind = draw(
            st.sampled_from(
                ["mse_loss", "l1_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"]
            )
        )
        x = draw(tensors(device, max_side=fuzz.max_side, dtypes=FLOAT_DTYPES))
        shape = x[0].shape if draw(st.integers(0, 4)) else (x[0].shape + (1,))
        t = draw(tensors(device, shape=shape, dtype=x[1].dtype))
        if kind == "binary_cross_entropy" and draw(st.booleans()):
            with np.errstate(over="ignore"):
                probabilities = 1 / (1 + np.exp(-np.nan_to_num(x[0])))
            x = (probabilities, kg.tensor(probabilities, device=device))
        return kind, x, t, draw(st.sampled_from(REDUCTIONS))

    def body(case):
        kind, (x_values, x), (t_values, t), reduction = case
        check(
            (kind, "sub", "mul", "binary_cross_entropy"),
            lambda: getattr(F, kind)(x, t, reduction=reduction),
            lambda: _pointwise(kind, x_values, t_values, reduction),
            1e-4,
            1e-5,
        )

    fuzz.run(cases(), body)
