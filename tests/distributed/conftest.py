"""The multi-process tests start real MPI jobs; without mpi4py and an mpiexec they skip."""

from __future__ import annotations

import pytest

# A script that mpiexec runs, not a test module: importing it (pytest's --doctest-modules
# imports every module it collects) would start an MPI job.
collect_ignore = ["failing_rank.py"]


@pytest.fixture(scope="session")
def mpiexec() -> str:
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install -e '.[test]')")
    from kernelgrad.distributed.launch import LaunchError, find_mpiexec

    try:
        return find_mpiexec().path
    except LaunchError as error:
        pytest.skip(str(error))
