"""The launcher's command lines for MPICH's hydra and Open MPI, thread counts and option
handling (no processes are started)."""

from __future__ import annotations

import sys

import pytest

from kernelgrad.distributed import launch
from kernelgrad.distributed.launch import LaunchError, MPILauncher


def command(flavour: str, **options) -> list[str]:
    return launch.mpiexec_command(
        MPILauncher("/opt/mpi/bin/mpiexec", flavour),
        4,
        ["python", "train.py", "--epochs", "2"],
        {"KERNELGRAD_DIST_STATUS": "/tmp/job", "NUMBA_NUM_THREADS": "2"},
        **options,
    )


def test_hydra_command_line():
    line = command("hydra", hosts=launch.parse_hosts("node1:2,node2"))
    assert line[:6] == ["/opt/mpi/bin/mpiexec", "-n", "4", "-hosts", "node1:2,node2", "-genv"]
    environment = ["-genv", "KERNELGRAD_DIST_STATUS", "/tmp/job", "-genv", "NUMBA_NUM_THREADS"]
    assert line[5:11] == environment + ["2"]
    supervisor = [sys.executable, "-m", "kernelgrad.distributed.supervise", "--"]
    assert line[11:] == supervisor + ["python", "train.py", "--epochs", "2"]
    assert command("hydra", hostfile="machines")[3:5] == ["-f", "machines"]


def test_open_mpi_command_line(monkeypatch):
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0)
    line = command("openmpi", hosts=launch.parse_hosts("a,b"))
    assert line[3] == "--allow-run-as-root"
    assert line[4:6] == ["--host", "a:2,b:2"]  # 4 processes over 2 machines: 2 slots each
    assert "-x" in line and "KERNELGRAD_DIST_STATUS=/tmp/job" in line
    assert command("openmpi", hostfile="machines")[4:6] == ["--hostfile", "machines"]


def test_threads_are_the_cores_of_a_machine_over_its_processes(monkeypatch, tmp_path):
    monkeypatch.setattr(launch, "cpu_count", lambda: 16)
    assert launch.threads_per_process(4, None, None) == 4
    assert launch.threads_per_process(32, None, None) == 1
    assert launch.threads_per_process(8, launch.parse_hosts("a,b"), None) == 4
    hostfile = tmp_path / "machines"
    hostfile.write_text("# the machines\nnode1:4\nnode2:4\n\nnode3:4\n")
    assert launch.threads_per_process(6, None, str(hostfile)) == 8


def test_launch_options_are_removed_for_the_ranks():
    argv = ["train", "--nproc", "2", "--epochs", "3", "--hosts=a,b", "--hostfile", "f", "--seed=1"]
    assert launch.strip_options(argv, ("--nproc", "--hosts", "--hostfile")) == [
        "train",
        "--epochs",
        "3",
        "--seed=1",
    ]


@pytest.mark.parametrize("text", ["", "a:two", ",,"])
def test_bad_hosts(text):
    with pytest.raises(LaunchError, match="--hosts"):
        launch.parse_hosts(text)
