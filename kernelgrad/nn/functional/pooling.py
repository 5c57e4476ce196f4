"""Max, average and adaptive pooling, with fused max-pool + ReLU."""

from __future__ import annotations

import functools
import math
from typing import Any

from ... import autograd
from ...errors import ArgumentError, ShapeError, format_shape
from ...ops.creation import full, ones
from ...ops.elementwise import copy_into
from ...ops.movement import pad as _pad_constant
from ...ops.movement import stack
from ...tensor import Tensor
from .. import _fused
from ._layout import (
    _batched,
    _buffer_like,
    _check_float,
    _empty_in_order,
    _memory_order,
    _pair,
    _permuted,
    _single,
    _window_view,
)

_MAX_FUSED_TAPS = 16  # windows with more taps use a reduction instead of one fused kernel


@functools.cache  # built once per window size: calls sit on every pass
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


@functools.cache
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


@functools.cache
def _sum_fn(taps: int) -> Any:
    names = [f"x{k}" for k in range(taps)]
    source = (
        f"def sum_window_{taps}({', '.join(names)}, scale):\n"
        f"    return ({' + '.join(names)}) * scale\n"
    )
    return _fused.from_source(f"sum_window_{taps}", source, taps + 1, 1)


@functools.cache
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
            raise ArgumentError(f"{op}: kernel_size, stride and dilation must be positive")
        if self.ph > self.kh // 2 or self.pw > self.kw // 2 or min(self.ph, self.pw) < 0:
            raise ArgumentError(
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
    if return_indices:  # (values, indices): see pool_indices.py
        from .pool_indices import max_pool_with_indices

        return max_pool_with_indices(input, 2, kernel_size, stride, padding, dilation, ceil_mode)
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
        # the gradient kernel reads windows with contiguous rows (batch innermost), or
        # strided ones when the incoming gradient has another layout (after a flatten)
        _fused.prefetch(_max_grad_fn(plan.taps, relu), x, ("rows", "strided"))

        def backward(grad: Tensor) -> tuple[Tensor]:
            if autograd.is_grad_enabled():  # create_graph: a gradient that has a graph
                weights = _max_tap_weights(xp, pooled, plan, relu)
                return (_pool_vjp_with_graph(grad, xp, plan, weights),)
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
            if autograd.is_grad_enabled():  # create_graph: a gradient that has a graph
                weights = scale if isinstance(divisor, float) else 1.0 / divisor[..., None, None]
                return (_pool_vjp_with_graph(grad, xp, plan, weights),)
            scaled = grad * scale if isinstance(divisor, float) else grad / divisor
            return (plan.scatter(_broadcast_fn(plan.taps), [scaled], grad, xp),)

        autograd.record("avg_pool2d", (x,), result, backward)
    return result.squeeze(0) if unbatched else result


def _max_tap_weights(xp: Tensor, pooled: Tensor, plan: _PoolPlan, relu: bool) -> Tensor:
    """(N, C, OH, OW, kh, kw): 1 at the tap of each window that max pooling's gradient
    goes to (the gradient kernel's choice, run with a gradient of ones), else 0."""
    order = _memory_order(xp)
    inputs = plan.views(xp) + [pooled, ones(pooled.shape, dtype=xp.dtype, device=xp.device)]
    window_shape = pooled.shape
    parts = [_empty_in_order(window_shape, order, xp) for _ in range(plan.taps)]
    _fused.launch(
        _max_grad_fn(plan.taps, relu),
        [_permuted(part, order) for part in parts],
        [_permuted(t, order) for t in inputs],
        xp.dtype,
    )
    return stack(parts, -1).reshape(*window_shape, plan.kh, plan.kw)


def _pool_vjp_with_graph(grad: Tensor, xp: Tensor, plan: _PoolPlan, weights: Any) -> Tensor:
    """A 2-d pooling's input gradient under ``create_graph=True`` (MAML's inner loop
    through a CNN, a gradient penalty). Both poolings' gradients are linear in the
    incoming gradient, with a weight per window tap (max: 1 at each window's chosen
    maximum; average: 1 / divisor): they are the VJP of the windows' weighted sums,
    recorded here, so that second-order gradients flow through the incoming gradient.
    The second derivative with respect to the input is zero, as in PyTorch."""
    leaf = xp.detach().requires_grad_()
    windows = leaf.unfold(2, plan.kh, plan.sh, plan.dh).unfold(3, plan.kw, plan.sw, plan.dw)
    pooled = (windows * weights).sum((-2, -1))
    (grad_xp,) = autograd.grad(pooled, leaf, grad, create_graph=True)
    if not plan.padded:
        return grad_xp
    return grad_xp[:, :, plan.ph : plan.ph + plan.h, plan.pw : plan.pw + plan.w]


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
    return_indices: bool = False,
) -> Tensor:
    """Maximum over sliding windows of (N, C, L) or (C, L) input; ``return_indices``
    also returns the position of each window's maximum."""
    if return_indices:
        from .pool_indices import max_pool_with_indices

        return max_pool_with_indices(input, 1, kernel_size, stride, padding, dilation, ceil_mode)
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
    kg.Size([2, 3, 1, 1])
    """
    x, unbatched = _batched(input, "adaptive_avg_pool2d", 4)
    _check_float(x, "adaptive_avg_pool2d")
    h, w = x.shape[2], x.shape[3]
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    oh = h if sizes[0] is None else int(sizes[0])
    ow = w if sizes[1] is None else int(sizes[1])
    if oh <= 0 or ow <= 0:
        raise ArgumentError(
            f"adaptive_avg_pool2d: output size must be positive, got {output_size!r}"
        )
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
    from ...ops.creation import tensor

    return tensor(matrix, dtype=like.dtype, device=like.device)
