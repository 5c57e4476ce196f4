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

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "TensorDataset",
    "default_collate",
    "default_convert",
    "initial_seed",
    "random_split",
]


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


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define ``__iter__`` (PyTorch's
    ``IterableDataset``). A :class:`DataLoader` batches what it yields in order; with
    ``num_workers=N`` each worker iterates the dataset itself (split the work with
    :func:`get_worker_info`, as in PyTorch, or every sample comes N times)."""

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __getitem__(self, index: int) -> Any:
        raise TypeError(
            f"{type(self).__name__} is an IterableDataset: iterate over it (or a DataLoader "
            "of it) instead of indexing it"
        )

    def __add__(self, other: Any) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several iterable datasets one after the other."""

    def __init__(self, datasets: Sequence[Any]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[Any]:
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from dataset

    def __len__(self) -> int:
        return sum(len(dataset) for dataset in self.datasets)


class StackDataset(Dataset):
    """Samples of several datasets of one length side by side: a tuple
    (``StackDataset(a, b)``) or a dict (``StackDataset(image=a, label=b)``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError(
                "StackDataset: give the datasets as positional arguments (tuple samples) or "
                "as keyword arguments (dict samples), not both"
            )
        datasets = list(args) or list(kwargs.values())
        if not datasets:
            raise ValueError("StackDataset: at least one dataset is needed")
        length = len(datasets[0])
        if any(len(dataset) != length for dataset in datasets):
            raise ValueError("Size mismatch between datasets")
        self._length = length
        self.datasets: Any = tuple(args) if args else dict(kwargs)

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self) -> int:
        return self._length


def default_convert(data: Any) -> Any:
    """PyTorch's ``default_convert``: NumPy arrays become tensors by ``kg.as_tensor``
    (sharing a writable array's memory on the CPU, as ``torch.as_tensor``; read-only
    arrays are copied),
    NumPy scalars become 0-d tensors, containers are converted element by element (a
    named tuple comes back as its own type), anything else is left as it is; no batching
    (what a DataLoader with ``batch_size=None`` applies to each sample)."""
    if isinstance(data, np.ndarray) and data.dtype.kind in "fiub":
        from ..ops.creation import as_tensor

        return as_tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind in "fiub":
        from ..ops.creation import tensor

        return tensor(data)
    if isinstance(data, dict):
        return {key: default_convert(value) for key, value in data.items()}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(item) for item in data))
    if isinstance(data, tuple | list):
        return type(data)(default_convert(item) for item in data)
    return data


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


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


class ConcatDataset(Dataset):
    """The samples of several datasets one after the other.

    >>> import kernelgrad as kg
    >>> both = kg.data.ConcatDataset([kg.data.TensorDataset(kg.arange(3)),
    ...                               kg.data.TensorDataset(kg.arange(10, 12))])
    >>> len(both), both[3][0].item()
    (5, 10)
    """

    def __init__(self, datasets: Sequence[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset needs at least one dataset")
        self.cumulative_sizes = np.cumsum([len(dataset) for dataset in self.datasets]).tolist()

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for a dataset of {len(self)} samples")
        which = int(np.searchsorted(self.cumulative_sizes, index, side="right"))
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


def initial_seed(seed: int | None = None, generator: Any = None) -> int:
    """A shuffling seed: ``seed``; else one drawn from ``generator`` (a NumPy
    ``Generator``, or an object with ``initial_seed()`` such as a torch-style generator);
    else the last ``kg.manual_seed``; else fresh OS entropy."""
    if seed is not None:
        return int(seed)
    if generator is not None:
        if hasattr(generator, "initial_seed"):
            return int(generator.initial_seed())
        return int(generator.integers(0, 2**63 - 1))
    from ..ops.creation import _SeedState

    if _SeedState.seed is not None:
        return int(_SeedState.seed)
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)


def random_split(
    dataset: Any,
    lengths: Sequence[int | float],
    generator: Any = None,
    *,
    seed: int | None = None,
) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random :class:`Subset` s of the given
    lengths, or fractions summing to 1 (the remainder going one by one to the first
    subsets, as in PyTorch). The permutation is drawn from ``seed`` (else ``generator``,
    else ``kg.manual_seed``'s, else OS entropy).

    >>> import kernelgrad as kg
    >>> train, test = kg.data.random_split(range(10), [0.8, 0.2], seed=0)
    >>> len(train), len(test), sorted([*train.indices, *test.indices]) == list(range(10))
    (8, 2, True)
    """
    count = len(dataset)
    lengths = list(lengths)
    if lengths and all(isinstance(n, float) for n in lengths) and math.isclose(sum(lengths), 1):
        sizes = [math.floor(count * fraction) for fraction in lengths]
        for i in range(count - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
    if (
        not all(isinstance(n, int | np.integer) and n >= 0 for n in lengths)
        or sum(lengths) != count
    ):
        raise ValueError(
            f"random_split: lengths {lengths} must be non-negative integers summing to the "
            f"dataset's {count} samples, or fractions summing to 1"
        )
    order = np.random.default_rng(initial_seed(seed, generator)).permutation(count)
    bounds = np.cumsum([0, *lengths])
    return [Subset(dataset, order[start:stop]) for start, stop in itertools.pairwise(bounds)]


def default_collate(samples: list[Any]) -> Any:
    """Stack a list of samples into a batch: tuples element by element, NumPy arrays and
    numbers with ``np.stack``, tensors with ``kg.stack``, dicts key by key."""
    if not samples:
        raise ValueError("cannot collate an empty batch")
    first = samples[0]
    if _is_namedtuple(first):  # the same type back, field by field (as in PyTorch)
        return type(first)(*(default_collate(list(column)) for column in zip(*samples)))
    if isinstance(first, tuple | list):
        return type(first)(default_collate(list(column)) for column in zip(*samples))
    if isinstance(first, dict):
        return {key: default_collate([sample[key] for sample in samples]) for key in first}
    if _is_tensor(first):
        from ..ops.movement import stack

        return stack(samples)
    return np.stack([np.asarray(sample) for sample in samples])


def _to_device(batch: Any, device: Any) -> Any:
    """NumPy arrays -> tensors on ``device`` by ``kg.as_tensor``, as ``default_convert``
    (sharing a writable array's memory on the CPU); tensors moved there; containers
    recursed (a named tuple comes back as its own type)."""
    if _is_namedtuple(batch):
        return type(batch)(*(_to_device(item, device) for item in batch))
    if isinstance(batch, tuple | list):
        return type(batch)(_to_device(item, device) for item in batch)
    if isinstance(batch, dict):
        return {key: _to_device(value, device) for key, value in batch.items()}
    if _is_tensor(batch):
        return batch if device is None else batch.to(device)
    if isinstance(batch, np.ndarray):
        from ..ops.creation import as_tensor

        return as_tensor(batch, device=device)
    return batch


class DataLoader:
    """Iterate over a dataset in batches.

    Args:
        dataset: a :class:`Dataset` (or any object with ``__len__`` and ``__getitem__``).
        batch_size: samples per batch.
        shuffle: visit the samples in a new random order every epoch.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        batch_sampler: an iterable of lists of indices, one list per batch (instead of
            ``batch_size``, ``shuffle``, ``sampler`` and ``drop_last``); given the
            loader's epoch through ``set_epoch`` when it has one.
        num_workers: threads that load batches ahead (0: in the iterating thread). The
            batches are the same; see :mod:`kernelgrad.data.workers` for why threads.
        prefetch_factor: batches each worker loads ahead (default 2).
        persistent_workers: keep the worker threads between epochs.
        worker_init_fn: called as ``worker_init_fn(worker_id)`` in each worker first.
        timeout: seconds to wait for a worker's batch before raising (0: forever).
        pin_memory, pin_memory_device, multiprocessing_context, in_order: accepted for
            PyTorch's signature; host memory is not page-locked (``device=`` moves
            batches to a GPU), workers are threads, and batches always come in order.
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
        batch_sampler: Any = None,
        num_workers: int = 0,
        pin_memory: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], Any] | None = None,
        multiprocessing_context: Any = None,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        seed: int | None = None,
        generator: np.random.Generator | None = None,
        device: Any = None,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        sampler: Any = None,
    ) -> None:
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (
                ("shuffle", shuffle or None),
                ("sampler", sampler),
                ("batch_sampler", batch_sampler),
            ):
                if value is not None:
                    raise ValueError(
                        f"DataLoader with IterableDataset: expected unspecified {name} "
                        f"option, but got {name}={value!r} (the dataset's iterator decides "
                        "the order)"
                    )
        shuffle = bool(shuffle)  # PyTorch's default is None
        _check_worker_options(num_workers, prefetch_factor, persistent_workers, timeout)
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler gives whole batches, so it excludes "
                    "batch_size, shuffle, sampler and drop_last"
                )
            batch_size = getattr(batch_sampler, "batch_size", 1)
        if batch_size is None:  # no automatic batching: samples one by one
            if drop_last:
                raise ValueError(
                    "batch_size=None option disables auto-batching and is mutually "
                    "exclusive with drop_last"
                )
        elif not isinstance(batch_size, int) or batch_size < 1:
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
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = 2 if prefetch_factor is None else prefetch_factor
        self.persistent_workers = persistent_workers
        self.worker_init_fn = worker_init_fn
        self.timeout = timeout
        self.pin_memory = pin_memory
        self._workers: Any = None  # the persistent WorkerPool
        self.seed = initial_seed(seed, generator)
        self.epoch = 0

    def __len__(self) -> int:
        count = len(self.dataset) if self.sampler is None else len(self.sampler)
        if self.batch_size is None:
            return count
        if self.drop_last:
            return count // self.batch_size
        if self.batch_sampler is not None:  # (which excludes drop_last)
            return len(self.batch_sampler)
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
        if isinstance(self.dataset, IterableDataset):
            yield from self._iterate_stream()
            return
        if self.sampler is not None:
            self._sync_sampler()
        order = self.order()
        self.epoch += 1
        if self.num_workers == 0:
            batches: Iterator[Any] = map(self._load, self._index_batches(order))
        else:
            batches = self._from_workers(self._index_batches(order))
        for batch in batches:
            yield _to_device(batch, self.device)

    def _iterate_stream(self) -> Iterator[Any]:
        """An IterableDataset's batches: its samples in the order its iterator gives them,
        batched (or converted one by one with ``batch_size=None``); with workers, each
        worker iterates the dataset and the batches come from the workers in turn, as
        in PyTorch."""
        self.epoch += 1
        if self.num_workers == 0:
            batches = self._stream_batches(iter(self.dataset))
        else:
            batches = self._stream_from_workers()
        for batch in batches:
            yield _to_device(batch, self.device)

    def _stream_batches(self, samples: Iterator[Any]) -> Iterator[Any]:
        if self.batch_size is None:
            convert = self.collate_fn or default_convert
            for sample in samples:
                yield convert(sample)
            return
        collate = self.collate_fn or default_collate
        while True:
            chunk = list(itertools.islice(samples, self.batch_size))
            if not chunk or (self.drop_last and len(chunk) < self.batch_size):
                return
            yield collate(chunk)

    def _stream_from_workers(self) -> Iterator[Any]:
        return self._with_workers(
            lambda pool: pool.run_streams(lambda: self._stream_batches(iter(self.dataset)))
        )

    def _index_batches(self, order: np.ndarray) -> Iterator[Any]:
        """The indices of each batch of this epoch."""
        if self.batch_size is None:  # one index at a time
            return iter(order.tolist())
        if self.batch_sampler is not None:
            if hasattr(self.batch_sampler, "set_epoch"):
                self.batch_sampler.set_epoch(self.epoch - 1)
            return iter(self.batch_sampler)
        size = self.batch_size
        stop = len(order) - len(order) % size if self.drop_last else len(order)
        return (order[start : start + size] for start in range(0, stop, size))

    def _load(self, indices: Any) -> Any:
        """One batch: a bulk ``get_batch`` when the dataset has one, else the samples
        collated (one sample, converted, with ``batch_size=None``)."""
        if self.batch_size is None:
            return (self.collate_fn or default_convert)(self.dataset[int(indices)])
        if self.collate_fn is None and hasattr(self.dataset, "get_batch"):
            return self.dataset.get_batch(np.asarray(indices, dtype=np.int64))
        collate = self.collate_fn or default_collate
        return collate([self.dataset[int(i)] for i in indices])

    def _from_workers(self, index_batches: Iterator[Any]) -> Iterator[Any]:
        return self._with_workers(lambda pool: pool.run(self._load, index_batches))

    def _with_workers(self, run: Callable[[Any], Iterator[Any]]) -> Iterator[Any]:
        """``run(pool)``'s batches from the worker pool (kept for the next epoch with
        ``persistent_workers``, else shut down when the epoch ends)."""
        from .workers import WorkerPool

        pool = self._workers or WorkerPool(
            self.num_workers,
            self.prefetch_factor,
            self.dataset,
            self.seed,
            self.worker_init_fn,
            self.timeout,
        )
        if self.persistent_workers:
            self._workers = pool
        try:
            yield from run(pool)
        finally:
            if not self.persistent_workers:
                pool.shutdown()

    def __repr__(self) -> str:
        if isinstance(self.dataset, IterableDataset):
            kind = type(self.dataset).__name__
            return f"DataLoader({kind}, batch_size={self.batch_size}, device={self.device})"
        return (
            f"DataLoader({len(self.dataset)} samples, batch_size={self.batch_size}, "
            f"shuffle={self.shuffle}, drop_last={self.drop_last}, device={self.device})"
        )


def _check_worker_options(
    num_workers: Any, prefetch_factor: Any, persistent_workers: Any, timeout: Any
) -> None:
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
        raise ValueError(f"num_workers must be an integer >= 0, got {num_workers!r}")
    if num_workers == 0 and (prefetch_factor is not None or persistent_workers):
        raise ValueError(
            "DataLoader: prefetch_factor and persistent_workers need worker threads; give "
            "num_workers > 0 (as in PyTorch)"
        )
    if prefetch_factor is not None and (
        not isinstance(prefetch_factor, int) or prefetch_factor < 1
    ):
        raise ValueError(f"prefetch_factor must be a positive integer, got {prefetch_factor!r}")
    if not isinstance(timeout, int | float) or timeout < 0:
        raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
