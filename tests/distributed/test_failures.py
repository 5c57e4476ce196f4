"""A rank that dies, raises, hangs or leaves ends the job with an error naming it, never
a silent hang (2 processes through ``python -m kernelgrad.distributed.launch``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .jobs import launch

SCRIPT = Path(__file__).with_name("failing_rank.py")


def run_failing(how: str, timeout: str = "60"):
    job = launch(SCRIPT, 2, None, how, timeout)
    return job.returncode, job.stdout, job.stderr


def test_a_killed_rank_is_named_with_its_signal(mpiexec):
    code, out, err = run_failing("kill")
    assert code == 1
    assert "kernelgrad: rank 1 (pid" in err
    assert "was killed by signal 9 (SIGKILL); the other ranks were stopped" in err
    assert "rank 1: first all_reduce done" in err  # the end of rank 1's own output
    assert "rank 0: finished" not in out
    assert "BAD TERMINATION" not in out + err  # the MPI launcher's banner is replaced


def test_an_exception_on_one_rank_stops_the_others(mpiexec):
    code, out, err = run_failing("raise")
    assert code == 1
    assert "rank 1 (pid" in err and "failed: ValueError: rank 1 found a bad value" in err
    assert "rank 0: finished" not in out


def test_a_hung_rank_is_named_by_the_others_timeout(mpiexec):
    code, _, err = run_failing("hang", timeout="2")
    assert code == 1
    assert "CollectiveTimeoutError" in err
    assert "did not complete within the timeout of 2.0 s: rank 1 did not answer" in err
    assert "kernelgrad: rank 0 (pid" in err  # the launcher names the rank that gave up
    # and repeats the message's details (the MPI launcher may drop rank 0's own output)
    report = err[err.index("kernelgrad: rank 0 (pid") :]
    assert "rank 1 (pid" in report and "is hung, has died, or has left the job" in report


def test_a_rank_that_leaves_early_is_named_at_once(mpiexec):
    code, _, err = run_failing("exit", timeout="120")
    assert code == 1
    # named through its departure notice, not after the 120 s timeout
    assert "rank 1 has left the job" in err
    assert "within the timeout" not in err


@pytest.mark.parametrize("options", [["--hosts", "a:x"], ["--hostfile", "/no/such/file"]])
def test_bad_launch_options(options):
    import subprocess
    import sys

    from .jobs import mpi_environment

    command = [sys.executable, "-m", "kernelgrad.distributed.launch", "--nproc", "2"]
    job = subprocess.run(
        command + options + [str(SCRIPT), "raise"],
        capture_output=True,
        text=True,
        env=mpi_environment(),
        timeout=60,
    )
    assert job.returncode == 2
    assert "kernelgrad.distributed.launch: error:" in job.stderr
