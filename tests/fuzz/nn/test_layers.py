"""Fuzz: nn layers through kg.nn.functional (linear, conv2d, max/avg pooling, batch and
layer norm, embedding, activations) with random shapes, channels, strides, paddings and
dtypes, against NumPy loops."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

import kernelgrad as kg
import kernelgrad.nn.functional as F
from tests.fuzz.oracle import check
from tests.fuzz.strategies import FLOAT_DTYPES, tensors


def _floats(x):
    if x.dtype.kind != "f":
        raise TypeError("nn layers need floating point inputs")


def _linear(x, w, b):
    if x.ndim == 0 or x.shape[-1] != w.shape[-1]:
        raise ValueError("shapes")
    out = x.astype(np.float64) @ w.astype(np.float64).T
    return out + b if b is not None else out  # a bias broadcasts, as in PyTorch


def _conv2d(x, w, b, stride, padding, groups):
    _floats(x)
    if x.ndim not in (3, 4):
        raise ValueError("rank")
    unbatched = x.ndim == 3
    x = x[None] if unbatched else x
    n, c, h, width = x.shape
    out_c, group_c, kh, kw = w.shape
    if groups < 1 or c % groups or out_c % groups or group_c * groups != c:
        raise ValueError("channels")
    if stride < 1 or padding < 0 or (b is not None and b.shape != (out_c,)):
        raise ValueError("arguments")
    oh, ow = (h + 2 * padding - kh) // stride + 1, (width + 2 * padding - kw) // stride + 1
    if oh < 1 or ow < 1:
        raise ValueError("output too small")
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out = np.zeros((n, out_c, oh, ow))
    per_group = out_c // groups
    for o in range(out_c):
        g = o // per_group
        channels = slice(g * group_c, (g + 1) * group_c)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, channels, i * stride : i * stride + kh, j * stride : j * stride + kw]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out[0] if unbatched else out


def _pool2d(x, kernel, stride, padding, kind):
    _floats(x)
    if x.ndim not in (3, 4):
        raise ValueError("rank")
    unbatched = x.ndim == 3
    x = x[None] if unbatched else x
    if kernel < 1 or stride < 1 or padding < 0 or padding > kernel // 2:
        raise ValueError("arguments")
    n, c, h, w = x.shape
    oh, ow = (h + 2 * padding - kernel) // stride + 1, (w + 2 * padding - kernel) // stride + 1
    if oh < 1 or ow < 1:
        raise ValueError("output too small")
    fill = -np.inf if kind == "max" else 0.0
    width = ((0, 0), (0, 0), (padding, padding), (padding, padding))
    xp = np.pad(x.astype(np.float64), width, constant_values=fill)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            window = xp[:, :, i * stride : i * stride + kernel, j * stride : j * stride + kernel]
            if kind == "max":
                nan = np.isnan(window).any(axis=(2, 3))
                out[:, :, i, j] = np.where(nan, np.nan, window.max(axis=(2, 3)))
            else:
                out[:, :, i, j] = window.sum(axis=(2, 3)) / (kernel * kernel)
    return out[0] if unbatched else out


def _batch_norm(x, mean, var, training, eps=1e-5):
    if x.ndim < 2 or mean.shape != (x.shape[1],):
        raise ValueError("shapes")
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        if math.prod(x.shape[a] for a in axes) <= 1:
            raise ValueError("more than one value per channel is needed to train")
        mean = x.astype(np.float64).mean(axis=axes)
        var = x.astype(np.float64).var(axis=axes)
    work = x.astype(np.float64)  # integer inputs are normalised in floating point
    return (work - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)


def _layer_norm(x, normalized, eps=1e-5):
    if not normalized or tuple(x.shape[len(x.shape) - len(normalized) :]) != normalized:
        raise ValueError("shape")
    axes = tuple(range(x.ndim - len(normalized), x.ndim))
    work = x.astype(np.float64)
    mean = work.mean(axis=axes, keepdims=True)
    return (work - mean) / np.sqrt(work.var(axis=axes, keepdims=True) + eps)


def _embedding(index, weight):
    if index.dtype.kind not in "iu":
        raise TypeError("indices must be integers")
    if index.size and (index.min() < 0 or index.max() >= weight.shape[0]):
        raise IndexError("index out of range")
    return weight[index]


def _normalising_tolerance(x, eps=1e-5):
    """Dividing by sqrt(var + eps) with var = 0 (a constant input) scales a float32 mean's
    rounding error (a few ulps of max |x|) by 1 / sqrt(eps) = 316, as in PyTorch."""
    finite = np.abs(x[np.isfinite(x)]) if x.size else np.zeros(1)
    largest = float(finite.max()) if finite.size else 0.0
    return 1e-4 + 8 * np.finfo(np.float32).eps * largest / np.sqrt(eps)


ACTIVATIONS = {
    "gelu": (
        F.gelu,
        lambda x: 0.5 * x * (1 + np.vectorize(math.erf, otypes=[float])(x / math.sqrt(2))),
    ),
    "silu": (F.silu, lambda x: x / (1 + np.exp(-x))),
    "leaky_relu": (F.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
    "softplus": (
        F.softplus,
        lambda x: np.where(x > 20, x, np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)),
    ),
}


def test_layers(fuzz, device):
    side = fuzz.max_side

    @st.composite
    def cases(draw):
        kind = draw(
            st.sampled_from(
                [
                    "linear",
                    "conv2d",
                    "max_pool2d",
                    "avg_pool2d",
                    "batch_norm",
                    "layer_norm",
                    "embedding",
                    "activation",
                ]
            )
        )
        dtypes = (*FLOAT_DTYPES, kg.int64) if draw(st.integers(0, 9)) == 0 else FLOAT_DTYPES
        if kind == "linear":
            x = draw(tensors(device, max_side=side, dtypes=dtypes))
            features = draw(st.sampled_from([x[0].shape[-1] if x[0].ndim else 1, 2]))
            w = draw(
                tensors(
                    device,
                    dtype=x[1].dtype if x[1].dtype.is_floating_point else kg.float32,
                    shape=(draw(st.integers(0, 3)), features),
                )
            )
            b = draw(
                st.one_of(
                    st.none(),
                    tensors(
                        device, dtype=w[1].dtype, shape=(draw(st.sampled_from([w[0].shape[0], 1])),)
                    ),
                )
            )
            return kind, x, w, b
        if kind == "conv2d":
            channels = draw(st.integers(1, 3))
            shape = tuple(draw(st.lists(st.integers(1, side + 1), min_size=2, max_size=3)))
            x = draw(tensors(device, shape=(channels,) + shape, dtypes=dtypes))
            groups = draw(st.sampled_from([1, 1, channels, 2]))
            out_c = draw(st.integers(1, 3)) * max(groups, 1)
            k = draw(st.integers(1, 3))
            w_dtype = x[1].dtype if x[1].dtype.is_floating_point else kg.float32
            w = draw(
                tensors(
                    device, dtype=w_dtype, shape=(out_c, max(channels // max(groups, 1), 1), k, k)
                )
            )
            b = draw(st.one_of(st.none(), tensors(device, dtype=w_dtype, shape=(out_c,))))
            return kind, x, w, b, draw(st.integers(0, 2)), draw(st.integers(-1, 2)), groups
        if kind in ("max_pool2d", "avg_pool2d"):
            shape = tuple(draw(st.lists(st.integers(1, side + 1), min_size=3, max_size=4)))
            x = draw(tensors(device, shape=shape, dtypes=dtypes))
            return (
                kind,
                x,
                draw(st.integers(0, 3)),
                draw(st.integers(0, 2)),
                draw(st.integers(0, 2)),
            )
        if kind == "batch_norm":
            shape = tuple(draw(st.lists(st.integers(1, side), min_size=1, max_size=4)))
            x = draw(tensors(device, shape=shape, dtypes=dtypes))
            channels = draw(st.sampled_from([shape[1] if len(shape) > 1 else 1, 5]))
            mean = draw(tensors(device, dtype=kg.float32, shape=(channels,)))
            var = np.abs(draw(tensors(device, dtype=kg.float32, shape=(channels,)))[0]) + 0.5
            return kind, x, mean, var, draw(st.booleans())
        if kind == "layer_norm":
            x = draw(tensors(device, max_side=side, dtypes=dtypes))
            cut = draw(st.integers(0, x[0].ndim))
            normalized = tuple(x[0].shape[cut:]) if draw(st.booleans()) else (3,)
            return kind, x, normalized
        if kind == "embedding":
            index = draw(tensors(device, max_side=side, dtypes=(kg.int64, kg.int32, kg.float32)))
            weight = draw(tensors(device, dtype=kg.float32, shape=(draw(st.integers(1, 4)), 2)))
            return kind, index, weight
        return (
            kind,
            draw(st.sampled_from(sorted(ACTIVATIONS))),
            draw(tensors(device, max_side=side, dtypes=dtypes)),
        )

    def body(case):
        kind = case[0]
        if kind == "linear":
            _, (x_values, x), (w_values, w), bias = case
            b_values, b = bias if bias is not None else (None, None)
            check(
                "linear",
                lambda: F.linear(x, w, b),
                lambda: _linear(x_values, w_values, b_values),
                1e-4,
                1e-4,
            )
        elif kind == "conv2d":
            _, (x_values, x), (w_values, w), bias, stride, padding, groups = case
            b_values, b = bias if bias is not None else (None, None)
            check(
                ("conv2d", "conv"),
                lambda: F.conv2d(x, w, b, stride=stride, padding=padding, groups=groups),
                lambda: _conv2d(x_values, w_values, b_values, stride, padding, groups),
                1e-4,
                1e-4,
            )
        elif kind in ("max_pool2d", "avg_pool2d"):
            _, (x_values, x), kernel, stride, padding = case
            fn = F.max_pool2d if kind == "max_pool2d" else F.avg_pool2d
            check(
                kind,
                lambda: fn(x, kernel, stride or None, padding),
                lambda: _pool2d(x_values, kernel, stride or kernel, padding, kind[:3]),
                1e-5,
                1e-5,
            )
        elif kind == "batch_norm":
            _, (x_values, x), (mean_values, mean), var_values, training = case
            var = kg.tensor(var_values, device=device)
            check(
                "batch_norm",
                lambda: F.batch_norm(x, mean.clone(), var.clone(), training=training),
                lambda: _batch_norm(x_values, mean_values, var_values, training),
                1e-4,
                _normalising_tolerance(x_values),
            )
        elif kind == "layer_norm":
            _, (x_values, x), normalized = case
            check(
                "layer_norm",
                lambda: F.layer_norm(x, normalized),
                lambda: _layer_norm(x_values, normalized),
                1e-4,
                _normalising_tolerance(x_values),
            )
        elif kind == "embedding":
            _, (index_values, index), (weight_values, weight) = case
            check(
                ("embedding", "take"),
                lambda: F.embedding(index, weight),
                lambda: _embedding(index_values, weight_values),
                0,
                0,
            )
        else:
            _, name, (x_values, x) = case
            fn, reference = ACTIVATIONS[name]

            def expected():
                with np.errstate(all="ignore"):
                    return reference(x_values.astype(np.float64))

            rtol = 1e-9 if x.dtype is kg.float64 else 1e-5
            check((name, "gelu", "sub", "mul"), lambda: fn(x), expected, rtol, 1e-6)

    fuzz.run(cases(), body)
