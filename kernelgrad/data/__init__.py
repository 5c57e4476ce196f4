"""Datasets, data loading and dataset files (``kg.data``).

* :class:`Dataset`, :class:`TensorDataset`, :class:`Subset` and :class:`DataLoader`
  (batches, seeded shuffling, ``drop_last``, ``device=``, ``sampler=``), as in PyTorch;
  :class:`DistributedSampler` (one rank's shard in data-parallel training).
* :func:`read_idx` / :func:`write_idx`: the IDX format of MNIST and Fashion-MNIST.
* :func:`find_dataset`, :func:`download_dataset`, :func:`load_dataset` and the
  dataset classes :class:`FashionMNIST`, :class:`MNIST` and :class:`Digits` (a small
  real dataset embedded in the package).
* Samplers (:class:`RandomSampler`, :class:`SequentialSampler`, :class:`BatchSampler`,
  ...), :func:`random_split`, :class:`ConcatDataset`, and worker threads
  (``DataLoader(num_workers=N)``, :func:`get_worker_info`); ``kg.utils.data`` has all of
  this under PyTorch's module names.

>>> import kernelgrad as kg
>>> train = kg.data.load_dataset("digits", train=True)
>>> images, labels = next(iter(kg.data.DataLoader(train, batch_size=32, shuffle=True, seed=0)))
>>> tuple(images.shape), labels.dtype
((32, 1, 28, 28), kg.int64)
"""

from __future__ import annotations

from .datasets import (
    DATASETS,
    MNIST,
    DatasetLocation,
    DatasetSpec,
    Digits,
    FashionMNIST,
    IDXImageDataset,
    available_datasets,
    dataset_cache_dir,
    download_dataset,
    find_dataset,
    get_spec,
    how_to_get,
    load_dataset,
    register_dataset,
)
from .distributed import DistributedSampler
from .download import download_file, file_digest
from .errors import ChecksumError, DatasetError, DatasetNotFoundError, DownloadError, IDXError
from .idx import read_idx, write_idx
from .loader import (
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    default_collate,
    default_convert,
    initial_seed,
    random_split,
)
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from .workers import WorkerInfo, get_worker_info

__all__ = [
    "DATASETS",
    "BatchSampler",
    "ChainDataset",
    "ChecksumError",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DatasetError",
    "DatasetLocation",
    "DatasetNotFoundError",
    "DatasetSpec",
    "Digits",
    "DistributedSampler",
    "DownloadError",
    "FashionMNIST",
    "IDXError",
    "IterableDataset",
    "StackDataset",
    "default_convert",
    "IDXImageDataset",
    "MNIST",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "WorkerInfo",
    "available_datasets",
    "dataset_cache_dir",
    "default_collate",
    "download_dataset",
    "download_file",
    "file_digest",
    "find_dataset",
    "get_spec",
    "get_worker_info",
    "how_to_get",
    "initial_seed",
    "load_dataset",
    "random_split",
    "read_idx",
    "register_dataset",
    "write_idx",
]
