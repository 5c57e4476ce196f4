"""Fuzz: views and copies (reshape, view, permute, transpose, expand, squeeze, unsqueeze,
flatten, flip, narrow, unfold, chunk, split, repeat, cat, stack, pad, view(dtype)) with
random and invalid arguments on random layouts."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

import kernelgrad as kg
from kernelgrad.dtypes import result_type
from kernelgrad.ops.movement import pad
from tests.fuzz.oracle import assert_matches, check
from tests.fuzz.strategies import DTYPES, shapes, tensors


def _dim(ndim: int, dim: int) -> int:
    """NumPy's axis for a kernelgrad dim, raising where PyTorch raises."""
    span = max(ndim, 1)
    if not -span <= dim < span:
        raise IndexError(f"dim {dim} out of range")
    return dim % span


def _reshape_target(values, target):
    if target.count(-1) > 1 or any(s < -1 for s in target):
        raise ValueError("bad target")
    known = math.prod(s for s in target if s != -1)
    if -1 in target and known == 0:
        raise ValueError("-1 with a zero-size known part")
    return values.reshape(target)


def _expand(values, sizes):
    lead = len(sizes) - values.ndim
    if lead < 0 or any(s == -1 for s in sizes[:lead]) or any(s < -1 for s in sizes):
        raise ValueError("bad expand")
    shape = tuple(values.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    return np.broadcast_to(values, shape)


def _squeeze(values, dim):
    if dim is None:
        return np.squeeze(values)
    dims = dim if isinstance(dim, tuple) else (dim,)
    axes = [_dim(values.ndim, d) for d in dims]
    if len(set(axes)) != len(axes):
        raise ValueError("repeated dim")
    if values.ndim == 0:
        return values
    return np.squeeze(values, axis=tuple(a for a in axes if values.shape[a] == 1))


def _flatten(values, start, end):
    if values.ndim == 0:
        _dim(0, start), _dim(0, end)
        return values.reshape(1)
    first, last = _dim(values.ndim, start), _dim(values.ndim, end)
    if first > last:
        raise ValueError("start after end")
    merged = math.prod(values.shape[first : last + 1])
    return values.reshape(values.shape[:first] + (merged,) + values.shape[last + 1 :])


def _narrow(values, dim, start, length):
    if values.ndim == 0:
        raise ValueError("narrow needs a dim")
    axis = _dim(values.ndim, dim)
    size = values.shape[axis]
    if start < 0:
        start += size
    if not (start >= 0 and length >= 0 and start + length <= size):
        raise ValueError("out of range")
    key = (slice(None),) * axis + (slice(start, start + length),)
    return values[key]


def _unfold(values, dim, size, step):
    if values.ndim == 0:
        raise ValueError("unfold needs a dim")
    axis = _dim(values.ndim, dim)
    if size < 1 or step < 1 or size > values.shape[axis]:
        raise ValueError("bad window")
    windows = np.lib.stride_tricks.sliding_window_view(values, size, axis=axis)
    return windows[(slice(None),) * axis + (slice(None, None, step),)]


def _pieces(values, axis, size):
    total = values.shape[axis]
    return [values[(slice(None),) * axis + (slice(s, s + size),)] for s in range(0, total, size)]


def _chunk(values, chunks, dim):
    """PyTorch's chunk: pieces of ceil(size / chunks); `chunks` empty pieces of an empty
    dim."""
    if values.ndim == 0 or chunks < 1:
        raise ValueError("chunk needs a dim and a positive count")
    axis = _dim(values.ndim, dim)
    if values.shape[axis] == 0:
        return [values] * chunks
    return _pieces(values, axis, -(-values.shape[axis] // chunks))


def _split(values, size, dim):
    if values.ndim == 0:
        raise ValueError("split needs a dim")
    axis = _dim(values.ndim, dim)
    if size < 0 or (size == 0 and values.shape[axis]):
        raise ValueError("split size must be positive")
    return _pieces(values, axis, size) if values.shape[axis] else [values]


def _repeat(values, reps):
    if len(reps) < values.ndim or any(r < 0 for r in reps):
        raise ValueError("bad repeats")
    return np.tile(values, reps) if reps else values


def _pad(values, pads, fill):
    if len(pads) % 2 or len(pads) // 2 > values.ndim or any(p < 0 for p in pads):
        raise ValueError("bad pads")
    if not pads:
        return values
    width = [(0, 0)] * values.ndim
    for i in range(len(pads) // 2):
        width[values.ndim - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    return np.pad(values, width, constant_values=fill)


def _compare_lists(got, want):
    assert len(got) == len(want), f"{len(got)} parts, NumPy gives {len(want)}"
    for part, expected in zip(got, want):
        assert_matches(part, expected, 0, 0, "parts")


def test_views_and_copies(fuzz, device):
    @st.composite
    def cases(draw):
        values, x = draw(tensors(device, max_side=fuzz.max_side))
        ndim = values.ndim
        dim = st.integers(-ndim - 1, ndim)
        size = st.integers(-2, 5)
        kind = draw(
            st.sampled_from(
                [
                    "reshape", "view", "permute", "transpose", "expand", "squeeze",
                    "unsqueeze", "flatten", "flip", "narrow", "unfold", "chunk", "split",
                    "repeat", "pad", "T",
                ]
            )
        )  # fmt: skip
        if kind in ("reshape", "view"):
            target = tuple(
                draw(st.one_of(st.permutations(values.shape), st.lists(size, max_size=4)))
            )
            if values.size and draw(st.booleans()):
                target = (-1,) + target[1:] if target else (-1,)
            args = (target,)
        elif kind == "permute":
            args = (
                tuple(draw(st.one_of(st.permutations(range(ndim)), st.lists(dim, max_size=4)))),
            )
        elif kind == "transpose":
            args = (draw(dim), draw(dim))
        elif kind == "expand":
            extra = draw(st.lists(st.integers(-1, 3), max_size=2))
            own = [draw(st.sampled_from([s, -1, 1, 3])) for s in values.shape]
            args = (tuple(extra + own),)
        elif kind == "squeeze":
            args = (draw(st.one_of(st.none(), dim, st.lists(dim, max_size=3).map(tuple))),)
        elif kind == "unsqueeze":
            args = (draw(st.integers(-ndim - 2, ndim + 1)),)
        elif kind == "flatten":
            args = (draw(dim), draw(dim))
        elif kind == "flip":
            args = (tuple(draw(st.lists(dim, max_size=3))),)
        elif kind == "narrow":
            args = (draw(dim), draw(st.integers(-3, 4)), draw(st.integers(-1, 4)))
        elif kind == "unfold":
            args = (draw(dim), draw(st.integers(0, 4)), draw(st.integers(0, 3)))
        elif kind in ("chunk", "split"):
            args = (draw(st.integers(0, 4)), draw(dim))
        elif kind == "repeat":
            args = (tuple(draw(st.lists(st.integers(-1, 3), max_size=4))),)
        elif kind == "pad":
            pads = tuple(draw(st.lists(st.integers(-1, 2), max_size=6)))
            args = (pads, draw(st.sampled_from([0, 1.5, -2])))
        else:
            args = ()
        return kind, values, x, args

    def body(case):
        kind, values, x, args = case
        calls = {
            "reshape": (lambda: x.reshape(*args), lambda: _reshape_target(values, args[0])),
            "view": (lambda: x.view(args[0]), lambda: _reshape_target(values, args[0])),
            "permute": (
                lambda: x.permute(*args[0]),
                lambda: values.transpose(_permutation(values.ndim, args[0])),
            ),
            "transpose": (
                lambda: x.transpose(*args),
                lambda: (
                    np.swapaxes(values, _dim(values.ndim, args[0]), _dim(values.ndim, args[1]))
                    if values.ndim
                    else values
                ),
            ),
            "expand": (lambda: x.expand(*args[0]), lambda: _expand(values, args[0])),
            "squeeze": (lambda: x.squeeze(args[0]), lambda: _squeeze(values, args[0])),
            "unsqueeze": (
                lambda: x.unsqueeze(args[0]),
                lambda: np.expand_dims(values, _dim(values.ndim + 1, args[0])),
            ),
            "flatten": (lambda: x.flatten(*args), lambda: _flatten(values, *args)),
            "flip": (lambda: x.flip(args[0]), lambda: _flip(values, args[0])),
            "narrow": (lambda: x.narrow(*args), lambda: _narrow(values, *args)),
            "unfold": (lambda: x.unfold(*args), lambda: _unfold(values, *args)),
            "chunk": (lambda: x.chunk(*args), lambda: _chunk(values, *args)),
            "split": (lambda: x.split(*args), lambda: _split(values, *args)),
            "repeat": (lambda: x.repeat(*args[0]), lambda: _repeat(values, args[0])),
            "pad": (lambda: pad(x, *args), lambda: _pad(values, *args)),
            "T": (lambda: x.T, lambda: values.T),
        }
        call, reference = calls[kind]
        compare = _compare_lists if kind in ("chunk", "split") else None
        names = {"T": "permute", "view": "view", "narrow": "narrow"}.get(kind, kind)
        check((names, kind, "reshape"), call, reference, 0, 0, compare=compare)

    fuzz.run(cases(), body)


def _permutation(ndim, dims):
    axes = [_dim(ndim, d) for d in dims]
    if sorted(axes) != list(range(ndim)) or len(dims) != ndim:
        raise ValueError("not a permutation")
    return axes


def _flip(values, dims):
    axes = [_dim(values.ndim, d) for d in dims]
    if len(set(axes)) != len(axes):
        raise ValueError("repeated dim")
    return np.flip(values, axis=tuple(axes)) if values.ndim else values


def test_cat_and_stack(fuzz, device):
    @st.composite
    def cases(draw):
        first, x = draw(tensors(device, max_side=fuzz.max_side))
        parts = [(first, x)]
        for _ in range(draw(st.integers(0, 2))):
            shape = draw(st.one_of(st.just(first.shape), shapes(max_side=fuzz.max_side)))
            if first.ndim and draw(st.booleans()):
                shape = list(first.shape)
                shape[draw(st.integers(0, first.ndim - 1))] = draw(st.integers(0, 3))
                shape = tuple(shape)
            parts.append(draw(tensors(device, shape=shape, max_side=fuzz.max_side)))
        return (
            draw(st.sampled_from(["cat", "stack"])),
            parts,
            draw(st.integers(-first.ndim - 2, first.ndim + 1)),
        )

    def body(case):
        kind, parts, dim = case
        arrays = [values for values, _ in parts]
        tensors_ = [t for _, t in parts]
        dtype = result_type(*tensors_)

        def expected():
            if kind == "cat":
                if arrays[0].ndim == 0:
                    raise ValueError("cat of 0-d tensors")
                axis = _dim(arrays[0].ndim, dim)
                if any(a.ndim != arrays[0].ndim for a in arrays):
                    raise ValueError("ranks differ")
                return np.concatenate([a.astype(dtype.numpy) for a in arrays], axis=axis)
            if len({a.shape for a in arrays}) > 1:
                raise ValueError("shapes differ")
            axis = _dim(arrays[0].ndim + 1, dim)
            return np.stack([a.astype(dtype.numpy) for a in arrays], axis=axis)

        fn = kg.cat if kind == "cat" else kg.stack
        check(kind, lambda: fn(tensors_, dim), expected, 0, 0)

    fuzz.run(cases(), body)


def test_view_dtype(fuzz, device):
    @st.composite
    def cases(draw):
        values, x = draw(tensors(device, max_side=fuzz.max_side))
        return values, x, draw(st.sampled_from(DTYPES))

    def body(case):
        values, x, dtype = case

        def expected():
            old, new = x.dtype.itemsize, dtype.itemsize
            if old != new:
                if x.ndim == 0 or x._strides[-1] != 1:
                    raise ValueError("the last dim must have stride 1")
                if new > old and (
                    x.shape[-1] % (new // old)
                    or x._offset % (new // old)
                    or any(s % (new // old) for s in x._strides[:-1])
                ):
                    raise ValueError("not divisible")
            return np.array(values).view(dtype.numpy)

        def compare(got, want):
            # Compare bits: NaN payloads and bool bytes are not values.
            got_bytes = np.ascontiguousarray(got.cpu().numpy()).view(np.uint8)
            assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
            assert np.array_equal(got_bytes, np.ascontiguousarray(want).view(np.uint8))

        check("view(dtype)", lambda: x.view(dtype), expected, compare=compare)

    fuzz.run(cases(), body)
