"""Starting a program as N processes through the MPI launcher.

::

    python -m kernelgrad.distributed.launch --nproc 2 train.py --epochs 3
    python -m kernelgrad.distributed.launch --nproc 8 --hosts node1,node2 -m mypackage.train
    kernelgrad train --nproc 2 ...          # the same, for the kernelgrad command

The MPI launcher is ``mpiexec`` from the ``mpich`` wheel (installed with
``kernelgrad[distributed]``, next to the Python interpreter), a system MPI's, or the one
``$KERNELGRAD_MPIEXEC`` names; MPICH's hydra and Open MPI's options are known. Each
process:

* gets ``cores / processes on its machine`` CPU threads (``NUMBA_NUM_THREADS``,
  ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``), unless ``--threads``
  or those variables say otherwise;
* runs under :mod:`kernelgrad.distributed.supervise`, which reports how it ended; the
  output of ranks other than 0 goes to ``rank-R.log`` files in a status folder, so that
  only rank 0 prints (``--all-output`` shows every rank's output instead).

While the job runs, the launcher watches the status folder: when a rank on this machine
fails (a non-zero exit, a signal), it stops the job at once and says which rank failed
and how, with the end of that rank's output. A rank that hangs is named by the others
when their collectives time out (``KERNELGRAD_DIST_TIMEOUT``, see
:mod:`kernelgrad.distributed.group`).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from .supervise import CAPTURE_ENV, LAUNCHED_ENV, STATUS_ENV, log_tail

__all__ = ["LaunchError", "MPILauncher", "find_mpiexec", "launch", "main"]

THREAD_VARIABLES = (
    "NUMBA_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
)
MPIEXEC_ENV = "KERNELGRAD_MPIEXEC"
_POLL_SECONDS = 0.2
_STOP_GRACE_SECONDS = 10.0


class LaunchError(Exception):
    """The job cannot be started (no MPI launcher, bad options); the message says why."""


@dataclass(frozen=True)
class MPILauncher:
    """An ``mpiexec`` and the dialect of its options (``hydra`` or ``openmpi``)."""

    path: str
    flavour: str

    @property
    def title(self) -> str:
        return {"hydra": "MPICH hydra", "openmpi": "Open MPI"}.get(self.flavour, self.flavour)


def find_mpiexec() -> MPILauncher:
    """``$KERNELGRAD_MPIEXEC``, else the ``mpiexec`` beside this Python (the mpich wheel
    puts it there, also when the virtual environment is not activated), else on PATH."""
    candidates = []
    if os.environ.get(MPIEXEC_ENV):
        candidates.append(os.environ[MPIEXEC_ENV])
    candidates.append(os.path.join(os.path.dirname(sys.executable), "mpiexec"))
    found = shutil.which("mpiexec")
    if found:
        candidates.append(found)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return MPILauncher(path, _flavour(path))
    raise LaunchError(
        "no MPI launcher (mpiexec) was found: pip install 'kernelgrad[distributed]' (the "
        "mpich wheel brings one), install a system MPI, or set KERNELGRAD_MPIEXEC to the "
        "path of an mpiexec"
    )


def _flavour(path: str) -> str:
    try:
        text = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "hydra"
    if "Open MPI" in text or "OpenRTE" in text or "Open RTE" in text:
        return "openmpi"
    return "hydra"  # MPICH, Intel MPI and MVAPICH use hydra's options


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def parse_hosts(text: str) -> list[tuple[str, int | None]]:
    """``a,b`` or ``a:2,b:2`` -> [(host, slots or None), ...]."""
    hosts = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, slots = item.partition(":")
        if slots and not slots.isdigit():
            raise LaunchError(f"--hosts {text}: {item!r} is not HOST or HOST:SLOTS")
        hosts.append((name, int(slots) if slots else None))
    if not hosts:
        raise LaunchError(f"--hosts {text!r} names no machine")
    return hosts


def _hostfile_machines(path: str) -> int:
    try:
        with open(path) as handle:
            lines = [line.split("#")[0].strip() for line in handle]
    except OSError as error:
        raise LaunchError(f"--hostfile {path}: {error}") from None
    machines = len([line for line in lines if line])
    if machines == 0:
        raise LaunchError(f"--hostfile {path} names no machine")
    return machines


def threads_per_process(
    nproc: int, hosts: list[tuple[str, int | None]] | None, hostfile: str | None
) -> int:
    """The cores of this machine shared by the processes that land on one machine."""
    if hosts:
        machines = len(hosts)
    elif hostfile:
        machines = _hostfile_machines(hostfile)
    else:
        machines = 1
    per_machine = math.ceil(nproc / machines)
    return max(1, cpu_count() // per_machine)


def mpiexec_command(
    launcher: MPILauncher,
    nproc: int,
    program: Sequence[str],
    environment: dict[str, str],
    hosts: list[tuple[str, int | None]] | None = None,
    hostfile: str | None = None,
) -> list[str]:
    """The ``mpiexec`` command line in the launcher's dialect."""
    command = [launcher.path, "-n", str(nproc)]
    if launcher.flavour == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-run-as-root")
        if hosts:
            per_host = math.ceil(nproc / len(hosts))
            command += ["--host", ",".join(f"{h}:{s or per_host}" for h, s in hosts)]
        if hostfile:
            command += ["--hostfile", hostfile]
        for name, value in environment.items():
            command += ["-x", f"{name}={value}"]
    else:
        if hosts:
            command += ["-hosts", ",".join(f"{h}:{s}" if s else h for h, s in hosts)]
        if hostfile:
            command += ["-f", hostfile]
        for name, value in environment.items():
            command += ["-genv", name, value]
    supervisor = [sys.executable, "-m", "kernelgrad.distributed.supervise", "--"]
    return command + supervisor + list(program)


