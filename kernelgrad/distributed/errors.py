"""Errors of ``kg.distributed``."""

from __future__ import annotations

__all__ = ["DistributedError", "CollectiveTimeoutError"]


class DistributedError(RuntimeError):
    """A process group is missing, misconfigured, or failed (a rank died, shapes differ
    across ranks, MPI or NCCL reported an error)."""


class CollectiveTimeoutError(DistributedError, TimeoutError):
    """A collective did not complete within the group's timeout.

    ``suspects`` lists the ranks that did not answer (hung, dead, or gone without
    reaching the collective); ``sequence`` is the collective's number on this rank."""

    def __init__(self, message: str, suspects: list[int], sequence: int) -> None:
        super().__init__(message)
        self.suspects = suspects
        self.sequence = sequence
