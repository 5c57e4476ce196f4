"""Containers: ``Sequential``, ``ModuleList`` and ``ModuleDict``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import DTypeError, IndexingError, UnsupportedError
from .activation import ReLU
from .module import Module
from .pooling import MaxPool2d

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


class Sequential(Module):
    """Modules applied one after another; children are named ``"0"``, ``"1"``, ... (or
    by the keys of an ``OrderedDict``).

    >>> import kernelgrad as kg
    >>> net = kg.nn.Sequential(kg.nn.Linear(2, 3), kg.nn.ReLU())
    >>> net(kg.ones(1, 2)).shape, len(net), type(net[1]).__name__
    ((1, 3), 2, 'ReLU')
    """

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], Mapping):
            for name, module in modules[0].items():
                self.add_module(str(name), module)
        else:
            for index, module in enumerate(modules):
                self.add_module(str(index), module)

    def _items(self) -> list[tuple[str, Module]]:
        return list(self.named_children())

    def __getitem__(self, index: int | slice) -> Any:
        items = self._items()
        if isinstance(index, slice):
            return Sequential(OrderedDict(items[index]))
        return items[_checked_index(index, len(items), "Sequential")][1]

    def __setitem__(self, index: int, module: Module) -> None:
        items = self._items()
        setattr(self, items[_checked_index(index, len(items), "Sequential")][0], module)

    def __len__(self) -> int:
        return len(self._items())

    def __iter__(self) -> Iterator[Module]:
        return iter(module for _, module in self._items())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def forward(self, x: Any) -> Any:
        modules = list(self)
        i = 0
        while i < len(modules):
            module = modules[i]
            if _pool_then_relu(module, modules[i + 1] if i + 1 < len(modules) else None):
                x = module.forward_relu(x)  # the same values and gradients, fewer kernels
                i += 2
            else:
                x = module(x)
                i += 1
        return x


class ModuleList(Module):
    """A list of modules whose parameters the parent module finds.

    >>> import kernelgrad as kg
    >>> layers = kg.nn.ModuleList([kg.nn.Linear(2, 2) for _ in range(3)])
    >>> len(layers), len(list(layers.parameters()))
    (3, 6)
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "_list", [])
        if modules is not None:
            self.extend(modules)

    def _sync(self) -> None:
        # Children are attributes named "0", "1", ...: rebuild them after an edit.
        for name in [n for n, _ in self.named_children()]:
            object.__delattr__(self, name)
        for index, module in enumerate(self._list):
            object.__setattr__(self, str(index), module)

    def append(self, module: Module) -> ModuleList:
        if not isinstance(module, Module):
            raise DTypeError(f"ModuleList holds modules, got {type(module).__name__}")
        self._list.append(module)
        object.__setattr__(self, str(len(self._list) - 1), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        self._list.insert(index, module)
        self._sync()

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return ModuleList(self._list[index])
        return self._list[_checked_index(index, len(self._list), "ModuleList")]

    def __setitem__(self, index: int, module: Module) -> None:
        self._list[_checked_index(index, len(self._list), "ModuleList")] = module
        self._sync()

    def __delitem__(self, index: int | slice) -> None:
        del self._list[index]
        self._sync()

    def __len__(self) -> int:
        return len(self._list)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._list))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError("ModuleList has no forward(); iterate over it in your own")


class ModuleDict(Module):
    """A dict of modules (string keys) whose parameters the parent module finds."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "_keys", [])
        if modules is not None:
            for key, module in modules.items():
                self[key] = module

    def __getitem__(self, key: str) -> Module:
        if key not in self._keys:
            raise KeyError(key)
        return self.__dict__[key]

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise DTypeError(f"ModuleDict holds modules, got {type(module).__name__}")
        if key not in self._keys:
            self._keys.append(key)
        setattr(self, key, module)

    def __delitem__(self, key: str) -> None:
        self._keys.remove(key)
        object.__delattr__(self, key)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def keys(self) -> list[str]:
        return list(self._keys)

    def values(self) -> list[Module]:
        return [self.__dict__[k] for k in self._keys]

    def items(self) -> list[tuple[str, Module]]:
        return [(k, self.__dict__[k]) for k in self._keys]


def _checked_index(index: int, length: int, what: str) -> int:
    if not -length <= index < length:
        raise IndexingError(f"{what} index {index} is out of range for {length} modules")
    return index % length


def _pool_then_relu(module: Module, following: Module | None) -> bool:
    """A ``MaxPool2d`` directly followed by a ``ReLU``: ``Sequential`` runs the pair as
    ``F.max_pool2d_relu`` (one kernel forward and one backward instead of two each)."""
    fusable = type(module) is MaxPool2d and not module.return_indices
    return fusable and type(following) is ReLU
