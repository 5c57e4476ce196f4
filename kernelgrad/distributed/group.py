"""The process group: MPI set-up, waiting with a deadline, and naming a failed rank.

Every process of a job (a *rank*) joins one group with :func:`init_process_group`. The
group owns two duplicates of ``MPI.COMM_WORLD``: one carries the collectives, the other
only failure notices, so a notice can never be mistaken for data.

**Deadlines.** A collective is started non-blocking (``Iallreduce``, ``Ibcast``, ..., or
an NCCL call followed by a CUDA event) and then polled (:meth:`ProcessGroup.wait`): a
spin of up to 50 ms (MPI makes progress inside ``Test``; sleeping between tests from the
start made a 400 KB all-reduce of two processes 3x slower), then sleeps that grow to
1 ms. MPI itself would wait forever for a peer that hung or died; the group gives up
after ``timeout`` seconds (``init_process_group(timeout=)``, else
``$KERNELGRAD_DIST_TIMEOUT``, else 300 s).

**Naming the rank.** A rank that gives up sends a small notice ("I am stuck in
collective #n") to every peer over the notice communicator and listens for their
notices for a grace period (the timeout, at most 5 s). A rank that is waiting in a
collective checks for notices while it polls, and answers with its own. The ranks that
never answer are the ones that hung, died or left the job; ranks that answer from
another collective show that the ranks issued collectives in different orders. The
error (:class:`CollectiveTimeoutError`) says which, and the group refuses further
collectives. A rank that ends its program (or destroys its group) first sends a
"leaving" notice: a peer still waiting for it in a collective gives up 2 s later (time
for a collective the leaver completed before leaving to finish) instead of at its
timeout.

**A failed rank stops the job.** With ``abort_on_error`` (the default for a group of
more than one process), an exception that ends a rank's program is printed, recorded
for the launcher (``$KERNELGRAD_DIST_STATUS``) and followed by ``MPI_Abort``, so the
other ranks stop at once instead of waiting for their timeout.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import CollectiveTimeoutError, DistributedError
from .supervise import STATUS_ENV

__all__ = [
    "ProcessGroup",
    "init_process_group",
    "destroy_process_group",
    "is_initialized",
    "get_group",
    "get_rank",
    "get_world_size",
    "get_local_rank",
    "get_backend",
]

DEFAULT_TIMEOUT = 300.0
TIMEOUT_ENV = "KERNELGRAD_DIST_TIMEOUT"
BACKENDS = ("auto", "mpi", "nccl")
_NOTICE_TAG = 7171
_HOST_BYTES = 64
_SPIN_SECONDS = 0.05
_MAX_SLEEP = 0.001
_NOTICE_CHECK_SECONDS = 0.02
_MAX_GRACE = 5.0
_LEFT_GRACE = 2.0
_LEFT = -1  # the sequence number of a notice that says "this rank leaves the job"

INSTALL_HINT = (
    "pip install 'kernelgrad[distributed]' (mpi4py and the mpich wheel, which brings its "
    "own mpiexec: no system MPI needed), or pip install mpi4py on top of a system MPI"
)


def import_mpi() -> Any:
    """``mpi4py.MPI``, initialising MPI; a :class:`DistributedError` saying how to get it."""
    try:
        from mpi4py import MPI
    except ImportError as error:
        raise DistributedError(f"kg.distributed needs mpi4py ({error}): {INSTALL_HINT}") from None
    return MPI


@dataclass
class Pending:
    """A started collective: ``test()`` says whether it completed."""

    test: Callable[[], bool]
    sequence: int
    description: str
    on_timeout: Callable[[], None] | None = None


class ProcessGroup:
    """The ranks of a job and how they talk; made by :func:`init_process_group`."""

    def __init__(self, backend: str, timeout: float, abort_on_error: bool) -> None:
        MPI = import_mpi()  # noqa: N806 (the module's own name)
        self.MPI = MPI
        self.backend = backend
        self.comm = MPI.COMM_WORLD.Dup()
        self.notices = MPI.COMM_WORLD.Dup()
        self._set_up_bookkeeping(self.comm.Get_rank(), self.comm.Get_size(), timeout)
        local = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_rank = local.Get_rank()
        self.local_size = local.Get_size()
        local.Free()
        self.hosts, self.pids = self._identities()
        self._previous_hook: Any = None
        if abort_on_error and self.size > 1:
            self._previous_hook = sys.excepthook
            sys.excepthook = self._excepthook
        self._write_rank_table()
        _register_exit_notice()

    def _set_up_bookkeeping(self, rank: int, size: int, timeout: float) -> None:
        self.rank = rank
        self.size = size
        self.timeout = float(timeout)
        self.sequence = 0
        self.failure: str | None = None
        self._heard: dict[int, tuple[int, int]] = {}  # peers that gave up: (sequence, kind)
        self._left: dict[int, float] = {}  # peers that left the job: when we learnt it
        self._departed = False
        self._nccl: dict[Any, Any] = {}
        # known after the start-up exchange (which may itself time out)
        self.hosts: list[str] = ["?"] * size
        self.pids: list[Any] = ["?"] * size

    # --- identities and the launcher's status folder ------------------------------------------
    def _identities(self) -> tuple[list[str], list[int]]:
        host = socket.gethostname().encode()[:_HOST_BYTES]
        mine = np.zeros(_HOST_BYTES + 8, dtype=np.uint8)
        mine[: len(host)] = np.frombuffer(host, dtype=np.uint8)
        mine[_HOST_BYTES:] = np.frombuffer(np.int64(os.getpid()).tobytes(), dtype=np.uint8)
        table = np.zeros((self.size, mine.size), dtype=np.uint8)
        self.wait(self.start(lambda: self.comm.Iallgather(mine, table), "the start-up exchange"))
        hosts = [bytes(row[:_HOST_BYTES]).rstrip(b"\0").decode(errors="replace") for row in table]
        pids = [int(np.frombuffer(bytes(row[_HOST_BYTES:]), dtype=np.int64)[0]) for row in table]
        return hosts, pids

    def _status_folder(self) -> str | None:
        folder = os.environ.get(STATUS_ENV)
        return folder if folder and os.path.isdir(folder) else None

    def _write_rank_table(self) -> None:
        """Ranks that share the launcher's file system tell it who is who (pid, host)."""
        folder = self._status_folder()
        if folder is None:
            return
        table = [
            {"rank": rank, "host": host, "pid": pid}
            for rank, (host, pid) in enumerate(zip(self.hosts, self.pids))
        ]
        _write_json(os.path.join(folder, "ranks.json"), {"world_size": self.size, "ranks": table})

    def record_failure(self, message: str) -> None:
        """Leave ``message`` for the launcher (``kernelgrad train --nproc``)."""
        folder = self._status_folder()
        if folder is None:
            return
        record = {
            "rank": self.rank,
            "host": self.hosts[self.rank],
            "pid": os.getpid(),
            "time": time.time(),
            "message": message,
        }
        with contextlib.suppress(OSError):
            _write_json(os.path.join(folder, f"failure-rank-{self.rank}.json"), record)

    def abort(self, status: int, message: str, summary: str | None = None) -> None:
        """Record ``message`` for the launcher, say on stderr that this rank ends the job
        (``summary``, else the message), and end every rank (``MPI_Abort``)."""
        self.record_failure(message)
        print(
            f"kernelgrad.distributed: rank {self.rank} of {self.size} failed"
            f"{summary or ': ' + message}; stopping every rank of the job",
            file=sys.__stderr__ or sys.stderr,
            flush=True,
        )
        self.MPI.COMM_WORLD.Abort(status)

    def _excepthook(self, kind: type, error: BaseException, traceback: Any) -> None:
        (self._previous_hook or sys.__excepthook__)(kind, error, traceback)
        if _group is self:
            name = "interrupted" if issubclass(kind, KeyboardInterrupt) else kind.__name__
            self.abort(1, f"{name}: {error}".rstrip(": "), f" with {name} (above)")

    # --- starting and waiting -----------------------------------------------------------------
    def check_usable(self) -> None:
        if self.failure is not None:
            raise DistributedError(
                f"the process group failed earlier and cannot run more collectives: {self.failure}"
            )

    def start(
        self,
        begin: Callable[[], Any],
        description: str,
        on_timeout: Callable[[], None] | None = None,
    ) -> Pending:
        """Number the collective, start it (``begin`` returns an MPI request, or any
        object with ``Test()``) and return its :class:`Pending`. ``on_timeout`` runs when
        the wait gives up (NCCL aborts its communicator)."""
        self.check_usable()
        self.sequence += 1
        try:
            request = begin()
        except self.MPI.Exception as error:
            raise DistributedError(f"{description} could not start: MPI said {error}") from None
        return Pending(request.Test, self.sequence, description, on_timeout)

    def wait(self, pending: Pending) -> None:
        """Poll ``pending`` until it completes; past the deadline, when a peer reports a
        failure, or when a peer has left the job, find the ranks at fault and raise
        :class:`CollectiveTimeoutError`."""
        started = time.perf_counter()
        deadline = started + self.timeout
        next_notice_check = started + _NOTICE_CHECK_SECONDS
        pause = 0.0
        while True:
            try:
                if pending.test():
                    return
            except self.MPI.Exception as error:
                self.failure = f"{pending.description} failed: MPI said {error}"
                raise DistributedError(self.failure) from None
            now = time.perf_counter()
            if now >= next_notice_check:
                next_notice_check = now + _NOTICE_CHECK_SECONDS
                self._receive_notices()
                if self._heard or self._left_long_ago(now):
                    raise self._diagnose(pending, now - started, timed_out=False)
            if now >= deadline:
                raise self._diagnose(pending, now - started, timed_out=True)
            if now - started > _SPIN_SECONDS:
                pause = min(max(pause * 2, 5e-5), _MAX_SLEEP)
                time.sleep(pause)

    def _receive_notices(self) -> None:
        """Read the notices peers sent: where they gave up, or that they left the job."""
        status = self.MPI.Status()
        while self.notices.Iprobe(source=self.MPI.ANY_SOURCE, tag=_NOTICE_TAG, status=status):
            notice = np.empty(2, dtype=np.int64)
            source = status.Get_source()
            self.notices.Recv(notice, source=source, tag=_NOTICE_TAG)
            if notice[0] == _LEFT:
                self._left.setdefault(source, time.perf_counter())
            else:
                self._heard[source] = (int(notice[0]), int(notice[1]))

    def _left_long_ago(self, now: float) -> bool:
        """A peer left the job, and a collective still waits after a grace period (a
        collective it completed before leaving gets that long to finish here)."""
        grace = min(self.timeout, _LEFT_GRACE)
        return any(now - seen > grace for seen in self._left.values())

    def _diagnose(self, pending: Pending, waited: float, timed_out: bool) -> CollectiveTimeoutError:
        """Tell every peer where this rank is stuck, listen for their answers, and build
        the error that names the ranks at fault."""
        if pending.on_timeout is not None:
            pending.on_timeout()
        reported = dict(self._heard)  # the peers that gave up before this rank did
        self._send_notice([pending.sequence, _kind_code(pending.description)])
        grace_end = time.perf_counter() + min(self.timeout, _MAX_GRACE)
        while len(set(self._heard) | set(self._left)) < self.size - 1:
            if time.perf_counter() >= grace_end:
                break
            self._receive_notices()
            time.sleep(0.005)
        message, suspects = self._explain(pending, waited, timed_out, reported)
        self.failure = message
        return CollectiveTimeoutError(message, suspects, pending.sequence)

    def _send_notice(self, values: list[int], wait: float = 0.0) -> None:
        notice = np.array(values, dtype=np.int64)
        requests = [
            self.notices.Isend(notice, dest=peer, tag=_NOTICE_TAG)
            for peer in range(self.size)
            if peer != self.rank
        ]
        end = time.perf_counter() + wait
        while requests and time.perf_counter() < end:
            requests = [request for request in requests if not request.Test()]
            time.sleep(0.001)
        for request in requests:
            if not request.Test():
                request.Cancel()

    def announce_departure(self) -> None:
        """Tell the peers this rank leaves the job, so that one still waiting for it in a
        collective fails at once instead of at its timeout."""
        if self.size > 1 and self.failure is None and not self._departed:
            self._departed = True
            with contextlib.suppress(self.MPI.Exception):
                self._send_notice([_LEFT, 0], wait=1.0)

    def _explain(
        self, pending: Pending, waited: float, timed_out: bool, reported: dict[int, Any]
    ) -> tuple[str, list[int]]:
        heard, left = self._heard, self._left
        what = f"{pending.description} (collective #{pending.sequence} of this rank)"
        peers = [rank for rank in range(self.size) if rank != self.rank]
        gone = [rank for rank in peers if rank in left]
        silent = [rank for rank in peers if rank not in heard and rank not in left]
        same = [rank for rank in peers if heard.get(rank, (None,))[0] == pending.sequence]
        elsewhere = [rank for rank in peers if rank in heard and rank not in same]
        if gone:
            cause = f"rank {_ranks(gone)} has left the job"
        elif silent:
            cause = f"rank {_ranks(silent)} did not answer"
        elif elsewhere:
            cause = f"rank {_ranks(elsewhere)} is waiting in another collective"
        else:
            cause = "every rank reached it"
        if timed_out:
            head = (
                f"rank {self.rank}: {what} did not complete within the timeout of "
                f"{_seconds(self.timeout)}: {cause}."
            )
        elif reported:
            head = (
                f"rank {self.rank}: gave up on {what} after {_seconds(waited)} because rank "
                f"{_ranks(sorted(reported))} reported a timeout: {cause}."
            )
        else:
            head = f"rank {self.rank}: gave up on {what} after {_seconds(waited)}: {cause}."
        lines = [head]
        for rank in gone:
            lines.append(
                f"  rank {rank} (pid {self.pids[rank]} on {self.hosts[rank]}) has left the job "
                "(its program ended) without reaching this collective."
            )
        for rank in silent:
            lines.append(
                f"  rank {rank} (pid {self.pids[rank]} on {self.hosts[rank]}) did not answer: "
                "it is hung, has died, or has left the job without reaching this collective."
            )
        for rank in elsewhere:
            sequence, kind = heard[rank]
            lines.append(
                f"  rank {rank} is waiting in its collective #{sequence} "
                f"({_KINDS[kind] if 0 <= kind < len(_KINDS) else 'unknown'}) instead: the "
                "ranks issued collectives in different orders or numbers (a collective "
                "skipped on some ranks, e.g. behind `if rank == 0:`, or unequal numbers of "
                "batches per rank)."
            )
        if same:
            lines.append(f"  rank {_ranks(same)} reached it too and is waiting in it.")
        if not silent and not elsewhere and not gone:
            lines.append(
                "  Every rank reached it, but it did not complete: the transport is stuck "
                "(check the network between the machines)."
            )
        if timed_out:
            lines.append(
                "If the work between collectives legitimately takes longer, raise the "
                f"timeout: init_process_group(timeout=SECONDS) or {TIMEOUT_ENV}=SECONDS."
            )
        return "\n".join(lines), sorted(gone + silent + elsewhere)

    def progress(self) -> None:
        """Let MPI advance started collectives (it does so only inside MPI calls)."""
        self.notices.Iprobe(source=self.MPI.ANY_SOURCE, tag=_NOTICE_TAG)

    # --- NCCL communicators ---------------------------------------------------------------------
    def nccl_transport(self, device: Any) -> Any:
        """The NCCL transport of ``device`` (one per device, made on first use)."""
        transport = self._nccl.get(str(device))
        if transport is None:
            from .nccl import NcclTransport

            transport = self._nccl[str(device)] = NcclTransport.create(self, device)
        return transport

    def close(self) -> None:
        self.announce_departure()
        for transport in self._nccl.values():
            transport.close()
        self._nccl.clear()
        if self._previous_hook is not None and sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
        for comm in (self.comm, self.notices):
            with contextlib.suppress(self.MPI.Exception):
                comm.Free()


