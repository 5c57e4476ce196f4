"""Loss modules of PyTorch's remaining surface: ``MultiLabelMarginLoss``,
``TripletMarginWithDistanceLoss``, ``LinearCrossEntropyLoss`` and the deprecated
``NLLLoss2d`` (``NLLLoss`` already takes (N, C, H, W) input)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError, ShapeError, format_shape
from ..tensor import Tensor
from . import functional as F
from .functional.loss import legacy_reduction
from .linear import Linear
from .loss import NLLLoss, PairwiseDistance
from .module import Module

__all__ = [
    "MultiLabelMarginLoss",
    "TripletMarginWithDistanceLoss",
    "LinearCrossEntropyLoss",
    "NLLLoss2d",
    "LinearCrossEntropyOptions",
]


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """PyTorch 2.13's chunking settings of ``linear_cross_entropy`` (same fields and
    defaults), accepted so that programs that pass them run: kernelgrad always makes
    the logits whole, which gives the same values, so the settings change nothing.

    >>> import kernelgrad as kg
    >>> kg.nn.LinearCrossEntropyOptions(batch_chunk_size=64).batch_chunk_size
    64
    """

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str = "auto"
    acc_policy: str = "auto"
    acc_dtype: Any = None


class MultiLabelMarginLoss(Module):
    """``F.multilabel_margin_loss`` as a module: multi-label hinge loss against lists of
    class indices ended by -1.

    >>> import kernelgrad as kg
    >>> loss = kg.nn.MultiLabelMarginLoss()
    >>> round(loss(kg.tensor([[0.1, 0.2, 0.4, 0.8]]), kg.tensor([[3, 0, -1, 1]])).item(), 4)
    0.85
    """

    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"):
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class TripletMarginWithDistanceLoss(Module):
    """``F.triplet_margin_with_distance_loss`` as a module; the default distance is a
    ``PairwiseDistance()`` sub-module, as in PyTorch.

    >>> import kernelgrad as kg
    >>> loss = kg.nn.TripletMarginWithDistanceLoss(margin=0.5)
    >>> a = kg.zeros(2, 3)
    >>> loss(a, a, a + 1).item()
    0.0
    """

    def __init__(
        self,
        *,
        distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
        margin: float = 1.0,
        swap: bool = False,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        if margin <= 0:
            raise ValueError(
                f"TripletMarginWithDistanceLoss: margin must be greater than 0, got {margin}"
            )
        self.distance_function = (
            distance_function if distance_function is not None else PairwiseDistance()
        )
        self.margin = margin
        self.swap = swap
        self.reduction = reduction

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction,
        )  # fmt: skip


class LinearCrossEntropyLoss(Module):
    """A ``Linear`` layer (no bias by default) followed by cross entropy, PyTorch 2.13's
    ``nn.LinearCrossEntropyLoss``: the weight is held as ``linear.weight`` of shape
    (num_classes * prod(out_features), in_features), so PyTorch's state dicts load.
    ``options`` is accepted and ignored (see ``F.linear_cross_entropy``).

    >>> import kernelgrad as kg
    >>> loss = kg.nn.LinearCrossEntropyLoss(4, 3)
    >>> [name for name, _ in loss.named_parameters()], loss(kg.ones(2, 4), kg.tensor([0, 2])).shape
    (['linear.weight'], kg.Size([]))
    """

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple[int, ...] = (),
        bias: bool = False,
        device: Any = None,
        dtype: Any = None,
        reduction: str = "mean",
        weight: Tensor | None = None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options: Any = None,
    ) -> None:
        if weight is not None and weight.shape != (num_classes,):
            raise ShapeError(
                f"LinearCrossEntropyLoss: expected weight of shape ({num_classes},), got "
                f"{format_shape(weight.shape)}"
            )
        if not 0.0 <= label_smoothing <= 1.0:
            raise ArgumentError(
                f"LinearCrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}"
            )
        super().__init__()
        self.register_buffer("weight", weight)
        self.reduction = reduction
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.linear = Linear(
            in_features,
            math.prod(self.out_features) * num_classes,
            bias=bias,
            device=device,
            dtype=dtype,
        )
        self.options = options

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        shape = (self.num_classes, *self.out_features)
        return F.linear_cross_entropy(
            input,
            self.linear.weight.reshape(*shape, self.linear.in_features),
            target,
            linear_bias=None if self.linear.bias is None else self.linear.bias.reshape(shape),
            weight=self.weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            options=self.options,
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
            f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated ``nn.NLLLoss2d`` (with its warning): ``NLLLoss``, which takes
    (N, C, H, W) log-probabilities and (N, H, W) targets itself. PyTorch's argument order
    (``weight, size_average, ignore_index, reduce, reduction``)."""

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        warnings.warn(
            "NLLLoss2d has been deprecated. Please use NLLLoss instead as a drop-in "
            "replacement and see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for "
            "more details.",
            stacklevel=2,
        )
        super().__init__(
            weight=weight,
            ignore_index=ignore_index,
            reduction=legacy_reduction(size_average, reduce, reduction),
        )
