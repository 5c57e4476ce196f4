"""``kg.compile`` replays state that lives on the host as the eager calls move it: the
random streams (draws from a ``kg.Generator``, ``kg.set_rng_state`` inside the function,
activation checkpointing's recompute, draws whose result nothing reads) and the sign of
a zero that selects or guards a compiled version.

Each test runs the same function eagerly and compiled, five calls each from the same
seed, and compares every call (the first runs eagerly, the second is traced, the others
are replays) and the default stream's next number after them. What a replay cannot
follow is refused at trace time with a ``TraceError`` that says what to do instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.compile import TraceError
from kernelgrad.compile.plan import GuardError
from kernelgrad.utils.checkpoint import checkpoint
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


# --- the default stream's state -------------------------------------------------------------------
def test_restoring_a_state_saved_outside_repeats_the_noise_every_call(device):
    """Replays drew new noise: the restore was neither recorded nor refused."""

    def make():
        saved = kg.get_rng_state(device)

        def f(x):
            kg.set_rng_state(saved, device)
            return x + kg.rand(3, device=device)

        return f

    _assert_replays_match_eager(make, device)
    compiled = _runs(make, device, compiled=True)
    assert all(result == compiled[0] for result in compiled[:CALLS])


def test_a_state_read_and_restored_inside_follows_the_stream(device):
    """A restore of a state read in the same call restores the replay's own read (the
    trace's would rewind the stream to it on every call)."""

    def make():
        def f(x):
            state = kg.get_rng_state(device)
            first = kg.rand(3, device=device)
            kg.set_rng_state(state, device)
            again = kg.rand(3, device=device)
            return x + first * 10 + again + kg.rand(3, device=device)

        return f

    _assert_replays_match_eager(make, device)


def test_fork_rng_inside(device):
    def make():
        def f(x):
            with kg.random.fork_rng(device_type=kg.device(device).type):
                inside = kg.rand(3, device=device)
            return x + inside + kg.rand(3, device=device)

        return f

    _assert_replays_match_eager(make, device)


@pytest.mark.parametrize("change", ["copy", "in place"])
def test_a_copied_or_changed_state_is_refused(device, change):
    def f(x):
        state = kg.get_rng_state(device)
        if change == "copy":
            state = dict(state)
        else:
            state["counter"] += 4
        kg.set_rng_state(state, device)
        return x + kg.rand(3, device=device)

    compiled = kg.compile(f)
    x = kg.zeros(3, device=device)
    compiled(x)
    with pytest.raises(TraceError, match=r"copy or a changed version.*very object"):
        compiled(x)


def test_manual_seed_inside_is_refused_with_what_to_do_instead(device):
    def f(x):
        kg.manual_seed(3)
        return x + kg.rand(3, device=device)

    compiled = kg.compile(f)
    x = kg.zeros(3, device=device)
    compiled(x)
    with pytest.raises(TraceError, match=r"kg.manual_seed.*before calling.*kg.set_rng_state"):
        compiled(x)


def test_a_draw_nothing_reads_still_advances_the_stream(device):
    """The trace dropped the unread draw as dead code, so later draws came earlier."""

    def make():
        def f(x):
            kg.rand(4, device=device)
            return x + kg.rand(3, device=device)

        return f

    _assert_replays_match_eager(make, device)


def test_nested_compiled_functions_draw_as_eager(device):
    """A compiled function replayed inside another's trace: its replay's generator draw
    and state steps are recorded by the outer trace as the eager calls would be."""

    def make(compiled: bool) -> Callable[..., Any]:
        g = kg.Generator(device).manual_seed(4)

        def inner(x):
            with kg.random.fork_rng(device_type=kg.device(device).type):
                peek = kg.rand(3, device=device)
            return x + kg.rand(3, generator=g, device=device) + peek

        called = kg.compile(inner) if compiled else inner
        return lambda x: called(x) * 2 + kg.rand(3, generator=g, device=device)

    eager = _runs(lambda: make(False), device, compiled=False)
    compiled = _runs(lambda: make(True), device, compiled=True)
    np.testing.assert_allclose(compiled, eager, rtol=1e-6, atol=1e-7)


# --- activation checkpointing ---------------------------------------------------------------------
class _Checkpointed(kg.nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.inner = kg.nn.Linear(3, 8)
        self.drop = kg.nn.Dropout(0.5)
        self.outer = kg.nn.Linear(8, 2)

    def block(self, hidden: kg.Tensor) -> kg.Tensor:
        return self.drop(hidden.relu())

    def forward(self, x: kg.Tensor) -> kg.Tensor:
        # (the checkpoint's input requires grad, as use_reentrant=True wants)
        hidden = checkpoint(self.block, self.inner(x), use_reentrant=self.reentrant)
        return self.outer(hidden)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_dropout_in_a_compiled_training_step(device, reentrant):
    """The recompute restores the forward pass's random state to draw the same mask:
    replays restored the trace's state, so the gradients (not the loss) were wrong."""
    models = []
    for _ in range(2):
        kg.manual_seed(0)
        model = _Checkpointed(reentrant).to(device)
        models.append((model, kg.optim.SGD(model.parameters(), lr=0.1)))

    def step(model, optimizer, x, y):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    (eager_model, eager_optimizer), (model, optimizer) = models
    compiled = kg.compile(lambda x, y: step(model, optimizer, x, y))
    for call in range(CALLS):
        kg.manual_seed(10 + call)
        x, y = kg.randn(5, 3, device=device), kg.randn(5, 2, device=device)
        kg.manual_seed(100 + call)
        loss = as_numpy(compiled(x, y))
        kg.manual_seed(100 + call)
        expected = as_numpy(step(eager_model, eager_optimizer, x.clone(), y.clone()))
        np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), eager_model.parameters()):
            np.testing.assert_allclose(as_numpy(p.grad), as_numpy(q.grad), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(as_numpy(p), as_numpy(q), rtol=1e-5, atol=1e-6)


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
