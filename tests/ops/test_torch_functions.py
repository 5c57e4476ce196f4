"""More of PyTorch's functions and Tensor methods (ops/torch_functions.py): values against
NumPy and, where installed, against PyTorch called the same way; gradients by central
differences; in-place forms (memory, version, autograd); errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ArgumentError, DTypeError, IndexingError, ShapeError
from tests.helpers import assert_close, check_grad

RNG = np.random.default_rng(11)
A23 = RNG.standard_normal((2, 3))
A34 = RNG.standard_normal((3, 4))
A24 = RNG.standard_normal((2, 4))
A3 = RNG.standard_normal(3)
B3 = RNG.standard_normal(3)
A4 = RNG.standard_normal(4)
A234 = RNG.standard_normal((2, 3, 4))
B243 = RNG.standard_normal((2, 4, 3))
A233 = RNG.standard_normal((2, 3, 3))
POS23 = RNG.uniform(0.1, 0.9, (2, 3))
I5 = np.array([3, 1, 4, 1, 5])
SORTED = np.array([1.0, 2.0, 2.0, 4.0])
PROBES = np.array([[0.5, 2.0], [4.0, 9.0]])
SPECIAL = np.array([1.0, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan])


def _np_scatter_add(x, dim, index, src):
    out = x.copy()
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        out[tuple(target)] += src[pos]
    return out


def _np_scatter(x, dim, index, src):
    out = x.copy()
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        out[tuple(target)] = src[pos] if isinstance(src, np.ndarray) else src
    return out


SCATTER_INDEX = np.array([[2, 0, 1], [1, 2, 0]])  # a permutation per row: no repeats
REPEATED_INDEX = np.array([[0, 0, 2, 0]])


def _np_diag_embed(x, offset):
    n = x.shape[-1]
    m = n + abs(offset)
    out = np.zeros(x.shape[:-1] + (m, m))
    for k in range(n):
        out[..., k + max(-offset, 0), k + max(offset, 0)] = x[..., k]
    return out


def _np_cdist(a, b, p):
    delta = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == math.inf:
        return delta.max(-1)
    if p == 0:
        return (delta != 0).sum(-1).astype(a.dtype)
    return (delta**p).sum(-1) ** (1 / p)


def _np_block_diag(*blocks):
    blocks = [np.atleast_2d(b) for b in blocks]
    out = np.zeros((sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)))
    r = c = 0
    for b in blocks:
        out[r : r + b.shape[0], c : c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


# (id, inputs, fn(module, *tensors) called with kg and torch alike, NumPy reference(*arrays))
VALUE_CASES = [
    ("clone", [A23], lambda m, x: m.clone(x), lambda a: a),
    ("t", [A23], lambda m, x: m.t(x), lambda a: a.T),
    ("multiply", [A23, A3], lambda m, x, y: m.multiply(x, y), np.multiply),
    ("divide", [A23, A3], lambda m, x, y: m.divide(x, y), np.divide),
    (
        "divide_floor",
        [A23, A3],
        lambda m, x, y: m.divide(x, y, rounding_mode="floor"),
        lambda a, b: np.floor(a / b),
    ),
    ("subtract", [A23, A3], lambda m, x, y: m.subtract(x, y, alpha=2), lambda a, b: a - 2 * b),
    ("negative", [A23], lambda m, x: m.negative(x), np.negative),
    ("positive", [A23], lambda m, x: m.positive(x), lambda a: a),
    ("not_equal", [A23, A23[:1]], lambda m, x, y: m.not_equal(x, y), np.not_equal),
    ("greater", [A23, A3], lambda m, x, y: m.greater(x, y), np.greater),
    ("greater_equal", [A23, A3], lambda m, x, y: m.greater_equal(x, y), np.greater_equal),
    ("less", [A23, A3], lambda m, x, y: m.less(x, y), np.less),
    ("less_equal", [A23, A23[:1]], lambda m, x, y: m.less_equal(x, y), np.less_equal),
    ("absolute", [A23], lambda m, x: m.absolute(x), np.abs),
    ("sgn", [SPECIAL[:4]], lambda m, x: m.sgn(x), np.sign),
    ("moveaxis", [A234], lambda m, x: m.moveaxis(x, 0, -1), lambda a: np.moveaxis(a, 0, -1)),
    ("swapaxes", [A234], lambda m, x: m.swapaxes(x, 0, 2), lambda a: np.swapaxes(a, 0, 2)),
    ("ravel", [A234.transpose(2, 0, 1)], lambda m, x: m.ravel(x), np.ravel),
    ("select", [A234], lambda m, x: m.select(x, 1, -1), lambda a: a[:, -1]),
    ("clamp_min", [A23], lambda m, x: m.clamp_min(x, 0.1), lambda a: np.maximum(a, 0.1)),
    ("clamp_max", [A23], lambda m, x: m.clamp_max(x, 0.1), lambda a: np.minimum(a, 0.1)),
    ("tile_short_dims", [A23], lambda m, x: m.tile(x, (2,)), lambda a: np.tile(a, 2)),
    ("tile_long_dims", [A3], lambda m, x: m.tile(x, (2, 1, 2)), lambda a: np.tile(a, (2, 1, 2))),
    ("tile_method", [A23], lambda m, x: x.tile(2, 1), lambda a: np.tile(a, (2, 1))),
    (
        "broadcast_tensors",
        [A23[:, :1], A3],
        lambda m, x, y: m.stack(m.broadcast_tensors(x, y)),
        lambda a, b: np.stack(np.broadcast_arrays(a, b)),
    ),
    (
        "meshgrid_ij",
        [A3, A4],
        lambda m, x, y: m.stack(m.meshgrid(x, y, indexing="ij")),
        lambda a, b: np.stack(np.meshgrid(a, b, indexing="ij")),
    ),
    (
        "meshgrid_xy",
        [A3, A4, A3[:2]],
        lambda m, x, y, z: m.stack(m.meshgrid([x, y, z], indexing="xy")),
        lambda a, b, c: np.stack(np.meshgrid(a, b, c, indexing="xy")),
    ),
    (
        "cartesian_prod",
        [A3, A4[:2]],
        lambda m, x, y: m.cartesian_prod(x, y),
        lambda a, b: np.array([[p, q] for p in a for q in b]),
    ),
    (
        "scatter_add",
        [A23, RNG.standard_normal((2, 3))],
        lambda m, x, s: m.scatter_add(x, 1, m.tensor([[0, 0, 2], [1, 1, 1]]), s),
        lambda a, s: _np_scatter_add(a, 1, np.array([[0, 0, 2], [1, 1, 1]]), s),
    ),
    (
        "scatter_add_dim0_partial",
        [A34, A24[:, :3]],
        lambda m, x, s: m.scatter_add(x, 0, m.tensor([[2, 0], [2, 1]]), s),
        lambda a, s: _np_scatter_add(a, 0, np.array([[2, 0], [2, 1]]), s),
    ),
    (
        "scatter_src",
        [A23, A24],
        lambda m, x, s: m.scatter(x, 1, m.tensor(SCATTER_INDEX, device=x.device), s),
        lambda a, s: _np_scatter(a, 1, SCATTER_INDEX, s),
    ),
    (
        "scatter_value",
        [A23],
        lambda m, x: m.scatter(x, 1, m.tensor([[1], [0]], device=x.device), 7.5),
        lambda a: _np_scatter(a, 1, np.array([[1], [0]]), 7.5),
    ),
    (
        "scatter_reduce_add",
        [A23, A24],
        lambda m, x, s: m.scatter(x, 1, m.tensor(SCATTER_INDEX[:, :2]), s, reduce="add"),
        lambda a, s: _np_scatter_add(a, 1, SCATTER_INDEX[:, :2], s),
    ),
    (
        "index_add_alpha",
        [A34, A23.T],
        lambda m, x, s: m.index_add(x, 1, m.tensor([3, 0], device=x.device), s, alpha=2.0),
        lambda a, s: _np_scatter_add(a, 1, np.broadcast_to([3, 0], (3, 2)), 2 * s),
    ),
    (
        "addmm",
        [A24, A23, A34],
        lambda m, x, a, b: m.addmm(x, a, b, beta=0.5, alpha=2),
        lambda x, a, b: 0.5 * x + 2 * a @ b,
    ),
    (
        "addmm_broadcast",
        [A4, A23, A34],
        lambda m, x, a, b: m.addmm(x, a, b),
        lambda x, a, b: x + a @ b,
    ),
    (
        "addmv",
        [A3, A34, A4],
        lambda m, x, a, v: m.addmv(x, a, v, alpha=-1),
        lambda x, a, v: x - a @ v,
    ),
    (
        "addr",
        [A34, A3, A4],
        lambda m, x, a, b: m.addr(x, a, b, beta=2),
        lambda x, a, b: 2 * x + np.outer(a, b),
    ),
    (
        "baddbmm",
        [A233, A234, B243],
        lambda m, x, a, b: m.baddbmm(x, a, b, alpha=0.5),
        lambda x, a, b: x + 0.5 * a @ b,
    ),
    (
        "addbmm",
        [A233[0], A234, B243],
        lambda m, x, a, b: m.addbmm(x, a, b),
        lambda x, a, b: x + (a @ b).sum(0),
    ),
    (
        "addcmul",
        [A23, A3, A23],
        lambda m, x, a, b: m.addcmul(x, a, b, value=0.5),
        lambda x, a, b: x + 0.5 * a * b,
    ),
    (
        "addcdiv",
        [A23, A3, POS23],
        lambda m, x, a, b: m.addcdiv(x, a, b, value=-2),
        lambda x, a, b: x - 2 * a / b,
    ),
    ("deg2rad", [A23], lambda m, x: m.deg2rad(x), np.deg2rad),
    ("rad2deg", [A23], lambda m, x: m.rad2deg(x), np.rad2deg),
    ("logit", [POS23], lambda m, x: m.logit(x), lambda a: np.log(a / (1 - a))),
    (
        "logit_eps",
        [np.array([0.0, 0.3, 1.0])],
        lambda m, x: m.logit(x, eps=0.1),
        lambda a: np.log(np.clip(a, 0.1, 0.9) / (1 - np.clip(a, 0.1, 0.9))),
    ),
    ("sinc", [np.array([0.0, 0.5, -1.5, 2.0])], lambda m, x: m.sinc(x), np.sinc),
    ("signbit", [SPECIAL], lambda m, x: m.signbit(x), np.signbit),
    ("isposinf", [SPECIAL], lambda m, x: m.isposinf(x), np.isposinf),
    ("isneginf", [SPECIAL], lambda m, x: m.isneginf(x), np.isneginf),
    (
        "nansum",
        [np.array([[1.0, np.nan], [np.nan, np.nan]])],
        lambda m, x: m.nansum(x, 1),
        lambda a: np.nansum(a, 1),
    ),
    (
        "nanmean",
        [np.array([[1.0, np.nan, 3.0], [2.0, 2.0, 5.0]])],
        lambda m, x: m.nanmean(x, dim=1, keepdim=True),
        lambda a: np.nanmean(a, 1, keepdims=True),
    ),
    ("diff", [A234], lambda m, x: m.diff(x, dim=1), lambda a: np.diff(a, axis=1)),
    (
        "diff_n2_pre_append",
        [A3, A3[:1], A3[:2]],
        lambda m, x, p, q: m.diff(x, n=2, prepend=p, append=q),
        lambda a, p, q: np.diff(a, n=2, prepend=p, append=q),
    ),
    (
        "cross",
        [A233, A233[::-1].copy()],
        lambda m, x, y: m.cross(x, y, dim=-1),
        lambda a, b: np.cross(a, b, axis=-1),
    ),
    (
        "cross_default_dim",
        [A23.T, A3[:, None]],
        lambda m, x, y: m.cross(x, y),
        lambda a, b: np.cross(a, np.broadcast_to(b, a.shape), axis=0),
    ),
    ("inner", [A23, A34[:, :3]], lambda m, x, y: m.inner(x, y), np.inner),
    ("vdot", [A3, B3], lambda m, x, y: m.vdot(x, y), np.vdot),
    ("kron", [A23, A34[:2, :2]], lambda m, x, y: m.kron(x, y), np.kron),
    ("kron_ranks", [A3, A23], lambda m, x, y: m.kron(x, y), np.kron),
    (
        "tensordot_int",
        [A234, B243],
        lambda m, x, y: m.tensordot(x, y[0], dims=1),
        lambda a, b: np.tensordot(a, b[0], axes=1),
    ),
    (
        "tensordot_lists",
        [A234, B243],
        lambda m, x, y: m.tensordot(x, y, dims=([0, 2], [0, 1])),
        lambda a, b: np.tensordot(a, b, axes=([0, 2], [0, 1])),
    ),
    (
        "cdist_p2",
        [A234, B243],
        lambda m, x, y: m.cdist(x, y.transpose(1, 2)),
        lambda a, b: _np_cdist(a, b.transpose(0, 2, 1), 2),
    ),
    ("cdist_p1", [A24, A34], lambda m, x, y: m.cdist(x, y, p=1), lambda a, b: _np_cdist(a, b, 1)),
    ("cdist_p3", [A24, A34], lambda m, x, y: m.cdist(x, y, p=3), lambda a, b: _np_cdist(a, b, 3)),
    (
        "cdist_pinf",
        [A24, A34],
        lambda m, x, y: m.cdist(x, y, p=math.inf),
        lambda a, b: _np_cdist(a, b, math.inf),
    ),
    ("rot90", [A234], lambda m, x: m.rot90(x, 1, [1, 2]), lambda a: np.rot90(a, 1, (1, 2))),
    ("rot90_k3", [A23], lambda m, x: m.rot90(x, -1), lambda a: np.rot90(a, -1)),
    ("rot90_k2", [A23], lambda m, x: m.rot90(x, 2, [1, 0]), lambda a: np.rot90(a, 2, (1, 0))),
    ("unflatten", [A234], lambda m, x: m.unflatten(x, 2, (2, -1)), lambda a: a.reshape(2, 3, 2, 2)),
    (
        "tensor_split_sections",
        [A234],
        lambda m, x: m.cat(m.tensor_split(x, 3, dim=2)[1:], 2),
        lambda a: np.concatenate(np.array_split(a, 3, axis=2)[1:], 2),
    ),
    (
        "tensor_split_indices",
        [A234],
        lambda m, x: m.tensor_split(x, [1, -1, 9], dim=2)[1],
        lambda a: np.split(a, [1, 3], axis=2)[1],
    ),
    ("hsplit", [A234], lambda m, x: m.hsplit(x, [2])[1], lambda a: np.hsplit(a, [2])[1]),
    ("vsplit", [A24], lambda m, x: m.vsplit(x, 2)[1], lambda a: np.vsplit(a, 2)[1]),
    ("dsplit", [A234], lambda m, x: m.dsplit(x, 2)[0], lambda a: np.dsplit(a, 2)[0]),
    (
        "column_stack",
        [A3, A23.T, np.array(1.5)],
        lambda m, x, y, z: m.column_stack([x, y, m.atleast_1d(z).expand(3)]),
        lambda a, b, c: np.column_stack([a, b, np.broadcast_to(c, 3)]),
    ),
    (
        "dstack",
        [A23, A23[::-1].copy()],
        lambda m, x, y: m.dstack([x, y]),
        lambda a, b: np.dstack([a, b]),
    ),
    ("atleast_2d", [A3], lambda m, x: m.atleast_2d(x), np.atleast_2d),
    ("atleast_3d_1d", [A3], lambda m, x: m.atleast_3d(x), np.atleast_3d),
    ("atleast_3d_2d", [A23], lambda m, x: m.atleast_3d(x), np.atleast_3d),
    (
        "block_diag",
        [A23, A3, np.array(2.0)],
        lambda m, x, y, z: m.block_diag(x, y, z),
        _np_block_diag,
    ),
    ("diag_embed", [A23], lambda m, x: m.diag_embed(x), lambda a: _np_diag_embed(a, 0)),
    (
        "diag_embed_offset_dims",
        [A23],
        lambda m, x: m.diag_embed(x, -1, 0, 2),
        lambda a: np.moveaxis(_np_diag_embed(a, -1), (1, 2), (0, 2)),
    ),
    ("diagflat", [A23], lambda m, x: m.diagflat(x, 1), lambda a: np.diagflat(a, 1)),
    ("trapezoid", [A234], lambda m, x: m.trapezoid(x, dim=1), lambda a: np.trapezoid(a, axis=1)),
    (
        "trapezoid_dx",
        [A234],
        lambda m, x: m.trapezoid(x, dx=0.5),
        lambda a: np.trapezoid(a, dx=0.5),
    ),
    (
        "trapezoid_x",
        [A234, np.array([0.0, 1.0, 3.0, 3.5])],
        lambda m, y, x: m.trapezoid(y, x),
        lambda y, x: np.trapezoid(y, x),
    ),
    ("trapz", [A23], lambda m, x: m.trapz(x), lambda a: np.trapezoid(a)),
    ("isin", [I5, np.array([1, 5, 7])], lambda m, x, y: m.isin(x, y), np.isin),
    (
        "isin_invert",
        [I5, np.array([1, 5, 7])],
        lambda m, x, y: m.isin(x, y, invert=True),
        lambda a, b: np.isin(a, b, invert=True),
    ),
    ("bincount", [I5], lambda m, x: m.bincount(x), np.bincount),
    (
        "bincount_weights",
        [I5, np.array([0.5, 1, 2, 3, 4])],
        lambda m, x, w: m.bincount(x, w.float(), minlength=8),
        lambda a, w: np.bincount(a, w, minlength=8),
    ),
    ("searchsorted", [SORTED, PROBES], lambda m, s, v: m.searchsorted(s, v), np.searchsorted),
    (
        "searchsorted_right",
        [SORTED, PROBES],
        lambda m, s, v: m.searchsorted(s, v, right=True),
        lambda s, v: np.searchsorted(s, v, side="right"),
    ),
    (
        "searchsorted_batched",
        [np.array([[1.0, 3.0, 5.0], [0.0, 0.0, 9.0]]), PROBES],
        lambda m, s, v: m.searchsorted(s, v, side="right"),
        lambda s, v: np.stack([np.searchsorted(s[k], v[k], side="right") for k in range(2)]),
    ),
    (
        "bucketize",
        [PROBES, SORTED],
        lambda m, v, b: m.bucketize(v, b),
        lambda v, b: np.searchsorted(b, v),
    ),
    (
        "bucketize_number",
        [SORTED.astype(np.int64)],
        lambda m, b: m.stack([m.bucketize(2.5, b), m.searchsorted(b, 2, right=True)]),
        lambda b: np.array([np.searchsorted(b, 2.5), np.searchsorted(b, 2, side="right")]),
    ),
    (
        "bucketize_right",
        [PROBES, SORTED],
        lambda m, v, b: m.bucketize(v, b, right=True),
        lambda v, b: np.searchsorted(b, v, side="right"),
    ),
]


def _float32(a):
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype == np.float64 else a


@pytest.mark.parametrize("case", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_match_numpy(case):
    _, inputs, fn, reference = case
    got = fn(kg, *[kg.tensor(_float32(a)) for a in inputs])
    want = reference(*inputs)
    assert_close(got, np.asarray(want), rtol=1e-5, atol=1e-5)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("case", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_and_dtypes_match_pytorch(case):
    torch = pytest.importorskip("torch")
    _, inputs, fn, _ = case
    got = fn(kg, *[kg.tensor(_float32(a)) for a in inputs])
    want = fn(torch, *[torch.tensor(_float32(a)) for a in inputs])
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(got.shape) == tuple(want.shape)
    assert_close(got, want.numpy(), rtol=1e-5, atol=1e-5)


# --- gradients --------------------------------------------------------------------------------
GRAD_CASES = [
    (
        "scatter_add",
        lambda x, s: kg.scatter_add(x, 1, kg.tensor([[0, 0, 2], [1, 1, 1]]), s),
        [A23, A23[::-1].copy()],
    ),
    ("scatter", lambda x, s: kg.scatter(x, 1, kg.tensor(SCATTER_INDEX[:, :2]), s), [A23, A24]),
    ("index_add_alpha", lambda x, s: kg.index_add(x, 0, kg.tensor([1, 1]), s, alpha=3), [A34, A24]),
    ("addmm", lambda x, a, b: kg.addmm(x, a, b, beta=0.5, alpha=2), [A24, A23, A34]),
    ("addmv", lambda x, a, v: kg.addmv(x, a, v), [A3, A34, A4]),
    ("baddbmm", lambda x, a, b: kg.baddbmm(x, a, b, beta=2), [A233, A234, B243]),
    ("addcmul", lambda x, a, b: kg.addcmul(x, a, b, value=0.5), [A23, A3, A23]),
    ("addcdiv", lambda x, a, b: kg.addcdiv(x, a, b, value=2), [A23, A3, POS23]),
    ("logit", lambda x: kg.logit(x), [POS23]),
    ("sinc_at_zero", lambda x: kg.sinc(x), [np.array([0.0, 0.3, -1.2])]),
    (
        "nanmean",
        lambda x: kg.nanmean(kg.where(kg.tensor([False, True, False]), math.nan, x), 1),
        [A23],
    ),
    ("diff", lambda x: kg.diff(x, n=2, dim=0, append=x[:1]), [A34]),
    ("cross", lambda a, b: kg.cross(a, b, dim=2), [A233, A233[:, ::-1].copy()]),
    ("kron", lambda a, b: kg.kron(a, b), [A23, A3]),
    ("tensordot", lambda a, b: kg.tensordot(a, b, ([1, 2], [2, 1])), [A234, B243]),
    ("inner", lambda a, b: kg.inner(a, b), [A23, A3]),
    ("cdist", lambda a, b: kg.cdist(a, b), [A24, A34]),
    ("cdist_p3", lambda a, b: kg.cdist(a, b, p=3), [A24, A34]),
    ("rot90", lambda x: kg.rot90(x, 3, [2, 0]), [A234]),
    ("block_diag", lambda a, b: kg.block_diag(a, b), [A23, A3]),
    ("diag_embed", lambda x: kg.diag_embed(x, 1, 0, 1), [A23]),
    ("trapezoid_x", lambda y, x: kg.trapezoid(y, x), [A234, np.array([0.0, 1.0, 3.0, 3.5])]),
    (
        "tile_and_meshgrid",
        lambda a, b: kg.tile(kg.stack(kg.meshgrid(a, b, indexing="xy")), (2, 1)),
        [A3, A4],
    ),
    ("tensor_split", lambda x: kg.tensor_split(x, [1], dim=1)[1] * 2, [A23]),
    ("dstack_atleast", lambda a, b: kg.dstack([a, kg.atleast_2d(b)]), [A3[None], A3]),
]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradients_match_central_differences(case):
    _, fn, arrays = case
    check_grad(fn, *arrays)


def test_cdist_gradient_is_zero_at_zero_distance_as_in_pytorch():
    x = kg.tensor([[1.0, 2.0]], requires_grad=True)
    kg.cdist(x, kg.tensor([[1.0, 2.0], [1.0, 3.0]])).sum().backward()
    assert x.grad.tolist() == [[0.0, -1.0]]


def test_scatter_with_repeated_indices_writes_the_last_value(device):
    """Where an index repeated, scatter wrote the mean of the values (1.5 for 1 and 2,
    NaN for inf and -inf, floor(1.5) for integers), a value none of the sources holds;
    PyTorch's CPU writes the last one in index order, as kernelgrad now does on every
    backend (-0.0, infinities and NaN land as they are)."""
    x = kg.zeros(4, device=device)
    index = kg.tensor([0, 0, 2, 0], device=device)
    mixed = kg.scatter(x, 0, index, kg.tensor([1.0, 2.0, 3.0, 6.0], device=device))
    assert mixed.cpu().tolist() == [6.0, 0.0, 3.0, 0.0]
    pair = kg.tensor([0, 0], device=device)
    infinities = kg.scatter(
        kg.zeros(3, device=device), 0, pair, kg.tensor([math.inf, -math.inf], device=device)
    )
    assert infinities.cpu().tolist() == [-math.inf, 0.0, 0.0]
    integers = kg.zeros(3, dtype=kg.int64, device=device).scatter(
        0, pair, kg.tensor([1, 2], device=device)
    )
    assert integers.dtype == kg.int64 and integers.cpu().tolist() == [2, 0, 0]
    zero = kg.scatter(
        kg.ones(2, device=device), 0, pair, kg.tensor([math.nan, -0.0], device=device)
    )
    assert math.copysign(1.0, zero.cpu().tolist()[0]) == -1.0
    rows = kg.tensor([[2, 2, 2], [0, 1, 0]], device=device)
    written = kg.zeros(2, 3, device=device).scatter(
        1, rows, kg.arange(6.0, device=device).reshape(2, 3)
    )
    assert written.cpu().tolist() == [[0.0, 0.0, 2.0], [5.0, 4.0, 0.0]]
    filled = kg.zeros(2, 3, device=device)
    filled.scatter_(1, rows, 7.5)
    assert filled.cpu().tolist() == [[0.0, 0.0, 7.5], [7.5, 7.5, 0.0]]


def test_scatter_with_repeated_indices_matches_pytorch(device):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for dim, x_shape, index_shape in [
        (0, (3,), (9,)),
        (1, (2, 3), (2, 7)),
        (0, (2, 3, 2), (6, 2, 2)),
    ]:
        index = rng.integers(0, x_shape[dim], index_shape)
        src = rng.standard_normal(index_shape).astype(np.float32)
        got = kg.scatter(
            kg.zeros(x_shape, device=device),
            dim,
            kg.tensor(index, device=device),
            kg.tensor(src, device=device),
        )
        want = torch.zeros(x_shape).scatter(dim, torch.tensor(index), torch.tensor(src))
        assert_close(got, want.numpy(), rtol=0, atol=0)


def test_scatter_and_scatter_add_on_booleans():
    b = kg.tensor([True, False, False])
    assert kg.scatter(b, 0, kg.tensor([1]), kg.tensor([True])).tolist() == [True, True, False]
    assert kg.scatter(b, 0, kg.tensor([0]), False).tolist() == [False, False, False]
    assert kg.scatter_add(b, 0, kg.tensor([2, 2]), kg.tensor([True, True])).tolist() == [
        True,
        False,
        True,
    ]


def test_addmm_with_beta_zero_ignores_nan_in_the_input_as_pytorch():
    out = kg.addmm(kg.full((2, 2), math.nan), kg.eye(2), kg.ones(2, 2), beta=0)
    assert out.tolist() == [[1.0, 1.0], [1.0, 1.0]]


# --- in-place forms and Tensor methods --------------------------------------------------------
INPLACE_CASES = [
    ("exp_", (), np.exp),
    ("log_", (), np.log),
    ("sqrt_", (), np.sqrt),
    ("rsqrt_", (), lambda a: 1 / np.sqrt(a)),
    ("sigmoid_", (), lambda a: 1 / (1 + np.exp(-a))),
    ("tanh_", (), np.tanh),
    ("neg_", (), np.negative),
    ("abs_", (), np.abs),
    ("reciprocal_", (), np.reciprocal),
    ("floor_", (), np.floor),
    ("ceil_", (), np.ceil),
    ("round_", (), np.round),
    ("trunc_", (), np.trunc),
    ("sin_", (), np.sin),
    ("cos_", (), np.cos),
    ("pow_", (2.0,), np.square),
    ("square_", (), np.square),
    ("tril_", (), np.tril),
    ("triu_", (1,), lambda a: np.triu(a, 1)),
    ("clamp_min_", (0.2,), lambda a: np.maximum(a, 0.2)),
    ("clamp_max_", (0.2,), lambda a: np.minimum(a, 0.2)),
    ("eq_", (0.5,), lambda a: (a == 0.5).astype(a.dtype)),
    ("ne_", (0.5,), lambda a: (a != 0.5).astype(a.dtype)),
    ("lt_", (0.5,), lambda a: (a < 0.5).astype(a.dtype)),
    ("le_", (0.5,), lambda a: (a <= 0.5).astype(a.dtype)),
    ("gt_", (0.5,), lambda a: (a > 0.5).astype(a.dtype)),
    ("ge_", (0.5,), lambda a: (a >= 0.5).astype(a.dtype)),
    ("addcmul_", ([1.0, 2.0], [3.0, -1.0]), lambda a: a + np.array([3.0, -2.0])),
    ("addcdiv_", ([1.0, 2.0], [4.0, -1.0]), lambda a: a + np.array([0.25, -2.0])),
    ("addmm_", (np.eye(2), np.ones((2, 2))), lambda a: a + 1),
    ("index_add_", (0, [1], [[1.0, 1.0]]), lambda a: a + [[0, 0], [1, 1]]),
    ("scatter_", (1, [[1], [0]], 9.0), lambda a: np.array([[a[0, 0], 9], [9, a[1, 1]]])),
    ("scatter_add_", (0, [[1, 0]], [[1.0, 2.0]]), lambda a: a + [[0, 2], [1, 0]]),
]
SQUARE = np.array([[0.5, 1.25], [2.5, 3.0]], dtype=np.float32)


def _arg(value):
    if isinstance(value, (list, np.ndarray)):
        array = np.asarray(value)
        return kg.tensor(array.astype(np.float32) if array.dtype == np.float64 else array)
    return value


@pytest.mark.parametrize("case", INPLACE_CASES, ids=[c[0] for c in INPLACE_CASES])
def test_inplace_methods_write_into_the_tensor_and_bump_its_version(case):
    name, args, reference = case
    x = kg.tensor(SQUARE)
    before = x._storage.version
    out = getattr(x, name)(*[_arg(a) for a in args])
    assert out is x
    assert x._storage.version > before
    assert_close(x, reference(SQUARE.astype(np.float64)).astype(np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("case", INPLACE_CASES, ids=[c[0] for c in INPLACE_CASES])
def test_inplace_methods_match_pytorch(case):
    torch = pytest.importorskip("torch")
    name, args, _ = case
    x = kg.tensor(SQUARE)
    getattr(x, name)(*[_arg(a) for a in args])
    t = torch.tensor(SQUARE)
    getattr(t, name)(
        *[
            torch.tensor(np.asarray(_arg(a))) if isinstance(a, (list, np.ndarray)) else a
            for a in args
        ]
    )
    assert_close(x, t.numpy())


def test_inplace_on_an_intermediate_is_recorded_and_differentiates():
    w = kg.tensor([0.5, 2.0], requires_grad=True)
    h = w * 3
    h.sigmoid_().addcmul_(w, w, value=2)
    h.sum().backward()
    s = 1 / (1 + np.exp(-3 * np.array([0.5, 2.0])))
    assert_close(w.grad, 3 * s * (1 - s) + 4 * np.array([0.5, 2.0]), rtol=1e-5)


def test_inplace_on_a_leaf_that_requires_grad_is_refused():
    w = kg.ones(2, requires_grad=True)
    for call in (lambda: w.exp_(), lambda: w.round_(), lambda: w.eq_(1.0), lambda: w.t_()):
        with pytest.raises(kg.InplaceError, match="leaf"):
            call()
    with kg.no_grad():
        w.exp_()
    assert_close(w, [math.e, math.e])


def test_inplace_comparison_in_a_graph_passes_no_gradient():
    w = kg.tensor([1.0, 2.0], requires_grad=True)
    h = w * 2
    h.gt_(3.0)
    h.sum().backward()
    assert h.tolist() == [0.0, 1.0] and w.grad.tolist() == [0.0, 0.0]


def test_inplace_result_that_needs_a_wider_dtype_is_refused():
    x = kg.tensor([1, 2])
    with pytest.raises(DTypeError, match="in place"):
        x.exp_()
    with pytest.raises(DTypeError, match="in place"):
        x.addcdiv_(kg.tensor([1.0, 1.0]), kg.tensor([2.0, 2.0]))


def test_square_of_bools_is_int64_as_in_pytorch(device):
    """`kg.square(bools)` and `bools.square()` stayed bool (they computed `x * x`);
    PyTorch squares a bool tensor to int64, and `square_` on it then raises."""
    flags = kg.tensor([True, False], device=device)
    for squared in (kg.square(flags), flags.square()):
        assert squared.dtype == kg.int64 and squared.cpu().tolist() == [1, 0]
    with pytest.raises(TypeError, match="in place"):
        flags.square_()
    assert kg.square(kg.tensor([3], dtype=kg.int32, device=device)).dtype == kg.int32
    assert kg.square(kg.tensor([-1.5], device=device)).cpu().tolist() == [2.25]


def test_view_changing_inplace_methods_change_shape_and_strides_only():
    x = kg.arange(6.0).reshape(2, 1, 3)
    version = x._storage.version
    assert x.squeeze_() is x and x.shape == (2, 3)
    x.unsqueeze_(0)
    assert x.shape == (1, 2, 3)
    x.squeeze_(0).t_()
    assert x.shape == (3, 2) and x.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    x.transpose_(0, 1)
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert x._storage.version == version
    w = kg.ones(2, 3, requires_grad=True)
    h = w * kg.arange(3.0)
    h.t_()
    (h * kg.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    assert w.grad.tolist() == [[0.0, 2.0, 6.0], [0.0, 2.0, 6.0]]


def test_bookkeeping_methods():
    x = kg.ones(2, 3)
    assert x.ndimension() == 2 and x.is_cpu and x.get_device() == -1
    assert x.is_signed() and kg.tensor([1]).is_signed() and not kg.tensor([True]).is_signed()
    w = kg.ones(2, requires_grad=True)
    h, g = w * 2, w * 3
    h.retain_grad()
    assert h.retains_grad and not g.retains_grad and not w.retains_grad
    a, b = kg.tensor([True, False, True]), kg.tensor([True, True, False])
    assert a.logical_and(b).tolist() == [True, False, False]
    assert a.logical_or(b).tolist() == [True, True, True]
    assert a.logical_xor(b).tolist() == [False, True, True]
    assert kg.tensor([1.0, 0.0]).logical_not_().tolist() == [0.0, 1.0]


def test_tensor_methods_mirror_the_functions():
    x = kg.tensor(A23.astype(np.float32))
    assert_close(x.addmm(x, x.t() @ x, beta=2), 2 * A23 + A23 @ A23.T @ A23, rtol=1e-5)
    assert_close(x.diff(), np.diff(A23), atol=1e-6)
    assert_close(x.rot90(), np.rot90(A23), atol=0)
    assert_close(x.moveaxis(0, 1), A23.T, atol=0)
    assert_close(x.select(0, 1), A23[1], atol=0)
    assert_close(x.ravel(), A23.ravel(), atol=0)
    assert_close(x.tile((1, 2)), np.tile(A23, (1, 2)), atol=0)
    assert_close(x.kron(x[:1]), np.kron(A23, A23[:1]), atol=1e-6)
    assert_close(x.nansum(1), A23.sum(1), atol=1e-6)
    assert [p.shape for p in x.tensor_split(2, 1)] == [(2, 2), (2, 1)]
    assert_close(x.diagflat(), np.diagflat(A23), atol=0)
    assert_close(
        x.index_add(1, kg.tensor([0]), x[:, :1], alpha=2),
        A23 + 2 * A23[:, :1] * [1, 0, 0],
        atol=1e-6,
    )
    assert kg.tensor([2, 0, 2]).bincount().tolist() == [1, 0, 2]


# --- defaults, creation, random ---------------------------------------------------------------
def test_set_default_dtype_changes_new_floats_and_is_restored():
    assert kg.get_default_dtype() is kg.float32
    try:
        kg.set_default_dtype(kg.float64)
        assert kg.get_default_dtype() is kg.float64
        assert kg.tensor([1.0]).dtype is kg.float64 and kg.ones(2).dtype is kg.float64
        assert (kg.tensor([1]) / 2).dtype is kg.float64
        assert (kg.tensor([1.5], dtype=kg.float32) * 2.0).dtype is kg.float32
    finally:
        kg.set_default_dtype(kg.float32)
    assert kg.tensor([1.0]).dtype is kg.float32
    with pytest.raises(DTypeError, match="floating point"):
        kg.set_default_dtype(kg.int64)


def test_index_helpers_and_logspace_match_numpy():
    assert kg.tril_indices(3, 4, 1).tolist() == np.stack(np.tril_indices(3, 1, 4)).tolist()
    assert kg.triu_indices(4, 3, -1).tolist() == np.stack(np.triu_indices(4, -1, 3)).tolist()
    assert kg.tril_indices(2, 2).dtype is kg.int64
    assert_close(kg.logspace(-1, 2, 4), np.logspace(-1, 2, 4).astype(np.float32))
    assert_close(kg.logspace(0, 3, 4, base=2.0), [1.0, 2.0, 4.0, 8.0])
    assert kg.broadcast_shapes((2, 1), (3,), 1) == (2, 3)
    assert isinstance(kg.broadcast_shapes((2,)), kg.Size)


def test_random_functions_have_the_right_shapes_ranges_and_moments():
    kg.manual_seed(3)
    samples = kg.normal(2.0, 0.5, (4000,))
    assert abs(samples.mean().item() - 2.0) < 0.05 and abs(samples.std().item() - 0.5) < 0.05
    per_element = kg.normal(kg.tensor([0.0, 100.0]), kg.tensor([1.0, 0.0]))
    assert per_element.shape == (2,) and per_element[1].item() == 100.0
    mean = kg.zeros(3, requires_grad=True)
    kg.normal(mean, 1.0).sum().backward()
    assert mean.grad.tolist() == [0.0, 0.0, 0.0]
    coins = kg.bernoulli(kg.tensor([0.0, 1.0] * 50))
    assert coins.tolist() == [0.0, 1.0] * 50
    assert abs(kg.bernoulli(kg.full((4000,), 0.3)).mean().item() - 0.3) < 0.05
    filled = kg.zeros(4000).bernoulli_(0.7)
    assert abs(filled.mean().item() - 0.7) < 0.05 and set(filled.tolist()) == {0.0, 1.0}
    ints = kg.randint_like(kg.zeros(200, dtype=kg.int32), 3, 6)
    assert ints.dtype is kg.int32 and set(ints.tolist()) == {3, 4, 5}
    assert set(kg.randint_like(kg.zeros(100), 2).tolist()) == {0.0, 1.0}


# --- errors -----------------------------------------------------------------------------------
ERROR_CASES = [
    ("select_range", lambda: kg.select(kg.ones(2, 3), 1, 3), IndexingError, "out of range"),
    ("meshgrid_2d", lambda: kg.meshgrid(kg.ones(2, 2)), ShapeError, "1-d"),
    ("meshgrid_indexing", lambda: kg.meshgrid(kg.ones(2), indexing="yx"), ArgumentError, "'ij'"),
    (
        "scatter_negative",
        lambda: kg.scatter(kg.zeros(3), 0, kg.tensor([-1]), 1.0),
        IndexingError,
        "index -1 is out of bounds",
    ),
    (
        "scatter_large",
        lambda: kg.scatter_add(kg.zeros(3), 0, kg.tensor([3]), kg.ones(1)),
        IndexingError,
        "index 3",
    ),
    (
        "scatter_rank",
        lambda: kg.scatter_add(kg.zeros(2, 2), 0, kg.tensor([1]), kg.ones(1)),
        ShapeError,
        "as many dims",
    ),
    (
        "scatter_src_small",
        lambda: kg.scatter(kg.zeros(3), 0, kg.tensor([0, 1]), kg.ones(1)),
        ShapeError,
        "exceeds",
    ),
    (
        "scatter_dtype",
        lambda: kg.scatter_add(kg.zeros(3), 0, kg.tensor([0]), kg.tensor([1])),
        DTypeError,
        "dtype",
    ),
    (
        "scatter_multiply",
        lambda: kg.scatter(kg.ones(3), 0, kg.tensor([0]), 2.0, reduce="multiply"),
        NotImplementedError,
        "multiply",
    ),
    ("addmm_ranks", lambda: kg.addmm(kg.ones(2), kg.ones(2), kg.ones(2, 2)), ShapeError, "2-d"),
    (
        "addcdiv_integers",
        lambda: kg.addcdiv(kg.ones(2), kg.tensor([1]), kg.tensor([2])),
        DTypeError,
        "integer division",
    ),
    ("positive_bool", lambda: kg.positive(kg.tensor([True])), DTypeError, "bool"),
    ("cross_no_3", lambda: kg.cross(kg.ones(2, 2), kg.ones(2, 2)), ShapeError, "size 3"),
    ("cross_dim", lambda: kg.cross(kg.ones(3, 2), kg.ones(3, 2), dim=1), ShapeError, "size 3"),
    ("tensordot_sizes", lambda: kg.tensordot(kg.ones(2, 3), kg.ones(3, 2)), ShapeError, "differ"),
    ("cdist_cols", lambda: kg.cdist(kg.ones(2, 3), kg.ones(2, 4)), ShapeError, "columns"),
    ("cdist_p", lambda: kg.cdist(kg.ones(2, 3), kg.ones(2, 3), p=-1), ArgumentError, "p"),
    ("rot90_dims", lambda: kg.rot90(kg.ones(2, 2), 1, [0, 0]), ArgumentError, "differ"),
    ("hsplit_divisor", lambda: kg.hsplit(kg.ones(2, 5), 2), ShapeError, "divisor"),
    ("vsplit_1d", lambda: kg.vsplit(kg.ones(4), 2), ShapeError, "2 dims"),
    ("tensor_split_zero", lambda: kg.tensor_split(kg.ones(4), 0), ArgumentError, "positive"),
    ("bincount_negative", lambda: kg.bincount(kg.tensor([1, -1])), ArgumentError, "negative"),
    ("bincount_float", lambda: kg.bincount(kg.tensor([1.0])), DTypeError, "integers"),
    ("diff_order", lambda: kg.diff(kg.ones(3), n=-1), ArgumentError, "non-negative"),
    ("nanmean_int", lambda: kg.nanmean(kg.tensor([1, 2])), DTypeError, "floating"),
    (
        "searchsorted_side",
        lambda: kg.searchsorted(kg.ones(3), kg.ones(1), side="up"),
        ArgumentError,
        "side",
    ),
    ("bucketize_2d", lambda: kg.bucketize(kg.ones(2), kg.ones(2, 2)), ShapeError, "1-d"),
    ("block_diag_3d", lambda: kg.block_diag(kg.ones(1, 1, 1)), ShapeError, "at most 2"),
    ("trapezoid_x_size", lambda: kg.trapezoid(kg.ones(3), kg.ones(4)), ShapeError, "points"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_name_the_problem(case):
    _, call, error, text = case
    with pytest.raises(error, match=text):
        call()


def test_errors_are_the_exception_types_pytorch_raises():
    # PyTorch raises RuntimeError for these; kernelgrad's errors subclass it
    with pytest.raises(RuntimeError):
        kg.scatter_add(kg.zeros(3), 0, kg.tensor([0]), kg.tensor([1]))
    with pytest.raises(RuntimeError):
        kg.bincount(kg.tensor([-1]))
    with pytest.raises(RuntimeError):
        kg.hsplit(kg.ones(2, 5), 2)


# --- on every device ----------------------------------------------------------------------------
def test_a_representative_subset_on_the_device(device, simulated):
    x = kg.tensor(A23.astype(np.float32), device=device, requires_grad=True)
    index = kg.tensor(SCATTER_INDEX, device=device)
    out = kg.scatter_add(kg.zeros(2, 3, device=device), 1, index, x)
    out = kg.addcmul(out, x, x, value=0.5) + kg.cdist(x, x).sum(1, keepdim=True)
    out = kg.tile(out, (1, 2))
    out.sum().backward()
    want = _np_scatter_add(np.zeros((2, 3)), 1, SCATTER_INDEX, A23) + 0.5 * A23 * A23
    want = np.tile(want + _np_cdist(A23, A23, 2).sum(1, keepdims=True), (1, 2))
    assert_close(out, want.astype(np.float32), rtol=1e-4, atol=1e-5)
    assert x.grad is not None and x.grad.device == kg.device(device)
    y = kg.tensor(SQUARE, device=device)
    y.exp_().clamp_max_(3.0).tril_()
    assert_close(y, np.tril(np.minimum(np.exp(SQUARE), 3.0)), rtol=1e-5)
    counts = kg.bincount(kg.tensor(I5, device=device), minlength=7)
    assert (
        counts.device == kg.device(device)
        and counts.cpu().tolist() == np.bincount(I5, minlength=7).tolist()
    )
    found = kg.searchsorted(kg.tensor(SORTED, device=device), kg.tensor(PROBES, device=device))
    assert found.cpu().tolist() == np.searchsorted(SORTED, PROBES).tolist()
    embedded = kg.diag_embed(kg.tensor(A3.astype(np.float32), device=device), 1)
    assert_close(embedded, _np_diag_embed(A3, 1).astype(np.float32))
    pieces = kg.tensor_split(kg.arange(5, device=device), kg.tensor([1, 3], device=device))
    assert [p.cpu().tolist() for p in pieces] == [[0], [1, 2], [3, 4]]
    assert kg.ones(1, device=device).get_device() == (-1 if device == "cpu" else 0)


DEVICE_CASES = [
    c
    for c in VALUE_CASES
    if c[0]
    in {
        "scatter_src",
        "scatter_value",
        "index_add_alpha",
        "cross",
        "kron",
        "meshgrid_xy",
        "diff_n2_pre_append",
        "addcdiv",
        "baddbmm",
        "sinc",
        "signbit",
        "isin",
        "searchsorted_batched",
        "block_diag",
        "rot90",
        "tensordot_lists",
        "trapezoid_x",
        "nanmean",
        "logit_eps",
        "cdist_pinf",
    }
]


@pytest.mark.parametrize("case", DEVICE_CASES, ids=[c[0] for c in DEVICE_CASES])
def test_values_on_the_device(case, device):
    _, inputs, fn, reference = case
    got = fn(kg, *[kg.tensor(_float32(a), device=device) for a in inputs])
    assert got.device == kg.device(device)
    assert_close(got.cpu(), np.asarray(reference(*inputs)), rtol=1e-5, atol=1e-5)


# --- Tensor.register_hook -----------------------------------------------------------------------
def _hooked_run(m):
    """The same program for kernelgrad and PyTorch: leaf and non-leaf hooks, a hook that
    only observes, removal, and a leaf that is the root."""
    out = {}
    w = m.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(g.tolist()))
    scale = w.register_hook(lambda g: g * 10)
    a = w * 3
    shift = a.register_hook(lambda g: g + 1)
    a.retain_grad()
    ((a * w).sum() + w.sum()).backward()
    out["leaf"], out["non_leaf"], out["seen"] = w.grad.tolist(), a.grad.tolist(), seen
    scale.remove()
    shift.remove()
    w.grad = None
    (w * w).sum().backward()
    out["after_remove"] = w.grad.tolist()
    r = m.tensor([1.0], requires_grad=True)
    r.register_hook(lambda g: g * 5)
    r.backward(m.tensor([2.0]))
    out["root"] = r.grad.tolist()
    return out


def test_register_hook_sees_and_replaces_gradients():
    got = _hooked_run(kg)
    # d/dw of sum(3w * w) + sum(w) = 6w + 1 = [7, 13], plus a's hook (+1) times w = [1, 2]
    # through a: 3 * (w + 1) + 3 * w + 1 -> [10, 16]; then the leaf hook scales by 10
    assert got == {
        "leaf": [100.0, 160.0],
        "non_leaf": [2.0, 3.0],
        "seen": [[10.0, 16.0], [2.0, 4.0]],
        "after_remove": [2.0, 4.0],
        "root": [10.0],
    }


@pytest.mark.torch
def test_register_hook_matches_pytorch():
    torch = pytest.importorskip("torch")
    assert _hooked_run(kg) == _hooked_run(torch)


def test_register_hook_runs_before_post_accumulate_hooks_and_checks_its_arguments():
    w = kg.ones(2, requires_grad=True)
    order = []
    w.register_hook(lambda g: order.append("hook") or g * 2)
    kg.autograd.register_post_accumulate_grad_hook(w, lambda t: order.append(t.grad.tolist()))
    ((w * 3).sum() + (w * w).sum()).backward()
    assert order == ["hook", [10.0, 10.0]]
    with pytest.raises(RuntimeError, match="does not require grad"):
        kg.ones(2).register_hook(lambda g: g)
    v = kg.ones(2, requires_grad=True)
    v.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match="keep the shape"):
        (v * 2).sum().backward()
