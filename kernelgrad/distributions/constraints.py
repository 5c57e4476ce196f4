"""torch.distributions.constraints: the regions a parameter or a sample must lie in, as
objects with ``check(value)`` (a boolean tensor over the batch), ``is_discrete`` and
``event_dim``, with PyTorch's names and reprs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kernelgrad as kg

from ..errors import ArgumentError

__all__ = [
    "Constraint",
    "boolean",
    "cat",
    "corr_cholesky",
    "dependent",
    "dependent_property",
    "greater_than",
    "greater_than_eq",
    "half_open_interval",
    "independent",
    "integer_interval",
    "interval",
    "is_dependent",
    "less_than",
    "lower_cholesky",
    "lower_triangular",
    "multinomial",
    "nonnegative",
    "nonnegative_integer",
    "one_hot",
    "positive",
    "positive_definite",
    "positive_integer",
    "positive_semidefinite",
    "real",
    "real_vector",
    "simplex",
    "square",
    "stack",
    "symmetric",
    "unit_interval",
]


class Constraint:
    """A region over which a variable is valid. ``check`` returns a boolean tensor of
    ``sample_shape + batch_shape`` (the ``event_dim`` rightmost dims reduced)."""

    is_discrete = False
    event_dim = 0

    def check(self, value: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for variables whose support depends on other variables."""

    def __init__(self, *, is_discrete: Any = NotImplemented, event_dim: Any = NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim
        super().__init__()

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(
        self, *, is_discrete: Any = NotImplemented, event_dim: Any = NotImplemented
    ) -> _Dependent:
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x: Any) -> Any:
        raise ArgumentError("Cannot determine validity of dependent constraint")


def is_dependent(constraint: Any) -> bool:
    """Whether ``constraint`` is a dependent (uncheckable) constraint."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property on instances, a dependent constraint on the class
    (``@constraints.dependent_property(is_discrete=False, event_dim=0)``)."""

    def __init__(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        is_discrete: Any = NotImplemented,
        event_dim: Any = NotImplemented,
    ) -> None:
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn: Callable[..., Any]) -> _DependentProperty:  # type: ignore[override]
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """A constraint reduced over ``reinterpreted_batch_ndims`` more dims: an event is
    valid only when all its entries are."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int) -> None:
        if not isinstance(base_constraint, Constraint):
            raise ArgumentError(
                f"base_constraint must be a Constraint, got {type(base_constraint).__name__}"
            )
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise ArgumentError(
                f"reinterpreted_batch_ndims must be an int >= 0, got {reinterpreted_batch_ndims!r}"
            )
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__()

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value: Any) -> Any:
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            expected = self.base_constraint.event_dim + self.reinterpreted_batch_ndims
            raise ArgumentError(f"Expected value.dim() >= {expected} but got {value.dim()}")
        result = result.reshape(
            tuple(result.shape[: result.dim() - self.reinterpreted_batch_ndims]) + (-1,)
        )
        return result.all(-1)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__[1:]}({self.base_constraint!r}, "
            f"{self.reinterpreted_batch_ndims})"
        )


class _Boolean(Constraint):
    """The two values ``{0, 1}``."""

    is_discrete = True

    def check(self, value: Any) -> Any:
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    """One-hot vectors."""

    is_discrete = True
    event_dim = 1

    def check(self, value: Any) -> Any:
        is_boolean = (value == 0) | (value == 1)
        is_normalized = value.sum(-1).eq(1)
        return is_boolean.all(-1) & is_normalized


class _Bounds(Constraint):
    """Shared repr of the bounded constraints."""

    _names: tuple[str, ...] = ()

    def __repr__(self) -> str:
        bounds = ", ".join(f"{name}={getattr(self, name)}" for name in self._names)
        return f"{self.__class__.__name__[1:]}({bounds})"


class _IntegerInterval(_Bounds):
    """An integer interval ``[lower_bound, upper_bound]``."""

    is_discrete = True
    _names = ("lower_bound", "upper_bound")

    def __init__(self, lower_bound: Any, upper_bound: Any) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)


class _IntegerLessThan(_Bounds):
    """An integer interval ``(-inf, upper_bound]``."""

    is_discrete = True
    _names = ("upper_bound",)

    def __init__(self, upper_bound: Any) -> None:
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (value <= self.upper_bound)


class _IntegerGreaterThan(_Bounds):
    """An integer interval ``[lower_bound, inf)``."""

    is_discrete = True
    _names = ("lower_bound",)

    def __init__(self, lower_bound: Any) -> None:
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (value >= self.lower_bound)


class _Real(Constraint):
    """The extended real line ``[-inf, inf]`` (NaN is outside)."""

    def check(self, value: Any) -> Any:
        return value == value


class _GreaterThan(_Bounds):
    """A half line ``(lower_bound, inf]``."""

    _names = ("lower_bound",)

    def __init__(self, lower_bound: Any) -> None:
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return self.lower_bound < value


class _GreaterThanEq(_Bounds):
    """A half line ``[lower_bound, inf)``."""

    _names = ("lower_bound",)

    def __init__(self, lower_bound: Any) -> None:
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return self.lower_bound <= value


class _LessThan(_Bounds):
    """A half line ``[-inf, upper_bound)``."""

    _names = ("upper_bound",)

    def __init__(self, upper_bound: Any) -> None:
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return value < self.upper_bound


class _Interval(_Bounds):
    """A real interval ``[lower_bound, upper_bound]``."""

    _names = ("lower_bound", "upper_bound")

    def __init__(self, lower_bound: Any, upper_bound: Any) -> None:
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (self.lower_bound <= value) & (value <= self.upper_bound)


class _HalfOpenInterval(_Interval):
    """A real interval ``[lower_bound, upper_bound)``."""

    def check(self, value: Any) -> Any:
        return (self.lower_bound <= value) & (value < self.upper_bound)


class _Simplex(Constraint):
    """The unit simplex over the last dim: ``x >= 0`` and ``x.sum(-1) == 1``."""

    event_dim = 1

    def check(self, value: Any) -> Any:
        return kg.all(value >= 0, dim=-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Multinomial(Constraint):
    """Non-negative integer counts summing to at most ``upper_bound``."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound: Any) -> None:
        self.upper_bound = upper_bound

    def check(self, x: Any) -> Any:
        return (x >= 0).all(dim=-1) & (x.sum(dim=-1) <= self.upper_bound)


