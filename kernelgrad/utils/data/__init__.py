"""``kg.utils.data``: PyTorch's ``torch.utils.data``, made of :mod:`kernelgrad.data`.

The same objects as ``kg.data`` (``kg.utils.data.DataLoader is kg.data.DataLoader``),
also under the submodules PyTorch programs import from: ``dataloader``, ``dataset``,
``sampler`` and ``distributed``.

>>> import kernelgrad as kg
>>> from kernelgrad.utils.data import DataLoader, RandomSampler, TensorDataset
>>> data = TensorDataset(kg.arange(6))
>>> loader = DataLoader(data, batch_size=3, sampler=RandomSampler(data, seed=0))
>>> sorted(sum((batch.tolist() for (batch,) in loader), []))
[0, 1, 2, 3, 4, 5]
"""

from __future__ import annotations

import importlib
from typing import Any

from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
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

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]


def __getattr__(name: str) -> Any:
    # DistributedSampler lives in kernelgrad.data.distributed, loaded on first use.
    if name == "DistributedSampler":
        return importlib.import_module(".distributed", __name__).DistributedSampler
    if name == "distributed":
        return importlib.import_module(".distributed", __name__)
    raise AttributeError(f"module 'kernelgrad.utils.data' has no attribute {name!r}")
