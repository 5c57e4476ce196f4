"""Attention: ``scaled_dot_product_attention``, ``multi_head_attention_forward`` (what
``nn.MultiheadAttention`` computes) and the masks they take."""

from __future__ import annotations

import math

from ...errors import (
    ArgumentError,
    DTypeAssertionError,
    DTypeError,
    ShapeAssertionError,
    ShapeError,
    format_shape,
)
from ...ops.creation import arange, zeros
from ...ops.elementwise import where
from ...ops.movement import cat
from ...ops.movement import pad as _pad_constant
from ...tensor import Tensor
from .layers import dropout
from .linear import linear


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
    kg.Size([1, 2, 4])
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


def _check_mha_shapes(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    key_padding_mask: Tensor | None,
    attn_mask: Tensor | None,
    num_heads: int,
) -> bool:
    """Whether the inputs are batched; refuses the dims PyTorch refuses (with
    ``AssertionError`` there, so ``ShapeAssertionError`` here)."""
    batched = query.ndim == 3
    if query.ndim not in (2, 3):
        raise ShapeAssertionError(
            "MultiheadAttention: the query must be (L, E) unbatched or (L, N, E) batched "
            f"(N first with batch_first), got {format_shape(query.shape)}"
        )
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise ShapeAssertionError(
            f"MultiheadAttention: for a {query.ndim}-d query the key and value must be "
            f"{query.ndim}-d too, got key {format_shape(key.shape)} and value "
            f"{format_shape(value.shape)}"
        )
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise ShapeAssertionError(
            f"MultiheadAttention: key_padding_mask must be {'(N, S)' if batched else '(S,)'} "
            f"for a {query.ndim}-d query, got {format_shape(key_padding_mask.shape)}"
        )
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise ShapeAssertionError(
            "MultiheadAttention: attn_mask must be 2-d (L, S) or 3-d (N * num_heads, L, S), "
            f"got {format_shape(attn_mask.shape)}"
        )
    if not batched and attn_mask is not None and attn_mask.ndim == 3:
        expected = (num_heads, query.shape[0], key.shape[0])
        if attn_mask.shape != expected:
            raise ShapeAssertionError(
                f"MultiheadAttention: a 3-d attn_mask for unbatched inputs must have shape "
                f"{format_shape(expected)}, got {format_shape(attn_mask.shape)}"
            )
    return batched


def _mha_mask(mask: Tensor | None, name: str, dtype: object) -> Tensor | None:
    """A MultiheadAttention mask as numbers added to the scores (boolean True: may NOT
    attend)."""
    if mask is None:
        return None
    if not (mask.dtype.is_bool or mask.dtype.is_floating_point):
        raise DTypeAssertionError(
            f"MultiheadAttention: {name} must be boolean (True: may not attend) or floating "
            f"point (added to the scores), got {mask.dtype}"
        )
    return additive_mask(mask, dtype, allowed_when_true=False)


