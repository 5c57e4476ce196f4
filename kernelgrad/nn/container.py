"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList`` and
``ParameterDict``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import ArgumentError, DTypeError, IndexingError, UnsupportedError
from ..tensor import Tensor
from .activation import ReLU
from .module import Module, Parameter
from .pooling import MaxPool2d

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


class Sequential(Module):
    """Modules applied one after another; children are named ``"0"``, ``"1"``, ... (or
    by the keys of an ``OrderedDict``).

    >>> import kernelgrad as kg
    >>> net = kg.nn.Sequential(kg.nn.Linear(2, 3), kg.nn.ReLU())
    >>> net(kg.ones(1, 2)).shape, len(net), type(net[1]).__name__
    (kg.Size([1, 3]), 2, 'ReLU')
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


def _as_parameter(value: Any) -> Any:
    """A plain tensor becomes a Parameter (sharing its memory), as in PyTorch."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _parameter_repr(value: Any) -> str:
    if isinstance(value, Tensor):
        kind = "Parameter containing" if isinstance(value, Parameter) else "Tensor"
        size = "x".join(map(str, value.shape))
        return f"{kind}: [{value.dtype} of size {size}]"
    return f"Object of type: {type(value).__name__}"


def _container_repr(container: Module, items: Iterable[tuple[Any, Any]]) -> str:
    lines = [f"  ({key}): {_parameter_repr(value)}" for key, value in items]
    return (
        f"{type(container).__name__}("
        + "".join("\n" + line for line in lines)
        + ("\n)" if lines else ")")
    )


class ParameterList(Module):
    """A list of parameters whose parent module finds them (named ``"0"``, ``"1"``, ...
    in ``named_parameters`` and ``state_dict``); plain tensors are wrapped as
    ``Parameter``.

    >>> import kernelgrad as kg
    >>> params = kg.nn.ParameterList([kg.zeros(2), kg.ones(3)])
    >>> len(params), [name for name, _ in params.named_parameters()]
    (2, ['0', '1'])
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "_size", 0)
        if values is not None:
            self.extend(values)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return ParameterList([self[i] for i in range(len(self))[index]])
        return getattr(self, str(_checked_index(index, self._size, "ParameterList", "values")))

    def __setitem__(self, index: int, value: Any) -> None:
        index = _checked_index(index, self._size, "ParameterList", "values")
        setattr(self, str(index), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter([self[i] for i in range(len(self))])

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)

    def append(self, value: Any) -> ParameterList:
        object.__setattr__(self, "_size", self._size + 1)
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        if isinstance(values, (str, Tensor)) or not isinstance(values, Iterable):
            raise DTypeError(
                f"ParameterList.extend takes an iterable of values, got {type(values).__name__}"
            )
        for value in values:
            self.append(value)
        return self

    def __repr__(self) -> str:
        return _container_repr(self, enumerate(self))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError("ParameterList should not be called; index it instead")


class ParameterDict(Module):
    """A dict of parameters (string keys, insertion order) whose parent module finds
    them, named by their keys; plain tensors are wrapped as ``Parameter``.

    >>> import kernelgrad as kg
    >>> params = kg.nn.ParameterDict({"scale": kg.ones(2), "shift": kg.zeros(2)})
    >>> sorted(params.state_dict()), params["scale"].requires_grad
    (['scale', 'shift'], True)
    """

    def __init__(self, values: Any = None) -> None:
        super().__init__()
        object.__setattr__(self, "_keys", [])
        if values is not None:
            self.update(values)

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys:
            raise KeyError(key)
        return self.__dict__[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise DTypeError(f"ParameterDict keys are strings, got {type(key).__name__}")
        if key not in self._keys and (
            hasattr(type(self), key) or key in self.__dict__ or "." in key or not key
        ):
            raise ArgumentError(
                f"ParameterDict: the key {key!r} is empty, holds a '.' or names an attribute "
                "of ParameterDict itself; choose another key"
            )
        setattr(self, key, _as_parameter(value))
        if key not in self._keys:
            self._keys.append(key)

    def __delitem__(self, key: str) -> None:
        if key not in self._keys:
            raise KeyError(key)
        self._keys.remove(key)
        object.__delattr__(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys))

    def keys(self) -> list[str]:
        return list(self._keys)

    def values(self) -> list[Any]:
        return [self.__dict__[k] for k in self._keys]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, self.__dict__[k]) for k in self._keys]

    def get(self, key: str, default: Any = None) -> Any:
        return self.__dict__[key] if key in self._keys else default

    def pop(self, key: str) -> Any:
        value = self[key]
        del self[key]
        return value

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def update(self, values: Any) -> None:
        pairs = values.items() if isinstance(values, (Mapping, ParameterDict)) else values
        for key, value in pairs:
            self[key] = value

    def __repr__(self) -> str:
        return _container_repr(self, self.items())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError("ParameterDict should not be called; index it instead")


def _checked_index(index: int, length: int, what: str, items: str = "modules") -> int:
    if not -length <= index < length:
        raise IndexingError(f"{what} index {index} is out of range for {length} {items}")
    return index % length


def _pool_then_relu(module: Module, following: Module | None) -> bool:
    """A ``MaxPool2d`` directly followed by a ``ReLU``: ``Sequential`` runs the pair as
    ``F.max_pool2d_relu`` (one kernel forward and one backward instead of two each)."""
    fusable = type(module) is MaxPool2d and not module.return_indices
    return fusable and type(following) is ReLU
