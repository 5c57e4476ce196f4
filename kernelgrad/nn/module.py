"""``Module`` and ``Parameter``: the building blocks of every network.

A module is a plain Python object. Its parameters, buffers and sub-modules are found by
walking its attributes (in the order they were assigned), so a layer is written as in
PyTorch::

    class TwoLayer(kg.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = kg.nn.Linear(4, 8)
            self.out = kg.nn.Linear(8, 2)

        def forward(self, x):
            return self.out(self.hidden(x).relu())

* an attribute holding a :class:`Parameter` is a parameter;
* an attribute holding a :class:`Module` is a sub-module (its parameters are found
  recursively, with dotted names such as ``hidden.weight``);
* tensors that are part of the state but not trained (BatchNorm's running statistics)
  are declared with :meth:`Module.register_buffer`.

Lists of modules must be wrapped in :class:`~kernelgrad.nn.ModuleList` (a plain list
attribute is not searched, exactly as in PyTorch).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from .. import autograd
from ..device import Device, as_device
from ..dtypes import DType, as_dtype, float64
from ..errors import DTypeError, ShapeError, UnsupportedError, format_shape
from ..tensor import Tensor
from ..tracing import RECORDING
from . import _module_hooks, _trace_watch

__all__ = ["Module", "Parameter", "Buffer", "Container", "IncompatibleKeys"]


class Parameter(Tensor):
    """A tensor that is a trainable parameter of a :class:`Module` (``requires_grad`` on).

    It shares memory with the tensor it is made from.

    >>> import kernelgrad as kg
    >>> w = kg.nn.Parameter(kg.zeros(2, 3))
    >>> w.requires_grad, w.shape
    (True, kg.Size([2, 3]))
    """

    __slots__ = ()

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> Parameter:
        from ..ops.creation import empty, tensor

        if data is None:
            data = empty(0)
        elif not isinstance(data, Tensor):
            data = tensor(data)
        parameter = cls._make(data._storage, data._shape, data._strides, data._offset, data.dtype)
        if requires_grad:
            parameter.requires_grad_(True)
        return parameter

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        pass  # everything happens in __new__ (Tensor.__init__ refuses direct construction)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict) -> Parameter:
        if id(self) in memo:
            return memo[id(self)]
        with autograd.no_grad():
            result = Parameter(self.clone(), requires_grad=self.requires_grad)
        memo[id(self)] = result
        if self.grad is not None:
            result.grad = copy.deepcopy(self.grad, memo)
        return result

    def __reduce__(self) -> tuple:
        return (Parameter, (self.detach(), self.requires_grad))


class Buffer(Tensor):
    """A tensor that becomes a buffer of the :class:`Module` it is assigned to (PyTorch
    2.5's ``nn.Buffer``): ``self.running = kg.nn.Buffer(kg.zeros(3))`` is
    ``self.register_buffer("running", kg.zeros(3))``; ``persistent=False`` leaves it out
    of ``state_dict``. It shares memory with ``data`` (detached, ``requires_grad`` kept).

    >>> import kernelgrad as kg
    >>> m = kg.nn.Module()
    >>> m.scale = kg.nn.Buffer(kg.ones(2))
    >>> m.cache = kg.nn.Buffer(kg.zeros(2), persistent=False)
    >>> [name for name, _ in m.named_buffers()], list(m.state_dict())
    (['scale', 'cache'], ['scale'])
    """

    __slots__ = ("persistent",)

    def __new__(cls, data: Any = None, *, persistent: bool = True) -> Buffer:
        from ..ops.creation import empty, tensor

        if data is None:
            data = empty(0)
        elif not isinstance(data, Tensor):
            data = tensor(data)
        buffer = cls._make(data._storage, data._shape, data._strides, data._offset, data.dtype)
        buffer._base = data._base
        if data.requires_grad:
            buffer.requires_grad_(True)
        buffer.persistent = bool(persistent)
        return buffer

    def __init__(self, data: Any = None, *, persistent: bool = True) -> None:
        pass  # everything happens in __new__ (Tensor.__init__ refuses direct construction)


class IncompatibleKeys(NamedTuple):
    """What :meth:`Module.load_state_dict` found with ``strict=False``."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
    """Base class of every layer and model. Subclasses call ``super().__init__()`` first
    and define :meth:`forward`; calling the module runs ``forward``.

    >>> import kernelgrad as kg
    >>> model = kg.nn.Sequential(kg.nn.Linear(3, 4), kg.nn.ReLU(), kg.nn.Linear(4, 1))
    >>> [name for name, _ in model.named_parameters()]
    ['0.weight', '0.bias', '2.weight', '2.bias']
    >>> model(kg.ones(2, 3)).shape
    kg.Size([2, 1])
    """

    training: bool

    def __init__(self) -> None:
        # name -> persistent?  (the tensors themselves are ordinary attributes)
        object.__setattr__(self, "_buffer_names", {})
        object.__setattr__(self, "training", True)

    # --- calling ------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(
            f"{type(self).__name__} has no forward(); define `def forward(self, x): ...`"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if RECORDING[0]:  # kg.compile traces: replays must see a change of this module
            _trace_watch.report_call(self)
        if "_call_hooks" in self.__dict__ or _module_hooks.GLOBAL_HOOKS[0]:
            return _module_hooks.call(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def register_forward_pre_hook(
        self, hook: Any, *, prepend: bool = False, with_kwargs: bool = False
    ) -> Any:
        """``hook(module, args)`` (or ``hook(module, args, kwargs)`` with
        ``with_kwargs``) before every forward; a result other than None replaces the
        arguments. Returns a handle whose ``remove()`` unregisters it
        (kernelgrad/nn/_module_hooks.py)."""
        from ._module_hooks import register

        return register(self, "_forward_pre_hooks", hook, prepend, with_kwargs)

    def register_forward_hook(
        self,
        hook: Any,
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> Any:
        """``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``)
        after every forward; a result other than None replaces the output. Returns a
        handle whose ``remove()`` unregisters it."""
        from ._module_hooks import register

        return register(self, "_forward_hooks", hook, prepend, with_kwargs, always_call)

    def register_full_backward_hook(self, hook: Any, prepend: bool = False) -> Any:
        """``hook(module, grad_input, grad_output)`` once the gradients w.r.t. the
        module's tensor arguments are computed in a backward pass (``grad_input``: one
        entry per positional argument, None for non-tensors; ``grad_output``: one per
        output, None for non-tensors and outputs the loss does not reach). A result
        other than None replaces ``grad_input``. Returns a handle whose ``remove()``
        unregisters it (kernelgrad/nn/_module_hooks.py)."""
        return _module_hooks.register_backward(self, hook, prepend, full=True)

    def register_full_backward_pre_hook(self, hook: Any, prepend: bool = False) -> Any:
        """``hook(module, grad_output)`` when the gradients w.r.t. the module's outputs
        are known, before they flow into the module; a result other than None replaces
        ``grad_output``. Returns a handle whose ``remove()`` unregisters it."""
        return _module_hooks.register_backward_pre(self, hook, prepend)

    def register_backward_hook(self, hook: Any) -> Any:
        """PyTorch's deprecated backward hook, run here as
        :meth:`register_full_backward_hook` (with a ``FutureWarning``): ``grad_input``
        holds the gradients w.r.t. the module's inputs, where PyTorch's deprecated hook
        gives those of its last operation's inputs."""
        return _module_hooks.register_backward(self, hook, False, full=False)

    # --- attributes ---------------------------------------------------------------------
    def _check_initialised(self, name: str) -> None:
        if "_buffer_names" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() was called; put "
                "`super().__init__()` at the top of your module's __init__"
            )

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, (Module, Tensor)):
            self._check_initialised(name)
        if isinstance(value, Buffer):  # nn.Buffer: assigning it registers a buffer
            self.register_buffer(name, value, value.persistent)
            return
        buffers = self.__dict__.get("_buffer_names")
        if buffers and name in buffers and not (value is None or isinstance(value, Tensor)):
            raise DTypeError(
                f"cannot assign a {type(value).__name__} to buffer {name!r}; buffers hold "
                "tensors (or None)"
            )
        old = self.__dict__.get(name)
        if isinstance(old, Parameter) and not (value is None or isinstance(value, Parameter)):
            raise DTypeError(
                f"cannot assign a {type(value).__name__} to parameter {name!r} of "
                f"{type(self).__name__}: wrap it as kg.nn.Parameter(...), or update the "
                f"values in place under kg.no_grad() (e.g. `{name}.copy_(new_values)`)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__.get("_buffer_names", {}).pop(name, None)
        object.__delattr__(self, name)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Declare a tensor that is part of the module's state but not a parameter
        (saved in ``state_dict`` unless ``persistent=False``, moved by ``to()``)."""
        self._check_initialised(name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise DTypeError(f"register_buffer: {name!r} must be a Tensor or None")
        if isinstance(tensor, Parameter):
            raise DTypeError(f"register_buffer: {name!r} is a Parameter; assign it instead")
        self._buffer_names[name] = persistent
        object.__setattr__(self, name, tensor)

    def register_parameter(self, name: str, parameter: Parameter | None) -> None:
        """Add a parameter (or None, for an optional one such as a missing bias)."""
        if parameter is not None and not isinstance(parameter, Parameter):
            raise DTypeError(f"register_parameter: {name!r} must be a kg.nn.Parameter or None")
        setattr(self, name, parameter)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise DTypeError(f"add_module: {name!r} must be a Module, got {type(module).__name__}")
        setattr(self, name, module)

    register_module = add_module

    # --- walking ------------------------------------------------------------------------
    def _own_parameters(self) -> Iterator[tuple[str, Parameter]]:
        for name, value in self.__dict__.items():
            if isinstance(value, Parameter):
                yield name, value

    def _own_buffers(self, persistent_only: bool = False) -> Iterator[tuple[str, Tensor]]:
        for name, persistent in self._buffer_names.items():
            value = self.__dict__.get(name)
            if value is not None and (persistent or not persistent_only):
                yield name, value

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Direct sub-modules with their attribute names."""
        seen: set[int] = set()
        for name, value in self.__dict__.items():
            if isinstance(value, Module) and id(value) not in seen:
                seen.add(id(value))
                yield name, value

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(
        self, prefix: str = "", _seen: set[int] | None = None
    ) -> Iterator[tuple[str, Module]]:
        """This module and every module inside it (each once), with dotted names."""
        seen = set() if _seen is None else _seen
        if id(self) in seen:
            return
        seen.add(id(self))
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name, seen)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_parameters(
        self, prefix: str = "", recurse: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs; a parameter shared by two modules once."""
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            for name, parameter in module._own_parameters():
                if id(parameter) in seen:
                    continue
                seen.add(id(parameter))
                yield (f"{module_name}.{name}" if module_name else name), parameter

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, parameter in self.named_parameters(recurse=recurse):
            yield parameter

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            for name, buffer in module._own_buffers():
                if id(buffer) in seen:
                    continue
                seen.add(id(buffer))
                yield (f"{module_name}.{name}" if module_name else name), buffer

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Total number of parameter elements."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every sub-module (children first) and on this module."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # --- modes and gradients ------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active, batch statistics); returns ``self``."""
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Evaluation mode (dropout off, running statistics); same as ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for parameter in self.parameters():
            parameter.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every parameter (drop them, or fill with zeros)."""
        for parameter in self.parameters():
            if parameter.grad is None:
                continue
            if set_to_none:
                parameter.grad = None
            else:
                with autograd.no_grad():
                    parameter.grad = parameter.grad.detach()
                    parameter.grad.zero_()

    # --- device and dtype ---------------------------------------------------------------
    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Move parameters and buffers to a device and/or convert floating point ones to
        a dtype: ``to("cuda")``, ``to(kg.float64)``, ``to("cpu", kg.float32)``.

        Parameters keep their identity (an optimizer built before ``to`` still holds
        them); only their memory is replaced."""
        device, dtype = _parse_to_args(args, kwargs)

        def convert(t: Tensor) -> Tensor:
            result = t
            if dtype is not None and t.dtype.is_floating_point and t.dtype is not dtype:
                result = result.to(dtype)
            if device is not None and result.device != device:
                result = result.to(device)
            return result

        with autograd.no_grad():
            for module in self.modules():
                for _, parameter in module._own_parameters():
                    moved = convert(parameter)
                    if moved is not parameter:
                        _swap_memory(parameter, moved)
                    if parameter.grad is not None:
                        parameter.grad = convert(parameter.grad)
                for name, buffer in list(module._own_buffers()):
                    object.__setattr__(module, name, convert(buffer))
        return self

    def cpu(self) -> Module:
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> Module:
        return self.to("cuda" if device is None else f"cuda:{device}")

    def float(self) -> Module:
        from ..dtypes import float32

        return self.to(float32)

    def double(self) -> Module:
        return self.to(float64)

    # --- state ----------------------------------------------------------------------------
    def state_dict(self, prefix: str = "", keep_vars: bool = False) -> dict[str, Tensor]:
        """Parameters and persistent buffers by dotted name. The tensors share memory
        with the module (detached unless ``keep_vars``); copy them to keep a snapshot.
        Each module's state-dict pre-hooks run before its entries are collected, its
        post-hooks after its children's."""
        return self._collect_state(prefix, keep_vars, {}, set())

    def _collect_state(self, prefix: str, keep_vars: bool, out: dict, ancestors: set[int]) -> dict:
        # A module reachable under two names appears under both (as in PyTorch); only
        # cycles are cut.
        if id(self) in ancestors:
            return out
        ancestors.add(id(self))
        pre_hooks = self.__dict__.get("_state_dict_pre_hooks")
        if pre_hooks:
            for hook in list(pre_hooks.values()):
                hook(self, prefix, keep_vars)
        for name, parameter in self._own_parameters():
            out[prefix + name] = parameter if keep_vars else parameter.detach()
        for name, buffer in self._own_buffers(persistent_only=True):
            out[prefix + name] = buffer if keep_vars else buffer.detach()
        for name, child in self.named_children():
            child._collect_state(f"{prefix}{name}.", keep_vars, out, ancestors)
        ancestors.discard(id(self))
        if "_state_dict_hooks" in self.__dict__:
            return _module_hooks.run_state_dict_post_hooks(self, out, prefix)
        return out

    def register_state_dict_pre_hook(self, hook: Callable) -> Any:
        """``hook(module, prefix, keep_vars)`` before ``state_dict`` collects this
        module's entries. Returns a handle whose ``remove()`` unregisters it."""
        return _module_hooks.register_state_hook(self, "_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook: Callable) -> Any:
        """``hook(module, state_dict, prefix, local_metadata)`` after ``state_dict``
        collected this module's entries and its children's; it may change ``state_dict``
        in place and must return None."""
        return _module_hooks.register_state_hook(self, "_state_dict_hooks", hook, public=True)

    def _register_state_dict_hook(self, hook: Callable) -> Any:
        # PyTorch's private form: a result other than None replaces the state dict
        return _module_hooks.register_state_hook(self, "_state_dict_hooks", hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> Any:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` before ``load_state_dict`` loads this module's
        entries (``state_dict`` holds the entries under ``prefix``; changes to it, such
        as renamed keys, are what the module and its children load)."""
        return _module_hooks.register_state_hook(self, "_load_state_dict_pre_hooks", (hook, True))

    def _register_load_state_dict_pre_hook(self, hook: Callable, with_module: bool = False) -> Any:
        return _module_hooks.register_state_hook(
            self, "_load_state_dict_pre_hooks", (hook, with_module)
        )

    def register_load_state_dict_post_hook(self, hook: Callable) -> Any:
        """``hook(module, incompatible_keys)`` after ``load_state_dict`` loaded the values;
        it may change ``incompatible_keys.missing_keys`` / ``.unexpected_keys`` in place
        (``strict=True`` checks them after the hooks) and must return None."""
        return _module_hooks.register_state_hook(self, "_load_state_dict_post_hooks", hook)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True
    ) -> IncompatibleKeys:
        """Copy values into the parameters and buffers (converting dtype and device).

        Every problem is reported at once: missing and unexpected names (only with
        ``strict=True``) and shape mismatches (always); nothing is loaded then. A module
        with load-state-dict post-hooks is loaded as PyTorch loads it: each module's
        values, then its children's, then its post-hooks, which may forgive missing and
        unexpected names before ``strict`` checks them at the end (so the values are
        loaded when it raises)."""
        for module_name, module in list(self.named_modules()):
            # a lazy module (LazyLinear) takes its parameter shapes from the state dict
            materialise = getattr(module, "_materialise_from_state_dict", None)
            if materialise is not None:
                materialise(state_dict, f"{module_name}." if module_name else "")
        streaming = any(m.__dict__.get("_load_state_dict_post_hooks") for m in self.modules())
        load = _Load(streaming)
        load.walk(self, dict(state_dict), "", set())
        load.check(self, strict)
        load.flush()  # (already done while streaming)
        return load.result

    # --- printing -------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside the parentheses of this module's repr line."""
        return ""

    def __repr__(self) -> str:
        children = list(self.named_children())
        extra = self.extra_repr()
        if not children:
            return f"{type(self).__name__}({extra})"
        lines = [extra] if extra else []
        for name, child in children:
            lines.append(f"({name}): " + _addindent(repr(child), 2))
        body = "\n  ".join(lines)
        return f"{type(self).__name__}(\n  {body}\n)"

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()))


class Container(Module):
    """PyTorch's deprecated ``nn.Container``: a :class:`Module` whose keyword arguments
    become its sub-modules (with PyTorch's ``FutureWarning``). Subclass ``Module``
    instead.

    >>> import warnings
    >>> import kernelgrad as kg
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     box = kg.nn.Container(fc=kg.nn.Linear(2, 1))
    >>> [name for name, _ in box.named_parameters()]
    ['fc.weight', 'fc.bias']
    """

    def __init__(self, **kwargs: Any) -> None:
        import warnings

        warnings.warn(
            "`nn.Container` is deprecated. All of its functionality is now implemented in "
            "`nn.Module`. Subclass that instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


class _Load:
    """One ``load_state_dict``: walks the modules as PyTorch's ``_load_from_state_dict``
    does (a module's pre-hooks see, and may change, the entries under its prefix; each
    level reports its own missing and unexpected names), and copies the values at once
    when ``streaming`` (post-hooks must see them), else after every check passed."""

    def __init__(self, streaming: bool) -> None:
        self.streaming = streaming
        self.missing: list[str] = []
        self.unexpected: list[str] = []
        self.wrong_shape: list[str] = []
        self.error_msgs: list[str] = []  # what load-state-dict pre-hooks add
        self.copies: list[tuple[Tensor, Any]] = []
        self.result = IncompatibleKeys(self.missing, self.unexpected)

    def walk(self, module: Module, local: dict, prefix: str, ancestors: set[int]) -> None:
        if id(module) in ancestors:
            return
        ancestors.add(id(module))
        pre_hooks = module.__dict__.get("_load_state_dict_pre_hooks")
        if pre_hooks:
            for hook, with_module in list(pre_hooks.values()):
                arguments = (
                    local,
                    prefix,
                    {},
                    True,
                    self.missing,
                    self.unexpected,
                    self.error_msgs,
                )
                hook(module, *arguments) if with_module else hook(*arguments)
        own = dict(module._own_parameters())
        own.update(module._own_buffers(persistent_only=True))
        for name, target in own.items():
            key = prefix + name
            if key not in local:
                self.missing.append(key)
                continue
            value = local[key]
            shape = value.shape if isinstance(value, Tensor) else tuple(np.shape(value))
            if shape != target.shape:
                self.wrong_shape.append(
                    f"{key}: the module has shape {format_shape(target.shape)}, the "
                    f"state_dict has {format_shape(shape)}"
                )
            else:
                self.copies.append((target, value))
        if self.streaming:
            self.flush()
        children = dict(module.named_children())
        groups: dict[str, dict] = {name: {} for name in children}
        for key, value in local.items():
            if not key.startswith(prefix):
                continue
            head, dot, _ = key[len(prefix) :].partition(".")
            if dot and head in groups:
                groups[head][key] = value
            elif dot or head not in own:
                self.unexpected.append(key)
        for name, child in children.items():
            self.walk(child, groups[name], f"{prefix}{name}.", ancestors)
        ancestors.discard(id(module))
        if "_load_state_dict_post_hooks" in module.__dict__:
            _module_hooks.run_load_post_hooks(module, self.result)

    def flush(self) -> None:
        for target, value in self.copies:
            if not isinstance(value, Tensor):
                from ..ops.creation import tensor

                value = tensor(np.asarray(value), device=target.device)
            with autograd.no_grad():
                target.copy_(value)
        self.copies.clear()

    def check(self, module: Module, strict: bool) -> None:
        problems = []
        names = strict and (self.missing or self.unexpected)
        if strict and self.missing:
            problems.append("missing keys: " + ", ".join(self.missing))
        if strict and self.unexpected:
            problems.append("unexpected keys: " + ", ".join(self.unexpected))
        if self.wrong_shape:
            problems.append("shape mismatches:\n    " + "\n    ".join(self.wrong_shape))
        if self.error_msgs:
            problems.append(
                "errors from load_state_dict pre-hooks:\n    " + "\n    ".join(self.error_msgs)
            )
        if problems:
            raise StateDictError(
                f"cannot load the state_dict into {type(module).__name__}:\n  "
                + "\n  ".join(problems)
                + ("\n(pass strict=False to skip missing and unexpected keys)" if names else "")
            )


class StateDictError(ShapeError):
    """``load_state_dict`` found missing or unexpected names or mismatched shapes."""


def _swap_memory(target: Tensor, source: Tensor) -> None:
    """Make ``target`` (a parameter) use ``source``'s memory, keeping its identity."""
    target._storage = source._storage
    target.shape = source.shape
    target._strides = source._strides
    target._offset = source._offset
    target.dtype = source.dtype


def _parse_to_args(args: tuple, kwargs: dict) -> tuple[Device | None, DType | None]:
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs.get("memory_format") is not None:  # accepted; parameters stay row-major
        from ..memory_formats import check

        check(kwargs.pop("memory_format"))
    if kwargs:
        raise DTypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for arg in args:
        if isinstance(arg, Tensor):
            device, dtype = arg.device, arg.dtype
        elif isinstance(arg, DType):
            dtype = arg
        elif isinstance(arg, Device):
            device = arg
        elif isinstance(arg, str):
            try:
                device = as_device(arg)
            except (ValueError, TypeError):
                dtype = as_dtype(arg)
        else:
            dtype = as_dtype(arg)
    if dtype is not None:
        dtype = as_dtype(dtype)
        if not dtype.is_floating_point:
            raise DTypeError(f"Module.to() only converts to floating point dtypes, got {dtype}")
    return (as_device(device) if device is not None else None), dtype
