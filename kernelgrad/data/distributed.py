"""``DistributedSampler``: each rank of a data-parallel job reads its own shard.

Epoch ``e`` shuffles the sample indices with the same permutation the
:class:`~kernelgrad.data.DataLoader` uses, ``numpy.random.default_rng([seed, e])``, pads
the list (or drops its tail) to a multiple of the number of ranks, and gives rank ``r``
every ``num_replicas``-th index starting at ``r``. So:

* the shards are disjoint (padding repeats a few samples) and equally long, so every rank
  runs the same number of steps;
* batch ``k`` of every rank together are exactly the samples of batch ``k`` of one
  process that loads ``num_replicas`` times the batch: training on N ranks follows the
  one-process run, and a run can resume on another number of ranks;
* the order is a function of ``(seed, epoch)`` alone, so nothing but the epoch needs to
  be saved in a checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["DistributedSampler"]


class DistributedSampler:
    """The indices of one rank's shard of ``dataset``, reshuffled every epoch.

    Args:
        dataset: anything with ``__len__``.
        num_replicas: the number of ranks (default: the process group's world size).
        rank: this rank (default: the process group's rank).
        shuffle: a new order every epoch (``set_epoch``); else dataset order.
        seed: the shuffling seed; must be the same on every rank.
        drop_last: drop the tail that does not divide evenly instead of repeating
            samples to pad it.

    >>> from kernelgrad.data import DistributedSampler
    >>> shards = [list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False))
    ...           for r in range(3)]
    >>> shards  # 10 samples padded to 12: samples 0 and 1 appear twice
    [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    """

    def __init__(
        self,
        dataset: Any,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            from ..distributed import get_rank, get_world_size

            num_replicas = get_world_size() if num_replicas is None else num_replicas
            rank = get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"num_replicas must be a positive integer, got {num_replicas!r}")
        if not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be in 0 .. {num_replicas - 1}, got {rank!r}")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.epoch = 0
        count = len(dataset)
        if drop_last:
            self.num_samples = count // num_replicas
            if self.num_samples == 0:
                raise ValueError(
                    f"drop_last=True leaves no samples: {count} sample(s) for {num_replicas} ranks"
                )
        else:
            self.num_samples = math.ceil(count / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s order (call it with the same value on every rank)."""
        self.epoch = int(epoch)

    def indices(self) -> np.ndarray:
        """This rank's sample indices for the current epoch, in visiting order."""
        count = len(self.dataset)
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(count)
        else:
            order = np.arange(count, dtype=np.int64)
        if self.total_size > count:
            repeats = math.ceil((self.total_size - count) / max(count, 1))
            order = np.concatenate([order] + [order] * repeats)
        order = order[: self.total_size]
        return order[self.rank : self.total_size : self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples

    def __repr__(self) -> str:
        return (
            f"DistributedSampler({len(self.dataset)} samples, rank {self.rank} of "
            f"{self.num_replicas}, {self.num_samples} per rank, shuffle={self.shuffle}, "
            f"seed={self.seed}, epoch={self.epoch})"
        )
