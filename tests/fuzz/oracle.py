"""The fuzz campaign's oracle: every call either matches a NumPy reference or raises a
kernelgrad error that names the operation. Anything else is a finding:

* an exception of a class kernelgrad does not define (an ``IndexError`` from NumPy, a
  ``TypingError`` from Numba, a ``ZeroDivisionError`` from Python, ...);
* a kernelgrad error whose message does not name the operation;
* a result that differs from the reference, or a result where the reference refuses the
  input (kernelgrad accepted something invalid: a silent wrong result);
* a call that runs longer than the per-case limit (a hang).

``Campaign`` counts the cases; ``tests/fuzz/conftest.py`` prints the counts at the end
of the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import kernelgrad as kg

# Seconds one case may run (kernel compiles included) before it counts as a hang.
CASE_LIMIT = 120


class UndefinedError(Exception):
    """Raised by a reference when the result is implementation-defined (a NaN cast to an
    integer): kernelgrad may return anything there, but must not fail internally."""


class HangError(Exception):
    pass


def is_kernelgrad_error(error: BaseException) -> bool:
    return type(error).__module__.split(".")[0] == "kernelgrad"


@dataclass
class Campaign:
    cases: Counter = field(default_factory=Counter)  # per test
    outcomes: Counter = field(default_factory=Counter)  # matched / refused / undefined
    refusals: Counter = field(default_factory=Counter)  # per error class
    builtin_raises: Counter = field(default_factory=Counter)  # tolerated, see below
    known: Counter = field(default_factory=Counter)  # known findings, see check(known=)
    started: float = field(default_factory=time.perf_counter)

    def summary(self) -> str:
        if not self.cases:
            return ""
        total = sum(self.outcomes.values())
        parts = ", ".join(f"{n} {kind}" for kind, n in sorted(self.outcomes.items()))
        classes = ", ".join(f"{name} {n}" for name, n in self.refusals.most_common())
        lines = [
            f"{total} cases in {len(self.cases)} fuzz tests ({parts}); "
            f"KG_FUZZ_EXAMPLES={os.environ.get('KG_FUZZ_EXAMPLES', 'unset')}",
            f"refused with: {classes or 'nothing'}",
        ]
        lines += [f"  {test}: {n} cases" for test, n in sorted(self.cases.items())]
        if self.known:
            lines.append("known findings in code outside this campaign's fixes (to fix):")
            lines += [f"  {what}: {n}" for what, n in sorted(self.known.items())]
        if self.builtin_raises:
            lines.append("checks that raise a built-in class instead of a kernelgrad error:")
            lines += [f"  {site}: {n}" for site, n in sorted(self.builtin_raises.items())]
        return "\n".join(lines)


CAMPAIGN = Campaign()


def as_array(value: Any) -> np.ndarray:
    if isinstance(value, kg.Tensor):
        return value.cpu().numpy()
    return np.asarray(value)


def assert_matches(
    got: Any, want: Any, rtol: float, atol: float, what: str, check_shape: bool = True
) -> None:
    got_array, want_array = as_array(got), np.asarray(want)
    if check_shape:
        assert got_array.shape == want_array.shape, (
            f"{what}: shape {got_array.shape}, NumPy gives {want_array.shape}"
        )
    if got_array.dtype == np.bool_ or want_array.dtype == np.bool_:
        got_array = got_array.astype(np.float64) != 0
        want_array = want_array.astype(np.float64) != 0
        assert np.array_equal(got_array, want_array), f"{what}: {got_array} != {want_array}"
        return
    np.testing.assert_allclose(
        got_array.astype(np.float64),
        want_array.astype(np.float64),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
        err_msg=what,
    )


@contextlib.contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    """SIGALRM-based: a case that runs too long raises ``Hang`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "alarm"):
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise HangError(f"the call ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check(
    names: str | Sequence[str],
    call: Callable[[], Any],
    reference: Callable[[], Any] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    compare: Callable[[Any, Any], None] | None = None,
    known: str | None = None,
) -> str:
    """Run one case. ``names``: the operation (or the names any of which its error
    message may use). ``reference`` computes the expected value (NumPy); raising means
    the input is invalid, ``UndefinedError`` that any value is acceptable. ``compare(got,
    want)`` replaces the default comparison (for tuples of results). ``known`` describes
    a known finding this case hits in code the campaign does not fix: a failure is then
    counted under that description (and listed at the end) instead of failing the test.
    Returns the outcome."""
    if known is not None:
        try:
            return check(names, call, reference, rtol, atol, compare)
        except AssertionError:
            CAMPAIGN.known[known] += 1
            return _record("known finding")
    names = (names,) if isinstance(names, str) else tuple(names)
    what = names[0]
    try:
        with _time_limit(CASE_LIMIT):
            result = call()
    except HangError:
        raise AssertionError(f"{what}: hang (no result within {CASE_LIMIT} s)") from None
    except Exception as error:
        _check_refusal(error, names)
        return _record("refused", type(error).__name__)
    if reference is None:
        return _record("ran")
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = reference()
    except UndefinedError:
        return _record("undefined")
    except Exception as error:
        raise AssertionError(
            f"{what}: kernelgrad returned a result where the reference raises "
            f"{type(error).__name__}: {error}"
        ) from None
    if compare is not None:
        compare(result, expected)
    else:
        assert_matches(result, expected, rtol, atol, what)
    return _record("matched")


# Modules outside this campaign's fixes whose deliberate checks still raise built-in
# classes (TypeError, ValueError) with a message naming the op: tolerated, but counted
# and listed at the end of the run as work left to do.
BUILTIN_RAISES_TOLERATED_IN = ("kernelgrad/nn/",)


def _deliberate_builtin_raise(error: BaseException) -> str | None:
    """``file:line`` when the error was raised by a ``raise`` statement of a module in
    ``BUILTIN_RAISES_TOLERATED_IN`` (a check with a message, not an internal failure)."""
    import linecache
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return None
    last = frames[-1]
    path = last.filename.replace("\\", "/")
    if not any(part in path for part in BUILTIN_RAISES_TOLERATED_IN):
        return None
    if not linecache.getline(last.filename, last.lineno).strip().startswith("raise"):
        return None
    return f"{path[path.index('kernelgrad/') :]}:{last.lineno}"


def _check_refusal(error: BaseException, names: tuple[str, ...]) -> None:
    message = str(error)
    where = f"{type(error).__module__}.{type(error).__name__}: {message[:300]}"
    if not is_kernelgrad_error(error):
        site = _deliberate_builtin_raise(error)
        if site is None:
            raise AssertionError(f"{names[0]}: an internal exception leaked: {where}") from error
        CAMPAIGN.builtin_raises[f"{site} ({type(error).__name__})"] += 1
    if not any(name in message for name in names):
        raise AssertionError(f"{names[0]}: the error does not name the operation: {where}")


def _record(outcome: str, error_class: str | None = None) -> str:
    CAMPAIGN.outcomes[outcome] += 1
    if error_class is not None:
        CAMPAIGN.refusals[error_class] += 1
    return outcome


def count_case(test: str) -> None:
    CAMPAIGN.cases[test] += 1
