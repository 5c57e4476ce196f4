"""``kg.utils``: PyTorch's ``torch.utils`` paths, so that ``import kernelgrad as torch``
finds ``torch.utils.data.DataLoader`` and ``torch.utils.tensorboard.SummaryWriter``.

* ``kg.utils.data``: datasets, the DataLoader, samplers and ``random_split`` (the
  objects of :mod:`kernelgrad.data`, under ``torch.utils.data``'s module names);
* ``kg.utils.tensorboard``: ``SummaryWriter``, which needs the optional ``tensorboard``
  package (``pip install kernelgrad[tensorboard]``).

>>> import kernelgrad as torch
>>> from torch.utils.data import DataLoader, TensorDataset
>>> loader = torch.utils.data.DataLoader(TensorDataset(torch.arange(4)), batch_size=2)
>>> [batch.tolist() for (batch,) in loader]
[[0, 1], [2, 3]]
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = ("data", "hooks", "tensorboard")
_SUBMODULES += ("checkpoint",)  # torch.utils.checkpoint (activation checkpointing)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'kernelgrad.utils' has no attribute {name!r}")
