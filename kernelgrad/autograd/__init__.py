"""Reverse-mode automatic differentiation: graph nodes, grad mode and ``backward``.

Every differentiable operation that runs while grad mode is on and has an input that
requires grad records a :class:`Node` on its output. The node holds

* ``edges``: for each input, the input's own node (an intermediate result), the input
  tensor itself (a leaf that requires grad: its ``.grad`` is accumulated), or None;
* ``vjp``: a closure ``grad_output -> tuple of input grads`` written in Tensor ops, so
  backward runs on any backend and can itself be differentiated (``create_graph``);
* ``saved``: the tensors the closure reads, with their storage versions at save time.
  An in-place change to a saved tensor makes backward raise instead of returning a
  wrong gradient.

Nodes do not hold their inputs' tensors, only edges, so intermediate activations that
no VJP needs are freed as soon as the forward pass drops them.

``backward`` walks the graph iteratively (no recursion limit, however long the chain)
in reverse topological order, reduces each input gradient to the input's shape when
the forward broadcast it, and frees the saved tensors afterwards unless
``retain_graph=True`` (a node recorded ``reusable``, which saves none, can run again).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .. import tracing
from ..errors import BackwardError, InplaceError, UnsupportedError, format_shape

if TYPE_CHECKING:
    from ..tensor import Tensor

__all__ = [
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "Node",
    "backward",
    "register_post_accumulate_grad_hook",
    "queue_callback",
]


# --- grad mode -------------------------------------------------------------------------
class _GradMode(threading.local):
    def __init__(self) -> None:
        self.enabled = True


_mode = _GradMode()


def is_grad_enabled() -> bool:
    return _mode.enabled


class set_grad_enabled:
    """Context manager (and decorator) that turns recording on or off.

    >>> import kernelgrad as kg
    >>> x = kg.ones(2, requires_grad=True)
    >>> with kg.set_grad_enabled(False):
    ...     (x * 2).requires_grad
    False
    """

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        self._previous.append(_mode.enabled)
        _mode.enabled = self.mode

    def __exit__(self, *exc_info: Any) -> None:
        _mode.enabled = self._previous.pop()

    def __call__(self, fn: Callable) -> Callable:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)(self.mode):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(set_grad_enabled):
    """Disable gradient recording in a block or a decorated function (inference, updates).

    >>> import kernelgrad as kg
    >>> w = kg.ones(3, requires_grad=True)
    >>> with kg.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    def __init__(self) -> None:
        super().__init__(False)

    def __call__(self, fn: Callable) -> Callable:  # type(self)(mode) would fail here
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with no_grad():
                return fn(*args, **kwargs)

        return wrapper


class enable_grad(set_grad_enabled):
    """Re-enable gradient recording inside a ``no_grad`` block."""

    def __init__(self) -> None:
        super().__init__(True)

    def __call__(self, fn: Callable) -> Callable:
        import functools

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with enable_grad():
                return fn(*args, **kwargs)

        return wrapper


class _InferenceState(threading.local):
    def __init__(self) -> None:
        self.stack: list[bool] = []


_inference = _InferenceState()


class inference_mode(set_grad_enabled):
    """PyTorch's ``torch.inference_mode``: a block (or decorated function) that records
    no graph. Here it is exactly :class:`no_grad` (tensors made inside may join a graph
    later, which PyTorch refuses); ``inference_mode(False)`` turns recording back on.
    Usable as ``with``, as ``@kg.inference_mode()`` and as ``@kg.inference_mode``.

    >>> import kernelgrad as kg
    >>> w = kg.ones(3, requires_grad=True)
    >>> with kg.inference_mode():
    ...     y = w * 2
    ...     kg.is_inference_mode_enabled()
    True
    >>> y.requires_grad
    False
    """

    def __new__(cls, mode: Any = True) -> Any:
        if callable(mode):  # @kg.inference_mode without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        super().__init__(not mode)
        self.inference = bool(mode)

    def __enter__(self) -> None:
        super().__enter__()
        _inference.stack.append(self.inference)

    def __exit__(self, *exc_info: Any) -> None:
        _inference.stack.pop()
        super().__exit__(*exc_info)

    def __call__(self, fn: Callable) -> Callable:
        import functools

        inference = self.inference

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(inference):
                return fn(*args, **kwargs)

        return wrapper


def is_inference_mode_enabled() -> bool:
    """True inside ``kg.inference_mode()``."""
    return bool(_inference.stack) and _inference.stack[-1]


__all__ += ["inference_mode", "is_inference_mode_enabled", "AccumulateGrad"]


