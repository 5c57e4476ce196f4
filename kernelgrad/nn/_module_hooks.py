"""PyTorch's module hooks, run by ``Module.__call__`` around ``forward``: forward
pre-hooks and hooks (``register_forward_pre_hook``, ``register_forward_hook``), backward
pre-hooks and hooks (``register_full_backward_pre_hook``,
``register_full_backward_hook``), and the global forms of all four
(``kg.nn.modules.module.register_module_forward_hook``, ...).

The hooks live in the module's ``_forward_pre_hooks``, ``_forward_hooks``,
``_backward_pre_hooks`` and ``_backward_hooks`` (ordered dicts from a handle id to the
hook, as in PyTorch), created on first registration together with the marker
``_call_hooks``, so a module without hooks (while no global hook was ever registered) is
called exactly as before.

Backward hooks work as PyTorch's ``BackwardHook`` (torch/utils/hooks.py): the module's
tensor arguments and its tensor outputs each pass through one identity
:class:`~kernelgrad.autograd.Function`. The outputs' identity receives the gradients
w.r.t. the outputs (None for an output the loss does not reach) and runs the pre-hooks,
which may replace them; the inputs' identity receives the gradients w.r.t. the inputs
(zeros for a tensor input the gradient does not reach) once backward has summed all of
them, and runs the hooks with both, which may replace the inputs' gradients."""

from __future__ import annotations

import itertools
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..autograd_function import Function
from ..errors import DTypeError

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


_ORDERED = frozenset(
    (
        "_forward_pre_hooks",
        "_forward_hooks",
        "_backward_pre_hooks",
        "_backward_hooks",
        "_state_dict_pre_hooks",
        "_state_dict_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
    )
)
# the tables whose hooks Module.__call__ runs (the state-dict ones it does not)
_CALL_TABLES = frozenset(
    ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
)


def _table(module: Any, name: str) -> Any:
    table = module.__dict__.get(name)
    if table is None:
        table = OrderedDict() if name in _ORDERED else {}
        object.__setattr__(module, name, table)
        if name in _CALL_TABLES:
            object.__setattr__(module, "_call_hooks", True)
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


# --- global hooks: torch.nn.modules.module.register_module_* ---------------------------------
_global_forward_pre_hooks: OrderedDict = OrderedDict()
_global_forward_hooks: OrderedDict = OrderedDict()
_global_forward_hooks_with_kwargs: dict = {}
_global_forward_hooks_always_called: dict = {}
_global_backward_pre_hooks: OrderedDict = OrderedDict()
_global_backward_hooks: OrderedDict = OrderedDict()
# True: the global backward hooks are full hooks; False: legacy ones; None: neither yet
_global_full: list[bool | None] = [None]
# Module.__call__ takes the hooked path for every module once a global hook was registered
GLOBAL_HOOKS = [False]


class _GlobalHandle(RemovableHandle):
    """A global hook's handle: removing the last global hook puts every module back on
    the plain call."""

    def remove(self) -> None:
        super().remove()
        GLOBAL_HOOKS[0] = bool(
            _global_forward_pre_hooks
            or _global_forward_hooks
            or _global_backward_pre_hooks
            or _global_backward_hooks
        )


def _check_callable(hook: Any, what: str) -> None:
    if not callable(hook):
        raise TypeError(f"a {what} hook must be callable, got {type(hook).__name__}")


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, args)`` before the forward of every module (before the module's own
    pre-hooks); a result other than None replaces the arguments."""
    _check_callable(hook, "forward pre-")
    handle = _GlobalHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    GLOBAL_HOOKS[0] = True
    return handle


def register_module_forward_hook(
    hook: Callable, *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """``hook(module, args, output)`` after the forward of every module (before the
    module's own hooks); a result other than None replaces the output."""
    _check_callable(hook, "forward")
    handle = _GlobalHandle(
        _global_forward_hooks,
        (_global_forward_hooks_with_kwargs, _global_forward_hooks_always_called),
    )
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    GLOBAL_HOOKS[0] = True
    return handle


def _mixing_error(where: str) -> RuntimeError:
    return RuntimeError(
        f"Cannot use both regular backward hooks and full backward hooks {where}. Please "
        "use only one of them (register_full_backward_hook; kernelgrad runs "
        "register_backward_hook as a full hook too)."
    )


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, grad_output)`` in every backward pass through any module, before the
    module's own backward pre-hooks; a result other than None replaces ``grad_output``."""
    _check_callable(hook, "backward pre-")
    handle = _GlobalHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    GLOBAL_HOOKS[0] = True
    return handle


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, grad_input, grad_output)`` for every module once the gradients
    w.r.t. its inputs are computed, before the module's own backward hooks."""
    return _register_global_backward(hook, full=True)


