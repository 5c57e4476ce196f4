"""Convolution: direct kernels on the CPU for stride 1 and few taps, im2col + one matrix
product otherwise; images stay batch innermost ((N, C, H, W) stored as (C, H, W, N))."""

from __future__ import annotations

from typing import Any

from ... import autograd
from ...backends.base import backend_capability
from ...errors import (
    ArgumentError,
    DeviceMismatchError,
    DTypeError,
    InplaceError,
    ShapeError,
    format_shape,
)
from ...ops.creation import empty, zeros
from ...ops.elementwise import copy_into
from ...ops.movement import make_view
from ...ops.movement import pad as _pad_constant
from ...tensor import Tensor
from .. import _fused
from ._layout import (
    _batched,
    _check_float,
    _contiguous,
    _flat,
    _pair,
    _same_padding,
    _single,
    _zero_of,
)


def _conv_padding(
    padding: Any, kernel: tuple[int, int], dilation: tuple[int, int], stride: tuple[int, int]
) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) from an int, a pair, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding == "same":
            if stride != (1, 1):
                raise ArgumentError("conv: padding='same' needs stride 1 (as in PyTorch)")
            pads = _same_padding(kernel, dilation)
            return pads[0], pads[1], pads[2], pads[3]
        raise ArgumentError(
            f"conv: padding must be an int, a pair, 'valid' or 'same', got {padding!r}"
        )
    ph, pw = _pair(padding, "padding")
    if ph < 0 or pw < 0:
        raise ArgumentError(f"conv: padding must be non-negative, got {padding!r}")
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
    _check_operands(op, x, weight, bias)
    n, c, h, w = x.shape
    out_channels, _, kh, kw = weight.shape
    _check_groups(op, input, c, weight, bias, groups)
    stride2 = _pair(stride, "stride")
    dilation2 = _pair(dilation, "dilation")
    if min(stride2) < 1 or min(dilation2) < 1:
        raise ArgumentError(f"{op}: stride and dilation must be positive")
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


def _check_operands(op: str, x: Tensor, weight: Tensor, bias: Tensor | None) -> None:
    """The weight and bias are on the input's device, with its dtype."""
    for other, what in ((weight, "weight"), (bias, "bias")):
        if other is None:
            continue
        if other.device != x.device:
            raise DeviceMismatchError(
                f"{op}: the input is on {x.device} but the {what} is on {other.device}; "
                "move the module with `model.to(device)` or the input with `x.to(device)`"
            )
        if other.dtype is not x.dtype:
            raise DTypeError(
                f"{op}: the input is {x.dtype} but the {what} is {other.dtype}; convert one "
                "of them (e.g. `model.to(kg.float64)` or `x.float()`)"
            )


def _check_groups(
    op: str, input: Tensor, c: int, weight: Tensor, bias: Tensor | None, groups: int
) -> None:
    """``groups`` divides the channels, the weight expects ``c`` input channels and the
    bias has one value per output channel."""
    out_channels, group_channels = weight.shape[:2]
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


def _row_kernels(x: Tensor) -> bool:
    """Whether the one-item-per-row kernels of ``_conv_kernels.py`` (a loop over a row's
    columns inside each item) suit ``x``'s backend: where launches are not run by
    cooperating groups of threads (the CPU), each item is one loop iteration and a row
    per item is the fast form; on a GPU it would leave most threads idle, so the strided
    tensor operations below are used instead."""
    return not backend_capability(x._backend, "work_groups")