# --- graph -----------------------------------------------------------------------------
class Node:
    """One recorded operation. See the module docstring."""

    __slots__ = (
        "__weakref__",
        "edges",
        "input_meta",
        "name",
        "released",
        "retained",
        "reusable",
        "saved",
        "vjp",
    )

    def __init__(
        self,
        name: str,
        edges: tuple[Any, ...],
        input_meta: tuple[tuple[tuple[int, ...], Any] | None, ...],
        vjp: Callable[[Tensor], Sequence[Tensor | None]],
        saved: tuple[Tensor, ...] = (),
        reusable: bool = False,
    ) -> None:
        self.name = _OPERATION_NAMES.get(name) or _OPERATION_NAMES.setdefault(
            name, _OperationName(name)
        )
        self.edges = edges
        self.input_meta = input_meta  # (shape, dtype) of each input that gets a gradient
        self.vjp: Callable | None = vjp
        self.saved = tuple((t, t._storage.version) for t in saved)
        self.retained: weakref.ref | None = None
        # the VJP reads no tensor of the forward pass (a cast, a reshape): nothing to free,
        # so the node runs again after a backward without retain_graph, as in PyTorch,
        # which frees only saved tensors (`x = x64.float()` made once, used every step)
        self.reusable = reusable
        self.released = False  # a backward without retain_graph went through it

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"

    @property
    def next_functions(self) -> tuple[tuple[Any, int], ...]:
        """PyTorch's view of the graph: one ``(node, 0)`` per input of the operation, the
        node being the input's own :class:`Node`, an :class:`AccumulateGrad` for a leaf
        that requires grad, or None for an input that gets no gradient.

        >>> import kernelgrad as kg
        >>> x = kg.ones(2, requires_grad=True)
        >>> y = (x * 3).sum()
        >>> y.grad_fn.name(), y.grad_fn.next_functions[0][0].name()
        ('SumBackward0', 'MulBackward0')
        >>> y.grad_fn.next_functions[0][0].next_functions[0][0].variable is x
        True
        """
        return tuple(
            (edge if edge is None or isinstance(edge, Node) else AccumulateGrad(edge), 0)
            for edge in self.edges
        )

    def check_saved(self) -> None:
        for tensor, version in self.saved:
            if tensor._storage.version != version:
                raise InplaceError(
                    f"a tensor of shape {format_shape(tensor.shape)} that '{self.name}' saved "
                    f"for its backward pass was modified in place afterwards (version "
                    f"{tensor._storage.version}, saved at version {version}), so its gradient "
                    "would be wrong. Use the out-of-place form of the later operation (for "
                    "example `x = x + 1` instead of `x += 1`), or `.clone()` the tensor "
                    "before changing it."
                )

    def release(self) -> None:
        self.released = True
        if self.reusable:
            return
        self.vjp = None
        self.saved = ()


class _OperationName(str):
    """A node's operation name ("mul"), which can also be called like PyTorch's
    ``grad_fn.name()`` to give the PyTorch-style class name ("MulBackward0")."""

    __slots__ = ()

    def __call__(self) -> str:
        return "".join(part.capitalize() for part in self.split("_")) + "Backward0"


_OPERATION_NAMES: dict[str, _OperationName] = {}


class AccumulateGrad:
    """What ``next_functions`` shows for a leaf tensor that requires grad: backward
    adds into ``variable.grad`` (PyTorch's ``AccumulateGrad`` node)."""

    __slots__ = ("variable",)

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable

    @property
    def next_functions(self) -> tuple[()]:
        return ()

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    def __repr__(self) -> str:
        return "<AccumulateGrad>"


class SavedOutput:
    """An operation's output saved for its own backward, without a reference cycle.

    Saving the output tensor itself would make output -> node -> closure -> output a
    cycle that keeps the buffer alive until the garbage collector runs. Instead the
    closure keeps a detached tensor (same memory) and a weak reference to the node; under
    ``create_graph`` the node is re-attached so that second derivatives flow through it.
    """

    __slots__ = ("_node_ref", "data")

    def __init__(self, output: Tensor) -> None:
        self.data = output.detach()
        self._node_ref: weakref.ref | None = None

    def bind(self, node: Node | None) -> None:
        self._node_ref = weakref.ref(node) if node is not None else None

    def get(self) -> Tensor:
        node = self._node_ref() if self._node_ref is not None else None
        if node is None or not _mode.enabled:
            return self.data
        attached = self.data.detach()
        attached._node = node
        attached.requires_grad = True
        return attached


def record(
    name: str,
    inputs: Sequence[Any],
    output: Tensor,
    vjp: Callable[[Tensor], Sequence[Tensor | None]],
    saved: tuple[Tensor, ...] = (),
    reusable: bool = False,
) -> None:
    """Attach a node to ``output`` if grad mode is on and an input requires grad.

    ``inputs`` may contain non-tensors (scalars), which get no gradient. ``reusable``:
    ``vjp`` holds no tensor (only shapes, dtypes, devices), so backward need not free it."""
    edges = []
    meta = []
    needed = False
    for x in inputs:
        if getattr(x, "requires_grad", False):
            base = x._base
            if base is not None and getattr(x, "_base_node", False) not in (False, base._node):
                refresh_view(x)  # its base was changed in place: a new history first
                if not x.requires_grad:
                    edges.append(None)
                    meta.append(None)
                    continue
            needed = True
            edges.append(x._node if x._node is not None else x)
            meta.append((x._shape, x.dtype))
        else:
            edges.append(None)
            meta.append(None)
    if not needed:
        return
    node = output._node = Node(name, tuple(edges), tuple(meta), vjp, saved, reusable)
    output.requires_grad = True
    if _node_logs:  # kg.utils.checkpoint is finding the nodes a function creates
        log = _node_logs.get(threading.get_ident())
        if log is not None:
            log.append(node)


