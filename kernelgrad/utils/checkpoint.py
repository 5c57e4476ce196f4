"""``kg.utils.checkpoint``: activation checkpointing (PyTorch's ``torch.utils.checkpoint``).

``checkpoint(function, *args, use_reentrant=...)`` returns what ``function(*args)``
returns, but keeps none of the activations computed inside: the backward pass runs
``function`` again (with the random state it saw in the forward pass, so dropout draws
the same mask) and differentiates that second run. The gradients equal those of the
plain call; the cost is one more forward pass of the checkpointed part.

>>> import kernelgrad as kg
>>> from kernelgrad.utils.checkpoint import checkpoint
>>> w = kg.tensor([2.0], requires_grad=True)
>>> x = kg.tensor([3.0], requires_grad=True)
>>> y = checkpoint(lambda x: (x * w).sin() * w, x, use_reentrant=False)
>>> y.sum().backward()
>>> round(x.grad.item(), 4), round(w.grad.item(), 4)
(3.8407, 5.4816)

The two variants behave as PyTorch's:

* ``use_reentrant=True`` (what PyTorch uses, with a warning, when ``use_reentrant`` is
  not given): the forward pass runs under ``no_grad``; the backward pass re-runs it and
  calls ``backward()`` on the result, which adds the gradients of the parameters the
  function uses into their ``.grad`` directly. As in PyTorch, at least one tensor
  argument must require grad (otherwise nothing reaches the parameters: a warning says
  so), keyword arguments are refused, and ``kg.autograd.grad`` through it raises.
* ``use_reentrant=False`` (recommended): the forward pass records the graph while the
  function runs, to find every tensor requiring grad that it reads (its arguments and
  the parameters it captures), then drops that graph and its saved activations; one
  node depends on those tensors. Its backward re-runs the function and returns the
  gradients, so ``backward()``, ``backward(inputs=...)`` and ``kg.autograd.grad`` all
  work, keyword arguments too. A tensor the function reads that requires grad but is
  neither a leaf nor an argument (an intermediate result captured from outside) is
  refused with an error: pass it as an argument.

``determinism_check="default"`` compares the shapes and dtypes of the re-run's outputs
and the tensors it reads with the first run's and raises :class:`CheckpointError` on a
difference; ``"none"`` skips it. ``context_fn``, ``debug`` and ``early_stop`` are
accepted (``context_fn``'s two context managers surround the run and the re-run);
``debug`` adds nothing to the messages, and the re-run always runs to the end.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from .. import autograd
from ..autograd_function import Function
from ..errors import BackwardError, UnsupportedError

__all__ = [
    "CheckpointError",
    "checkpoint",
    "checkpoint_sequential",
    "detach_variable",
    "noop_context_fn",
]


class CheckpointError(RuntimeError):
    """The re-run of a checkpointed function differs from its first run (PyTorch's
    ``torch.utils.checkpoint.CheckpointError``)."""


def noop_context_fn() -> tuple[Any, Any]:
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Each tensor of ``inputs`` detached, keeping its ``requires_grad``."""
    from ..tensor import Tensor

    if not isinstance(inputs, tuple):
        raise BackwardError(
            f"Only tuple of tensors is supported. Got Unsupported input type: "
            f"{type(inputs).__name__}"
        )
    return tuple(_detached(x) if isinstance(x, Tensor) else x for x in inputs)


def _detached(x: Any) -> Any:
    copy = x.detach()
    copy.requires_grad = x.requires_grad
    return copy


_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
    "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
    "exception. use_reentrant=False is recommended, but if you need to preserve the "
    "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
    "details on the differences between the two variants."
)


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], tuple[Any, Any]] = noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)`` without keeping its activations for backward; see
    the module docstring. ``preserve_rng_state=False`` (a keyword) skips restoring the
    random state for the re-run."""
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError(
                "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
            )
        return _ReentrantCheckpoint.apply(function, preserve, *args)
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"determinism_check should be one of ['default', 'none'], but got {determinism_check}"
        )
    return _checkpoint_recorded(
        function, preserve, context_fn, determinism_check == "default", args, kwargs
    )


def checkpoint_sequential(
    functions: Any,
    segments: int,
    input: Any,  # noqa: A002 (PyTorch's name)
    use_reentrant: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``functions`` (a ``kg.nn.Sequential`` or a list of modules or functions) in
    order on ``input``, in ``segments`` pieces of which all but the last are
    checkpointed."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly. In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve "
            "the current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    from ..nn import Sequential

    if isinstance(functions, Sequential):
        functions = list(functions.children())

    def run_function(start: int, end: int) -> Callable[[Any], Any]:
        def forward(value: Any) -> Any:
            for j in range(start, end + 1):
                value = functions[j](value)
            return value

        return forward

    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(  # noqa: A001
            run_function(start, end),
            input,
            use_reentrant=use_reentrant,
            preserve_rng_state=preserve,
        )
    return run_function(end + 1, len(functions) - 1)(input)


# --- random state -------------------------------------------------------------------------------
def _rng_states(values: Any) -> dict[Any, Any]:
    """The generator state of every device in use and of the tensors' devices."""
    from ..backends import loaded_backends
    from ..ops.creation import get_rng_state
    from ..tensor import Tensor

    devices = set(loaded_backends())
    devices.update(v.device for v in values if isinstance(v, Tensor))
    return {device: get_rng_state(device) for device in devices}


