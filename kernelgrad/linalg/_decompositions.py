"""``torch.linalg``'s factorizations and solvers: values from NumPy's LAPACK on the host
(``_host.py``), gradients in kernelgrad tensor ops (PyTorch's formulas from
``derivatives.yaml`` / ``FunctionsManual.cpp``, real case).

Each output that carries a gradient gets its own graph node; the gradient is linear in
the outputs' gradients, so the nodes' contributions add up to the joint formula. An
output a formula reads is held as an ``autograd.SavedOutput``, so that under
``create_graph`` the second derivative flows through it; the formulas call the
differentiable ``inv``, ``solve`` and ``solve_triangular`` for the same reason.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .. import autograd
from ..errors import ArgumentError, BackwardError, ShapeError
from ..tensor import Tensor
from ._host import (
    check_float,
    check_matrix,
    check_same_dtype,
    cholesky_failures,
    lu_zero_pivots,
    operand,
    raise_not_positive_definite,
    raise_singular,
    to_device,
    to_host,
)

SlogdetResult = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])
CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])
QRResult = namedtuple("linalg_qr", ["Q", "R"])
EighResult = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


def _record(name: str, inputs: tuple, output: Tensor, backward: Any, saved: list) -> None:
    """Record ``output``'s node and bind the SavedOutputs of ``saved`` that are this
    output (the others are bound by their own outputs' calls)."""
    autograd.record(
        name, inputs, output, backward, tuple(x for x in inputs if isinstance(x, Tensor))
    )
    for holder, tensor in saved:
        if tensor is output:
            holder.bind(output._node)


def _eye_like(x: Tensor) -> Tensor:
    from ..ops.creation import eye

    return eye(x.shape[-1], dtype=x.dtype, device=x.device)


def _int_info(info: np.ndarray, like: Tensor) -> Tensor:
    from ..dtypes import int32

    return to_device(info.astype(np.int32), like, int32)


# --- inverse, determinant ---------------------------------------------------------------------


def inv(A: Tensor) -> Tensor:
    """The inverse of each square matrix of ``A`` (``torch.linalg.inv``); a singular one
    raises :class:`LinAlgError` naming the batch element and the zero pivot.

    >>> import kernelgrad as kg
    >>> kg.linalg.inv(kg.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    check_matrix(A, "linalg.inv", square=True)
    values = to_host(A)
    try:
        result = np.linalg.inv(values)
    except np.linalg.LinAlgError:
        raise_singular("linalg.inv", values, inverse=True)
    return _inv_output(A, result)


def _inv_output(A: Tensor, result: np.ndarray) -> Tensor:
    out = to_device(result, A)
    if autograd.needs_grad(A):
        held = autograd.SavedOutput(out)

        def backward(g: Tensor) -> tuple[Tensor]:
            X = held.get()
            return (-(X.mT @ g @ X.mT),)

        _record("linalg_inv", (A,), out, backward, [(held, out)])
    return out


def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvExResult:
    """``(inverse, info)``: ``info`` (int32, one per matrix) is 0 or the 1-based index of
    the LU factorization's zero pivot. The inverse of a singular matrix is NaN here (in
    PyTorch its values are unspecified)."""
    check_matrix(A, "linalg.inv_ex", square=True)
    values = to_host(A)
    try:
        result = np.linalg.inv(values)
        info = np.zeros(values.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        if check_errors:
            raise_singular("linalg.inv_ex", values, inverse=True)
        info = lu_zero_pivots(values)
        result = np.full_like(values, np.nan)
        good = info == 0
        result[good] = np.linalg.inv(values[good])
    return InvExResult(_inv_output(A, result), _int_info(info, A))


def det(A: Tensor) -> Tensor:
    """The determinant of each square matrix of ``A`` (``torch.linalg.det``). Its gradient
    is ``det(A) * inv(A)^T``; where a matrix of the batch is singular, the adjugate from
    the SVD instead (then not twice differentiable)."""
    check_matrix(A, "linalg.det", square=True)
    values = to_host(A)
    result = np.linalg.det(values)
    out = to_device(np.asarray(result), A)
    if autograd.needs_grad(A):
        singular = bool(np.any(result == 0))
        held = autograd.SavedOutput(out)

        def backward(g: Tensor) -> tuple[Tensor]:
            scale = (g * held.get()).unsqueeze(-1).unsqueeze(-1)
            if not singular:
                return (scale * inv(operand(A)).mT,)
            if autograd.is_grad_enabled():
                raise BackwardError(
                    "linalg.det: the second derivative at a singular matrix is not "
                    "available (the first one uses the adjugate from the SVD); use a "
                    "nonsingular matrix or leave create_graph False"
                )
            cofactors = to_device(_adjugate_transposed(values), A)
            return (g.unsqueeze(-1).unsqueeze(-1) * cofactors,)

        _record("linalg_det", (A,), out, backward, [(held, out)])
    return out


def _adjugate_transposed(a: np.ndarray) -> np.ndarray:
    """The cofactor matrix (adjugate transposed) of each matrix of ``a``, also singular
    ones: ``det(U) det(Vh) U diag(prod_{j != i} s_j) Vh`` for ``a = U diag(s) Vh``."""
    u, s, vh = np.linalg.svd(a)
    n = s.shape[-1]
    ones = np.ones(s.shape[:-1] + (1,), dtype=s.dtype)
    before = np.cumprod(np.concatenate([ones, s[..., : n - 1]], -1), -1)
    after = np.flip(np.cumprod(np.concatenate([ones, np.flip(s[..., 1:], -1)], -1), -1), -1)
    others = before * after
    signs = np.linalg.det(u) * np.linalg.det(vh)
    return signs[..., None, None] * (u * others[..., None, :]) @ vh


def slogdet(A: Tensor) -> SlogdetResult:
    """``(sign, logabsdet)`` of each square matrix (``torch.linalg.slogdet``): the sign is
    0 and ``logabsdet`` -inf for a singular matrix. Only ``logabsdet`` is differentiable
    (its gradient ``inv(A)^T`` needs a nonsingular matrix)."""
    check_matrix(A, "linalg.slogdet", square=True)
    sign, logabs = np.linalg.slogdet(to_host(A))
    sign_out = to_device(np.asarray(sign), A)
    out = to_device(np.asarray(logabs), A)
    if autograd.needs_grad(A):

        def backward(g: Tensor) -> tuple[Tensor]:
            return (g.unsqueeze(-1).unsqueeze(-1) * inv(operand(A)).mT,)

        _record("linalg_slogdet", (A,), out, backward, [])
    return SlogdetResult(sign_out, out)


# --- solvers ----------------------------------------------------------------------------------


def _is_vector_rhs(A: Tensor, B: Tensor) -> bool:
    """PyTorch's rule: ``B`` is a (batch of) vector(s) when it is 1-D or has one dim
    fewer than ``A`` and ``A``'s shape without its last dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """The solution ``X`` of ``A X = B`` (``X A = B`` with ``left=False``) for square
    ``A``, batched with broadcasting (``torch.linalg.solve``); a singular ``A`` raises
    :class:`LinAlgError`.

    >>> import kernelgrad as kg
    >>> kg.linalg.solve(kg.tensor([[2.0, 0.0], [0.0, 4.0]]), kg.tensor([2.0, 2.0])).tolist()
    [1.0, 0.5]
    """
    return _solve(A, B, left, check_errors=True, name="linalg.solve")[0]


def solve_ex(
    A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False
) -> SolveExResult:
    """``(result, info)`` of :func:`solve`: ``info`` is 0 or the LU factorization's zero
    pivot (1-based) per matrix; a singular matrix's solution is NaN here."""
    return SolveExResult(*_solve(A, B, left, check_errors=check_errors, name="linalg.solve_ex"))


