"""The losses, distances and poolings beyond the basic set: ``kl_div``,
``cosine_embedding_loss``, ``margin_ranking_loss``, ``hinge_embedding_loss``,
``triplet_margin_loss``, ``soft_margin_loss``, ``multilabel_soft_margin_loss``,
``gaussian_nll_loss``, ``poisson_nll_loss``, ``multi_margin_loss``; ``cosine_similarity``,
``pairwise_distance``, ``pdist``; 3-d, adaptive and LP pooling; and their modules.

Each is checked against a NumPy reference written from PyTorch's formula (values, and
gradients by central differences of the reference) for every reduction on every backend,
against PyTorch's values and gradients where PyTorch is installed, and for its errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, IndexingError, ShapeError
from kernelgrad.torch_alias import aliased
from tests.helpers import as_numpy, assert_close, check_grad
from tests.nn.reference import compare

RNG = np.random.default_rng(7)
REDUCTIONS = ["mean", "sum", "none"]


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _softplus(x):
    return np.logaddexp(0.0, x)


def _norm(x, p, axis=-1):
    if p == math.inf:
        return np.abs(x).max(axis)
    return (np.abs(x) ** p).sum(axis) ** (1.0 / p)


def _signs(n):
    """A fixed +-1 target (both signs present)."""
    return np.where(np.arange(n) % 2 == 0, 1.0, -1.0)


# --- losses: one case per loss --------------------------------------------------------------
# Each case builds (kg_fn(*tensors), numpy_fn(*arrays), torch_fn(torch, *tensors), arrays)
# for a reduction, a device and a batch size; discrete targets (classes, +-1 labels) are
# constants of the functions, the continuous operands are the arrays (and get gradients).


def _kl_div(reduction, device, n):
    logp = np.log(RNG.dirichlet(np.ones(4), n))
    target = RNG.dirichlet(np.ones(4), n)

    def numpy_fn(x, t):
        return _reduce(t * (np.log(t) - x), reduction)

    return (
        lambda x, t: F.kl_div(x, t, reduction=reduction),
        numpy_fn,
        lambda torch, x, t: torch.nn.functional.kl_div(x, t, reduction=reduction),
        [logp, target],
    )


def _kl_div_log_target(reduction, device, n):
    logp = np.log(RNG.dirichlet(np.ones(3), n))
    log_target = np.log(RNG.dirichlet(np.ones(3), n))
    return (
        lambda x, t: F.kl_div(x, t, reduction=reduction, log_target=True),
        lambda x, t: _reduce(np.exp(t) * (t - x), reduction),
        lambda torch, x, t: torch.nn.functional.kl_div(x, t, reduction=reduction, log_target=True),
        [logp, log_target],
    )


def _margin_ranking(reduction, device, n):
    target = _signs(n)
    x1, x2 = RNG.standard_normal(n), RNG.standard_normal(n)

    def kg_fn(a, b):
        return F.margin_ranking_loss(
            a, b, kg.tensor(target, device=device), margin=0.3, reduction=reduction
        )

    return (
        kg_fn,
        lambda a, b: _reduce(np.maximum(0.0, -target * (a - b) + 0.3), reduction),
        lambda torch, a, b: torch.nn.functional.margin_ranking_loss(
            a, b, torch.tensor(target), margin=0.3, reduction=reduction
        ),
        [x1, x2],
    )


def _hinge_embedding(reduction, device, n):
    target = _signs(2 * n).reshape(n, 2)
    x = RNG.uniform(0.1, 2.5, (n, 2))  # away from the kink at margin 1.5

    def numpy_fn(v):
        loss = np.where(target != 1, np.maximum(0.0, 1.5 - v), 0.0)
        return _reduce(loss + np.where(target != -1, v, 0.0), reduction)

    return (
        lambda v: F.hinge_embedding_loss(
            v, kg.tensor(target, device=device), margin=1.5, reduction=reduction
        ),
        numpy_fn,
        lambda torch, v: torch.nn.functional.hinge_embedding_loss(
            v, torch.tensor(target), margin=1.5, reduction=reduction
        ),
        [x],
    )


def _soft_margin(reduction, device, n):
    target = _signs(3 * n).reshape(n, 3)
    return (
        lambda v: F.soft_margin_loss(v, kg.tensor(target, device=device), reduction=reduction),
        lambda v: _reduce(_softplus(-target * v), reduction),
        lambda torch, v: torch.nn.functional.soft_margin_loss(
            v, torch.tensor(target), reduction=reduction
        ),
        [RNG.standard_normal((n, 3)) * 2],
    )


def _multilabel_soft_margin(reduction, device, n):
    target = (RNG.random((n, 4)) > 0.5).astype(np.float64)
    weight = np.array([0.5, 1.0, 2.0, 1.5])

    def numpy_fn(v):
        loss = (target * _softplus(-v) + (1 - target) * _softplus(v)) * weight
        return _reduce(loss.mean(-1), reduction)

    return (
        lambda v: F.multilabel_soft_margin_loss(
            v,
            kg.tensor(target, device=device),
            kg.tensor(weight, device=device),
            reduction=reduction,
        ),
        numpy_fn,
        lambda torch, v: torch.nn.functional.multilabel_soft_margin_loss(
            v, torch.tensor(target), torch.tensor(weight), reduction=reduction
        ),
        [RNG.standard_normal((n, 4))],
    )


def _cosine_embedding(reduction, device, n):
    target = _signs(n)

    def numpy_fn(a, b):
        cos = (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))
        loss = np.where(target == 1, 1 - cos, np.maximum(0.0, cos + 0.2))
        return _reduce(loss, reduction)

    return (
        lambda a, b: F.cosine_embedding_loss(
            a, b, kg.tensor(target, device=device), margin=-0.2, reduction=reduction
        ),
        numpy_fn,
        lambda torch, a, b: torch.nn.functional.cosine_embedding_loss(
            a, b, torch.tensor(target), margin=-0.2, reduction=reduction
        ),
        [RNG.standard_normal((n, 5)), RNG.standard_normal((n, 5))],
    )


def _triplet(reduction, device, n, p=2.0, swap=False):
    def numpy_fn(a, pos, neg):
        near = _norm(a - pos + 1e-6, p)
        far = _norm(a - neg + 1e-6, p)
        if swap:
            far = np.minimum(far, _norm(pos - neg + 1e-6, p))
        return _reduce(np.maximum(0.0, 2.0 + near - far), reduction)

    return (
        lambda a, pos, neg: F.triplet_margin_loss(
            a, pos, neg, margin=2.0, p=p, swap=swap, reduction=reduction
        ),
        numpy_fn,
        lambda torch, a, pos, neg: torch.nn.functional.triplet_margin_loss(
            a, pos, neg, margin=2.0, p=p, swap=swap, reduction=reduction
        ),
        [RNG.standard_normal((n, 4)) for _ in range(3)],
    )


def _triplet_l1_swap(reduction, device, n):
    return _triplet(reduction, device, n, p=1.0, swap=True)


def _gaussian_nll(reduction, device, n):
    def numpy_fn(x, t, var):
        v = np.maximum(var, 1e-6)
        loss = 0.5 * (np.log(v) + (x - t) ** 2 / v) + 0.5 * math.log(2 * math.pi)
        return _reduce(loss, reduction)

    return (
        lambda x, t, var: F.gaussian_nll_loss(x, t, var, full=True, reduction=reduction),
        numpy_fn,
        lambda torch, x, t, var: torch.nn.functional.gaussian_nll_loss(
            x, t, var, full=True, reduction=reduction
        ),
        [RNG.standard_normal((n, 3)), RNG.standard_normal((n, 3)), RNG.uniform(0.2, 2, (n, 3))],
    )


def _poisson_nll(reduction, device, n):
    target = RNG.integers(0, 5, (n, 3)).astype(np.float64)

    def numpy_fn(x):
        stirling = np.where(
            target > 1,
            target * np.log(np.maximum(target, 1))
            - target
            + 0.5 * np.log(2 * np.pi * np.maximum(target, 1)),
            0.0,
        )
        return _reduce(np.exp(x) - target * x + stirling, reduction)

    return (
        lambda x: F.poisson_nll_loss(
            x, kg.tensor(target, device=device), full=True, reduction=reduction
        ),
        numpy_fn,
        lambda torch, x: torch.nn.functional.poisson_nll_loss(
            x, torch.tensor(target), full=True, reduction=reduction
        ),
        [RNG.standard_normal((n, 3))],
    )


def _poisson_nll_rates(reduction, device, n):
    target = RNG.integers(0, 5, (n, 3)).astype(np.float64)
    return (
        lambda x: F.poisson_nll_loss(
            x, kg.tensor(target, device=device), log_input=False, reduction=reduction
        ),
        lambda x: _reduce(x - target * np.log(x + 1e-8), reduction),
        lambda torch, x: torch.nn.functional.poisson_nll_loss(
            x, torch.tensor(target), log_input=False, reduction=reduction
        ),
        [RNG.uniform(0.5, 3.0, (n, 3))],
    )


def _multi_margin(reduction, device, n, p=1):
    classes = 4
    target = RNG.integers(0, classes, n)
    weight = np.array([1.0, 0.5, 2.0, 1.5])

    def numpy_fn(x):
        loss = np.zeros(n)
        for i in range(n):
            for j in range(classes):
                if j != target[i]:
                    loss[i] += max(0.0, 0.8 - x[i, target[i]] + x[i, j]) ** p
        return _reduce(loss * weight[target] / classes, reduction)

    return (
        lambda x: F.multi_margin_loss(
            x,
            kg.tensor(target, device=device),
            p=p,
            margin=0.8,
            weight=kg.tensor(weight, device=device),
            reduction=reduction,
        ),
        numpy_fn,
        lambda torch, x: torch.nn.functional.multi_margin_loss(
            x,
            torch.tensor(target),
            p=p,
            margin=0.8,
            weight=torch.tensor(weight),
            reduction=reduction,
        ),
        [RNG.standard_normal((n, classes))],
    )


def _multi_margin_squared(reduction, device, n):
    return _multi_margin(reduction, device, n, p=2)


LOSS_CASES = {
    "kl_div": _kl_div,
    "kl_div_log_target": _kl_div_log_target,
    "margin_ranking": _margin_ranking,
    "hinge_embedding": _hinge_embedding,
    "soft_margin": _soft_margin,
    "multilabel_soft_margin": _multilabel_soft_margin,
    "cosine_embedding": _cosine_embedding,
    "triplet": _triplet,
    "triplet_l1_swap": _triplet_l1_swap,
    "gaussian_nll": _gaussian_nll,
    "poisson_nll": _poisson_nll,
    "poisson_nll_rates": _poisson_nll_rates,
    "multi_margin": _multi_margin,
    "multi_margin_squared": _multi_margin_squared,
}


@pytest.mark.filterwarnings("ignore:kl_div. reduction 'mean'")
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_matches_references(name, reduction, device, simulated, reference):
    kg_fn, numpy_fn, torch_fn, arrays = LOSS_CASES[name](reduction, device, 2 if simulated else 5)
    compare(reference, kg_fn, numpy_fn, torch_fn, arrays, device, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["margin_ranking", "cosine_embedding", "gaussian_nll"])
def test_loss_gradients_match_central_differences(name, device, simulated):
    kg_fn, _, _, arrays = LOSS_CASES[name]("none", device, 2 if simulated else 4)
    check_grad(kg_fn, *arrays, device=device)


# --- kl_div's own reductions and warning --------------------------------------------------------
def test_kl_div_batchmean_divides_by_the_batch_size(device):
    logp = np.log(RNG.dirichlet(np.ones(3), 4))
    target = RNG.dirichlet(np.ones(3), 4)
    total = F.kl_div(
        kg.tensor(logp, device=device), kg.tensor(target, device=device), reduction="sum"
    )
    batch = F.kl_div(
        kg.tensor(logp, device=device), kg.tensor(target, device=device), reduction="batchmean"
    )
    assert_close(batch, total.item() / 4)
    expected = (target * (np.log(target) - logp)).sum() / 4
    assert_close(batch, expected)


def test_kl_div_mean_warns_as_pytorch_does():
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(kg.zeros(2, 2), kg.full((2, 2), 0.5))


def test_kl_div_of_a_zero_target_is_zero_and_of_a_negative_one_nan(device):
    logp = kg.tensor([-1.0, -2.0, -0.5], device=device, requires_grad=True)
    loss = F.kl_div(logp, kg.tensor([0.0, -0.5, 0.5], device=device), reduction="none")
    values = loss.cpu().tolist()
    assert values[0] == 0.0 and math.isnan(values[1])
    assert values[2] == pytest.approx(0.5 * (math.log(0.5) + 0.5))
    loss[0].backward()
    assert_close(logp.grad, [0.0, 0.0, 0.0])


@pytest.mark.torch
def test_kl_div_batchmean_matches_pytorch():
    torch = pytest.importorskip("torch")
    logp = np.log(RNG.dirichlet(np.ones(5), 3))
    target = RNG.dirichlet(np.ones(5), 3)
    for log_target in (False, True):
        t = np.log(target) if log_target else target
        mine = F.kl_div(kg.tensor(logp), kg.tensor(t), reduction="batchmean", log_target=log_target)
        theirs = torch.nn.functional.kl_div(
            torch.tensor(logp), torch.tensor(t), reduction="batchmean", log_target=log_target
        )
        assert_close(mine, theirs.numpy())


# --- special cases of the other losses ----------------------------------------------------------
def test_unbatched_inputs_give_one_loss(device):
    x1, x2 = kg.tensor([1.0, 0.0], device=device), kg.tensor([1.0, 1.0], device=device)
    cos = F.cosine_embedding_loss(x1, x2, kg.tensor(1, device=device), reduction="none")
    assert cos.shape == ()
    assert_close(cos, 1 - 1 / math.sqrt(2))
    scores = kg.tensor([0.1, 0.2, 0.4, 0.8], device=device)
    loss = F.multi_margin_loss(scores, kg.tensor(3, device=device), reduction="none")
    assert loss.shape == ()
    assert_close(loss, (0.3 + 0.4 + 0.6) / 4)


def test_gaussian_nll_accepts_homoscedastic_and_float_variances(device):
    x = RNG.standard_normal((3, 4))
    t = RNG.standard_normal((3, 4))
    var = RNG.uniform(0.5, 2.0, 3)
    expected = 0.5 * (np.log(var)[:, None] + (x - t) ** 2 / var[:, None])
    X, T = kg.tensor(x, device=device), kg.tensor(t, device=device)
    short = F.gaussian_nll_loss(X, T, kg.tensor(var, device=device), reduction="none")
    single = F.gaussian_nll_loss(X, T, kg.tensor(var[:, None], device=device), reduction="none")
    assert_close(short, expected)
    assert_close(single, expected)
    assert_close(
        F.gaussian_nll_loss(X, T, 2.0, reduction="sum"),
        (0.5 * (np.log(2.0) + (x - t) ** 2 / 2.0)).sum(),
    )


def test_gaussian_nll_with_a_float_var_keeps_finite_terms_finite():
    loss = F.gaussian_nll_loss(kg.tensor([math.inf, 1.0]), kg.zeros(2), 1.0, reduction="none")
    assert loss.tolist() == [math.inf, 0.5]


def test_gaussian_nll_clamps_var_but_keeps_its_gradient():
    var = kg.tensor([0.0, 1.0], requires_grad=True)
    loss = F.gaussian_nll_loss(
        kg.tensor([1.0, 1.0]), kg.tensor([0.0, 0.0]), var, eps=0.5, reduction="sum"
    )
    assert_close(loss, 0.5 * (math.log(0.5) + 1 / 0.5) + 0.5)
    loss.backward()
    # d/dv 0.5 * (log v + d^2 / v) at the clamped value, passed straight through the clamp
    assert_close(var.grad, [0.5 * (1 / 0.5 - 1 / 0.25), 0.0])


def test_soft_margin_loss_does_not_overflow():
    loss = F.soft_margin_loss(kg.tensor([-200.0, 200.0]), kg.tensor([1.0, 1.0]), reduction="none")
    assert_close(loss, [200.0, 0.0])


# --- distances -------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf])
def test_pairwise_distance_matches_references(p, device, reference):
    compare(
        reference,
        lambda a, b: F.pairwise_distance(a, b, p=p),
        lambda a, b: _norm(a - b + 1e-6, p),
        lambda torch, a, b: torch.nn.functional.pairwise_distance(a, b, p=p),
        [RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))],
        device,
    )


def test_pairwise_distance_broadcasts_and_keeps_dims(device):
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal(4)
    got = F.pairwise_distance(
        kg.tensor(a, device=device), kg.tensor(b, device=device), keepdim=True
    )
    assert_close(got, np.linalg.norm(a - b + 1e-6, axis=-1, keepdims=True))


@pytest.mark.parametrize("dim", [1, 0, -1])
def test_cosine_similarity_matches_references(dim, device, reference):
    def numpy_fn(a, b):
        na = np.maximum(np.linalg.norm(a, axis=dim, keepdims=True), 1e-8)
        nb = np.maximum(np.linalg.norm(b, axis=dim, keepdims=True), 1e-8)
        return ((a / na) * (b / nb)).sum(dim)

    compare(
        reference,
        lambda a, b: F.cosine_similarity(a, b, dim=dim),
        numpy_fn,
        lambda torch, a, b: torch.nn.functional.cosine_similarity(a, b, dim=dim),
        [RNG.standard_normal((3, 4, 2)), RNG.standard_normal((3, 4, 2))],
        device,
    )


@pytest.mark.torch
def test_cosine_similarity_of_a_zero_vector_matches_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    b = np.array([[1.0, 1.0, 1.0], [1e-9, 0.0, 0.0]])
    mine = [kg.tensor(v, requires_grad=True) for v in (a, b)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (a, b)]
    F.cosine_similarity(*mine).sum().backward()
    torch.nn.functional.cosine_similarity(*theirs).sum().backward()
    assert_close(
        F.cosine_similarity(*mine).detach(),
        torch.nn.functional.cosine_similarity(*theirs).detach().numpy(),
    )
    for m, t in zip(mine, theirs):
        assert_close(m.grad, t.grad.numpy(), atol=1e-5)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
def test_pdist_matches_references(p, device, reference):
    def numpy_fn(x):
        i, j = np.triu_indices(x.shape[0], 1)
        return _norm(x[i] - x[j], p)

    compare(
        reference,
        lambda x: F.pdist(x, p),
        numpy_fn,
        lambda torch, x: torch.nn.functional.pdist(x, p),
        [RNG.standard_normal((4, 3))],
        device,
    )


def test_pdist_of_equal_rows_has_a_zero_gradient():
    x = kg.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 0.0]], requires_grad=True)
    d = F.pdist(x)
    assert_close(d, [0.0, math.sqrt(5), math.sqrt(5)])
    d.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    g = np.array([1.0, 2.0]) / math.sqrt(5)
    assert_close(x.grad, [g, g, -2 * g])


def test_pdist_of_one_row_is_empty():
    assert F.pdist(kg.ones(1, 3)).shape == (0,)


# --- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda: F.kl_div(kg.zeros(2), kg.zeros(2), reduction="average"),
        lambda: F.margin_ranking_loss(kg.zeros(2), kg.zeros(2), kg.ones(2), reduction="avg"),
        lambda: F.hinge_embedding_loss(kg.zeros(2), kg.ones(2), reduction="max"),
        lambda: F.soft_margin_loss(kg.zeros(2), kg.ones(2), reduction="batchmean"),
        lambda: F.multilabel_soft_margin_loss(kg.zeros(1, 2), kg.ones(1, 2), reduction="x"),
        lambda: F.cosine_embedding_loss(kg.ones(1, 2), kg.ones(1, 2), kg.ones(1), reduction="x"),
        lambda: F.triplet_margin_loss(kg.ones(1, 2), kg.ones(1, 2), kg.ones(1, 2), reduction="x"),
        lambda: F.gaussian_nll_loss(kg.ones(2), kg.ones(2), kg.ones(2), reduction="x"),
        lambda: F.poisson_nll_loss(kg.ones(2), kg.ones(2), reduction="x"),
        lambda: F.multi_margin_loss(kg.ones(1, 2), kg.tensor([0]), reduction="x"),
    ],
)
def test_a_bad_reduction_is_an_argument_error(call):
    with pytest.raises(ArgumentError, match="reduction must be"):
        call()


def test_loss_shape_and_argument_errors():
    with pytest.raises(ShapeError, match="same number of dimensions"):
        F.margin_ranking_loss(kg.zeros(2), kg.zeros(2), kg.ones(1, 2))
    with pytest.raises(ShapeError, match="target of shape"):
        F.cosine_embedding_loss(kg.ones(2, 3), kg.ones(2, 3), kg.ones(2, 1))
    with pytest.raises(ShapeError, match="same number of dimensions"):
        F.triplet_margin_loss(kg.ones(2, 3), kg.ones(2, 3), kg.ones(3))
    with pytest.raises(ArgumentError, match="margin must be greater than 0"):
        F.triplet_margin_loss(kg.ones(2, 3), kg.ones(2, 3), kg.ones(2, 3), margin=0.0)
    with pytest.raises(ShapeError, match="var of shape"):
        F.gaussian_nll_loss(kg.ones(2, 3), kg.ones(2, 3), kg.ones(3, 2))
    with pytest.raises(ArgumentError, match="negative"):
        F.gaussian_nll_loss(kg.ones(2), kg.ones(2), kg.tensor([1.0, -1.0]))
    with pytest.raises(ArgumentError, match="non-negative"):
        F.gaussian_nll_loss(kg.ones(2), kg.ones(2), -1.0)
    with pytest.raises(ArgumentError, match="p == 1 and p == 2"):
        F.multi_margin_loss(kg.ones(2, 3), kg.tensor([0, 1]), p=3)
    with pytest.raises(IndexingError, match="out of range"):
        F.multi_margin_loss(kg.ones(2, 3), kg.tensor([0, 3]))
    with pytest.raises(ShapeError, match="class indices"):
        F.multi_margin_loss(kg.ones(2, 3), kg.tensor([0, 1, 2]))
    with pytest.raises(ShapeError, match="weight must have shape"):
        F.multi_margin_loss(kg.ones(2, 3), kg.tensor([0, 1]), weight=kg.ones(2))
    with pytest.raises(ShapeError, match="at least one dimension"):
        F.pairwise_distance(kg.tensor(1.0), kg.tensor(2.0))
    with pytest.raises(ShapeError, match=r"\(N, M\)"):
        F.pdist(kg.ones(3))
    with pytest.raises(ShapeError, match="do not broadcast"):
        F.cosine_similarity(kg.ones(2, 3), kg.ones(2, 4))


@pytest.mark.torch
def test_loss_errors_are_pytorchs_exception_types():
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    pairs = [
        (lambda: F.multi_margin_loss(kg.ones(2, 3), kg.tensor([0, 1]), p=3),
         lambda: TF.multi_margin_loss(torch.ones(2, 3), torch.tensor([0, 1]), p=3)),
        (lambda: F.gaussian_nll_loss(kg.ones(2, 3), kg.ones(2, 3), kg.ones(3, 2)),
         lambda: TF.gaussian_nll_loss(torch.ones(2, 3), torch.ones(2, 3), torch.ones(3, 2))),
        (lambda: F.kl_div(kg.zeros(2), kg.zeros(2), reduction="average"),
         lambda: TF.kl_div(torch.zeros(2), torch.zeros(2), reduction="average")),
        (lambda: F.margin_ranking_loss(kg.zeros(2), kg.zeros(2), kg.ones(1, 2)),
         lambda: TF.margin_ranking_loss(torch.zeros(2), torch.zeros(2), torch.ones(1, 2))),
    ]  # fmt: skip
    for mine, theirs in pairs:
        with pytest.raises(Exception) as expected:
            theirs()
        with pytest.raises(type(expected.value)):
            mine()


# --- modules ---------------------------------------------------------------------------------
def test_loss_modules_call_their_functions(device):
    x = kg.tensor(RNG.standard_normal((3, 4)), device=device)
    y = kg.tensor(RNG.standard_normal((3, 4)), device=device)
    signs = kg.tensor(_signs(3), device=device)
    labels = kg.tensor([0, 3, 1], device=device)
    nn = kg.nn
    pairs = [
        (nn.KLDivLoss(reduction="batchmean", log_target=True)(x, y),
         F.kl_div(x, y, reduction="batchmean", log_target=True)),
        (nn.CosineEmbeddingLoss(0.1, reduction="sum")(x, y, signs),
         F.cosine_embedding_loss(x, y, signs, 0.1, reduction="sum")),
        (nn.MarginRankingLoss(0.5)(x[:, 0], y[:, 0], signs),
         F.margin_ranking_loss(x[:, 0], y[:, 0], signs, 0.5)),
        (nn.HingeEmbeddingLoss(2.0)(x[:, 0], signs), F.hinge_embedding_loss(x[:, 0], signs, 2.0)),
        (nn.TripletMarginLoss(1.5, p=1, swap=True)(x, y, -x),
         F.triplet_margin_loss(x, y, -x, 1.5, p=1, swap=True)),
        (nn.SoftMarginLoss(reduction="none")(x, y.sign()),
         F.soft_margin_loss(x, y.sign(), reduction="none")),
        (nn.MultiLabelSoftMarginLoss()(x, (y > 0).float()),
         F.multilabel_soft_margin_loss(x, (y > 0).float())),
        (nn.MultiMarginLoss(p=2, margin=0.5)(x, labels),
         F.multi_margin_loss(x, labels, p=2, margin=0.5)),
        (nn.GaussianNLLLoss(full=True)(x, y, y.abs()), F.gaussian_nll_loss(x, y, y.abs(), True)),
        (nn.PoissonNLLLoss(log_input=False)(x.abs(), y.abs()),
         F.poisson_nll_loss(x.abs(), y.abs(), log_input=False)),
        (nn.CosineSimilarity(dim=0)(x, y), F.cosine_similarity(x, y, 0)),
        (nn.PairwiseDistance(p=1.0, keepdim=True)(x, y),
         F.pairwise_distance(x, y, 1.0, keepdim=True)),
    ]  # fmt: skip
    for module_value, function_value in pairs:
        assert_close(module_value, function_value.cpu().numpy())


def test_module_constructors_check_their_arguments():
    with pytest.raises(ArgumentError, match="margin must be greater than 0"):
        kg.nn.TripletMarginLoss(margin=-1.0)
    with pytest.raises(ArgumentError, match="p == 1 and p == 2"):
        kg.nn.MultiMarginLoss(p=3)
    assert "margin=0.5" in repr(kg.nn.MarginRankingLoss(0.5))
    assert kg.nn.CosineSimilarity(0).dim == 0
    assert repr(kg.nn.CosineSimilarity(0)) == "CosineSimilarity()"  # as PyTorch prints it


@pytest.mark.torch
def test_loss_modules_match_pytorch_modules():
    torch = pytest.importorskip("torch")
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    var = RNG.uniform(0.5, 1.5, (3, 1))
    cases = [
        ("GaussianNLLLoss", {"eps": 1e-3}, (x, y, var)),
        ("PoissonNLLLoss", {"full": True}, (x, np.abs(y) * 3)),
        ("TripletMarginLoss", {"margin": 0.5, "p": 3}, (x, y, -y)),
        ("PairwiseDistance", {"p": 1.5}, (x, y)),
        ("CosineSimilarity", {"dim": 1, "eps": 1e-6}, (x, y)),
    ]
    for name, options, arrays in cases:
        mine = getattr(kg.nn, name)(**options)(*[kg.tensor(a) for a in arrays])
        theirs = getattr(torch.nn, name)(**options)(*[torch.tensor(a) for a in arrays])
        assert_close(mine, theirs.numpy())


def test_new_names_through_the_torch_alias():
    with aliased():
        import torch
        import torch.nn.functional as TF

        assert torch.nn.KLDivLoss is kg.nn.KLDivLoss and TF.kl_div is F.kl_div
        assert (
            torch.nn.MaxPool3d is kg.nn.MaxPool3d
            and TF.adaptive_max_pool2d is F.adaptive_max_pool2d
        )


# --- pooling ---------------------------------------------------------------------------------
def _out_size(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_reference(x, kernel, stride, padding, dilation=None, ceil_mode=False, mode="max",
                    count_include_pad=True, divisor_override=None):  # fmt: skip
    """N-d max or average pooling by its definition, one output cell at a time: the taps
    o * s - p + t * d inside the input (max), or the window clipped to the input, divided
    by PyTorch's count (average)."""
    size = x.shape[2:]
    nd = len(size)
    dilation = dilation or (1,) * nd
    outs = [_out_size(*args, ceil_mode) for args in zip(size, kernel, stride, padding, dilation)]
    result = np.zeros(x.shape[:2] + tuple(outs))
    for cell in np.ndindex(*outs):
        if mode == "max":
            taps = [
                [o * s - p + t * d for t in range(k) if 0 <= o * s - p + t * d < n]
                for o, s, p, d, k, n in zip(cell, stride, padding, dilation, kernel, size)
            ]
            region = x[np.ix_(range(x.shape[0]), range(x.shape[1]), *taps)]
            result[(...,) + cell] = region.reshape(x.shape[:2] + (-1,)).max(-1)
            continue
        starts = [o * s - p for o, s, p in zip(cell, stride, padding)]
        ends = [min(b + k, n + p) for b, k, n, p in zip(starts, kernel, size, padding)]
        pool_size = np.prod([e - b for b, e in zip(starts, ends)])
        clipped = [slice(max(b, 0), min(e, n)) for b, e, n in zip(starts, ends, size)]
        region = x[(slice(None), slice(None)) + tuple(clipped)]
        count = np.prod([c.stop - c.start for c in clipped])
        divisor = divisor_override or (pool_size if count_include_pad else count)
        result[(...,) + cell] = region.reshape(x.shape[:2] + (-1,)).sum(-1) / divisor
    return result


