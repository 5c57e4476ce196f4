"""PyTorch's ``torch.nn.utils.parametrizations``: ``weight_norm``, ``spectral_norm``
and ``orthogonal`` as parametrizations (:mod:`kernelgrad.nn.utils.parametrize`), with
PyTorch 2.13's names, state-dict keys and defaults.

>>> import kernelgrad as kg
>>> from kernelgrad.nn.utils import parametrizations as P
>>> m = P.weight_norm(kg.nn.Linear(4, 3))
>>> sorted(m.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
>>> q = P.orthogonal(kg.nn.Linear(3, 3)).weight
>>> bool(((q @ q.T - kg.eye(3)).abs().max() < 1e-5).item())
True

The orthogonal maps are differentiable: ``matrix_exp`` is ``kg.linalg.matrix_exp``
(scaling and squaring a Padé approximant), ``cayley`` solves ``(I - A/2) Q = I + A/2``
with ``kg.linalg.solve``, ``householder`` is the product of the reflections, written with
matrix products. ``right_inverse`` (assigning to the weight, and registration) runs its
QR decompositions on the host, with NumPy.
"""

# ruff: noqa: N803, N806  (PyTorch's matrix names: A, Q, X, ...)

from __future__ import annotations

from enum import Enum, auto

import numpy as np

from ... import autograd
from ...errors import ArgumentError, DimensionError
from ...ops.creation import eye, tensor, zeros_like
from ...ops.movement import cat
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from . import parametrize
from ._norms import norm_except_dim
from ._norms import weight_norm as _weight_norm_fn
from .spectral_norm import _default_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# --- orthogonal ----------------------------------------------------------------------------
def _matrix_exp(A: Tensor) -> Tensor:
    """exp(A) of a (batch of) square matrices (``kg.linalg.matrix_exp``)."""
    from ... import linalg

    return linalg.matrix_exp(A)


def _cayley(A: Tensor) -> Tensor:
    """(I - A/2)^-1 (I + A/2) for skew-symmetric A (``kg.linalg.solve``)."""
    from ... import linalg

    identity = eye(A.shape[-1], dtype=A.dtype, device=A.device)
    return linalg.solve(identity - 0.5 * A, identity + 0.5 * A)


def _householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first k columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i the i-th
    column of A below the diagonal and 1 on it (LAPACK's orgqr; A is n x k)."""
    n, k = A.shape[-2], A.shape[-1]
    V = A.tril(-1) + eye(n, k, dtype=A.dtype, device=A.device)
    Q = eye(n, k, dtype=A.dtype, device=A.device).expand(*A.shape)
    for i in range(k - 1, -1, -1):
        v = V[..., :, i : i + 1]
        Q = Q - tau[..., i : i + 1].unsqueeze(-1) * (v @ (v.mT @ Q))
    return Q


def _host_qr_sign(Q: np.ndarray) -> np.ndarray:
    # PyTorch's _make_orthogonal: Q of QR(A), each column times the sign of R's diagonal
    q, r = np.linalg.qr(Q)
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(
        self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True
    ) -> None:
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                pad = X.new_zeros(n, n - k).expand(*X.shape[:-2], n, n - k)
                X = cat([X, pad], dim=-1)
            A = X - X.mT
            Q = _matrix_exp(A) if self.orthogonal_map is _OrthMaps.matrix_exp else _cayley(A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().to(Q.dtype).unsqueeze(-2)
        if "base" in self.__dict__:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        with autograd.no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q: Tensor) -> Tensor:
        if Q.shape != self.shape:
            raise ArgumentError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. "
                f"Got a tensor of shape {Q.shape}."
            )
        Q_init = Q
        q = Q.detach().cpu().numpy()
        n, k = q.shape[-2], q.shape[-1]
        transpose = n < k
        if transpose:
            q = np.swapaxes(q, -1, -2)
            n, k = k, n
        if "base" not in self.__dict__:
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential "
                    "or the Cayley parametrizations when use_trivialization=False."
                )
            # geqrf's reflectors with the diagonal replaced by its signs (-1 where tau
            # is 0 flips it back), as PyTorch stores them
            result = np.empty_like(q)
            for index in np.ndindex(*q.shape[:-2]):
                h, tau = np.linalg.qr(q[index].astype(np.float64), mode="raw")
                a = h.T.copy()
                diag = np.sign(np.diagonal(a)).copy()
                diag[tau == 0.0] *= -1
                np.fill_diagonal(a, diag)
                result[index] = a
            if transpose:
                result = np.swapaxes(result, -1, -2)
            return tensor(result, dtype=Q.dtype).to(Q.device)
        if n == k:
            qq = q.astype(np.float64)
            identity = np.eye(k)
            eps = 10.0 * n * float(np.finfo(q.dtype).eps)
            product = np.swapaxes(qq, -1, -2) @ qq
            if not np.allclose(product, identity, atol=eps, rtol=1e-5):
                qq = _host_qr_sign(qq)
            base = qq
        else:
            from ...ops.creation import randn

            noise = randn(*q.shape[:-2], n, n - k, dtype=Q.dtype).numpy()
            base = _host_qr_sign(np.concatenate([q, noise], axis=-1).astype(np.float64))
        self.base = tensor(base, dtype=Q.dtype).to(Q.device)
        neg_id = zeros_like(Q_init)
        neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_id


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """Make ``module.<name>`` an orthogonal matrix (semi-orthogonal for a rectangular
    one; a batch of them for more dims): ``"matrix_exp"`` (the default for square
    weights), ``"cayley"`` or ``"householder"`` (the default for rectangular ones) of an
    unconstrained original; with ``use_trivialization`` (the default) times a buffer
    ``base`` set when the weight is assigned (registration assigns the current
    weight, so it starts orthogonalised by QR)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ArgumentError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ArgumentError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions."
        )
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ArgumentError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}"
        )
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# --- weight_norm ---------------------------------------------------------------------------
class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm_fn(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalisation as a parametrization: ``original0`` is the magnitude
    (PyTorch's ``weight_g``), ``original1`` the direction (``weight_v``); a state dict
    saved with the hook form (``weight_g`` / ``weight_v``) loads into it."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        g_key = f"{prefix}{name}_g"
        v_key = f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            original0 = state_dict.pop(g_key)
            original1 = state_dict.pop(v_key)
            state_dict[f"{prefix}parametrizations.{name}.original0"] = original0
            state_dict[f"{prefix}parametrizations.{name}.original1"] = original1

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


# --- spectral_norm -------------------------------------------------------------------------
class _SpectralNorm(Module):
    def __init__(
        self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise DimensionError(
                "Dimension out of range (expected to be in range of "
                f"[-{ndim}, {ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ArgumentError(
                "Expected n_power_iterations to be positive, but "
                f"got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            with autograd.no_grad():
                weight_mat = self._reshape_weight_to_matrix(weight)
                h, w = weight_mat.shape
                u = weight_mat.new_empty(h).normal_(0, 1)
                v = weight_mat.new_empty(w).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
                self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        # u and v are updated in place (PyTorch's out=), without gradients
        with autograd.no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(weight_mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(weight_mat.t().mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Spectral normalisation as a parametrization: ``weight / sigma`` with the power
    iteration's vectors in the buffers ``parametrizations.weight.0._u`` / ``._v``
    (15 iterations at registration, ``n_power_iterations`` per access in training mode,
    none in eval mode)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ArgumentError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = _default_dim(module)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module
