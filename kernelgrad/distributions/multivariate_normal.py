"""torch.distributions.MultivariateNormal (the Cholesky factorisation and triangular
solves from kg.linalg, ``_linalg.py``)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import kernelgrad as kg

from ..errors import ArgumentError
from ..shapes import Size
from ..tensor import Tensor
from . import constraints
from ._linalg import cholesky, solve_lower, solve_lower_vector
from .distribution import Distribution
from .utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    """Matrix-vector products over broadcast batch dims."""
    return kg.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL: Tensor, bx: Tensor) -> Tensor:  # noqa: N803 (PyTorch's name)
    """The squared Mahalanobis distance ``x^T (L L^T)^-1 x``, over broadcast batch dims."""
    return solve_lower_vector(bL, bx).pow(2).sum(-1)


def _cholesky_inverse(lower: Tensor) -> Tensor:
    """``(L L^T)^-1`` from the factor ``L``."""
    n = lower.shape[-1]
    inverse = solve_lower(lower, kg.eye(n, dtype=lower.dtype, device=lower.device))
    return kg.matmul(inverse.mT, inverse)


def _precision_to_scale_tril(precision: Tensor) -> Tensor:
    """The lower factor of the covariance from the precision matrix, as PyTorch computes
    it (the factor of the flipped precision, flipped and inverted)."""
    lf = cholesky(kg.flip(precision, (-2, -1)), "MultivariateNormal(precision_matrix=...)")
    l_inv = kg.flip(lf, (-2, -1)).mT
    eye = kg.eye(precision.shape[-1], dtype=precision.dtype, device=precision.device)
    return solve_lower(l_inv, eye)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution with mean ``loc``, given one of
    ``covariance_matrix``, ``precision_matrix`` or ``scale_tril`` (the lower Cholesky
    factor of the covariance)."""

    arg_constraints: ClassVar[dict[str, constraints.Constraint]] = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if loc.dim() < 1:
            raise ArgumentError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, scale_tril, precision_matrix) if m is not None]
        if len(given) != 1:
            raise ArgumentError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        matrix = given[0]
        name = (
            "scale_tril"
            if scale_tril is not None
            else "covariance_matrix"
            if covariance_matrix is not None
            else "precision_matrix"
        )
        if matrix.dim() < 2:
            raise ArgumentError(
                f"{name} matrix must be at least two-dimensional, with optional leading "
                "batch dimensions"
            )
        batch_shape = tuple(kg.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        setattr(self, name, matrix.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        event_shape = tuple(self.loc.shape[-1:])
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(
                covariance_matrix, "MultivariateNormal(covariance_matrix=...)"
            )
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape: Any, _instance: Any = None) -> MultivariateNormal:
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        super(MultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple[int, ...]:
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        lower = self._unbroadcasted_scale_tril
        return kg.matmul(lower, lower.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        return _cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return (
            self._unbroadcasted_scale_tril.pow(2)
            .sum(-1)
            .expand(tuple(self._batch_shape) + tuple(self._event_shape))
        )

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Any) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self) -> Tensor:
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return h
        return h.expand(tuple(self._batch_shape))
