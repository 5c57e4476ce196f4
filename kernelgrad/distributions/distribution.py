"""torch.distributions.Distribution: the base class (shapes, argument validation,
``sample``/``rsample``, and the methods every distribution may define)."""

from __future__ import annotations

from typing import Any

import kernelgrad as kg

from ..errors import ArgumentError
from ..shapes import Size
from ..tensor import Tensor
from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


class Distribution:
    """A probability distribution with ``batch_shape`` independent (not necessarily
    identical) members, each over events of ``event_shape``."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Whether distributions check their arguments and samples by default (on, as
        PyTorch's, unless Python runs with ``-O``)."""
        if value not in [True, False]:
            raise ArgumentError(f"set_default_validate_args expects True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(
        self,
        batch_shape: Any = (),
        event_shape: Any = (),
        validate_args: bool | None = None,
    ) -> None:
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # cannot be checked
                if param not in self.__dict__ and isinstance(
                    getattr(type(self), param), lazy_property
                ):
                    continue  # computed lazily from the other parameterisation
                value = getattr(self, param)
                valid = constraint.check(value)
                if not valid.all().item():
                    raise ArgumentError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}\n"
                        "Pass values inside the constraint (validate_args=False skips "
                        "this check)"
                    )

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        """A new distribution with the parameters expanded to ``batch_shape`` (views,
        no copies, and no repeated validation)."""
        raise NotImplementedError

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        raise NotImplementedError

    @property
    def support(self) -> Any:
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """A sample of shape ``sample_shape + batch_shape + event_shape`` (no gradient)."""
        with kg.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """A reparameterised sample: differentiable with respect to the parameters."""
        raise NotImplementedError(
            f"{type(self).__name__} has no reparameterised sampler (has_rsample is False): "
            "use sample(), and a score-function estimator for gradients"
        )

    def sample_n(self, n: int) -> Tensor:
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        return kg.exp(self.entropy())

    def _extended_shape(self, sample_shape: Any = ()) -> Size:
        """``sample_shape + batch_shape + event_shape``."""
        return Size(tuple(Size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Any) -> None:
        if not isinstance(value, Tensor):
            raise ArgumentError(
                f"The value argument to log_prob must be a Tensor, got {type(value).__name__}; "
                "wrap it with kg.tensor(...)"
            )
        shape = tuple(value.shape)
        event_dim_start = len(shape) - len(self._event_shape)
        if shape[event_dim_start:] != tuple(self._event_shape):
            raise ArgumentError(
                f"The right-most size of value must match event_shape: {Size(shape)} vs "
                f"{self._event_shape}."
            )
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(shape), reversed(expected_shape), strict=False):
            if i != 1 and j != 1 and i != j:
                raise ArgumentError(
                    "Value is not broadcastable with batch_shape+event_shape: "
                    f"{Size(shape)} vs {Size(expected_shape)}."
                )
        try:
            support = self.support
        except NotImplementedError:
            return
        valid = support.check(value)
        if not valid.all().item():
            raise ArgumentError(
                f"Expected value argument ({type(value).__name__} of shape {shape}) to be "
                f"within the support ({support!r}) of the distribution {self!r}, but found "
                f"invalid values:\n{value}\n(validate_args=False skips this check)"
            )

    def _expanded(self, cls: type, batch_shape: Any, _instance: Any, names: tuple) -> Any:
        """``expand`` of a distribution whose parameters ``names`` all have its batch
        shape: each expanded to ``batch_shape`` (views), ``cls``'s base initialised
        without validation, the validation setting kept."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = Size(batch_shape)
        for name in names:
            setattr(new, name, getattr(self, name).expand(batch_shape))
        super(cls, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls: type, _instance: Any = None) -> Any:
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        parts = []
        for name in names:
            value = self.__dict__[name]
            parts.append(f"{name}: {value if value.numel() == 1 else value.size()}")
        return self.__class__.__name__ + "(" + ", ".join(parts) + ")"