def register_module_backward_hook(hook: Callable) -> RemovableHandle:
    """PyTorch's deprecated global backward hook, run as
    :func:`register_module_full_backward_hook` (see ``Module.register_backward_hook``)."""
    _warn_legacy()
    return _register_global_backward(hook, full=False)


def _register_global_backward(hook: Callable, full: bool) -> RemovableHandle:
    _check_callable(hook, "backward")
    if _global_full[0] is (not full):
        raise _mixing_error("as a global Module hook")
    _global_full[0] = full
    handle = _GlobalHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    GLOBAL_HOOKS[0] = True
    return handle


def _warn_legacy() -> None:
    warnings.warn(
        "register_backward_hook is deprecated (as in PyTorch): kernelgrad runs it as "
        "register_full_backward_hook, so grad_input holds the gradients w.r.t. the "
        "module's tensor inputs (PyTorch's deprecated hook gives those of the inputs of "
        "the module's last operation, e.g. three for Linear). Use "
        "register_full_backward_hook.",
        FutureWarning,
        stacklevel=3,
    )


def register_backward(module: Any, hook: Callable, prepend: bool, full: bool) -> RemovableHandle:
    """``Module.register_full_backward_hook`` (``full``) and the legacy
    ``register_backward_hook``, which kernelgrad runs as a full hook."""
    _check_callable(hook, "backward")
    flag = module.__dict__.get("_is_full_backward_hook")
    if flag is (not full):
        raise _mixing_error("on a single Module")
    if not full:
        _warn_legacy()
    object.__setattr__(module, "_is_full_backward_hook", full)
    hooks = _table(module, "_backward_hooks")
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def register_backward_pre(module: Any, hook: Callable, prepend: bool) -> RemovableHandle:
    _check_callable(hook, "backward pre-")
    hooks = _table(module, "_backward_pre_hooks")
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


# --- running them ----------------------------------------------------------------------------
def call(module: Any, args: tuple, kwargs: dict) -> Any:
    """``module(*args, **kwargs)`` with the global hooks and its own, as PyTorch's
    ``Module._call_impl`` runs them: each forward pre-hook may replace the arguments, each
    forward hook the output; backward hooks are attached to the arguments and outputs."""
    table = module.__dict__
    backward_pre = [
        *_global_backward_pre_hooks.values(),
        *(table.get("_backward_pre_hooks") or {}).values(),
    ]
    backward_hooks = []
    if _global_backward_hooks:
        backward_hooks += _global_backward_hooks.values()
    backward_hooks += (table.get("_backward_hooks") or {}).values()
    pre_with_kwargs = table.get("_forward_pre_hooks_with_kwargs") or {}
    for hook_id, hook in (
        *_global_forward_pre_hooks.items(),
        *(table.get("_forward_pre_hooks") or {}).items(),
    ):
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
    own = table.get("_forward_hooks") or {}
    hooks = (*_global_forward_hooks.items(), *own.items())
    with_kwargs = table.get("_forward_hooks_with_kwargs") or {}
    always = table.get("_forward_hooks_always_called") or {}
    called: set[int] = set()
    output = None
    try:
        backward = None
        if backward_hooks or backward_pre:
            backward = BackwardHook(module, backward_hooks, backward_pre)
            args = backward.setup_input_hook(args)
        output = module.forward(*args, **kwargs)
        for hook_id, hook in hooks:
            if hook_id in always or hook_id in _global_forward_hooks_always_called:
                called.add(hook_id)
            if hook_id in with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
                result = hook(module, args, kwargs, output)
            else:
                result = hook(module, args, output)
            if result is not None:
                output = result
        if backward is not None:
            output = backward.setup_output_hook(output)
    except Exception:
        for hook_id, hook in hooks:
            if hook_id in called:
                continue
            if not (hook_id in always or hook_id in _global_forward_hooks_always_called):
                continue
            try:
                if hook_id in with_kwargs:
                    result = hook(module, args, kwargs, output)
                else:
                    result = hook(module, args, output)
                if result is not None:
                    output = result
            except Exception as error:  # the forward's error is the one raised
                warnings.warn(
                    "module forward hook with ``always_call=True`` raised an exception "
                    f"that was silenced as another error was raised in forward: {error}",
                    stacklevel=3,
                )
        raise
    return output


