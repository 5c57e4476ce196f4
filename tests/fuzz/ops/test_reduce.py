"""Fuzz: reductions and their composites over random dims (None, one, several, repeated,
out of range), keepdim, empty tensors and special values."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import strategies as st

import kernelgrad as kg
from tests.fuzz.oracle import assert_matches, check
from tests.fuzz.strategies import tensors


def _axes(dim, ndim):
    """NumPy's axis for a kernelgrad dim; a 0-d tensor accepts dims 0 and -1 (PyTorch),
    NumPy none. Repeated and out-of-range dims raise, as they should."""
    if dim is None:
        return None
    dims = dim if isinstance(dim, tuple) else (dim,)
    span = max(ndim, 1)
    for d in dims:
        if not -span <= d < span:
            raise IndexError(f"dim {d} out of range")
    normalized = [d % span for d in dims]
    if len(set(normalized)) != len(normalized):
        raise ValueError("repeated dim")
    if ndim == 0:
        return None
    return tuple(normalized) if isinstance(dim, tuple) else normalized[0]


def _reduce(fn, values, dim, keepdim, **kwargs):
    axis = _axes(dim, values.ndim)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fn(values, axis, keepdim, **kwargs)
    if values.ndim == 0:
        return np.asarray(result).reshape(())
    return result


def _logsumexp(values, axis, keepdims):
    """PyTorch's logsumexp: the sum of no exponentials is 0, so an empty one is -inf."""
    axes = tuple(range(values.ndim)) if axis is None else np.atleast_1d(axis).tolist()
    if any(values.shape[a] == 0 for a in axes):
        peak = np.zeros([1 if a in axes else s for a, s in enumerate(values.shape)])
    else:
        peak = np.max(values, axis=axis, keepdims=True)
    peak = np.where(np.isinf(peak), 0.0, peak)
    total = np.log(np.sum(np.exp(values - peak), axis=axis, keepdims=True)) + peak
    return total if keepdims else np.squeeze(total, axis=axis)


def _extreme(kind):
    def fn(values, axis, keepdims):
        return (np.max if kind == "max" else np.min)(values, axis=axis, keepdims=keepdims)

    return fn


REDUCTIONS = {  # name -> (kernelgrad, NumPy on float64 values or the raw values)
    "sum": (lambda t, d, k: t.sum(d, keepdim=k), lambda v, a, k: np.sum(v, axis=a, keepdims=k)),
    "mean": (lambda t, d, k: t.mean(d, keepdim=k), lambda v, a, k: np.mean(v, axis=a, keepdims=k)),
    "amax": (lambda t, d, k: t.amax(d, keepdim=k), _extreme("max")),
    "amin": (lambda t, d, k: t.amin(d, keepdim=k), _extreme("min")),
    "var": (
        lambda t, d, k: t.var(d, keepdim=k),
        lambda v, a, k: np.var(v, axis=a, keepdims=k, ddof=1),
    ),
    "logsumexp": (lambda t, d, k: t.logsumexp(d, keepdim=k), _logsumexp),
    "any": (lambda t, d, k: t.any(d, keepdim=k), lambda v, a, k: np.any(v, axis=a, keepdims=k)),
    "all": (lambda t, d, k: t.all(d, keepdim=k), lambda v, a, k: np.all(v, axis=a, keepdims=k)),
}
FLOATING = {"mean", "var", "logsumexp"}


def _refused_integer_mean():
    raise TypeError("the mean of an integer or bool tensor (PyTorch refuses it)")


def _dims(ndim):
    one = st.integers(-ndim - 1, ndim)
    return st.one_of(st.none(), one, st.lists(one, max_size=3).map(tuple))