def _adaptive_reference(x, outs, mode):
    size = x.shape[2:]
    outs = [n if o is None else o for o, n in zip(outs, size)]
    result = np.zeros(x.shape[:2] + tuple(outs))
    for cell in np.ndindex(*outs):
        window = tuple(
            slice((i * n) // o, -(-((i + 1) * n) // o)) for i, o, n in zip(cell, outs, size)
        )
        region = x[(slice(None), slice(None)) + window].reshape(x.shape[:2] + (-1,))
        result[(...,) + cell] = region.max(-1) if mode == "max" else region.mean(-1)
    return result


def _triples(options):
    out = {}
    for key in ("kernel_size", "stride", "padding", "dilation"):
        value = options.get(key)
        if value is not None:
            out[key] = value if isinstance(value, tuple) else (value,) * 3
    out.setdefault("stride", out["kernel_size"])
    out.setdefault("padding", (0, 0, 0))
    return out


MAX3D_CASES = [
    {"kernel_size": 2},
    {"kernel_size": (2, 3, 2), "stride": (1, 2, 1), "padding": (1, 1, 0)},
    {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": (2, 1, 1), "ceil_mode": True},
    {"kernel_size": (3, 2, 2), "stride": 2, "ceil_mode": True},
]


@pytest.mark.parametrize("options", MAX3D_CASES)
def test_max_pool3d_matches_references(options, device, simulated, reference):
    shape = (1, 1, 4, 3, 3) if simulated else (1, 2, 5, 6, 4)
    t = _triples(options)
    compare(
        reference,
        lambda x: F.max_pool3d(x, **options),
        lambda x: _pool_reference(
            x,
            t["kernel_size"],
            t["stride"],
            t["padding"],
            t.get("dilation"),
            options.get("ceil_mode", False),
        ),
        lambda torch, x: torch.nn.functional.max_pool3d(x, **options),
        [RNG.standard_normal(shape)],
        device,
    )


AVG3D_CASES = [
    {"kernel_size": 2},
    {"kernel_size": (2, 3, 2), "stride": (1, 2, 1), "padding": (1, 1, 0)},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (3, 2, 2), "stride": 2, "divisor_override": 5},
]


@pytest.mark.parametrize("options", AVG3D_CASES)
def test_avg_pool3d_matches_references(options, device, simulated, reference):
    shape = (1, 1, 4, 3, 3) if simulated else (1, 2, 5, 6, 4)
    t = _triples(options)
    compare(
        reference,
        lambda x: F.avg_pool3d(x, **options),
        lambda x: _pool_reference(
            x,
            t["kernel_size"],
            t["stride"],
            t["padding"],
            None,
            options.get("ceil_mode", False),
            "avg",
            options.get("count_include_pad", True),
            options.get("divisor_override"),
        ),
        lambda torch, x: torch.nn.functional.avg_pool3d(x, **options),
        [RNG.standard_normal(shape)],
        device,
    )


def test_max_pool3d_sends_a_tied_gradient_to_the_first_maximum(device):
    x = kg.ones(1, 1, 2, 2, 2, device=device, requires_grad=True)
    F.max_pool3d(x, 2).sum().backward()
    expected = np.zeros((1, 1, 2, 2, 2))
    expected[0, 0, 0, 0, 0] = 1.0
    assert_close(x.grad, expected)


def test_unbatched_3d_pooling(device):
    x = RNG.standard_normal((2, 4, 4, 4))
    got = F.max_pool3d(kg.tensor(x, device=device), 2)
    assert_close(got, _pool_reference(x[None], (2,) * 3, (2,) * 3, (0,) * 3)[0])
    got = F.avg_pool3d(kg.tensor(x, device=device), 2)
    assert_close(got, _pool_reference(x[None], (2,) * 3, (2,) * 3, (0,) * 3, mode="avg")[0])


ADAPTIVE_CASES = [
    ("adaptive_avg_pool1d", (2, 3, 7), 3),
    ("adaptive_avg_pool1d", (3, 5), 5),
    ("adaptive_avg_pool3d", (1, 2, 5, 4, 6), (2, 3, 4)),
    ("adaptive_avg_pool3d", (1, 2, 5, 4, 6), (None, 1, 4)),
    ("adaptive_max_pool1d", (2, 3, 7), 3),
    ("adaptive_max_pool2d", (2, 3, 7, 5), (3, 2)),
    ("adaptive_max_pool2d", (2, 3, 6, 4), 2),  # even tiles: max_pool2d
    ("adaptive_max_pool2d", (3, 5, 5), (None, 3)),
    ("adaptive_max_pool3d", (1, 2, 5, 4, 6), (2, 3, 4)),
]


@pytest.mark.parametrize(("name", "shape", "output_size"), ADAPTIVE_CASES)
def test_adaptive_pooling_matches_references(name, shape, output_size, device, reference):
    nd = int(name[-2])
    unbatched = len(shape) == nd + 1
    outs = output_size if isinstance(output_size, tuple) else (output_size,) * nd
    mode = "max" if "max" in name else "avg"

    def numpy_fn(x):
        batched = x[None] if unbatched else x
        result = _adaptive_reference(batched, outs, mode)
        return result[0] if unbatched else result

    compare(
        reference,
        lambda x: getattr(F, name)(x, output_size),
        numpy_fn,
        lambda torch, x: getattr(torch.nn.functional, name)(x, output_size),
        [RNG.standard_normal(shape)],
        device,
    )


def test_adaptive_pooling_on_the_device(device, simulated):
    x = RNG.standard_normal((1, 1, 3, 4, 5) if simulated else (2, 2, 5, 6, 7))
    for name, mode in (("adaptive_avg_pool3d", "avg"), ("adaptive_max_pool3d", "max")):
        got = getattr(F, name)(kg.tensor(x, device=device), (2, 3, 2))
        assert_close(got, _adaptive_reference(x, (2, 3, 2), mode))


def test_adaptive_max_pool2d_sends_a_tied_gradient_to_the_first_maximum_row_major():
    # uneven windows (3 -> 2 overlap); every value ties
    x = kg.ones(1, 1, 3, 3, requires_grad=True)
    F.adaptive_max_pool2d(x, 2).sum().backward()
    assert_close(x.grad, np.array([[[[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]]]))


@pytest.mark.parametrize(
    ("name", "shape", "norm_type", "kernel", "stride", "ceil_mode"),
    [
        ("lp_pool1d", (2, 3, 7), 2.0, 3, None, False),
        ("lp_pool1d", (2, 3, 7), 3.0, 2, 1, True),
        ("lp_pool2d", (2, 2, 5, 6), 2.0, (2, 3), None, False),
        ("lp_pool2d", (2, 5, 6), 1.5, 2, (1, 2), True),
        ("lp_pool3d", (1, 2, 4, 5, 4), 2.0, 2, None, False),
    ],
)
def test_lp_pooling_matches_references(
    name, shape, norm_type, kernel, stride, ceil_mode, device, reference
):
    nd = int(name[-2])
    unbatched = len(shape) == nd + 1
    ks = kernel if isinstance(kernel, tuple) else (kernel,) * nd
    ss = ks if stride is None else (stride if isinstance(stride, tuple) else (stride,) * nd)

    def numpy_fn(x):
        batched = x[None] if unbatched else x
        mean = _pool_reference(batched**norm_type, ks, ss, (0,) * nd, None, ceil_mode, "avg")
        result = (mean * np.prod(ks)) ** (1.0 / norm_type)
        return result[0] if unbatched else result

    compare(
        reference,
        lambda x: getattr(F, name)(x, norm_type, kernel, stride, ceil_mode),
        numpy_fn,
        lambda torch, x: getattr(torch.nn.functional, name)(
            x, norm_type, kernel, stride, ceil_mode
        ),
        [RNG.uniform(0.2, 2.0, shape)],  # positive: x ** p is defined for any p
        device,
    )


def test_pooling_modules_call_their_functions():
    x3 = kg.tensor(RNG.standard_normal((2, 2, 5, 6, 4)))
    x2 = kg.tensor(RNG.standard_normal((2, 2, 7, 5)))
    x1 = kg.tensor(RNG.standard_normal((2, 2, 7)))
    nn = kg.nn
    pairs = [
        (nn.MaxPool3d(2, 1, 1, ceil_mode=True)(x3), F.max_pool3d(x3, 2, 1, 1, ceil_mode=True)),
        (nn.AvgPool3d((2, 3, 2), count_include_pad=False, padding=1)(x3),
         F.avg_pool3d(x3, (2, 3, 2), padding=1, count_include_pad=False)),
        (nn.AdaptiveAvgPool1d(3)(x1), F.adaptive_avg_pool1d(x1, 3)),
        (nn.AdaptiveAvgPool3d((2, None, 3))(x3), F.adaptive_avg_pool3d(x3, (2, None, 3))),
        (nn.AdaptiveMaxPool1d(4)(x1), F.adaptive_max_pool1d(x1, 4)),
        (nn.AdaptiveMaxPool2d((3, 2))(x2), F.adaptive_max_pool2d(x2, (3, 2))),
        (nn.AdaptiveMaxPool3d(2)(x3), F.adaptive_max_pool3d(x3, 2)),
        (nn.LPPool1d(2, 3)(x1), F.lp_pool1d(x1, 2, 3)),
        (nn.LPPool2d(2, 2, 1)(x2), F.lp_pool2d(x2, 2, 2, 1)),
        (nn.LPPool3d(1, 2)(x3), F.lp_pool3d(x3, 1, 2)),
    ]  # fmt: skip
    for module_value, function_value in pairs:
        assert_close(module_value, function_value.numpy())
    assert "kernel_size=2" in repr(nn.MaxPool3d(2))
    assert "output_size=(3, 2)" in repr(nn.AdaptiveMaxPool2d((3, 2)))
    assert "norm_type=2" in repr(nn.LPPool2d(2, 3))


@pytest.mark.torch
def test_pooling_modules_match_pytorch_modules():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 3, 6, 5, 7))
    cases = [
        ("MaxPool3d", ((3, 2, 2),), {"stride": 2, "padding": 1}),
        ("AvgPool3d", (3,), {"stride": (1, 2, 2), "ceil_mode": True}),
        ("AdaptiveAvgPool3d", ((4, 3, 5),), {}),
        ("AdaptiveMaxPool3d", ((4, None, 5),), {}),
    ]
    for name, args, options in cases:
        mine = getattr(kg.nn, name)(*args, **options)(kg.tensor(x))
        theirs = getattr(torch.nn, name)(*args, **options)(torch.tensor(x))
        assert_close(mine, theirs.numpy())