# The nodes recorded on a thread while kg.utils.checkpoint runs a function there (thread
# id -> list); see :func:`logging_nodes`.
_node_logs: dict[int, list[Node]] = {}


class logging_nodes:
    """``with logging_nodes() as nodes:`` lists every node recorded on this thread in
    the block (kg.utils.checkpoint tells the nodes a function created from those it
    reached through captured tensors). Blocks nest; an inner block's nodes are its own."""

    def __enter__(self) -> list[Node]:
        self._thread = threading.get_ident()
        self._previous = _node_logs.get(self._thread)
        nodes: list[Node] = []
        _node_logs[self._thread] = nodes
        return nodes

    def __exit__(self, *exc_info: Any) -> None:
        if self._previous is None:
            del _node_logs[self._thread]
        else:
            _node_logs[self._thread] = self._previous


# Installed by ops/inplace.py (autograd sits below the ops that build the new history).
_view_refresher: Callable[[Any], None] | None = None


def refresh_view(view: Tensor) -> None:
    """Give ``view`` a new history if its base's history changed since the view got its
    own (an in-place op on the base or on another view of it): the view then reads the
    base's new values, so its node becomes a view of the base's new node, as PyTorch
    regenerates a view's ``grad_fn``. Nothing happens for an up-to-date view."""
    base = view._base
    if base is None or getattr(view, "_base_node", False) in (False, base._node):
        return
    assert _view_refresher is not None
    _view_refresher(view)


def needs_grad(*inputs: Any) -> bool:
    if not _mode.enabled:
        return False
    for x in inputs:  # noqa: SIM110 (a loop is faster than any() over a generator)
        if getattr(x, "requires_grad", False):
            return True
    return False


def _topological_order(*roots: Node) -> list[Node]:
    """Nodes reachable from ``roots``, each before the nodes of its inputs (the reverse of
    a depth-first post-order over all of them)."""
    order: list[Node] = []
    visited: set[int] = set()
    for root in roots:
        if id(root) not in visited:
            visited.add(id(root))
            _depth_first(root, visited, order)
    order.reverse()
    return order


def _depth_first(root: Node, visited: set[int], order: list[Node]) -> None:
    """Append the nodes reachable from ``root`` and not yet ``visited`` to ``order``, each
    after the nodes of its inputs."""
    stack: list[tuple[Node, int]] = [(root, 0)]
    while stack:
        node, position = stack[-1]
        edges = node.edges
        while position < len(edges):
            child = edges[position]
            position += 1
            if isinstance(child, Node) and id(child) not in visited:
                visited.add(id(child))
                stack[-1] = (node, position)
                stack.append((child, 0))
                break
        else:
            stack.pop()
            order.append(node)


def _accumulate(existing: Tensor | None, grad: Tensor) -> Tensor:
    return grad if existing is None else existing + grad


def _add_to_leaf(leaf: Tensor, grad: Tensor, handed_out: set[int], create_graph: bool) -> None:
    """``leaf.grad += grad``: the first gradient becomes ``.grad`` (owned, see
    :func:`_own`); later ones are added in place, as PyTorch's AccumulateGrad does
    outside ``create_graph`` (a tensor taken from ``.grad`` before sees the sum), so
    that kg.compile's replay of a step that accumulates adds into the ``.grad`` of the
    moment, not into the buffer it had when the step was traced. Under
    ``create_graph``, or when the two differ in shape, dtype or device, or ``.grad``
    itself requires grad, the sum is a new tensor."""
    existing = leaf.grad
    if existing is None:
        leaf.grad = _own(grad, handed_out)
    elif (
        create_graph
        or existing.requires_grad
        or existing._shape != grad._shape
        or existing.dtype is not grad.dtype
        or existing._storage.device != grad._storage.device
    ):
        leaf.grad = existing + grad
    else:
        existing.add_(grad)
    _kept_by_trace(leaf)


def _kept_by_trace(leaf: Tensor) -> None:
    """Tell a kg.compile trace in progress that ``leaf.grad`` holds a gradient it made
    or wrote: its replays are valid only while ``leaf.grad`` keeps that tensor."""
    if not tracing.RECORDING[0]:  # no trace in progress anywhere (the usual case)
        return
    recorder = tracing.active_recorder()
    if recorder is not None:
        recorder.keep(leaf, "grad")


def _own(grad: Tensor, handed_out: set[int]) -> Tensor:
    """A leaf's ``.grad`` must own its memory: optimizers update it in place. Copy when
    the gradient is a view (e.g. a stride-0 expansion) or was already given to another
    leaf (``a + b`` passes the same gradient object to both)."""
    if grad._base is not None or not grad.is_contiguous() or id(grad) in handed_out:
        grad = grad.clone()
    handed_out.add(id(grad))
    return grad


