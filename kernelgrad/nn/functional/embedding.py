"""Lookup tables: ``embedding`` (rows of a weight picked by integer indices) and
``embedding_bag`` (the sum, mean or maximum of each bag of such rows), both with
PyTorch's ``max_norm`` renormalisation of the rows they read.

Built from ``take`` (a gather whose gradient is an index-add), ``index_add`` and
``cumsum``, so they run unchanged on every backend.
"""

from __future__ import annotations

from typing import Any

from ... import autograd
from ...dtypes import int64
from ...errors import (
    ArgumentError,
    DTypeError,
    IndexingError,
    IndexValueError,
    ShapeError,
    UnsupportedError,
    format_shape,
)
from ...linalg import vector_norm
from ...ops.creation import arange, ones, zeros
from ...ops.elementwise import where
from ...ops.indexing import index_add, take
from ...tensor import Tensor
from .._index_write import write_rows


def _check_indices(input: Any, weight: Tensor, op: str) -> None:
    """Integer indices, each a row of ``weight`` (negative ones refused, as in PyTorch);
    on CUDA the range error comes at the next device-to-host read."""
    if not isinstance(input, Tensor) or input.dtype.is_floating_point or input.dtype.is_bool:
        raise DTypeError(
            f"{op}: the indices must be an integer tensor (e.g. `kg.tensor([1, 2])` or `x.long()`)"
        )
    if weight.ndim != 2:
        raise ShapeError(
            f"{op}: the weight must be a 2-d (num_embeddings, embedding_dim) table, got shape "
            f"{format_shape(weight.shape)}"
        )
    from .._range_check import check_within

    rows = weight.shape[0]

    def outside(position: int) -> IndexingError:
        return IndexingError(
            f"{op}: the index at flat position {position} of the indices of shape "
            f"{format_shape(input.shape)} is outside the table of {rows} rows (valid: 0 to "
            f"{rows - 1}; negative indices are refused, as in PyTorch)"
        )

    # Checked here rather than by `take`, which would wrap a negative index around (as
    # Python indexing does).
    check_within(input, 0, rows - 1, outside)


def _padding_row(padding_idx: int | None, weight: Tensor, op: str) -> int | None:
    if padding_idx is None:
        return None
    rows = weight.shape[0]
    if not -rows <= padding_idx < rows:
        raise ArgumentError(f"{op}: padding_idx {padding_idx} is outside the table of {rows} rows")
    return padding_idx % rows


def _check_dense(sparse: bool, op: str) -> None:
    if sparse:
        raise UnsupportedError(
            f"{op}: sparse=True (sparse gradients) is not supported; kernelgrad's gradients "
            "are dense. Leave sparse=False: the values and the dense gradient are the same"
        )


