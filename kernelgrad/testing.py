"""``kg.testing``: PyTorch's ``torch.testing.assert_close`` and ``make_tensor``.

``assert_close`` compares tensors (or NumPy arrays, Python numbers, None, and sequences
and mappings of them, compared item by item) with PyTorch's default tolerances for the
dtype (float32: rtol 1.3e-6, atol 1e-5; float64: 1e-7 and 1e-7; integers and booleans:
equality) and raises ``AssertionError`` with PyTorch's message: the number of mismatched
elements, the greatest absolute and relative differences and where they are.

>>> import kernelgrad as kg
>>> kg.testing.assert_close(kg.tensor([1.0, 2.0]), kg.tensor([1.0, 2.0 + 1e-6]))
>>> try:
...     kg.testing.assert_close(kg.tensor([1.0, 2.0]), kg.tensor([1.0, 2.5]))
... except AssertionError as error:
...     print(error)
Tensor-likes are not close!
<BLANKLINE>
Mismatched elements: 1 / 2 (50.0%)
Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)
Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 allowed)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .dtypes import bool_, float32, float64, int32, int64

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

_DTYPE_PRECISIONS = {float32: (1.3e-6, 1e-5), float64: (1e-7, 1e-7)}
_NUMBER_PRECISIONS = {float: (1e-7, 1e-7)}  # Python floats compare as float64


class _MismatchError(Exception):
    """A failed comparison: the exception type to raise and its message."""

    def __init__(self, kind: type[Exception], message: str, path: tuple = ()) -> None:
        super().__init__(message)
        self.kind, self.message, self.path = kind, message, path

    def error(self, msg: Any) -> Exception:
        message = self.message
        if callable(msg) and self.kind is AssertionError:
            message = msg(message)
        elif msg is not None and self.kind is AssertionError:
            message = msg
        if self.path:
            where = "".join(str([item]) for item in self.path)
            message += f"\n\nThe failure occurred for item {where}"
        return self.kind(message)


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close (PyTorch's
    ``torch.testing.assert_close``): ``|actual - expected| <= atol + rtol * |expected|``
    elementwise, after checking shape, device and dtype (and strides with
    ``check_stride=True``). Give both ``rtol`` and ``atol`` or neither. ``msg`` replaces
    the message (a string) or rewrites it (a callable taking the message)."""
    if (rtol is None) ^ (atol is None):
        raise ValueError(
            "Both 'rtol' and 'atol' must be either specified or omitted, but got no "
            f"{'rtol' if rtol is None else 'atol'}."
        )
    options = {
        "rtol": rtol,
        "atol": atol,
        "equal_nan": equal_nan,
        "check_device": check_device,
        "check_dtype": check_dtype,
        "check_stride": check_stride,
        "allow_subclasses": allow_subclasses,
    }
    try:
        _compare(actual, expected, (), options)
    except _MismatchError as mismatch:
        raise mismatch.error(msg) from None


def _compare(actual: Any, expected: Any, path: tuple, options: dict) -> None:
    from .tensor import Tensor

    if isinstance(actual, Tensor | np.ndarray) or isinstance(expected, Tensor | np.ndarray):
        both_tensors = isinstance(actual, Tensor) and isinstance(expected, Tensor)
        both_arrays = isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray)
        if not (both_tensors or both_arrays):
            _unsupported(actual, expected, path)
        _compare_tensors(actual, expected, path, options, both_arrays)
        return
    if actual is None or expected is None:
        if actual is not expected:
            raise _MismatchError(AssertionError, f"None mismatch: {actual} is not {expected}", path)
        return
    if isinstance(actual, bool | np.bool_) and isinstance(expected, bool | np.bool_):
        if bool(actual) is not bool(expected):
            raise _MismatchError(
                AssertionError, f"Booleans mismatch: {bool(actual)} is not {bool(expected)}", path
            )
        return
    numbers = (int, float, np.integer, np.floating)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        _compare_numbers(actual, expected, path, options)
        return
    if isinstance(actual, str | bytes) or isinstance(expected, str | bytes):
        _unsupported(actual, expected, path)
    if isinstance(actual, Sequence) and isinstance(expected, Sequence):
        if len(actual) != len(expected):
            raise _MismatchError(
                AssertionError,
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                path,
            )
        for index, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, (*path, index), options)
        return
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        actual_keys, expected_keys = set(actual), set(expected)
        if actual_keys != expected_keys:
            missing = sorted(expected_keys - actual_keys, key=repr)
            extra = sorted(actual_keys - expected_keys, key=repr)
            raise _MismatchError(
                AssertionError,
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {missing}\n"
                f"Additional keys in the actual mapping: {extra}",
                path,
            )
        for key in expected:
            _compare(actual[key], expected[key], (*path, key), options)
        return
    _unsupported(actual, expected, path)


