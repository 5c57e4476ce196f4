"""``kg.compile`` replays state that lives on the host as the eager calls move it: the
random streams (draws whose result nothing reads) and the sign of a zero that selects
or guards a compiled version.

Each test of random numbers runs the same function eagerly and compiled, five calls each
from the same seed, and compares every call (the first runs eagerly, the second is
traced, the others are replays) and the default stream's next numbers after them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.compile.plan import GuardError
from tests.helpers import as_numpy

CALLS = 5


def _runs(make: Callable[[], Callable[..., Any]], device: str, compiled: bool) -> list[Any]:
    """The results of ``CALLS`` calls of ``make()`` (compiled or not) from seed 0, and the
    default stream's next number after them."""
    kg.manual_seed(0)
    fn = make()
    if compiled:
        fn = kg.compile(fn)
    results = [as_numpy(fn(kg.zeros(3, device=device))).tolist() for _ in range(CALLS)]
    return [*results, as_numpy(kg.rand(3, device=device)).tolist()]


def _assert_replays_match_eager(make: Callable[[], Callable[..., Any]], device: str) -> None:
    eager = _runs(make, device, compiled=False)
    compiled = _runs(make, device, compiled=True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-6, atol=1e-7)


# --- random draws ---------------------------------------------------------------------------------
def test_a_draw_nothing_reads_still_advances_the_stream(device):
    """The trace dropped the unread draw as dead code, so later draws came earlier."""

    def make():
        def f(x):
            kg.rand(4, device=device)
            return x + kg.rand(3, device=device)

        return f

    _assert_replays_match_eager(make, device)


# --- the sign of a zero ---------------------------------------------------------------------------
def test_a_guard_tells_minus_zero_from_zero(device):
    """``x / s.item()`` traced with 0.0 and called with -0.0: the replay returned inf."""
    compiled = kg.compile(lambda x, s: x / s.item())
    x = kg.ones(1, device=device)
    for _ in range(3):
        assert as_numpy(compiled(x, kg.tensor(0.0, device=device))).tolist() == [np.inf]
    with pytest.raises(GuardError, match=r"it was 0\.0\).*it is -0\.0"):
        compiled(x, kg.tensor(-0.0, device=device))


def test_a_guard_still_takes_nan_for_nan(device):
    """Any NaN passes a guard that read a NaN (whatever its bits: here its sign)."""
    compiled = kg.compile(lambda x, s: x + (1.0 if s.item() != s.item() else 0.0))
    x = kg.zeros(2, device=device)
    for value in (np.nan, np.nan, np.nan, -np.nan, np.nan):
        assert as_numpy(compiled(x, kg.tensor(value, device=device))).tolist() == [1.0, 1.0]
    assert len(compiled.plans) == 1


@pytest.mark.parametrize("scalar", [np.float64, np.float32, np.float16, float])
def test_numpy_zero_arguments_select_a_version_by_sign(device, scalar):
    """``np.float64(-0.0)`` reused the version traced for 0.0 (only ``float`` zeros were
    told apart)."""
    compiled = kg.compile(lambda x, s: x / s)
    x = kg.ones(1, device=device)
    calls = [scalar(0.0)] * 3 + [scalar(-0.0)] * 3 + [scalar(0.0)]
    for s in calls:
        assert as_numpy(compiled(x, s)).tolist() == as_numpy(x / s).tolist()
    assert len(compiled.plans) == 2