def _solve(
    A: Tensor, B: Tensor, left: bool, check_errors: bool, name: str
) -> tuple[Tensor, Tensor]:
    check_matrix(A, name, square=True)
    check_float(B, name, "B")
    check_same_dtype(A, B, name)
    vector = _is_vector_rhs(A, B)
    if not left:
        if vector:
            return _solve(A.mT, B, True, check_errors, name)
        X, info = _solve(A.mT, B.mT, True, check_errors, name)
        return X.mT, info
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.shape[-2] != A.shape[-1]:
        raise ShapeError(
            f"{name}: Incompatible shapes of A and B for the equation AX = B "
            f"({A.shape[-2]}x{A.shape[-1]} and {rhs.shape[-2]}x{rhs.shape[-1]})"
        )
    a, b = to_host(A), to_host(rhs)
    try:
        x = np.linalg.solve(a, b)
        info = np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = np.broadcast_to(a, batch + a.shape[-2:])
        if check_errors:
            raise_singular(name, a, inverse=False)
        b = np.broadcast_to(b, batch + b.shape[-2:])
        info = lu_zero_pivots(a)
        x = np.full(b.shape, np.nan, dtype=b.dtype)
        good = info == 0
        x[good] = np.linalg.solve(a[good], b[good])
    out = to_device(x, A)
    if autograd.needs_grad(A, rhs):
        held = autograd.SavedOutput(out)

        def backward(g: Tensor) -> tuple[Tensor | None, Tensor | None]:
            A_ = operand(A)
            grad_b = solve(A_.mT, g)
            grad_a = -(grad_b @ held.get().mT) if A.requires_grad else None
            return grad_a, grad_b if rhs.requires_grad else None

        _record("linalg_solve", (A, rhs), out, backward, [(held, out)])
    return (out.squeeze(-1) if vector else out), _int_info(info, A)