def _renorm_rows(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> None:
    """PyTorch's ``max_norm``: each row of ``weight`` that ``indices`` reads and whose
    ``norm_type``-norm exceeds ``max_norm`` is scaled, in place and outside autograd, to
    norm ``max_norm`` (times 1 / (1 + 1e-7 / norm), as PyTorch's ``embedding_renorm_``)."""
    flat = indices.reshape(-1)
    if not flat.numel():
        return
    with autograd.no_grad():
        rows = take(weight, 0, flat)
        norms = vector_norm(rows, norm_type, dim=1, keepdim=True)
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        write_rows(weight, flat, rows * scale)  # a row read twice: the same value twice


def _scaled_by_frequency(result: Tensor, input: Tensor, rows: int) -> Tensor:
    """``scale_grad_by_freq``: the same values, with the gradient that reaches each
    looked-up row divided by how often its index occurs in ``input``."""
    flat = input.reshape(-1)
    counts = index_add(
        zeros(rows, dtype=int64, device=input.device),
        0,
        flat,
        ones(flat.shape, dtype=int64, device=input.device),
    )
    scale = (1.0 / take(counts, 0, flat).to(result.dtype)).reshape(input.shape + (1,))
    detached = result.detach()
    return detached + (result - detached) * scale  # (result - detached) is exactly 0


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` picked by the integer ``input`` (any shape); the result has
    shape ``input.shape + (embedding_dim,)``. Rows picked by ``padding_idx`` get no
    gradient. ``max_norm`` first rescales (in place) the rows read whose
    ``norm_type``-norm is larger; ``scale_grad_by_freq`` divides each row's gradient by
    its index's count in ``input``.

    >>> import kernelgrad as kg
    >>> table = kg.arange(6.0).reshape(3, 2)
    >>> kg.nn.functional.embedding(kg.tensor([2, 0]), table).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """
    _check_indices(input, weight, "embedding")
    _check_dense(sparse, "embedding")
    padding_idx = _padding_row(padding_idx, weight, "embedding")
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    result = take(weight, 0, input)
    if not (weight.requires_grad and autograd.is_grad_enabled()):
        return result
    if padding_idx is not None:
        keep = (input != padding_idx).unsqueeze(-1)
        result = where(keep, result, take(weight.detach(), 0, input))
    if scale_grad_by_freq:
        result = _scaled_by_frequency(result, input, weight.shape[0])
    return result


_BAG_MODES = ("sum", "mean", "max")


def _bags(
    input: Tensor, offsets: Tensor | None, include_last_offset: bool
) -> tuple[Tensor, Tensor, int]:
    """The indices as one flat tensor, the bag of each, and the number of bags."""
    if input.ndim == 2:
        if offsets is not None:
            raise ArgumentError(
                "embedding_bag: offsets must be None for a 2-d input (each row is a bag); "
                "give a 1-d input with offsets, or leave offsets out"
            )
        count, length = input.shape
        bag = arange(count, device=input.device).reshape(-1, 1).expand(count, length)
        return input.reshape(-1), bag.reshape(-1), count
    if input.ndim != 1:
        raise ArgumentError(
            f"embedding_bag: the input must be 1-d (with offsets) or 2-d (one bag per row), "
            f"got shape {format_shape(input.shape)}"
        )
    if offsets is None:
        raise ArgumentError(
            "embedding_bag: a 1-d input needs offsets (the start of each bag in it)"
        )
    if not isinstance(offsets, Tensor) or offsets.dtype.is_floating_point:
        raise DTypeError("embedding_bag: offsets must be an integer tensor")
    if offsets.ndim != 1:
        raise ArgumentError(
            f"embedding_bag: offsets must be 1-d, got shape {format_shape(offsets.shape)}"
        )
    starts = offsets[:-1] if include_last_offset else offsets
    count = starts.shape[0]
    total = input.shape[0]
    if offsets.numel():
        first, last = int(offsets[0].item()), int(offsets.max().item())
        if first != 0:
            raise ArgumentError(f"embedding_bag: offsets[0] must be 0, got {first}")
        if last > total:
            raise IndexValueError(
                f"embedding_bag: offset {last} is past the end of the input of {total} indices"
            )
        if offsets.numel() > 1 and bool((offsets[1:] < offsets[:-1]).any().item()):
            raise ArgumentError("embedding_bag: offsets must be non-decreasing")
    if not total:
        return input, zeros(0, dtype=int64, device=input.device), count
    # bag of element i: the number of bag starts at or before i, less one
    starts_at = index_add(
        zeros(total + 1, dtype=int64, device=input.device),
        0,
        starts.to(int64),
        ones(count, dtype=int64, device=input.device),
    )
    bag = starts_at[:total].cumsum(0) - 1
    return input, bag, count


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """The ``mode`` (``"sum"``, ``"mean"`` or ``"max"``) of each bag of rows of
    ``weight``: a bag is a row of a 2-d ``input``, or a run of a 1-d ``input`` starting at
    each of ``offsets`` (with ``include_last_offset`` the last offset ends the last bag).
    ``per_sample_weights`` (``"sum"`` only) scales each row first; rows picked by
    ``padding_idx`` are left out of their bag (and of its count). An empty bag gives
    zeros. The result has shape (bags, embedding_dim).

    >>> import kernelgrad as kg
    >>> table = kg.arange(6.0).reshape(3, 2)
    >>> F = kg.nn.functional
    >>> F.embedding_bag(kg.tensor([0, 2, 1]), table, kg.tensor([0, 2]), mode="sum").tolist()
    [[4.0, 6.0], [2.0, 3.0]]
    """
    if mode not in _BAG_MODES:
        raise ArgumentError(f"embedding_bag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    _check_indices(input, weight, "embedding_bag")
    _check_dense(sparse, "embedding_bag")
    if scale_grad_by_freq and mode == "max":
        raise ArgumentError("embedding_bag: scale_grad_by_freq is not supported with mode='max'")
    if per_sample_weights is not None:
        if mode != "sum":
            raise UnsupportedError(
                f"embedding_bag: per_sample_weights is only supported for mode='sum', got "
                f"mode={mode!r}"
            )
        if per_sample_weights.shape != input.shape:
            raise ShapeError(
                f"embedding_bag: per_sample_weights must have the shape of the input "
                f"{format_shape(input.shape)}, got {format_shape(per_sample_weights.shape)}"
            )
        if per_sample_weights.dtype != weight.dtype:
            raise DTypeError(
                f"embedding_bag: per_sample_weights is {per_sample_weights.dtype} but the "
                f"weight is {weight.dtype}; convert one of them"
            )
    padding_idx = _padding_row(padding_idx, weight, "embedding_bag")
    flat, bag, count = _bags(input, offsets, include_last_offset)
    if max_norm is not None:
        _renorm_rows(weight, flat, max_norm, norm_type)
    dim = weight.shape[1]
    rows = embedding(flat, weight, scale_grad_by_freq=scale_grad_by_freq)
    keep = None if padding_idx is None else (flat != padding_idx)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    if mode == "max":
        return _bag_max(rows, bag, count, keep, weight)
    if keep is not None:
        rows = where(keep.unsqueeze(-1), rows, 0.0)
    sums = index_add(zeros(count, dim, dtype=weight.dtype, device=weight.device), 0, bag, rows)
    if mode == "sum":
        return sums
    members = ones(flat.shape, dtype=weight.dtype, device=weight.device)
    if keep is not None:
        members = where(keep, members, 0.0)
    sizes = index_add(zeros(count, dtype=weight.dtype, device=weight.device), 0, bag, members)
    return sums / sizes.clamp(min=1.0).reshape(-1, 1)


def _bag_max(rows: Tensor, bag: Tensor, count: int, keep: Tensor | None, weight: Tensor) -> Tensor:
    """The elementwise maximum of each bag's rows (0 for an empty bag): the rows laid out
    in a (bags, longest bag, dim) block, the unused slots at -inf, and its max over dim
    1, whose gradient goes to the row that holds each maximum. ``bag`` never decreases
    (each bag is a run of the flat indices)."""
    dim = weight.shape[1]
    device, dtype = weight.device, weight.dtype
    total = bag.shape[0]
    sizes = index_add(
        zeros(count, dtype=int64, device=device), 0, bag, ones(total, dtype=int64, device=device)
    )
    longest = int(sizes.max().item()) if count and total else 0
    if longest == 0:  # every bag empty: zeros, still attached to the graph
        return zeros(count, dim, dtype=dtype, device=device) + rows.sum() * 0.0
    starts = sizes.cumsum(0) - sizes
    slot = bag * longest + (arange(total, device=device) - take(starts, 0, bag))
    spare = count * longest  # padding rows go to one slot past the block
    if keep is not None:
        slot = where(keep, slot, spare)
    block = index_add(zeros(spare + 1, dim, dtype=dtype, device=device), 0, slot, rows)
    filled = index_add(
        zeros(spare + 1, dtype=int64, device=device),
        0,
        slot,
        ones(total, dtype=int64, device=device),
    )
    block = where((filled > 0).unsqueeze(-1), block, float("-inf"))
    best = block[:spare].reshape(count, longest, dim).max(1).values
    return where(best == float("-inf"), 0.0, best)