class BackwardHook:
    """One call of a module with backward hooks (PyTorch's ``torch.utils.hooks.
    BackwardHook``): wraps its tensor arguments and outputs in identity functions whose
    backward runs the hooks."""

    def __init__(self, module: Any, user_hooks: list, user_pre_hooks: list) -> None:
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs: tuple | None = None
        self.n_outputs = -1
        self.output_tensors_index: list[int] | None = None
        self.n_inputs = -1
        self.input_tensors_index: list[int] | None = None
        self.input_meta: list[Any] = []

    @staticmethod
    def _pack_with_none(indices: list[int], values: Any, size: int) -> tuple:
        result: list[Any] = [None] * size
        for index, value in zip(indices, values):
            result[index] = value
        return tuple(result)

    @staticmethod
    def _unpack_none(indices: list[int], values: Any) -> tuple:
        return tuple(values[index] for index in indices)

    def _apply_on_tensors(self, callback: Callable, args: tuple) -> tuple[tuple, list[int] | None]:
        from .. import autograd
        from ..tensor import Tensor

        indices = [i for i, arg in enumerate(args) if isinstance(arg, Tensor)]
        tensors = [args[i] for i in indices]
        if not autograd.needs_grad(*tensors):
            return args, None
        wrapped = BackwardHookFunction.apply(callback, *tensors)
        values = list(args)
        for index, value in zip(indices, wrapped):
            values[index] = value
        return tuple(values), indices

    # the inputs: the hooks run once the gradients w.r.t. every input are summed
    def setup_input_hook(self, args: tuple) -> tuple:
        result, indices = self._apply_on_tensors(self._input_backward, args)
        self.input_meta = [(args[i].shape, args[i].dtype, args[i].device) for i in indices or ()]
        self.n_inputs = len(args)
        self.input_tensors_index = indices
        return result

    def _input_backward(self, grads: tuple) -> tuple:
        from ..ops.creation import zeros

        # as PyTorch's identity (which materialises the gradients it did not receive)
        grads = tuple(
            zeros(shape, dtype=dtype, device=device) if grad is None else grad
            for grad, (shape, dtype, device) in zip(grads, self.input_meta)
        )
        if self.grad_outputs is None:
            # the gradient reached the inputs without passing through the outputs
            return grads
        assert self.input_tensors_index is not None
        result = self._pack_with_none(self.input_tensors_index, grads, self.n_inputs)
        for hook in self.user_hooks:
            out = hook(self.module, result, self.grad_outputs)
            if out is None:
                continue
            out = _as_tuple(out, "Backward hook", "grad_input")
            if len(out) != len(result):
                raise RuntimeError(
                    "Backward hook returned an invalid number of grad_input, got "
                    f"{len(out)}, but expected {len(result)}"
                )
            result = out
        self.grad_outputs = None
        return self._unpack_none(self.input_tensors_index, result)

    # the outputs: the pre-hooks run when the gradients w.r.t. the outputs are known
    def setup_output_hook(self, output: Any) -> Any:
        from ..tensor import Tensor

        single = not isinstance(output, tuple)
        if single and not isinstance(output, Tensor):
            warnings.warn(
                "For backward hooks to be called, module output should be a Tensor or a "
                f"tuple of Tensors but received {type(output)}",
                stacklevel=4,
            )
        values = (output,) if single else tuple(output)
        result, indices = self._apply_on_tensors(self._output_backward, values)
        self.n_outputs = len(values)
        self.output_tensors_index = indices
        if single:
            return result[0]
        return result if type(output) is tuple else type(output)(*result)  # a namedtuple

    def _output_backward(self, grads: tuple) -> tuple:
        assert self.output_tensors_index is not None
        self.grad_outputs = self._pack_with_none(self.output_tensors_index, grads, self.n_outputs)
        expected = len(self.grad_outputs)
        for hook in self.user_pre_hooks:
            out = hook(self.module, self.grad_outputs)
            if out is None:
                continue
            out = _as_tuple(out, "Backward pre hook", "grad_output")
            if len(out) != expected:
                raise RuntimeError(
                    "Backward pre hook returned an invalid number of grad_output, got "
                    f"{len(out)}, but expected {expected}"
                )
            self.grad_outputs = out
        local = self.grad_outputs
        if self.input_tensors_index is None:
            # no input requires grad: the hooks run now, with no input gradients
            warnings.warn(
                "Full backward hook is firing when gradients are computed with respect to "
                "module outputs since no inputs require gradients.",
                stacklevel=2,
            )
            nothing = (None,) * self.n_inputs
            for hook in self.user_hooks:
                out = hook(self.module, nothing, self.grad_outputs)
                if out is not None and not (
                    isinstance(out, tuple) and all(item is None for item in out)
                ):
                    raise RuntimeError(
                        "Backward hook for Modules where no input requires gradient should "
                        "always return None or None for all gradients."
                    )
            self.grad_outputs = None
        return self._unpack_none(self.output_tensors_index, local)


