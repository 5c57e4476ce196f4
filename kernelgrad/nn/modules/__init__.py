"""``kg.nn.modules``: PyTorch's ``torch.nn.modules`` path. Its ``module`` submodule has
``Module`` and the global hooks (``kg.nn.modules.module.register_module_forward_hook``,
...); every layer class of :mod:`kernelgrad.nn` is also reachable here
(``kg.nn.modules.Linear``), as in PyTorch.

>>> import kernelgrad as kg
>>> kg.nn.modules.Linear is kg.nn.Linear
True
>>> from kernelgrad.nn.modules.module import register_module_forward_hook
"""

from __future__ import annotations

from typing import Any

from . import module

__all__ = ["module"]


def __getattr__(name: str) -> Any:
    from ... import nn

    if not name.startswith("_") and name in nn.__all__:
        return getattr(nn, name)
    raise AttributeError(f"module 'kernelgrad.nn.modules' has no attribute {name!r}")