def solve_triangular(
    A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Tensor:
    """The solution of ``A X = B`` (``X A = B`` with ``left=False``) for triangular ``A``,
    of which only the ``upper`` or lower triangle is read (and not the diagonal with
    ``unitriangular``: it is taken as ones), as ``torch.linalg.solve_triangular``. A zero
    on the diagonal gives inf/NaN, as in LAPACK's trsm, not an error.

    >>> import kernelgrad as kg
    >>> A = kg.tensor([[2.0, 5.0], [0.0, 4.0]])
    >>> kg.linalg.solve_triangular(A, kg.tensor([[9.0], [4.0]]), upper=True).tolist()
    [[2.0], [1.0]]
    """
    name = "linalg.solve_triangular"
    check_matrix(A, name, square=True)
    check_matrix(B, name, what="B")
    check_same_dtype(A, B, name)
    if not left:
        return solve_triangular(
            A.mT, B.mT, upper=not upper, left=True, unitriangular=unitriangular
        ).mT
    if B.shape[-2] != A.shape[-1]:
        raise ShapeError(
            f"{name}: Incompatible shapes of A and B for the equation AX = B "
            f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})"
        )
    a = to_host(A)
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t.copy()
        idx = np.arange(t.shape[-1])
        t[..., idx, idx] = 1
    b = to_host(B)
    try:
        x = np.linalg.solve(t, b)
    except np.linalg.LinAlgError:  # a zero on the diagonal: substitute, as trsm does
        x = _substitute(t, b, upper)
    out = to_device(x, A)
    if autograd.needs_grad(A, B):
        held = autograd.SavedOutput(out)

        def backward(g: Tensor) -> tuple[Tensor | None, Tensor | None]:
            grad_b = solve_triangular(
                operand(A).mT, g, upper=not upper, unitriangular=unitriangular
            )
            grad_a = None
            if A.requires_grad:
                full = -(grad_b @ held.get().mT)
                offset = 1 if unitriangular else 0
                grad_a = full.triu(offset) if upper else full.tril(-offset)
            return grad_a, grad_b if B.requires_grad else None

        _record("linalg_solve_triangular", (A, B), out, backward, [(held, out)])
    return out


