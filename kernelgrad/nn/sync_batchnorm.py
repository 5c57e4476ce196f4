"""``SyncBatchNorm``: batch normalisation whose statistics span every rank of the
data-parallel group.

In training mode, with ``kg.distributed`` initialised and more than one rank, each rank
computes its count, per-channel mean and sum of squared deviations (M2), the ranks
exchange them in one all-reduce of a (world, 2C + 1) table in which each rank fills its
own row (an all-gather), and every rank combines the rows the same way (Chan's parallel
variance: ``M2 = sum M2_r + n_r * (mean_r - mean)**2``, no cancellation of large sums).
The all-reduce is differentiable: its backward all-reduces the gradient of the table, so
backward exchanges the gradient terms of the statistics, as PyTorch's does (its sum of
dy and of dy * (x - mean)). N ranks on N shards so give the outputs, input gradients and
(summed over ranks) parameter gradients of one ``BatchNorm`` on the whole batch.

Otherwise (one process, no group, eval mode) it is ``BatchNorm``.
"""

from __future__ import annotations

from typing import Any

from .. import autograd
from ..autograd_function import Function
from ..errors import ArgumentError, ShapeError, UnsupportedError, format_shape
from ..ops.creation import tensor
from ..ops.movement import cat, stack
from ..tensor import Tensor
from .normalization import _BatchNorm, _InstanceNorm

__all__ = ["SyncBatchNorm"]


class _AllReduceSum(Function):
    """``all_reduce(x, "sum")`` as a differentiable function (on a copy): every rank's
    output is the sum of every rank's input, so the gradient of rank r's input is the sum
    of every rank's output gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        from ..distributed import all_reduce

        total = x.contiguous().clone()
        all_reduce(total, "sum")
        return total

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        from ..distributed import all_reduce

        total = grad.contiguous().clone()
        all_reduce(total, "sum")
        return total


def _group_of_several(process_group: Any) -> Any:
    """The process group to synchronise over, or None when there is nothing to
    synchronise (no group, or a group of one)."""
    from ..distributed import get_group, is_initialized

    if not is_initialized():
        if process_group is not None:
            raise UnsupportedError(
                "SyncBatchNorm was given a process_group but kg.distributed has no group; "
                "call kg.distributed.init_process_group() first"
            )
        return None
    group = get_group()
    if process_group is not None and process_group is not group:
        raise UnsupportedError(
            "SyncBatchNorm: kg.distributed has one process group (all ranks); pass "
            "process_group=None or kg.distributed.get_group()"
        )
    return group if group.size > 1 else None


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation over the batch of every rank together (PyTorch's
    ``nn.SyncBatchNorm``): a ``BatchNorm`` whose training-mode statistics (and their
    gradients) are all-reduced across ``kg.distributed``'s ranks. Alone, in eval mode or
    without a process group it is ``BatchNorm``. Any (N, C, ...) input with at least 2
    dims. :meth:`convert_sync_batchnorm` replaces a model's ``BatchNorm*d`` layers.

    >>> import kernelgrad as kg
    >>> bn = kg.nn.SyncBatchNorm(3)
    >>> bn(kg.randn(4, 3, 2)).shape  # no process group: BatchNorm
    kg.Size([4, 3, 2])
    >>> model = kg.nn.SyncBatchNorm.convert_sync_batchnorm(
    ...     kg.nn.Sequential(kg.nn.Conv2d(1, 2, 3), kg.nn.BatchNorm2d(2)))
    >>> type(model[1]).__name__
    'SyncBatchNorm'
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: Any = None,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )
        self.process_group = process_group

    def _check_input(self, input: Tensor) -> None:
        if input.ndim < 2:
            raise ShapeError(
                f"SyncBatchNorm expected at least 2D input (got {input.ndim}D input of shape "
                f"{format_shape(input.shape)})"
            )
        if input.shape[1] != self.num_features:
            raise ArgumentError(
                f"SyncBatchNorm({self.num_features}) got an input with {input.shape[1]} "
                f"channels (shape {format_shape(input.shape)})"
            )

    def forward(self, input: Tensor) -> Tensor:
        group = _group_of_several(self.process_group) if self.training else None
        if group is None:
            return super().forward(input)
        self._check_input(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats:
            with autograd.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        return self._synchronised(input, group, momentum)

    def _synchronised(self, input: Tensor, group: Any, momentum: float) -> Tensor:
        channels = input.shape[1]
        dims = (0,) + tuple(range(2, input.ndim))
        shape = (1, channels) + (1,) * (input.ndim - 2)
        count = input.numel() // channels
        # this rank's count, mean and M2 (zeros for an empty shard, which still joins)
        mean = input.sum(dims) / max(count, 1)
        centered = input - mean.reshape(shape)
        m2 = (centered * centered).sum(dims)
        row = cat([mean, m2, tensor([float(count)], dtype=input.dtype, device=input.device)])
        rows = [row if r == group.rank else row.detach() * 0.0 for r in range(group.size)]
        table = _AllReduceSum.apply(stack(rows))  # (world, 2C + 1): an all-gather
        means, m2s, counts = table[:, :channels], table[:, channels:-1], table[:, -1:]
        total = round(float(counts.sum().item()))
        if total <= 1:
            raise ArgumentError(
                f"SyncBatchNorm: expected more than 1 value per channel over all ranks when "
                f"training, got {total} (this rank's input has shape "
                f"{format_shape(input.shape)})"
            )
        global_mean = (means * counts).sum(0) / total
        spread = means - global_mean
        var = (m2s + counts * spread * spread).sum(0) / total
        if self.track_running_stats:
            with autograd.no_grad():
                self.running_mean.mul_(1.0 - momentum).add_(global_mean.detach() * momentum)
                unbiased = var.detach() * (total / (total - 1))
                self.running_var.mul_(1.0 - momentum).add_(unbiased * momentum)
        result = (input - global_mean.reshape(shape)) * (var + self.eps).rsqrt().reshape(shape)
        if self.weight is not None:
            result = result * self.weight.reshape(shape)
        if self.bias is not None:
            result = result + self.bias.reshape(shape)
        return result

    @classmethod
    def convert_sync_batchnorm(cls, module: Any, process_group: Any = None) -> Any:
        """``module`` with every ``BatchNorm1d/2d/3d`` in it (itself included) replaced by
        a ``SyncBatchNorm`` that holds the same parameters and running statistics (the
        same tensors) and training flag. Instance norms are left alone, as in PyTorch.

        >>> import kernelgrad as kg
        >>> bn = kg.nn.BatchNorm1d(4)
        >>> sync = kg.nn.SyncBatchNorm.convert_sync_batchnorm(bn)
        >>> type(sync).__name__, sync.weight is bn.weight
        ('SyncBatchNorm', True)
        """
        output = module
        if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm):
            output = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
                bias=module.bias is not None or not module.affine,
            )
            if module.affine:
                output.weight = module.weight
                output.bias = module.bias
            output.running_mean = module.running_mean
            output.running_var = module.running_var
            output.num_batches_tracked = module.num_batches_tracked
            output.training = module.training
            if hasattr(module, "qconfig"):
                output.qconfig = module.qconfig
        for name, child in module.named_children():
            output.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return output
