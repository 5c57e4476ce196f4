"""A 2-rank program in which rank 1 fails in the way ``sys.argv[1]`` names, after one
successful all-reduce (run by test_failures.py through the launcher)."""

from __future__ import annotations

import os
import signal
import sys
import time

import kernelgrad as kg
import kernelgrad.distributed as dist

HOW = sys.argv[1]
group = dist.init_process_group("mpi", timeout=120)  # start-up may be slow on a busy machine
rank = dist.get_rank()
x = kg.ones(4)
dist.all_reduce(x)
print(f"rank {rank}: first all_reduce done", flush=True)
if len(sys.argv) > 2:
    group.timeout = float(sys.argv[2])  # the timeout under test, from here on
if rank == 1:
    if HOW == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif HOW == "raise":
        raise ValueError("rank 1 found a bad value")
    elif HOW == "hang":
        time.sleep(600)  # the job is stopped long before
    elif HOW == "exit":
        sys.exit(3)  # leaves the job without an error
dist.all_reduce(x)
dist.all_reduce(x)
print(f"rank {rank}: finished", flush=True)