def _all_last(mask: Any, ndims: int) -> Any:
    return mask.reshape(tuple(mask.shape[: mask.dim() - ndims]) + (-1,)).all(-1)


class _LowerTriangular(Constraint):
    """Lower-triangular square matrices."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        return _all_last(value.tril() == value, 2)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with a positive diagonal."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        positive_diagonal = (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)
        return _all_last(value.tril() == value, 2) & positive_diagonal


class _CorrCholesky(Constraint):
    """Lower Cholesky factors whose rows have unit length."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        tol = kg.finfo(value.dtype).eps * value.shape[-1] * 10
        row_norm = value.detach().pow(2).sum(-1).sqrt()
        unit_row_norm = (row_norm - 1.0).abs().le(tol).all(dim=-1)
        return _LowerCholesky().check(value) & unit_row_norm


class _Square(Constraint):
    """Square matrices."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        return kg.full(
            tuple(value.shape[:-2]),
            value.shape[-2] == value.shape[-1],
            dtype=kg.bool,
            device=value.device,
        )


class _Symmetric(_Square):
    """Symmetric square matrices."""

    def check(self, value: Any) -> Any:
        square_check = super().check(value)
        if not square_check.all().item():
            return square_check
        return kg.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    """Positive-semidefinite matrices: symmetric, eigenvalues >= 0 (PyTorch's check)."""

    def check(self, value: Any) -> Any:
        sym_check = super().check(value)
        if not sym_check.all().item():
            return sym_check
        return kg.linalg.eigvalsh(value.detach()).ge(0).all(-1)


class _PositiveDefinite(_Symmetric):
    """Positive-definite matrices (the Cholesky factorisation succeeds)."""

    def check(self, value: Any) -> Any:
        sym_check = super().check(value)
        if not sym_check.all().item():
            return sym_check
        from ._linalg import cholesky_pivots

        return cholesky_pivots(value.detach())[1] > 0


class _Cat(Constraint):
    """Constraints applied to consecutive pieces along ``dim`` (as ``torch.cat``)."""

    def __init__(self, cseq: Any, dim: int = 0, lengths: Any = None) -> None:
        self.cseq = list(cseq)
        if not all(isinstance(c, Constraint) for c in self.cseq):
            raise ArgumentError("All elements of cseq must be Constraint instances")
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.cseq)
        if len(self.lengths) != len(self.cseq):
            raise ArgumentError(f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")
        self.dim = dim

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(c.event_dim for c in self.cseq)

    def check(self, value: Any) -> Any:
        checks = []
        start = 0
        for constraint, length in zip(self.cseq, self.lengths, strict=True):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start = start + length
        return kg.cat(checks, self.dim)


class _Stack(Constraint):
    """Constraints applied to the slices along ``dim`` (as ``torch.stack``)."""

    def __init__(self, cseq: Any, dim: int = 0) -> None:
        self.cseq = list(cseq)
        if not all(isinstance(c, Constraint) for c in self.cseq):
            raise ArgumentError("All elements of cseq must be Constraint instances")
        self.dim = dim

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        dim = max(c.event_dim for c in self.cseq)
        if self.dim + dim < 0:
            dim += 1
        return dim

    def check(self, value: Any) -> Any:
        slices = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
        return kg.stack([c.check(v) for v, c in zip(slices, self.cseq, strict=True)], self.dim)


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
