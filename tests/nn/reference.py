"""NumPy references for ``kg.nn.functional``, written from the definitions (float64, plain
loops or einsum where that reads more clearly), and the comparison that the layer and
function tests share: forward values against the reference, gradients against central
differences of the reference, and, where PyTorch is installed, the same against PyTorch.

The ``reference`` fixture (``tests/nn/conftest.py``) runs a test once per reference:
``"numpy"`` always, ``"torch"`` only where PyTorch is installed (the row is marked
``torch``), so CI without PyTorch still checks every value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import kernelgrad as kg
from tests.helpers import assert_close, numerical_grad

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _pair(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


# --- activations ---------------------------------------------------------------------------
def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -x))


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def silu(x: np.ndarray) -> np.ndarray:
    return x * sigmoid(x)


def leaky_relu(x: np.ndarray, negative_slope: float = 0.01) -> np.ndarray:
    return np.where(x > 0, x, negative_slope * x)


def softplus(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    return np.where(beta * x > threshold, x, np.logaddexp(0.0, beta * x) / beta)


def log_softmax(x: np.ndarray, dim: int) -> np.ndarray:
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


def softmax(x: np.ndarray, dim: int) -> np.ndarray:
    return np.exp(log_softmax(x, dim))


# --- linear, convolution, pooling ------------------------------------------------------------
def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    out = x @ weight.T
    return out if bias is None else out + bias


def conv2d(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> np.ndarray:
    """Cross-correlation of (N, C, H, W) or (C, H, W) input, by its definition: for each
    tap (i, j) of the filter, add the strided input window times that tap's weights.
    ``padding`` is as in PyTorch, or (top, bottom, left, right)."""
    if x.ndim == 3:
        return conv2d(x[None], weight, bias, stride, padding, dilation, groups)[0]
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    out_channels, group_channels, kh, kw = weight.shape
    if padding == "valid":
        pads = [(0, 0), (0, 0)]
    elif padding == "same":
        total_h, total_w = dh * (kh - 1), dw * (kw - 1)
        pads = [(total_h // 2, total_h - total_h // 2), (total_w // 2, total_w - total_w // 2)]
    elif not isinstance(padding, int) and len(padding) == 4:
        pads = [tuple(padding[:2]), tuple(padding[2:])]
    else:
        ph, pw = _pair(padding)
        pads = [(ph, ph), (pw, pw)]
    padded = np.pad(x, [(0, 0), (0, 0), *pads])
    oh = (padded.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (padded.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], out_channels, oh, ow))
    per_group = out_channels // groups
    for g in range(groups):
        inputs = padded[:, g * group_channels : (g + 1) * group_channels]
        filters = weight[g * per_group : (g + 1) * per_group]
        for i in range(kh):
            for j in range(kw):
                window = inputs[
                    :,
                    :,
                    i * dh : i * dh + sh * (oh - 1) + 1 : sh,
                    j * dw : j * dw + sw * (ow - 1) + 1 : sw,
                ]
                out[:, g * per_group : (g + 1) * per_group] += np.einsum(
                    "nchw,oc->nohw", window, filters[:, :, i, j]
                )
    if bias is not None:
        out += bias[None, :, None, None]
    return out


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> np.ndarray:
    padding = padding if isinstance(padding, str) else (0, padding)
    out = conv2d(
        x[:, :, None], weight[:, :, None], bias, (1, stride), padding, (1, dilation), groups
    )
    return out[:, :, 0]


def _pool_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil: bool):
    """PyTorch's output size: with ceil_mode the last window must start inside the input
    or its left padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    (kh, kw) = _pair(kernel_size)
    (sh, sw) = _pair(kernel_size if stride is None else stride)
    (ph, pw), (dh, dw) = _pair(padding), _pair(dilation)
    n, c, h, w = x.shape
    oh = _pool_size(h, kh, sh, ph, dh, ceil_mode)
    ow = _pool_size(w, kw, sw, pw, dw, ceil_mode)
    out = np.full((n, c, oh, ow), -np.inf)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    row, col = i * sh - ph + a * dh, j * sw - pw + b * dw
                    if 0 <= row < h and 0 <= col < w:
                        out[:, :, i, j] = np.maximum(out[:, :, i, j], x[:, :, row, col])
    return out


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """PyTorch's average: windows are clipped to the padded input for the divisor with
    ``count_include_pad``, to the input itself without."""
    (kh, kw) = _pair(kernel_size)
    (sh, sw) = _pair(kernel_size if stride is None else stride)
    ph, pw = _pair(padding)
    n, c, h, w = x.shape
    oh = _pool_size(h, kh, sh, ph, 1, ceil_mode)
    ow = _pool_size(w, kw, sw, pw, 1, ceil_mode)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            top, left = i * sh - ph, j * sw - pw
            bottom, right = min(top + kh, h + ph), min(left + kw, w + pw)
            padded_count = (bottom - top) * (right - left)
            top, left, bottom, right = max(top, 0), max(left, 0), min(bottom, h), min(right, w)
            total = x[:, :, top:bottom, left:right].sum(axis=(2, 3))
            count = padded_count if count_include_pad else (bottom - top) * (right - left)
            out[:, :, i, j] = total / count
    return out


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    stride = kernel_size if stride is None else stride
    out = max_pool2d(
        x[:, :, None], (1, kernel_size), (1, stride), (0, padding), (1, dilation), ceil_mode
    )
    return out[:, :, 0]


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    stride = kernel_size if stride is None else stride
    out = avg_pool2d(
        x[:, :, None], (1, kernel_size), (1, stride), (0, padding), ceil_mode, count_include_pad
    )
    return out[:, :, 0]