@contextlib.contextmanager
def _forward_rng(states: dict[Any, Any] | None) -> Iterator[None]:
    """The forward pass's random state inside the block (when ``states``), the current
    one put back afterwards."""
    if states is None:
        yield
        return
    from ..ops.creation import set_rng_state

    current = _rng_states(())
    for device, state in states.items():
        set_rng_state(state, device)
    try:
        yield
    finally:
        for device, state in current.items():
            set_rng_state(state, device)


def _as_tuple(outputs: Any) -> tuple[Any, ...]:
    return tuple(outputs) if isinstance(outputs, tuple | list) else (outputs,)


# --- use_reentrant=True -------------------------------------------------------------------------
class _ReentrantCheckpoint(Function):
    """PyTorch's ``CheckpointFunction``: forward under no_grad, backward re-runs the
    function and calls backward() on it (gradients of captured parameters go to .grad)."""

    @staticmethod
    def forward(ctx: Any, run_function: Any, preserve: bool, *args: Any) -> Any:
        from ..tensor import Tensor

        if not any(a.requires_grad for a in args if isinstance(a, Tensor)):
            warnings.warn(
                "None of the inputs have requires_grad=True. Gradients will be None",
                stacklevel=4,
            )
        ctx.run_function = run_function
        ctx.rng = _rng_states(args) if preserve else None
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        return run_function(*args)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        from ..tensor import Tensor

        if not autograd._pass.callbacks:  # a kg.autograd.grad pass, not backward()
            raise BackwardError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() "
                "or passing an `inputs` parameter to .backward(). To resolve this error, you "
                "can either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument."
            )
        inputs = list(ctx.inputs)
        for position, tensor in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[position] = tensor
        with _forward_rng(ctx.rng):
            detached = detach_variable(tuple(inputs))
            with autograd.enable_grad():
                outputs = _as_tuple(ctx.run_function(*detached))
        pairs = [
            (output, grad)
            for output, grad in zip(outputs, grad_outputs)
            if isinstance(output, Tensor) and output.requires_grad and grad is not None
        ]
        if not pairs:
            raise BackwardError(
                "none of output has requires_grad=True, this checkpoint() is not necessary"
            )
        with autograd.enable_grad():
            root = pairs[0][0] if len(pairs) == 1 else sum((o * g).sum() for o, g in pairs)
        autograd.backward(root, pairs[0][1] if len(pairs) == 1 else None)
        grads = tuple(x.grad if isinstance(x, Tensor) else None for x in detached)
        return (None, None, *grads)


# --- use_reentrant=False ------------------------------------------------------------------------
class _Run:
    """A run of the checkpointed function: its outputs and the tensors requiring grad
    that it read (leaves of its graph), as the caller's tensors."""

    def __init__(self, function: Any, args: tuple, kwargs: dict) -> None:
        from ..tensor import Tensor

        self.copies = {}  # id(detached copy) -> the argument it stands for
        detached_args = []
        for value in args:
            if isinstance(value, Tensor):
                copy = _detached(value)
                self.copies[id(copy)] = value
                value = copy
            detached_args.append(value)
        detached_kwargs = {}
        for key, value in kwargs.items():
            if isinstance(value, Tensor):
                copy = _detached(value)
                self.copies[id(copy)] = value
                value = copy
            detached_kwargs[key] = value
        with autograd.enable_grad(), autograd.logging_nodes() as created:
            self.result = function(*detached_args, **detached_kwargs)
        self.leaves = _leaves_read(_as_tuple(self.result), created)
        created.clear()

    def originals(self) -> list[Any]:
        return [self.copies.get(id(leaf), leaf) for leaf in self.leaves]


def _leaves_read(outputs: tuple[Any, ...], created: list[Any]) -> list[Any]:
    """The leaf tensors requiring grad that ``outputs`` were computed from, through the
    nodes in ``created`` only (in a fixed order)."""
    from ..tensor import Tensor

    inner = {id(node) for node in created}
    leaves: list[Any] = []
    seen: set[int] = set()
    stack = []
    for output in outputs:
        if not isinstance(output, Tensor) or not output.requires_grad:
            continue
        if output._node is None:
            if id(output) not in seen:
                seen.add(id(output))
                leaves.append(output)
        else:
            stack.append(output._node)
    visited: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if id(node) not in inner:
            raise UnsupportedError(
                f"checkpoint: the function reads a tensor that requires grad and was computed "
                f"outside it (by '{node.name}'), not passed as an argument; kernelgrad's "
                "checkpoint differentiates only arguments and leaf tensors (parameters) the "
                "function reads: pass that tensor as an argument of checkpoint"
            )
        for edge in reversed(node.edges):
            if edge is None:
                continue
            if isinstance(edge, autograd.Node):
                stack.append(edge)
            elif id(edge) not in seen:
                seen.add(id(edge))
                leaves.append(edge)
    return leaves


