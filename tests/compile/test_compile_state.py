"""``kg.compile`` replays state that lives on the host as the eager calls move it: the
random streams (draws from a ``kg.Generator``, draws whose result nothing reads) and
the sign of a zero that selects or guards a compiled version.

Each test of random numbers runs the same function eagerly and compiled, five calls each
from the same seed, and compares every call (the first runs eagerly, the second is
traced, the others are replays) and the default stream's next numbers after them.
What a replay cannot follow is refused at trace time with a ``TraceError`` that says
what to do instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.compile import TraceError
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


# --- kg.Generator ---------------------------------------------------------------------------------
def test_draws_from_a_generator_replay_from_it_and_leave_the_default_stream(device):
    """The replays drew from the default stream instead of ``g`` (and so advanced it)."""

    def make():
        g = kg.Generator(device).manual_seed(3)
        return lambda x: x + kg.rand(3, generator=g, device=device)

    _assert_replays_match_eager(make, device)


def test_generator_and_default_draws_mixed(device):
    def make():
        g = kg.Generator(device).manual_seed(3)

        def f(x):
            noise = kg.randn(3, generator=g, device=device)
            return x + noise * kg.rand(3, device=device) + kg.rand(3, generator=g, device=device)

        return f

    _assert_replays_match_eager(make, device)


def test_a_generator_made_and_seeded_inside_gives_the_same_numbers_every_call(device):
    """Its creation and manual_seed are replayed: the trace's generator is seeded again."""

    def make():
        def f(x):
            fixed = kg.Generator(device).manual_seed(5)
            fresh = kg.Generator(device)  # PyTorch's default seed, on every call
            return (
                x
                + kg.rand(3, generator=fixed, device=device)
                - kg.rand(3, generator=fresh, device=device)
            )

        return f

    _assert_replays_match_eager(make, device)


def test_a_generator_reseeded_after_its_draw(device):
    def make():
        g = kg.Generator(device).manual_seed(1)

        def f(x):
            drawn = x + kg.rand(3, generator=g, device=device)
            g.manual_seed(9)  # the next call draws from seed 9
            return drawn

        return f

    _assert_replays_match_eager(make, device)


def test_a_generator_reseeded_between_calls_is_followed(device):
    g = kg.Generator(device).manual_seed(1)
    f = kg.compile(lambda x: x + kg.rand(3, generator=g, device=device))
    x = kg.zeros(3, device=device)
    for _ in range(4):
        f(x)
    g.manual_seed(2)
    replayed = as_numpy(f(x)).tolist()
    fresh = kg.Generator(device).manual_seed(2)
    assert replayed == as_numpy(kg.rand(3, generator=fresh, device=device)).tolist()


@pytest.mark.parametrize(
    ("use", "message"),
    [
        (lambda g: g.get_state(), r"reads a kg.Generator's state \(Generator.get_state\(\)\)"),
        (lambda g: g.set_state({"seed": 1, "counter": 0}), r"sets a kg.Generator's state"),
        (lambda g: g.seed(), r"seeds a kg.Generator from fresh entropy"),
    ],
)
def test_generator_state_from_python_is_refused(device, use, message):
    g = kg.Generator(device).manual_seed(1)

    def f(x):
        use(g)
        return x + kg.rand(3, generator=g, device=device)

    compiled = kg.compile(f)
    x = kg.zeros(3, device=device)
    compiled(x)  # the first call runs eagerly
    with pytest.raises(TraceError, match=message + r".*outside the compiled function"):
        compiled(x)


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
