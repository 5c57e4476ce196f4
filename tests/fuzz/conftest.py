"""The fuzz campaign (tests/fuzz/): Hypothesis drives random shapes, dtypes, layouts,
special values, out-of-range indices and bad arguments through the public ops, nn
layers and losses, and ``oracle.check`` requires each call to match NumPy or to raise a
kernelgrad error naming the op.

Examples per test: 10 on the CPU and 3 under the CUDA simulator in CI (fixed inputs:
Hypothesis is derandomized), or ``KG_FUZZ_EXAMPLES=N`` for a long local run (then with
random inputs: ``KG_FUZZ_EXAMPLES=2000 python -m pytest tests/fuzz``). The number of
cases run is printed at the end of the test output.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.oracle import count_case

CPU_EXAMPLES = 10
SIMULATED_EXAMPLES = 3


def examples(simulated: bool) -> int:
    chosen = os.environ.get("KG_FUZZ_EXAMPLES")
    if chosen:
        return int(chosen)
    return SIMULATED_EXAMPLES if simulated else CPU_EXAMPLES


class Fuzz:
    """``fuzz.run(strategy, body)``: run ``body(case)`` on the examples Hypothesis draws
    from ``strategy``, with this run's example count and the case counter."""

    def __init__(self, test: str, simulated: bool) -> None:
        self.test = test
        self.simulated = simulated
        # Tiny shapes under the simulator (each CUDA thread is a Python thread there).
        self.max_side = 2 if simulated else 4

    def run(self, strategy: st.SearchStrategy, body: Callable[[Any], None]) -> None:
        long_run = bool(os.environ.get("KG_FUZZ_EXAMPLES"))

        @settings(
            max_examples=examples(self.simulated),
            deadline=None,
            derandomize=not long_run,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def cases(case: Any) -> None:
            count_case(self.test)
            body(case)

        cases()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The campaign feeds NaN, infinity and mismatched shapes on purpose: NumPy's
    # floating point RuntimeWarnings and the losses' broadcast warning are expected.
    for item in items:
        if "tests/fuzz/" in item.path.as_posix():
            item.add_marker(pytest.mark.filterwarnings("ignore::RuntimeWarning"))
            item.add_marker(pytest.mark.filterwarnings("ignore:.*will be broadcast"))


@pytest.fixture
def fuzz(request: pytest.FixtureRequest, device: str, simulated: bool) -> Fuzz:
    return Fuzz(request.node.name, simulated)
