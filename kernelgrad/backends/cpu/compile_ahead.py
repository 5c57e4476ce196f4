"""Parallel forms compiled in worker processes, while their serial twins run.

Most generated CPU kernels come in two forms (``backends/cpu/codegen.py``,
``kernel_module.py``, ``fused_reduce.py``): ``name`` spreads the work over the cores with
``prange`` and ``name_serial`` runs it on the calling thread. Numba takes 2-4x longer to
compile the ``prange`` form (its loop body becomes a separate function, compiled and
code-generated again with the threading machinery around it), and with an empty kernel
cache those compiles made most of a first training step: LeNet-5's took 21 s on 2
cores, one of them idle.

So the first call of a ``prange`` form whose compiled code is not on disk yet hands its
compile to a worker process (a plain ``python -m`` child reading requests on a pipe; no
``multiprocessing``, so a user's script is never imported again) and runs the serial
twin instead. Once the worker has written the compiled code into Numba's disk cache,
the next call loads it from there and runs in parallel. The two forms compute the same
thing in the same order, so results do not depend on which one ran.

A layer that knows which kernel it will launch next can also have its serial form
compiled ahead (:func:`prefetch`, reached through ``Kernel.prefetch`` and the backend's
``prefetch_kernel``): a convolution's forward pass asks for its gradient kernels, so the
worker compiles them while the caller is still busy with the forward pass. These
requests go before any parallel form in the queue. The call that needs such a form
waits for the worker if it has started (it began earlier than the caller could), and
compiles it itself if the request is still queued.

``KG_COMPILE_WORKERS`` sets the number of worker processes (default: the cores less
one, at most 4; ``0`` compiles every form in the calling process, as before).
``KG_DEBUG=1`` logs each hand-off and when the parallel form takes over.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from types import ModuleType
from typing import Any

from ...codecache import DIGEST_LENGTH
from ...debug import debug_level, log
from ..base import whole_number_setting

#: ``(parallel form, serial form)`` names in generated modules.
TWIN_NAMES = (
    ("flat", "flat_serial"),
    ("strided", "strided_serial"),
    ("rows", "rows_serial"),
    ("kernel", "kernel_serial"),
)


def worker_count() -> int:
    """``KG_COMPILE_WORKERS``, else the cores less one (at most 4)."""
    default = max(0, min(4, (os.cpu_count() or 1) - 1))
    return whole_number_setting("KG_COMPILE_WORKERS", default, minimum=0, unit="processes")


def install_twins(module: ModuleType) -> ModuleType:
    """Replace each ``prange`` form of ``module`` that has a serial twin by a
    :class:`ParallelTwin` (nothing changes with ``KG_COMPILE_WORKERS=0``)."""
    if worker_count() == 0:
        return module
    for parallel, serial in TWIN_NAMES:
        form = getattr(module, parallel, None)
        if form is not None and hasattr(module, serial) and not isinstance(form, ParallelTwin):
            setattr(module, parallel, ParallelTwin(module, parallel, serial))
    return module


class ParallelTwin:
    """A ``prange`` form that runs its serial twin until a worker has compiled it.

    Attribute reads other than calls (``signatures``, ``stats``, ``py_func``...) go to
    the form that runs now, so ``KG_DEBUG``'s compile log keeps telling the truth."""

    __slots__ = ("job", "label", "module", "parallel", "ready", "serial")

    def __init__(self, module: ModuleType, parallel: str, serial: str) -> None:
        self.parallel = getattr(module, parallel)
        self.serial = getattr(module, serial)
        self.module = module
        self.label = f"{_short_name(module.__name__)}.{parallel}"
        self.ready = False
        self.job: concurrent.futures.Future | None = None

    def __call__(self, *args: Any) -> Any:
        if self.ready:
            return self.parallel(*args)
        return self._before_ready(args)

    def _before_ready(self, args: tuple) -> Any:
        job = self.job
        if job is None:
            types = tuple(self.parallel.typeof_pyval(a) for a in args)
            if (
                self.parallel.signatures
                or not _is_file_module(self.module)
                or _on_disk(self.parallel, types)
            ):
                self.ready = True  # compiled or cached already, or nothing to import
                return self.parallel(*args)
            self.job = job = _pool().submit(self.module, self.parallel.py_func.__name__, types)
            if debug_level() >= 1:
                log(f"{self.label}: compiling the parallel form in a worker process; "
                    "the serial form runs until it is ready")  # fmt: skip
        elif job.done():
            self.ready = True
            if debug_level() >= 1:
                error = job.exception()
                if error is None:
                    log(f"{self.label}: parallel form compiled in a worker in "
                        f"{job.result():.2f} s; it runs from now on")  # fmt: skip
                else:
                    log(f"{self.label}: the worker could not compile the parallel form "
                        f"({error}); compiling it here")  # fmt: skip
            return self.parallel(*args)
        return self.serial(*args)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the worker (if one has the job); True when the parallel form is
        ready to load. For tests and benchmarks."""
        if self.job is None:
            return bool(self.parallel.signatures)
        concurrent.futures.wait([self.job], timeout)
        return self.job.done()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parallel if self.ready else self.serial, name)

    def __repr__(self) -> str:
        state = "parallel" if self.ready else "serial until compiled"
        return f"<ParallelTwin {self.label} ({state})>"


def _short_name(module_name: str) -> str:
    """``kg_cpu_add_118fef81a8e452cddc7e`` -> ``cpu_add``."""
    name = module_name.removeprefix("kg_")
    head, _, digest = name.rpartition("_")
    return head if len(digest) == DIGEST_LENGTH else name


def _is_file_module(module: ModuleType) -> bool:
    return bool(getattr(module, "__file__", None))


def _on_disk(dispatcher: Any, types: tuple) -> bool:
    """Whether Numba's disk cache holds ``dispatcher`` compiled for ``types`` (the
    lookup ``Dispatcher.compile`` makes first; the call that follows loads it again,
    a few milliseconds)."""
    try:
        return dispatcher._cache.load_overload(types, dispatcher.targetctx) is not None
    except Exception:
        return False


# --- serial forms compiled ahead ---------------------------------------------------------
URGENT, LATER = 0, 1  # queue priorities: serial forms asked for ahead, then parallel forms
_SETTLED: set[tuple] = set()  # (module, form, types) found compiled, on disk, or asked for


def prefetch(module: ModuleType, name: str, args: tuple) -> WorkerCompiled | None:
    """Have a worker compile ``module.<name>`` (a serial form) for the types of ``args``
    before anything in the queue but other such requests. The :class:`WorkerCompiled`
    that stands for the form until then replaces it in the module, and in the
    :class:`ParallelTwin` that runs it while its own form compiles; it is returned for
    callers that keep the form elsewhere too. None where there is nothing to do: no
    workers, a module a worker cannot import, a form compiled or on the disk already."""
    dispatcher = getattr(module, name)
    if isinstance(dispatcher, WorkerCompiled) or worker_count() == 0:
        return None  # asked for already, or no workers
    if not _is_file_module(module):
        return None
    types = tuple(dispatcher.typeof_pyval(a) for a in args)
    settled = (module.__name__, name, types)
    if settled in _SETTLED:
        return None
    if types in dispatcher.overloads or _on_disk(dispatcher, types):
        _SETTLED.add(settled)  # the disk lookup loads the code: once is enough
        return None
    _SETTLED.add(settled)
    job = _pool().submit(module, name, types, priority=URGENT)
    label = f"{_short_name(module.__name__)}.{name}"
    if debug_level() >= 1:
        log(f"{label}: compiling ahead in a worker process")
    waiting = WorkerCompiled(dispatcher, job, label)
    setattr(module, name, waiting)
    for parallel, serial in TWIN_NAMES:
        twin = getattr(module, parallel, None)
        if serial == name and isinstance(twin, ParallelTwin):
            twin.serial = waiting  # it runs the serial form until its own is ready
    return waiting


class WorkerCompiled:
    """A form a worker was asked to compile ahead. Its first call waits for the worker
    when the compile has started (it began earlier than this call could) and then loads
    the result from Numba's disk cache; when the request is still queued it is
    withdrawn and the form compiles here, as it would have without the request."""

    __slots__ = ("dispatcher", "job", "label")

    def __init__(self, dispatcher: Any, job: concurrent.futures.Future, label: str) -> None:
        self.dispatcher = dispatcher
        self.job: concurrent.futures.Future | None = job
        self.label = label

    def __call__(self, *args: Any) -> Any:
        job = self.job
        if job is not None:
            self.job = None
            if job.cancel():
                outcome = "still queued: compiling it here"
            else:
                error = job.exception()
                outcome = (
                    f"compiled in a worker in {job.result():.2f} s"
                    if error is None
                    else f"the worker could not compile it ({error}); compiling it here"
                )
            if debug_level() >= 1:
                log(f"{self.label}: {outcome}")
        return self.dispatcher(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dispatcher, name)

    def __repr__(self) -> str:
        return f"<WorkerCompiled {self.label}>"


# --- the worker pool ---------------------------------------------------------------------


class _Worker:
    """One ``python -m kernelgrad.backends.cpu.compile_worker`` child."""

    def __init__(self) -> None:
        environment = dict(os.environ, KG_COMPILE_WORKERS="0", KG_DEBUG="0")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kernelgrad.backends.cpu.compile_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environment,
        )

    def compile(self, request: tuple) -> float:
        """Send one request, wait for its answer: the seconds the compile took."""
        assert self.process.stdin is not None and self.process.stdout is not None
        data = pickle.dumps(request)
        try:
            self.process.stdin.write(len(data).to_bytes(8, "little") + data)
            self.process.stdin.flush()
            header = self.process.stdout.read(8)
        except OSError:  # a broken pipe: the worker is gone
            header = b""
        if len(header) < 8:
            status = self.process.poll()
            raise RuntimeError(f"the compile worker process ended (exit status {status})")
        error, seconds = pickle.loads(self.process.stdout.read(int.from_bytes(header, "little")))
        if error is not None:
            raise RuntimeError(error)
        return seconds

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()


class _Pool:
    """Worker processes (started on the first request) and a thread per worker that
    feeds it requests from one queue."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.jobs: queue.PriorityQueue = queue.PriorityQueue()  # (priority, order, job)
        self.order = 0
        self.workers: list[_Worker] = []
        self.pending: set[concurrent.futures.Future] = set()
        self.lock = threading.Lock()

    def submit(
        self, module: ModuleType, function: str, types: tuple, priority: int = LATER
    ) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self.pending.add(future)
        future.add_done_callback(self.pending.discard)
        request = (module.__name__, module.__file__, function, types)
        with self.lock:
            self.order += 1  # first in, first out within a priority
            self.jobs.put((priority, self.order, (future, request)))
            if not self.workers:
                for _ in range(self.size):
                    self.workers.append(_Worker())
                    threading.Thread(
                        target=self._feed, args=(self.workers[-1],), daemon=True
                    ).start()
                atexit.register(self.stop)
        return future

    def _feed(self, worker: _Worker) -> None:
        while True:
            _, _, (future, request) = self.jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(worker.compile(request))
            except BaseException as error:
                future.set_exception(error)
                if worker.process.poll() is not None:
                    return  # the worker died; the other threads carry on

    def stop(self) -> None:
        """At exit: kill the workers (a compile cut short leaves no cache entry: Numba
        writes its files under a temporary name first)."""
        for worker in self.workers:
            worker.stop()


_the_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _pool() -> _Pool:
    global _the_pool
    with _pool_lock:
        if _the_pool is None:
            _the_pool = _Pool(max(1, worker_count()))
        return _the_pool


def wait_for_workers(timeout: float | None = None) -> float:
    """Block until every compile handed to a worker so far has finished; returns the
    seconds waited (benchmarks report when every parallel form was ready)."""
    start = time.perf_counter()
    if _the_pool is not None:
        concurrent.futures.wait(list(_the_pool.pending), timeout)
    return time.perf_counter() - start
