"""Attention: ``scaled_dot_product_attention`` and the masks it takes."""

from __future__ import annotations

import math

from ...errors import DTypeError, ShapeError, format_shape
from ...ops.creation import arange
from ...ops.elementwise import where
from ...tensor import Tensor
from .layers import dropout


def causal_mask(queries: int, keys: int, device: object) -> Tensor:
    """Boolean (queries, keys) mask, True where query i may attend key j (j <= i)."""
    return arange(queries, device=device).unsqueeze(1) >= arange(keys, device=device)


def additive_mask(mask: Tensor, dtype: object, allowed_when_true: bool) -> Tensor:
    """A mask as numbers added to attention scores: a float mask as it is; a boolean one
    as 0 where attending is allowed and -inf where it is not (``allowed_when_true``
    says which boolean value allows: True for ``scaled_dot_product_attention``, False
    for ``MultiheadAttention``'s masks, as in PyTorch)."""
    if mask.dtype.is_bool:
        allowed = mask if allowed_when_true else mask.logical_not()
        return where(allowed, 0.0, -math.inf).to(dtype)
    if not mask.dtype.is_floating_point:
        raise DTypeError(
            f"attention: a mask must be boolean or floating point, got {mask.dtype} (shape "
            f"{format_shape(mask.shape)})"
        )
    return mask.to(dtype)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two dims of
    (..., L, E) queries, (..., S, E) keys and (..., S, Ev) values. ``attn_mask`` is
    boolean (True: may attend) or float (added to the scores) and broadcasts to
    (..., L, S); ``is_causal`` masks keys after each query; ``scale`` defaults to
    1/sqrt(E); ``dropout_p`` drops attention weights (always, as in PyTorch: pass 0 in
    evaluation). A query whose keys are all masked gets NaN, as in PyTorch.

    >>> import kernelgrad as kg
    >>> q = k = v = kg.ones(1, 2, 4)
    >>> kg.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    (1, 2, 4)
    """
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ShapeError(
            "scaled_dot_product_attention: query, key and value need at least 2 dims "
            f"(..., sequence, features), got {format_shape(query.shape)}, "
            f"{format_shape(key.shape)}, {format_shape(value.shape)}"
        )
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            "scaled_dot_product_attention: query and key need the same feature size and key "
            f"and value the same length; got query {format_shape(query.shape)}, key "
            f"{format_shape(key.shape)}, value {format_shape(value.shape)}"
        )
    if is_causal and attn_mask is not None:
        raise ShapeError("scaled_dot_product_attention: give attn_mask or is_causal=True, not both")
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    scores = (query @ key.transpose(-2, -1)) * factor
    if is_causal:
        allowed = causal_mask(query.shape[-2], key.shape[-2], query.device)
        scores = where(allowed, scores, -math.inf)
    elif attn_mask is not None:
        scores = scores + additive_mask(attn_mask, scores.dtype, allowed_when_true=True)
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return weights @ value
