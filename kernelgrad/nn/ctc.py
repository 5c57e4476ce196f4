"""``nn.CTCLoss``: the connectionist temporal classification loss as a module."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .functional.ctc import ctc_loss
from .module import Module


class CTCLoss(Module):
    """``F.ctc_loss`` as a module, with PyTorch's arguments (``blank``, ``reduction``,
    ``zero_infinity``).

    >>> import kernelgrad as kg
    >>> log_probs = kg.randn(6, 2, 4).log_softmax(2)
    >>> loss = kg.nn.CTCLoss()(log_probs, kg.tensor([[1, 2], [3, 3]]), [6, 5], [2, 2])
    >>> loss.shape
    kg.Size([])
    """

    def __init__(
        self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False
    ) -> None:
        super().__init__()
        self.blank = blank
        self.reduction = reduction
        self.zero_infinity = zero_infinity

    def forward(
        self, log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any
    ) -> Tensor:
        return ctc_loss(
            log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
            self.zero_infinity,
        )  # fmt: skip
