"""Rows written at integer positions, as one ``@kg.kernel`` (the same source on the CPU
and CUDA): ``max_unpool``'s output and ``embedding``'s ``max_norm`` renormalisation.
It predates advanced-index assignment on every device (``t[index] = values``,
``ops/_index_put_kernel.py``) and skips its checks: the callers' positions are already
checked. A row named twice is written twice; both callers write equal values there, so
which write lands last does not matter."""

from __future__ import annotations

import kernelgrad as kg

from .. import autograd
from ..tensor import Tensor


@kg.kernel
def _write_rows(target, rows, values, width):
    """``target[rows[r] * width + j] = values[r * width + j]``, one work item per value."""
    item = kg.index()
    r = item // width
    j = item - r * width
    target[rows[r] * width + j] = values[item]


def write_rows(target: Tensor, rows: Tensor, values: Tensor) -> None:
    """``target[rows] = values`` in place, outside autograd: ``target`` (R, W), ``rows``
    (M,) integer positions in [0, R), ``values`` (M, W) of ``target``'s dtype. The
    caller has checked the positions."""
    if not rows.numel():
        return
    width = target.shape[1]
    with autograd.no_grad():
        source = values.detach().to(target.dtype).contiguous().reshape(-1)
        positions = rows.detach().long().contiguous().reshape(-1)
        if target.is_contiguous():
            _write_rows(
                target.detach().reshape(-1), positions, source, width, ndrange=source.numel()
            )
            target._storage.version += 1  # an in-place write, as copy_'s
        else:
            dense = target.detach().contiguous()
            _write_rows(dense.reshape(-1), positions, source, width, ndrange=source.numel())
            target.copy_(dense)