def _project(x: Tensor, weight: Tensor, bias: Tensor | None, what: str) -> Tensor:
    if weight.ndim != 2 or weight.shape[1] != x.shape[-1]:
        raise ShapeAssertionError(
            f"MultiheadAttention: the {what} has {x.shape[-1]} features (shape "
            f"{format_shape(x.shape)}) but its projection weight is "
            f"{format_shape(weight.shape)}; give kdim/vdim the key's and value's feature sizes"
        )
    return linear(x, weight, bias)


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention with explicit weights, as
    ``torch.nn.functional.multi_head_attention_forward`` (``nn.MultiheadAttention``
    calls it). Inputs are (L, N, E) queries and (S, N, kdim) / (S, N, vdim) keys and
    values, or unbatched (L, E), (S, kdim), (S, vdim). The projections are the packed
    ``in_proj_weight`` (3 * E, E), or ``q_proj_weight``, ``k_proj_weight``,
    ``v_proj_weight`` with ``use_separate_proj_weight``; ``in_proj_bias`` (3 * E) holds
    the three biases either way. ``bias_k`` / ``bias_v`` (1, 1, E) append one key and
    value to every sequence, ``add_zero_attn`` one zero key and value after the
    projections, ``static_k`` / ``static_v`` (N * num_heads, S, E / num_heads) replace
    the projected keys and values.

    Masks: ``key_padding_mask`` (N, S) and ``attn_mask`` (L, S) or
    (N * num_heads, L, S), boolean (True: may NOT attend) or float (added to the scores).
    ``is_causal=True`` without ``attn_mask`` masks the keys after each query (PyTorch
    requires the mask with the hint). Returns ``(output, weights)``: weights
    (N, L, S') averaged over the heads, or (N, num_heads, L, S') with
    ``average_attn_weights=False``, or None with ``need_weights=False``; S' counts the
    appended keys.
    """
    batched = _check_mha_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    length, batch, embed_dim = query.shape
    source = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise ShapeAssertionError(
            f"MultiheadAttention: expected queries with {embed_dim_to_check} features "
            f"(embed_dim), got {embed_dim} (query {format_shape(query.shape)})"
        )
    if num_heads < 1 or embed_dim % num_heads:
        raise ShapeAssertionError(
            f"MultiheadAttention: embed_dim {embed_dim} must be divisible by num_heads {num_heads}"
        )
    head_dim = embed_dim // num_heads
    if key.shape[:2] != value.shape[:2] or key.shape[1] != batch:
        raise ShapeAssertionError(
            f"MultiheadAttention: key {format_shape(key.shape)} and value "
            f"{format_shape(value.shape)} need the same length and the query's batch size "
            f"{batch} (query {format_shape(query.shape)})"
        )
    dtype = query.dtype
    padding = _mha_mask(key_padding_mask, "key_padding_mask", dtype)
    if attn_mask is None and is_causal:
        attn_mask = causal_mask(length, source, query.device).logical_not()
    mask = _mha_mask(attn_mask, "attn_mask", dtype)

    # the projections, (T, N, E) each
    biases: list[Tensor | None] = [None] * 3
    if in_proj_bias is not None:
        biases = [in_proj_bias.narrow(0, i * embed_dim, embed_dim) for i in range(3)]
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ArgumentError(
                "MultiheadAttention: use_separate_proj_weight=True needs q_proj_weight, "
                "k_proj_weight and v_proj_weight"
            )
        weights = [q_proj_weight, k_proj_weight, v_proj_weight]
    else:
        if in_proj_weight is None:
            raise ArgumentError(
                "MultiheadAttention: in_proj_weight is None; give it, or the separate "
                "projection weights with use_separate_proj_weight=True"
            )
        if key.shape != value.shape:
            raise ShapeAssertionError(
                f"MultiheadAttention: key {format_shape(key.shape)} and value "
                f"{format_shape(value.shape)} must have the same shape with the packed "
                "in_proj_weight (give kdim/vdim for other feature sizes)"
            )
        weights = [in_proj_weight.narrow(0, i * embed_dim, embed_dim) for i in range(3)]
    q = _project(query, weights[0], biases[0], "query")
    k = _project(key, weights[1], biases[1], "key")
    v = _project(value, weights[2], biases[2], "value")

    if mask is not None:
        if mask.ndim == 2 and mask.shape != (length, source):
            raise ShapeError(
                f"MultiheadAttention: a 2-d attn_mask must have shape ({length}, {source}), "
                f"got {format_shape(mask.shape)}"
            )
        if mask.ndim == 3 and mask.shape != (batch * num_heads, length, source):
            raise ShapeError(
                f"MultiheadAttention: a 3-d attn_mask must have shape "
                f"({batch * num_heads}, {length}, {source}), got {format_shape(mask.shape)}"
            )
        # (N, heads, L, S), or (1, 1, L, S) for a 2-d mask
        mask = mask.reshape(-1, num_heads if mask.ndim == 3 else 1, length, source)
    appended = 0  # keys added after the sequence's own (bias_k, the zero key)
    if (bias_k is None) != (bias_v is None):
        raise ArgumentError("MultiheadAttention: give both bias_k and bias_v, or neither")
    if bias_k is not None:
        if static_k is not None or static_v is not None:
            raise ArgumentError("MultiheadAttention: bias_k/bias_v cannot go with static_k/v")
        k = cat([k, bias_k.reshape(1, 1, embed_dim).expand(1, batch, embed_dim)])
        v = cat([v, bias_v.reshape(1, 1, embed_dim).expand(1, batch, embed_dim)])
        appended += 1

    def heads(x: Tensor) -> Tensor:  # (T, N, E) -> (N, heads, T, head_dim)
        return x.reshape(x.shape[0], batch, num_heads, head_dim).permute(1, 2, 0, 3)

    q = heads(q)
    k = heads(k) if static_k is None else _static(static_k, "static_k", batch, num_heads, head_dim)
    v = heads(v) if static_v is None else _static(static_v, "static_v", batch, num_heads, head_dim)
    if add_zero_attn:
        zero = zeros((batch, num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = cat([k, zero], 2), cat([v, zero], 2)
        appended += 1
    keys = k.shape[2]
    if padding is not None:
        if padding.shape != (batch, keys - appended):
            raise ShapeAssertionError(
                f"MultiheadAttention: key_padding_mask must have shape ({batch}, "
                f"{keys - appended}), got {format_shape(key_padding_mask.shape)}"
            )
        padding = padding.reshape(batch, 1, 1, keys - appended)
        mask = padding if mask is None else mask + padding
    if mask is not None and appended:
        mask = _pad_constant(mask, (0, appended), 0.0)  # the appended keys are never masked

    scores = (q * (1.0 / math.sqrt(head_dim))) @ k.transpose(-2, -1)  # (N, heads, L, S')
    if mask is not None:
        scores = scores + mask
    attention = scores.softmax(-1)
    if training and dropout_p > 0.0:
        attention = dropout(attention, dropout_p, True)
    output = (attention @ v).permute(2, 0, 1, 3).reshape(length, batch, embed_dim)
    output = linear(output, out_proj_weight, out_proj_bias)
    if not batched:
        output = output.squeeze(1)
    if not need_weights:
        return output, None
    if average_attn_weights:
        attention = attention.mean(1)
    return output, (attention if batched else attention.squeeze(0))


def _static(static: Tensor, name: str, batch: int, num_heads: int, head_dim: int) -> Tensor:
    """A given (N * heads, S, head_dim) ``static_k`` / ``static_v`` as (N, heads, S,
    head_dim)."""
    if static.ndim != 3 or static.shape[0] != batch * num_heads or static.shape[2] != head_dim:
        raise ShapeAssertionError(
            f"MultiheadAttention: {name} must be ({batch * num_heads}, S, {head_dim}), got "
            f"{format_shape(static.shape)}"
        )
    return static.reshape(batch, num_heads, static.shape[1], head_dim)
