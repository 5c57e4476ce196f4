"""``torch.utils.data.distributed``: ``DistributedSampler`` (one rank's shard), from
:mod:`kernelgrad.data.distributed`, loaded on first use."""

from __future__ import annotations

from typing import Any

__all__ = ["DistributedSampler"]  # noqa: F822 (provided by __getattr__)


def __getattr__(name: str) -> Any:
    if name == "DistributedSampler":
        from ...data.distributed import DistributedSampler

        return DistributedSampler
    raise AttributeError(f"module 'kernelgrad.utils.data.distributed' has no attribute {name!r}")