def test_reductions(fuzz, device):
    @st.composite
    def cases(draw):
        name = draw(st.sampled_from(sorted(REDUCTIONS)))
        values, x = draw(tensors(device, max_side=fuzz.max_side))
        return name, values, x, draw(_dims(values.ndim)), draw(st.booleans())

    def body(case):
        name, values, x, dim, keepdim = case
        kg_fn, np_fn = REDUCTIONS[name]
        if name in ("amax", "amin") and x.dtype is kg.bool:
            pass
        work = values.astype(np.float64) if values.dtype.kind != "b" or name in FLOATING else values
        if name == "sum" and values.dtype.kind in "iub":
            work = values.astype(np.int64)
        if name in ("amax", "amin", "any", "all") and values.dtype.kind in "iub":
            work = values
        if name == "mean" and not x.dtype.is_floating_point:
            check(name, lambda: kg_fn(x, dim, keepdim), _refused_integer_mean)
            return
        floating = x.dtype.is_floating_point or name in FLOATING
        rtol = 1e-5 if (x.dtype is not kg.float64 and floating) else 1e-9
        scale = float(np.nansum(np.abs(values[np.isfinite(values)]))) if values.size else 0.0
        check(
            name,
            lambda: kg_fn(x, dim, keepdim),
            lambda: _reduce(np_fn, work, dim, keepdim),
            rtol,
            1e-6 + rtol * scale,
        )

    fuzz.run(cases(), body)


def test_arg_and_indexed_reductions(fuzz, device):
    @st.composite
    def cases(draw):
        name = draw(st.sampled_from(["argmax", "argmin", "max", "min"]))
        values, x = draw(
            tensors(device, max_side=fuzz.max_side, dtypes=(kg.float32, kg.int64, kg.int32))
        )
        dim = draw(st.one_of(st.none(), st.integers(-values.ndim - 1, values.ndim)))
        return name, values, x, dim, draw(st.booleans())

    def body(case):
        name, values, x, dim, keepdim = case
        arg = np.argmax if name in ("argmax", "max") else np.argmin
        extreme = np.max if name in ("argmax", "max") else np.min

        def positions():
            if dim is None:
                if values.size == 0:
                    raise ValueError("no position in an empty tensor")
                index = arg(values)
                return np.reshape(index, (1,) * values.ndim) if keepdim else index
            axis = _axes(dim, values.ndim)
            if values.ndim == 0:
                return np.int64(0)
            return arg(values, axis=axis, keepdims=keepdim)  # raises for an empty dim

        if name.startswith("arg"):
            check(name, lambda: getattr(x, name)(dim, keepdim), positions)
            return
        if dim is None:
            check(
                name,
                lambda: getattr(x, name)(),
                lambda: extreme(values) if values.size else np.max([]),
            )
            return

        def both():
            index = positions()
            if values.ndim == 0:
                return values, index
            return extreme(values, axis=_axes(dim, values.ndim), keepdims=keepdim), index

        def compare(got, want):
            assert_matches(got[0], want[0], 0, 0, f"{name} values")
            assert_matches(got[1], want[1], 0, 0, f"{name} indices")

        check(name, lambda: getattr(x, name)(dim, keepdim), both, compare=compare)

    fuzz.run(cases(), body)


def test_softmax(fuzz, device):
    @st.composite
    def cases(draw):
        values, x = draw(
            tensors(device, max_side=fuzz.max_side, dtypes=(kg.float32, kg.float64, kg.int64))
        )
        return (
            draw(st.sampled_from(["softmax", "log_softmax"])),
            values,
            x,
            draw(st.integers(-values.ndim - 1, values.ndim)),
        )

    def body(case):
        name, values, x, dim = case

        def expected():
            axis = _axes(dim, values.ndim)
            work = values.astype(np.float64)
            with np.errstate(all="ignore"):
                peak = np.max(work, axis=axis, keepdims=True) if work.size else 0.0
                if name == "softmax":
                    exps = np.exp(work - peak)
                    return exps / np.sum(exps, axis=axis, keepdims=True)
                peak = np.where(np.isinf(peak), 0.0, peak)
                shifted = work - peak
                return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))

        rtol = 1e-9 if x.dtype is kg.float64 else 1e-5
        check(name, lambda: getattr(x, name)(dim), expected, rtol, 1e-6)

    fuzz.run(cases(), body)
