"""Loss modules: thin wrappers of the functions in ``kg.nn.functional``."""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError, ShapeError, format_shape
from ..tensor import Tensor
from . import functional as F
from .functional.loss import legacy_reduction
from .module import Module

__all__ = [
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "SmoothL1Loss",
    "HuberLoss",
    "KLDivLoss",
    "CosineEmbeddingLoss",
    "MarginRankingLoss",
    "HingeEmbeddingLoss",
    "TripletMarginLoss",
    "SoftMarginLoss",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "GaussianNLLLoss",
    "PoissonNLLLoss",
    "CosineSimilarity",
    "PairwiseDistance",
]


class CrossEntropyLoss(Module):
    """``F.cross_entropy`` as a module (logits and class indices or probabilities).

    >>> import kernelgrad as kg
    >>> loss = kg.nn.CrossEntropyLoss()(kg.zeros(4, 10), kg.tensor([1, 2, 3, 4]))
    >>> round(loss.item(), 4)
    2.3026
    """

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.reduction = legacy_reduction(size_average, reduce, reduction)
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(
            input, target, self.weight, ignore_index=self.ignore_index,
            reduction=self.reduction, label_smoothing=self.label_smoothing,
        )  # fmt: skip


class NLLLoss(Module):
    """``F.nll_loss`` as a module (log-probabilities and class indices)."""

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average: Any = None,
        ignore_index: int = -100,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(
            input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction
        )


class MSELoss(Module):
    """Mean squared error."""

    def __init__(
        self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
    ) -> None:
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(Module):
    """Mean absolute error."""

    def __init__(
        self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
    ) -> None:
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class BCELoss(Module):
    """Binary cross-entropy of probabilities."""

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(Module):
    """Binary cross-entropy of logits (stable)."""

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        pos_weight: Tensor | None = None,
    ) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


class SmoothL1Loss(Module):
    """``F.smooth_l1_loss`` as a module.

    >>> import kernelgrad as kg
    >>> kg.nn.SmoothL1Loss()(kg.tensor([0.5, 3.0]), kg.zeros(2)).item()
    1.3125
    """

    def __init__(
        self,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        beta: float = 1.0,
    ) -> None:
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(Module):
    """``F.huber_loss`` as a module."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__()
        self.reduction = reduction
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(Module):
    """``F.kl_div`` as a module: ``input`` holds log-probabilities; ``reduction`` may be
    ``"batchmean"`` (the KL divergence's definition).

    >>> import kernelgrad as kg
    >>> loss = kg.nn.KLDivLoss(reduction="batchmean")
    >>> loss(kg.tensor([[0.5, 0.5]]).log(), kg.tensor([[0.5, 0.5]])).item()
    0.0
    """

    def __init__(
        self,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
        log_target: bool = False,
    ) -> None:
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class _MarginLoss(Module):
    def __init__(
        self,
        margin: float = 0.0,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.margin = margin
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, reduction={self.reduction!r}"


class CosineEmbeddingLoss(_MarginLoss):
    """``F.cosine_embedding_loss`` as a module: pulls pairs with target 1 together,
    pushes pairs with target -1 apart (below cosine ``margin``)."""

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(
            input1, input2, target, margin=self.margin, reduction=self.reduction
        )


class MarginRankingLoss(_MarginLoss):
    """``F.margin_ranking_loss`` as a module: ``max(0, -target * (x1 - x2) + margin)``.

    >>> import kernelgrad as kg
    >>> loss = kg.nn.MarginRankingLoss(margin=1.0)
    >>> loss(kg.tensor([2.0]), kg.tensor([0.0]), kg.tensor([1.0])).item()
    0.0
    """

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(
            input1, input2, target, margin=self.margin, reduction=self.reduction
        )


class HingeEmbeddingLoss(_MarginLoss):
    """``F.hinge_embedding_loss`` as a module (``margin`` defaults to 1)."""

    def __init__(
        self,
        margin: float = 1.0,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class TripletMarginLoss(Module):
    """``F.triplet_margin_loss`` as a module: the anchor should be nearer the positive
    than the negative, by ``margin`` (p-norm distance)."""

    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        if margin <= 0:
            raise ArgumentError(f"TripletMarginLoss: margin must be greater than 0, got {margin}")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(
            anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
            swap=self.swap, reduction=self.reduction,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"margin={self.margin}, p={self.p}, eps={self.eps}, swap={self.swap}"


class SoftMarginLoss(Module):
    """``F.soft_margin_loss`` as a module: ``log(1 + exp(-target * input))``."""

    def __init__(
        self, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
    ) -> None:
        super().__init__()
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(Module):
    """``F.multilabel_soft_margin_loss`` as a module (one-versus-all logistic loss)."""

    def __init__(
        self,
        weight: Tensor | None = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(
            input, target, weight=self.weight, reduction=self.reduction
        )


class MultiMarginLoss(Module):
    """``F.multi_margin_loss`` as a module (multi-class hinge loss, ``p`` 1 or 2)."""

    def __init__(
        self,
        p: int = 1,
        margin: float = 1.0,
        weight: Tensor | None = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        if p not in (1, 2):
            raise ArgumentError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p}")
        if weight is not None and weight.ndim != 1:
            raise ShapeError(
                "MultiMarginLoss: weight must be 1-d (one weight per class), got shape "
                f"{format_shape(weight.shape)}"
            )
        self.p = p
        self.margin = margin
        self.register_buffer("weight", weight)
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(
            input, target, p=self.p, margin=self.margin, weight=self.weight,
            reduction=self.reduction,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return f"p={self.p}, margin={self.margin}"


class GaussianNLLLoss(Module):
    """``F.gaussian_nll_loss`` as a module; called as ``loss(input, target, var)``.

    >>> import kernelgrad as kg
    >>> kg.nn.GaussianNLLLoss()(kg.tensor([1.0]), kg.tensor([1.0]), kg.tensor([1.0])).item()
    0.0
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__()
        self.full = full
        self.eps = eps
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:
        return F.gaussian_nll_loss(
            input, target, var, full=self.full, eps=self.eps, reduction=self.reduction
        )


class PoissonNLLLoss(Module):
    """``F.poisson_nll_loss`` as a module (``input`` is the log-rate by default)."""

    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        size_average: Any = None,
        eps: float = 1e-8,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__()
        self.log_input = log_input
        self.full = full
        self.eps = eps
        self.reduction = legacy_reduction(size_average, reduce, reduction)

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(
            log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
            reduction=self.reduction,
        )  # fmt: skip


class CosineSimilarity(Module):
    """``F.cosine_similarity`` along ``dim`` as a module.

    >>> import kernelgrad as kg
    >>> kg.nn.CosineSimilarity(dim=0)(kg.tensor([1.0, 0.0]), kg.tensor([3.0, 0.0])).item()
    1.0
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``F.pairwise_distance`` as a module: the p-norm of ``x1 - x2 + eps`` over the last
    dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
