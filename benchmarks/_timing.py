"""The timing loop shared by the benchmark scripts (``python benchmarks/<script>.py`` puts
this folder first on ``sys.path``, so they import it as ``from _timing import timeit``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


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
