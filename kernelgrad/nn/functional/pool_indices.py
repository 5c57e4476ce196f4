"""``max_pool2d(..., return_indices=True)``: the pooled values (computed by
``max_pool2d`` itself, with its gradient) and, for each window, the flat position
``row * W + col`` of its maximum in the input plane, as PyTorch returns them.

The positions come from the windows' taps stacked on a last dim (strided views of the
input padded with -inf), ``argmax`` over them (the first maximum, as the values'
gradient picks), and a table of each tap's input position that depends only on the
shapes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import autograd
from ...ops.creation import tensor as tensor_from
from ...ops.indexing import gather
from ...ops.movement import pad as _pad_constant
from ...ops.movement import stack
from ...tensor import Tensor
from ._layout import _batched, _pair, _window_view


def max_pool2d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> tuple[Tensor, Tensor]:
    """(values, int64 indices) of 2-d max pooling; see the module docstring."""
    from .pooling import max_pool2d

    values = max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)
    x, unbatched = _batched(input, "max_pool2d", 4)
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(stride if stride is not None else kernel_size, "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    out_h, out_w = values.shape[-2:]
    height, width = x.shape[2], x.shape[3]
    with autograd.no_grad():
        # -inf padding, and more at the bottom/right for ceil_mode's partial windows
        below = max(0, (out_h - 1) * sh + (kh - 1) * dh + 1 - (height + 2 * ph))
        right = max(0, (out_w - 1) * sw + (kw - 1) * dw + 1 - (width + 2 * pw))
        padded = _pad_constant(x.detach(), (pw, pw + right, ph, ph + below), -math.inf)
        taps = [
            _window_view(padded, (out_h, out_w), (sh, sw), (i, j), (dh, dw))
            for i in range(kh)
            for j in range(kw)
        ]
        winner = stack(taps, -1).argmax(-1, keepdim=True)  # (N, C, OH, OW, 1)
        rows = np.arange(out_h)[:, None, None] * sh - ph + np.repeat(np.arange(kh) * dh, kw)
        cols = np.arange(out_w)[None, :, None] * sw - pw + np.tile(np.arange(kw) * dw, kh)
        table = tensor_from((rows * width + cols).astype(np.int64), device=x.device)
        indices = gather(table.expand(*winner.shape[:-1], kh * kw), -1, winner).squeeze(-1)
    return values, indices.squeeze(0) if unbatched else indices
