"""The caching device-memory pool of the CUDA backend.

numba-cuda's default allocator makes one synchronous ``cuMemAlloc`` per array and frees it
again later; a training step that creates hundreds of temporaries would pay for that on
every step. The pool keeps freed blocks and hands them out again:

* **Size classes.** A request of ``n`` bytes is rounded up to a class: 512 bytes at
  least, then four classes per power of two (``5/8``, ``6/8``, ``7/8`` and ``8/8`` of it),
  so rounding wastes less than a quarter. Each class has a free list; a request is
  served from its class's list, or by a new *raw* block from the device.
* **One raw block per cached block.** Blocks are never split or merged, so a block's
  memory is always aligned as the driver gave it, and the bookkeeping is a dict of lists.
  A training loop asks for the same sizes on every step, so after the first step every
  request is a cache hit (``num_raw_allocs`` stops growing, which the tests check).
* **Return on garbage collection.** A tensor's buffer is a typed 1-D numba device array
  laid over a block. A weak reference to that array puts the block on a pending queue
  when the last reference goes (the last tensor that shares the storage); the next pool
  call moves pending blocks back to their free lists. The callbacks never take the
  pool's lock, so a garbage collection that runs inside a pool call cannot deadlock.
* **Stream order.** Every kernel, copy and vendor call of the backend runs on the
  device's one stream (``runtime.DeviceMemory.stream``), so a block reused by a later
  kernel is only written after earlier kernels that read it have finished: no
  synchronisation is needed on free.
* **Out of memory.** When the device (or an artificial limit, ``set_limit``) refuses a
  raw block, the pool returns its cached blocks (and CuPy's, through
  ``release_hooks``) to the driver, runs the garbage
  collector (reference cycles may hold dead tensors) and tries once more before raising
  :class:`OutOfMemoryError` with the request, the bytes in use, reserved and free. The
  pool stays usable afterwards.
* **Statistics.** ``stats()`` (``kg.cuda.memory_stats()``) counts bytes in use,
  reserved, cached and their peaks, and the number of allocations, cache hits, raw
  allocations and frees. ``empty_cache()`` hands cached blocks back to the driver.

Under the CUDA simulator a raw block is numba's fake device array (host memory), and
everything above runs unchanged, so CI exercises the pool's logic without a GPU.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections import deque
from typing import Any

import numpy as np

from .runtime import DeviceMemory, is_out_of_memory

MIN_BLOCK = 512


STAT_KEYS = (
    "allocated_bytes",
    "requested_bytes",
    "reserved_bytes",
    "cached_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "active_blocks",
    "cached_blocks",
    "num_allocs",
    "num_frees",
    "num_cache_hits",
    "num_raw_allocs",
    "num_raw_frees",
    "num_ooms",
    "limit_bytes",
    "vendor_pool_used_bytes",
    "vendor_pool_reserved_bytes",
)


def zero_stats() -> dict[str, int | None]:
    """The statistics of a pool that has done nothing yet."""
    stats: dict[str, int | None] = dict.fromkeys(STAT_KEYS, 0)
    stats["limit_bytes"] = None
    return stats


class OutOfMemoryError(RuntimeError):
    """The GPU (or the pool's limit) cannot provide the memory a tensor needs.

    Also available as ``kg.cuda.OutOfMemoryError``; like PyTorch's, it is a
    ``RuntimeError``."""


def round_size(nbytes: int) -> int:
    """The size class that serves a request of ``nbytes`` bytes.

    >>> [round_size(n) for n in (1, 512, 513, 1000, 1025, 5000)]
    [512, 512, 640, 1024, 1280, 5120]
    """
    if nbytes <= MIN_BLOCK:
        return MIN_BLOCK
    power = 1 << (nbytes - 1).bit_length()  # the next power of two >= nbytes
    step = power // 8
    return -(-nbytes // step) * step


_SIZE_CLASSES: dict[int, int] = {}  # round_size of the request sizes seen so far


def format_bytes(count: int | None) -> str:
    if count is None:
        return "unknown"
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _requesting_code() -> str:
    """`` in <op> (called from <file>:<line>)`` for the allocation being made: the
    innermost kernelgrad op on the stack and the innermost frame outside kernelgrad.
    Only computed for error messages."""
    import os
    import traceback

    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ops_folder = os.path.join(package, "ops")
    op = caller = None
    for frame in reversed(traceback.extract_stack()[:-3]):
        path = os.path.abspath(frame.filename)
        if op is None and path.startswith(ops_folder):
            op = frame.name
        if not path.startswith(package):
            caller = f"{os.path.basename(path)}:{frame.lineno}"
            break
    text = f" in {op}" if op else ""
    return text + (f" (called from {caller})" if caller else "")


class CachingPool:
    """Device memory for one device. See the module docstring for the design."""

    def __init__(self, memory: DeviceMemory, device_name: str) -> None:
        self.memory = memory
        self.device_name = device_name
        self.limit: int | None = None
        # Called when cached memory is handed back (empty_cache, out of memory): the
        # vendor libraries' pools (CuPy's) free their cached blocks too.
        self.release_hooks: list[Any] = []
        self._free: dict[int, list[Any]] = {}
        # (weak reference, size class, bytes requested, block) of each buffer handed out,
        # by the reference's id; queued on ``_pending`` when the buffer is collected
        self._pending: deque[tuple[weakref.ref, int, int, Any]] = deque()
        self._watched: dict[int, tuple[weakref.ref, int, int, Any]] = {}
        self._released = self._release  # one bound method for every weak reference
        # while a CUDA graph is captured: every buffer handed out, kept by the graph
        # (graphs.py), whose kernels keep using their addresses
        self.pinned: list[Any] | None = None
        self._lock = threading.RLock()
        self._allocated = 0
        self._requested = 0
        self._reserved = 0
        self._peak_allocated = 0
        self._peak_reserved = 0
        # blocks handed out and returned (in use: the difference); served from a free
        # list: every allocation that was not a raw one
        self._allocs = self._frees = 0
        self._raw_allocs = self._raw_frees = self._ooms = 0

    # --- allocation -------------------------------------------------------------------
    def allocate(self, numel: int, dtype: np.dtype) -> Any:
        """A typed 1-D device array of ``numel`` elements (contents undefined)."""
        nbytes = numel * dtype.itemsize
        size = _SIZE_CLASSES.get(nbytes)
        if size is None:
            size = round_size(nbytes)
            if len(_SIZE_CLASSES) < 65536:
                _SIZE_CLASSES[nbytes] = size
        with self._lock:
            if self._pending:
                self._drain()
            blocks = self._free.get(size)
            if blocks:  # the common case after the first training step
                block = blocks.pop()
            else:
                block = self._allocate_raw(size, nbytes, numel, dtype)
            self._allocs += 1
            self._allocated += size
            self._requested += nbytes
            if self._allocated > self._peak_allocated:
                self._peak_allocated = self._allocated
        buffer = self.memory.typed(block, numel, dtype)
        # A weak reference whose callback queues the block when the buffer is collected
        # (weakref.finalize does the same with twice the bookkeeping per allocation).
        watch = weakref.ref(buffer, self._released)
        self._watched[id(watch)] = (watch, size, nbytes, block)
        if self.pinned is not None:
            self.pinned.append(buffer)
        return buffer

    def _release(self, watch: weakref.ref) -> None:
        """A buffer was collected: queue its block (no lock; see the module docstring)."""
        self._pending.append(self._watched.pop(id(watch)))

    def _take_cached(self, size: int) -> Any:
        blocks = self._free.get(size)
        if blocks:
            return blocks.pop()
        return None

    def _allocate_raw(self, size: int, nbytes: int, numel: int, dtype: np.dtype) -> Any:
        for attempt in range(2):
            if self.limit is None or self._reserved + size <= self.limit:
                try:
                    block = self.memory.allocate_raw(size)
                except Exception as error:
                    if not is_out_of_memory(error):
                        raise
                else:
                    self._reserved += size
                    self._peak_reserved = max(self._peak_reserved, self._reserved)
                    self._raw_allocs += 1
                    return block
            if attempt == 0:
                # Give cached blocks back, collect dead tensors held by reference
                # cycles, and look again before giving up.
                self._release_cached()
                gc.collect()
                self._drain()
                block = self._take_cached(size)
                if block is not None:
                    return block
                self._release_cached()
        self._ooms += 1
        raise OutOfMemoryError(self._oom_message(size, nbytes, numel, dtype))

    def _oom_message(self, size: int, nbytes: int, numel: int, dtype: np.dtype) -> str:
        free = self.memory.free_bytes()
        if self.limit is not None:
            headroom = max(self.limit - self._reserved, 0)
            free = headroom if free is None else min(free, headroom)
        limit = f", limit {format_bytes(self.limit)}" if self.limit is not None else ""
        return (
            f"CUDA out of memory on {self.device_name}{_requesting_code()}: tried to allocate "
            f"{format_bytes(nbytes)} (a {dtype.name} buffer of {numel} elements, "
            f"{format_bytes(size)} after rounding); {format_bytes(self._allocated)} are in use "
            f"by tensors, {format_bytes(self._reserved)} reserved by kernelgrad's memory pool, "
            f"{format_bytes(free)} free{limit}. Free tensors you no longer need (`del t`, "
            "including their `.grad` and graphs that save them), use a smaller batch, or "
            "check `kg.cuda.memory_stats()`."
        )

    # --- returning memory ---------------------------------------------------------------
    def _drain(self) -> None:
        """Move blocks released by finalizers back to their free lists."""
        pending, free = self._pending, self._free
        while pending:
            _, size, nbytes, block = pending.popleft()
            blocks = free.get(size)
            if blocks is None:
                free[size] = [block]
            else:
                blocks.append(block)
            self._allocated -= size
            self._requested -= nbytes
            self._frees += 1

    def _release_cached(self) -> None:
        for release in self.release_hooks:
            release()
        released = sum(len(blocks) for blocks in self._free.values())
        if released:
            for size, blocks in self._free.items():
                self._reserved -= size * len(blocks)
            self._free.clear()
            self._raw_frees += released
            self.memory.release_raw_memory()

    def empty_cache(self) -> None:
        """Give every cached (unused) block back to the driver."""
        with self._lock:
            self._drain()
            self._release_cached()

    def set_limit(self, limit: int | None) -> None:
        """Refuse raw allocations beyond ``limit`` bytes reserved (None: no limit)."""
        with self._lock:
            self.limit = None if limit is None else int(limit)

    # --- statistics -----------------------------------------------------------------------
    def stats(self) -> dict[str, int | None]:
        with self._lock:
            self._drain()
            cached_blocks = sum(len(blocks) for blocks in self._free.values())
            return {
                "allocated_bytes": self._allocated,
                "requested_bytes": self._requested,
                "reserved_bytes": self._reserved,
                "cached_bytes": self._reserved - self._allocated,
                "peak_allocated_bytes": self._peak_allocated,
                "peak_reserved_bytes": self._peak_reserved,
                "active_blocks": self._allocs - self._frees,
                "cached_blocks": cached_blocks,
                "num_allocs": self._allocs,
                "num_frees": self._frees,
                "num_cache_hits": self._allocs - self._raw_allocs,
                "num_raw_allocs": self._raw_allocs,
                "num_raw_frees": self._raw_frees,
                "num_ooms": self._ooms,
                "limit_bytes": self.limit,
                "vendor_pool_used_bytes": 0,
                "vendor_pool_reserved_bytes": 0,
            }

    def reset_peak(self) -> None:
        with self._lock:
            self._drain()
            self._peak_allocated = self._allocated
            self._peak_reserved = self._reserved
