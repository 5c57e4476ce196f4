"""Sequences of different lengths in one batch (PyTorch's ``torch.nn.utils.rnn``).

A :class:`PackedSequence` holds the time steps of several sequences one after another:
first step 0 of every sequence, then step 1 of those at least 2 long, and so on, the
sequences sorted by decreasing length. ``batch_sizes[t]`` is how many sequences are
still running at step t. The recurrent layers (``nn.RNN``, ``nn.LSTM``, ``nn.GRU``)
take one and return one, with each sequence's final state taken at its own last step.

>>> import kernelgrad as kg
>>> from kernelgrad.nn.utils.rnn import pack_sequence, pad_packed_sequence
>>> packed = pack_sequence([kg.tensor([1.0, 2.0]), kg.tensor([3.0, 4.0, 5.0])],
...                        enforce_sorted=False)
>>> packed.data.tolist(), packed.batch_sizes.tolist()
([3.0, 1.0, 4.0, 2.0, 5.0], [2, 2, 1])
>>> padded, lengths = pad_packed_sequence(packed, batch_first=True)
>>> padded.tolist(), lengths.tolist()
([[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]], [2, 3])

Every function here is differentiable with respect to the sequences' values (packing
and padding are gathers of rows); lengths and batch sizes live on the CPU, as in
PyTorch, and the indices of the gathers are computed there.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from ...dtypes import float32, float64, int32, int64
from ...errors import ArgumentError, DTypeError, ShapeError, format_shape
from ...ops.creation import full, tensor
from ...ops.movement import cat
from ...tensor import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_sequence",
    "unpack_sequence",
]

_Fields = namedtuple(
    "PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"]
)


class PackedSequence(_Fields):
    """``(data, batch_sizes, sorted_indices, unsorted_indices)``: the packed time steps
    (total steps, *features), the number of sequences running at each step (an int64
    CPU tensor), and the permutation that sorted the batch by decreasing length and its
    inverse (None when the batch came sorted). Made by :func:`pack_padded_sequence` and
    :func:`pack_sequence`; ``unsorted_indices`` is derived from ``sorted_indices`` when
    not given."""

    __slots__ = ()

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: Tensor | None = None,
        sorted_indices: Tensor | None = None,
        unsorted_indices: Tensor | None = None,
    ) -> PackedSequence:
        if batch_sizes is None:
            raise ArgumentError(
                "PackedSequence: batch_sizes is required; make packed sequences with "
                "pack_padded_sequence or pack_sequence"
            )
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data.to(...)``; the indices follow the data's device, ``batch_sizes`` stays
        on the CPU."""
        return self._with_data(self.data.to(*args, **kwargs))

    def cuda(self, device: Any = None) -> PackedSequence:
        return self._with_data(self.data.cuda(device))

    def _with_data(self, data: Tensor) -> PackedSequence:
        """The same sequences with ``data`` (converted or moved): the indices follow
        its device."""
        if data is self.data:
            return self
        indices = [
            None if t is None else t.to(data.device)
            for t in (self.sorted_indices, self.unsorted_indices)
        ]
        return type(self)(data, self.batch_sizes, *indices)

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def double(self) -> PackedSequence:
        return self.to(dtype=float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=float32)

    def long(self) -> PackedSequence:
        return self.to(dtype=int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=int32)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation of 0..n-1 (None gives None).

    >>> import kernelgrad as kg
    >>> invert_permutation(kg.tensor([2, 0, 1])).tolist()
    [1, 2, 0]
    """
    if permutation is None:
        return None
    return permutation.argsort()


def _host_list(t: Tensor) -> list[int]:
    """The integers of a 1-D tensor (lengths, batch sizes, a permutation) as a list, read
    from whichever device holds them."""
    return [int(n) for n in t.cpu().tolist()]


# --- the layout: where each packed row sits in the padded (steps, batch) grid ----------------
def _host_lengths(lengths: Any, batch: int) -> list[int]:
    if isinstance(lengths, Tensor):
        if lengths.dtype.is_floating_point or lengths.ndim != 1:
            raise DTypeError(
                f"pack_padded_sequence: 'lengths' must be a 1-D integer tensor or a list, got "
                f"a {lengths.dtype} tensor of shape {format_shape(lengths.shape)}"
            )
        lengths = _host_list(lengths)
    lengths = [int(n) for n in lengths]
    if len(lengths) != batch:
        raise ShapeError(
            f"pack_padded_sequence: expected len(lengths) to be equal to the batch size, but "
            f"got {len(lengths)} lengths for a batch of {batch}"
        )
    if any(n <= 0 for n in lengths):
        raise ArgumentError(
            "pack_padded_sequence: the length of every sequence has to be greater than 0, "
            f"got lengths {lengths}; leave empty sequences out of the batch"
        )
    return lengths


def batch_sizes_of(lengths: Sequence[int]) -> list[int]:
    """How many of the sequences (lengths sorted decreasing) run at each step."""
    return [sum(1 for n in lengths if n > step) for step in range(lengths[0])]


def padded_positions(batch_sizes: Sequence[int]) -> np.ndarray:
    """For each packed row, its row in the padded (steps * batch) layout: step t's
    sequences are rows t * batch .. t * batch + batch_sizes[t] - 1."""
    batch = batch_sizes[0]
    return np.concatenate(
        [step * batch + np.arange(size, dtype=np.int64) for step, size in enumerate(batch_sizes)]
    )


def packed_to_padded(
    data: Tensor, batch_sizes: Sequence[int], steps: int | None = None, fill: float = 0.0
) -> Tensor:
    """(steps, batch, *features) from packed rows, sorted order, ``fill`` past each
    sequence's end (a gather: differentiable with respect to ``data``)."""
    steps = len(batch_sizes) if steps is None else steps
    batch = batch_sizes[0]
    filler = full((1, *data.shape[1:]), fill, dtype=data.dtype, device=data.device)
    source = cat([data, filler])
    index = np.full(steps * batch, data.shape[0], dtype=np.int64)  # the filler row
    index[padded_positions(batch_sizes)] = np.arange(data.shape[0], dtype=np.int64)
    gathered = source.index_select(0, tensor(index, device=data.device))
    return gathered.reshape(steps, batch, *data.shape[1:])


