"""``kg.nn.modules.module``: PyTorch's ``torch.nn.modules.module``: ``Module`` and the
hooks that run for every module (kernelgrad/nn/_module_hooks.py).

>>> import kernelgrad as kg
>>> from kernelgrad.nn.modules.module import register_module_forward_hook
>>> seen = []
>>> handle = register_module_forward_hook(lambda m, args, out: seen.append(type(m).__name__))
>>> _ = kg.nn.Sequential(kg.nn.Linear(2, 2), kg.nn.ReLU())(kg.ones(1, 2))
>>> handle.remove()
>>> seen
['Linear', 'ReLU', 'Sequential']
"""

from .._module_hooks import (
    RemovableHandle,
    register_module_backward_hook,
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)
from ..module import Buffer, Module, Parameter

__all__ = [
    "Buffer",
    "Module",
    "Parameter",
    "RemovableHandle",
    "register_module_backward_hook",
    "register_module_forward_hook",
    "register_module_forward_pre_hook",
    "register_module_full_backward_hook",
    "register_module_full_backward_pre_hook",
]
