"""``kg.profiler``: PyTorch's ``torch.profiler``, small and measured by kernelgrad itself.

``with kg.profiler.profile() as prof:`` records every kernel launch in the block, through
the same watch as ``kg.compile.count_launches`` (the backend primitives, wrapped on each
backend in use when the block starts, and the launches that user kernels and kg.compile
replays report), plus the ranges of ``kg.profiler.record_function(name)`` blocks.
``prof.key_averages().table()`` lists per operation (the launch's name: ``mul``,
``matmul``, ``reduce``, ``kernel my_kernel``, a fused replay's label) and per range the
number of calls and their total and average host time:

>>> import kernelgrad as kg
>>> with kg.profiler.profile() as prof:
...     with kg.profiler.record_function("double"):
...         y = kg.ones(3) * 2
>>> [(row.key, row.count) for row in prof.key_averages()]
[('double', 1), ('identity', 1), ('mul', 1)]

What is measured: the host time of each backend primitive (on CUDA, with
``ProfilerActivity.CUDA`` among the ``activities``, the device is synchronised after
each launch, so the time includes the kernel's run; without it a CUDA launch's time is
its queueing). Launches reported by user kernels (``@kg.kernel``) and by kg.compile's
replays are counted and appear in the trace at the moment they start, with no duration
of their own (their time is inside the enclosing ``record_function`` range).
``record_shapes``, ``profile_memory``, ``with_stack``, ``with_flops`` and ``with_modules``
are accepted and record nothing more. ``export_chrome_trace(path)`` writes the launches
and ranges as a Chrome trace (``chrome://tracing``, Perfetto).
"""

from __future__ import annotations

import enum
import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from .errors import ArgumentError

