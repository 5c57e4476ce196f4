"""Starting the multi-process tests' MPI jobs (2 processes: mpi4py and the mpiexec of the
mpich wheel, from the ``test`` extra)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT = 300  # seconds for one job, far above what a job takes (no wall-clock check)


def mpi_environment() -> dict[str, str]:
    """The environment of a job: this checkout first on the path, one thread per rank."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([environment["PYTHONPATH"]] if environment.get("PYTHONPATH") else [])
    )
    for name in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        environment[name] = "1"
    environment.pop("NUMBA_ENABLE_CUDASIM", None)
    return environment


def run(command: list[str], environment: dict[str, str] | None = None, **options):
    return subprocess.run(
        command,
        env=environment or mpi_environment(),
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
        cwd=options.pop("cwd", ROOT),
        **options,
    )


def launch(script: Path, nproc: int = 2, environment: dict[str, str] | None = None, *args: str):
    """``python -m kernelgrad.distributed.launch --nproc N script args``."""
    command = [sys.executable, "-m", "kernelgrad.distributed.launch", "--nproc", str(nproc)]
    return run(command + [str(script), *args], environment)
