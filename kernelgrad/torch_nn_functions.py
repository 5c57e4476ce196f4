"""The nn operations that PyTorch also exposes at the top level (``torch.conv2d``,
``torch.dropout``, ``torch.layer_norm``, ``torch.relu_``, ...), for programs that call
them as ``torch.xxx``: ``kg.conv2d`` and so on.

They take **torch's top-level signatures**, which sometimes differ from
``torch.nn.functional``'s: ``torch.dropout(input, p, train)`` (all three required),
``torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum,
eps, cudnn_enabled)``, ``torch.layer_norm(input, normalized_shape, weight, bias, eps,
cudnn_enable)``, losses with ``reduction`` as an int (0 ``"none"``, 1 ``"mean"``, 2
``"sum"``), ``torch.max_pool2d`` without ``return_indices``, ``torch.adaptive_max_pool1d``
and ``torch.max_pool1d_with_indices`` returning (values, indices), ``torch.embedding
(weight, indices, ...)`` with the table first, ``torch.grid_sampler`` with int modes.
Each calls the ``kg.nn.functional`` operation (so values, gradients and devices are
those of ``F``); ``cudnn_enabled`` and ``generator`` are accepted and ignored.

>>> import kernelgrad as kg
>>> x = kg.ones(1, 2, 4)
>>> kg.dropout(x, 0.5, False).shape, kg.max_pool1d(x, 2).shape
(kg.Size([1, 2, 4]), kg.Size([1, 2, 2]))
>>> kg.layer_norm(x, (4,), None, None, 1e-5, True).abs().sum().item()
0.0
"""

from __future__ import annotations

from typing import Any

from ._torch_nn_names import TORCH_NN_NAMES
from .dtypes import int64
from .errors import ArgumentError
from .nn import functional as F
from .tensor import Tensor

__all__ = list(TORCH_NN_NAMES)

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(value: Any, op: str) -> str:
    """torch's int reduction (0 none, 1 mean, 2 sum) as F's string."""
    if isinstance(value, bool) or value not in (0, 1, 2):
        raise ArgumentError(
            f"torch.{op}: reduction is an int here (0 'none', 1 'mean', 2 'sum'), got {value!r}"
        )
    return _REDUCTIONS[value]


def _stride(stride: Any) -> Any:
    """torch's ``stride=[]`` (the kernel size) as F's None."""
    return None if stride is None or (isinstance(stride, (list, tuple)) and not stride) else stride


# --- convolution, pooling: the same signatures as F's ----------------------------------------
conv1d = F.conv1d
conv2d = F.conv2d
conv3d = F.conv3d
conv_transpose1d = F.conv_transpose1d
conv_transpose2d = F.conv_transpose2d
conv_transpose3d = F.conv_transpose3d
adaptive_avg_pool1d = F.adaptive_avg_pool1d
pixel_shuffle = F.pixel_shuffle
pixel_unshuffle = F.pixel_unshuffle
channel_shuffle = F.channel_shuffle
cosine_similarity = F.cosine_similarity
pairwise_distance = F.pairwise_distance
pdist = F.pdist
prelu = F.prelu
hardshrink = F.hardshrink
bilinear = F.bilinear
rms_norm = F.rms_norm


def max_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """``torch.max_pool1d``: ``F.max_pool1d`` without ``return_indices``."""
    return F.max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool2d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """``torch.max_pool2d``: ``F.max_pool2d`` without ``return_indices``."""
    return F.max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """``torch.max_pool3d``: ``F.max_pool3d`` without ``return_indices``."""
    return F.max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
) -> tuple[Tensor, Tensor]:
    """``torch.max_pool1d_with_indices``: (values, int64 indices)."""
    return F.max_pool1d_with_indices(
        input, kernel_size, _stride(stride), padding, dilation, ceil_mode
    )


def avg_pool1d(
    input: Tensor,
    kernel_size: Any,
    stride: Any = (),
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """``torch.avg_pool1d``."""
    return F.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)


def adaptive_max_pool1d(input: Tensor, output_size: Any) -> tuple[Tensor, Tensor]:
    """``torch.adaptive_max_pool1d``: always (values, indices)."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


# --- normalisation -----------------------------------------------------------------------------
def batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> Tensor:
    """``torch.batch_norm`` (weight and bias before the running statistics)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def layer_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> Tensor:
    """``torch.layer_norm``."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> Tensor:
    """``torch.group_norm``."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> Tensor:
    """``torch.instance_norm`` (weight and bias before the running statistics)."""
    return F.instance_norm(
        input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps
    )