# The kinds of collectives, numbered in failure notices.
_KINDS = ("unknown", "all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier")


def _kind_code(description: str) -> int:
    for code, kind in enumerate(_KINDS):
        if description.startswith(kind):
            return code
    return 0


def _ranks(ranks: list[Any]) -> str:
    return ", ".join(str(rank) for rank in ranks)


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def _write_json(path: str, document: Any) -> None:
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as handle:
        json.dump(document, handle)
    os.replace(temporary, path)


def _register_exit_notice() -> None:
    """At interpreter exit (before mpi4py finalises MPI), a rank still in a group tells
    its peers that it leaves."""
    global _exit_notice_registered
    if not _exit_notice_registered:
        _exit_notice_registered = True
        atexit.register(_announce_exit)


def _announce_exit() -> None:
    if _group is not None:
        _group.announce_departure()


_exit_notice_registered = False


# --- the default group ----------------------------------------------------------------------------
_group: ProcessGroup | None = None


def _timeout_setting(timeout: float | None) -> float:
    if timeout is not None:
        value = float(timeout)
        source = "timeout"
    else:
        text = os.environ.get(TIMEOUT_ENV, "")
        if not text:
            return DEFAULT_TIMEOUT
        try:
            value = float(text)
        except ValueError:
            raise DistributedError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None
        source = TIMEOUT_ENV
    if not value > 0:
        raise DistributedError(f"{source} must be a positive number of seconds, got {value}")
    return value