def backward(
    root: Tensor,
    gradient: Tensor | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
) -> None:
    """Compute d(root)/d(leaf) for every leaf that requires grad, adding into ``.grad``.

    ``retain_graph`` defaults to ``create_graph`` (a graph built for second derivatives
    must stay alive for the second backward)."""
    if retain_graph is None:
        retain_graph = create_graph
    if root._base is not None:
        refresh_view(root)

    if not root.requires_grad:
        raise BackwardError(
            "backward() was called on a tensor that does not require grad: none of the "
            "tensors it was computed from had requires_grad=True, or it was computed under "
            "kg.no_grad(). Create the parameters with requires_grad=True (or call "
            ".requires_grad_() on them) before computing the loss."
        )
    gradient = _seed(root, gradient, "backward()")

    if _retaining:
        _move_retained()
    callbacks: list[Callable[[], Any]] = []
    _pass.callbacks.append(callbacks)
    try:
        with set_grad_enabled(create_graph):
            _backward_pass(root, gradient, retain_graph, create_graph)
    finally:
        _pass.callbacks.pop()
    for callback in callbacks:
        callback()


def _backward_pass(root: Tensor, gradient: Tensor, retain_graph: bool, create_graph: bool) -> None:
    gradient = gradient if create_graph else gradient.detach()
    handed_out: set[int] = {id(gradient)}  # the caller's tensor is not ours to give
    if root._node is None:  # a leaf: d root / d root
        if _gradient_hooks:
            gradient = _run_gradient_hooks(id(root), gradient)
        _add_to_leaf(root, gradient, handed_out, create_graph)
        if id(root) in _grad_hooks:
            _grad_hooks[id(root)].fire()
        return
    grads: dict[int, Tensor] = {id(root._node): gradient}
    order = _topological_order(root._node)
    hooked = _HookedLeaves(order) if _grad_hooks else None
    # gradients of leaves with Tensor.register_hook hooks: summed over the pass, then given
    # to the hooks and accumulated into .grad when the pass ends
    held: dict[int, tuple[Tensor, Tensor]] = {}
    for node in order:
        grad = grads.pop(id(node), None)
        if grad is None:
            if hooked is not None:
                hooked.passed(node)
            continue
        if _gradient_hooks and id(node) in _gradient_hooks:
            grad = _run_gradient_hooks(id(node), grad)
        if node.retained is not None:
            owner = node.retained()
            if owner is not None:
                owner.grad = _accumulate(owner.grad, grad)
                _kept_by_trace(owner)
        for edge, input_grad in _input_grads(node, grad, retain_graph, "backward()"):
            if isinstance(edge, Node):
                key = id(edge)
                grads[key] = _accumulate(grads.get(key), input_grad)
                continue
            if _gradient_hooks and id(edge) in _gradient_hooks:
                earlier = held.get(id(edge))
                held[id(edge)] = (edge, _accumulate(earlier and earlier[1], input_grad))
                continue
            _add_to_leaf(edge, input_grad, handed_out, create_graph)
            if hooked is not None and not isinstance(edge, Node):
                hooked.received(edge)
        if hooked is not None:
            hooked.passed(node)
    for key, (leaf, grad) in held.items():
        grad = _run_gradient_hooks(key, grad)
        _add_to_leaf(leaf, grad, handed_out, create_graph)
        if key in _grad_hooks:
            _grad_hooks[key].fire()


def _input_grads(
    node: Node, grad: Tensor, retain_graph: bool, caller: str
) -> list[tuple[Any, Tensor]]:
    """(edge, gradient) for each input of ``node`` that gets one, given the gradient of
    its output: the node's VJP, each result summed to its input's shape and cast to its
    dtype. The node's saved tensors are freed unless ``retain_graph``."""
    if node.vjp is None:
        raise BackwardError(
            f"{caller} reached '{node.name}', whose saved tensors were already freed by an "
            "earlier backward() through this graph. Pass retain_graph=True to the first "
            "backward() (or autograd.grad()) if you need to run it twice."
        )
    node.check_saved()
    input_grads = node.vjp(grad)
    if not retain_graph:
        node.release()
    if _anomaly.enabled:
        _check_anomaly(node, input_grads)
    result = []
    for edge, meta, input_grad in zip(node.edges, node.input_meta, input_grads):
        if edge is None or input_grad is None:
            continue
        shape, dtype = meta
        if input_grad._shape != shape:
            input_grad = input_grad.sum_to_shape(shape)
        if input_grad.dtype is not dtype:
            input_grad = input_grad.to(dtype)
        result.append((edge, input_grad))
    return result


