"""Samplers: which sample indices a :class:`~kernelgrad.data.DataLoader` visits, as in
``torch.utils.data``.

Random samplers draw epoch ``e``'s order from ``numpy.random.default_rng([seed, e])``,
as the DataLoader's own shuffling does, so ``DataLoader(data, sampler=RandomSampler(data,
seed=s))`` visits the samples in the order of ``DataLoader(data, shuffle=True, seed=s)``,
and a run resumed from a checkpoint (``DataLoader.state_dict()``) sees the same order as
an uninterrupted one. Iterating a random sampler advances its epoch (a new order each
time, as in PyTorch); ``set_epoch(e)`` chooses one.

>>> from kernelgrad.data import BatchSampler, SequentialSampler
>>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .loader import initial_seed

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]


class Sampler:
    """Base class: an iterable of sample indices (``__iter__``), usually with ``__len__``."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """The indices ``0, 1, ..., len(data_source) - 1`` in order."""

    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class _EpochSampler(Sampler):
    """A random order per (seed, epoch); iterating advances the epoch."""

    def __init__(self, seed: int | None, generator: Any) -> None:
        self.seed = initial_seed(seed, generator)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use epoch ``epoch``'s order."""
        self.epoch = int(epoch)

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch])

    def indices(self) -> np.ndarray:
        raise NotImplementedError

    def __iter__(self) -> Iterator[int]:
        order = self.indices()
        self.epoch += 1
        return iter(order.tolist())


class RandomSampler(_EpochSampler):
    """A random order of the samples, new every epoch.

    Args:
        data_source: anything with ``__len__``.
        replacement: draw ``num_samples`` indices independently (with repeats).
        num_samples: how many indices per epoch (default ``len(data_source)``); without
            replacement, more than the dataset's size chains several permutations.
        generator: a ``numpy.random.Generator`` or an object with ``initial_seed()``
            (a torch-style generator) to take the seed from.
        seed: the seed itself (else from ``generator``, else ``kg.manual_seed``'s, else
            fresh OS entropy).

    >>> from kernelgrad.data import RandomSampler
    >>> sorted(RandomSampler(range(4), seed=0))
    [0, 1, 2, 3]
    """

    def __init__(
        self,
        data_source: Any,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Any = None,
        *,
        seed: int | None = None,
    ) -> None:
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples < 1):
            raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}")
        super().__init__(seed, generator)
        self.data_source = data_source
        self.replacement = bool(replacement)
        self._num_samples = num_samples

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def indices(self) -> np.ndarray:
        count, wanted = len(self.data_source), self.num_samples
        rng = self._rng()
        if self.replacement:
            return rng.integers(0, count, size=wanted, dtype=np.int64)
        if wanted == count:  # what DataLoader(shuffle=True) draws for this (seed, epoch)
            return rng.permutation(count)
        rounds = [rng.permutation(count) for _ in range(math.ceil(wanted / max(count, 1)))]
        return np.concatenate(rounds)[:wanted] if rounds else np.zeros(0, np.int64)

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(_EpochSampler):
    """The given indices in a random order, new every epoch (e.g. a validation split)."""

    def __init__(
        self, indices: Sequence[int], generator: Any = None, *, seed: int | None = None
    ) -> None:
        super().__init__(seed, generator)
        self.subset = np.asarray(indices, dtype=np.int64)

    def indices(self) -> np.ndarray:
        return self.subset[self._rng().permutation(len(self.subset))]

    def __len__(self) -> int:
        return len(self.subset)


class WeightedRandomSampler(_EpochSampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``
    (e.g. to balance classes), with or without replacement."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Any = None,
        *,
        seed: int | None = None,
    ) -> None:
        weights = np.asarray(_host(weights), dtype=np.float64)
        if weights.ndim != 1 or weights.size == 0:
            raise ValueError(f"weights must be a non-empty 1-D sequence, got shape {weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
        if not isinstance(num_samples, int) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}")
        if not replacement and num_samples > np.count_nonzero(weights):
            raise ValueError(
                f"cannot draw {num_samples} samples without replacement from "
                f"{np.count_nonzero(weights)} samples of non-zero weight"
            )
        super().__init__(seed, generator)
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = bool(replacement)

    def indices(self) -> np.ndarray:
        probabilities = self.weights / self.weights.sum()
        return self._rng().choice(
            len(self.weights), size=self.num_samples, replace=self.replacement, p=probabilities
        )

    def __len__(self) -> int:
        return self.num_samples


def _host(values: Any) -> Any:
    from ..tensor import Tensor

    return values.cpu().numpy() if isinstance(values, Tensor) else values


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of ``batch_size`` (the last one
    shorter unless ``drop_last``); give it to ``DataLoader(batch_sampler=...)``."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    @property
    def epoch(self) -> Any:
        return getattr(self.sampler, "epoch", None)

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(int(index))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        count = len(self.sampler)
        return count // self.batch_size if self.drop_last else math.ceil(count / self.batch_size)
