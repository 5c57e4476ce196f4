"""Hypothesis strategies of the fuzz campaign: arrays of every dtype with special values,
empty and zero-size shapes, and tensors equal to them in random memory layouts
(permuted, strided, offset, or expanded with stride-0 dims)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kernelgrad as kg
from tests.helpers import tensor_with_layout

DTYPES = (kg.float32, kg.float64, kg.int32, kg.int64, kg.bool)
FLOAT_DTYPES = (kg.float32, kg.float64)
SPECIAL_FLOATS = (math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 3.0)
LAYOUTS = ("contiguous", "permuted", "strided", "offset", "expanded")


def elements(dtype: kg.DType) -> st.SearchStrategy:
    if dtype.is_floating_point:
        width = 32 if dtype is kg.float32 else 64
        finite = st.floats(-10.0, 10.0, width=width)
        return st.one_of(finite, st.sampled_from(SPECIAL_FLOATS))
    if dtype.is_integer:
        return st.integers(-12, 12)
    return st.booleans()


def shapes(max_dims: int = 3, max_side: int = 4, min_side: int = 0) -> st.SearchStrategy:
    return hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=min_side, max_side=max_side)


@st.composite
def arrays(
    draw: Any,
    dtype: kg.DType | None = None,
    shape: tuple[int, ...] | None = None,
    max_side: int = 4,
    dtypes: tuple[kg.DType, ...] = DTYPES,
) -> np.ndarray:
    dtype = draw(st.sampled_from(dtypes)) if dtype is None else dtype
    shape = draw(shapes(max_side=max_side)) if shape is None else shape
    return draw(hnp.arrays(dtype.numpy, shape, elements=elements(dtype)))


@st.composite
def laid_out(draw: Any, values: np.ndarray, device: str) -> kg.Tensor:
    """A tensor equal to ``values`` in a random memory layout."""
    layout = draw(st.sampled_from(LAYOUTS))
    if layout == "expanded":
        # Dims of size > 1 whose values repeat along them can be stride-0 broadcasts.
        base_shape = tuple(1 if s > 1 and draw(st.booleans()) else s for s in values.shape)
        base = values[tuple(slice(0, 1) if b == 1 else slice(None) for b in base_shape)]
        values[...] = np.broadcast_to(base, values.shape)  # make the repetition true
        return kg.tensor(np.array(base), device=device).expand(*values.shape)
    perm = draw(st.permutations(list(range(values.ndim)))) if values.ndim else []
    return tensor_with_layout(values, layout, device, perm)


@st.composite
def tensors(
    draw: Any,
    device: str,
    dtype: kg.DType | None = None,
    shape: tuple[int, ...] | None = None,
    max_side: int = 4,
    dtypes: tuple[kg.DType, ...] = DTYPES,
) -> tuple[np.ndarray, kg.Tensor]:
    """(NumPy values, an equal tensor on ``device`` with a random layout)."""
    values = draw(arrays(dtype, shape, max_side, dtypes))
    tensor = draw(laid_out(values, device))
    return values, tensor


def python_scalars(dtype: kg.DType | None = None) -> st.SearchStrategy:
    """Python numbers (weak in type promotion) of any kind, or matching ``dtype``."""
    if dtype is None:
        return st.one_of(
            st.booleans(), st.integers(-12, 12), st.sampled_from(SPECIAL_FLOATS + (2.5, -1.5))
        )
    return elements(dtype).map(lambda v: v.item() if isinstance(v, np.generic) else v)


def broadcastable(shape: tuple[int, ...], max_side: int) -> st.SearchStrategy:
    """Shapes that broadcast with ``shape``, and now and then one that does not."""
    return st.one_of(
        hnp.broadcastable_shapes(shape, min_dims=0, max_dims=3, min_side=0, max_side=max_side),
        shapes(max_side=max_side),
    )
