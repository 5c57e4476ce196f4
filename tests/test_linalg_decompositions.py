"""kg.linalg's factorizations, solvers and composed functions, and the legacy top-level
names: values and gradients against PyTorch (float64, batched, well-conditioned random
matrices), finite-difference checks (first and second order), and the LinAlgError
messages for singular and not positive-definite matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg

torch = pytest.importorskip("torch")
# the references call torch's deprecated legacy functions (triangular_solve, chain_matmul)
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated:UserWarning")

RNG = np.random.default_rng(7)
SQUARE = RNG.standard_normal((2, 4, 4)) + 4 * np.eye(4)  # well-conditioned, batched
SPD = SQUARE @ SQUARE.transpose(0, 2, 1) + np.eye(4)
TALL = RNG.standard_normal((2, 5, 3))
WIDE = RNG.standard_normal((2, 3, 5))
RHS = RNG.standard_normal((2, 4, 3))
# eigenvalues well apart, so that eigh's gradient is well conditioned
_Q = np.linalg.qr(RNG.standard_normal((2, 4, 4)))[0]
SYMMETRIC = (_Q * np.array([-2.0, 0.5, 1.5, 3.0])) @ _Q.transpose(0, 2, 1)


def _k(a, requires_grad=False):
    return kg.tensor(a, requires_grad=requires_grad)


def _t(a, requires_grad=False):
    return torch.tensor(a, requires_grad=requires_grad)


def _weights(outputs):
    """Fixed random weights, one array per output, for a loss sum(w * output)."""
    rng = np.random.default_rng(1)
    return [rng.standard_normal(tuple(o.shape)) for o in outputs]


def _compare(kg_fn, torch_fn, arrays, rtol=1e-7, atol=1e-9, grad=True):
    """Values of every output and gradients of sum(w * output) for every input."""
    k_inputs = [_k(a, grad) for a in arrays]
    t_inputs = [_t(a, grad) for a in arrays]
    ours = kg_fn(*k_inputs)
    theirs = torch_fn(*t_inputs)
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        assert tuple(o.shape) == tuple(t.shape)
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)
    if not grad:
        return
    weights = _weights(theirs)
    differentiable = [i for i, t in enumerate(theirs) if t.requires_grad]
    assert differentiable
    sum((ours[i] * kg.tensor(weights[i])).sum() for i in differentiable).backward()
    sum((theirs[i] * torch.tensor(weights[i])).sum() for i in differentiable).backward()
    for k_in, t_in in zip(k_inputs, t_inputs):
        np.testing.assert_allclose(k_in.grad.numpy(), t_in.grad.numpy(), rtol=1e-6, atol=1e-8)


def _eigh_invariant(module):
    """eigh's outputs through sign-invariant functions (eigenvectors' signs are free)."""

    def f(a):
        values, vectors = module.linalg.eigh(a)
        return values, vectors * vectors, vectors[..., :1] @ vectors[..., :1].mT

    return f


def _svd_invariant(module, full):
    def f(a):
        U, S, Vh = module.linalg.svd(a, full_matrices=full)
        k = S.shape[-1]
        U, Vh = U[..., :k], Vh[..., :k, :]
        return S, U * U, Vh * Vh, (U[..., :1] * S[..., :1, None].mT) @ Vh[..., :1, :]

    return f


CASES = {
    "inv": (lambda m: m.linalg.inv, [SQUARE]),
    "det": (lambda m: m.linalg.det, [SQUARE]),
    "slogdet": (lambda m: m.linalg.slogdet, [SQUARE * np.array([1, -1])[:, None, None]]),
    "solve": (lambda m: m.linalg.solve, [SQUARE, RHS]),
    "solve_vector": (lambda m: m.linalg.solve, [SQUARE, RHS[..., 0]]),
    "solve_broadcast": (lambda m: m.linalg.solve, [SQUARE[0], RHS]),
    "solve_right": (
        lambda m: lambda a, b: m.linalg.solve(a, b, left=False),
        [SQUARE, RHS.transpose(0, 2, 1)],
    ),
    "cholesky": (lambda m: m.linalg.cholesky, [SPD]),
    "cholesky_upper": (lambda m: lambda a: m.linalg.cholesky(a, upper=True), [SPD]),
    "solve_triangular_upper": (
        lambda m: lambda a, b: m.linalg.solve_triangular(a, b, upper=True),
        [SQUARE, RHS],
    ),
    "solve_triangular_lower_right_unit": (
        lambda m: (
            lambda a, b: m.linalg.solve_triangular(
                a, b, upper=False, left=False, unitriangular=True
            )
        ),
        [SQUARE, RHS.transpose(0, 2, 1)],
    ),
    "qr_tall": (lambda m: m.linalg.qr, [TALL]),
    "qr_wide": (lambda m: m.linalg.qr, [WIDE]),
    "qr_square_complete": (lambda m: lambda a: m.linalg.qr(a, "complete"), [SQUARE]),
    "eigh": (_eigh_invariant, [SYMMETRIC]),
    "eigvalsh_upper": (lambda m: lambda a: m.linalg.eigvalsh(a, UPLO="U"), [SYMMETRIC]),
    "svd_tall": (lambda m: _svd_invariant(m, False), [TALL]),
    "svd_wide_full": (lambda m: _svd_invariant(m, True), [WIDE]),
    "svdvals": (lambda m: m.linalg.svdvals, [TALL]),
    "pinv_tall": (lambda m: m.linalg.pinv, [TALL]),
    "pinv_wide": (lambda m: m.linalg.pinv, [WIDE]),
    "pinv_hermitian": (lambda m: lambda a: m.linalg.pinv(a, hermitian=True), [SPD]),
    "lstsq": (lambda m: lambda a, b: m.linalg.lstsq(a, b).solution, [TALL, TALL[..., :2]]),
    "matrix_power": (lambda m: lambda a: m.linalg.matrix_power(a, 5), [SQUARE / 4]),
    "matrix_power_negative": (lambda m: lambda a: m.linalg.matrix_power(a, -2), [SQUARE]),
    "matrix_exp": (lambda m: m.linalg.matrix_exp, [SQUARE * np.array([0.05, 1.0])[:, None, None]]),
    "cond": (lambda m: m.linalg.cond, [SQUARE]),
    "cond_1": (lambda m: lambda a: m.linalg.cond(a, 1), [SQUARE]),
    "matrix_norm_nuc": (lambda m: lambda a: m.linalg.matrix_norm(a, "nuc"), [TALL]),
    "matrix_norm_2": (lambda m: lambda a: m.linalg.matrix_norm(a, 2), [TALL]),
    "matrix_norm_-2": (lambda m: lambda a: m.linalg.matrix_norm(a, -2), [WIDE]),
    "multi_dot": (
        lambda m: lambda a, b, c: m.linalg.multi_dot([a, b, c]),
        [RHS[0, :, 0], SQUARE[0], TALL[0, :4]],
    ),
    "vander": (lambda m: lambda x: m.linalg.vander(x, N=4), [RHS[..., 0]]),
    "vecdot": (lambda m: m.linalg.vecdot, [SQUARE, RHS[..., :1].transpose(0, 2, 1)]),
    "cross": (lambda m: m.linalg.cross, [TALL, TALL[::-1].copy()]),
    "tensorinv": (lambda m: lambda a: m.linalg.tensorinv(a, 1), [SQUARE[0]]),
    "tensorsolve": (
        lambda m: m.linalg.tensorsolve,
        [SQUARE[0].reshape(2, 2, 4), RHS[0, :, 0].reshape(2, 2)],
    ),
    # the legacy top-level names
    "logdet": (lambda m: m.logdet, [SPD]),
    "legacy_svd": (
        lambda m: lambda a: tuple(x * x for x in m.svd(a)),
        [TALL],
    ),
    "cholesky_solve": (lambda m: lambda b, l: m.cholesky_solve(b, l.tril()), [RHS, SQUARE]),
    "cholesky_solve_upper": (
        lambda m: lambda b, u: m.cholesky_solve(b, u.triu(), upper=True),
        [RHS, SQUARE],
    ),
    "cholesky_inverse": (lambda m: lambda l: m.cholesky_inverse(l.tril()), [SQUARE]),
    "triangular_solve": (
        lambda m: lambda b, a: m.triangular_solve(b, a, transpose=True)[0],
        [RHS, SQUARE],
    ),
    "pinverse": (lambda m: m.pinverse, [TALL]),
}


# torch's own backward fails for these (cond with p != 2 modifies inv_ex's output in
# place): values against PyTorch, gradients by finite differences
NO_TORCH_GRADIENT = {"cond_1"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_and_gradients_match_pytorch(case):
    make, arrays = CASES[case]
    _compare(make(kg), make(torch), arrays, grad=case not in NO_TORCH_GRADIENT)
    if case in NO_TORCH_GRADIENT:
        assert kg.autograd.gradcheck(make(kg), tuple(_k(a, True) for a in arrays))


def _symmetrized(fn):
    """``fn`` of the symmetric part: finite differences of a function that reads one
    triangle differ from PyTorch's (symmetric) gradient, as in PyTorch's own checks."""
    return lambda a, *rest: fn((a + a.mT) / 2, *rest)


GRADCHECK = {
    "inv": (kg.linalg.inv, [SQUARE[:, :3, :3]]),
    "det": (kg.linalg.det, [SQUARE[:, :3, :3]]),
    "solve": (kg.linalg.solve, [SQUARE[:, :3, :3], RHS[:, :3, :2]]),
    "cholesky": (_symmetrized(kg.linalg.cholesky), [SPD[:, :3, :3]]),
    "solve_triangular": (
        lambda a, b: kg.linalg.solve_triangular(a, b, upper=True),
        [SQUARE[:, :3, :3], RHS[:, :3, :2]],
    ),
    "qr_wide": (kg.linalg.qr, [WIDE[:1]]),
    "eigh": (_symmetrized(CASES["eigh"][0](kg)), [SYMMETRIC[:1]]),
    "svd": (CASES["svd_tall"][0](kg), [TALL[:1]]),
    "pinv": (kg.linalg.pinv, [TALL[:1]]),
    "matrix_exp": (kg.linalg.matrix_exp, [SQUARE[:, :3, :3] / 3]),
}


@pytest.mark.parametrize("case", sorted(GRADCHECK))
def test_gradcheck(case):
    fn, arrays = GRADCHECK[case]
    assert kg.autograd.gradcheck(fn, tuple(_k(a, True) for a in arrays))


SECOND_ORDER = {
    "inv": (kg.linalg.inv, [SQUARE[:1, :3, :3]]),
    "det": (kg.linalg.det, [SQUARE[:1, :3, :3]]),
    "slogdet": (lambda a: kg.linalg.slogdet(a).logabsdet, [SQUARE[:1, :3, :3]]),
    "solve": (kg.linalg.solve, [SQUARE[:1, :3, :3], RHS[:1, :3, :1]]),
    "cholesky": (_symmetrized(kg.linalg.cholesky), [SPD[:1, :3, :3]]),
    "eigh": (_symmetrized(CASES["eigh"][0](kg)), [SYMMETRIC[:1, :3, :3]]),
}


@pytest.mark.parametrize("case", sorted(SECOND_ORDER))
def test_second_derivatives(case):
    fn, arrays = SECOND_ORDER[case]
    assert kg.autograd.gradgradcheck(fn, tuple(_k(a, True) for a in arrays))


def test_float32_values():
    a = SQUARE.astype(np.float32)
    for fn in ("inv", "det", "cholesky", "svdvals", "pinv"):
        arg = SPD.astype(np.float32) if fn == "cholesky" else a
        ours = getattr(kg.linalg, fn)(kg.tensor(arg))
        theirs = getattr(torch.linalg, fn)(torch.tensor(arg))
        assert ours.dtype is kg.float32
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-5)


def test_lstsq_outputs_per_driver_match_pytorch():
    b = RNG.standard_normal((2, 5, 2))
    for driver in (None, "gels", "gelsy", "gelsd", "gelss"):
        ours = kg.linalg.lstsq(_k(TALL), _k(b), driver=driver)
        theirs = torch.linalg.lstsq(_t(TALL), _t(b), driver=driver)
        for field in ("solution", "residuals", "rank", "singular_values"):
            mine, other = getattr(ours, field), getattr(theirs, field)
            assert tuple(mine.shape) == tuple(other.shape), (driver, field)
            np.testing.assert_allclose(mine.numpy(), other.numpy(), rtol=1e-8, atol=1e-10)
    deficient = TALL.copy()
    deficient[..., 2] = deficient[..., 0] + deficient[..., 1]
    ours = kg.linalg.lstsq(_k(deficient), _k(b), driver="gelsd")
    theirs = torch.linalg.lstsq(_t(deficient), _t(b), driver="gelsd")
    assert ours.rank.tolist() == theirs.rank.tolist() == [2, 2]
    np.testing.assert_allclose(ours.solution.numpy(), theirs.solution.numpy(), rtol=1e-7)


def test_matrix_rank_and_tolerances_match_pytorch():
    low = TALL @ RNG.standard_normal((2, 3, 3)) * np.array([1, 1, 1e-9])
    for kwargs in ({}, {"atol": 1e-3}, {"rtol": 1e-12}, {"atol": 0.5, "rtol": 0.1}):
        ours = kg.linalg.matrix_rank(_k(low), **kwargs)
        theirs = torch.linalg.matrix_rank(_t(low), **kwargs)
        assert ours.tolist() == theirs.tolist(), kwargs
        ours = kg.linalg.pinv(_k(low), **kwargs)
        theirs = torch.linalg.pinv(_t(low), **kwargs)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-8)
    assert kg.linalg.matrix_rank(_k(SPD), hermitian=True).tolist() == [4, 4]


def test_qr_modes_and_legacy_shapes_match_pytorch():
    for mode in ("reduced", "complete", "r"):
        ours, theirs = kg.linalg.qr(_k(TALL), mode), torch.linalg.qr(_t(TALL), mode)
        for mine, other in zip(ours, theirs):
            assert tuple(mine.shape) == tuple(other.shape)
            np.testing.assert_allclose(mine.numpy(), other.numpy(), atol=1e-12)
    assert [tuple(x.shape) for x in kg.qr(_k(TALL), some=False)] == [(2, 5, 5), (2, 5, 3)]
    U, _, V = kg.svd(_k(TALL), compute_uv=False)
    assert (tuple(U.shape), tuple(V.shape)) == ((2, 5, 5), (2, 3, 3))
    assert float(U.abs().sum()) == 0.0


def test_qr_refuses_gradients_it_does_not_define():
    a = _k(TALL, True)
    with pytest.raises(kg.errors.BackwardError, match="mode='r'"):
        kg.linalg.qr(a, "r").R.sum().backward()
    with pytest.raises(kg.errors.BackwardError, match="complete"):
        kg.linalg.qr(a, "complete").R.sum().backward()


def test_det_gradient_at_a_singular_matrix_is_the_adjugate():
    """At a rank n-1 matrix the gradient is the (nonzero) cofactor matrix: checked by
    finite differences (PyTorch 2.13 returns zeros there, which its own gradcheck
    refuses)."""
    singular = np.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], SQUARE[0, :3, :3]])
    a = _k(singular, True)
    kg.linalg.det(a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy()[0], [[4, 4, -4], [-2, -2, 2], [0, 0, 0]], atol=1e-12)
    assert kg.autograd.gradcheck(kg.linalg.det, (_k(singular, True),))
    with pytest.raises(kg.errors.BackwardError, match="singular"):
        kg.autograd.gradgradcheck(kg.linalg.det, (_k(singular, True),))


def test_singular_and_not_positive_definite_raise_linalg_error_as_pytorch():
    singular = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 4.0]]])
    for name, call in (
        ("inv", lambda m, a: m.linalg.inv(a)),
        ("solve", lambda m, a: m.linalg.solve(a, a)),
        ("inverse", lambda m, a: m.inverse(a[1])),
    ):
        with pytest.raises(torch.linalg.LinAlgError) as expected:
            call(torch, _t(singular))
        with pytest.raises(kg.linalg.LinAlgError) as raised:
            call(kg, _k(singular))
        assert isinstance(raised.value, RuntimeError)
        torch_message = str(expected.value).replace("torch.linalg", "linalg")
        assert str(raised.value).startswith(torch_message), name
    not_pd = np.stack([np.eye(3), np.diag([1.0, 1.0, -1.0])])
    with pytest.raises(torch.linalg.LinAlgError) as expected:
        torch.linalg.cholesky(_t(not_pd))
    with pytest.raises(kg.linalg.LinAlgError) as raised:
        kg.linalg.cholesky(_k(not_pd))
    assert str(raised.value).startswith(str(expected.value).rstrip("."))
    assert "A + eps * I" in str(raised.value)


def test_ex_functions_report_info_as_pytorch():
    singular = np.stack([np.eye(3) * 2, [[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]]])
    ours, theirs = kg.linalg.inv_ex(_k(singular)), torch.linalg.inv_ex(_t(singular))
    assert ours.info.tolist() == theirs.info.tolist() == [0, 2]
    assert ours.info.dtype is kg.int32
    np.testing.assert_allclose(ours.inverse.numpy()[0], np.eye(3) / 2)
    assert np.isnan(ours.inverse.numpy()[1]).all()
    ours = kg.linalg.solve_ex(_k(singular), _k(singular[..., :1]))
    assert (
        ours.info.tolist()
        == torch.linalg.solve_ex(_t(singular), _t(singular[..., :1])).info.tolist()
    )
    not_pd = np.stack([np.eye(3), np.diag([1.0, 1.0, -1.0])])
    ours = kg.linalg.cholesky_ex(_k(not_pd))
    assert ours.info.tolist() == torch.linalg.cholesky_ex(_t(not_pd)).info.tolist() == [0, 3]
    with pytest.raises(kg.linalg.LinAlgError, match="order 3"):
        kg.linalg.cholesky_ex(_k(not_pd), check_errors=True)
    assert math.isinf(kg.linalg.cond(_k(singular), 1).tolist()[1])


def test_solve_triangular_with_a_zero_on_the_diagonal_gives_inf_as_pytorch():
    a = np.array([[1.0, 0.0], [1.0, 0.0]])
    b = np.array([[1.0], [2.0]])
    ours = kg.linalg.solve_triangular(_k(a), _k(b), upper=False).numpy()
    theirs = torch.linalg.solve_triangular(_t(a), _t(b), upper=False).numpy()
    np.testing.assert_array_equal(ours, theirs)


def test_argument_errors():
    with pytest.raises(kg.errors.DTypeError, match="floating point"):
        kg.linalg.det(kg.ones(2, 2, dtype=kg.int64))
    with pytest.raises(kg.errors.ShapeError, match="square"):
        kg.linalg.inv(kg.ones(2, 3))
    with pytest.raises(kg.errors.DTypeError, match="same dtype"):
        kg.linalg.solve(kg.ones(2, 2, dtype=kg.float64), kg.ones(2, dtype=kg.float32))
    with pytest.raises(kg.errors.ArgumentError, match="driver"):
        kg.linalg.lstsq(_k(TALL), _k(TALL), driver="magic")
    with pytest.raises(kg.errors.ShapeError, match="Incompatible"):
        kg.linalg.solve(_k(SQUARE), _k(TALL))


def test_tensor_methods_and_top_level_names_match_pytorch():
    a, spd = _k(SQUARE), _k(SPD)
    ta, tspd = _t(SQUARE), _t(SPD)
    pairs = [
        (a.inverse(), ta.inverse()),
        (a.det(), ta.det()),
        (spd.logdet(), tspd.logdet()),
        (a.slogdet().logabsdet, ta.slogdet().logabsdet),
        (spd.cholesky(), tspd.cholesky()),
        (spd.cholesky(True), tspd.cholesky(True)),
        (a.matrix_power(2), ta.matrix_power(2)),
        (a.matrix_exp(), ta.matrix_exp()),
        (a.qr().R, ta.qr().R),
        (a.svd().S, ta.svd().S),
        (kg.ger(a[0, 0], a[0, 1]), torch.ger(ta[0, 0], ta[0, 1])),
        (kg.vander(a[0, 0], 3), torch.vander(ta[0, 0], 3)),
        (kg.vander(a[0, 0], increasing=True), torch.vander(ta[0, 0], increasing=True)),
        (kg.chain_matmul(a[0], a[1], a[0]), torch.linalg.multi_dot([ta[0], ta[1], ta[0]])),
        (kg.logdet(-spd[:1]), torch.logdet(-tspd[:1])),
        (spd.cholesky().cholesky_inverse(), tspd.cholesky().cholesky_inverse()),
        (a.triangular_solve(a, upper=False)[0], torch.linalg.solve_triangular(ta, ta, upper=False)),
    ]
    for ours, theirs in pairs:
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-8, atol=1e-10)
    assert type(kg.slogdet(a)).__name__ == "slogdet"
    assert kg.linalg.slogdet(a)._fields == ("sign", "logabsdet")
    assert kg.svd(a)._fields == ("U", "S", "V")
    assert a.triangular_solve(a)._fields == ("solution", "cloned_coefficient")


def test_import_torch_linalg_through_the_alias():
    from kernelgrad import linalg

    assert linalg.LinAlgError is kg.errors.LinAlgError
    assert issubclass(linalg.LinAlgError, RuntimeError)


def test_on_device(device):
    """Tiny matrices on the test device (the simulated CUDA backend in that pass): values
    come back from the host to the device, gradients run there."""
    a_values = np.array([[3.0, 1.0], [1.0, 2.0]])
    a = kg.tensor(a_values, device=device, requires_grad=True)
    b = kg.tensor([[1.0], [2.0]], dtype=kg.float64, device=device)
    x = kg.linalg.solve(a, b)
    L = kg.linalg.cholesky(a)
    values, vectors = kg.linalg.eigh(a)
    S = kg.linalg.svdvals(a)
    assert x.device == a.device and L.device == a.device
    (
        x.sum() + L.sum() + values.sum() + (vectors * vectors).sum() + S.sum() + kg.linalg.det(a)
    ).backward()
    assert a.grad.device == a.device
    ta = torch.tensor(a_values, requires_grad=True)
    tb = torch.tensor([[1.0], [2.0]], dtype=torch.float64)
    tv, tq = torch.linalg.eigh(ta)
    (
        torch.linalg.solve(ta, tb).sum()
        + torch.linalg.cholesky(ta).sum()
        + tv.sum()
        + (tq * tq).sum()
        + torch.linalg.svdvals(ta).sum()
        + torch.linalg.det(ta)
    ).backward()
    np.testing.assert_allclose(x.detach().cpu().numpy(), np.linalg.solve(a_values, [[1.0], [2.0]]))
    np.testing.assert_allclose(a.grad.cpu().numpy(), ta.grad.numpy(), rtol=1e-10)
    with pytest.raises(kg.linalg.LinAlgError, match="singular"):
        kg.linalg.inv(kg.zeros(2, 2, device=device))


def test_results_of_one_matrix_have_pytorchs_shapes():
    """A single matrix's determinant, rank, info... are 0-d, as in PyTorch (a copy back from
    the host once made them (1,))."""
    matrix = np.array([[1.0, 2.0], [3.0, 1.0]])
    names = ["det", "slogdet", "inv_ex", "matrix_rank", "cond", "cholesky_ex", "solve_ex"]
    for name in names:
        args = (matrix, matrix) if name == "solve_ex" else (matrix,)
        ours = getattr(kg.linalg, name)(*(kg.tensor(a) for a in args))
        theirs = getattr(torch.linalg, name)(*(torch.tensor(a) for a in args))
        ours = ours if isinstance(ours, tuple) else (ours,)
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        assert [tuple(t.shape) for t in ours] == [tuple(t.shape) for t in theirs], name