def adaptive_avg_pool2d(x: np.ndarray, output_size: Any) -> np.ndarray:
    """Cell i of n covers floor(i * size / n) to ceil((i + 1) * size / n)."""
    n, c, h, w = x.shape
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    oh = h if sizes[0] is None else sizes[0]
    ow = w if sizes[1] is None else sizes[1]
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * h // oh, -(-(i + 1) * h // oh))
            cols = slice(j * w // ow, -(-(j + 1) * w // ow))
            out[:, :, i, j] = x[:, :, rows, cols].mean(axis=(2, 3))
    return out


# --- normalisation, embedding --------------------------------------------------------------
def batch_norm_statistics(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel mean, biased variance (normalises) and unbiased variance (running)."""
    dims = (0,) + tuple(range(2, x.ndim))
    count = x.size // x.shape[1]
    mean = x.mean(axis=dims)
    var = x.var(axis=dims)
    return mean, var, var * count / (count - 1)


def batch_norm(x, mean, var, weight=None, bias=None, eps=1e-5) -> np.ndarray:
    """Normalise with the given per-channel statistics, then scale and shift."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def batch_norm_training(x, weight=None, bias=None, eps=1e-5) -> np.ndarray:
    mean, var, _ = batch_norm_statistics(x)
    return batch_norm(x, mean, var, weight, bias, eps)


def running_statistics(batches: Sequence[np.ndarray], momentum: float | None, channels: int):
    """Running mean and variance after training on ``batches`` (PyTorch's update: an
    exponential average with ``momentum``, or the plain average with ``momentum=None``)."""
    mean, var = np.zeros(channels), np.ones(channels)
    for count, batch in enumerate(batches, start=1):
        batch_mean, _, unbiased = batch_norm_statistics(batch)
        factor = 1.0 / count if momentum is None else momentum
        mean = (1 - factor) * mean + factor * batch_mean
        var = (1 - factor) * var + factor * unbiased
    return mean, var


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5) -> np.ndarray:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    centered = x - x.mean(axis=dims, keepdims=True)
    out = centered / np.sqrt((centered**2).mean(axis=dims, keepdims=True) + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def embedding_grad(index: np.ndarray, rows: int, upstream: np.ndarray, padding_idx=None):
    """The table's gradient: each picked row adds its upstream row; the padding row gets
    nothing."""
    grad = np.zeros((rows, upstream.shape[-1]))
    np.add.at(grad, index.reshape(-1), upstream.reshape(-1, upstream.shape[-1]))
    if padding_idx is not None:
        grad[padding_idx] = 0.0
    return grad


# --- losses ------------------------------------------------------------------------------------
def _reduce(loss: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _classes_last(x: np.ndarray, target: np.ndarray):
    """(rows, C) inputs and (rows,) targets from (C,), (N, C) or (N, C, d1, ...)."""
    if x.ndim == 1:
        return x[None], np.reshape(target, 1), ()
    moved = np.moveaxis(x, 1, -1)
    return moved.reshape(-1, x.shape[1]), target.reshape(-1), target.shape


def nll_loss(x, target, weight=None, ignore_index=-100, reduction="mean") -> np.ndarray:
    """-weight[t] * x[t] per sample; the mean divides by the weights of the counted
    samples (ignored ones count 0)."""
    rows, targets, shape = _classes_last(x, target)
    classes = rows.shape[1]
    weight = np.ones(classes) if weight is None else weight
    valid = targets != ignore_index
    safe = np.where(valid, targets, 0)
    sample_weight = np.where(valid, weight[safe], 0.0)
    loss = -rows[np.arange(len(rows)), safe] * sample_weight
    if reduction == "mean":
        return loss.sum() / sample_weight.sum()
    if reduction == "sum":
        return loss.sum()
    return loss.reshape(shape)


def cross_entropy(
    x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0
) -> np.ndarray:
    """PyTorch's definition: class indices give (1 - s) * nll + s / C * (the weighted sum
    of -log p over the classes), both normalised like nll_loss; probability targets are
    smoothed towards the uniform distribution and give -sum(weight * t * log p)."""
    class_dim = 0 if x.ndim == 1 else 1
    classes = x.shape[class_dim]
    log_p = log_softmax(x, class_dim)
    if np.issubdtype(np.asarray(target).dtype, np.floating):
        t = target * (1 - label_smoothing) + label_smoothing / classes
        if weight is not None:
            shape = [1] * x.ndim
            shape[class_dim] = classes
            t = t * weight.reshape(shape)
        return _reduce(-(log_p * t).sum(axis=class_dim), reduction)
    nll = nll_loss(log_p, target, weight, ignore_index, reduction)
    if not label_smoothing:
        return nll
    rows, targets, shape = _classes_last(log_p, target)
    valid = targets != ignore_index
    spread = np.ones(classes) if weight is None else weight
    smooth = np.where(valid, -(rows * spread).sum(axis=1), 0.0)
    if reduction == "mean":
        safe = np.where(valid, targets, 0)
        smooth = smooth.sum() / np.where(valid, spread[safe], 0.0).sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    else:
        smooth = smooth.reshape(shape)
    return (1 - label_smoothing) * nll + label_smoothing / classes * smooth


def mse_loss(x, target, reduction="mean") -> np.ndarray:
    return _reduce((x - target) ** 2, reduction)


def l1_loss(x, target, reduction="mean") -> np.ndarray:
    return _reduce(np.abs(x - target), reduction)


def binary_cross_entropy(p, target, weight=None, reduction="mean") -> np.ndarray:
    """Each log clamped at -100, as PyTorch does."""
    log_p = np.maximum(np.log(p), -100.0)
    log_not_p = np.maximum(np.log(1 - p), -100.0)
    loss = -(target * log_p + (1 - target) * log_not_p)
    return _reduce(loss if weight is None else loss * weight, reduction)


def binary_cross_entropy_with_logits(
    x, target, weight=None, reduction="mean", pos_weight=None
) -> np.ndarray:
    """-(pos_weight * t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))."""
    log_sigmoid = -np.logaddexp(0.0, -x)
    log_not_sigmoid = -np.logaddexp(0.0, x)
    positive = target if pos_weight is None else pos_weight * target
    loss = -(positive * log_sigmoid + (1 - target) * log_not_sigmoid)
    return _reduce(loss if weight is None else loss * weight, reduction)


# --- the comparison ----------------------------------------------------------------------------
def compare(
    reference: str,
    kg_fn: Callable[..., kg.Tensor],
    numpy_fn: Callable[..., np.ndarray] | None,
    torch_fn: Callable[..., Any] | None,
    arrays: Sequence[np.ndarray],
    device: str,
    grad: bool = True,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    seed: int = 0,
) -> None:
    """Run ``kg_fn`` on tensors of ``arrays`` and check its output and, with a random
    output gradient, the gradient of every input against ``reference``:

    * ``"numpy"``: ``numpy_fn`` on the arrays in float64; gradients are central
      differences of ``numpy_fn`` (so a reference needs no derivative of its own);
    * ``"torch"``: ``torch_fn(torch, *tensors)`` and PyTorch's autograd.
    """
    inputs = [kg.tensor(a, device=device, requires_grad=grad) for a in arrays]
    out = kg_fn(*inputs)
    upstream = np.random.default_rng(seed).standard_normal(out.shape).astype(arrays[0].dtype)
    if grad:
        out.backward(kg.tensor(upstream, device=device))
    if reference == "torch":
        import torch

        theirs = [torch.tensor(a, requires_grad=grad) for a in arrays]
        expected = torch_fn(torch, *theirs)
        assert_close(out, expected.detach().numpy(), rtol=rtol, atol=atol)
        if not grad:
            return
        expected.backward(torch.tensor(upstream))
        expected_grads = [t.grad.numpy() for t in theirs]
    else:
        doubles = [np.asarray(a, dtype=np.float64) for a in arrays]
        assert_close(out, numpy_fn(*doubles), rtol=rtol, atol=atol)
        if not grad:
            return
        projection = upstream.astype(np.float64)

        def projected(*values: np.ndarray) -> float:
            return float((numpy_fn(*values) * projection).sum())

        expected_grads = numerical_grad(projected, doubles)
    for k, (mine, want) in enumerate(zip(inputs, expected_grads, strict=True)):
        assert mine.grad is not None, f"input {k} got no gradient"
        assert_close(mine.grad, want, rtol=rtol, atol=atol)
