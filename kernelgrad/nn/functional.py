"""``kg.nn.functional``: the stateless operations behind the layers, and the losses.

Everything here is written with Tensor operations, a few explicitly fused elementwise
kernels defined in this module, and the ``@kg.kernel`` convolution kernels of
``_conv_kernels.py`` (one source for the CPU and CUDA), so it runs unchanged on every
backend.

Convolution keeps images *batch innermost* ((N, C, H, W) tensors stored as (C, H, W, N)).
On the CPU a stride-1 convolution with few taps per filter runs as direct kernels;
other convolutions (and other devices) are im2col + one matrix product (the bias rides
along as an extra row of ones). Convolution, pooling, linear and cross-entropy have
hand-written VJPs that reuse what the forward pass computed.

>>> import kernelgrad as kg
>>> import kernelgrad.nn.functional as F
>>> x = kg.randn(2, 1, 8, 8)
>>> w = kg.randn(4, 1, 3, 3)
>>> F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2).shape
(2, 4, 4, 4)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from .. import autograd
from ..backends.base import ScalarFunction
from ..dtypes import int64
from ..errors import BackwardError, DeviceMismatchError, ShapeError, format_shape
from ..ops import elementwise as _ew
from ..ops.creation import arange, empty, full, ones, rand, zeros
from ..ops.elementwise import copy_into, where
from ..ops.indexing import take
from ..ops.movement import make_view
from ..ops.movement import pad as _pad_constant
from ..tensor import Tensor
from . import _fused

__all__ = [
    "relu",
    "gelu",
    "sigmoid",
    "tanh",
    "silu",
    "leaky_relu",
    "softplus",
    "softmax",
    "log_softmax",
    "linear",
    "conv1d",
    "conv2d",
    "max_pool1d",
    "max_pool2d",
    "max_pool2d_relu",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "dropout",
    "batch_norm",
    "layer_norm",
    "embedding",
    "one_hot",
    "pad",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
]


# =========================================================================================
# activations
# =========================================================================================
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0), elementwise.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.relu(kg.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    if inplace:
        return input.relu_()
    if input.is_contiguous() or not _dense(input):
        return input.relu()
    # A permuted layout (a convolution's output, stored batch innermost) is kept: the
    # result, and the gradient, are stored like the input and computed in memory order.
    with autograd.no_grad():
        result = _apply_in_layout(_ew.RELU, input)
    if autograd.needs_grad(input):
        saved = autograd.SavedOutput(result)

        def backward(grad: Tensor) -> tuple[Tensor]:
            output = saved.get()
            if autograd.is_grad_enabled():  # create_graph: the differentiable record
                return (_ew.RELU_GRAD(grad, output),)
            return (_apply_in_layout(_ew.RELU_GRAD, grad, output, layout=output),)

        autograd.record("relu", (input,), result, backward, (saved.data,))
        saved.bind(result._node)
    return result


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit ``x * Phi(x)``; ``approximate="tanh"`` uses the tanh
    formula of the original paper.

    >>> import kernelgrad as kg
    >>> round(kg.nn.functional.gelu(kg.tensor([1.0])).item(), 4)
    0.8413
    """
    if approximate == "none":
        return _ew.GELU(input)
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (inner.tanh() + 1.0)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), elementwise."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return input.tanh()


