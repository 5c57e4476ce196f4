"""Errors that kernels report through device memory, checked without a round trip per
launch.

A gather with an index out of range, or a cross-entropy target outside the classes, is
found by the kernel: it writes the offending value and a 1 into a two-element int64
flag. Reading that flag right after the launch would make every such call wait for the
GPU to drain its queue. Instead the backend keeps a table of ``SLOTS`` flags in one
device array; each launch that may report an error takes a slot (a two-element view of
the table) and registers how to describe the error. The next device-to-host read
(``.item()``, ``.cpu()``, printing) or ``kg.cuda.synchronize()`` copies the whole table
back with the data it waits for anyway, and raises the error of the first slot set:
an ``IndexError`` naming the operation, as an immediate check would have.

A program that never reads from the device still learns of errors: when every slot is
taken, the next registration checks the table first (one synchronisation per ``SLOTS``
launches). With ``KG_CUDA_LAUNCH_BLOCKING=1`` each launch is checked at once, so the
error is raised by the call that caused it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

SLOTS = 64

_LATE = (
    " (found by a kernel launched earlier and reported at this synchronisation; set "
    "KG_CUDA_LAUNCH_BLOCKING=1 to raise it in the call that launched it)"
)


class DeferredErrors:
    """The flag table of one device (see the module docstring)."""

    def __init__(self, memory: Any) -> None:
        self._memory = memory
        self._table: Any = None
        self._slots: list[Any] = []
        self._pending: dict[int, Callable[[int], BaseException]] = {}
        self._next = 0

    def slot(self, make_error: Callable[[int], BaseException]) -> Any:
        """A two-element int64 device array, zero, for one launch to report into
        (``[value, 1]``); ``make_error(value)`` builds the exception to raise."""
        if self._table is None:
            self._table = self._memory.to_device(np.zeros(2 * SLOTS, dtype=np.int64))
            self._slots = [self._table[2 * k : 2 * k + 2] for k in range(SLOTS)]
        index = self._next
        if index in self._pending:  # every slot in use since the last check
            self.check()
        self._next = (index + 1) % SLOTS
        self._pending[index] = make_error
        return self._slots[index]

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def read(self) -> Any:
        """Queue the copy of the table to the host on the device's stream; pass the
        result to :meth:`raise_reported` after the stream has synchronised."""
        if not self._pending:
            return None
        host = np.empty(2 * SLOTS, dtype=np.int64)
        with self._memory.context():
            self._table.copy_to_host(host, stream=self._memory.stream)
        return host

    def raise_reported(self, host: Any, late: bool = True) -> None:
        """Forget the pending slots; raise the error of the earliest launch whose slot is
        set in ``host`` (zeroing the table on the device first, so that the error is
        raised once). Slots are taken round the table, so the earliest launch is the
        first registered (``_pending`` keeps that order), not the lowest slot."""
        if host is None:
            return
        pending, self._pending = self._pending, {}
        found = [k for k in pending if host[2 * k + 1]]
        if not found:
            return
        with self._memory.context():
            self._table.copy_to_device(
                np.zeros(2 * SLOTS, dtype=np.int64), stream=self._memory.stream
            )
        first = found[0]
        error = pending[first](int(host[2 * first]))
        if late:
            error.args = (str(error) + _LATE,)
        raise error

    def check(self, late: bool = True) -> None:
        """Read the table now (one synchronisation) and raise a reported error."""
        host = self.read()
        if host is not None:
            self._memory.stream.synchronize()
            self.raise_reported(host, late)
