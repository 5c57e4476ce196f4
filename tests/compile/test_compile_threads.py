"""kg.compile records only the tracing thread's work.

The recorder wraps process-wide backend objects. Before the trace state was kept per
thread, a second thread computing on unrelated tensors during a trace had its launches
recorded into the trace (thousands of them), and the replay returned stale values.
"""

from __future__ import annotations

import threading
import time

import numpy as np

import kernelgrad as kg
from tests.helpers import assert_close


def test_a_trace_ignores_launches_from_other_threads():
    """The probe: thread B multiplies its own tensors in a loop while thread A traces;
    the plan must hold A's launches only and replay A's computation."""

    @kg.compile
    def triple_plus_one(x):
        y = x * 3
        time.sleep(0.05)  # let the other thread run while the trace is recording
        return y + 1

    @kg.compile
    def reference(x):
        y = x * 3
        return y + 1

    stop = threading.Event()
    started = threading.Event()
    launches = [0]
    errors: list[BaseException] = []

    def busy() -> None:
        a = kg.ones(64)
        try:
            while not stop.is_set():
                b = a * 2
                a = b - 1
                launches[0] += 2
                assert a.tolist() == [1.0] * 64  # a host read: not the trace's business
                started.set()
        except BaseException as error:  # reported below
            errors.append(error)
            started.set()

    worker = threading.Thread(target=busy, daemon=True)
    worker.start()
    try:
        assert started.wait(30)
        x = kg.ones(8)
        triple_plus_one(x)  # eager first call
        traced = triple_plus_one(x)  # traced while the other thread launches kernels
        during_trace = launches[0]
    finally:
        stop.set()
        worker.join(30)
    assert not errors, errors
    assert during_trace > 0
    assert_close(traced, np.full(8, 4.0))
    plan = triple_plus_one.last_plan
    # Replays of the trace compute x * 3 + 1 for new inputs.
    assert_close(triple_plus_one(kg.full((8,), 11.0 / 3.0)), np.full(8, 12.0), rtol=1e-6)
    assert_close(triple_plus_one(kg.zeros(8)), np.ones(8))
    # The trace holds the same launches as one made without the other thread.
    reference(x)
    reference(x)
    assert plan.eager_launches == reference.last_plan.eager_launches == 2
    assert plan.kernel_count == reference.last_plan.kernel_count


def test_two_threads_trace_at_once():
    """Trace state per thread: two threads may trace different functions concurrently,
    each recording its own launches."""
    barrier = threading.Barrier(2, timeout=30)
    results: dict[str, object] = {}

    def make(scale: float):
        @kg.compile
        def step(x):
            y = x * scale
            barrier.wait()  # both traces are recording now
            time.sleep(0.02)
            return y.exp().sum()

        return step

    def run(name: str, scale: float) -> None:
        try:
            step = make(scale)
            x = kg.arange(4.0) / 4
            barrier.wait()  # the eager first calls line up too
            step(x)
            step(x)
            results[name] = (step, step(x + 1).item())
        except BaseException as error:  # reported below
            results[name] = error

    threads = [threading.Thread(target=run, args=(n, s)) for n, s in (("a", 2.0), ("b", 0.5))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for name, scale in (("a", 2.0), ("b", 0.5)):
        assert not isinstance(results[name], BaseException), results[name]
        step, value = results[name]
        expected = float(np.exp((np.arange(4.0) / 4 + 1) * scale).sum())
        assert abs(value - expected) < 1e-4 * expected
        assert step.last_plan.eager_launches == 3  # mul, exp, sum: no foreign launches