def _substitute(t: np.ndarray, b: np.ndarray, upper: bool) -> np.ndarray:
    """Back (``upper``) or forward substitution, one row at a time over the whole batch."""
    batch = np.broadcast_shapes(t.shape[:-2], b.shape[:-2])
    t = np.broadcast_to(t, batch + t.shape[-2:])
    x = np.array(np.broadcast_to(b, batch + b.shape[-2:]), dtype=np.result_type(t, b))
    n = t.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(n - 1, -1, -1) if upper else range(n):
            known = slice(i + 1, n) if upper else slice(0, i)
            rest = (t[..., i : i + 1, known] @ x[..., known, :])[..., 0, :]
            x[..., i, :] = (x[..., i, :] - rest) / t[..., i, i][..., None]
    return x


# --- Cholesky ---------------------------------------------------------------------------------


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The Cholesky factor ``L`` (``A = L L^T``; ``U = L^T`` with ``upper=True``) of each
    symmetric positive-definite matrix, reading only its lower (upper) triangle, as
    ``torch.linalg.cholesky``; a matrix that is not positive-definite raises
    :class:`LinAlgError` naming the leading minor.

    >>> import kernelgrad as kg
    >>> kg.linalg.cholesky(kg.tensor([[4.0, 2.0], [2.0, 2.0]])).tolist()
    [[2.0, 0.0], [1.0, 1.0]]
    """
    return _cholesky(A, upper, True, "linalg.cholesky")[0]


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> CholeskyExResult:
    """``(L, info)``: ``info`` is 0 or the order of the leading minor that is not
    positive-definite; that matrix's factor is NaN here."""
    return CholeskyExResult(*_cholesky(A, upper, check_errors, "linalg.cholesky_ex"))


def _cholesky(A: Tensor, upper: bool, check_errors: bool, name: str) -> tuple[Tensor, Tensor]:
    check_matrix(A, name, square=True)
    a = to_host(A)
    lower = np.swapaxes(a, -1, -2) if upper else a
    symmetric = np.tril(lower) + np.swapaxes(np.tril(lower, -1), -1, -2)
    try:
        factor = np.linalg.cholesky(symmetric)
        info = np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        if check_errors:
            raise_not_positive_definite(name, symmetric)
        info = cholesky_failures(symmetric)
        factor = np.full_like(symmetric, np.nan)
        good = info == 0
        factor[good] = np.linalg.cholesky(symmetric[good])
    out = to_device(np.swapaxes(factor, -1, -2) if upper else factor, A)
    if autograd.needs_grad(A):
        held = autograd.SavedOutput(out)

        def backward(g: Tensor) -> tuple[Tensor]:
            L = held.get()
            if upper:
                L, g = L.mT, g.mT
            grad = (L.mT @ g).tril()
            grad = 0.5 * (grad + grad.tril(-1).mT)
            grad = solve_triangular(L.mT, grad, upper=True, left=True)
            return (solve_triangular(L, grad, upper=False, left=False),)

        _record("linalg_cholesky", (A,), out, backward, [(held, out)])
    return out, _int_info(info, A)


# --- QR ---------------------------------------------------------------------------------------