def _unsupported(actual: Any, expected: Any, path: tuple) -> None:
    raise _MismatchError(
        TypeError,
        f"No comparison pair was able to handle inputs of type {type(actual)} and "
        f"{type(expected)}.",
        path,
    )


def _tolerances(options: dict, *precisions: tuple[float, float]) -> tuple[float, float]:
    if options["rtol"] is not None:
        return float(options["rtol"]), float(options["atol"])
    return max(p[0] for p in precisions), max(p[1] for p in precisions)


def _compare_numbers(actual: Any, expected: Any, path: tuple, options: dict) -> None:
    kinds = [float if isinstance(v, float | np.floating) else int for v in (actual, expected)]
    if options["check_dtype"] and type(actual) is not type(expected):
        raise _MismatchError(
            AssertionError,
            f"The (d)types do not match: {type(actual)} != {type(expected)}.",
            path,
        )
    rtol, atol = _tolerances(options, *(_NUMBER_PRECISIONS.get(k, (0.0, 0.0)) for k in kinds))
    if options["equal_nan"] and _isnan(actual) and _isnan(expected):
        return
    difference = abs(actual - expected)
    if actual == expected or difference <= atol + rtol * abs(expected):
        return
    relative = math.inf if expected == 0 else difference / abs(expected)
    raise _MismatchError(
        AssertionError,
        _mismatch_message(
            "Scalars",
            f"Expected {expected} but got {actual}.",
            (difference, None, atol),
            (relative, None, rtol),
        ),
        path,
    )


def _isnan(value: Any) -> bool:
    return isinstance(value, float | np.floating) and math.isnan(value)


def _attribute_mismatch(name: str, actual: Any, expected: Any, path: tuple) -> _MismatchError:
    return _MismatchError(
        AssertionError,
        f"The values for attribute '{name}' do not match: {actual} != {expected}.",
        path,
    )


def _compare_tensors(actual: Any, expected: Any, path: tuple, options: dict, arrays: bool) -> None:
    from .dtypes import promote_types

    if arrays:
        from .ops.creation import tensor

        actual, expected = tensor(actual), tensor(expected)
    if actual.shape != expected.shape:
        raise _attribute_mismatch("shape", actual.shape, expected.shape, path)
    if options["check_stride"] and actual.stride() != expected.stride():
        raise _attribute_mismatch("stride()", actual.stride(), expected.stride(), path)
    if options["check_device"] and actual.device != expected.device:
        raise _attribute_mismatch("device", actual.device, expected.device, path)
    if options["check_dtype"] and actual.dtype != expected.dtype:
        raise _attribute_mismatch("dtype", actual.dtype, expected.dtype, path)
    rtol, atol = _tolerances(
        options, *(_DTYPE_PRECISIONS.get(t.dtype, (0.0, 0.0)) for t in (actual, expected))
    )
    dtype = actual.dtype
    if actual.dtype != expected.dtype:
        dtype = promote_types(actual.dtype, expected.dtype)
    a = actual.detach().to(dtype).cpu().numpy()
    e = expected.detach().to(dtype).cpu().numpy()
    floating = dtype.is_floating_point
    if not floating:  # integers and booleans: differences in int64, as PyTorch
        a, e = a.astype(np.int64), e.astype(np.int64)
    with np.errstate(invalid="ignore", over="ignore"):
        matches = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=options["equal_nan"])
        if not floating or (rtol == 0 and atol == 0):
            matches = matches & (a == e) | (options["equal_nan"] & np.isnan(a) & np.isnan(e))
        matches |= a == e  # equal infinities
    if matches.all():
        return
    flat_a, flat_e, flat_m = a.reshape(-1), e.reshape(-1), matches.reshape(-1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        absolute = np.abs(flat_a - flat_e)
        absolute[flat_m] = 0
        denominator = np.abs(flat_e)
        if not floating:  # PyTorch divides in the default float dtype
            absolute_f, denominator = absolute.astype(np.float32), denominator.astype(np.float32)
        else:
            absolute_f = absolute
        relative = absolute_f / denominator
        relative[flat_m] = 0
    mismatched = int(flat_m.size - flat_m.sum())
    total = int(flat_m.size)
    abs_at = int(np.argmax(absolute))
    rel_at = int(np.argmax(relative))
    raise _MismatchError(
        AssertionError,
        _mismatch_message(
            "Tensor-likes",
            f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})",
            (absolute[abs_at].item(), np.unravel_index(abs_at, a.shape), atol),
            (relative[rel_at].item(), np.unravel_index(rel_at, a.shape), rtol),
        ),
        path,
    )


