"""``torch.utils.data.dataloader``: the DataLoader, collation and worker information."""

from __future__ import annotations

from ...data.loader import DataLoader, default_collate, default_convert
from ...data.workers import WorkerInfo, get_worker_info

__all__ = ["DataLoader", "WorkerInfo", "default_collate", "default_convert", "get_worker_info"]
