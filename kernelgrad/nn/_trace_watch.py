"""What ``kg.compile`` watches of the modules a traced function calls.

A replay runs the recorded kernels without running Python, so it must not follow a
change of the Python-side state that a module's ``forward`` reads: ``model.eval()``
(Dropout stops dropping, BatchNorm uses its running statistics), a setting
(``bn.momentum``), a parameter, buffer or sub-module replaced (``lin.bias.data = t``,
``m.weight = nn.Parameter(t)``, ``m[2] = nn.Linear(...)``, ``m.double()``) or a
parameter frozen (``requires_grad_(False)``: backward no longer computes its gradient).

While a trace records, ``Module.__call__`` reports each module called
(:func:`report_call`); when the trace ends, the recorder makes one :class:`ModuleWatch`
of all of them and every replay first calls its :meth:`~ModuleWatch.unchanged`, which
compares, *by identity*, every attribute of those modules and of the modules inside
them, the memory, layout, dtype and ``requires_grad`` of every tensor among those
attributes, and the ids of the hooks that ``__call__`` runs. A change traces again.

Identity is both cheap (the whole check is a few C-level loops) and safe: a value the
check holds cannot be freed, so its id cannot be reused, and a tensor is never compared
with ``==`` (which is elementwise). Replacing an attribute with an equal new object
(``m.p = 0.5`` when it was 0.5) traces once more, which is harmless. What the check
does not see: changes inside a mutable attribute (a list or dict your own module keeps),
and the Python-side effects of the traced function itself, which replays do not repeat.
"""

from __future__ import annotations

from itertools import chain
from operator import attrgetter, is_
from typing import Any

from .. import tracing
from ..tensor import Tensor
from . import _module_hooks

# what a replay's kernels depend on in a tensor held by a module, besides its values:
# the storage (``.data = t``, ``to()``), the view of it, the dtype and ``requires_grad``
# (whether backward computes a gradient for it)
_TENSOR_STATE = attrgetter("_storage", "_shape", "_strides", "_offset", "dtype", "requires_grad")
_ABSENT = object()


def report_call(module: Any) -> None:
    """``Module.__call__``'s report to the trace in progress on this thread, if any
    (each module is watched once per trace, however often it is called)."""
    recorder = tracing.active_recorder()
    if recorder is not None:
        recorder.watch_module(module, ModuleWatch)


class ModuleWatch:
    """The Python-side state of some modules (and of every module inside them) at the
    end of a trace, and :meth:`unchanged`, the check before each replay."""

    def __init__(self, modules: list[Any]) -> None:
        every: dict[int, Any] = {}
        for called in modules:
            # the modules inside too: a forward may read a child's parameter without
            # calling the child (``F.linear(x, self.fc.weight)``)
            for module in called.modules():
                every.setdefault(id(module), module)
        self.modules = list(every.values())
        self.dicts = [module.__dict__ for module in self.modules]
        self.copies = [dict(d) for d in self.dicts]  # for describe()
        self.names = list(chain.from_iterable(self.dicts))
        self.values = list(chain.from_iterable(map(dict.values, self.dicts)))
        self.tensors = [value for value in self.values if isinstance(value, Tensor)]
        self.tensor_states = list(map(_TENSOR_STATE, self.tensors))
        # the hooks __call__ runs: the modules' own (tables created later show as new
        # attributes) and the global ones; compared by handle ids
        self.hook_tables = [
            table
            for d in self.dicts
            for name, table in d.items()
            if name in _module_hooks._CALL_TABLES
        ] + [
            _module_hooks._global_forward_pre_hooks,
            _module_hooks._global_forward_hooks,
            _module_hooks._global_backward_pre_hooks,
            _module_hooks._global_backward_hooks,
        ]
        self.hook_ids = list(map(tuple, self.hook_tables))

    def unchanged(self) -> bool:
        """Whether every module still holds the very objects it held at the end of the
        trace, its tensors the same memory, layout, dtype and ``requires_grad``, and
        the same hooks are registered."""
        # Names compare with ==, and so do the tensors' states (a Storage and a DType
        # compare by identity); the attributes' values by identity: a tensor's == is
        # elementwise. The same names (so as many) first, so that the values' check,
        # which stops at the shorter sequence, sees them all.
        return (
            list(chain.from_iterable(self.dicts)) == self.names
            and all(map(is_, chain.from_iterable(map(dict.values, self.dicts)), self.values))
            and list(map(_TENSOR_STATE, self.tensors)) == self.tensor_states
            and list(map(tuple, self.hook_tables)) == self.hook_ids
        )

    def describe(self) -> str:
        """What changed (for the log and the warning about repeated traces)."""
        states = dict(zip(map(id, self.tensors), self.tensor_states))
        for module, before in zip(self.modules, self.copies):
            now = module.__dict__
            kind = type(module).__name__
            for name in chain(before, (name for name in now if name not in before)):
                old, new = before.get(name, _ABSENT), now.get(name, _ABSENT)
                if old is not new:
                    if name == "training":
                        return (
                            f"the mode of {kind} (train()/eval(); a function compiled for "
                            "each mode traces each once)"
                        )
                    if old is _ABSENT or new is _ABSENT:
                        return f"the attributes of {kind} ({name!r} added or removed)"
                    return f"{kind}.{name}"
                state = states.get(id(new))
                if state is not None and _TENSOR_STATE(new) != state:
                    return (
                        f"the tensor {kind}.{name} (its memory, layout, dtype or "
                        "requires_grad; new values written in place, `copy_()` under "
                        "kg.no_grad(), need no new trace)"
                    )
        return "the hooks registered on modules"
