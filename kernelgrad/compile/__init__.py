"""``kg.compile``: trace a function of tensors once, fuse its kernels, replay it.

``kg.compile`` is this package, and calling it is calling :func:`compile`::

    step = kg.compile(train_step)
    loss = step(x, y)          # first call: runs eagerly (creates lazily made state)
    loss = step(x, y)          # second call: traced (runs eagerly), then compiled
    loss = step(x, y)          # later calls with the same shapes: replayed

See :func:`compile` for the contract, and :mod:`.trace`, :mod:`.graph`, :mod:`.plan`
for how it works.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["compile", "CompiledFunction", "TraceError", "count_launches"]


def __getattr__(name: str) -> Any:
    if name in ("compile", "CompiledFunction", "count_launches"):
        from . import api

        return getattr(api, name)
    if name == "TraceError":
        from .trace import TraceError

        return TraceError
    raise AttributeError(f"module 'kernelgrad.compile' has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """``kg.compile`` names both this package and the function: calling the package
    calls :func:`kernelgrad.compile.api.compile`."""

    def __call__(self, fn: Any = None, **options: Any) -> Any:
        from .api import compile as compile_function

        return compile_function(fn, **options)


sys.modules[__name__].__class__ = _CallableModule