def init_process_group(
    backend: str = "auto", *, timeout: float | None = None, abort_on_error: bool = True
) -> ProcessGroup:
    """Join the job's process group: rank and world size come from the environment that
    ``mpiexec`` (or ``kernelgrad train --nproc``) sets; a program started alone is a
    group of one.

    Args:
        backend: ``"mpi"`` (every tensor through MPI; CUDA tensors are staged through
            host memory), ``"nccl"`` (CUDA tensors through NCCL, which must be
            installed; CPU tensors through MPI) or ``"auto"`` (NCCL for CUDA tensors
            when it is installed, else MPI).
        timeout: seconds a collective may wait for the other ranks before raising
            :class:`CollectiveTimeoutError` naming the ranks that did not arrive
            (default: ``$KERNELGRAD_DIST_TIMEOUT``, else 300).
        abort_on_error: when a rank's program ends with an exception, end every rank of
            the job (``MPI_Abort``) instead of letting the others wait for their timeout.

    >>> import kernelgrad as kg
    >>> group = kg.distributed.init_process_group("mpi")
    >>> kg.distributed.get_rank(), kg.distributed.get_world_size()
    (0, 1)
    >>> kg.distributed.destroy_process_group()
    """
    global _group
    if backend not in BACKENDS:
        raise ValueError(
            f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}"
        )
    if _group is not None:
        raise DistributedError(
            "init_process_group() was already called in this process; call "
            "destroy_process_group() first to start another group"
        )
    seconds = _timeout_setting(timeout)
    if backend == "nccl":
        from .nccl import import_nccl

        import_nccl()  # fail here, with the install hint, rather than at the first call
    _group = ProcessGroup(backend, seconds, abort_on_error)
    return _group


def destroy_process_group() -> None:
    """Leave the process group (``init_process_group`` may then be called again)."""
    global _group
    group, _group = _group, None
    if group is not None:
        group.close()


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has been called (and not destroyed)."""
    return _group is not None


def get_group() -> ProcessGroup:
    """The default process group; an error that says what to call when there is none."""
    if _group is None:
        raise DistributedError(
            "the default process group is not initialised: call "
            "kg.distributed.init_process_group() first (under mpiexec, or `kernelgrad "
            "train --nproc N`, each process then learns its rank)"
        )
    return _group


def get_rank() -> int:
    """This process's rank, 0 .. world size - 1."""
    return get_group().rank


def get_world_size() -> int:
    """The number of processes in the group."""
    return get_group().size


def get_local_rank() -> int:
    """This process's rank among the processes on its machine (picks its GPU)."""
    return get_group().local_rank


def get_backend() -> str:
    """The backend the group was made with: ``"auto"``, ``"mpi"`` or ``"nccl"``."""
    return get_group().backend
