"""Activation layers: ``ReLU``, ``GELU``, ``Sigmoid``, ``Tanh``, ``SiLU``, ``LeakyReLU``,
``Softplus``, ``Softmax`` and ``LogSoftmax``."""

from __future__ import annotations

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
    "LogSoftmax",
]


class ReLU(Module):
    """max(x, 0). ``inplace=True`` is accepted for compatibility and computes the same
    values (out of place when autograd needs the input).

    >>> import kernelgrad as kg
    >>> kg.nn.ReLU()(kg.tensor([-1.0, 1.0])).tolist()
    [0.0, 1.0]
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input)

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
        return f"approximate={self.approximate!r}" if self.approximate != "none" else ""


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

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input)


class LeakyReLU(Module):
    """x where x > 0, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)


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


class LogSoftmax(Module):
    """log(softmax(x)) along ``dim``, computed stably."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return input.log_softmax(self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
