"""Fuzz: `t[key]` and `t[key] = value` with integers (in and out of range), slices (any
step, zero too), None, ellipsis, integer lists and tensors, boolean masks of right and
wrong shapes; take, index_select, gather and index_add with out-of-range indices."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import strategies as st

import kernelgrad as kg
from kernelgrad.shapes import overlaps_itself
from tests.fuzz.oracle import UndefinedError, check
from tests.fuzz.strategies import tensors


@st.composite
def keys(draw, shape):
    """A NumPy index for an array of ``shape`` (sometimes an invalid one)."""
    entries = []
    dim = 0
    for _ in range(draw(st.integers(0, len(shape) + 1))):
        size = shape[dim] if dim < len(shape) else 2
        kind = draw(
            st.sampled_from(["int", "slice", "slice", "none", "ellipsis", "list", "mask", "bool"])
        )
        if kind == "int":
            entries.append(draw(st.integers(-size - 1, size)))
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
            step = st.one_of(st.none(), st.integers(-3, 3))
            entries.append(slice(draw(bound), draw(bound), draw(step)))
        elif kind == "none":
            entries.append(None)
            continue
        elif kind == "ellipsis":
            entries.append(Ellipsis)
        elif kind == "list":
            entries.append(draw(st.lists(st.integers(-size - 1, size), max_size=3)))
        elif kind == "mask":
            length = draw(st.sampled_from([size, size, max(size - 1, 0), size + 1]))
            entries.append(
                np.array(
                    draw(st.lists(st.booleans(), min_size=length, max_size=length)), dtype=bool
                )
            )
        else:
            entries.append(draw(st.booleans()))
        dim += 1
    return tuple(entries) if draw(st.booleans()) or len(entries) != 1 else entries[0]


def _as_kg_key(key, device):
    parts = key if isinstance(key, tuple) else (key,)
    converted = tuple(
        kg.tensor(k, device=device) if isinstance(k, np.ndarray) else k for k in parts
    )
    return converted if isinstance(key, tuple) else converted[0]


def _numpy_get(values, key):
    if isinstance(key, bool) or (isinstance(key, tuple) and any(isinstance(k, bool) for k in key)):
        raise IndexError("a Python bool index (kernelgrad refuses it, as documented)")
    if isinstance(key, list) and not key:
        key = np.array([], dtype=np.int64)
    if isinstance(key, tuple):
        key = tuple(
            np.array([], dtype=np.int64) if isinstance(k, list) and not k else k for k in key
        )
    parts = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, np.ndarray) and k.dtype == bool and k.ndim == 0 for k in parts):
        raise IndexError("0-d masks are refused")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return _torch_order(values, key)


def _torch_split(key):
    """PyTorch's reading of a key that mixes integers with advanced indices, where it
    differs from NumPy's: ``(selecting, rest)``, the integers (applied first, a view) and
    the rest of the key; None for any other key. NumPy takes an integer as an advanced
    index, so ``x[1, :, [1, 3]]`` would put the list's dim first; PyTorch selects first."""
    parts = key if isinstance(key, tuple) else (key,)
    ints = [isinstance(k, int) for k in parts]
    if not any(ints) or not any(isinstance(k, (list, np.ndarray)) for k in parts):
        return None
    selecting = tuple(
        k if is_int else Ellipsis if k is Ellipsis else slice(None)
        for k, is_int in zip(parts, ints)
        if k is not None
    )
    return selecting, tuple(k for k, is_int in zip(parts, ints) if not is_int)


def _torch_order(values, key):
    """``values[key]`` with PyTorch's placement of the advanced indices' dims."""
    split = _torch_split(key)
    return values[key] if split is None else values[split[0]][split[1]]


def test_getitem(fuzz, device):
    @st.composite
    def cases(draw):
        values, x = draw(tensors(device, max_side=fuzz.max_side))
        return values, x, draw(keys(values.shape))

    def body(case):
        values, x, key = case
        kg_key = _as_kg_key(key, device)
        check(("indexing", "take"), lambda: x[kg_key], lambda: _numpy_get(values, key), 0, 0)

    fuzz.run(cases(), body)


def _aliased(values, x):
    """A writable NumPy array equal to ``values`` whose stride-0 dims alias one memory
    location each, as those of the expanded tensor ``x`` do."""
    base = np.array(values[tuple(slice(0, 1) if st_ == 0 else slice(None) for st_ in x._strides)])
    strides = tuple(0 if st_ == 0 else stride for st_, stride in zip(x._strides, base.strides))
    return np.lib.stride_tricks.as_strided(base, values.shape, strides, writeable=True)


