"""``skip_init`` (PyTorch's ``torch.nn.utils.init``)."""

from __future__ import annotations

import inspect
from typing import Any

from ...errors import ArgumentError, DTypeError

__all__ = ["skip_init"]


def skip_init(module_cls: Any, *args: Any, **kwargs: Any) -> Any:
    """Build ``module_cls(*args, **kwargs)`` on ``device`` (default "cpu") with its
    parameters and buffers left uninitialised, for a program that initialises them
    itself. As in PyTorch the class must take a ``device`` argument. Difference:
    kernelgrad has no "meta" device, so the module is built directly on ``device`` and
    its constructor's initialisation runs (the values are valid but arbitrary, which is
    what "uninitialised" promises); nothing is faster than plain construction.

    >>> import kernelgrad as kg
    >>> kg.nn.utils.skip_init(kg.nn.Linear, 5, 1).weight.shape
    kg.Size([1, 5])
    """
    from ..module import Module

    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise DTypeError(f"skip_init: Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise ArgumentError(
            f"skip_init: Module must support a 'device' arg to skip initialization "
            f"({module_cls.__name__}.__init__ has none); construct it directly instead"
        )
    kwargs.setdefault("device", "cpu")
    return module_cls(*args, **kwargs)