def _padded_chwn(x: Tensor, plan: _ConvPlan) -> Tensor:
    """The zero-padded input as a (C, hp, wp, N) tensor with contiguous memory: the input
    itself when it is stored that way and needs no padding, else a copy."""
    n, c, h, w = plan.n, plan.c, plan.h, plan.w
    if not any(plan.pads) and _same_strides(x, _chwn_strides(c, h, w, n)):
        view = make_view(x, (c, h, w, n), (h * w * n, w * n, n, 1), x._offset)
        view._base = None
        return view
    if _row_kernels(x):
        from .. import _conv_kernels as kernels

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
    return _row_kernels(x) and plan.stride == (1, 1) and plan.taps // plan.groups <= DIRECT_MAX_TAPS


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
            from .. import _conv_kernels as kernels

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
        # for create_graph: x's history, without holding x (its values are in xq, which
        # is x's own memory when it needed no copy: its version is checked then)
        x_leaf = x if x.requires_grad and x._node is None else None
        xq_version = xq._storage.version
        need_b = bias is not None and bias.requires_grad

        def backward(grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
            if autograd.is_grad_enabled():  # create_graph: gradients that have a graph
                if x_leaf is not None:
                    x_again = x_leaf
                else:  # the input's values (the padded copy's interior), with its history
                    _check_unchanged(xq, xq_version)
                    x_again = plan.input_view(xq)
                    if x_edge is not None:
                        x_again._node, x_again.requires_grad = x_edge, True
                needs = (need_x, need_w, need_b)
                return _conv2d_vjp_with_graph(grad, x_again, weight, bias, plan, *needs)
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

        if direct:
            _prefetch_direct_backward(x, plan, need_x, need_w or need_b)
        saved: tuple[Tensor, ...] = (weight,) if bias is None else (weight, bias)
        if direct and xq._storage is x._storage:
            saved += (x,)  # the backward reads the input itself
        autograd.record("conv2d", (x, weight, bias), result, backward, saved)
        x_edge = result._node.edges[0] if result._node is not None else None
    return result


def _conv2d_composite(x: Tensor, weight: Tensor, bias: Tensor | None, plan: _ConvPlan) -> Tensor:
    """The convolution written with differentiable tensor operations (pad, sliding
    windows by ``unfold``, one batched matrix product), which can be differentiated
    any number of times."""
    top, bottom, left, right = plan.pads
    if any(plan.pads):
        x = _pad_constant(x, (left, right, top, bottom))
    n, c, groups, kh, kw, oh, ow = plan.n, plan.c, plan.groups, plan.kh, plan.kw, plan.oh, plan.ow
    (sh, sw), (dh, dw) = plan.stride, plan.dilation
    windows = x.unfold(2, kh, sh, dh).unfold(3, kw, sw, dw)  # (N, C, OH, OW, kh, kw)
    patches = windows.reshape(n, groups, c // groups, oh, ow, kh, kw)
    patches = patches.permute(0, 1, 3, 4, 2, 5, 6).reshape(n, groups, oh * ow, -1)
    w_groups = weight.reshape(groups, plan.out_channels // groups, -1)
    out = (patches @ w_groups.mT).permute(0, 1, 3, 2).reshape(n, plan.out_channels, oh, ow)
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


def _check_unchanged(xq: Tensor, version: int) -> None:
    if xq._storage.version != version:
        raise InplaceError(
            f"conv2d: its input (shape {format_shape((xq.shape[3], *xq.shape[:3]))}) was "
            "modified in place after the convolution, so its second-order gradients "
            "(create_graph=True) would be wrong. Use the out-of-place form of the later "
            "operation (for example `x = x + 1` instead of `x += 1`), or `.clone()` the "
            "tensor before changing it."
        )


def _conv2d_vjp_with_graph(
    grad: Tensor,
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    plan: _ConvPlan,
    need_x: bool,
    need_w: bool,
    need_b: bool,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """conv2d's gradients under ``create_graph=True`` (a gradient penalty, MAML's inner
    loop): the VJP of :func:`_conv2d_composite`, recorded, so second-order gradients
    flow to the input, the weight and the incoming gradient. Slower than the kernels,
    and only taken when a graph of the backward pass is asked for."""
    wanted = [(t, need) for t, need in ((x, need_x), (weight, need_w), (bias, need_b))]
    inputs = [t for t, need in wanted if need]
    grads = iter(
        autograd.grad(
            _conv2d_composite(x, weight, bias, plan), inputs, grad, create_graph=True,
            allow_unused=True,
        )
    )  # fmt: skip
    return tuple(next(grads) if need else None for _, need in wanted)  # type: ignore[return-value]


def _conv2d_direct_backward(
    grad_rows: Tensor,
    xq: Tensor,
    weight: Tensor,
    plan: _ConvPlan,
    need_x: bool,
    need_w: bool,
    need_b: bool,
) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    from .. import _conv_kernels as kernels

    n, c = plan.n, plan.c
    out_channels = plan.out_channels
    geometry = _direct_geometry(plan)
    grad_x = grad_w = grad_b = None
    dtype, device = grad_rows.dtype, grad_rows.device
    if need_w or need_b:
        grad_w = empty(weight.shape, dtype=dtype, device=device)
        grad_b = empty(out_channels, dtype=dtype, device=device)
        kernels.conv_weight_grad_direct(
            _flat(grad_w), grad_b, _flat(grad_rows), _flat(xq), _zero_of(dtype), *geometry,
            plan.pairs, ndrange=_weight_grad_items(plan),
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


def _direct_geometry(plan: _ConvPlan) -> tuple[int, ...]:
    """The sizes the direct gradient kernels take after their arrays."""
    groups, dh, dw = plan.groups, *plan.dilation
    return (
        plan.c // groups, plan.out_channels // groups, plan.kh, plan.kw, plan.hp, plan.wp,
        dh, dw, plan.oh, plan.n, plan.ow * plan.n,
    )  # fmt: skip


def _weight_grad_items(plan: _ConvPlan) -> int:
    return plan.channel_items * (plan.c // plan.groups) * plan.kh


def _prefetch_direct_backward(x: Tensor, plan: _ConvPlan, need_x: bool, need_wb: bool) -> None:
    """Have the direct gradient kernels this convolution's backward pass will launch
    compiled while the forward pass goes on (``Kernel.prefetch``: a compile worker on
    the CPU; nothing once they are compiled). One-element stand-ins carry the dtypes."""
    from .. import _conv_kernels as kernels

    # the forms depend on the dtype, the device and the static arguments only
    key = (x.dtype, x.device, plan.kw, plan.dilation[1], plan.pairs, need_x, need_wb)
    if _fused.asked_before(("conv2d_direct_backward", *key)):
        return

    def stand_in() -> Tensor:
        return empty(1, dtype=x.dtype, device=x.device)

    geometry = _direct_geometry(plan)
    if need_wb:
        kernels.conv_weight_grad_direct.prefetch(
            stand_in(), stand_in(), stand_in(), stand_in(), _zero_of(x.dtype), *geometry,
            plan.pairs, ndrange=_weight_grad_items(plan),
        )  # fmt: skip
    if need_x:
        kernels.conv_input_grad_direct.prefetch(
            stand_in(), stand_in(), stand_in(), *geometry, ndrange=plan.c * plan.hp
        )


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
    if _row_kernels(grad_cols):
        from .. import _conv_kernels as kernels

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
