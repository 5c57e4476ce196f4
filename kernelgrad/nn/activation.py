"""Activation layers: ``ReLU``, ``GELU``, ``Sigmoid``, ``Tanh``, ``SiLU``, ``LeakyReLU``,
``Softplus``, ``Softmax``, ``Softmax2d``, ``LogSoftmax`` and the rest of PyTorch's
(``ELU``, ``SELU``, ``CELU``, ``Hardtanh``, ``ReLU6``, ``Hardsigmoid``, ``Hardswish``,
``LogSigmoid``, ``Mish``, ``Softsign``, ``Tanhshrink``, ``Threshold``, ``Hardshrink``,
``Softshrink``, ``Softmin``, ``GLU``, ``RReLU``, ``PReLU``)."""

from __future__ import annotations

from typing import Any

from ..errors import ShapeError, format_shape
from ..tensor import Tensor
from . import functional as F
from .module import Module

__all__ = [
    "ReLU",
    "GELU",
    "Sigmoid",
    "Tanh",
    "SiLU",
    "LeakyReLU",
    "Softplus",
    "Softmax",
    "Softmax2d",
    "LogSoftmax",
    "ELU",
    "CELU",
    "SELU",
    "Hardtanh",
    "ReLU6",
    "Hardsigmoid",
    "Hardswish",
    "LogSigmoid",
    "Mish",
    "Softsign",
    "Tanhshrink",
    "Threshold",
    "Hardshrink",
    "Softshrink",
    "Softmin",
    "GLU",
    "RReLU",
    "PReLU",
]


class ReLU(Module):
    """max(x, 0). ``inplace=True`` writes the result into the input, as PyTorch does.

    >>> import kernelgrad as kg
    >>> kg.nn.ReLU()(kg.tensor([-1.0, 1.0])).tolist()
    [0.0, 1.0]
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """x * Phi(x); ``approximate="tanh"`` for the tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, input: Tensor) -> Tensor:
        return input.sigmoid()


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:
        return input.tanh()


class SiLU(Module):
    """x * sigmoid(x)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """x where x > 0, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}{_inplace_repr(self.inplace)}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    """Softmax along ``dim``.

    >>> import kernelgrad as kg
    >>> kg.nn.Softmax(dim=-1)(kg.zeros(1, 4)).tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return input.softmax(self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of an (N, C, H, W) or (C, H, W) input, at each
    spatial position.

    >>> import kernelgrad as kg
    >>> kg.nn.Softmax2d()(kg.zeros(1, 2, 1, 1)).reshape(-1).tolist()
    [0.5, 0.5]
    """

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ShapeError(
                f"Softmax2d: expected a 4-d (N, C, H, W) or 3-d (C, H, W) input, got shape "
                f"{format_shape(input.shape)}"
            )
        return input.softmax(-3)


class LogSoftmax(Module):
    """log(softmax(x)) along ``dim``, computed stably."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return input.log_softmax(self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


def _inplace_repr(inplace: bool) -> str:
    """The ``, inplace=True`` PyTorch's activation reprs end with (nothing when False)."""
    return ", inplace=True" if inplace else ""


class _Pointwise(Module):
    """An activation that calls ``F.<function>(input, **options)``; the options are
    attributes of the module (``ELU().alpha``), as in PyTorch. ``inplace`` (None for the
    activations without it) is passed on too, and shown in the repr when True unless
    ``_repr_inplace`` is False (PyTorch's Hardsigmoid and Hardswish leave it out)."""

    function = ""
    _repr_inplace = True
    _repr_names = True  # False: the options' values only (PyTorch's ``Hardshrink(0.5)``)

    def __init__(self, inplace: bool | None = None, **options: Any) -> None:
        super().__init__()
        self._option_names = tuple(options)
        for name, value in options.items():
            setattr(self, name, value)
        if inplace is not None:
            self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        options = {name: getattr(self, name) for name in self._option_names}
        if hasattr(self, "inplace"):
            options["inplace"] = self.inplace
        return getattr(F, self.function)(input, **options)

    def extra_repr(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)}" if self._repr_names else f"{getattr(self, name)}"
            for name in self._option_names
        )
        if self._repr_inplace and getattr(self, "inplace", False):
            return f"{shown}, inplace=True" if shown else "inplace=True"
        return shown


class ELU(_Pointwise):
    """x where x > 0, else ``alpha * (exp(x) - 1)``.

    >>> import kernelgrad as kg
    >>> [round(v, 4) for v in kg.nn.ELU()(kg.tensor([-1.0, 1.0])).tolist()]
    [-0.6321, 1.0]
    """

    function = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace, alpha=alpha)


class CELU(_Pointwise):
    """x where x > 0, else ``alpha * (exp(x / alpha) - 1)``."""

    function = "celu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace, alpha=alpha)


class SELU(_Pointwise):
    """The self-normalising ELU (``scale * elu(x, alpha)``)."""

    function = "selu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace)


class Hardtanh(_Pointwise):
    """x clamped to [min_val, max_val]."""

    function = "hardtanh"

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace, min_val=min_val, max_val=max_val)


class ReLU6(_Pointwise):
    """min(max(x, 0), 6)."""

    function = "relu6"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace)


class Hardsigmoid(_Pointwise):
    """0 below -3, 1 above 3, ``x / 6 + 1/2`` between."""

    function = "hardsigmoid"
    _repr_inplace = False

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace)


class Hardswish(_Pointwise):
    """``x * hardsigmoid(x)``."""

    function = "hardswish"
    _repr_inplace = False

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace)


class LogSigmoid(_Pointwise):
    """log(sigmoid(x)), computed stably."""

    function = "logsigmoid"


class Mish(_Pointwise):
    """``x * tanh(softplus(x))``."""

    function = "mish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace)


class Softsign(_Pointwise):
    """``x / (1 + |x|)``."""

    function = "softsign"


class Tanhshrink(_Pointwise):
    """``x - tanh(x)``."""

    function = "tanhshrink"


class Threshold(_Pointwise):
    """x where x > threshold, else ``value``."""

    function = "threshold"

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__(inplace, threshold=threshold, value=value)


class Hardshrink(_Pointwise):
    """x where |x| > lambd, else 0."""

    function = "hardshrink"
    _repr_names = False

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__(lambd=lambd)


class Softshrink(_Pointwise):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""

    function = "softshrink"
    _repr_names = False

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__(lambd=lambd)


class Softmin(_Pointwise):
    """``softmax(-x)`` along ``dim``."""

    function = "softmin"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class GLU(_Pointwise):
    """Gated linear unit: halves a, b of the input along ``dim``, ``a * sigmoid(b)``."""

    function = "glu"

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim=dim)


class RReLU(Module):
    """Randomised leaky ReLU: random slopes in [lower, upper] in training, their mean in
    evaluation."""

    def __init__(
        self, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0, inplace: bool = False
    ) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{_inplace_repr(self.inplace)}"


class PReLU(Module):
    """Leaky ReLU with a learned slope: one (``num_parameters=1``) or one per channel,
    initialised to ``init`` (parameter ``weight``, as in PyTorch).

    >>> import kernelgrad as kg
    >>> kg.nn.PReLU()(kg.tensor([-2.0, 3.0])).tolist()
    [-0.5, 3.0]
    """

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None
    ) -> None:
        super().__init__()
        from ..ops.creation import full
        from .module import Parameter

        self.num_parameters = num_parameters
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype, device=device))

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
