"""``nn.FractionalMaxPool2d`` and ``nn.FractionalMaxPool3d``: fractional max pooling as
modules, with PyTorch's arguments and checks (``functional/fractional_pool.py``)."""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError
from ..tensor import Tensor
from .functional.fractional_pool import fractional_max_pool_with_indices
from .module import Module


def _expand(value: Any, n: int) -> Any:
    if value is None:
        return None
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _FractionalMaxPool(Module):
    n_dims = 2

    def __init__(
        self,
        kernel_size: Any,
        output_size: Any = None,
        output_ratio: Any = None,
        return_indices: bool = False,
        _random_samples: Tensor | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _expand(kernel_size, self.n_dims)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _expand(output_size, self.n_dims)
        self.output_ratio = _expand(output_ratio, self.n_dims)
        if output_size is None and output_ratio is None:
            raise ArgumentError(
                f"{name} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ArgumentError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ArgumentError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor) -> Any:
        values, indices = fractional_max_pool_with_indices(
            input, self.n_dims, self.kernel_size, self.output_size, self.output_ratio,
            self._random_samples,
        )  # fmt: skip
        return (values, indices) if self.return_indices else values


class FractionalMaxPool2d(_FractionalMaxPool):
    """2-d fractional max pooling (``F.fractional_max_pool2d``): ``kernel_size`` windows
    at pseudo-random steps that give ``output_size`` (or ``output_ratio`` times the input
    size). ``_random_samples`` (a buffer when given) fixes the steps.

    >>> import kernelgrad as kg
    >>> kg.nn.FractionalMaxPool2d(3, output_ratio=0.5)(kg.randn(2, 4, 10, 8)).shape
    kg.Size([2, 4, 5, 4])
    """

    n_dims = 2


class FractionalMaxPool3d(_FractionalMaxPool):
    """3-d fractional max pooling (``F.fractional_max_pool3d``) of (N, C, T, H, W) or
    (C, T, H, W) input."""

    n_dims = 3
