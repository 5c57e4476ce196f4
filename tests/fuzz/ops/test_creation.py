"""Fuzz: creation functions (zeros, ones, full, empty, arange, linspace, eye, tensor,
rand, randn, randint) with random and invalid sizes, dtypes and bounds."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

import kernelgrad as kg
from tests.fuzz.oracle import UndefinedError, check
from tests.fuzz.strategies import DTYPES

NUMBERS = st.one_of(
    st.integers(-4, 6), st.sampled_from([0.5, -1.5, 2.25, math.inf, -math.inf, math.nan])
)


def _size(size):
    if any(not isinstance(s, int) or s < 0 for s in size):
        raise ValueError("sizes must be non-negative integers")
    return tuple(size)


def _checked_fill(value, dtype):
    if dtype.is_integer and isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("no integer value")
        return int(value)
    return value


def _arange(start, end, step, dtype):
    if step == 0 or not all(math.isfinite(v) for v in (start, end, step)):
        raise ValueError("bad range")
    if dtype is kg.bool:
        raise TypeError("a range of bools")
    floating = any(isinstance(v, float) for v in (start, end, step))
    count = max(0, math.ceil((end - start) / step))
    values = start + np.arange(count, dtype=np.float64 if floating else np.int64) * step
    if dtype is None:
        return values.astype(np.float32 if floating else np.int64)
    return values.astype(dtype.numpy)


def _linspace(start, end, steps, dtype):
    if steps < 0 or dtype is kg.bool:
        raise ValueError("bad linspace")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise UndefinedError  # inf - inf inside: PyTorch gives nan and inf too
    return np.linspace(start, end, steps).astype((dtype or kg.float32).numpy)


def test_creation(fuzz, device):
    @st.composite
    def cases(draw):
        kind = draw(
            st.sampled_from(
                ["zeros", "ones", "full", "empty", "arange", "linspace", "eye", "tensor", "random"]
            )
        )
        size = tuple(draw(st.lists(st.one_of(st.integers(-1, 3), st.just(1.5)), max_size=3)))
        dtype = draw(st.one_of(st.none(), st.sampled_from(DTYPES)))
        numbers = tuple(draw(NUMBERS) for _ in range(3))
        return kind, size, dtype, numbers

    def body(case):
        kind, size, dtype, (a, b, c) = case
        options = {"device": device} | ({"dtype": dtype} if dtype is not None else {})
        chosen = dtype or kg.float32
        if kind in ("zeros", "ones"):
            fn = kg.zeros if kind == "zeros" else kg.ones
            expected = lambda: np.full(_size(size), 0 if kind == "zeros" else 1, chosen.numpy)
            check(kind, lambda: fn(*size, **options), expected, 0, 0)
        elif kind == "full":
            inferred = dtype or (kg.int64 if isinstance(a, int) else kg.float32)
            expected = lambda: np.full(_size(size), _checked_fill(a, inferred), inferred.numpy)
            check("full", lambda: kg.full(size, a, **options), expected, 0, 0)
        elif kind == "empty":
            check("empty", lambda: kg.empty(*size, **options).shape, lambda: _size(size))
        elif kind == "arange":
            step = c if c != 0 or a != b else 1
            check(
                "arange",
                lambda: kg.arange(a, b, step, **options),
                lambda: _arange(a, b, step, dtype),
                1e-6,
                1e-6,
            )
        elif kind == "linspace":
            steps = int(c) if isinstance(c, int) else 3

            def expected():
                return _linspace(a, b, steps, dtype)

            check("linspace", lambda: kg.linspace(a, b, steps, **options), expected, 1e-5, 1e-5)
        elif kind == "eye":
            n = a if isinstance(a, int) else 2
            m = b if isinstance(b, int) else None

            def expected():
                if n < 0 or (m is not None and m < 0):
                    raise ValueError("negative size")
                return np.eye(n, m).astype(chosen.numpy)

            check("eye", lambda: kg.eye(n, m, **options), expected, 0, 0)
        elif kind == "tensor":
            ragged = [[a, b], [c]] if isinstance(c, int) and c % 2 else [[a, b], [c, a]]

            def expected():
                if len(ragged[1]) != 2:
                    raise ValueError("ragged")
                array = np.array(ragged, dtype=np.float64)
                if dtype is not None and dtype.is_integer and not np.isfinite(array).all():
                    raise UndefinedError
                if dtype is not None:
                    return array.astype(dtype.numpy)
                return (
                    array
                    if any(isinstance(v, float) for row in ragged for v in row)
                    else array.astype(np.int64)
                )

            check("tensor", lambda: kg.tensor(ragged, **options), expected, 0, 0)
        else:
            low, high = (a, b) if isinstance(a, int) and isinstance(b, int) else (0, 3)
            fn = draw_random = {"rand": kg.rand, "randn": kg.randn}
            del draw_random

            def sample():
                if dtype is not None and dtype.is_integer:
                    return kg.randint(low, high, size, **options)
                return fn["rand" if low % 2 else "randn"](*size, **options)

            def expected_shape():
                shape = _size(size)
                if dtype is not None and dtype.is_integer and high <= low:
                    raise ValueError("empty range")
                if dtype is not None and not dtype.is_floating_point and not dtype.is_integer:
                    raise TypeError("random bools")
                return shape

            check(("rand", "randn", "randint"), lambda: sample().shape, expected_shape)

    fuzz.run(cases(), body)
