"""Datasets and the DataLoader, as in PyTorch.

A dataset is anything with ``__len__`` and ``__getitem__``. Array-backed datasets also
define ``get_batch(indices)``, which returns a whole batch (a tuple of arrays or
tensors) from one bulk gather; the DataLoader uses it when present and falls back to a
per-sample loop plus :func:`default_collate` otherwise.

>>> import numpy as np
>>> import kernelgrad as kg
>>> from kernelgrad.data import DataLoader, TensorDataset
>>> features = np.arange(10, dtype=np.float32).reshape(5, 2)
>>> labels = np.array([0, 1, 0, 1, 1])
>>> loader = DataLoader(TensorDataset(features, labels), batch_size=2, shuffle=True, seed=0)
>>> [tuple(y.shape) for x, y in loader]
[(2,), (2,), (1,)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["DataLoader", "Dataset", "Subset", "TensorDataset", "default_collate"]


class Dataset:
    """Base class: subclasses define ``__len__`` and ``__getitem__``, and may define a
    faster ``get_batch(indices)`` that returns a collated batch."""

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def get_batch(self, indices: np.ndarray) -> Any:
        """The samples at ``indices``, collated. The default loops over samples."""
        return default_collate([self[int(i)] for i in indices])


def _is_tensor(value: Any) -> bool:
    from ..tensor import Tensor

    return isinstance(value, Tensor)


class TensorDataset(Dataset):
    """Samples are the rows of equally long tensors or NumPy arrays.

    ``dataset[i]`` is ``(t[i] for t in tensors)``; a batch is gathered in one indexing
    operation per tensor (a NumPy gather on the CPU, ``index_select`` on other devices).

    >>> import kernelgrad as kg
    >>> dataset = kg.data.TensorDataset(kg.arange(6).reshape(3, 2), kg.tensor([7, 8, 9]))
    >>> len(dataset), dataset[1][1].item()
    (3, 8)
    """

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor or array")
        lengths = [int(t.shape[0]) if len(t.shape) else None for t in tensors]
        if None in lengths or len(set(lengths)) != 1:
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ValueError(
                f"TensorDataset needs tensors with the same first dimension (the number of "
                f"samples); got shapes {shapes}"
            )
        self.tensors = tuple(t if _is_tensor(t) else np.asarray(t) for t in tensors)

    def __len__(self) -> int:
        return int(self.tensors[0].shape[0])

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        return tuple(t[index] for t in self.tensors)

    def get_batch(self, indices: np.ndarray) -> tuple[Any, ...]:
        indices = np.asarray(indices, dtype=np.int64)
        return tuple(_gather(t, indices) for t in self.tensors)


def _gather(values: Any, indices: np.ndarray) -> Any:
    if not _is_tensor(values):
        return values[indices]
    if values.device.type == "cpu":
        from ..ops.creation import from_numpy

        gathered = np.ascontiguousarray(values.detach().numpy()[indices])
        return from_numpy(gathered)
    from ..ops.creation import tensor

    return values.index_select(0, tensor(indices, device=values.device))


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices`` (in that order)."""

    def __init__(self, dataset: Any, indices: Sequence[int] | np.ndarray) -> None:
        self.dataset = dataset
        self.indices = np.asarray(indices, dtype=np.int64)
        size = len(dataset)
        if self.indices.size and (self.indices.min() < -size or self.indices.max() >= size):
            raise IndexError(f"Subset indices out of range for a dataset of {size} samples")

    def __len__(self) -> int:
        return int(self.indices.shape[0])

    def __getitem__(self, index: int) -> Any:
        return self.dataset[int(self.indices[index])]

    def get_batch(self, indices: np.ndarray) -> Any:
        mapped = self.indices[np.asarray(indices, dtype=np.int64)]
        if hasattr(self.dataset, "get_batch"):
            return self.dataset.get_batch(mapped)
        return default_collate([self.dataset[int(i)] for i in mapped])

    def __getattr__(self, name: str) -> Any:
        # classes, image_shape, mean, ... of the underlying dataset.
        if name == "dataset":
            raise AttributeError(name)
        return getattr(self.dataset, name)


def default_collate(samples: list[Any]) -> Any:
    """Stack a list of samples into a batch: tuples element by element, NumPy arrays and
    numbers with ``np.stack``, tensors with ``kg.stack``, dicts key by key."""
    if not samples:
        raise ValueError("cannot collate an empty batch")
    first = samples[0]
    if isinstance(first, tuple | list):
        return type(first)(default_collate(list(column)) for column in zip(*samples))
    if isinstance(first, dict):
        return {key: default_collate([sample[key] for sample in samples]) for key in first}
    if _is_tensor(first):
        from ..ops.movement import stack

        return stack(samples)
    return np.stack([np.asarray(sample) for sample in samples])


