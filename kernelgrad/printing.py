"""``repr`` of tensors, in the style PyTorch users know::

tensor([[1., 2.],
        [3., 4.]], requires_grad=True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .dtypes import default_float, int64

if TYPE_CHECKING:
    from .tensor import Tensor

_MAX_ELEMENTS = 1000


def tensor_repr(t: Tensor) -> str:
    values = t._host_copy()
    prefix = "tensor("
    options = {"separator": ", ", "prefix": prefix, "threshold": _MAX_ELEMENTS, "edgeitems": 3}
    if values.dtype.kind == "f":
        # As PyTorch: integral values print as "1.", anything else with 4 decimals.
        finite = values[np.isfinite(values)]
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        options["precision"] = 4
        options["floatmode"] = "maxprec_equal" if integral else "fixed"
        options["suppress_small"] = True
    if values.size == 0:
        body = f"[], size={t.shape}" if t.ndim > 1 else "[]"
    elif values.ndim == 0:
        body = np.array2string(values.reshape(1), **options)[1:-1]
    else:
        body = np.array2string(values, **options)
    suffix = []
    if t.device.type != "cpu":
        suffix.append(f"device='{t.device}'")
    if t.dtype is not default_float() and t.dtype is not int64 and t.dtype.name != "bool":
        suffix.append(f"dtype={t.dtype!r}")
    if t._node is not None:
        suffix.append(f"grad_fn=<{t._node.name}Backward>")
    elif t.requires_grad:
        suffix.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffix) + ")"
