"""The one ``@kg.kernel`` of the ops layer: advanced-index assignment (``t[index] =
values``, ``index_put_``, ``index_copy_``, ``index_fill_``, ``masked_scatter_``).

Why a kernel here: the Backend protocol's scatter primitive is ``index_add``, which adds;
writing values at gathered positions (where a repeated position takes one of its values,
as in PyTorch) has no primitive, and a written position cannot be composed from adds
exactly (``a + (v - a)`` is not ``v`` in floating point, nor for infinities and NaN). The
same source runs on every backend. It is imported on first use, when the kernel layer is
loaded, so the ops layer does not import the kernel layer at import time.

Each work item writes one selected element. The selection's layout is
``lead + index + trail`` (``ops/indexing.py``): ``rest`` holds the storage offsets of the
basic (lead and trail) dims, ``index`` the advanced positions along the indexed dim
(raw, checked and wrapped here, when ``size > 0``) or precomputed offsets (``size == 0``).
"""

from __future__ import annotations

import kernelgrad as kg


@kg.kernel
def put_kernel(target, rest, index, size, stride, values, vstep, n_index, n_trail, flag):
    """``target[rest[l, t] + wrap(index[b]) * stride] = values[(l, b, t) * vstep]``."""
    item = kg.index()
    outer = item // n_trail
    t = item - outer * n_trail
    lead = outer // n_index
    b = outer - lead * n_index
    raw = index[b]
    i = raw
    if size > 0 and i < 0:
        i += size
    if size > 0 and (i < 0 or i >= size):
        flag[0] = raw
        flag[1] = 1
    else:
        target[rest[lead * n_trail + t] + i * stride] = values[item * vstep]
