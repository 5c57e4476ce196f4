"""``Embedding`` (a lookup table of vectors) and ``EmbeddingBag`` (the sum, mean or
maximum of bags of its rows)."""

from __future__ import annotations

from typing import Any

from .. import autograd
from ..errors import ArgumentError, ShapeError, format_shape
from ..ops.creation import empty
from ..tensor import Tensor
from . import functional as F
from . import init
from .functional.embedding import _check_dense
from .module import Module, Parameter

__all__ = ["Embedding", "EmbeddingBag"]


def _padding_index(padding_idx: int | None, num_embeddings: int) -> int | None:
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ArgumentError(
            f"padding_idx {padding_idx} is outside the table of {num_embeddings} rows"
        )
    return padding_idx % num_embeddings


def _table(
    num_embeddings: int, embedding_dim: int, _weight: Tensor | None, device: Any, dtype: Any
) -> tuple[Parameter, bool]:
    """The weight: ``_weight`` when given (PyTorch's way to start from a table, as
    ``from_pretrained`` does), else an empty table that ``reset_parameters`` fills."""
    if _weight is None:
        return Parameter(empty(num_embeddings, embedding_dim, device=device, dtype=dtype)), True
    if tuple(_weight.shape) != (num_embeddings, embedding_dim):
        raise ShapeError(
            f"_weight has shape {format_shape(_weight.shape)}, expected "
            f"({num_embeddings}, {embedding_dim}) (num_embeddings, embedding_dim)"
        )
    return Parameter(_weight.detach()), False


def _norm_repr(module: Any) -> str:
    text = ""
    if module.max_norm is not None:
        text += f", max_norm={module.max_norm}"
    if module.norm_type != 2:
        text += f", norm_type={module.norm_type}"
    if module.scale_grad_by_freq is not False:
        text += f", scale_grad_by_freq={module.scale_grad_by_freq}"
    return text


class Embedding(Module):
    """Row ``i`` of ``weight`` (num_embeddings, embedding_dim) for every index ``i``;
    initialised N(0, 1), with the ``padding_idx`` row zero and never updated.
    ``max_norm`` rescales (in place) each row read whose ``norm_type``-norm is larger;
    ``scale_grad_by_freq`` divides a row's gradient by its index's count in the batch.
    ``sparse=True`` (sparse gradients) is refused: kernelgrad's gradients are dense.

    >>> import kernelgrad as kg
    >>> table = kg.nn.Embedding(10, 3)
    >>> table(kg.tensor([[1, 2], [3, 4]])).shape
    kg.Size([2, 2, 3])
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | None = None,
        _freeze: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        _check_dense(sparse, "Embedding")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _padding_index(padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        self.weight, fresh = _table(num_embeddings, embedding_dim, _weight, device, dtype)
        if fresh:
            self.reset_parameters()
        self.weight.requires_grad_(not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with autograd.no_grad():
                self.weight[self.padding_idx].fill_(0.0)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(
            input,
            self.weight,
            self.padding_idx,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.sparse,
        )

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text + _norm_repr(self)

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ) -> Embedding:
        """An ``Embedding`` whose weight is a copy of the 2-d ``embeddings``, frozen
        (``requires_grad=False``) unless ``freeze=False``.

        >>> import kernelgrad as kg
        >>> table = kg.nn.Embedding.from_pretrained(kg.tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> table(kg.tensor([1])).tolist(), table.weight.requires_grad
        ([[3.0, 4.0]], False)
        """
        if embeddings.ndim != 2:
            raise ShapeError(
                f"Embedding.from_pretrained: embeddings must be 2-d (num_embeddings, "
                f"embedding_dim), got shape {format_shape(embeddings.shape)}"
            )
        rows, dim = embeddings.shape
        return cls(
            rows,
            dim,
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
            _weight=embeddings,
            _freeze=freeze,
        )


class EmbeddingBag(Module):
    """The ``mode`` (``"sum"``, ``"mean"`` (the default) or ``"max"``) of each bag of rows
    of ``weight`` (num_embeddings, embedding_dim), initialised N(0, 1): a bag is a row of
    a 2-d input, or a run of a 1-d input starting at each of ``offsets``. ``forward(input,
    offsets=None, per_sample_weights=None)``; see ``F.embedding_bag``.

    >>> import kernelgrad as kg
    >>> bags = kg.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bags(kg.tensor([1, 2, 4, 5, 4]), kg.tensor([0, 2])).shape
    kg.Size([2, 3])
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ArgumentError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        _check_dense(sparse, "EmbeddingBag")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        self.padding_idx = _padding_index(padding_idx, num_embeddings)
        self.weight, fresh = _table(num_embeddings, embedding_dim, _weight, device, dtype)
        if fresh:
            self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with autograd.no_grad():
                self.weight[self.padding_idx].fill_(0.0)

    def forward(
        self,
        input: Tensor,
        offsets: Tensor | None = None,
        per_sample_weights: Tensor | None = None,
    ) -> Tensor:
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}" + _norm_repr(self)
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> EmbeddingBag:
        """An ``EmbeddingBag`` whose weight is a copy of the 2-d ``embeddings``, frozen
        unless ``freeze=False``."""
        if embeddings.ndim != 2:
            raise ShapeError(
                f"EmbeddingBag.from_pretrained: embeddings must be 2-d (num_embeddings, "
                f"embedding_dim), got shape {format_shape(embeddings.shape)}"
            )
        rows, dim = embeddings.shape
        bags = cls(
            rows,
            dim,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            mode,
            sparse,
            embeddings,
            include_last_offset,
            padding_idx,
        )
        bags.weight.requires_grad_(not freeze)
        return bags