def silu(input: Tensor) -> Tensor:
    """x * sigmoid(x) (also called swish)."""
    return input * input.sigmoid()


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """x where x > 0, else ``negative_slope * x``."""
    return where(input > 0, input, input * negative_slope)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, linear above ``threshold`` (as PyTorch)."""
    scaled = input * beta
    smooth = (-scaled.abs()).exp().log1p() / beta + scaled.relu() / beta
    return where(scaled > threshold, input, smooth)


def softmax(input: Tensor, dim: int) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim`` (stable: the maximum is subtracted first)."""
    return input.softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably as x - logsumexp(x)."""
    return input.log_softmax(dim)


# =========================================================================================
# linear
# =========================================================================================
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``; ``input`` has shape (..., in_features).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.linear(kg.ones(2, 3), kg.ones(4, 3)).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    """
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise ShapeError(
            f"linear: the input has shape {format_shape(input.shape)} but the weight has "
            f"shape {format_shape(weight.shape)}: the input's last dimension must equal "
            f"in_features={weight.shape[-1]}"
        )
    if input.ndim == 1:
        result = input @ weight.T
        return result + bias if bias is not None else result
    lead = input.shape[:-1]
    x = input.reshape(-1, input.shape[-1]) if input.ndim > 2 else input
    with autograd.no_grad():
        result = x @ weight.T
        if bias is not None:
            result.add_(bias)
    if autograd.needs_grad(x, weight, bias):

        def backward(grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
            # Written with the inputs themselves: differentiable again under create_graph.
            grad_x = grad @ weight if x.requires_grad else None
            grad_w = grad.T @ x if weight.requires_grad else None  # contiguous (out, in)
            grad_b = grad.sum(0) if bias is not None and bias.requires_grad else None
            return grad_x, grad_w, grad_b

        autograd.record("linear", (x, weight, bias), result, backward, (x, weight))
    return result.reshape(lead + (weight.shape[0],)) if input.ndim > 2 else result


# =========================================================================================
# shared helpers for convolution and pooling
# =========================================================================================
def _pair(value: Any, name: str) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
        return int(value[0]), int(value[1])
    return int(value), int(value)


def _single(value: Any, name: str) -> int:
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ValueError(f"{name} must be an int or a 1-tuple, got {value!r}")
        return int(value[0])
    return int(value)


def _check_float(x: Tensor, op: str) -> None:
    if not x.dtype.is_floating_point:
        raise TypeError(
            f"{op} needs a floating point input, got {x.dtype}; convert it first, e.g. `x.float()`"
        )


def _batched(x: Tensor, op: str, ndim: int) -> tuple[Tensor, bool]:
    """Accept (N, C, ...) or an unbatched (C, ...) input with ``ndim`` batched dims."""
    if x.ndim == ndim:
        return x, False
    if x.ndim == ndim - 1:
        return x.unsqueeze(0), True
    raise ShapeError(
        f"{op}: expected a {ndim}-d (batched) or {ndim - 1}-d (unbatched) input, got shape "
        f"{format_shape(x.shape)}"
    )


def _window_view(
    x: Tensor,
    out_hw: tuple[int, int],
    step: tuple[int, int],
    tap: tuple[int, int],
    dilation: tuple[int, int],
) -> Tensor:
    """The (N, C, OH, OW) view of a 4-d tensor that a pooling window's tap (i, j) sees."""
    sn, sc, sy, sx = x._strides
    offset = x._offset + tap[0] * dilation[0] * sy + tap[1] * dilation[1] * sx
    return make_view(
        x,
        (x.shape[0], x.shape[1], out_hw[0], out_hw[1]),
        (sn, sc, step[0] * sy, step[1] * sx),
        offset,
    )


def _memory_order(t: Tensor) -> tuple[int, ...]:
    """The dims of ``t`` from the largest stride to the smallest. Kernels over ``t`` run
    in that order, so that their innermost loop walks memory with the smallest step
    (pooling a convolution output, stored batch innermost, loops over the batch)."""
    return tuple(sorted(range(t.ndim), key=lambda d: -abs(t._strides[d])))


def _permuted(t: Tensor, order: Sequence[int]) -> Tensor:
    """``t.permute(order)`` as a view that owns its result (no autograd)."""
    view = make_view(
        t, tuple(t.shape[d] for d in order), tuple(t._strides[d] for d in order), t._offset
    )
    view._base = None
    return view


def _empty_in_order(
    shape: tuple[int, ...], order: Sequence[int], like: Tensor, fill_zeros: bool = False
) -> Tensor:
    """A new tensor of ``shape`` whose memory is contiguous in the dim order ``order``."""
    physical = tuple(shape[d] for d in order)
    make = zeros if fill_zeros else empty
    buffer = make(physical, dtype=like.dtype, device=like.device)
    strides = [0] * len(shape)
    for stride, d in zip(_contiguous(physical), order):
        strides[d] = stride
    view = make_view(buffer, shape, tuple(strides), 0)
    view._base = None
    return view


def _buffer_like(x: Tensor, fill_zeros: bool) -> Tensor:
    """A new tensor of ``x``'s shape with ``x``'s strides (same memory order, gaps
    included) when that layout is simple, else one in ``x``'s dim order. With
    ``fill_zeros`` every element, and every gap, is zero."""
    order = sorted(range(x.ndim), key=lambda d: x._strides[d])
    extent = 1  # the inner dims so far span [0, extent)
    simple = x._offset == 0
    for d in order:
        size, stride = x.shape[d], x._strides[d]
        if size == 1:
            continue
        if stride < extent:  # negative, broadcast or possibly overlapping
            simple = False
            break
        extent += stride * (size - 1)
    if not simple or extent > 2 * x.numel():
        return _empty_in_order(x.shape, _memory_order(x), x, fill_zeros)
    make = zeros if fill_zeros else empty
    buffer = make(extent, dtype=x.dtype, device=x.device)
    view = make_view(buffer, x.shape, x._strides, 0)
    view._base = None
    return view


def _dense(t: Tensor) -> bool:
    """Whether ``t``'s elements fill its memory exactly, in some dim order (a permutation
    of a contiguous tensor)."""
    extent = 1
    for d in sorted(range(t.ndim), key=lambda d: t._strides[d]):
        if t.shape[d] == 1:
            continue
        if t._strides[d] != extent:
            return False
        extent *= t.shape[d]
    return True


def _apply_in_layout(op: Any, *operands: Tensor, layout: Tensor | None = None) -> Tensor:
    """``op(*operands)`` for operands of one shape (no autograd), with the result stored
    in the memory order of ``layout`` (default: the first operand), and the kernel
    looping in that order."""
    order = _memory_order(operands[0] if layout is None else layout)
    result = _empty_in_order(operands[0].shape, order, operands[0])
    _ew.apply(op, *[_permuted(t, order) for t in operands], out=_permuted(result, order))
    return result


def _no_double_backward(op: str) -> None:
    if autograd.is_grad_enabled():
        raise BackwardError(
            f"{op}: second-order gradients (backward with create_graph=True through this "
            "operation) are not supported"
        )


# =========================================================================================
# convolution
# =========================================================================================
def _conv_padding(
    padding: Any, kernel: tuple[int, int], dilation: tuple[int, int], stride: tuple[int, int]
) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from an int, a pair, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding == "same":
            if stride != (1, 1):
                raise ValueError("conv: padding='same' needs stride 1 (as in PyTorch)")
            pads = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pads += [total // 2, total - total // 2]
            return pads[0], pads[1], pads[2], pads[3]
        raise ValueError(
            f"conv: padding must be an int, a pair, 'valid' or 'same', got {padding!r}"
        )
    ph, pw = _pair(padding, "padding")
    if ph < 0 or pw < 0:
        raise ValueError(f"conv: padding must be non-negative, got {padding!r}")
    return ph, ph, pw, pw


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-d convolution (cross-correlation, as in every deep-learning library).

    ``input`` is (N, C, H, W) (or unbatched (C, H, W)), ``weight`` is
    (out_channels, C / groups, kh, kw), ``bias`` is (out_channels,). ``padding`` may be
    an int, a pair, ``"valid"`` or ``"same"``.

    >>> import kernelgrad as kg
    >>> x = kg.ones(1, 1, 4, 4)
    >>> kg.nn.functional.conv2d(x, kg.ones(1, 1, 3, 3)).tolist()
    [[[[9.0, 9.0], [9.0, 9.0]]]]
    """
    op = "conv2d"
    x, unbatched = _batched(input, op, 4)
    if weight.ndim != 4:
        raise ShapeError(
            f"{op}: the weight must be (out_channels, in_channels / groups, kh, kw), got "
            f"shape {format_shape(weight.shape)}"
        )
    _check_float(x, op)
    for other, what in ((weight, "weight"), (bias, "bias")):
        if other is None:
            continue
        if other.device != x.device:
            raise DeviceMismatchError(
                f"{op}: the input is on {x.device} but the {what} is on {other.device}; "
                "move the module with `model.to(device)` or the input with `x.to(device)`"
            )
        if other.dtype is not x.dtype:
            raise TypeError(
                f"{op}: the input is {x.dtype} but the {what} is {other.dtype}; convert one "
                "of them (e.g. `model.to(kg.float64)` or `x.float()`)"
            )
    n, c, h, w = x.shape
    out_channels, group_channels, kh, kw = weight.shape
    if groups < 1 or c % groups or out_channels % groups:
        raise ShapeError(
            f"{op}: groups={groups} must divide both the input channels ({c}) and the output "
            f"channels ({out_channels})"
        )
    if group_channels * groups != c:
        raise ShapeError(
            f"{op}: the input has {c} channels (shape {format_shape(input.shape)}) but the "
            f"weight of shape {format_shape(weight.shape)} expects {group_channels * groups} "
            f"(= {group_channels} per group x {groups} groups)"
        )
    if bias is not None and bias.shape != (out_channels,):
        raise ShapeError(
            f"{op}: the bias must have shape ({out_channels},), got {format_shape(bias.shape)}"
        )
    stride2 = _pair(stride, "stride")
    dilation2 = _pair(dilation, "dilation")
    if min(stride2) < 1 or min(dilation2) < 1:
        raise ValueError(f"{op}: stride and dilation must be positive")
    top, bottom, left, right = _conv_padding(padding, (kh, kw), dilation2, stride2)
    hp, wp = h + top + bottom, w + left + right
    oh = (hp - dilation2[0] * (kh - 1) - 1) // stride2[0] + 1
    ow = (wp - dilation2[1] * (kw - 1) - 1) // stride2[1] + 1
    if oh <= 0 or ow <= 0:
        raise ShapeError(
            f"{op}: the kernel ({kh}x{kw}, dilation {dilation2}) is larger than the padded "
            f"input ({hp}x{wp}) for input shape {format_shape(input.shape)}"
        )
    plan = _ConvPlan(
        n, c, h, w, out_channels, groups, kh, kw, stride2, dilation2, (top, bottom, left, right)
    )
    result = _conv2d_forward(x, weight, bias, plan)
    return result.squeeze(0) if unbatched else result


class _ConvPlan:
    """Geometry of one convolution.

    Layout: images are kept *batch innermost*. The padded input is copied into a
    (C, hp, wp, N) buffer and the result is an (N, O, OH, OW) view of an (O, OH, OW, N)
    buffer ("CHWN", see _conv_kernels.py), so that the rows every kernel and copy works
    on are ``OW * N`` contiguous values: long runs that vectorise, whatever the image
    size."""

    def __init__(
        self,
        n: int,
        c: int,
        h: int,
        w: int,
        out_channels: int,
        groups: int,
        kh: int,
        kw: int,
        stride: tuple[int, int],
        dilation: tuple[int, int],
        pads: tuple[int, int, int, int],
    ) -> None:
        self.n, self.c, self.h, self.w = n, c, h, w
        self.out_channels, self.groups = out_channels, groups
        self.kh, self.kw = kh, kw
        self.stride, self.dilation, self.pads = stride, dilation, pads
        top, bottom, left, right = pads
        self.hp, self.wp = h + top + bottom, w + left + right
        self.oh = (self.hp - dilation[0] * (kh - 1) - 1) // stride[0] + 1
        self.ow = (self.wp - dilation[1] * (kw - 1) - 1) // stride[1] + 1
        self.taps = c * kh * kw  # rows of the patch matrix (all groups)
        self.columns = self.oh * self.ow * n  # columns of the patch matrix
        # The direct kernels take two output channels per work item ("pairs") when every
        # group has an even number of them; ``channel_items`` such items cover them all.
        self.pairs = (out_channels // groups) % 2 == 0
        self.channel_items = out_channels // 2 if self.pairs else out_channels

    def output_strides(self) -> tuple[int, int, int, int]:
        """Strides of the (N, O, OH, OW) result inside its (O, OH, OW, N) buffer."""
        return _chwn_strides(self.out_channels, self.oh, self.ow, self.n)

    def input_view(self, xq: Tensor) -> Tensor:
        """The unpadded (N, C, H, W) part of a padded (C, hp, wp, N) buffer, as a view."""
        top, _, left, _ = self.pads
        n = self.n
        strides = _chwn_strides(self.c, self.hp, self.wp, n)
        view = make_view(xq, (n, self.c, self.h, self.w), strides, (top * self.wp + left) * n)
        view._base = None
        return view


def _chwn_strides(c: int, h: int, w: int, n: int) -> tuple[int, int, int, int]:
    """Strides of an (N, C, H, W) tensor stored as (C, H, W, N)."""
    return (1, h * w * n, w * n, n)


def _same_strides(t: Tensor, strides: tuple[int, ...]) -> bool:
    """Whether ``t`` has these strides (dims of size 1 may have any stride)."""
    return all(size == 1 or a == b for size, a, b in zip(t.shape, t._strides, strides))


def _padded_chwn(x: Tensor, plan: _ConvPlan) -> Tensor:
    """The zero-padded input as a (C, hp, wp, N) tensor with contiguous memory: the input
    itself when it is stored that way and needs no padding, else a copy."""
    n, c, h, w = plan.n, plan.c, plan.h, plan.w
    if not any(plan.pads) and _same_strides(x, _chwn_strides(c, h, w, n)):
        view = make_view(x, (c, h, w, n), (h * w * n, w * n, n, 1), x._offset)
        view._base = None
        return view
    if x.device.type == "cpu":
        from . import _conv_kernels as kernels

        xq = empty((c, plan.hp, plan.wp, n), dtype=x.dtype, device=x.device)
        top, _, left, _ = plan.pads
        kernels.pad_batch_innermost(_flat(xq), x, plan.hp, plan.wp, top, left, ndrange=c * plan.hp)
        return xq
    make = zeros if any(plan.pads) else empty
    xq = make((c, plan.hp, plan.wp, n), dtype=x.dtype, device=x.device)
    copy_into(plan.input_view(xq), x.detach())
    return xq


def _output_rows(grad: Tensor, plan: _ConvPlan) -> Tensor:
    """The output gradient as a contiguous (O, OH * OW * N) matrix (a view when it is
    already stored that way)."""
    shape = (plan.out_channels, plan.columns)
    if _same_strides(grad, plan.output_strides()):
        view = make_view(grad, shape, (plan.columns, 1), grad._offset)
        view._base = None
        return view
    rows = empty(shape, dtype=grad.dtype, device=grad.device)
    copy_into(make_view(rows, grad.shape, plan.output_strides(), 0), grad)
    return rows


# Direct convolution (_conv_kernels.py) on the CPU when a filter has at most this many
# taps per output channel (C / groups * kh * kw) and the stride is 1. Few taps make a
# patch-matrix product with a short inner dimension, which BLAS runs far below its peak,
# while the patch matrix (taps times the input's size) costs more memory traffic than
# the convolution itself.
DIRECT_MAX_TAPS = 160


def _use_direct(x: Tensor, plan: _ConvPlan) -> bool:
    return (
        x.device.type == "cpu"
        and plan.stride == (1, 1)
        and plan.taps // plan.groups <= DIRECT_MAX_TAPS
    )


def _flat(t: Tensor) -> Tensor:
    """A 1-D view of a tensor whose memory is contiguous (any dim order)."""
    view = make_view(t, (t.numel(),), (1,), t._offset)
    view._base = None
    return view


def _zero_of(dtype: Any) -> Any:
    import numpy as np

    return np.dtype(dtype.numpy).type(0)


def _conv2d_forward(x: Tensor, weight: Tensor, bias: Tensor | None, plan: _ConvPlan) -> Tensor:
    n, c, groups = plan.n, plan.c, plan.groups
    out_channels = plan.out_channels
    per_group_taps = plan.taps // groups
    columns = plan.columns
    direct = _use_direct(x, plan)
    ones_row = bias is not None and groups == 1 and not direct
    rows = plan.taps + (1 if ones_row else 0)
    dh, dw = plan.dilation
    sh, sw = plan.stride
    hp, wp = plan.hp, plan.wp
    cols = None
    with autograd.no_grad():
        xq = _padded_chwn(x, plan)
        if direct:
            from . import _conv_kernels as kernels

            product = empty((out_channels, columns), dtype=x.dtype, device=x.device)
            b = zeros(out_channels, dtype=x.dtype, device=x.device) if bias is None else bias
            kernels.conv_forward_direct(
                _flat(product), _flat(xq), _flat(weight.detach().contiguous()),
                b.detach().contiguous(), c // groups, out_channels // groups, plan.kh,
                plan.kw, hp, wp, dh, dw, plan.oh, n, plan.ow * n, plan.pairs,
                ndrange=plan.channel_items * plan.oh,
            )  # fmt: skip
        else:
            # The patch matrix: rows (C, kh, kw [, ones]), columns (OH, OW, N).
            cols = empty((rows, plan.oh, plan.ow, n), dtype=x.dtype, device=x.device)
            patch_shape = (c, plan.kh, plan.kw, plan.oh, plan.ow, n)
            sc, sy = hp * wp * n, wp * n
            source = make_view(
                xq, patch_shape, (sc, dh * sy, dw * n, sh * sy, sw * n, 1), xq._offset
            )
            copy_into(make_view(cols, patch_shape, _contiguous(patch_shape), 0), source)
            if ones_row:
                copy_into(cols[plan.taps], 1.0)
            if groups == 1:
                w_matrix = weight.reshape(out_channels, plan.taps)
                if ones_row:
                    w_matrix = _cat_columns(w_matrix, bias.reshape(out_channels, 1))
                product = w_matrix @ cols.reshape(rows, columns)
            else:
                w_groups = weight.reshape(groups, out_channels // groups, per_group_taps)
                product = w_groups @ cols.reshape(groups, per_group_taps, columns)
                product = product.reshape(out_channels, columns)
                if bias is not None:
                    product = product + bias.reshape(out_channels, 1)
    result = make_view(product, (n, out_channels, plan.oh, plan.ow), plan.output_strides(), 0)
    result._base = None  # the product is private: the result owns that memory

    if autograd.needs_grad(x, weight, bias):
        need_x, need_w = x.requires_grad, weight.requires_grad
        need_b = bias is not None and bias.requires_grad

        def backward(grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
            _no_double_backward("conv2d")
            grad_rows = _output_rows(grad, plan)
            if direct:
                return _conv2d_direct_backward(grad_rows, xq, weight, plan, need_x, need_w, need_b)
            grad_x = grad_w = grad_b = None
            if need_w or need_b:
                if groups == 1:
                    # (cols @ grad.T).T: BLAS is faster with the long dimension inside
                    grad_w_matrix = (cols.reshape(rows, columns) @ grad_rows.T).T
                    grad_w = grad_w_matrix[:, : plan.taps].reshape(weight.shape)
                    if need_b:
                        grad_b = grad_w_matrix[:, plan.taps] if ones_row else grad_rows.sum(1)
                else:
                    grad_w = (
                        grad_rows.reshape(groups, out_channels // groups, columns)
                        @ cols.reshape(groups, per_group_taps, columns).mT
                    ).reshape(weight.shape)
                    if need_b:
                        grad_b = grad_rows.sum(1)
            if need_x:
                w_groups = weight.detach().reshape(groups, out_channels // groups, per_group_taps)
                grad_cols = w_groups.mT @ grad_rows.reshape(groups, out_channels // groups, columns)
                grad_x = _col2im(grad_cols, plan)
            return grad_x, grad_w, grad_b

        saved: tuple[Tensor, ...] = (weight,) if bias is None else (weight, bias)
        if direct and xq._storage is x._storage:
            saved += (x,)  # the backward reads the input itself
        autograd.record("conv2d", (x, weight, bias), result, backward, saved)
    return result


def _conv2d_direct_backward(
    grad_rows: Tensor,
    xq: Tensor,
    weight: Tensor,
    plan: _ConvPlan,
    need_x: bool,
    need_w: bool,
    need_b: bool,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    from . import _conv_kernels as kernels

    n, c, groups = plan.n, plan.c, plan.groups
    out_channels = plan.out_channels
    dh, dw = plan.dilation
    geometry = (
        c // groups, out_channels // groups, plan.kh, plan.kw, plan.hp, plan.wp, dh, dw,
        plan.oh, n, plan.ow * n,
    )  # fmt: skip
    grad_x = grad_w = grad_b = None
    dtype, device = grad_rows.dtype, grad_rows.device
    if need_w or need_b:
        grad_w = empty(weight.shape, dtype=dtype, device=device)
        grad_b = empty(out_channels, dtype=dtype, device=device)
        kernels.conv_weight_grad_direct(
            _flat(grad_w), grad_b, _flat(grad_rows), _flat(xq), _zero_of(dtype), *geometry,
            plan.pairs, ndrange=plan.channel_items * (c // groups) * plan.kh,
        )  # fmt: skip
        grad_w = grad_w if need_w else None
        grad_b = grad_b if need_b else None
    if need_x:
        grad_xq = empty((c, plan.hp, plan.wp, n), dtype=dtype, device=device)
        kernels.conv_input_grad_direct(
            _flat(grad_xq), _flat(grad_rows), _flat(weight.detach().contiguous()), *geometry,
            ndrange=c * plan.hp,
        )  # fmt: skip
        grad_x = plan.input_view(grad_xq)
    return grad_x, grad_w, grad_b


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _cat_columns(a: Tensor, b: Tensor) -> Tensor:
    """[a | b] for two matrices with equal row counts (no autograd)."""
    result = empty((a.shape[0], a.shape[1] + b.shape[1]), dtype=a.dtype, device=a.device)
    copy_into(result[:, : a.shape[1]], a)
    copy_into(result[:, a.shape[1] :], b)
    return result


def _col2im(grad_cols: Tensor, plan: _ConvPlan) -> Tensor:
    """Sum the patch-matrix gradient, (C, kh, kw, OH, OW, N) in memory, back onto the
    input positions it was read from. Returns an (N, C, H, W) view of a padded
    (C, hp, wp, N) buffer."""
    n, c, kh, kw = plan.n, plan.c, plan.kh, plan.kw
    dh, dw = plan.dilation
    sh, sw = plan.stride
    hp, wp, oh, ow = plan.hp, plan.wp, plan.oh, plan.ow
    if grad_cols.device.type == "cpu":
        from . import _conv_kernels as kernels

        grad_xq = empty((c, hp, wp, n), dtype=grad_cols.dtype, device=grad_cols.device)
        kernels.col2im(
            _flat(grad_xq), _flat(grad_cols), kh, kw, hp, wp, sh, sw, dh, dw, oh, ow, n,
            ndrange=c * hp,
        )  # fmt: skip
        return plan.input_view(grad_xq)
    # Elsewhere (a GPU): one strided in-place add per filter tap.
    grad_xq = zeros((c, hp, wp, n), dtype=grad_cols.dtype, device=grad_cols.device)
    window = (c, oh, ow, n)
    target_strides = (hp * wp * n, sh * wp * n, sw * n, 1)
    tap_size = oh * ow * n
    source_strides = (kh * kw * tap_size, ow * n, n, 1)
    for i in range(kh):
        for j in range(kw):
            target = make_view(grad_xq, window, target_strides, (i * dh * wp + j * dw) * n)
            source = make_view(grad_cols, window, source_strides, (i * kw + j) * tap_size)
            _fused.accumulate(target, source)
    return plan.input_view(grad_xq)


def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """1-d convolution: ``input`` (N, C, L) or (C, L), ``weight`` (O, C / groups, k).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.conv1d(kg.ones(1, 1, 5), kg.ones(1, 1, 3)).tolist()
    [[[3.0, 3.0, 3.0]]]
    """
    x, unbatched = _batched(input, "conv1d", 3)
    if weight.ndim != 3:
        raise ShapeError(
            f"conv1d: the weight must be (out_channels, in_channels / groups, k), got shape "
            f"{format_shape(weight.shape)}"
        )
    if isinstance(padding, str):
        padding2: Any = padding
        if padding == "same":
            total = _single(dilation, "dilation") * (weight.shape[2] - 1)
            if total % 2:
                x = _pad_constant(x, (total // 2, total - total // 2))
                padding2 = 0
    else:
        padding2 = (0, _single(padding, "padding"))
    result = conv2d(
        x.unsqueeze(2),
        weight.unsqueeze(2),
        bias,
        (1, _single(stride, "stride")),
        padding2,
        (1, _single(dilation, "dilation")),
        groups,
    ).squeeze(2)
    return result.squeeze(0) if unbatched else result


# =========================================================================================
# pooling
# =========================================================================================
_MAX_FUSED_TAPS = 16  # windows with more taps use a reduction instead of one fused kernel


def _max_fn(taps: int, relu: bool = False) -> Any:
    """``max_window_<taps>(x0, ..., x<taps-1>)``: the window's maximum, NaN if any tap is
    NaN (as PyTorch). The NaN test comes last: folding it into every comparison makes
    the compiled loop several times slower. With ``relu``, then ``0 if m <= 0 else m``
    (NaN stays NaN, as ``relu`` leaves it)."""
    names = [f"x{k}" for k in range(taps)]
    name = f"max_window_relu_{taps}" if relu else f"max_window_{taps}"
    lines = [f"def {name}({', '.join(names)}):", "    m = x0"]
    for x in names[1:]:
        lines.append(f"    if {x} > m:")
        lines.append(f"        m = {x}")
    lines.append(f"    if {' or '.join(f'{n} != {n}' for n in names)}:")
    lines.append("        return math.nan")
    lines.append("    return 0 if m <= 0 else m" if relu else "    return m")
    return _fused.from_source(name, "\n".join(lines) + "\n", taps, 1)


def _max_grad_fn(taps: int, relu: bool = False) -> Any:
    """Route each window's gradient to its first maximum (as PyTorch), or to its first
    NaN when the maximum is NaN (PyTorch picks the last NaN; finding that one too makes
    this kernel twice as slow, for windows whose values are garbage anyway). Written
    as flags and selects, without early returns: the compiled loop is about twice as
    fast that way. With ``relu`` (``m`` is then the output after ReLU) a window whose
    output is not positive passes no gradient, as ``relu``'s gradient does."""
    names = [f"x{k}" for k in range(taps)]
    name = f"max_window_relu_grad_{taps}" if relu else f"max_window_grad_{taps}"
    lines = [f"def {name}({', '.join(names)}, m, g):"]
    if relu:
        lines.append("    g = g if m > 0 else 0")
    if taps == 1:
        lines.append("    return g")
    else:
        lines.append("    e0 = x0 == m or x0 != x0")
        lines.append("    found = e0")
        for k in range(1, taps - 1):
            lines.append(f"    e{k} = (x{k} == m or x{k} != x{k}) and not found")
            lines.append(f"    found = found or e{k}")
        lines.append(f"    e{taps - 1} = not found")
        picks = ", ".join(f"g if e{k} else 0.0" for k in range(taps))
        lines.append(f"    return ({picks})")
    return _fused.from_source(name, "\n".join(lines) + "\n", taps + 2, taps)


def _sum_fn(taps: int) -> Any:
    names = [f"x{k}" for k in range(taps)]
    source = (
        f"def sum_window_{taps}({', '.join(names)}, scale):\n"
        f"    return ({' + '.join(names)}) * scale\n"
    )
    return _fused.from_source(f"sum_window_{taps}", source, taps + 1, 1)


def _broadcast_fn(taps: int) -> Any:
    # One tap returns the value itself: a scalar function with one output returns a
    # value, not a 1-tuple (which the kernels would try to store as one).
    source = f"def spread_window_{taps}(g):\n    return {', '.join(['g'] * taps)}\n"
    return _fused.from_source(f"spread_window_{taps}", source, 1, taps)


class _PoolPlan:
    def __init__(
        self,
        op: str,
        x: Tensor,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        ceil_mode: bool,
    ) -> None:
        self.kh, self.kw = _pair(kernel_size, "kernel_size")
        self.sh, self.sw = _pair(
            stride if stride is not None and stride != [] else kernel_size, "stride"
        )
        self.ph, self.pw = _pair(padding, "padding")
        self.dh, self.dw = _pair(dilation, "dilation")
        if min(self.kh, self.kw, self.sh, self.sw, self.dh, self.dw) < 1:
            raise ValueError(f"{op}: kernel_size, stride and dilation must be positive")
        if self.ph > self.kh // 2 or self.pw > self.kw // 2 or min(self.ph, self.pw) < 0:
            raise ValueError(
                f"{op}: padding ({self.ph}, {self.pw}) must be at most half the kernel size "
                f"({self.kh}, {self.kw})"
            )
        h, w = x.shape[2], x.shape[3]
        self.h, self.w = h, w
        self.oh = _pool_size(h, self.kh, self.sh, self.ph, self.dh, ceil_mode)
        self.ow = _pool_size(w, self.kw, self.sw, self.pw, self.dw, ceil_mode)
        if self.oh <= 0 or self.ow <= 0:
            raise ShapeError(
                f"{op}: the window ({self.kh}x{self.kw}) does not fit the input of shape "
                f"{format_shape(x.shape)} (with padding ({self.ph}, {self.pw}))"
            )
        # Extra padding on the bottom/right that ceil_mode windows reach into.
        self.extra_h = max(
            0, (self.oh - 1) * self.sh + self.dh * (self.kh - 1) + 1 - (h + 2 * self.ph)
        )
        self.extra_w = max(
            0, (self.ow - 1) * self.sw + self.dw * (self.kw - 1) + 1 - (w + 2 * self.pw)
        )
        self.taps = self.kh * self.kw
        self.padded = bool(self.ph or self.pw or self.extra_h or self.extra_w)
        # Windows tile the input exactly once: gradients can be written, not accumulated.
        self.disjoint = (
            not self.padded
            and (self.sh, self.sw) == (self.kh, self.kw)
            and (self.dh, self.dw) == (1, 1)
        )

    def pads(self) -> tuple[int, int, int, int]:
        return (self.pw, self.pw + self.extra_w, self.ph, self.ph + self.extra_h)

    def views(self, x: Tensor) -> list[Tensor]:
        return [
            _window_view(x, (self.oh, self.ow), (self.sh, self.sw), (i, j), (self.dh, self.dw))
            for i in range(self.kh)
            for j in range(self.kw)
        ]

    def scatter(self, fn: Any, inputs: list[Any], like: Tensor, source: Tensor) -> Tensor:
        """Run a ``taps``-output kernel whose k-th output belongs to window tap k, and sum
        the outputs onto the (unpadded) input positions. ``inputs`` are (N, C, OH, OW)
        views, ``like`` gives dtype and device, ``source`` is the pooled (padded) input:
        the gradient is laid out like it, and kernels run in its memory order."""
        order = _memory_order(source)
        inputs = [_permuted(t, order) if isinstance(t, Tensor) else t for t in inputs]
        if self.disjoint:
            covered = not (self.h % self.kh or self.w % self.kw)
            grad = _buffer_like(source, fill_zeros=not covered or source.numel() != _span(source))
            outputs = [_permuted(view, order) for view in self.views(grad)]
            _fused.launch(fn, outputs, inputs, like.dtype)
            return grad
        n, c = source.shape[0], source.shape[1]
        window_shape = (n, c, self.oh, self.ow)
        parts = [_empty_in_order(window_shape, order, like) for _ in range(self.taps)]
        _fused.launch(fn, [_permuted(part, order) for part in parts], inputs, like.dtype)
        grad = _empty_in_order(source.shape, order, like, fill_zeros=True)
        for part, view in zip(parts, self.views(grad)):
            _fused.accumulate(_permuted(view, order), _permuted(part, order))
        if not self.padded:
            return grad
        return grad[:, :, self.ph : self.ph + self.h, self.pw : self.pw + self.w]


def _pad_in_layout(x: Tensor, plan: _PoolPlan, value: float) -> Tensor:
    """``x`` padded for pooling (no autograd), stored in ``x``'s memory order."""
    n, c, h, w = x.shape
    left, right, top, bottom = plan.pads()
    shape = (n, c, h + top + bottom, w + left + right)
    order = _memory_order(x)
    buffer = full(tuple(shape[d] for d in order), value, dtype=x.dtype, device=x.device)
    padded = _permuted(buffer, [order.index(d) for d in range(4)])
    copy_into(padded[:, :, top : top + h, left : left + w], x)
    return padded


def _span(t: Tensor) -> int:
    """Elements from the first to the last one a view touches (positive strides)."""
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t._strides))


