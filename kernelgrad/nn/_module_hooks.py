"""``Module.register_forward_pre_hook`` and ``Module.register_forward_hook``: PyTorch's
forward hooks, run by ``Module.__call__`` around ``forward``.

The hooks live in the module's ``_forward_pre_hooks`` and ``_forward_hooks`` (ordered
dicts from a handle id to the hook, as in PyTorch), created on first registration, so a
module without hooks is called exactly as before. Backward hooks on modules
(``register_full_backward_hook``) do not exist; tensors have ``register_hook``."""

from __future__ import annotations

import itertools
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

_ids = itertools.count()


class RemovableHandle:
    """``torch.utils.hooks.RemovableHandle``: ``remove()`` unregisters the hook (also as
    a context manager: the hook is removed when the ``with`` block ends)."""

    def __init__(self, hooks: OrderedDict, extra: tuple[dict, ...] = ()) -> None:
        self.id = next(_ids)
        self.hooks_dict_ref = weakref.ref(hooks)
        self._extra = extra

    def remove(self) -> None:
        hooks = self.hooks_dict_ref()
        if hooks is not None:
            hooks.pop(self.id, None)
        for table in self._extra:
            table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _table(module: Any, name: str) -> Any:
    table = module.__dict__.get(name)
    if table is None:
        table = OrderedDict() if name in ("_forward_pre_hooks", "_forward_hooks") else {}
        object.__setattr__(module, name, table)
    return table


def register(
    module: Any,
    kind: str,
    hook: Callable,
    prepend: bool,
    with_kwargs: bool,
    always_call: bool = False,
) -> RemovableHandle:
    """Add ``hook`` to ``module``'s ``kind`` ("_forward_pre_hooks" or "_forward_hooks")."""
    if not callable(hook):
        raise TypeError(f"a forward hook must be callable, got {type(hook).__name__}")
    hooks = _table(module, kind)
    flags = _table(module, kind + "_with_kwargs")
    extra = [flags]
    if kind == "_forward_hooks":
        extra.append(_table(module, "_forward_hooks_always_called"))
    handle = RemovableHandle(hooks, tuple(extra))
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    if with_kwargs:
        flags[handle.id] = True
    if always_call:
        extra[1][handle.id] = True
    return handle


def call(module: Any, args: tuple, kwargs: dict) -> Any:
    """``module(*args, **kwargs)`` with its forward pre-hooks and hooks, as PyTorch runs
    them: each pre-hook may replace the arguments, each hook the output."""
    table = module.__dict__
    pre_with_kwargs = table.get("_forward_pre_hooks_with_kwargs") or {}
    for hook_id, hook in list((table.get("_forward_pre_hooks") or {}).items()):
        if hook_id in pre_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(
                        "forward pre-hook must return None or a tuple of (new_args, "
                        f"new_kwargs), but got {result}."
                    )
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    hooks = table.get("_forward_hooks") or {}
    with_kwargs = table.get("_forward_hooks_with_kwargs") or {}
    always = table.get("_forward_hooks_always_called") or {}
    try:
        output = module.forward(*args, **kwargs)
    except Exception:
        for hook_id, hook in list(hooks.items()):
            if hook_id in always:
                try:
                    if hook_id in with_kwargs:
                        hook(module, args, kwargs, None)
                    else:
                        hook(module, args, None)
                except Exception as error:  # the forward's error is the one raised
                    warnings.warn(
                        "module forward hook with ``always_call=True`` raised an exception "
                        f"that was silenced as another error was raised in forward: {error}",
                        stacklevel=3,
                    )
        raise
    for hook_id, hook in list(hooks.items()):
        if hook_id in with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output
