"""``kg.nn.functional``: the stateless operations behind the layers, and the losses.

Everything here is written with Tensor operations, a few explicitly fused elementwise
kernels, and the ``@kg.kernel`` convolution and loss kernels of ``nn/_conv_kernels.py`` and
``nn/_loss_kernels.py`` (one source for the CPU and CUDA), so it runs unchanged on every
backend. The functions live in one module per family (``activation``, ``linear``,
``convolution``, ``convolution3d``, ``transposed`` convolution, ``pooling``,
``pool_indices`` and unpooling, ``resampling``, ``grid`` sampling, ``attention``,
``layers``: dropout, normalisation, padding; ``embedding``; ``loss``); this package is
their public face.

Convolution keeps images *batch innermost* ((N, C, H, W) tensors stored as (C, H, W, N)).
On the CPU a stride-1 convolution with few taps per filter runs as direct kernels;
other convolutions (and other devices) are im2col + one matrix product (the bias rides
along as an extra row of ones). Convolution, pooling, linear and cross-entropy have
hand-written VJPs that reuse what the forward pass computed.

>>> import kernelgrad as kg
>>> import kernelgrad.nn.functional as F
>>> x = kg.randn(2, 1, 8, 8)
>>> w = kg.randn(4, 1, 3, 3)
>>> F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2).shape
kg.Size([2, 4, 4, 4])
"""

from __future__ import annotations

from .activation import (
    celu,
    celu_,
    elu,
    elu_,
    gelu,
    glu,
    gumbel_softmax,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    leaky_relu,
    leaky_relu_,
    log_softmax,
    logsigmoid,
    mish,
    prelu,
    relu,
    relu6,
    relu_,
    rrelu,
    rrelu_,
    selu,
    selu_,
    sigmoid,
    silu,
    softmax,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanh,
    tanhshrink,
    threshold,
    threshold_,
)
from .adaptive_pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
)
from .attention import multi_head_attention_forward, scaled_dot_product_attention
from .convolution import conv1d, conv2d
from .convolution3d import conv3d
from .ctc import ctc_loss
from .distance import cosine_similarity, pairwise_distance, pdist
from .embedding import embedding, embedding_bag
from .fold import fold, unfold
from .fractional_pool import (
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
)
from .grid import affine_grid, grid_sample
from .layers import (
    alpha_dropout,
    batch_norm,
    channel_dropout,
    dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    feature_alpha_dropout,
    layer_norm,
    normalize,
    one_hot,
    pad,
)
from .linear import bilinear, linear
from .loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cosine_embedding_loss,
    cross_entropy,
    gaussian_nll_loss,
    hinge_embedding_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    multi_margin_loss,
    multilabel_soft_margin_loss,
    nll_loss,
    poisson_nll_loss,
    smooth_l1_loss,
    soft_margin_loss,
    triplet_margin_loss,
)

# PyTorch's remaining functions (channel_shuffle, the last losses, deprecated upsampling)
from .more_losses import (
    linear_cross_entropy,
    multilabel_margin_loss,
    triplet_margin_with_distance_loss,
)
from .normalization import group_norm, instance_norm, local_response_norm, rms_norm
from .pool_indices import (
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices,
    max_pool1d_with_indices,
    max_pool2d_with_indices,
    max_pool3d_with_indices,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)
from .pooling import (
    adaptive_avg_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
    max_pool2d_relu,
)
from .pooling3d import avg_pool3d, lp_pool1d, lp_pool2d, lp_pool3d, max_pool3d
from .resampling import interpolate, upsample, upsample_bilinear, upsample_nearest
from .shuffle import channel_shuffle, pixel_shuffle, pixel_unshuffle
from .transposed import conv_transpose1d, conv_transpose2d, conv_transpose3d

__all__ = [
    "relu",
    "gelu",
    "sigmoid",
    "tanh",
    "silu",
    "leaky_relu",
    "softplus",
    "softmax",
    "log_softmax",
    "elu",
    "selu",
    "celu",
    "hardtanh",
    "relu6",
    "hardsigmoid",
    "hardswish",
    "logsigmoid",
    "mish",
    "softsign",
    "tanhshrink",
    "threshold",
    "hardshrink",
    "softshrink",
    "softmin",
    "glu",
    "prelu",
    "rrelu",
    "relu_",
    "elu_",
    "leaky_relu_",
    "hardtanh_",
    "threshold_",
    "selu_",
    "celu_",
    "rrelu_",
    "gumbel_softmax",
    "linear",
    "scaled_dot_product_attention",
    "multi_head_attention_forward",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool2d_relu",
    "avg_pool1d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "max_pool3d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "interpolate",
    "affine_grid",
    "grid_sample",
    "unfold",
    "fold",
    "upsample",
    "dropout",
    "dropout1d",
    "dropout2d",
    "channel_dropout",
    "batch_norm",
    "layer_norm",
    "embedding",
    "embedding_bag",
    "one_hot",
    "pad",
    "normalize",
    "group_norm",
    "instance_norm",
    "rms_norm",
    "local_response_norm",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
    "bilinear",
    "pixel_shuffle",
    "pixel_unshuffle",
    "smooth_l1_loss",
    "huber_loss",
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "cosine_embedding_loss",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "triplet_margin_loss",
    "soft_margin_loss",
    "multilabel_soft_margin_loss",
    "gaussian_nll_loss",
    "poisson_nll_loss",
    "multi_margin_loss",
    "cosine_similarity",
    "pairwise_distance",
    "pdist",
    # connectionist temporal classification, fractional max pooling
    "ctc_loss",
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
]
__all__ += [
    "channel_shuffle",
    "linear_cross_entropy",
    "multilabel_margin_loss",
    "triplet_margin_with_distance_loss",
    "upsample_bilinear",
    "upsample_nearest",
]