def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """``(Q, R)`` with ``A = Q R`` (``torch.linalg.qr``): ``mode`` "reduced" (``Q`` is
    m x k, k = min(m, n)), "complete" (``Q`` is m x m) or "r" (``Q`` empty). The signs are
    LAPACK's Householder ones, as in PyTorch. Not differentiable for "r", nor for
    "complete" with m > n (as in PyTorch)."""
    name = "linalg.qr"
    check_matrix(A, name)
    if mode not in ("reduced", "complete", "r"):
        raise ArgumentError(f"{name}: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    m, n = A.shape[-2], A.shape[-1]
    a = to_host(A)
    if mode == "r":
        q = np.zeros((0,), dtype=a.dtype)
        r = np.linalg.qr(a, mode="r")
    else:
        q, r = np.linalg.qr(a, mode=mode)
    Q, R = to_device(q, A), to_device(r, A)
    if not autograd.needs_grad(A):
        return QRResult(Q, R)
    if mode == "r" or (mode == "complete" and m > n):
        problem = (
            "depends on Q, which is not computed when mode='r'; use mode='reduced'"
            if mode == "r"
            else "is not defined when mode='complete' and nrows > ncols; use mode='reduced'"
        )

        def refuse(g: Tensor) -> tuple[Tensor]:
            raise BackwardError(f"{name}: the derivative of linalg.qr {problem}")

        autograd.record("linalg_qr", (A,), R, refuse)
        return QRResult(Q, R)
    held_q, held_r = autograd.SavedOutput(Q), autograd.SavedOutput(R)
    saved = [(held_q, Q), (held_r, R)]

    def backward_q(g: Tensor) -> tuple[Tensor]:
        return (_qr_grad(g, None, operand(A), held_q.get(), held_r.get()),)

    def backward_r(g: Tensor) -> tuple[Tensor]:
        return (_qr_grad(None, g, operand(A), held_q.get(), held_r.get()),)

    _record("linalg_qr", (A,), Q, backward_q, saved)
    _record("linalg_qr", (A,), R, backward_r, saved)
    return QRResult(Q, R)


def _qr_grad(gQ: Tensor | None, gR: Tensor | None, A: Tensor, Q: Tensor, R: Tensor) -> Tensor:
    """PyTorch's ``linalg_qr_backward``: for m >= n, ``(gQ + Q copyltu(M)) R^{-T}`` with
    ``M = R gR^T - gQ^T Q``; for m < n, ``A = [X | Y]`` and ``R = [U | V]`` reduce it
    to the square case of ``X = Q U``."""
    m, n = A.shape[-2], A.shape[-1]
    if m >= n:
        parts = []
        if gR is not None:
            parts.append(R @ gR.mT)
        if gQ is not None:
            parts.append(-(gQ.mT @ Q))
        M = parts[0] if len(parts) == 1 else parts[0] + parts[1]
        copied = M.tril() + M.tril(-1).mT
        grad = Q @ copied
        if gQ is not None:
            grad = grad + gQ
        return solve_triangular(R.mT, grad, upper=False, left=False)
    Y = A[..., m:]
    U = R[..., :m]
    if gR is None:
        return _pad_columns(_qr_grad(gQ, None, A[..., :m], Q, U), n)
    gU, gV = gR[..., :m], gR[..., m:]
    from ..ops.movement import cat

    shifted = Y @ gV.mT if gQ is None else gQ + Y @ gV.mT
    return cat([_qr_grad(shifted, gU, A[..., :m], Q, U), Q @ gV], -1)


def _pad_columns(x: Tensor, n: int) -> Tensor:
    from ..ops.movement import pad

    return pad(x, (0, n - x.shape[-1]))


# --- symmetric eigenproblem and SVD -----------------------------------------------------------


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix, reading its lower
    (``UPLO="L"``) or upper triangle (``torch.linalg.eigh``): eigenvalues ascending,
    eigenvectors as columns (each defined up to its sign, LAPACK's choice). The gradient
    is PyTorch's; it is infinite where two eigenvalues are equal."""
    name = "linalg.eigh"
    check_matrix(A, name, square=True)
    if UPLO not in ("L", "U"):
        raise ArgumentError(f"{name}: UPLO must be 'L' or 'U', got {UPLO!r}")
    w, v = np.linalg.eigh(to_host(A), UPLO=UPLO)
    L, Q = to_device(w, A), to_device(v, A)
    if autograd.needs_grad(A):
        held_l, held_q = autograd.SavedOutput(L), autograd.SavedOutput(Q)
        saved = [(held_l, L), (held_q, Q)]

        def backward_values(g: Tensor) -> tuple[Tensor]:
            vectors = held_q.get()
            return ((vectors * g.unsqueeze(-2)) @ vectors.mT,)

        def backward_vectors(g: Tensor) -> tuple[Tensor]:
            values, vectors = held_l.get(), held_q.get()
            inner = vectors.mT @ g
            skew = 0.5 * (inner - inner.mT)
            gaps = values.unsqueeze(-2) - values.unsqueeze(-1) + _eye_like(vectors)
            return (vectors @ (skew / gaps) @ vectors.mT,)

        _record("linalg_eigh", (A,), L, backward_values, saved)
        _record("linalg_eigh", (A,), Q, backward_vectors, saved)
    return EighResult(L, Q)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues of each symmetric matrix, ascending (``torch.linalg.eigvalsh``)."""
    if autograd.needs_grad(A):
        return eigh(A, UPLO).eigenvalues
    check_matrix(A, "linalg.eigvalsh", square=True)
    if UPLO not in ("L", "U"):
        raise ArgumentError(f"linalg.eigvalsh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return to_device(np.linalg.eigvalsh(to_host(A), UPLO=UPLO), A)


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> SVDResult:
    """``(U, S, Vh)`` with ``A = U diag(S) Vh`` (``torch.linalg.svd``): singular values
    descending; with ``full_matrices`` ``U`` is m x m and ``Vh`` n x n, otherwise k = min(m,
    n) columns / rows. Singular vectors are defined up to their signs (LAPACK's gesdd
    choice, as PyTorch's CPU). ``driver`` is PyTorch's CUDA-only choice of cuSOLVER
    routine and changes nothing here. The gradient is PyTorch's: infinite for repeated
    singular values, and the extra columns of a full ``U`` / ``Vh`` get none."""
    name = "linalg.svd"
    check_matrix(A, name)
    if driver not in (None, "gesvd", "gesvdj", "gesvda"):
        raise ArgumentError(
            f"{name}: driver must be None, 'gesvd', 'gesvdj' or 'gesvda', got {driver!r}"
        )
    u, s, vh = np.linalg.svd(to_host(A), full_matrices=full_matrices)
    U, S, Vh = to_device(u, A), to_device(s, A), to_device(vh, A)
    if autograd.needs_grad(A):
        m, n = A.shape[-2], A.shape[-1]
        k = min(m, n)
        held = [autograd.SavedOutput(t) for t in (U, S, Vh)]
        saved = list(zip(held, (U, S, Vh)))

        def factors() -> tuple[Tensor, Tensor, Tensor]:
            u_, s_, vh_ = (h.get() for h in held)
            return u_[..., :k], s_, vh_[..., :k, :]

        def gaps(s_: Tensor) -> Tensor:
            from ..ops.creation import eye

            squares = s_ * s_
            identity = eye(k, dtype=s_.dtype, device=s_.device)
            return squares.unsqueeze(-2) - squares.unsqueeze(-1) + identity

        def backward_u(g: Tensor) -> tuple[Tensor]:
            u_, s_, vh_ = factors()
            g = g[..., :k]
            inner = u_.mT @ g
            core = (inner - inner.mT) * s_.unsqueeze(-2) / gaps(s_)
            if m > n:
                scaled = g / s_.unsqueeze(-2)
                return ((u_ @ core + scaled - u_ @ (u_.mT @ scaled)) @ vh_,)
            return (u_ @ core @ vh_,)

        def backward_s(g: Tensor) -> tuple[Tensor]:
            u_, _, vh_ = factors()
            return ((u_ * g.unsqueeze(-2)) @ vh_,)

        def backward_vh(g: Tensor) -> tuple[Tensor]:
            u_, s_, vh_ = factors()
            g = g[..., :k, :]
            inner = vh_ @ g.mT
            core = s_.unsqueeze(-1) * (inner - inner.mT) / gaps(s_)
            if m < n:
                scaled = g / s_.unsqueeze(-1)
                return (u_ @ (core @ vh_ + scaled - (scaled @ vh_.mT) @ vh_),)
            return (u_ @ core @ vh_,)

        _record("linalg_svd", (A,), U, backward_u, saved)
        _record("linalg_svd", (A,), S, backward_s, saved)
        _record("linalg_svd", (A,), Vh, backward_vh, saved)
    return SVDResult(U, S, Vh)


def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:
    """The singular values of each matrix, descending (``torch.linalg.svdvals``)."""
    if autograd.needs_grad(A):
        return svd(A, full_matrices=False, driver=driver).S
    check_matrix(A, "linalg.svdvals")
    return to_device(np.linalg.svd(to_host(A), compute_uv=False), A)


# --- pseudo-inverse and least squares ---------------------------------------------------------


def _tolerances(A: Tensor, atol: Any, rtol: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's rule: with neither given, ``rtol = eps * max(m, n)``; with ``atol > 0``
    alone, ``rtol = 0``."""

    def host(value: Any) -> np.ndarray:
        if value is None:
            return np.zeros(())
        return to_host(value) if isinstance(value, Tensor) else np.asarray(float(value))

    if rtol is None:
        eps = np.finfo(A.dtype.numpy).eps
        given = atol is not None and np.all(host(atol) > 0)
        rtol_values = np.zeros(()) if given else np.asarray(eps * max(A.shape[-2], A.shape[-1]))
    else:
        rtol_values = host(rtol)
    return host(atol), rtol_values


def _cutoff(s: np.ndarray, atol: np.ndarray, rtol: np.ndarray) -> np.ndarray:
    largest = s.max(-1) if s.shape[-1] else np.zeros(s.shape[:-1], s.dtype)
    return np.maximum(atol, rtol * largest)[..., None]


def pinv(A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False) -> Tensor:
    """The pseudo-inverse of each matrix (``torch.linalg.pinv``): singular values at or
    below ``max(atol, rtol * largest)`` are treated as zero (``rtol`` defaults to
    ``eps * max(m, n)`` unless ``atol > 0`` is given alone); ``hermitian`` uses the
    symmetric eigendecomposition (lower triangle). The gradient is PyTorch's
    ``pinv_backward`` (valid where the rank does not change)."""
    name = "linalg.pinv"
    check_matrix(A, name, square=hermitian)
    atol_values, rtol_values = _tolerances(A, atol, rtol, name)
    a = to_host(A)
    with np.errstate(divide="ignore"):
        if hermitian:
            w, v = np.linalg.eigh(a)
            keep = np.abs(w) > _cutoff(np.abs(w), atol_values, rtol_values)
            inverse_w = np.where(keep, 1 / np.where(keep, w, 1), 0)
            result = (v * inverse_w[..., None, :]) @ np.swapaxes(v, -1, -2)
        else:
            u, s, vh = np.linalg.svd(a, full_matrices=False)
            keep = s > _cutoff(s, atol_values, rtol_values)
            inverse_s = np.where(keep, 1 / np.where(keep, s, 1), 0)
            result = (np.swapaxes(vh, -1, -2) * inverse_s[..., None, :]) @ np.swapaxes(u, -1, -2)
    out = to_device(result.astype(a.dtype, copy=False), A)
    if autograd.needs_grad(A):
        held = autograd.SavedOutput(out)

        def backward(g: Tensor) -> tuple[Tensor]:
            return (_pinv_backward(g, held.get(), operand(A)),)

        _record("linalg_pinv", (A,), out, backward, [(held, out)])
    return out


def _pinv_backward(grad: Tensor, pinvA: Tensor, A: Tensor) -> Tensor:
    m, n = A.shape[-2], A.shape[-1]
    pinvAh, gradh = pinvA.mT, grad.mT
    if m <= n:
        K = gradh @ pinvA
        KpinvAh = K @ pinvAh
        return (
            -(pinvA @ K).mT + KpinvAh - (A @ pinvA) @ KpinvAh + (pinvAh @ pinvA) @ (gradh - K @ A)
        )
    K = pinvA @ gradh
    pinvAhK = pinvAh @ K
    return -(K @ pinvA).mT + (gradh - A @ K) @ pinvA @ pinvAh + pinvAhK - pinvAhK @ pinvA @ A


def lstsq(
    A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None
) -> LstsqResult:
    """The least-squares solution of ``A X = B`` (``torch.linalg.lstsq``), as
    ``(solution, residuals, rank, singular_values)`` with PyTorch's CPU rules per
    ``driver`` ("gelsy", the default; "gels", "gelsd", "gelss"): ``rank`` for all but
    "gels", ``singular_values`` for "gelsd"/"gelss", ``residuals`` (squared, per column)
    for all but "gelsy" when m > n and every matrix has full rank; the others are empty.

    Computed as ``pinv(A) @ B`` with the singular values below ``rcond * largest`` (default
    ``eps * max(m, n)``) dropped: the minimum-norm solution every driver returns for a
    full-rank ``A`` (for a rank-deficient one "gels" assumes full rank and differs). The
    rank counts the singular values above the cutoff (gelsy estimates it from a pivoted
    QR). The gradient is PyTorch's, that of ``pinv(A) @ B``."""
    name = "linalg.lstsq"
    check_matrix(A, name)
    check_float(B, name, "B")
    check_same_dtype(A, B, name)
    if driver is None:
        driver = "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ArgumentError(
            f"{name}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got "
            f"{driver!r}"
        )
    vector = B.ndim == A.ndim - 1
    rhs = B.unsqueeze(-1) if vector else B
    if rhs.ndim < 2 or rhs.shape[-2] != A.shape[-2]:
        raise ShapeError(
            f"{name}: input.size(-2) should match other.size(-2), got A of shape "
            f"{tuple(A.shape)} and B of shape {tuple(B.shape)}"
        )
    m, n = A.shape[-2], A.shape[-1]
    eps = np.finfo(A.dtype.numpy).eps
    cutoff = eps * max(m, n) if rcond is None or rcond < 0 else rcond
    s = np.linalg.svd(to_host(A), compute_uv=False)
    rank = (s > cutoff * (s.max(-1, keepdims=True) if s.size else 0)).sum(-1)
    solution = pinv(A, rtol=cutoff) @ rhs
    from ..dtypes import int64

    empty = to_device(np.zeros((0,), dtype=s.dtype), A)
    residuals = empty
    if driver != "gelsy" and m > n and np.all(rank == n):
        residuals = ((A @ solution - rhs) ** 2).sum(-2)
        if vector:
            residuals = residuals.squeeze(-1)
    rank_out = (
        to_device(rank.astype(np.int64), A, int64)
        if driver != "gels"
        else to_device(np.zeros((0,), np.int64), A, int64)
    )
    values = to_device(s, A) if driver in ("gelsd", "gelss") else empty
    return LstsqResult(solution.squeeze(-1) if vector else solution, residuals, rank_out, values)


def matrix_rank(
    A: Tensor, *, atol: Any = None, rtol: Any = None, hermitian: bool = False, tol: Any = None
) -> Tensor:
    """The number of singular values (eigenvalue magnitudes with ``hermitian``) above
    ``max(atol, rtol * largest)`` per matrix, int64 (``torch.linalg.matrix_rank``; ``tol``
    is its older name for ``atol``)."""
    name = "linalg.matrix_rank"
    check_matrix(A, name, square=hermitian)
    if tol is not None:
        if atol is not None:
            raise ArgumentError(f"{name}: give atol or its older name tol, not both")
        atol = tol
    atol_values, rtol_values = _tolerances(A, atol, rtol, name)
    a = to_host(A)
    s = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    rank = (s > _cutoff(s, atol_values, rtol_values)).sum(-1)
    from ..dtypes import int64

    return to_device(rank.astype(np.int64), A, int64)


__all__ = [
    "CholeskyExResult",
    "EighResult",
    "InvExResult",
    "LstsqResult",
    "QRResult",
    "SVDResult",
    "SlogdetResult",
    "SolveExResult",
    "cholesky",
    "cholesky_ex",
    "det",
    "eigh",
    "eigvalsh",
    "inv",
    "inv_ex",
    "lstsq",
    "matrix_rank",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
]