def test_pooling_errors():
    x3 = kg.ones(1, 1, 4, 4, 4)
    # return_indices is supported now (tests/nn/test_max_unpool.py checks the indices)
    assert [t.shape for t in F.max_pool3d(x3, 2, return_indices=True)] == [(1, 1, 2, 2, 2)] * 2
    with pytest.raises(ArgumentError, match="at most half the kernel size"):
        F.max_pool3d(x3, 2, padding=(0, 2, 0))
    with pytest.raises(ShapeError, match="does not fit"):
        F.avg_pool3d(x3, (5, 1, 1))
    with pytest.raises(ShapeError, match="5-d"):
        F.max_pool3d(kg.ones(4, 4, 4), 2)
    with pytest.raises(ArgumentError, match="output size must be positive"):
        F.adaptive_avg_pool3d(x3, (0, 1, 1))
    with pytest.raises(ArgumentError, match="3 ints"):
        F.adaptive_max_pool3d(x3, (2, 2))
    with pytest.raises(ArgumentError, match="norm_type must be non-zero"):
        F.lp_pool2d(kg.ones(1, 1, 4, 4), 0, 2)
    with pytest.raises(ArgumentError, match="divisor_override"):
        F.avg_pool3d(x3, 2, divisor_override=0)


# --- unfold and fold -------------------------------------------------------------------------
def _unfold_reference(x, kernel, dilation, padding, stride):
    """im2col by its definition: row (c, i, j) of column (a, b) is the padded input at
    (a * s + i * d, b * s + j * d)."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel, dilation, padding, stride
    xp = np.pad(x, [(0, 0), (0, 0), (ph, ph), (pw, pw)])
    n, c, h, w = xp.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    cols = np.zeros((n, c, kh, kw, oh, ow))
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i * dh : i * dh + (oh - 1) * sh + 1 : sh,
                                  j * dw : j * dw + (ow - 1) * sw + 1 : sw]  # fmt: skip
    return cols.reshape(n, c * kh * kw, oh * ow)


def _fold_reference(cols, size, kernel, dilation, padding, stride):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel, dilation, padding, stride
    n = cols.shape[0]
    c = cols.shape[1] // (kh * kw)
    hp, wp = size[0] + 2 * ph, size[1] + 2 * pw
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    blocks = cols.reshape(n, c, kh, kw, oh, ow)
    image = np.zeros((n, c, hp, wp))
    for i in range(kh):
        for j in range(kw):
            for a in range(oh):
                for b in range(ow):
                    image[:, :, a * sh + i * dh, b * sw + j * dw] += blocks[:, :, i, j, a, b]
    return image[:, :, ph : ph + size[0], pw : pw + size[1]]


FOLD_CASES = [
    ((2, 2), (1, 1), (0, 0), (1, 1)),
    ((2, 3), (1, 2), (1, 0), (2, 1)),
    ((3, 3), (1, 1), (1, 1), (2, 2)),
]


@pytest.mark.parametrize(("kernel", "dilation", "padding", "stride"), FOLD_CASES)
def test_unfold_matches_references(kernel, dilation, padding, stride, device, reference):
    options = {"dilation": dilation, "padding": padding, "stride": stride}
    compare(
        reference,
        lambda x: F.unfold(x, kernel, **options),
        lambda x: _unfold_reference(x, kernel, dilation, padding, stride),
        lambda torch, x: torch.nn.functional.unfold(x, kernel, **options),
        [RNG.standard_normal((2, 2, 5, 6))],
        device,
    )


@pytest.mark.parametrize(("kernel", "dilation", "padding", "stride"), FOLD_CASES)
def test_fold_matches_references(kernel, dilation, padding, stride, device, reference):
    size = (5, 6)
    options = {"dilation": dilation, "padding": padding, "stride": stride}
    blocks = _unfold_reference(np.zeros((1, 2, *size)), kernel, dilation, padding, stride).shape
    compare(
        reference,
        lambda x: F.fold(x, size, kernel, **options),
        lambda x: _fold_reference(x, size, kernel, dilation, padding, stride),
        lambda torch, x: torch.nn.functional.fold(x, size, kernel, **options),
        [RNG.standard_normal((2, blocks[1], blocks[2]))],
        device,
    )


def test_unfold_and_fold_of_unbatched_input_and_their_modules(device):
    x = RNG.standard_normal((3, 4, 4))
    cols = kg.nn.Unfold(2, padding=1)(kg.tensor(x, device=device))
    assert_close(cols, _unfold_reference(x[None], (2, 2), (1, 1), (1, 1), (1, 1))[0])
    image = kg.nn.Fold((4, 4), 2, padding=1)(cols)
    expected = _fold_reference(as_numpy(cols)[None], (4, 4), (2, 2), (1, 1), (1, 1), (1, 1))[0]
    assert_close(image, expected)
    assert "kernel_size=2" in repr(kg.nn.Unfold(2))


def test_fold_gradient_of_the_gradient():
    cols = kg.tensor(RNG.standard_normal((1, 4, 4)), requires_grad=True)
    image = F.fold(cols, (3, 3), 2)
    (image * image).sum().backward(create_graph=True)
    grad = cols.grad
    cols.grad = None
    grad.sum().backward()
    # d/dcols sum(2 * unfold(fold(cols))) = 2 * unfold(fold(ones))
    ones = np.ones((1, 4, 4))
    unit = ((1, 1), (0, 0), (1, 1))
    expected = 2 * _unfold_reference(_fold_reference(ones, (3, 3), (2, 2), *unit), (2, 2), *unit)
    assert_close(cols.grad, expected)


def test_unfold_and_fold_errors():
    with pytest.raises(ShapeError, match="4-d"):
        F.unfold(kg.ones(4, 4), 2)
    with pytest.raises(ShapeError, match="does not fit"):
        F.unfold(kg.ones(1, 1, 2, 2), 3)
    with pytest.raises(ShapeError, match="not a multiple"):
        F.fold(kg.ones(1, 5, 4), (3, 3), 2)
    with pytest.raises(ShapeError, match="has 4 blocks"):
        F.fold(kg.ones(1, 4, 5), (3, 3), 2)
    with pytest.raises(ArgumentError, match="must be positive"):
        F.unfold(kg.ones(1, 1, 4, 4), 2, stride=0)


# --- Gumbel-softmax and in-place activations --------------------------------------------------
def test_gumbel_softmax_samples_the_softmax_distribution(device, simulated):
    kg.manual_seed(3)
    logits = np.array([0.0, 1.0, 2.0])
    rows = 200 if simulated else 20000
    sample = F.gumbel_softmax(kg.tensor(np.tile(logits, (rows, 1)), device=device), hard=True)
    frequencies = as_numpy(sample).mean(0)
    assert (as_numpy(sample).sum(1) == 1).all() and set(np.unique(as_numpy(sample))) <= {0, 1}
    tolerance = 0.1 if simulated else 0.02
    np.testing.assert_allclose(frequencies, np.exp(logits) / np.exp(logits).sum(), atol=tolerance)


def test_gumbel_softmax_soft_rows_are_distributions_and_hard_has_their_gradient():
    logits = kg.tensor(RNG.standard_normal((4, 5)), requires_grad=True)
    kg.manual_seed(11)
    soft = F.gumbel_softmax(logits, tau=0.5, dim=0)
    assert_close(soft.sum(0), np.ones(5))
    weights = kg.tensor(RNG.standard_normal((4, 5)))
    (soft * weights).sum().backward()
    soft_grad = as_numpy(logits.grad).copy()
    logits.grad = None
    kg.manual_seed(11)  # the same noise
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True, dim=0)
    assert_close(hard, (as_numpy(soft) == as_numpy(soft).max(0)).astype(np.float64))
    (hard * weights).sum().backward()
    assert_close(logits.grad, soft_grad)
    with pytest.raises(ArgumentError, match="tau must be positive"):
        F.gumbel_softmax(logits, tau=0.0)


@pytest.mark.parametrize(
    ("name", "args", "numpy_fn"),
    [
        ("relu_", (), lambda x: np.maximum(x, 0)),
        ("elu_", (0.5,), lambda x: np.where(x > 0, x, 0.5 * np.expm1(np.minimum(x, 0)))),
        ("leaky_relu_", (0.2,), lambda x: np.where(x > 0, x, 0.2 * x)),
        ("hardtanh_", (-0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7)),
        ("threshold_", (0.3, -2.0), lambda x: np.where(x > 0.3, x, -2.0)),
    ],
)
def test_inplace_activations_write_into_the_input(name, args, numpy_fn, device):
    x = RNG.standard_normal((3, 4))
    leaf = kg.tensor(x, device=device, requires_grad=True)
    work = leaf * 1.0
    out = getattr(F, name)(work, *args)
    assert out is work
    assert_close(work, numpy_fn(x))
    out.sum().backward()
    eps = 1e-6
    assert_close(leaf.grad, (numpy_fn(x + eps) - numpy_fn(x - eps)) / (2 * eps), atol=1e-5)


def test_inplace_activation_of_a_leaf_that_requires_grad_is_refused():
    with pytest.raises(RuntimeError, match="in place"):
        F.elu_(kg.ones(2, requires_grad=True))