# --- dropout: (input, p, train), all required -------------------------------------------------
def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.dropout``."""
    return F.dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.dropout_``: in place."""
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.alpha_dropout``."""
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.alpha_dropout_``: in place."""
    return F.alpha_dropout(input, p, train, inplace=True)


def _feature_dropout(input: Tensor, p: float, train: bool, inplace: bool) -> Tensor:
    from .nn.functional.layers import channel_dropout

    if input.ndim < 2:
        raise ArgumentError(
            f"feature_dropout: requires at least 2 dims (N, C, ...), got shape {input.shape}"
        )
    return channel_dropout(input, p, train, input.ndim - 2, "feature_dropout", inplace)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_dropout``: zero whole (sample, channel) features of an (N, C, ...)
    input (each element of an (N, C) input)."""
    return _feature_dropout(input, p, train, False)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_dropout_``: in place."""
    return _feature_dropout(input, p, train, True)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_alpha_dropout``."""
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_alpha_dropout_``: in place."""
    return F.feature_alpha_dropout(input, p, train, inplace=True)


# --- embeddings: the table first -------------------------------------------------------------
def embedding(
    weight: Tensor,
    indices: Tensor,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """``torch.embedding(weight, indices, ...)``; a negative ``padding_idx`` means none."""
    padding = None if padding_idx is None or padding_idx < 0 else padding_idx
    return F.embedding(
        indices, weight, padding, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse
    )


_BAG_MODES = ("sum", "mean", "max")


def embedding_bag(
    weight: Tensor,
    indices: Tensor,
    offsets: Tensor,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``torch.embedding_bag`` with an int ``mode`` (0 sum, 1 mean, 2 max): (output,
    offset2bag, bag_size, max_indices). ``output`` is ``F.embedding_bag``'s;
    ``offset2bag`` is the bag of each index, ``bag_size`` the number of indices in each
    bag, and ``max_indices`` in max mode the index whose row gave each maximum (else
    ``bag_size``, as PyTorch's CPU mean mode)."""
    from .nn.functional.embedding import _bags
    from .ops.creation import ones, zeros
    from .ops.indexing import index_add

    if isinstance(mode, bool) or mode not in (0, 1, 2):
        raise ArgumentError(
            f"torch.embedding_bag: mode is 0 (sum), 1 (mean) or 2 (max), got {mode!r}"
        )
    padding = None if padding_idx is None or padding_idx < 0 else padding_idx
    output = F.embedding_bag(
        indices, weight, offsets, scale_grad_by_freq=scale_grad_by_freq,
        mode=_BAG_MODES[mode], sparse=sparse, per_sample_weights=per_sample_weights,
        include_last_offset=include_last_offset, padding_idx=padding,
    )  # fmt: skip
    flat, bag, count = _bags(indices, offsets, include_last_offset)
    device = weight.device
    sizes = index_add(
        zeros(count, dtype=int64, device=device),
        0,
        bag,
        ones(bag.shape, dtype=int64, device=device),
    )
    if mode != 2:
        return output, bag.contiguous(), sizes, sizes
    return output, bag.contiguous(), sizes, _bag_argmax(weight, flat, bag, sizes, count, padding)


def _bag_argmax(
    weight: Tensor, flat: Tensor, bag: Tensor, sizes: Tensor, count: int, padding: int | None
) -> Tensor:
    """For each bag and column, the index (a row of ``weight``) that holds the column's
    maximum (the first on ties; padding indices left out); 0 for an empty bag (as
    PyTorch on the CPU). The rows
    are laid out in a (bags, longest bag, dim) block, as ``F.embedding_bag``'s max."""
    from .autograd import no_grad
    from .ops.creation import arange, full, ones, zeros
    from .ops.elementwise import where
    from .ops.indexing import index_add, take

    with no_grad():
        dim, device = weight.shape[1], weight.device
        total = flat.shape[0]
        longest = int(sizes.max().item()) if count and total else 0
        if longest == 0:
            return full((count, dim), 0, dtype=int64, device=device)
        starts = sizes.cumsum(0) - sizes
        slot = bag * longest + (arange(total, device=device) - take(starts, 0, bag))
        spare = count * longest  # padding indices go to one slot past the block
        if padding is not None:
            slot = where(flat != padding, slot, spare)
        values = index_add(
            zeros(spare + 1, dim, dtype=weight.dtype, device=device), 0, slot, take(weight, 0, flat)
        )
        filled = index_add(
            zeros(spare + 1, dtype=int64, device=device),
            0,
            slot,
            ones(total, dtype=int64, device=device),
        )
        block = where((filled > 0).unsqueeze(-1), values, float("-inf"))[:spare]
        position = block.reshape(count, longest, dim).argmax(1)  # (bags, dim)
        index = (starts.reshape(-1, 1) + position).reshape(-1).clamp(max=max(total - 1, 0))
        picked = take(flat, 0, index).reshape(count, dim)
        found = block.reshape(count, longest, dim).max(1).values > float("-inf")
        return where(found, picked, 0)


# --- activations ---------------------------------------------------------------------------------
def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Tensor:
    """``torch.rrelu`` (``generator`` ignored: kernelgrad's random stream draws)."""
    return F.rrelu(input, lower, upper, training)


def rrelu_(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Tensor:
    """``torch.rrelu_``: in place."""
    return F.rrelu_(input, lower, upper, training)


def selu(input: Tensor) -> Tensor:
    """``torch.selu``."""
    return F.selu(input)


def selu_(input: Tensor) -> Tensor:
    """``torch.selu_``: in place."""
    return F.selu_(input)


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``torch.celu``."""
    return F.celu(input, alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``torch.celu_``: in place."""
    return F.celu_(input, alpha)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """``torch.threshold``: ``value`` where ``input <= threshold``."""
    return F.threshold(input, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """``torch.threshold_``: in place."""
    return F.threshold_(input, threshold, value)


def relu_(input: Tensor) -> Tensor:
    """``torch.relu_``: in place."""
    return input.relu_()


def sigmoid_(input: Tensor) -> Tensor:
    """``torch.sigmoid_``: in place."""
    return input.sigmoid_()


def tanh_(input: Tensor) -> Tensor:
    """``torch.tanh_``: in place."""
    return input.tanh_()


# --- losses: reduction as an int -------------------------------------------------------------
def kl_div(
    input: Tensor, target: Tensor, reduction: int = 1, *, log_target: bool = False
) -> Tensor:
    """``torch.kl_div``: reduction 1 is the mean over every element (without
    ``F.kl_div``'s warning about it)."""
    loss = F.kl_div(input, target, reduction="none", log_target=log_target)
    name = _reduction(reduction, "kl_div")
    return loss.mean() if name == "mean" else loss.sum() if name == "sum" else loss


def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int = 1
) -> Tensor:
    """``torch.margin_ranking_loss``."""
    return F.margin_ranking_loss(
        input1, input2, target, margin, reduction=_reduction(reduction, "margin_ranking_loss")
    )


def hinge_embedding_loss(
    input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 1
) -> Tensor:
    """``torch.hinge_embedding_loss``."""
    return F.hinge_embedding_loss(
        input, target, margin, reduction=_reduction(reduction, "hinge_embedding_loss")
    )


def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int = 1
) -> Tensor:
    """``torch.cosine_embedding_loss``."""
    return F.cosine_embedding_loss(
        input1, input2, target, margin, reduction=_reduction(reduction, "cosine_embedding_loss")
    )


def poisson_nll_loss(
    input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float, reduction: int
) -> Tensor:
    """``torch.poisson_nll_loss`` (every argument required, as torch)."""
    return F.poisson_nll_loss(
        input, target, log_input, full, eps=eps,
        reduction=_reduction(reduction, "poisson_nll_loss"),
    )  # fmt: skip


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: int = 1,
) -> Tensor:
    """``torch.triplet_margin_loss``."""
    return F.triplet_margin_loss(
        anchor, positive, negative, margin, p, eps, swap,
        reduction=_reduction(reduction, "triplet_margin_loss"),
    )  # fmt: skip


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    pos_weight: Tensor | None = None,
    reduction: int = 1,
) -> Tensor:
    """``torch.binary_cross_entropy_with_logits`` (``pos_weight`` before ``reduction``)."""
    return F.binary_cross_entropy_with_logits(
        input, target, weight,
        reduction=_reduction(reduction, "binary_cross_entropy_with_logits"),
        pos_weight=pos_weight,
    )  # fmt: skip


# --- spatial transformers: int modes ---------------------------------------------------------
_INTERPOLATION = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def grid_sampler(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """``torch.grid_sampler``: modes as ints (interpolation 0 bilinear, 1 nearest, 2
    bicubic; padding 0 zeros, 1 border, 2 reflection)."""
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise ArgumentError(
            "torch.grid_sampler: interpolation_mode is 0 (bilinear), 1 (nearest) or 2 "
            "(bicubic), padding_mode 0 (zeros), 1 (border) or 2 (reflection); got "
            f"{interpolation_mode!r} and {padding_mode!r}"
        )
    return F.grid_sample(
        input,
        grid,
        _INTERPOLATION[interpolation_mode],
        _PADDING[padding_mode],
        align_corners,
    )


def affine_grid_generator(theta: Tensor, size: Any, align_corners: bool) -> Tensor:
    """``torch.affine_grid_generator``."""
    return F.affine_grid(theta, size, align_corners)