def _as_tuple(value: Any, what: str, name: str) -> tuple:
    if isinstance(value, tuple | list):
        return tuple(value)
    raise DTypeError(
        f"{what} must return None or a tuple with one entry (a tensor or None) per "
        f"{name}, got a {type(value).__name__}; return e.g. ({name}[0] * 2,)"
    )


class BackwardHookFunction(Function):
    """The identity the module's tensors pass through; its backward runs the hooks."""

    @staticmethod
    def forward(ctx: Any, callback: Callable, *tensors: Any) -> tuple:
        ctx.mark_non_differentiable(*[t for t in tensors if not t.requires_grad])
        ctx.set_materialize_grads(False)
        ctx.callback = callback
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple:
        return (None, *ctx.callback(grads))


# --- state-dict hooks (Module.register_state_dict_pre_hook, ...) -----------------------------
def register_state_hook(module: Any, kind: str, hook: Any, public: bool = False) -> RemovableHandle:
    """Add a state-dict hook to ``module``'s table ``kind``. A load pre-hook arrives as
    ``(hook, with_module)``; ``public`` marks a state-dict post-hook registered under
    PyTorch's public name (it must return None; the private form may return a dict)."""
    _check_callable(hook[0] if isinstance(hook, tuple) else hook, "state-dict")
    hooks = _table(module, kind)
    extra = ()
    if kind == "_state_dict_hooks":
        flags = _table(module, "_state_dict_hooks_public")
        extra = (flags,)
    handle = RemovableHandle(hooks, extra)
    hooks[handle.id] = hook
    if public:
        extra[0][handle.id] = True
    return handle


def run_state_dict_post_hooks(module: Any, state: dict, prefix: str) -> dict:
    """The state-dict post-hooks of ``module``; returns the (possibly replaced) dict."""
    public = module.__dict__.get("_state_dict_hooks_public") or {}
    metadata = {"version": getattr(type(module), "_version", 1)}
    for hook_id, hook in list(module.__dict__["_state_dict_hooks"].items()):
        result = hook(module, state, prefix, metadata)
        if hook_id in public:
            if result is not None:
                raise RuntimeError("state_dict post-hook must return None")
        elif result is not None:
            state = result
    return state


def run_load_post_hooks(module: Any, incompatible_keys: Any) -> None:
    """The load-state-dict post-hooks of ``module``."""
    for hook in list(module.__dict__["_load_state_dict_post_hooks"].values()):
        if hook(module, incompatible_keys) is not None:
            raise AssertionError(
                "Hooks registered with ``register_load_state_dict_post_hook`` are not "
                "expected to return new values, if incompatible_keys need to be "
                "modified, it should be done inplace."
            )
