"""``kg.utils.hooks``: PyTorch's ``torch.utils.hooks`` names: ``RemovableHandle`` (what
every ``register_*_hook`` returns) and ``BackwardHook`` (how module backward hooks are
attached; kernelgrad/nn/_module_hooks.py).

>>> import kernelgrad as kg
>>> handle = kg.nn.Linear(2, 2).register_forward_hook(lambda m, args, out: None)
>>> isinstance(handle, kg.utils.hooks.RemovableHandle)
True
"""

from ..nn._module_hooks import BackwardHook, RemovableHandle

__all__ = ["BackwardHook", "RemovableHandle"]