def test_setitem(fuzz, device):
    @st.composite
    def cases(draw):
        values, x = draw(tensors(device, max_side=fuzz.max_side))
        key = draw(keys(values.shape))
        value = draw(
            st.one_of(
                st.integers(-3, 3),
                st.floats(-3, 3, width=32),
                tensors(device, shape=draw(st.sampled_from([(), (1,), (2,), (3,)])), max_side=2),
            )
        )
        return values.copy(), x.clone() if draw(st.booleans()) else x, key, value

    def body(case):
        values, x, key, value = case
        kg_key = _as_kg_key(key, device)
        kg_value = value[1] if isinstance(value, tuple) else value
        np_value = value[0] if isinstance(value, tuple) else value

        def call():
            x[kg_key] = kg_value
            return x

        def expected():
            _numpy_get(values, key)  # the key's own checks
            target = values.copy()
            parts = key if isinstance(key, tuple) else (key,)
            advanced = any(isinstance(k, (list, np.ndarray)) for k in parts)
            # PyTorch refuses to write where elements share memory: the selected view of
            # a basic index, the whole tensor for an advanced one.
            written = x if advanced else x[kg_key]
            if written.numel() > 1 and overlaps_itself(written.shape, written._strides):
                raise ValueError("writing through an expanded view (PyTorch refuses)")
            if advanced and device != "cpu":
                raise NotImplementedError("advanced assignment is CPU only")
            selected = _torch_order(values, key).shape
            shape = np.broadcast_shapes(selected, np.shape(np_value))
            if shape != selected:
                raise ValueError("the value does not fit the selection")
            if x.dtype.is_integer and not np.all(np.isfinite(np.asarray(np_value, dtype=float))):
                if not isinstance(value, tuple):
                    raise ValueError("a Python number without an integer value")
                raise UndefinedError  # a NaN tensor cast to integers: any value will do
            if 0 in x._strides:
                target = _aliased(values, x)  # writes reach every alias, as in kernelgrad
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                split = _torch_split(key)
                if split is not None:
                    target[split[0]][split[1]] = np_value  # `target[split[0]]` is a view
                else:
                    target[key] = np_value
            return target.copy()

        check(("indexing", "assignment", "assigning to a single element"), call, expected, 0, 0)

    fuzz.run(cases(), body)


def test_take_gather_index_add(fuzz, device):
    @st.composite
    def cases(draw):
        values, x = draw(tensors(device, max_side=fuzz.max_side, dtypes=(kg.float32, kg.int64)))
        ndim = values.ndim
        dim = draw(st.integers(-ndim - 1, ndim))
        size = values.shape[dim] if -ndim <= dim < ndim and ndim else 1
        index_shape = draw(st.lists(st.integers(0, 3), max_size=max(ndim, 1)).map(tuple))
        index = draw(
            st.lists(
                st.integers(-size - 1, size),
                min_size=int(np.prod(index_shape)),
                max_size=int(np.prod(index_shape)),
            )
        )
        index = np.array(index, dtype=np.int64).reshape(index_shape)
        return (
            draw(st.sampled_from(["take", "index_select", "gather", "index_add"])),
            values,
            x,
            dim,
            index,
        )

    def body(case):
        kind, values, x, dim, index = case
        kg_index = kg.tensor(index, device=x.device)

        def axis():
            if values.ndim == 0:
                raise IndexError("0-d")
            if not -values.ndim <= dim < values.ndim:
                raise IndexError("dim out of range")
            return dim % values.ndim

        def in_range(size):
            if np.any((index < -size) | (index >= size)):
                raise IndexError("index out of range")

        if kind in ("take", "index_select"):

            def expected():
                a = axis()
                in_range(values.shape[a])
                if kind == "index_select" and index.ndim > 1:
                    pass  # kernelgrad's index_select is take: any index shape
                return np.take(values, index, axis=a)

            fn = kg.take if kind == "take" else (lambda t, d, i: t.index_select(d, i))
            check((kind, "take"), lambda: fn(x, dim, kg_index), expected, 0, 0)
        elif kind == "gather":

            def expected():
                a = axis()
                if index.ndim != values.ndim or any(
                    index.shape[k] > values.shape[k] for k in range(values.ndim) if k != a
                ):
                    raise ValueError("gather shapes")
                in_range(values.shape[a])
                region = values[
                    tuple(slice(0, s) if k != a else slice(None) for k, s in enumerate(index.shape))
                ]
                return np.take_along_axis(region, index, axis=a)

            check("gather", lambda: x.gather(dim, kg_index), expected, 0, 0)
        else:
            source_values = np.ones(1)

            def call():
                d = dim % max(values.ndim, 1)
                shape = x.shape[:d] + kg_index.shape + x.shape[d + 1 :]
                source = kg.ones(shape, dtype=x.dtype, device=x.device)
                return kg.index_add(x, dim, kg_index, source)

            def expected():
                a = axis()
                in_range(values.shape[a])
                result = values.copy()
                flat = index.reshape(-1) % max(values.shape[a], 1)
                for i in flat:
                    result[(slice(None),) * a + (i,)] += 1
                return result

            del source_values
            check(("index_add",), call, expected, 0, 0)

    fuzz.run(cases(), body)