def _checkpoint_recorded(
    function: Any, preserve: bool, context_fn: Any, check: bool, args: tuple, kwargs: dict
) -> Any:
    forward_context, recompute_context = context_fn()
    if not autograd.is_grad_enabled():
        with forward_context:
            return function(*args, **kwargs)
    rng = _rng_states((*args, *kwargs.values())) if preserve else None
    with forward_context:
        run = _Run(function, args, kwargs)
    result, originals = run.result, run.originals()
    outputs = [_plain(value) for value in _as_tuple(result)]
    signature = [_meta(value) for value in outputs], [_meta(leaf) for leaf in originals]
    del run  # the graph of the first run, and the activations it saved, go here

    state = (function, args, kwargs, rng, recompute_context, originals, signature, check)
    recorded = _RecordedCheckpoint.apply(state, tuple(outputs), *originals)
    if not isinstance(recorded, tuple):  # nothing read requires grad: no node
        recorded = tuple(outputs)
    if isinstance(result, tuple | list):
        return type(result)(recorded) if isinstance(result, list) else tuple(recorded)
    return recorded[0]


def _plain(value: Any) -> Any:
    from ..tensor import Tensor

    return value.detach() if isinstance(value, Tensor) else value


def _meta(value: Any) -> Any:
    from ..tensor import Tensor

    return (tuple(value.shape), value.dtype) if isinstance(value, Tensor) else None


class _RecordedCheckpoint(Function):
    """One node from the tensors the function read to its outputs; backward re-runs."""

    @staticmethod
    def forward(ctx: Any, state: Any, outputs: tuple[Any, ...], *leaves: Any) -> Any:
        from ..tensor import Tensor

        ctx.state = state
        _, args, kwargs = state[:3]
        # saved so that an in-place change to an argument before backward raises
        ctx.save_for_backward(*(v for v in (*args, *kwargs.values()) if isinstance(v, Tensor)))
        return outputs

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        from ..tensor import Tensor

        function, args, kwargs, rng, recompute_context, originals, signature, check = ctx.state
        ctx.saved_tensors  # noqa: B018 (raises if an argument was changed in place)
        create_graph = autograd.is_grad_enabled()
        with _forward_rng(rng), recompute_context:
            run = _Run(function, args, kwargs)
        outputs = _as_tuple(run.result)
        if check:
            _check_same(signature, outputs, run.originals())
        position = {id(leaf): i for i, leaf in enumerate(run.originals())}
        missing = [leaf for leaf in originals if id(leaf) not in position]
        if missing:
            raise CheckpointError(
                f"torch.utils.checkpoint: the recomputation of the checkpointed function no "
                f"longer reads a tensor of shape {tuple(missing[0].shape)} that the first run "
                "read; the function must do the same work when it runs again"
            )
        inputs = [run.leaves[position[id(leaf)]] for leaf in originals]
        pairs = [
            (output, grad)
            for output, grad in zip(outputs, grad_outputs)
            if isinstance(output, Tensor) and output.requires_grad and grad is not None
        ]
        if not pairs or not inputs:
            return (None, None, *([None] * len(originals)))
        # hooks of the leaves run once, when the outer pass accumulates their gradients
        hooks = {id(x): autograd._gradient_hooks.pop(id(x), None) for x in inputs}
        hooks = {key: value for key, value in hooks.items() if value is not None}
        try:
            grads = autograd.grad(
                [o for o, _ in pairs],
                inputs,
                [g for _, g in pairs],
                create_graph=create_graph,
                allow_unused=True,
            )
        finally:
            autograd._gradient_hooks.update(hooks)
        return (None, None, *grads)


def _check_same(signature: Any, outputs: tuple[Any, ...], leaves: list[Any]) -> None:
    first_outputs, first_leaves = signature
    again = [_meta(value) for value in outputs], [_meta(leaf) for leaf in leaves]
    for what, before, after in (
        ("outputs", first_outputs, again[0]),
        ("tensors read", first_leaves, again[1]),
    ):
        if before != after:
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                f"different metadata than during the forward pass: the {what} were "
                f"{_describe(before)} in the forward pass and {_describe(after)} when "
                "recomputed. The function must compute the same thing when it runs again "
                "(or pass determinism_check='none')"
            )


def _describe(metas: list[Any]) -> str:
    return "[" + ", ".join("-" if m is None else f"{m[1]}{list(m[0])}" for m in metas) + "]"
