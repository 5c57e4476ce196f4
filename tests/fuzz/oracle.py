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
) -> str:
    """Run one case. ``names``: the operation (or the names any of which its error
    message may use). ``reference`` computes the expected value (NumPy); raising means
    the input is invalid, ``UndefinedError`` that any value is acceptable. ``compare(got,
    want)`` replaces the default comparison (for tuples of results).
    Returns the outcome."""
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


def _check_refusal(error: BaseException, names: tuple[str, ...]) -> None:
    message = str(error)
    where = f"{type(error).__module__}.{type(error).__name__}: {message[:300]}"
    if not is_kernelgrad_error(error):
        raise AssertionError(f"{names[0]}: an internal exception leaked: {where}") from error
    if not any(name in message for name in names):
        raise AssertionError(f"{names[0]}: the error does not name the operation: {where}")


def _record(outcome: str, error_class: str | None = None) -> str:
    CAMPAIGN.outcomes[outcome] += 1
    if error_class is not None:
        CAMPAIGN.refusals[error_class] += 1
    return outcome


def count_case(test: str) -> None:
    CAMPAIGN.cases[test] += 1
