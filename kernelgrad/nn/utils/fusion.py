"""Folding an eval-mode BatchNorm into the convolution or linear layer before it
(PyTorch's ``torch.nn.utils.fusion``): the fused layer computes what the pair computes
in eval mode, with one layer's work.

>>> import kernelgrad as kg
>>> conv, bn = kg.nn.Conv2d(2, 3, 3).eval(), kg.nn.BatchNorm2d(3).eval()
>>> fused = kg.nn.utils.fuse_conv_bn_eval(conv, bn)
>>> x = kg.randn(1, 2, 5, 5)
>>> bool(((fused(x) - bn(conv(x))).abs().max() < 1e-5).item())
True
"""

from __future__ import annotations

import copy
from typing import Any

from ...errors import ArgumentAssertionError
from ...ops.creation import ones_like, zeros_like
from ...tensor import Tensor

__all__ = [
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
]


def _check_eval(layer: Any, bn: Any, name: str) -> None:
    if layer.training or bn.training:
        raise ArgumentAssertionError(
            f"{name}: Fusion only for eval! Call .eval() on both modules first (in training "
            "mode BatchNorm uses the batch's statistics, which cannot be folded)"
        )
    if bn.running_mean is None or bn.running_var is None:
        raise ArgumentAssertionError(
            f"{name}: bn.running_mean and bn.running_var must not be None (a BatchNorm "
            "built with track_running_stats=False has nothing to fold)"
        )


def fuse_conv_bn_eval(conv: Any, bn: Any, transpose: bool = False) -> Any:
    """A new convolution (a deep copy of ``conv``) whose weight and bias fold in ``bn``'s
    running statistics and affine parameters; both must be in eval mode.
    ``transpose=True`` for a transposed convolution (channels on the weight's dim 1)."""
    _check_eval(conv, bn, "fuse_conv_bn_eval")
    fused = copy.deepcopy(conv)
    weight, bias = fuse_conv_bn_weights(
        fused.weight,
        fused.bias,
        bn.running_mean,
        bn.running_var,
        bn.eps,
        bn.weight,
        bn.bias,
        transpose,
    )
    fused.weight, fused.bias = weight, bias
    return fused


def fuse_conv_bn_weights(
    conv_w: Tensor,
    conv_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor | None,
    bn_b: Tensor | None,
    transpose: bool = False,
) -> tuple[Any, Any]:
    """The fused convolution's ``(weight, bias)`` as new parameters:
    ``w * (bn_w / sqrt(bn_rv + eps))`` per output channel and
    ``(b - bn_rm) * bn_w / sqrt(bn_rv + eps) + bn_b`` (a missing conv bias is 0, a
    missing BatchNorm weight 1 and bias 0). Computed as tensor ops (differentiable)."""
    from ..module import Parameter

    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    if conv_b is None:
        conv_b = zeros_like(bn_rm)
    if bn_w is None:
        bn_w = ones_like(bn_rm)
    if bn_b is None:
        bn_b = zeros_like(bn_rm)
    var_rsqrt = (bn_rv + bn_eps).rsqrt()
    rest = [1] * (conv_w.ndim - 2)
    shape = [1, -1, *rest] if transpose else [-1, 1, *rest]
    fused_w = (conv_w * (bn_w * var_rsqrt).reshape(shape)).to(weight_dtype)
    fused_b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(bias_dtype)
    return (
        Parameter(fused_w, conv_w.requires_grad),
        Parameter(fused_b, conv_b.requires_grad),
    )


def fuse_linear_bn_eval(linear: Any, bn: Any) -> Any:
    """A new ``Linear`` (a deep copy of ``linear``) folding in ``bn`` (BatchNorm1d over
    the linear layer's outputs: ``bn.num_features`` equal to ``out_features``, or 1);
    both must be in eval mode."""
    _check_eval(linear, bn, "fuse_linear_bn_eval")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise ArgumentAssertionError(
            "fuse_linear_bn_eval: To fuse, linear.out_features == bn.num_features or "
            f"bn.num_features == 1, got linear.out_features={linear.out_features} and "
            f"bn.num_features={bn.num_features}"
        )
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight,
        fused.bias,
        bn.running_mean,
        bn.running_var,
        bn.eps,
        bn.weight,
        bn.bias,
    )
    return fused


def fuse_linear_bn_weights(
    linear_w: Tensor,
    linear_b: Tensor | None,
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Tensor,
    bn_b: Tensor,
) -> tuple[Any, Any]:
    """The fused linear layer's ``(weight, bias)`` as new parameters:
    ``w * scale[:, None]`` and ``(b - bn_rm) * scale + bn_b`` with
    ``scale = bn_w / sqrt(bn_rv + eps)``."""
    from ..module import Parameter

    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    if linear_b is None:
        linear_b = zeros_like(bn_rm)
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * scale.unsqueeze(-1).to(weight_dtype)
    fused_b = ((linear_b - bn_rm) * scale + bn_b).to(bias_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