def padded_to_packed(padded: Tensor, batch_sizes: Sequence[int]) -> Tensor:
    """The packed rows of a (steps, batch, *features) tensor in sorted order."""
    steps, batch = padded.shape[0], padded.shape[1]
    flat = padded.reshape(steps * batch, *padded.shape[2:])
    index = tensor(padded_positions(batch_sizes), device=padded.device)
    return flat.index_select(0, index)


# --- PyTorch's functions -------------------------------------------------------------------------
def pack_padded_sequence(
    input: Tensor, lengths: Any, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch (seq, batch, *) (or (batch, seq, *) with ``batch_first``) of
    sequences with the given lengths. With ``enforce_sorted`` (the default) the lengths
    must be in decreasing order; ``enforce_sorted=False`` sorts the batch and records the
    permutation in ``sorted_indices``.

    >>> import kernelgrad as kg
    >>> padded = kg.tensor([[1.0, 4.0], [2.0, 0.0], [3.0, 0.0]])  # (seq, batch)
    >>> packed = pack_padded_sequence(padded, [3, 1])
    >>> packed.data.tolist(), packed.batch_sizes.tolist()
    ([1.0, 4.0, 2.0, 3.0], [2, 1, 1])
    """
    if input.ndim < 2:
        raise ShapeError(
            f"pack_padded_sequence: expected an input of at least 2 dims (seq, batch, *), "
            f"got shape {format_shape(input.shape)}"
        )
    padded = input.transpose(0, 1) if batch_first else input
    lengths = _host_lengths(lengths, padded.shape[1])
    sorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in pairwise(lengths)):
            raise ArgumentError(
                f"pack_padded_sequence: `lengths` array must be sorted in decreasing order "
                f"when `enforce_sorted` is True (got {lengths}). You can pass "
                "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to "
                "sidestep this requirement"
            )
    else:
        order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
        lengths = [lengths[k] for k in order]
        sorted_indices = tensor(order.astype(np.int64), device=padded.device)
        padded = padded.index_select(1, sorted_indices)
    if lengths[0] > padded.shape[0]:
        raise ShapeError(
            f"pack_padded_sequence: a sequence of length {lengths[0]} does not fit an input "
            f"of {padded.shape[0]} time steps (shape {format_shape(input.shape)}"
            f"{', batch_first' if batch_first else ''})"
        )
    sizes = batch_sizes_of(lengths)
    data = padded_to_packed(padded[: len(sizes)], sizes)
    return PackedSequence(data, tensor(sizes, dtype=int64), sorted_indices, None)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """The inverse of :func:`pack_padded_sequence`: ``(padded, lengths)``, the batch in
    its original order, ``padding_value`` past each sequence's end, ``total_length``
    steps if given (at least the longest sequence) and ``lengths`` an int64 CPU tensor."""
    data, batch_sizes, _, unsorted_indices = sequence
    sizes = _host_list(batch_sizes)
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ArgumentError(
                f"pad_packed_sequence: expected total_length to be at least the length of "
                f"the longest sequence in input, but got total_length={total_length} and max "
                f"sequence length being {steps}"
            )
        steps = total_length
    padded = packed_to_padded(data, sizes, steps, padding_value)
    lengths = np.array([sum(1 for n in sizes if n > row) for row in range(sizes[0])])
    if unsorted_indices is not None:
        padded = padded.index_select(1, unsorted_indices)
        lengths = lengths[np.asarray(_host_list(unsorted_indices), dtype=np.int64)]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, tensor(lengths.astype(np.int64))


def pad_sequence(
    sequences: Iterable[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack sequences of shapes (length_i, *) into (longest, batch, *) (or (batch,
    longest, *) with ``batch_first``), ``padding_value`` after each (or before it, with
    ``padding_side="left"``).

    >>> import kernelgrad as kg
    >>> pad_sequence([kg.ones(2), kg.ones(3)], batch_first=True).tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    """
    if isinstance(sequences, Tensor) or not isinstance(sequences, Iterable):
        raise DTypeError(
            f"pad_sequence: expected a list or tuple of tensors, got {type(sequences).__name__}"
        )
    sequences = list(sequences)
    if not sequences:
        raise ArgumentError("pad_sequence: received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ArgumentError(
            f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}"
        )
    features = sequences[0].shape[1:]
    for position, sequence in enumerate(sequences):
        if sequence.ndim == 0 or sequence.shape[1:] != features:
            raise ShapeError(
                f"pad_sequence: every sequence must have shape (length, "
                f"{', '.join(map(str, features)) or '*'}) like the first, but sequence "
                f"{position} has shape {format_shape(sequence.shape)}"
            )
    lengths = [s.shape[0] for s in sequences]
    longest = max(lengths)
    first = sequences[0]
    filler = full((1, *features), padding_value, dtype=first.dtype, device=first.device)
    source = cat([*sequences, filler])
    filler_row = sum(lengths)
    index = np.full((len(sequences), longest), filler_row, dtype=np.int64)
    start = 0
    for row, length in enumerate(lengths):
        shift = 0 if padding_side == "right" else longest - length
        index[row, shift : shift + length] = np.arange(start, start + length)
        start += length
    if not batch_first:
        index = index.T
    gathered = source.index_select(0, tensor(index.reshape(-1), device=first.device))
    return gathered.reshape(*index.shape, *features)


def unpad_sequence(
    padded_sequences: Tensor, lengths: Any, batch_first: bool = False
) -> list[Tensor]:
    """The sequences of a padded batch, each cut to its length (a list of views)."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    values = _host_list(lengths) if isinstance(lengths, Tensor) else list(lengths)
    return [padded_sequences[row, : int(n)] for row, n in enumerate(values)]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences of shapes (length_i, *): ``pad_sequence`` and then
    ``pack_padded_sequence`` with their lengths."""
    lengths = [s.shape[0] if s.ndim else 0 for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences a :class:`PackedSequence` holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