# --- autograd.grad: gradients returned, not accumulated -----------------------------------------
def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` (a tensor or a sequence) with respect to ``inputs``
    (a tensor or a sequence; leaves or intermediate tensors), returned as a tuple and
    added to no ``.grad`` (PyTorch's ``torch.autograd.grad``). ``grad_outputs`` weighs
    each output (None: 1 for a one-element output); ``create_graph=True`` records the
    computation of the gradients, so that they can be differentiated again (a gradient
    penalty); ``retain_graph`` defaults to ``create_graph``. An input the outputs do not
    depend on raises, or gives None with ``allow_unused=True`` (zeros with
    ``materialize_grads=True``). Tensor hooks run as in ``backward()``.

    >>> import kernelgrad as kg
    >>> x = kg.tensor([1.0, 2.0], requires_grad=True)
    >>> (g,) = kg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    >>> g.tolist(), kg.autograd.grad(g.sum(), x)[0].tolist(), x.grad
    ([3.0, 12.0], [6.0, 12.0], None)
    """
    from ..tensor import Tensor

    if is_grads_batched:
        raise UnsupportedError(
            "autograd.grad(is_grads_batched=True) is not supported: call it once per row of "
            "grad_outputs (kernelgrad has no vmap)"
        )
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "autograd.grad: materialize_grads=True needs allow_unused to be True or None"
        )
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    outputs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    else:
        grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise BackwardError(
            f"autograd.grad: {len(grad_outputs)} grad_outputs for {len(outputs)} outputs; "
            "give one per output (None for a one-element output)"
        )
    for position, tensor in enumerate(inputs):
        if not isinstance(tensor, Tensor) or not tensor.requires_grad:
            raise BackwardError(
                f"autograd.grad: input {position} does not require grad, so it has no "
                "gradient; call .requires_grad_() on it before computing the outputs"
            )
        if tensor._base is not None:
            refresh_view(tensor)
    seeds = []
    for position, (output, seed) in enumerate(zip(outputs, grad_outputs)):
        if output._base is not None:
            refresh_view(output)
        if not output.requires_grad:
            raise BackwardError(
                f"autograd.grad: output {position} does not require grad and has no grad_fn: "
                "none of the tensors it was computed from requires grad, or it was computed "
                "under kg.no_grad()"
            )
        seeds.append(_seed(output, seed, f"autograd.grad(): output {position}"))
    if retain_graph is None:
        retain_graph = create_graph
    with set_grad_enabled(create_graph):
        found = _grad_pass(outputs, seeds, inputs, retain_graph, create_graph)
    results: list[Tensor | None] = []
    for position, (tensor, gradient) in enumerate(zip(inputs, found)):
        if gradient is None:
            if not allow_unused:
                raise BackwardError(
                    f"autograd.grad: input {position} was not used to compute the outputs "
                    "(no path from it to them); pass allow_unused=True to get None for it"
                )
            if materialize_grads:
                from ..ops.creation import zeros_like

                gradient = zeros_like(tensor)
        elif tensor.is_contiguous() and not gradient.is_contiguous():
            # a layout of the backward pass (conv2d's batch-innermost gradient, a padded
            # buffer's interior): the gradient of a contiguous input is contiguous, as in
            # PyTorch, where WGAN-GP's `gradients.view(gradients.size(0), -1)` relies on it
            with set_grad_enabled(create_graph):
                gradient = gradient.contiguous()
        results.append(gradient)
    return tuple(results)


def _seed(output: Tensor, gradient: Any, what: str) -> Tensor:
    """The gradient a pass starts from at ``output`` (``backward()``'s root, one of
    ``autograd.grad``'s outputs): ``gradient`` checked against it (shape, device), or ones
    for a one-element output; ``what`` names the caller in the errors."""
    from ..tensor import Tensor

    if gradient is None:
        if output.numel() != 1:
            raise BackwardError(
                f"{what}: the tensor has shape {format_shape(output.shape)}, so it needs a "
                "`gradient` argument of the same shape (d loss / d this tensor); only a "
                "one-element tensor (a scalar loss) gets an implicit gradient of 1"
            )
        from ..ops.creation import ones_like

        return ones_like(output)
    if not isinstance(gradient, Tensor):
        from ..ops.creation import tensor as make_tensor

        gradient = make_tensor(gradient, dtype=output.dtype, device=output.device)
    if gradient.shape != output.shape:
        raise BackwardError(
            f"{what}: `gradient` has shape {format_shape(gradient.shape)} but the tensor "
            f"has shape {format_shape(output.shape)}; they must match"
        )
    if gradient.device != output.device:
        raise BackwardError(
            f"{what}: `gradient` is on {gradient.device} but the tensor is on "
            f"{output.device}; move it with gradient.to({str(output.device)!r})"
        )
    return gradient


def _grad_pass(
    outputs: Sequence[Tensor],
    seeds: list[Tensor],
    inputs: Sequence[Tensor],
    retain_graph: bool,
    create_graph: bool,
) -> list[Tensor | None]:
    """The gradient reaching each of ``inputs`` from ``outputs`` (weighed by ``seeds``);
    None where none does. No ``.grad`` is written."""
    found: list[Tensor | None] = [None] * len(inputs)
    at_node: dict[int, list[int]] = {}  # node -> positions of the inputs it produced
    at_leaf: dict[int, list[int]] = {}  # leaf -> positions of the inputs it is
    for position, tensor in enumerate(inputs):
        owner = at_leaf if tensor._node is None else at_node
        key = id(tensor) if tensor._node is None else id(tensor._node)
        owner.setdefault(key, []).append(position)
    grads: dict[int, Tensor] = {}
    leaf_grads: dict[int, Tensor] = {}
    roots: list[Node] = []
    for output, seed in zip(outputs, seeds):
        seed = seed if create_graph else seed.detach()
        if output._node is None:  # a leaf output: d output / d output
            leaf_grads[id(output)] = _accumulate(leaf_grads.get(id(output)), seed)
            continue
        key = id(output._node)
        grads[key] = _accumulate(grads.get(key), seed)
        roots.append(output._node)
    order = _topological_order(*roots)
    leading = _leading_to(order, at_node, at_leaf)
    for node in order:
        gradient = grads.pop(id(node), None)
        if gradient is None:
            continue
        for position in at_node.get(id(node), ()):
            found[position] = gradient  # before the tensor's hooks, as PyTorch captures it
        if id(node) not in leading:
            continue  # no input lies beyond it: not run (nor freed), as in PyTorch
        if _gradient_hooks and id(node) in _gradient_hooks:
            gradient = _run_gradient_hooks(id(node), gradient)
        for edge, input_grad in _input_grads(node, gradient, retain_graph, "autograd.grad()"):
            key = id(edge)
            if isinstance(edge, Node):
                grads[key] = _accumulate(grads.get(key), input_grad)
            elif key in at_leaf:
                leaf_grads[key] = _accumulate(leaf_grads.get(key), input_grad)
    for key, positions in at_leaf.items():
        gradient = leaf_grads.get(key)
        if gradient is not None and _gradient_hooks and key in _gradient_hooks:
            gradient = _run_gradient_hooks(key, gradient)
        for position in positions:
            found[position] = gradient
    return found


def _leading_to(order: list[Node], at_node: dict[int, Any], at_leaf: dict[int, Any]) -> set[int]:
    """The nodes of ``order`` (a topological order) with an edge to an input of
    ``autograd.grad`` or to a node that has one: the nodes the pass must run. The others
    lie beyond the inputs (an intermediate input's own history)."""
    leading: set[int] = set()
    for node in reversed(order):  # each node's inputs before the node
        for edge in node.edges:
            if isinstance(edge, Node):
                if id(edge) in leading or id(edge) in at_node:
                    leading.add(id(node))
                    break
            elif edge is not None and id(edge) in at_leaf:
                leading.add(id(node))
                break
    return leading


# --- hooks on leaves and on the end of a backward pass ------------------------------------------
# Data-parallel training (kg.nn.parallel.DistributedDataParallel) starts averaging a
# parameter's gradient across processes as soon as backward has finished it, while the
# rest of backward still runs, and waits for the averages when the pass ends.
class _PassState(threading.local):
    def __init__(self) -> None:
        self.callbacks: list[list[Callable[[], Any]]] = []


_pass = _PassState()


class _LeafHooks:
    """The hooks of one leaf tensor (kept by ``id``: tensors compare elementwise)."""

    __slots__ = ("hooks", "key", "tensor")

    def __init__(self, tensor: Tensor) -> None:
        self.key = id(tensor)
        self.tensor = weakref.ref(tensor, self._forget)
        self.hooks: list[Callable[[Tensor], Any]] = []

    def _forget(self, _reference: Any) -> None:
        if _grad_hooks.get(self.key) is self:
            del _grad_hooks[self.key]

    def fire(self) -> None:
        tensor = self.tensor()
        if tensor is not None:
            for hook in list(self.hooks):
                hook(tensor)


_grad_hooks: dict[int, _LeafHooks] = {}


class RemovableHandle:
    """Returned by :func:`register_post_accumulate_grad_hook`; ``remove()`` unregisters."""

    def __init__(self, entry: _LeafHooks, hook: Callable[[Tensor], Any]) -> None:
        self._entry = entry
        self._hook = hook

    def remove(self) -> None:
        entry = self._entry
        if self._hook in entry.hooks:
            entry.hooks.remove(self._hook)
        if not entry.hooks and _grad_hooks.get(entry.key) is entry:
            del _grad_hooks[entry.key]


def register_post_accumulate_grad_hook(
    tensor: Tensor, hook: Callable[[Tensor], Any]
) -> RemovableHandle:
    """Call ``hook(tensor)`` in every backward pass once ``tensor.grad`` holds all of that
    pass's contributions (PyTorch's ``Tensor.register_post_accumulate_grad_hook``).

    ``tensor`` must be a leaf that requires grad. The hook runs while backward continues
    with other tensors; a pass that gives ``tensor`` no gradient does not call it.

    >>> import kernelgrad as kg
    >>> w = kg.ones(2, requires_grad=True)
    >>> seen = []
    >>> hook = lambda t: seen.append(t.grad.tolist())
    >>> handle = kg.autograd.register_post_accumulate_grad_hook(w, hook)
    >>> ((w * 3).sum() + (w * 4).sum()).backward()
    >>> seen
    [[7.0, 7.0]]
    >>> handle.remove()
    """
    if tensor._node is not None or not tensor.requires_grad:
        raise BackwardError(
            "register_post_accumulate_grad_hook needs a leaf tensor that requires grad (a "
            f"parameter); got a tensor of shape {format_shape(tensor.shape)} that "
            + ("is the result of an operation" if tensor._node is not None else "does not")
            + (" require grad" if tensor._node is None else "")
        )
    entry = _grad_hooks.get(id(tensor))
    if entry is None or entry.tensor() is not tensor:
        entry = _grad_hooks[id(tensor)] = _LeafHooks(tensor)
    entry.hooks.append(hook)
    return RemovableHandle(entry, hook)


def queue_callback(callback: Callable[[], Any]) -> None:
    """Call ``callback()`` when the backward pass in progress has finished (after every
    gradient is written). Only valid inside a backward pass, e.g. from a hook.

    >>> import kernelgrad as kg
    >>> w = kg.ones(2, requires_grad=True)
    >>> order = []
    >>> def hook(t):
    ...     order.append("hook")
    ...     kg.autograd.queue_callback(lambda: order.append("end of backward"))
    >>> handle = kg.autograd.register_post_accumulate_grad_hook(w, hook)
    >>> (w * 2).sum().backward()
    >>> order
    ['hook', 'end of backward']
    """
    if not _pass.callbacks:
        raise BackwardError(
            "queue_callback() was called outside a backward pass; call it from a hook that "
            "backward runs (register_post_accumulate_grad_hook)"
        )
    _pass.callbacks[-1].append(callback)


class _HookedLeaves:
    """Counts, for each hooked leaf, the graph nodes that may still add to its gradient;
    fires the leaf's hooks when the last one has been processed (or skipped)."""

    def __init__(self, order: list[Node]) -> None:
        self.pending: dict[int, int] = {}
        self.got_gradient: set[int] = set()
        for node in order:
            for edge in node.edges:
                if edge is not None and not isinstance(edge, Node) and id(edge) in _grad_hooks:
                    self.pending[id(edge)] = self.pending.get(id(edge), 0) + 1

    def received(self, leaf: Tensor) -> None:
        if id(leaf) in self.pending:
            self.got_gradient.add(id(leaf))

    def passed(self, node: Node) -> None:
        if not self.pending:
            return
        for edge in node.edges:
            if edge is None or isinstance(edge, Node):
                continue
            key = id(edge)
            count = self.pending.get(key)
            if count is None:
                continue
            if count > 1:
                self.pending[key] = count - 1
                continue
            del self.pending[key]
            entry = _grad_hooks.get(key)
            if key in self.got_gradient and entry is not None:
                entry.fire()


# --- Tensor.register_hook: hooks that see (and may replace) a tensor's gradient ----------------
# Kept by the id of a non-leaf tensor's node, or of a leaf tensor, and forgotten when that
# object is collected.
_gradient_hooks: dict[int, list[Callable[[Tensor], Any]]] = {}


class GradientHookHandle:
    """Returned by ``Tensor.register_hook``; ``remove()`` unregisters the hook."""

    def __init__(self, key: int, hook: Callable[[Tensor], Any]) -> None:
        self._key = key
        self._hook = hook

    def remove(self) -> None:
        hooks = _gradient_hooks.get(self._key)
        if hooks is not None and self._hook in hooks:
            hooks.remove(self._hook)
            if not hooks:
                del _gradient_hooks[self._key]


def register_hook(tensor: Tensor, hook: Callable[[Tensor], Any]) -> GradientHookHandle:
    """Call ``hook(grad)`` with the gradient of ``tensor`` in every backward pass, before it
    is used further (or, for a leaf, added to ``.grad``); a tensor the hook returns
    replaces the gradient (PyTorch's ``Tensor.register_hook``). A leaf's hooks see the
    sum of the pass's contributions, once, when the pass ends.

    >>> import kernelgrad as kg
    >>> x = kg.ones(2, requires_grad=True)
    >>> handle = x.register_hook(lambda g: g * 10)
    >>> (x * 3).sum().backward()
    >>> x.grad.tolist()
    [30.0, 30.0]
    """
    if not tensor.requires_grad:
        raise BackwardError(
            "register_hook: the tensor does not require grad, so no gradient will reach the "
            "hook; call .requires_grad_() on the leaf it comes from first"
        )
    owner: Any = tensor if tensor._node is None else tensor._node
    key = id(owner)
    if key not in _gradient_hooks:
        _gradient_hooks[key] = []
        weakref.finalize(owner, _gradient_hooks.pop, key, None)
    _gradient_hooks[key].append(hook)
    return GradientHookHandle(key, hook)


def _run_gradient_hooks(key: int, grad: Tensor) -> Tensor:
    for hook in list(_gradient_hooks.get(key, ())):
        result = hook(grad)
        if result is not None:
            if result.shape != grad.shape:
                raise BackwardError(
                    f"a gradient hook returned a tensor of shape {format_shape(result.shape)} "
                    f"for a gradient of shape {format_shape(grad.shape)}; it must keep the shape"
                )
            grad = result
    return grad


# --- Tensor.retain_grad: the mark follows the tensor's history ----------------------------------
# The mark sits on the tensor's node, where backward reads it; the tensor is also kept
# here (by id, weakly) with the node it marked. An in-place op on the tensor, or on the
# base of a view it is (which regenerates the view's node), gives the tensor a new node:
# backward first moves the mark there, as PyTorch moves its retains_grad hook to the new
# grad_fn, so ``.grad`` is the gradient of the tensor's current value.
_retaining: dict[int, tuple[weakref.ref, weakref.ref]] = {}


def retain_grad(tensor: Tensor) -> None:
    """``Tensor.retain_grad``: keep ``.grad`` for this non-leaf tensor during backward
    (nothing for a leaf, which keeps it anyway)."""
    node = tensor._node
    if node is None:
        return
    key = id(tensor)

    def forget(reference: weakref.ref, key: int = key) -> None:
        entry = _retaining.get(key)
        if entry is not None and entry[0] is reference:
            del _retaining[key]

    entry = _retaining.get(key)
    reference = (
        entry[0] if entry is not None and entry[0]() is tensor else weakref.ref(tensor, forget)
    )
    node.retained = reference
    _retaining[key] = (reference, weakref.ref(node))


def retains_grad(tensor: Tensor) -> bool:
    entry = _retaining.get(id(tensor))
    return entry is not None and entry[0]() is tensor


def _move_retained() -> None:
    for key, (reference, node_reference) in list(_retaining.items()):
        tensor = reference()
        if tensor is None:
            continue
        if tensor._base is not None:
            refresh_view(tensor)  # a view whose base changed gets its new node now
        node = tensor._node
        old = node_reference()
        if node is old:
            continue
        if old is not None and old.retained is reference:
            old.retained = None  # the old node may still be in the graph
        if node is None:  # detached in place
            del _retaining[key]
            continue
        node.retained = reference
        _retaining[key] = (reference, weakref.ref(node))


# --- PyTorch's torch.autograd.Function (kernelgrad/autograd_function.py) -------------------------
from ..autograd_function import Function, FunctionCtx, once_differentiable  # noqa: E402

__all__ += ["Function", "FunctionCtx", "once_differentiable"]


# --- anomaly detection, Variable, functional, gradcheck -----------------------------------------
class _AnomalyState(threading.local):
    def __init__(self) -> None:
        self.enabled = False
        self.check_nan = True


_anomaly = _AnomalyState()


def _check_anomaly(node: Node, input_grads: Sequence[Tensor | None]) -> None:
    """PyTorch's anomaly mode: a backward function that returns NaN raises, naming it."""
    if not _anomaly.check_nan:
        return
    for position, input_grad in enumerate(input_grads):
        if input_grad is None or not input_grad.dtype.is_floating_point:
            continue
        if bool(input_grad.detach().isnan().any().item()):
            raise RuntimeError(
                f"Function '{node.name()}' returned nan values in its {position}th output "
                "(kg.autograd.detect_anomaly)"
            )


class set_detect_anomaly:  # PyTorch's name
    """Turn anomaly detection on or off (PyTorch's ``torch.autograd.set_detect_anomaly``),
    for the calling thread; also a context manager that restores the previous setting.
    While on, a backward function whose gradient contains NaN raises a ``RuntimeError``
    naming it (each gradient is read on the host: slow, for debugging). PyTorch also
    prints the forward call's traceback; kernelgrad names the operation only."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.previous = (_anomaly.enabled, _anomaly.check_nan)
        _anomaly.enabled, _anomaly.check_nan = bool(mode), bool(check_nan)

    def __enter__(self) -> set_detect_anomaly:
        return self

    def __exit__(self, *exc: object) -> None:
        _anomaly.enabled, _anomaly.check_nan = self.previous


class detect_anomaly(set_detect_anomaly):  # PyTorch's name
    """``with kg.autograd.detect_anomaly():`` anomaly detection inside the block."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan_setting = check_nan

    def __enter__(self) -> detect_anomaly:
        super().__init__(True, self.check_nan_setting)
        return self


def is_anomaly_enabled() -> bool:
    return _anomaly.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return _anomaly.check_nan


class _VariableMeta(type):
    def __instancecheck__(cls, instance: object) -> bool:
        from ..tensor import Tensor

        return isinstance(instance, Tensor)


class Variable(metaclass=_VariableMeta):
    """PyTorch's legacy ``Variable``: ``Variable(t, requires_grad=False)`` is the tensor
    itself (``requires_grad`` set when asked), and every tensor is a ``Variable`` for
    ``isinstance``, as in PyTorch since 0.4."""

    def __new__(cls, data: Any = None, requires_grad: bool = False, volatile: bool = False):
        from ..ops.creation import tensor
        from ..tensor import Tensor

        result = data if isinstance(data, Tensor) else tensor(data)
        if requires_grad:
            result.requires_grad_(True)
        return result


from . import functional  # noqa: E402


def __getattr__(name: str) -> Any:
    """``kg.autograd.profiler`` (torch.autograd.profiler), imported on first use."""
    if name == "profiler":
        import importlib

        return importlib.import_module(".profiler", __name__)
    raise AttributeError(f"module 'kernelgrad.autograd' has no attribute {name!r}")


from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402

__all__ += [
    "grad",
    "Variable",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "is_anomaly_check_nan_enabled",
    "functional",
    "gradcheck",
    "gradgradcheck",
    "GradcheckError",
]