def _pool_size(size: int, kernel: int, stride: int, padding: int, dilation: int, ceil: bool) -> int:
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    if span < 0:
        return 0
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + padding:
        out -= 1  # the last window must start inside the input or the left padding
    return out


def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor:
    """Maximum over sliding windows of (N, C, H, W) or (C, H, W) input. ``stride``
    defaults to ``kernel_size``; padding is with -inf. The gradient of a window goes to
    its first maximum, as in PyTorch.

    >>> import kernelgrad as kg
    >>> x = kg.arange(16.0).reshape(1, 1, 4, 4)
    >>> kg.nn.functional.max_pool2d(x, 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices=True is not supported")
    return _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, relu=False)


def max_pool2d_relu(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """``relu(max_pool2d(input, ...))`` with one kernel forward and one backward (the
    same values and gradients as the two ops). ``nn.Sequential`` calls it for a
    ``MaxPool2d`` followed by a ``ReLU``.

    >>> import kernelgrad as kg
    >>> x = kg.tensor([[[[-3.0, -1.0], [-2.0, -4.0]]]])
    >>> kg.nn.functional.max_pool2d_relu(x, 2).tolist()
    [[[[0.0]]]]
    """
    return _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, relu=True)


def _max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    relu: bool,
) -> Tensor:
    op = "max_pool2d_relu" if relu else "max_pool2d"
    x, unbatched = _batched(input, op, 4)
    _check_float(x, op)
    plan = _PoolPlan(op, x, kernel_size, stride, padding, dilation, ceil_mode)
    if plan.taps > _MAX_FUSED_TAPS:
        xp = _pad_constant(x, plan.pads(), value=-math.inf) if plan.padded else x
        windows = xp.unfold(2, plan.kh, plan.sh, plan.dh).unfold(3, plan.kw, plan.sw, plan.dw)
        result = windows.amax((-2, -1))
        if relu:
            result = result.relu()
        return result.squeeze(0) if unbatched else result
    with autograd.no_grad():
        xp = _pad_in_layout(x, plan, -math.inf) if plan.padded else x
        result = _window_reduce(xp, plan, _max_fn(plan.taps, relu))
    if autograd.needs_grad(x):
        pooled = result.detach()

        def backward(grad: Tensor) -> tuple[Tensor]:
            _no_double_backward(op)
            inputs = plan.views(xp) + [pooled, grad]
            return (plan.scatter(_max_grad_fn(plan.taps, relu), inputs, grad, xp),)

        autograd.record(op, (x,), result, backward, (xp, pooled))
    return result.squeeze(0) if unbatched else result


def avg_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over sliding windows of (N, C, H, W) or (C, H, W) input (zero padding).

    >>> import kernelgrad as kg
    >>> x = kg.arange(16.0).reshape(1, 1, 4, 4)
    >>> kg.nn.functional.avg_pool2d(x, 2).tolist()
    [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    x, unbatched = _batched(input, "avg_pool2d", 4)
    _check_float(x, "avg_pool2d")
    plan = _PoolPlan("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    divisor: Any
    if divisor_override is not None:
        divisor = float(divisor_override)
    elif not plan.padded or (count_include_pad and not (plan.extra_h or plan.extra_w)):
        divisor = float(plan.taps)
    else:
        # Per-window counts: windows are clipped to the padded input (count_include_pad)
        # or to the input itself.
        with autograd.no_grad():
            mask = ones((1, 1, x.shape[2], x.shape[3]), dtype=x.dtype, device=x.device)
            if count_include_pad:
                mask = _pad_constant(mask, (plan.pw, plan.pw, plan.ph, plan.ph), value=1.0)
                mask = _pad_constant(mask, (0, plan.extra_w, 0, plan.extra_h), value=0.0)
            else:
                mask = _pad_constant(mask, plan.pads(), value=0.0)
            divisor = _window_reduce(mask, plan, _sum_fn(plan.taps), 1.0)
    if plan.taps > _MAX_FUSED_TAPS:
        xp = _pad_constant(x, plan.pads(), value=0.0) if plan.padded else x
        windows = xp.unfold(2, plan.kh, plan.sh).unfold(3, plan.kw, plan.sw)
        result = windows.sum((-2, -1)) / divisor
        return result.squeeze(0) if unbatched else result
    scale = 1.0 / divisor if isinstance(divisor, float) else 1.0
    with autograd.no_grad():
        xp = _pad_in_layout(x, plan, 0.0) if plan.padded else x
        result = _window_reduce(xp, plan, _sum_fn(plan.taps), scale)
        if not isinstance(divisor, float):
            result = result / divisor
    if autograd.needs_grad(x):

        def backward(grad: Tensor) -> tuple[Tensor]:
            _no_double_backward("avg_pool2d")
            scaled = grad * scale if isinstance(divisor, float) else grad / divisor
            return (plan.scatter(_broadcast_fn(plan.taps), [scaled], grad, xp),)

        autograd.record("avg_pool2d", (x,), result, backward)
    return result.squeeze(0) if unbatched else result


def _window_reduce(x: Tensor, plan: _PoolPlan, fn: Any, *scalars: float) -> Tensor:
    """``fn`` of every window's taps (then ``scalars``) of a 4-d tensor: the window
    maxima or scaled sums, laid out (and computed) in ``x``'s memory order."""
    order = _memory_order(x)
    result = _empty_in_order(x.shape[:2] + (plan.oh, plan.ow), order, x)
    views = [_permuted(view, order) for view in plan.views(x)]
    _fused.launch(fn, [_permuted(result, order)], views + list(scalars), x.dtype)
    return result


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """Maximum over sliding windows of (N, C, L) or (C, L) input."""
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None else _single(stride, "stride")
    result = max_pool2d(
        input.unsqueeze(-2),
        (1, k),
        (1, s),
        (0, _single(padding, "padding")),
        (1, _single(dilation, "dilation")),
        ceil_mode,
    )
    return result.squeeze(-2)


