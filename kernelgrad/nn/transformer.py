"""Attention layers with PyTorch's parameters and conventions: ``MultiheadAttention``,
``TransformerEncoderLayer``, ``TransformerDecoderLayer``, ``TransformerEncoder``,
``TransformerDecoder`` and ``Transformer``.

``MultiheadAttention`` keeps PyTorch's parameters (the packed ``in_proj_weight`` of
shape (3 * embed_dim, embed_dim), or ``q_proj_weight`` / ``k_proj_weight`` /
``v_proj_weight`` when ``kdim``/``vdim`` differ; ``in_proj_bias``, ``out_proj``,
``bias_k``/``bias_v``), so PyTorch's ``state_dict`` loads unchanged; the Transformer
layers have PyTorch's submodule names (``self_attn``, ``linear1``, ``linear2``,
``norm1``, ...).

>>> import kernelgrad as kg
>>> layer = kg.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
>>> layer(kg.randn(5, 3, 8)).shape  # (seq, batch, d_model)
kg.Size([5, 3, 8])
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError, ShapeAssertionError
from ..ops.creation import empty
from ..tensor import Tensor
from . import functional as F
from . import init
from .container import ModuleList
from .dropout import Dropout
from .functional.attention import additive_mask, causal_mask
from .linear import Linear
from .module import Module, Parameter
from .normalization import LayerNorm

__all__ = [
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "Transformer",
]


class MultiheadAttention(Module):
    """Attention with ``num_heads`` heads over ``embed_dim`` features, as PyTorch's.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns
    ``(output, weights)``: inputs are (L, N, E) (or (N, L, E) with ``batch_first``, or
    unbatched (L, E)); boolean masks are True where attending is NOT allowed (PyTorch's
    convention here), float masks are added to the scores; ``weights`` is (N, L, S)
    averaged over heads (or (N, heads, L, S)), None with ``need_weights=False``.

    Parameters as PyTorch's: the packed ``in_proj_weight`` (3 * E, E) when keys and
    values have ``embed_dim`` features, else ``q_proj_weight`` (E, E), ``k_proj_weight``
    (E, kdim) and ``v_proj_weight`` (E, vdim) (and ``in_proj_weight`` None);
    ``in_proj_bias`` (3 * E), ``out_proj``; ``bias_k`` and ``bias_v`` (1, 1, E) with
    ``add_bias_kv``. ``add_zero_attn`` appends a zero key and value.
    ``F.multi_head_attention_forward`` has the details.

    >>> import kernelgrad as kg
    >>> attention = kg.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = kg.randn(3, 5, 8)
    >>> output, weights = attention(x, x, x)
    >>> output.shape, weights.shape
    (kg.Size([3, 5, 8]), kg.Size([3, 5, 5]))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ArgumentError(
                f"MultiheadAttention: embed_dim and num_heads must be positive, got "
                f"embed_dim={embed_dim} and num_heads={num_heads}"
            )
        if embed_dim % num_heads:
            raise ShapeAssertionError(
                f"MultiheadAttention: embed_dim {embed_dim} must be divisible by num_heads "
                f"{num_heads}"
            )
        options = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = float(dropout)
        self.batch_first = batch_first
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **options))
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **options))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **options))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **options))
            self.in_proj_weight = None
        self.in_proj_bias = Parameter(empty(3 * embed_dim, **options)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **options)
        if add_bias_kv:
            self.bias_k = Parameter(empty(1, 1, embed_dim, **options))
            self.bias_v = Parameter(empty(1, 1, embed_dim, **options))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's initialisation: xavier-uniform projections, zero biases,
        xavier-normal ``bias_k`` / ``bias_v``."""
        projections = (
            [self.in_proj_weight]
            if self._qkv_same_embed_dim
            else [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        )
        for weight in projections:
            init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        for extra in (self.bias_k, self.bias_v):
            if extra is not None:
                init.xavier_normal_(extra)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        batch_first = self.batch_first and query.ndim == 3
        if batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        output, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )  # fmt: skip
        return (output.transpose(0, 1) if batch_first else output), weights


def _activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise ArgumentError(
        f"Transformer: activation must be 'relu', 'gelu' or a callable, got {activation!r}"
    )


def _add_feed_forward_and_norms(
    layer: Module, blocks: int, d_model: int, dim_feedforward: int, dropout: float,
    activation: str | Callable[[Tensor], Tensor], eps: float, norm_first: bool, bias: bool,
    options: dict[str, Any],
) -> None:  # fmt: skip
    """The submodules both Transformer layers have, under PyTorch's names: ``linear1``,
    ``dropout``, ``linear2``, and ``norm1``.. / ``dropout1``.. for each of ``blocks``
    residual blocks."""
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias, **options)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias, **options)
    layer.norm_first = norm_first
    for block in range(1, blocks + 1):
        setattr(layer, f"norm{block}", LayerNorm(d_model, eps=eps, **options))
    for block in range(1, blocks + 1):
        setattr(layer, f"dropout{block}", Dropout(dropout))
    layer.activation = _activation(activation)


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with dropout, a residual connection
    and layer norm (after each block, or before with ``norm_first=True``), as PyTorch's.
    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        options = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **options
        )
        _add_feed_forward_and_norms(
            self, 2, d_model, dim_feedforward, dropout, activation, layer_norm_eps, norm_first,
            bias, options,
        )  # fmt: skip
        self.batch_first = batch_first

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._attention(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attention(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward(x))

    def _attention(
        self, x: Tensor, mask: Tensor | None, padding: Tensor | None, is_causal: bool
    ) -> Tensor:
        output = self.self_attn(
            x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False,
            is_causal=is_causal and mask is None,
        )[0]  # fmt: skip
        return self.dropout1(output)

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's ``memory`` and a feed-forward block,
    each with dropout, a residual connection and layer norm, as PyTorch's.
    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        options = {"device": device, "dtype": dtype}
        attention = {"dropout": dropout, "bias": bias, "batch_first": batch_first, **options}
        self.self_attn = MultiheadAttention(d_model, nhead, **attention)
        self.multihead_attn = MultiheadAttention(d_model, nhead, **attention)
        _add_feed_forward_and_norms(
            self, 3, d_model, dim_feedforward, dropout, activation, layer_norm_eps, norm_first,
            bias, options,
        )  # fmt: skip

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        def self_block(x: Tensor) -> Tensor:
            output = self.self_attn(
                x, x, x, attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                need_weights=False, is_causal=tgt_is_causal and tgt_mask is None,
            )[0]  # fmt: skip
            return self.dropout1(output)

        def memory_block(x: Tensor) -> Tensor:
            output = self.multihead_attn(
                x, memory, memory, attn_mask=memory_mask,
                key_padding_mask=memory_key_padding_mask, need_weights=False,
                is_causal=memory_is_causal and memory_mask is None,
            )[0]  # fmt: skip
            return self.dropout2(output)

        def feed_forward(x: Tensor) -> Tensor:
            hidden = self.dropout(self.activation(self.linear1(x)))
            return self.dropout3(self.linear2(hidden))

        x = tgt
        if self.norm_first:
            x = x + self_block(self.norm1(x))
            x = x + memory_block(self.norm2(x))
            return x + feed_forward(self.norm3(x))
        x = self.norm1(x + self_block(x))
        x = self.norm2(x + memory_block(x))
        return self.norm3(x + feed_forward(x))


def _clones(layer: Module, count: int) -> ModuleList:
    return ModuleList([copy.deepcopy(layer) for _ in range(count)])


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (``layers.0``, ``layers.1``, ...), then
    ``norm`` if given. ``forward(src, mask=None, src_key_padding_mask=None,
    is_causal=None)``."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer``, then ``norm`` if given.
    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)``."""

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None
    ) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(
                x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                bool(tgt_is_causal), memory_is_causal,
            )  # fmt: skip
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """PyTorch's encoder-decoder Transformer: ``encoder`` (a TransformerEncoder with a
    final LayerNorm) and ``decoder``; weights with more than one dim start
    xavier-uniform. ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None)``."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        options = {
            "dim_feedforward": dim_feedforward, "dropout": dropout, "activation": activation,
            "layer_norm_eps": layer_norm_eps, "batch_first": batch_first,
            "norm_first": norm_first, "bias": bias, "device": device, "dtype": dtype,
        }  # fmt: skip
        norm = {"eps": layer_norm_eps, "device": device, "dtype": dtype}
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **options),
            num_encoder_layers,
            LayerNorm(d_model, **norm),
        )
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **options),
            num_decoder_layers,
            LayerNorm(d_model, **norm),
        )
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first
        for parameter in self.parameters():
            if parameter.ndim > 1:
                init.xavier_uniform_(parameter)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        memory = self.encoder(src, src_mask, src_key_padding_mask, src_is_causal)
        return self.decoder(
            tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
            tgt_is_causal, memory_is_causal,
        )  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """A float (sz, sz) mask: 0 on and below the diagonal, -inf above (each position
        attends to itself and earlier ones).

        >>> import kernelgrad as kg
        >>> kg.nn.Transformer.generate_square_subsequent_mask(2).tolist()
        [[0.0, -inf], [0.0, 0.0]]
        """
        from ..dtypes import as_dtype, default_float

        allowed = causal_mask(sz, sz, device)
        chosen = default_float() if dtype is None else as_dtype(dtype)
        return additive_mask(allowed, chosen, allowed_when_true=True)
