"""``Linear``, ``Bilinear``, ``LazyLinear``, ``Identity``, ``Flatten`` and ``Unflatten``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ops.creation import empty
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module, Parameter

__all__ = ["Identity", "Linear", "Bilinear", "LazyLinear", "Flatten", "Unflatten"]


class Identity(Module):
    """Returns its input unchanged (a placeholder, e.g. for a removed layer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` (out_features, in_features).

    Initialised as in PyTorch: weight and bias uniform in +-1/sqrt(in_features). Zero
    features are allowed, as in PyTorch: ``Linear(0, n)`` warns that initialising its
    empty weight does nothing and returns its bias, zero.

    >>> import kernelgrad as kg
    >>> layer = kg.nn.Linear(3, 2)
    >>> layer.weight.shape, layer(kg.ones(5, 3)).shape
    (kg.Size([2, 3]), kg.Size([5, 2]))
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = Parameter(empty(out_features, device=device, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.default_linear_init_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Bilinear(Module):
    """``y = x1^T A x2 + b`` for each output feature: ``weight`` (out_features,
    in1_features, in2_features) and ``bias`` (out_features,), both initialised uniform in
    +-1/sqrt(in1_features) as PyTorch.

    >>> import kernelgrad as kg
    >>> layer = kg.nn.Bilinear(3, 4, 2)
    >>> layer.weight.shape, layer(kg.ones(5, 3), kg.ones(5, 4)).shape
    (kg.Size([2, 3, 4]), kg.Size([5, 2]))
    """

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(
            empty(out_features, in1_features, in2_features, device=device, dtype=dtype)
        )
        self.bias = Parameter(empty(out_features, device=device, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class LazyLinear(Linear):
    """A ``Linear`` whose ``in_features`` is taken from the last dim of its first input
    (or from the weight of a state dict loaded before that); it then becomes a plain
    ``Linear``, initialised as PyTorch, on the input's device and in its floating point
    dtype. Until then its weight and bias are ``UninitializedParameter`` placeholders
    (what ``state_dict()`` lists, as PyTorch's), which keep their identity when filled
    (an optimizer may be built before the first call).

    >>> import kernelgrad as kg
    >>> layer = kg.nn.LazyLinear(2)
    >>> layer(kg.ones(5, 3)).shape, layer.weight.shape, type(layer).__name__
    (kg.Size([5, 2]), kg.Size([2, 3]), 'Linear')
    """

    def __init__(
        self, out_features: int, bias: bool = True, device: Any = None, dtype: Any = None
    ) -> None:
        from .lazy import UninitializedParameter

        Module.__init__(self)
        self.in_features = 0
        self.out_features = out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.bias = UninitializedParameter(device=device, dtype=dtype) if bias else None

    def reset_parameters(self) -> None:
        if self.in_features:
            super().reset_parameters()

    def has_uninitialized_params(self) -> bool:
        """True until the first input (or a loaded state dict) gave ``in_features``."""
        return True  # the layer becomes a Linear when they are filled

    def _materialise(self, in_features: int, input: Tensor | None = None) -> None:
        """Give the placeholders their shapes (in place, on the input's device and in its
        floating point dtype) and become a ``Linear``."""
        self.in_features = in_features
        device = None if input is None else input.device
        dtype = None if input is None or not input.dtype.is_floating_point else input.dtype
        self.weight.materialize((self.out_features, in_features), device, dtype)
        if self.bias is not None:
            self.bias.materialize((self.out_features,), device, dtype)
        object.__setattr__(self, "__class__", Linear)
        self.reset_parameters()

    def _materialise_from_state_dict(self, state_dict: Any, prefix: str) -> None:
        """Called by ``load_state_dict``: take ``in_features`` from the saved weight."""
        weight = state_dict.get(prefix + "weight")
        if weight is not None:
            shape = tuple(weight.shape) if hasattr(weight, "shape") else tuple(np.shape(weight))
            if len(shape) == 2:
                self._materialise(shape[1])

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim == 0:
            return F.linear(input, self.weight, self.bias)  # its shape error
        self._materialise(input.shape[-1], input)
        return self.forward(input)

    def extra_repr(self) -> str:
        return f"in_features=0, out_features={self.out_features}, bias={self.bias is not None}"


class Flatten(Module):
    """Flatten dims ``start_dim`` to ``end_dim`` into one (by default all but the batch).

    >>> import kernelgrad as kg
    >>> kg.nn.Flatten()(kg.zeros(2, 3, 4)).shape
    kg.Size([2, 12])
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