def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Mean over sliding windows of (N, C, L) or (C, L) input."""
    k = _single(kernel_size, "kernel_size")
    s = k if stride is None else _single(stride, "stride")
    result = avg_pool2d(
        input.unsqueeze(-2),
        (1, k),
        (1, s),
        (0, _single(padding, "padding")),
        ceil_mode,
        count_include_pad,
    )
    return result.squeeze(-2)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average pooling to a fixed output size (windows chosen as in PyTorch: cell i of
    n covers floor(i*H/n) to ceil((i+1)*H/n)). ``output_size`` entries may be None
    (keep that size).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.adaptive_avg_pool2d(kg.ones(2, 3, 7, 5), 1).shape
    (2, 3, 1, 1)
    """
    x, unbatched = _batched(input, "adaptive_avg_pool2d", 4)
    _check_float(x, "adaptive_avg_pool2d")
    h, w = x.shape[2], x.shape[3]
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    oh = h if sizes[0] is None else int(sizes[0])
    ow = w if sizes[1] is None else int(sizes[1])
    if oh <= 0 or ow <= 0:
        raise ValueError(f"adaptive_avg_pool2d: output size must be positive, got {output_size!r}")
    if (oh, ow) == (1, 1):
        result = x.mean((2, 3), keepdim=True)
    elif h % oh == 0 and w % ow == 0 and (h // oh) * (w // ow) <= _MAX_FUSED_TAPS:
        result = avg_pool2d(x, (h // oh, w // ow))
    else:
        # Pooling matrices: rows average the cells' windows; differentiable matmuls.
        rows = _pooling_matrix(oh, h, x)
        cols = _pooling_matrix(ow, w, x)
        result = rows @ x @ cols.T
    return result.squeeze(0) if unbatched else result


def _pooling_matrix(out: int, size: int, like: Tensor) -> Tensor:
    import numpy as np

    matrix = np.zeros((out, size))
    for i in range(out):
        start = (i * size) // out
        stop = -(-((i + 1) * size) // out)
        matrix[i, start:stop] = 1.0 / (stop - start)
    from ..ops.creation import tensor

    return tensor(matrix, dtype=like.dtype, device=like.device)


# =========================================================================================
# dropout, normalisation, embedding, padding
# =========================================================================================
def dropout_mask(x, u, p, scale):
    return x * scale if u >= p else x * 0.0


_DROPOUT = ScalarFunction.from_python(dropout_mask)


def _apply_dropout(x: Tensor, draws: Tensor, p: float, scale: float) -> Tensor:
    """``x * scale`` where ``draws >= p``, else 0: one fused kernel, forward and backward."""
    result = empty(x.shape, dtype=x.dtype, device=x.device)
    _fused.launch(_DROPOUT, [result], [x, draws, p, scale], x.dtype)
    if autograd.needs_grad(x):

        def backward(grad: Tensor) -> tuple[Tensor]:
            if autograd.is_grad_enabled():  # create_graph: stay differentiable
                return (grad * where(draws >= p, scale, 0.0),)
            return (_apply_dropout(grad, draws, p, scale),)

        autograd.record("dropout", (x,), result, backward)
    return result


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p) while
    ``training``; the identity otherwise. One random draw and one fused kernel.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.dropout(kg.ones(3), p=0.5, training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    _check_float(input, "dropout")
    if p == 1.0:
        return input * 0.0
    draws = rand(input.shape, dtype=input.dtype, device=input.device)
    return _apply_dropout(input, draws, p, 1.0 / (1.0 - p))


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalisation over every dim but 1 (channels). In training, batch
    statistics are used and the running statistics (if given) are updated in place
    with ``momentum`` (the running variance uses the unbiased estimate, as PyTorch).

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.batch_norm(kg.randn(8, 3), None, None, training=True)
    >>> [abs(round(v, 4)) for v in y.mean(0).tolist()]
    [0.0, 0.0, 0.0]
    """
    if input.ndim < 2:
        raise ShapeError(
            f"batch_norm: expected at least 2 dims (N, C, ...), got {format_shape(input.shape)}"
        )
    channels = input.shape[1]
    dims = (0,) + tuple(range(2, input.ndim))
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // channels
        if count <= 1:
            raise ValueError(
                f"batch_norm: expected more than 1 value per channel when training, got input "
                f"of shape {format_shape(input.shape)}"
            )
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        if running_mean is not None and running_var is not None:
            with autograd.no_grad():
                running_mean.mul_(1.0 - momentum).add_(mean.reshape(channels) * momentum)
                unbiased = var.reshape(channels) * (count / (count - 1))
                running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running statistics are needed when not training")
        centered = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    result = centered * (var + eps).rsqrt()
    if weight is not None:
        result = result * weight.reshape(shape)
    if bias is not None:
        result = result + bias.reshape(shape)
    return result


def layer_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise over the last ``len(normalized_shape)`` dims (mean 0, variance 1), then
    scale by ``weight`` and shift by ``bias`` (both of ``normalized_shape``).

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.layer_norm(kg.tensor([[1.0, 2.0, 3.0]]), (3,))
    >>> [round(v, 3) for v in y[0].tolist()]
    [-1.225, 0.0, 1.225]
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if input.shape[input.ndim - len(shape) :] != shape:
        raise ShapeError(
            f"layer_norm: normalized_shape {shape} does not match the last dims of the input "
            f"of shape {format_shape(input.shape)}"
        )
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dims, keepdim=True)
    result = centered * (var + eps).rsqrt()
    if weight is not None:
        result = result * weight
    if bias is not None:
        result = result + bias
    return result


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of ``weight`` picked by the integer ``input`` (any shape); the result has
    shape ``input.shape + (embedding_dim,)``. Rows picked by ``padding_idx`` get no
    gradient.

    >>> import kernelgrad as kg
    >>> table = kg.arange(6.0).reshape(3, 2)
    >>> kg.nn.functional.embedding(kg.tensor([2, 0]), table).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """
    if not isinstance(input, Tensor) or input.dtype.is_floating_point or input.dtype.is_bool:
        raise TypeError(
            "embedding: the indices must be an integer tensor (e.g. `kg.tensor([1, 2])` or "
            "`x.long()`)"
        )
    try:
        result = take(weight, 0, input)
    except IndexError:
        raise IndexError(
            f"embedding: an index is outside the table of {weight.shape[0]} rows (valid: 0 "
            f"to {weight.shape[0] - 1})"
        ) from None
    if padding_idx is not None and weight.requires_grad and autograd.is_grad_enabled():
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        keep = (input != padding_idx).unsqueeze(-1)
        result = where(keep, result, take(weight.detach(), 0, input))
    return result


def one_hot(input: Tensor, num_classes: int = -1) -> Tensor:
    """int64 tensor with a trailing dim of ``num_classes``: 1 at each index, else 0.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.one_hot(kg.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    from ..errors import DTypeError, IndexingError
    from ..ops.movement import stack

    if input.dtype.is_floating_point or input.dtype.is_bool:
        raise DTypeError(
            f"one_hot: the input must be an integer tensor of class indices, got {input.dtype}"
        )
    if num_classes < 0 and input.numel() == 0:
        raise ShapeError(
            "one_hot: cannot infer the number of classes from an empty tensor; give num_classes"
        )
    if input.numel():
        low, high = (int(v) for v in stack([input.amin(), input.amax()]).cpu().tolist())
        if low < 0:
            raise IndexingError(
                f"one_hot: class values must be non-negative, but the input holds {low}; "
                "check the labels (a negative class has no column to set)"
            )
        if num_classes < 0:
            num_classes = high + 1
        elif high >= num_classes:
            raise IndexingError(
                f"one_hot: class value {high} is out of range for num_classes={num_classes} "
                f"(valid: 0 to {num_classes - 1})"
            )
    classes = arange(max(num_classes, 0), device=input.device)
    return (input.unsqueeze(-1) == classes).to(int64)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad with a constant: ``pad`` lists (before, after) pairs from the last dim
    backwards, as ``torch.nn.functional.pad``.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.pad(kg.ones(1, 2), (1, 1)).tolist()
    [[0.0, 1.0, 1.0, 0.0]]
    """
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported (only 'constant')")
    return _pad_constant(input, tuple(pad), value)


# =========================================================================================
# losses
# =========================================================================================
def _reduce(loss: Tensor, reduction: str, op: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check_reduction(reduction: str, op: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


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
    expected = (input.shape[0],) + input.shape[2:]
    if target.shape != expected:
        raise ShapeError(
            f"{op}: for an input of shape {format_shape(input.shape)} (classes in dim 1) the "
            f"target must have shape {format_shape(expected)}, got {format_shape(target.shape)}"
        )
    if input.ndim == 2:
        return input, target, expected
    classes = input.shape[1]
    order = (0,) + tuple(range(2, input.ndim)) + (1,)
    return input.permute(*order).reshape(-1, classes), target.reshape(-1), expected


def _class_weights(
    target: Tensor, weight: Tensor | None, ignore_index: int, classes: int, op: str, dtype: Any
) -> tuple[Tensor, Tensor]:
    """Per-sample weights (weight[target], 0 where ignored) and the valid mask; raises
    an error naming the bad class index if a target is out of range."""
    valid = target != ignore_index
    safe = where(valid, target, 0)
    table = weight if weight is not None else ones(classes, dtype=dtype, device=target.device)
    try:
        picked = take(table, 0, safe)
    except IndexError:
        raise _class_index_error(op, "a target class index", classes, ignore_index) from None
    return where(valid, picked, 0.0), valid


def _class_index_error(op: str, which: str, classes: int, ignore_index: int) -> IndexError:
    return IndexError(
        f"{op}: {which} is out of range: the input has {classes} classes "
        f"(valid targets: 0 to {classes - 1}, or ignore_index={ignore_index})"
    )


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between logits ``input`` ((N, C), (N, C, d1, ...) or (C,)) and
    ``target``: class indices (int, shape without C) or class probabilities (float,
    same shape as ``input``). Computed from a stable log-sum-exp. ``weight`` rescales
    classes; targets equal to ``ignore_index`` contribute nothing (and are left out of
    the mean); ``label_smoothing`` mixes the target with the uniform distribution.

    >>> import kernelgrad as kg
    >>> logits = kg.tensor([[2.0, 0.0, 0.0]])
    >>> round(kg.nn.functional.cross_entropy(logits, kg.tensor([0])).item(), 4)
    0.2395
    """
    op = "cross_entropy"
    _check_reduction(reduction, op)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing}")
    classes = input.shape[0 if input.ndim == 1 else 1] if input.ndim else 0
    if classes == 0:
        raise ShapeError(
            f"{op}: the input of shape {format_shape(input.shape)} has no classes (a 0-d "
            "tensor, or a class dimension of size 0); give logits of shape (C,) or "
            "(N, C, ...) with C >= 1"
        )
    if weight is not None and weight.shape != (classes,):
        raise ShapeError(
            f"{op}: weight must have shape ({classes},), got {format_shape(weight.shape)}"
        )
    if not input.dtype.is_floating_point:
        # Integer logits: the loss and its statistics are computed in floating point (a
        # buffer of the input's dtype truncated the loss, 1.3133 -> 1).
        from ..dtypes import default_float

        input = input.to(default_float())  # noqa: A001
    if target.dtype.is_floating_point:
        return _cross_entropy_probabilities(input, target, weight, reduction, label_smoothing)
    x, t, out_shape = _classes_last(input, target, op)

    needs_grad = autograd.needs_grad(x, weight)
    if needs_grad and weight is not None and weight.requires_grad:
        raise NotImplementedError(f"{op}: gradients with respect to `weight` are not supported")
    from . import _loss_kernels as kernels

    rows = x.shape[0]
    smoothing = float(label_smoothing)
    has_weight = weight is not None
    with autograd.no_grad():
        logits = x.detach().contiguous()
        targets = t.contiguous()
        # without class weights the kernels never read `weights`; any flat tensor will do
        weights = weight.detach().contiguous() if has_weight else logits
        stats = empty((3, rows), dtype=x.dtype, device=x.device)
        if rows:
            # A target out of range is reported through a flag: read at once on the CPU,
            # at the next synchronisation on CUDA (no device round trip per call).
            error, check = _fused.error_flag(
                x.device,
                lambda bad: _class_index_error(
                    op, f"target class index {bad}", classes, ignore_index
                ),
            )
            kernels.row_statistics(
                _flat(stats), error, _flat(logits), _flat(targets), _flat(weights), classes,
                rows, ignore_index, smoothing, has_weight,
            )  # fmt: skip
            check()
        denominator = None
        if reduction == "mean":
            totals = stats[:2].sum(1)
            denominator = totals[1:]
            result = totals[0] / totals[1]
        elif reduction == "sum":
            result = stats[0].sum()
        else:
            result = stats[0].contiguous().reshape(out_shape)

    if needs_grad:

        def backward(grad: Tensor) -> tuple[Tensor, None]:
            if autograd.is_grad_enabled():  # create_graph: differentiable ops
                return _cross_entropy_index_grad(
                    x, t, weight, ignore_index, reduction, smoothing, grad
                ), None
            grad_x = empty((rows, classes), dtype=x.dtype, device=x.device)
            if rows:
                total = weight.sum().reshape(1) if has_weight else logits
                upstream = grad.detach().contiguous().reshape(-1)
                kernels.gradient(
                    _flat(grad_x), _flat(logits), _flat(targets), _flat(weights),
                    _flat(stats), upstream, denominator if denominator is not None else upstream,
                    total, classes, rows, ignore_index, smoothing, has_weight,
                    reduction == "none", reduction == "mean",
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
    ignore_index: int = -100,
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
    _check_reduction(reduction, op)
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


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error ``(input - target)**2`` (reduced by ``reduction``).

    >>> import kernelgrad as kg
    >>> kg.nn.functional.mse_loss(kg.tensor([1.0, 3.0]), kg.tensor([0.0, 0.0])).item()
    5.0
    """
    _check_same_shape(input, target, "mse_loss")
    difference = input - target
    return _reduce(difference * difference, reduction, "mse_loss")


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean absolute error ``|input - target|``."""
    _check_same_shape(input, target, "l1_loss")
    return _reduce((input - target).abs(), reduction, "l1_loss")


def binary_cross_entropy(
    input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """Binary cross-entropy of probabilities ``input`` (in [0, 1]) against ``target``;
    each log is clamped at -100, as PyTorch does.

    >>> import kernelgrad as kg
    >>> round(kg.nn.functional.binary_cross_entropy(kg.tensor([0.5]), kg.tensor([1.0])).item(), 4)
    0.6931
    """
    _check_same_shape(input, target, "binary_cross_entropy")
    log_p = input.log().clamp(min=-100.0)
    log_not_p = (1.0 - input).log().clamp(min=-100.0)
    loss = -(target * log_p + (1.0 - target) * log_not_p)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
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