__all__ = [
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "tensorboard_trace_handler",
]


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    CUDA = "CUDA"


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(
    *,
    wait: int,
    warmup: int,
    active: int,
    repeat: int = 0,
    skip_first: int = 0,
    skip_first_wait: int = 0,
) -> Callable[[int], ProfilerAction]:
    """PyTorch's profiler schedule: skip ``skip_first`` steps, then cycles of ``wait``
    steps not recorded, ``warmup`` steps not kept and ``active`` steps recorded (the
    last one hands the cycle to ``on_trace_ready``), ``repeat`` times (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), "
            f"warmup={warmup} (need >= 0), active={active} (need > 0), repeat={repeat} "
            f"(need >= 0), skip_first={skip_first} (need >= 0)."
        )
    if warmup == 0:
        warnings.warn(
            "Profiler won't be using warmup, this can skew profiler results", stacklevel=2
        )

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step / cycle >= repeat:
            return ProfilerAction.NONE
        position = step % cycle
        if position < wait:
            return ProfilerAction.NONE
        if position < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return schedule_fn


class _Event:
    __slots__ = ("duration", "kind", "name", "start", "thread")

    def __init__(self, name: str, kind: str, start: float, duration: float | None) -> None:
        self.name, self.kind, self.start, self.duration = name, kind, start, duration
        self.thread = threading.get_ident()


class _Launches(list):
    """The counter's ``names``: each launch appended (by the backend wrappers or by the
    launch hooks of user kernels and replays) becomes an event of the profile."""

    def __init__(self, owner: _Counter) -> None:
        super().__init__()
        self.owner = owner

    def append(self, name: str) -> None:
        self.owner.launched(name)

    def __iadd__(self, names: Iterable[str]) -> _Launches:  # type: ignore[override]
        for name in names:
            self.owner.launched(name)
        return self


class _Counter:
    """A ``kg.compile.count_launches`` counter that times each backend primitive."""

    timed = True

    def __init__(self, profiler: profile, synchronize: bool) -> None:
        self.count = 0
        self.depth = 0
        self.names = _Launches(self)
        self.profiler = profiler
        self.synchronize = synchronize
        self._last: _Event | None = None

    def launched(self, name: str) -> None:
        event = _Event(name, "launch", time.perf_counter(), None)
        self._last = event
        self.profiler._add(event)

    def timed_launch(self, start: float, end: float) -> None:
        event = self._last
        if event is None:
            return
        if self.synchronize:
            from .backends import loaded_backends

            for backend in loaded_backends().values():
                backend.synchronize()
            end = time.perf_counter()
        event.start, event.duration = start, end - start
        self._last = None


_ACTIVE: list[profile] = []  # the profilers recording now (record_function reports to them)


class profile:
    """Record kernel launches and ``record_function`` ranges (``torch.profiler.profile``);
    see the module docstring. With a ``schedule``, call ``prof.step()`` after each step:
    only the steps of an active phase are recorded, and ``on_trace_ready(prof)`` is
    called when a cycle ends (without one, when the block ends)."""

    def __init__(
        self,
        *,
        activities: Iterable[ProfilerActivity] | None = None,
        schedule: Callable[[int], ProfilerAction] | None = None,
        on_trace_ready: Callable[..., Any] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: Any = None,
        execution_trace_observer: Any = None,
        acc_events: bool = False,
        use_cuda: bool | None = None,
        custom_trace_id_callback: Any = None,
        post_processing_timeout_s: float | None = None,
    ) -> None:
        chosen = set(activities) if activities is not None else {ProfilerActivity.CPU}
        if use_cuda:
            chosen.add(ProfilerActivity.CUDA)
        self.activities = chosen
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes, self.profile_memory, self.with_stack = (
            record_shapes,
            profile_memory,
            with_stack,
        )
        self.step_num = 0
        self._recording: list[_Event] = []
        self._saved: list[_Event] | None = None  # the last cycle handed to on_trace_ready
        self._watch: Any = None
        self._counter: _Counter | None = None
        self._action = ProfilerAction.RECORD

    # --- the block ---------------------------------------------------------------------
    def __enter__(self) -> profile:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def start(self) -> None:
        from .backends import get_backend
        from .compile.api import watch_launches
        from .device import as_device, default_device

        # the backends a block will use exist before the watch wraps them
        for device in {as_device("cpu"), default_device()}:
            get_backend(device)
        self._counter = _Counter(self, ProfilerActivity.CUDA in self.activities)
        self._watch = watch_launches(self._counter)  # type: ignore[arg-type]
        self._watch.__enter__()
        _ACTIVE.append(self)
        self._action = self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD

    def stop(self) -> None:
        if self._watch is None:
            return
        _ACTIVE.remove(self)
        self._watch.__exit__(None, None, None)
        self._watch = None
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._save()

    def step(self) -> None:
        """The end of a training step: moves the schedule on (the last step of an active
        phase hands the cycle's events to ``on_trace_ready``)."""
        previous = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD
        if previous is ProfilerAction.RECORD_AND_SAVE:
            self._save()

    def _save(self) -> None:
        self._saved = self._recording
        self._recording = []
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _add(self, event: _Event) -> None:
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._recording.append(event)

    # --- results -----------------------------------------------------------------------
    def events(self) -> list[_Event]:
        """The recorded launches and ranges (the last saved cycle, or what is being
        recorded when none was saved yet)."""
        return list(self._saved if self._saved is not None else self._recording)

    def key_averages(self, group_by_input_shape: bool = False, **kwargs: Any) -> KeyAverages:
        return KeyAverages(self.events())

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the recorded launches and ranges as a Chrome trace JSON file."""
        events = self.events()
        origin = min((e.start for e in events), default=0.0)
        pid = os.getpid()
        trace = []
        for event in events:
            entry = {
                "name": event.name,
                "cat": "user_annotation" if event.kind == "range" else "kernel",
                "ts": (event.start - origin) * 1e6,
                "pid": pid,
                "tid": event.thread,
            }
            if event.duration is None:
                entry.update(ph="i", s="t")
            else:
                entry.update(ph="X", dur=event.duration * 1e6)
            trace.append(entry)
        with open(path, "w") as file:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, file)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        raise ArgumentError("kg.profiler records no stacks (with_stack is accepted, not used)")


class KeyAverage:
    """One row of :meth:`profile.key_averages`: a launch name or a range name, its
    number of calls and total host time (microseconds, as PyTorch's ``*_time_total``)."""

    def __init__(self, key: str, kind: str) -> None:
        self.key, self.kind = key, kind
        self.count = 0
        self.timed_count = 0
        self.cpu_time_total = 0.0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.timed_count if self.timed_count else 0.0

    # PyTorch's names for the same numbers
    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total

    device_time_total = cuda_time_total = self_cpu_time_total

    def __repr__(self) -> str:
        return (
            f"<KeyAverage key={self.key!r} count={self.count} "
            f"cpu_time_total={self.cpu_time_total:.1f}us>"
        )


_SORT_KEYS = {"count": lambda row: row.count}


class KeyAverages(list):
    """The rows of :meth:`profile.key_averages`, ranges first, then launches, each in
    the order first seen; :meth:`table` prints them."""

    def __init__(self, events: list[_Event]) -> None:
        rows: dict[tuple[str, str], KeyAverage] = {}
        for event in events:
            row = rows.get((event.kind, event.name))
            if row is None:
                row = rows[(event.kind, event.name)] = KeyAverage(event.name, event.kind)
            row.count += 1
            if event.duration is not None:
                row.timed_count += 1
                row.cpu_time_total += event.duration * 1e6
        super().__init__(sorted(rows.values(), key=lambda r: r.kind != "range"))
        # the primitive behind each elementwise launch is named by its operation: also
        # list the primitive kinds' totals
        self._launch_total = sum(r.count for r in self if r.kind == "launch")

    def table(
        self,
        sort_by: str | None = None,
        row_limit: int = 100,
        max_src_column_width: int = 75,
        max_name_column_width: int = 55,
        header: str | None = None,
        top_level_events_only: bool = False,
        **kwargs: Any,
    ) -> str:
        rows = list(self)
        if sort_by is not None:
            if sort_by in _SORT_KEYS:
                rows.sort(key=_SORT_KEYS[sort_by], reverse=True)
            elif sort_by.endswith("time_total") or sort_by.endswith("time"):
                rows.sort(key=lambda r: r.cpu_time_total, reverse=True)
            else:
                raise ArgumentError(
                    f"key_averages().table: sort_by={sort_by!r} is not a column kernelgrad "
                    "measures; use 'cpu_time_total' (or another '*_time_total'), or 'count'"
                )
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        width = min(max(12, *(len(r.key) for r in rows)) if rows else 12, max_name_column_width)
        total = sum(r.cpu_time_total for r in self if r.kind == "launch") or 1.0
        lines = [
            f"{'Name':<{width}}  {'Kind':<6}  {'Calls':>6}  {'Total time':>12}  "
            f"{'Avg time':>10}  {'% launches':>10}"
        ]
        lines.append("-" * len(lines[0]))
        for row in rows:
            share = f"{100 * row.cpu_time_total / total:9.1f}%" if row.kind == "launch" else ""
            timed = row.timed_count > 0
            lines.append(
                f"{row.key[:width]:<{width}}  {row.kind:<6}  {row.count:>6}  "
                f"{_us(row.cpu_time_total) if timed else '-':>12}  "
                f"{_us(row.cpu_time) if timed else '-':>10}  {share:>10}"
            )
        lines.append("-" * len(lines[0]))
        lines.append(f"Kernel launches: {self._launch_total}")
        text = "\n".join(lines)
        return f"{header}\n{text}" if header else text

    def __str__(self) -> str:
        return self.table()


def _us(microseconds: float) -> str:
    if microseconds >= 1e6:
        return f"{microseconds / 1e6:.3f}s"
    if microseconds >= 1e3:
        return f"{microseconds / 1e3:.3f}ms"
    return f"{microseconds:.3f}us"


class record_function:
    """A labelled range in the profiles recording now (``torch.profiler.record_function``):
    a context manager, or a decorator."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self._starts: list[float] = []

    def __enter__(self) -> record_function:
        self._starts.append(time.perf_counter())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        start = self._starts.pop()
        end = time.perf_counter()
        for profiler in list(_ACTIVE):
            profiler._add(_Event(self.name, "range", start, end - start))

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, **kwargs: Any):
    """An ``on_trace_ready`` that writes each saved cycle as a Chrome trace file
    ``<worker>.<time>.pt.trace.json`` under ``dir_name``."""

    def handler(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{os.uname().nodename}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{worker}.{time.time_ns()}.pt.trace.json"))

    return handler
