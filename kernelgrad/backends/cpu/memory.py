"""A cache of large host buffers, so that a training loop does not fault in fresh pages on
every step.

glibc serves allocations above its mmap threshold with fresh ``mmap`` pages and returns
them to the kernel on free. A training step allocates and frees the same large buffers
(activations, gradients, patch matrices) every time, so every step paid thousands of
page faults (zeroing ~10 MB for LeNet-5: 5-6 ms of a 23 ms step). The cache keeps the
freed blocks and hands them out again.

A buffer is offered back to the cache when the NumPy array the backend handed out is
garbage collected (a ``weakref.finalize`` on it). That alone is not enough: NumPy
collapses a view's ``base`` to the array that owns the memory -- the cache's block -- so
an array a user got from ``Tensor.numpy()`` keeps the *block* alive, not the array the
finalizer watches. Every view of a block's memory holds a reference to the block,
though, so on release the block's reference count says whether anything outside the
cache can still see it; if so the block is not cached (it is freed normally when the
last view goes), and a block is never reused while anything can read it. Small buffers
(below ``min_bytes``) go to the system allocator (below glibc's default mmap threshold,
it reuses them itself).
"""

from __future__ import annotations

import sys
import threading
import weakref
from collections import defaultdict

import numpy as np

_KIB = 1024
_MIB = 1024 * 1024


def size_class(nbytes: int) -> int:
    """Block size serving ``nbytes``: a multiple of 64 KiB (of 1 MiB above 16 MiB)."""
    step = 64 * _KIB if nbytes <= 16 * _MIB else _MIB
    return -(-nbytes // step) * step


class HostBufferCache:
    """Hands out NumPy arrays backed by reusable blocks (see the module docstring)."""

    def __init__(self, min_bytes: int = 128 * _KIB, max_cached_bytes: int = 1 << 30) -> None:
        self.min_bytes = min_bytes
        self.max_cached_bytes = max_cached_bytes
        self._free: dict[int, list[np.ndarray]] = defaultdict(list)
        self._lock = threading.Lock()
        self.cached_bytes = 0
        self.hits = 0
        self.misses = 0

    def empty(self, numel: int, dtype: np.dtype) -> np.ndarray:
        nbytes = numel * dtype.itemsize
        if nbytes < self.min_bytes:
            return np.empty(numel, dtype)
        size = size_class(nbytes)
        with self._lock:
            blocks = self._free.get(size)
            block = blocks.pop() if blocks else None
            if block is not None:
                self.cached_bytes -= size
                self.hits += 1
            else:
                self.misses += 1
        if block is None:
            block = np.empty(size, dtype=np.uint8)
        array = block[:nbytes].view(dtype)
        weakref.finalize(array, self._release, block)
        return array

    def _release(self, block: np.ndarray) -> None:
        if sys.getrefcount(block) > _RELEASE_REFERENCES:
            return  # a view of its memory is still alive somewhere: never reuse it
        with self._lock:
            if self.cached_bytes + block.size > self.max_cached_bytes:
                return  # over budget: let it go back to the system
            self._free[block.size].append(block)
            self.cached_bytes += block.size

    def clear(self) -> None:
        """Give every cached block back to the system allocator."""
        with self._lock:
            self._free.clear()
            self.cached_bytes = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            blocks = sum(len(v) for v in self._free.values())
            return {
                "cached_bytes": self.cached_bytes,
                "cached_blocks": blocks,
                "hits": self.hits,
                "misses": self.misses,
            }


def _references_at_release() -> int:
    """The reference count a block has inside ``_release`` when nothing else holds it
    (the finalizer's arguments, the parameter, getrefcount's own): measured once, so the
    check does not depend on interpreter details."""
    seen: list[int] = []

    class _Probe(HostBufferCache):
        def _release(self, block: np.ndarray) -> None:
            seen.append(sys.getrefcount(block))

    array = _Probe(min_bytes=0).empty(1, np.dtype(np.float32))
    del array
    return seen[0]


_RELEASE_REFERENCES = _references_at_release()
