"""``torch.utils.data.dataset``: dataset classes and ``random_split``."""

from __future__ import annotations

from ...data.loader import ConcatDataset, Dataset, Subset, TensorDataset, random_split

__all__ = ["ConcatDataset", "Dataset", "Subset", "TensorDataset", "random_split"]
