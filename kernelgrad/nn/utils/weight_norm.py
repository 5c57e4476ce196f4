"""Weight normalisation with PyTorch's original hook API (``torch.nn.utils.weight_norm``,
deprecated there in favour of ``nn.utils.parametrizations.weight_norm``): the parameter
``weight`` becomes ``weight_g`` (magnitude) and ``weight_v`` (direction), and a forward
pre-hook recomputes ``weight = weight_v * weight_g / ||weight_v||`` before every call.

>>> import kernelgrad as kg, warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     m = kg.nn.utils.weight_norm(kg.nn.Linear(20, 40))
>>> m.weight_g.shape, m.weight_v.shape, list(m.state_dict())
(kg.Size([40, 1]), kg.Size([40, 20]), ['bias', 'weight_g', 'weight_v'])
"""

from __future__ import annotations

import warnings
from typing import Any, TypeVar

from ...errors import ArgumentError
from ._norms import norm_except_dim
from ._norms import weight_norm as _weight_norm

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]

T = TypeVar("T")


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and
    ``<name>_v`` (PyTorch's class of that name)."""

    name: str
    dim: int

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Any) -> Any:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module: Any, name: str, dim: int | None) -> WeightNorm:
        from ..lazy import UninitializedParameter
        from ..module import Parameter

        warnings.warn(
            "`torch.nn.utils.weight_norm` is deprecated in favor of "
            "`torch.nn.utils.parametrizations.weight_norm`.",
            FutureWarning,
            stacklevel=3,
        )
        for hook in module.__dict__.get("_forward_pre_hooks", {}).values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise ArgumentError(
                    f"Cannot register two weight_norm hooks on the same parameter {name}"
                )
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ArgumentError(
                "The module passed to `WeightNorm` can't have uninitialized parameters. "
                "Make sure to run the dummy forward before applying weight normalization"
            )
        if not isinstance(weight, Parameter):
            raise ArgumentError(
                f"weight_norm: {type(module).__name__}.{name} is not a parameter; pass the "
                "name of one (name='weight')"
            )
        delattr(module, name)
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Any) -> None:
        from ..module import Parameter

        weight = self.compute_weight(module)
        delattr(module, self.name)
        delattr(module, self.name + "_g")
        delattr(module, self.name + "_v")
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module: Any, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: T, name: str = "weight", dim: int | None = 0) -> T:
    """Replace ``module.<name>`` by ``<name>_g`` (its norm over every dim but ``dim``;
    ``dim=None``: of the whole tensor) and ``<name>_v`` (the weight), recombined before
    every forward. Warns (``FutureWarning``) as PyTorch does: the parametrization form
    ``kg.nn.utils.parametrizations.weight_norm`` is the current one."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: T, name: str = "weight") -> T:
    """Put the recombined weight back as a plain parameter ``<name>``."""
    hooks = module.__dict__.get("_forward_pre_hooks", {})
    for key, hook in list(hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del hooks[key]
            return module
    raise ArgumentError(f"weight_norm of '{name}' not found in {module}")
