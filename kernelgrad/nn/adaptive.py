"""``AdaptiveLogSoftmaxWithLoss``: the adaptive softmax of Grave et al. (2017), PyTorch's
``nn.AdaptiveLogSoftmaxWithLoss`` with its parameter names and shapes (``head``, then
``tail.i.0`` / ``tail.i.1``), so its state dicts load unchanged.

The classes are split by ``cutoffs`` into a shortlist, predicted by the ``head`` layer
directly, and clusters of rarer classes: the head predicts the shortlist and one entry
per cluster, and cluster i's own two-layer projection (of ``in_features / div_value**(i +
1)`` hidden units) predicts the class within it. A target's log-probability is the
head's for a shortlist class, else the head's for its cluster plus the cluster's.
"""

from __future__ import annotations

import itertools
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

from ..errors import IndexValueError, ShapeError, format_shape
from ..ops.composite import nonzero
from ..ops.creation import zeros
from ..ops.elementwise import where
from ..ops.movement import cat
from ..tensor import Tensor
from . import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: ``forward(input, target)`` returns the named tuple ``(output,
    loss)``, the target's log-probability per sample and their negated mean;
    :meth:`log_prob` the log-probabilities of every class, :meth:`predict` the most
    probable class.

    >>> import kernelgrad as kg
    >>> asm = kg.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 7])
    >>> out = asm(kg.randn(5, 8), kg.tensor([0, 3, 5, 8, 9]))
    >>> out.output.shape, out.loss.shape, asm.log_prob(kg.randn(2, 8)).shape
    (kg.Size([5]), kg.Size([]), kg.Size([2, 10]))
    """

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs: Sequence[int],
        div_value: float = 4.0,
        head_bias: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an "
                "increasing order, where each value is between 1 and n_classes-1, got "
                f"{cutoffs} for n_classes={n_classes}"
            )
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                    Linear(hidden, size, bias=False, device=device, dtype=dtype),
                )
            )

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        if target_.ndim == 1:
            if input_.ndim != 2:
                raise ShapeError(
                    "AdaptiveLogSoftmaxWithLoss: a 1-d target expects a 2-d input, got input "
                    f"of shape {format_shape(input_.shape)}"
                )
            if input_.shape[0] != target_.shape[0]:
                raise ShapeError(
                    "AdaptiveLogSoftmaxWithLoss: input and target should have the same size "
                    f"in the batch dimension, got {format_shape(input_.shape)} and "
                    f"{format_shape(target_.shape)}"
                )
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise ShapeError(
                    "AdaptiveLogSoftmaxWithLoss: a 0-d target expects a 1-d input, got input "
                    f"of shape {format_shape(input_.shape)}"
                )
        else:
            raise ShapeError(
                "AdaptiveLogSoftmaxWithLoss: expected a 0-d or 1-d target, multi-target not "
                f"supported (got shape {format_shape(target_.shape)})"
            )
        batched = target_.ndim > 0
        x = input_ if batched else input_.unsqueeze(0)
        t = target_ if batched else target_.unsqueeze(0)
        batch = t.shape[0]
        output = zeros(batch, dtype=x.dtype, device=x.device)
        gather = t
        used = 0
        bounds = [0] + self.cutoffs
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            mask = (t >= low) & (t < high)
            rows = nonzero(mask).reshape(-1)
            if rows.numel() == 0:
                continue
            used += rows.numel()
            if i == 0:
                continue  # shortlist targets gather their own head entry
            cluster = self.shortlist_size + i - 1
            gather = where(mask, cluster, gather)
            relative = t.index_select(0, rows) - low
            cluster_logprob = F.log_softmax(self.tail[i - 1](x.index_select(0, rows)), dim=1)
            local = cluster_logprob.gather(1, relative.unsqueeze(1)).squeeze(1)
            output = output.index_add(0, rows, local)
        if used != batch:
            raise IndexValueError(
                f"AdaptiveLogSoftmaxWithLoss: target values should be in [0, "
                f"{self.n_classes - 1}], but values in range [{t.min().item()}, "
                f"{t.max().item()}] were found"
            )
        head_logprob = F.log_softmax(self.head(x), dim=1)
        output = output + head_logprob.gather(1, gather.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i, _ in enumerate(itertools.pairwise(self.cutoffs)):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """The log-probabilities of all ``n_classes`` classes, (N, n_classes)."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The most probable class of each sample, (N,): ``log_prob(input).argmax(1)``,
        computing the clusters only for samples whose head prediction is a cluster."""
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        outside = output >= self.shortlist_size
        if not bool(outside.any().item()):
            return output
        if bool(outside.all().item()):
            return self._get_full_log_prob(input, head_output).argmax(dim=1)
        rows = nonzero(outside).reshape(-1)
        best = self._get_full_log_prob(
            input.index_select(0, rows), head_output.index_select(0, rows)
        ).argmax(dim=1)
        return where(
            outside, zeros(output.shape, dtype=output.dtype, device=output.device), output
        ).index_add(0, rows, best)