def launch(
    program: Sequence[str],
    nproc: int,
    *,
    hosts: str | None = None,
    hostfile: str | None = None,
    threads: int | None = None,
    all_output: bool = False,
    stream: TextIO | None = None,
) -> int:
    """Run ``program`` (a command line) as ``nproc`` MPI processes; returns the exit
    status (0 when every rank succeeded). Failures are reported on ``stream``."""
    stream = stream if stream is not None else sys.stderr
    if nproc < 1:
        raise LaunchError(f"--nproc must be at least 1, got {nproc}")
    host_list = parse_hosts(hosts) if hosts else None
    if hostfile and not os.path.isfile(hostfile):
        raise LaunchError(f"--hostfile {hostfile}: no such file")
    launcher = find_mpiexec()
    count = threads if threads is not None else threads_per_process(nproc, host_list, hostfile)
    status_folder = tempfile.mkdtemp(prefix="kernelgrad-job-")
    environment = {STATUS_ENV: status_folder, LAUNCHED_ENV: "1", "PYTHONUNBUFFERED": "1"}
    if not all_output:
        environment[CAPTURE_ENV] = "1"
    kept = [name for name in THREAD_VARIABLES if name in os.environ]
    for name in THREAD_VARIABLES:
        environment[name] = os.environ.get(name) or str(count)
    command = mpiexec_command(launcher, nproc, program, environment, host_list, hostfile)
    where = f"on {', '.join(h for h, _ in host_list)}" if host_list else "on this machine"
    if hostfile:
        where = f"on the machines of {hostfile}"
    note = f" ({', '.join(kept)} kept from the environment)" if kept else ""
    print(
        f"kernelgrad: starting {nproc} process(es), {count} CPU thread(s) each{note}, with "
        f"{launcher.path} ({launcher.title}) {where}",
        file=stream,
        flush=True,
    )
    child_environment = {**os.environ, **environment}
    job = subprocess.Popen(
        command, env=child_environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    banners: list[str] = []
    relays = [
        threading.Thread(target=_relay, args=(pipe, target, banners), daemon=True)
        for pipe, target in ((job.stdout, sys.stdout), (job.stderr, stream))
    ]
    for relay in relays:
        relay.start()
    failure: dict[str, Any] | None = None
    try:
        while job.poll() is None:
            failure = failure or _first_failure(status_folder)
            if failure is not None:
                _stop(job)
                break
            time.sleep(_POLL_SECONDS)
        status = job.wait()
    except KeyboardInterrupt:
        _stop(job)
        return 130
    finally:
        for relay in relays:
            relay.join(timeout=5)
    if status == 0:
        shutil.rmtree(status_folder, ignore_errors=True)
        return 0
    time.sleep(_POLL_SECONDS)  # the supervisors' records of a job that ended by itself
    failure = _first_failure(status_folder) or failure
    if failure is None and banners:  # no report of ours: show the MPI launcher's
        stream.write("".join(banners))
    _report(failure, status_folder, status, stream)
    return status if status in (2, 130) else 1


def _relay(pipe: Any, stream: TextIO, banners: list[str]) -> None:
    """Copy the job's output to ``stream``, holding back MPICH hydra's "BAD TERMINATION"
    banner (shown only when the launcher has no report of its own)."""
    held: list[str] = []
    for raw in iter(pipe.readline, b""):
        line = raw.decode(errors="replace")
        if held:
            held.append(line)
            if "BAD TERMINATION" not in held[1] and len(held) == 2:
                stream.write("".join(held))
                held.clear()
            elif "FAQ page" in line:
                banners.extend(held)
                held.clear()
            continue
        if line.startswith("=" * 40):
            held.append(line)
            continue
        stream.write(line)
        stream.flush()
    if held:
        stream.write("".join(held))
    pipe.close()


def _stop(job: subprocess.Popen) -> None:
    """Ask the MPI launcher to stop every rank; insist after a grace period."""
    if job.poll() is not None:
        return
    job.send_signal(signal.SIGTERM)
    try:
        job.wait(timeout=_STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        job.kill()
        job.wait()


def _read_records(folder: str, pattern: str) -> list[dict[str, Any]]:
    records = []
    for path in glob.glob(os.path.join(folder, pattern)):
        with contextlib.suppress(OSError, ValueError), open(path) as handle:
            records.append(json.load(handle))
    return records


def _first_failure(folder: str) -> dict[str, Any] | None:
    """The rank that failed first: the earliest error its program reported
    (``failure-rank-R.json``) or bad end its supervisor saw (``exit-rank-R.json``; ends
    caused by a signal forwarded to stop the job do not count), both merged per rank."""
    ranks: dict[int, dict[str, Any]] = {}
    for record in _read_records(folder, "exit-rank-*.json"):
        if not record.get("stopped"):
            ranks[record["rank"]] = dict(record)
    for record in _read_records(folder, "failure-rank-*.json"):
        merged = ranks.setdefault(record["rank"], dict(record))
        merged["message"] = record["message"]
        merged["time"] = min(merged["time"], record["time"])
    if not ranks:
        return None
    return min(ranks.values(), key=lambda record: record["time"])


def _report(failure: dict[str, Any] | None, folder: str, status: int, stream: TextIO) -> None:
    if failure is None:
        if status in (2, 130):  # a usage error every rank printed; an interruption
            return
        print(
            f"kernelgrad: the MPI job ended with status {status}; no rank left a record (see "
            f"the MPI launcher's messages above). Status folder: {folder}",
            file=stream,
            flush=True,
        )
        return
    who = f"rank {failure['rank']} (pid {failure['pid']} on {failure['host']})"
    details: list[str] = []
    if "message" in failure:
        # Its program printed the whole message, but the MPI launcher may drop a rank's
        # last output when the job is aborted: the report repeats the message's details.
        first_line, *details = failure["message"].splitlines() or [""]
        lines = [f"kernelgrad: {who} failed: {first_line.rstrip('.')}"]
    else:
        lines = [f"kernelgrad: {who} {failure.get('end', 'failed')}"]
    lines[0] += "; the other ranks were stopped."
    lines += [line for line in details if line.strip()]
    log = failure.get("log") or ""
    tail = log_tail(log) if log else []
    if tail:
        lines.append(f"Its last output ({log}):")
        lines += [f"  | {line}" for line in tail]
    logs = sorted(glob.glob(os.path.join(folder, "rank-*.log")))
    if logs:
        lines.append(f"The output of ranks other than 0 is in {folder}/rank-*.log")
    print("\n".join(lines), file=stream, flush=True)


# --- command line -------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--nproc``, ``--hosts``, ``--hostfile`` (for ``kernelgrad train``)."""
    parser.add_argument(
        "--nproc",
        type=int,
        metavar="N",
        help="data-parallel training on N processes started with mpiexec (each gets cores/N "
        "CPU threads); --batch-size stays the total batch of one step",
    )
    parser.add_argument(
        "--hosts", metavar="A,B", help="with --nproc: the machines to run on (HOST or HOST:SLOTS)"
    )
    parser.add_argument(
        "--hostfile", metavar="FILE", help="with --nproc: a file naming the machines"
    )


def strip_options(argv: Sequence[str], names: Sequence[str]) -> list[str]:
    """``argv`` without the options ``names`` (``--name VALUE`` and ``--name=VALUE``)."""
    result: list[str] = []
    skip = False
    for item in argv:
        if skip:
            skip = False
            continue
        if item in names:
            skip = True
            continue
        if any(item.startswith(name + "=") for name in names):
            continue
        result.append(item)
    return result


def train_with_processes(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``kernelgrad train --nproc N ...``: the same command on N processes (without the
    launch options), each of which joins the process group (``LAUNCHED_ENV``)."""
    from ..cli import UserError
    from .training import check_batch_size

    if args.nproc is None:
        raise UserError("--hosts and --hostfile need --nproc N")
    if args.batch_size is not None and args.nproc > 0:
        check_batch_size(args.batch_size, args.nproc)  # before starting any process
    program = [sys.executable, "-m", "kernelgrad"]
    program += strip_options(argv, ("--nproc", "--hosts", "--hostfile"))
    try:
        return launch(
            program, args.nproc, hosts=args.hosts, hostfile=args.hostfile, threads=args.threads
        )
    except LaunchError as error:
        raise UserError(str(error)) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kernelgrad.distributed.launch",
        description="Run a Python program as N data-parallel processes through mpiexec.",
    )
    parser.add_argument("--nproc", type=int, required=True, metavar="N", help="processes")
    parser.add_argument("--hosts", metavar="A,B", help="machines (HOST or HOST:SLOTS)")
    parser.add_argument("--hostfile", metavar="FILE", help="a file naming the machines")
    parser.add_argument("--threads", type=int, metavar="T", help="CPU threads per process")
    parser.add_argument(
        "--all-output", action="store_true", help="show every rank's output, not only rank 0's"
    )
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module (python -m)")
    parser.add_argument("program", nargs=argparse.REMAINDER, help="SCRIPT.py [ARGS...]")
    args = parser.parse_args(argv)
    if args.module:
        program = [sys.executable, "-m", args.module, *args.program]
    elif args.program:
        program = [sys.executable, *args.program]
    else:
        parser.error("give a script (SCRIPT.py ARGS...) or -m MODULE ARGS...")
    try:
        return launch(
            program,
            args.nproc,
            hosts=args.hosts,
            hostfile=args.hostfile,
            threads=args.threads,
            all_output=args.all_output,
        )
    except LaunchError as error:
        print(f"kernelgrad.distributed.launch: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