def _mismatch_message(identifier: str, extra: str, absolute: tuple, relative: tuple) -> str:
    """PyTorch's ``_make_mismatch_msg``."""
    equality = absolute[2] == 0 and relative[2] == 0
    message = f"{identifier} are not {'equal' if equality else 'close'}!\n\n{extra}\n"
    for kind, (diff, index, tolerance) in (("absolute", absolute), ("relative", relative)):
        if index is None:
            line = f"{kind.title()} difference: {diff}"
        else:
            line = f"Greatest {kind} difference: {diff} at index {tuple(int(i) for i in index)}"
        if not equality:
            line += f" (up to {tolerance} allowed)"
        message += line + "\n"
    return message.strip()


def assert_allclose(actual: Any, expected: Any, rtol: Any = None, atol: Any = None, **kw: Any):
    """PyTorch's deprecated ``torch.testing.assert_allclose``: :func:`assert_close`
    without the dtype check."""
    if rtol is None and atol is None:
        rtol, atol = None, None
    assert_close(actual, expected, rtol=rtol, atol=atol, check_dtype=False, **kw)


def make_tensor(
    *shape: Any,
    dtype: Any,
    device: Any,
    low: float | None = None,
    high: float | None = None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format: Any = None,
) -> Any:
    """A tensor of ``shape`` filled with random values in ``[low, high)`` (PyTorch's
    ``torch.testing.make_tensor``): floats default to [-9, 9), integers to [-9, 10),
    booleans to False/True. ``noncontiguous=True`` gives a view with every other element
    of a twice-as-wide tensor; ``exclude_zero=True`` replaces zeros (by 1 for integers,
    the smallest normal float for floats)."""
    from .dtypes import as_dtype
    from .ops.creation import rand, randint

    dtype = as_dtype(dtype)
    if len(shape) == 1 and isinstance(shape[0], Sequence):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ValueError(
            "The parameters `noncontiguous` and `memory_format` are mutually exclusive, but "
            f"got noncontiguous={noncontiguous} and memory_format={memory_format}"
        )
    integral = dtype in (bool_, int32, int64)
    if requires_grad and integral:
        raise ValueError(
            "`requires_grad=True` is not supported for boolean and integral dtypes, but got "
            f"dtype={dtype}"
        )
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is bool_:
        low, high = _low_high(low, high, dtype, 0, 2, 0, 2)
        result = randint(low, high, shape, device=device).to(bool_)
    elif integral:
        info = np.iinfo(np.int32 if dtype is int32 else np.int64)
        top = info.max + (1 if dtype is not int64 else 0)
        low, high = _low_high(low, high, dtype, info.min, top, -9, 10)
        result = randint(low, high, shape, dtype=dtype, device=device)
    elif dtype in (float32, float64):
        info = np.finfo(np.float32 if dtype is float32 else np.float64)
        low, high = _low_high(low, high, dtype, float(info.min), float(info.max), -9, 9)
        if high - low >= float(info.max):
            result = (rand(shape, dtype=dtype, device=device) * (high / 2 - low / 2) + low / 2) * 2
        else:
            result = rand(shape, dtype=dtype, device=device) * (high - low) + low
    else:
        raise TypeError(f"The requested dtype '{dtype}' is not supported by make_tensor().")
    if memory_format is not None:
        result = result.contiguous(memory_format=memory_format)
    if noncontiguous:
        result = result[..., 1::2]
    if exclude_zero:
        replacement = (
            1 if integral else float(np.finfo(np.float32 if dtype is float32 else np.float64).tiny)
        )
        result = result.masked_fill(result == 0, replacement)
    if not integral:
        result.requires_grad = requires_grad
    return result


def _low_high(
    low: Any,
    high: Any,
    dtype: Any,
    lowest: float,
    highest_exclusive: float,
    default_low: float,
    default_high: float,
) -> tuple[Any, Any]:
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if low >= high and not (low == high and dtype.is_floating_point):
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    if high < lowest or low >= highest_exclusive:
        raise ValueError(
            f"The value interval specified by `low` and `high` is [{low}, {high}), but {dtype} "
            f"only supports [{lowest}, {highest_exclusive})"
        )
    low = min(max(low, lowest), highest_exclusive)
    high = min(max(high, lowest), highest_exclusive)
    if not dtype.is_floating_point:
        return math.ceil(low), math.ceil(high)
    return low, high
