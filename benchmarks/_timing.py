"""What the benchmark scripts share (``python benchmarks/<script>.py`` puts this folder
first on ``sys.path``, so they import it as ``from _timing import ...``):

* :func:`timeit`, the timing loop;
* :func:`use_threads`, which gives kernelgrad, NumPy's OpenBLAS and PyTorch the same
  number of threads, through the environment, before any of them starts its pool;
* :func:`run_peer` and :func:`report_to_parent`: PyTorch runs in a fresh process of its
  own, started with the environment this process started with. PyTorch and kernelgrad
  in one process share one OpenMP runtime (PyTorch ships its own ``libgomp``, which
  then also serves Numba), and kernelgrad sets ``GOMP_SPINCOUNT`` for its workers when
  its CPU backend starts: timed in kernelgrad's process, PyTorch ran 1.5x slower in
  ``bench_lenet.py`` (10.5 against 6.9 ms per step), and kernelgrad's own region
  start-up costs changed too. So every script times PyTorch in a child process that
  runs the script again with ``--peer`` and prints one JSON record per figure.

Import this module before kernelgrad starts a backend (the scripts import it first).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

# The environment before kernelgrad's CPU backend sets GOMP_SPINCOUNT (or anything else).
ORIGINAL_ENVIRONMENT = dict(os.environ)
THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS")  # fmt: skip
_RECORD = "peer-record\t"


def timeit(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Best and median seconds of ``repeat`` calls of ``fn``, after one warm-up call
    (compiles or loads kernels, faults in memory)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def best_per_call(
    fn: Callable[[], Any],
    number: int,
    repeat: int,
    clock: Callable[[], float] = time.perf_counter,
    warmup: int = 1,
) -> float:
    """Best microseconds per call of ``fn`` over ``repeat`` runs of ``number`` calls each
    (timed with ``clock``), after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        for _ in range(number):
            fn()
        best = min(best, (clock() - start) / number)
    return best * 1e6


def use_threads(threads: int) -> None:
    """Run this script with ``threads`` threads for Numba, OpenMP (PyTorch), OpenBLAS and
    MKL. The pools read their size from the environment when they start, which may
    already have happened (NumPy's OpenBLAS starts at import), so if the environment
    differs the script starts again with it (``os.execve``); the PyTorch process
    inherits it. Call it first in ``main()``."""
    wanted = {name: str(threads) for name in THREAD_VARIABLES}
    if all(os.environ.get(name) == value for name, value in wanted.items()):
        return
    environment = dict(ORIGINAL_ENVIRONMENT, **wanted)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], environment)


def thread_counts() -> str:
    """The thread counts this process uses, for the header line of a report (starts
    kernelgrad's CPU backend first, which configures its OpenMP workers)."""
    import numba

    import kernelgrad as kg
    from kernelgrad.backends.cpu import blas

    kg.zeros(1)

    return (
        f"threads: Numba {numba.get_num_threads()}, OpenBLAS {blas.current_threads()}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"
    )


def run_peer(script: str, arguments: Sequence[str]) -> list[dict[str, Any]]:
    """Run ``python script --peer *arguments`` in a fresh process with the environment
    this process started with, and return the records it reported. Lines it prints
    otherwise are passed through; a failed run prints its error and returns []."""
    result = subprocess.run(
        [sys.executable, script, "--peer", *arguments],
        env=ORIGINAL_ENVIRONMENT,
        capture_output=True,
        text=True,
        check=False,
    )
    records = []
    for line in result.stdout.splitlines():
        if line.startswith(_RECORD):
            records.append(json.loads(line[len(_RECORD) :]))
        else:
            print(line)
    if result.returncode != 0:
        print(f"the PyTorch process failed:\n{result.stderr}")
    return records


def report_to_parent(**record: Any) -> None:
    """In the ``--peer`` process: hand one figure to the parent (see :func:`run_peer`)."""
    print(_RECORD + json.dumps(record), flush=True)


def import_torch(threads: int) -> Any:
    """PyTorch with ``threads`` intra-op threads, or None (and a line saying so)."""
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: no PyTorch figures")
        return None
    torch.set_num_threads(threads)
    return torch