def _to_device(batch: Any, device: Any) -> Any:
    """NumPy arrays -> tensors on ``device``; tensors moved there; containers recursed."""
    if isinstance(batch, tuple | list):
        return type(batch)(_to_device(item, device) for item in batch)
    if isinstance(batch, dict):
        return {key: _to_device(value, device) for key, value in batch.items()}
    if _is_tensor(batch):
        return batch if device is None else batch.to(device)
    if isinstance(batch, np.ndarray):
        from ..device import as_device, default_device
        from ..ops.creation import from_numpy, tensor

        target = default_device() if device is None else as_device(device)
        if target.type == "cpu" and batch.flags.c_contiguous and batch.dtype.kind in "fiub":
            try:
                return from_numpy(batch)
            except TypeError:
                pass
        return tensor(batch, device=target)
    return batch


class DataLoader:
    """Iterate over a dataset in batches.

    Args:
        dataset: a :class:`Dataset` (or any object with ``__len__`` and ``__getitem__``).
        batch_size: samples per batch.
        shuffle: visit the samples in a new random order every epoch.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        seed: seed of the shuffling; epoch ``e`` uses the permutation drawn from
            ``(seed, e)``, so a run is reproducible and a resumed run (see
            :meth:`state_dict`) sees the same order as an uninterrupted one. When None,
            the seed comes from ``generator``, else from ``kg.manual_seed``, else from
            fresh OS entropy.
        generator: a ``numpy.random.Generator`` to draw the seed from.
        device: move every batch there (NumPy arrays become tensors on that device).
        collate_fn: turns a list of samples into a batch (datasets with ``get_batch``
            bypass it unless it is given).
        sampler: an iterable of sample indices to visit instead of the whole dataset
            (``DistributedSampler``: this rank's shard). Not with ``shuffle``: the
            sampler decides the order. A sampler with ``set_epoch`` follows the loader's
            epoch (iterating sets it, then advances both); calling ``sampler.set_epoch(e)``
            yourself before iterating, as in PyTorch, moves the loader to epoch ``e``.

    >>> import kernelgrad as kg
    >>> data = kg.data.TensorDataset(kg.arange(10))
    >>> [batch.tolist() for (batch,) in kg.data.DataLoader(data, batch_size=4)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        *,
        seed: int | None = None,
        generator: np.random.Generator | None = None,
        device: Any = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        sampler: Any = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if sampler is not None and shuffle:
            raise ValueError(
                "DataLoader: shuffle=True and a sampler exclude each other (the sampler "
                "decides the order); shuffle with the sampler, e.g. "
                "DistributedSampler(dataset, shuffle=True)"
            )
        self.sampler = sampler
        self._sampler_epoch: int | None = None  # the epoch the loader last gave it
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.device = device
        self.collate_fn = collate_fn
        if seed is None:
            if generator is not None:
                seed = int(generator.integers(0, 2**63 - 1))
            else:
                from ..ops.creation import _SeedState

                if _SeedState.seed is not None:
                    seed = _SeedState.seed
                else:
                    seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
        self.seed = int(seed)
        self.epoch = 0

    def __len__(self) -> int:
        count = len(self.dataset) if self.sampler is None else len(self.sampler)
        if self.drop_last:
            return count // self.batch_size
        return math.ceil(count / self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use epoch ``epoch``'s order (iterating advances it)."""
        self.epoch = int(epoch)
        self._give_sampler_epoch(self.epoch)

    def _give_sampler_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
            self._sampler_epoch = epoch

    def _sync_sampler(self) -> None:
        """Before an iteration: an epoch the user set on the sampler wins, else the
        sampler gets the loader's."""
        if not hasattr(self.sampler, "set_epoch"):
            return
        current = getattr(self.sampler, "epoch", None)
        if current is not None and current != self._sampler_epoch:
            self.epoch = int(current)
        self._give_sampler_epoch(self.epoch)

    def state_dict(self) -> dict[str, int]:
        """The shuffling state: restore it with :meth:`load_state_dict` to continue."""
        return {"seed": int(getattr(self.sampler, "seed", self.seed)), "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        if hasattr(self.sampler, "seed"):
            self.sampler.seed = self.seed
        self._give_sampler_epoch(self.epoch)

    def order(self, epoch: int | None = None) -> np.ndarray:
        """The sample indices of an epoch, in visiting order."""
        if self.sampler is not None:
            if epoch is not None:
                self._give_sampler_epoch(epoch)
            return np.fromiter(iter(self.sampler), dtype=np.int64)
        count = len(self.dataset)
        if not self.shuffle:
            return np.arange(count, dtype=np.int64)
        epoch = self.epoch if epoch is None else epoch
        return np.random.default_rng([self.seed, epoch]).permutation(count)

    def __iter__(self) -> Iterator[Any]:
        if self.sampler is not None:
            self._sync_sampler()
        order = self.order()
        self.epoch += 1
        batches = len(self)
        use_get_batch = self.collate_fn is None and hasattr(self.dataset, "get_batch")
        for number in range(batches):
            indices = order[number * self.batch_size : (number + 1) * self.batch_size]
            if use_get_batch:
                batch = self.dataset.get_batch(indices)
            else:
                collate = self.collate_fn or default_collate
                batch = collate([self.dataset[int(i)] for i in indices])
            yield _to_device(batch, self.device)

    def __repr__(self) -> str:
        return (
            f"DataLoader({len(self.dataset)} samples, batch_size={self.batch_size}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last}, device={self.device})"
        )
