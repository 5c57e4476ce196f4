"""The parent of each rank's process under ``kernelgrad.distributed.launch``.

``mpiexec`` starts ``python -m kernelgrad.distributed.supervise -- COMMAND`` once per
rank; this runs COMMAND as its child (which inherits the MPI launcher's environment and
file descriptors, so it joins the job as if started directly) and waits for it. When the
child ends badly it can say what happened, which the rank's own process cannot when it is
killed (``kill -9``, the out-of-memory killer) or exits without a word:

* it writes ``exit-rank-R.json`` (status or signal, pid, host, time) into the launcher's
  status folder when that folder is on its machine; elsewhere (another machine, or no
  launcher) it prints one line naming the rank on stderr, which the MPI launcher
  forwards;
* for ranks other than 0, when the launcher asks for it, the child's output goes to
  ``rank-R.log`` in the status folder, and its last lines are printed with that line.

Signals the supervisor receives (Ctrl-C, the MPI launcher stopping the job) are passed
to the child, and an end caused by them is not reported as a failure.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

# Set by the launcher for the ranks of a job: its status folder; capture the output of
# ranks other than 0; the ranks are a launched job (kernelgrad train joins a group).
STATUS_ENV = "KERNELGRAD_DIST_STATUS"
CAPTURE_ENV = "KERNELGRAD_DIST_CAPTURE"
LAUNCHED_ENV = "KERNELGRAD_DISTRIBUTED"
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
LOG_TAIL_LINES = 20


def rank_from_environment() -> int | None:
    """This process's rank as the MPI launcher announced it (before MPI starts)."""
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def describe_end(status: int) -> str:
    """``exited with status 3`` or ``was killed by signal 9 (SIGKILL)``."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = "unknown signal"
        return f"was killed by signal {-status} ({name})"
    return f"exited with status {status}"


def log_tail(path: str, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(size - 65536, 0))
            text = handle.read().decode(errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    if not arguments:
        print("usage: python -m kernelgrad.distributed.supervise -- COMMAND ...", file=sys.stderr)
        return 2
    rank = rank_from_environment()
    folder = os.environ.get(STATUS_ENV, "")
    folder = folder if folder and os.path.isdir(folder) else ""
    log_path = ""
    output = None
    if folder and rank not in (None, 0) and os.environ.get(CAPTURE_ENV) == "1":
        log_path = os.path.join(folder, f"rank-{rank}.log")
        output = open(log_path, "ab")  # noqa: SIM115 (the child writes it)
    child = subprocess.Popen(
        arguments,
        close_fds=False,  # the MPI launcher's connection (PMI_FD) must reach the child
        stdout=output,
        stderr=subprocess.STDOUT if output is not None else None,
    )
    received: list[int] = []

    def forward(number: int, _frame: object) -> None:
        received.append(number)
        if child.poll() is None:
            child.send_signal(number)

    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, forward)
    status = child.wait()
    if output is not None:
        output.close()
    if status == 0:
        return 0
    host = socket.gethostname()
    who = f"rank {rank if rank is not None else '?'} (pid {child.pid} on {host})"
    if folder and rank is not None:
        record = {
            "rank": rank,
            "host": host,
            "pid": child.pid,
            "status": status,
            "end": describe_end(status),
            "stopped": bool(received),
            "time": time.time(),
            "log": log_path,
        }
        temporary = os.path.join(folder, f".exit-rank-{rank}.json.tmp")
        with open(temporary, "w") as handle:
            json.dump(record, handle)
        os.replace(temporary, os.path.join(folder, f"exit-rank-{rank}.json"))
    if not received and not folder:  # else the launcher, on this machine, reports it
        lines = [f"kernelgrad: {who} {describe_end(status)}"]
        tail = log_tail(log_path) if log_path else []
        if tail:
            lines.append(f"  its last output ({log_path}):")
            lines += [f"  | {line}" for line in tail]
        print("\n".join(lines), file=sys.stderr, flush=True)
    return status if status > 0 else 128 - status


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
