"""Fuzz: matmul of random ranks (0-d to 3-d), sizes (zero too), dtypes and layouts."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import kernelgrad as kg
from kernelgrad.dtypes import result_type
from tests.fuzz.oracle import check
from tests.fuzz.strategies import tensors


def test_matmul(fuzz, device):
    @st.composite
    def cases(draw):
        side = st.integers(0, fuzz.max_side)
        inner = draw(side)
        left_shape = tuple(draw(st.lists(side, max_size=2))) + (inner,)
        right_shape = (draw(st.sampled_from([inner, inner, inner + 1])),) + tuple(
            draw(st.lists(side, max_size=1))
        )
        if draw(st.booleans()):
            left_shape = left_shape[draw(st.integers(0, len(left_shape))) :]
        if draw(st.booleans()):
            batch = tuple(draw(st.lists(st.sampled_from([1, 2]), max_size=1)))
            right_shape = batch + right_shape
        left = draw(tensors(device, shape=left_shape, max_side=fuzz.max_side))
        right = draw(tensors(device, shape=right_shape, max_side=fuzz.max_side))
        return left, right

    def body(case):
        (a_values, a), (b_values, b) = case
        dtype = result_type(a, b)

        def expected():
            if dtype is kg.bool:
                left, right = a_values.astype(np.int64), b_values.astype(np.int64)
                return np.matmul(left, right) != 0
            with np.errstate(all="ignore"):
                return np.matmul(a_values.astype(dtype.numpy), b_values.astype(dtype.numpy))

        rtol = 1e-9 if dtype is kg.float64 else 1e-5
        scale = float(np.abs(a_values[np.isfinite(a_values)]).sum() + 1) * float(
            np.abs(b_values[np.isfinite(b_values)]).sum() + 1
        )
        check("matmul", lambda: a @ b, expected, rtol, rtol * scale)

    fuzz.run(cases(), body)
