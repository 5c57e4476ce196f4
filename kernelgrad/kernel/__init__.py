"""User kernels: one Python function that runs on the CPU or on a CUDA GPU.

``kg.kernel`` is this package, and calling it is calling :func:`kernel`::

    @kg.kernel
    def clamp_(img):
        i = kg.index()
        ...

Also here: the markers a kernel body uses (``kg.index``, ``kg.local_index``,
``kg.group_index``, ``kg.shared``, ``kg.private``, ``kg.barrier``), fused elementwise functions
(``kg.elementwise``) and differentiable user functions (``kg.custom_vjp``).

Importing this package does not import Numba; the first launch does.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .markers import barrier, group_index, index, local_index, private, shared

__all__ = [
    "kernel",
    "Kernel",
    "index",
    "local_index",
    "group_index",
    "shared",
    "private",
    "barrier",
    "elementwise",
    "custom_vjp",
]

_LAZY = {
    "Kernel": (".launch", "Kernel"),
    "kernel": (".launch", "kernel"),
    "elementwise": (".scalar", "elementwise"),
    "ElementwiseFunction": (".scalar", "ElementwiseFunction"),
    "custom_vjp": (".vjp", "custom_vjp"),
}


def __getattr__(name: str) -> Any:
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module 'kernelgrad.kernel' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(entry[0], __name__)
    return getattr(module, entry[1])


class _CallableModule(types.ModuleType):
    """``kg.kernel`` names both this package and the decorator: calling the package
    calls :func:`kernelgrad.kernel.launch.kernel`."""

    def __call__(self, fn: Any = None, **options: Any) -> Any:
        from .launch import kernel

        return kernel(fn, **options)


sys.modules[__name__].__class__ = _CallableModule
