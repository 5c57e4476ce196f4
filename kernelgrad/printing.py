"""``repr`` of tensors, in the style PyTorch users know::

tensor([[1., 2.],
        [3., 4.]], requires_grad=True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .dtypes import default_float, int64

if TYPE_CHECKING:
    from .tensor import Tensor

_MAX_ELEMENTS = 1000
_DEFAULTS = {"precision": 4, "threshold": _MAX_ELEMENTS, "edgeitems": 3, "linewidth": 80}
_PROFILES = {
    "default": _DEFAULTS,
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": 2**63 - 1, "edgeitems": 3, "linewidth": 80},
}
_OPTIONS: dict = dict(_DEFAULTS, sci_mode=None)


def set_printoptions(
    precision: int | None = None,
    threshold: int | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """How tensors print (PyTorch's ``torch.set_printoptions``): digits after the point,
    the element count above which the middle is summarised, the items shown at each edge
    then, the line width, a ``profile`` ("default", "short", "full") setting the others,
    and ``sci_mode`` (True: scientific notation, False: never, None: NumPy's choice).

    >>> import kernelgrad as kg
    >>> kg.set_printoptions(precision=2)
    >>> kg.tensor([1.23456, 2.0])
    tensor([1.23, 2.00])
    >>> kg.set_printoptions(profile="default")
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {sorted(_PROFILES)}")
        _OPTIONS.update(_PROFILES[profile])
    for name, value in (
        ("precision", precision),
        ("threshold", threshold),
        ("edgeitems", edgeitems),
        ("linewidth", linewidth),
    ):
        if value is not None:
            _OPTIONS[name] = int(value)
    _OPTIONS["sci_mode"] = sci_mode


def _fixed_width(values: np.ndarray, sci: bool) -> Any:
    """A formatter writing every element as PyTorch does in or out of scientific notation
    (``precision`` digits), right-aligned to the widest."""
    digits = _OPTIONS["precision"]
    kind = "e" if sci else "f"
    finite = values[np.isfinite(values)]
    samples = [finite.max(), finite.min()] if finite.size else []
    samples += [v for v in (np.inf, -np.inf, np.nan) if np.isin(v, values).any()]
    width = max((len(f"{v:.{digits}{kind}}") for v in samples), default=0)
    return lambda v: f"{v:.{digits}{kind}}".rjust(width)


def tensor_repr(t: Tensor) -> str:
    values = t._host_copy()
    prefix = "tensor("
    options = {
        "separator": ", ",
        "prefix": prefix,
        "threshold": _OPTIONS["threshold"],
        "edgeitems": _OPTIONS["edgeitems"],
        "max_line_width": _OPTIONS["linewidth"],
    }
    if values.dtype.kind == "f":
        # As PyTorch: integral values print as "1.", anything else with 4 decimals.
        finite = values[np.isfinite(values)]
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        options["precision"] = _OPTIONS["precision"]
        options["floatmode"] = "maxprec_equal" if integral else "fixed"
        options["suppress_small"] = True
        sci = _OPTIONS["sci_mode"]  # the user's choice, else PyTorch's rule below
        magnitudes = np.abs(finite[finite != 0])
        if sci is None and magnitudes.size:
            # scientific notation for a wide range or extreme magnitudes
            high, low = float(magnitudes.max()), float(magnitudes.min())
            if high / low > 1000.0 or high > 1e8 or (not integral and low < 1e-4):
                sci = True
        if sci is not None:
            options["formatter"] = {"float_kind": _fixed_width(values, bool(sci))}
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
