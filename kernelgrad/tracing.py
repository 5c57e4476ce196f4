"""The question "is ``kg.compile`` recording on this thread?", asked by the layers below
it (nn, optim) without importing it.

``kg.compile`` sits above nn and optim, yet a few of their steps must behave differently
while it records (an optimizer registers what a replay must re-read, a fused update
launches per tensor so that the trace can record each kernel). Instead of importing the
compile layer, they call :func:`active_recorder`, which asks whatever lookup the compile
layer registered with :func:`register_recorder_lookup` when it was imported. Until then
nothing can be recording, and the answer is None.

The recorder returned offers the methods nn, optim and ops (random generators) use
(:class:`TraceRecorder`). :data:`RECORDING` counts the traces in progress on all
threads, for code that runs on every call (``Module.__call__``) and asks for the
recorder only while one is::

    >>> from kernelgrad import tracing
    >>> tracing.active_recorder() is None  # no trace in progress on this thread
    True
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol


class TraceRecorder(Protocol):
    """What lower layers may ask of the recorder of a trace in progress."""

    def watch(self, what: str, read: Callable[[], Any]) -> None:
        """Call ``read()`` now and before every replay; a replay whose value differs is
        traced again. ``what`` names the value in messages."""
        ...

    def watch_module(self, module: Any, make_watch: Callable[[list[Any]], Any]) -> None:
        """``module`` was called while tracing (each module once per trace). When the
        trace ends, ``make_watch(modules)`` of the modules called gives one object whose
        ``unchanged()`` is called before every replay (a replay after it returned False
        is traced again) and whose ``describe()`` names what changed: one check per
        replay for the Python-side state of all of them (their mode, settings and the
        tensors they hold), taken when the trace ends, which is the state a replay that
        follows without any change in between starts from."""
        ...

    def before_replay(self, feed: Callable[[], Any]) -> None:
        """Call ``feed()`` before every replay (it writes Python-side values that change
        between calls into tensors the recorded kernels read)."""
        ...

    def keep(self, owner: Any, attribute: str) -> None:
        """The traced code stored a tensor in ``owner.attribute`` (a leaf's ``.grad``):
        replays write into the tensor found there when the trace ended, so a replay is
        valid only while ``owner.attribute`` still holds it (else the function is traced
        again)."""
        ...

    def persist(self, tensor: Any) -> None:
        """``tensor``, made from host data during the trace, is state that the replays
        keep themselves (an error flag that its check zeroes again): one buffer serves
        every replay, although kernels write it (other such constants are made afresh
        from their host data on every replay)."""
        ...

    def host_op(
        self, label: str, fn: Callable[[list[Any]], Any], tensors: Any, written: Any = ()
    ) -> Any:
        """Run ``fn(tensors)`` now and, in order with the kernels, on every replay, over
        the replay's buffers (a kernel's error flag checked after each replay)."""
        ...

    def drawing_from(self, generator: Any) -> AbstractContextManager[None]:
        """Within the block the backend draws from ``kg.Generator`` ``generator``'s
        stream: the draws are recorded as its, so that replays draw from it again."""
        ...

    def generator_seeded(self, generator: Any) -> None:
        """``generator`` was made or seeded by the traced code: replays seed it again."""
        ...


# How many kg.compile traces are in progress, on all threads (compile/trace.py keeps the
# count): code that runs on every call of something (``Module.__call__``) checks it, an
# index, before asking :func:`active_recorder` (two calls and a thread-local lookup).
RECORDING = [0]


def _nothing_recording() -> TraceRecorder | None:
    return None


_lookup: Callable[[], TraceRecorder | None] = _nothing_recording


def register_recorder_lookup(lookup: Callable[[], TraceRecorder | None]) -> None:
    """Install the function that returns the recorder of the trace in progress on the
    calling thread, or None (the compile layer installs its own when it is imported)."""
    global _lookup
    _lookup = lookup


def active_recorder() -> TraceRecorder | None:
    """The recorder of the ``kg.compile`` trace in progress on the calling thread, or
    None when nothing is recording here."""
    return _lookup()


def refuse(message: str) -> None:
    """Raise kg.compile's ``TraceError`` with ``message`` if a trace is recording on the
    calling thread: for a call that a replay could not repeat (its class is looked up,
    not imported: the compile layer, which registered the recorder, is loaded then)."""
    if active_recorder() is not None:
        raise sys.modules["kernelgrad.compile.trace"].TraceError(message)
