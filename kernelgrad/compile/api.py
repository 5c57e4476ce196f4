"""``kg.compile``: the user-facing function and the cache of compiled plans."""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import autograd
from .. import dtypes as _dtypes
from ..debug import debug_level, log
from ..device import default_device
from ..errors import KernelError
from .graph import Analysis
from .plan import Plan, build_steps
from .trace import LAUNCH_HOOKS, Recorder, TraceError

# --- argument and result structures ------------------------------------------------------------
_CLASSES: list[type] = []
_TENSOR = ("tensor",)  # a tensor's place in a structure (one object: compared by identity)


def _classes() -> tuple[type, type]:
    """(Storage, Tensor) of kernelgrad.tensor, imported on first use: this module may load
    before it (and an import statement in a function costs ~0.5 us per call)."""
    if not _CLASSES:
        from ..tensor import Storage, Tensor

        _CLASSES.extend((Storage, Tensor))
    return _CLASSES[0], _CLASSES[1]


def _flatten(obj: Any, leaves: list[Any], hashable: bool) -> Any:
    """The structure of ``obj`` with its tensors appended to ``leaves`` (in order)."""
    return _flatten_into(obj, leaves, hashable, _classes()[1])


def _flatten_into(obj: Any, leaves: list[Any], hashable: bool, tensor_class: type) -> Any:
    if isinstance(obj, tensor_class):
        leaves.append(obj)
        return _TENSOR
    if isinstance(obj, (list, tuple)):
        children = tuple(_flatten_into(x, leaves, hashable, tensor_class) for x in obj)
        return ("sequence", type(obj), children)
    if isinstance(obj, dict):
        keys = tuple(obj)
        children = tuple(_flatten_into(obj[k], leaves, hashable, tensor_class) for k in keys)
        return ("dict", keys, children)
    if hashable:
        try:
            hash(obj)
        except TypeError:
            raise TypeError(
                f"kg.compile: an argument of type {type(obj).__name__} is not hashable; "
                "compiled functions take tensors, and numbers/strings/tuples that select "
                "which compiled version runs (each new value traces again)"
            ) from None
    return _value(obj)


def _value(obj: Any) -> tuple:
    """A Python value's place in a structure, which is part of the compiled-version key:
    with its type, since ``2``, ``2.0`` and ``True`` are equal (and hash alike) but
    trace differently (``x * 2`` of an integer tensor is an integer tensor, ``x * 2.0``
    a float one), and with the sign of a floating zero (``x * -0.0`` is not ``x * 0.0``,
    and ``-0.0 == 0.0``): of a ``float``, of any subclass of it (``np.float64``) and of
    NumPy's other floating scalars (``np.float32(-0.0)``)."""
    kind = type(obj)
    floating = kind is float or (kind not in _PLAIN and isinstance(obj, (float, np.floating)))
    if floating and obj == 0.0:
        return ("value", obj, kind, math.copysign(1.0, obj))
    return ("value", obj, kind)


_NO_KEYWORDS = ("dict", (), ())
# Python values an argument list is flattened to as they are (the common ones)
_PLAIN = frozenset({int, float, bool, str, type(None)})


def _flatten_arguments(args: tuple, kwargs: dict, leaves: list[Any]) -> Any:
    """``_flatten((args, kwargs), leaves, hashable=True)``, in one loop where every
    argument is positional and a tensor or a plain Python value (a training step's
    usual call): the same structure, without a call per item (~3 us -> ~1 us)."""
    if not kwargs:
        tensor_class = _classes()[1]
        items = []
        for value in args:
            if isinstance(value, tensor_class):
                leaves.append(value)
                items.append(_TENSOR)
            elif type(value) in _PLAIN:
                items.append(_value(value))
            else:
                break
        else:
            return ("sequence", tuple, (("sequence", tuple, tuple(items)), _NO_KEYWORDS))
        leaves.clear()
    return _flatten((args, kwargs), leaves, hashable=True)


def _rebuild(structure: Any, leaves: Iterator[Any]) -> Any:
    kind = structure[0]
    if kind == "tensor":
        return next(leaves)
    if kind == "sequence":
        items = [_rebuild(child, leaves) for child in structure[2]]
        cls = structure[1]
        if cls is list or cls is tuple:
            return cls(items)
        try:
            return cls(*items)  # namedtuple
        except TypeError:
            return cls(items)
    if kind == "dict":
        return {k: _rebuild(child, leaves) for k, child in zip(structure[1], structure[2])}
    return structure[1]


def _tensor_key(tensors: list[Any]) -> tuple[Any, ...]:
    first_of: dict[int, int] = {}
    meta = []
    for position, t in enumerate(tensors):
        buffer_id = id(t._storage.buffer)
        owner = first_of.setdefault(buffer_id, position)
        relative = t._offset - tensors[owner]._offset
        meta.append(
            (
                t.shape,
                t._strides,
                t.dtype.name,
                str(t.device),
                t.requires_grad,
                owner,
                relative if owner != position else 0,
            )
        )
    return tuple(meta)


def _dropped_captures(recorder: Recorder) -> int:
    """How many buffers the trace captured (``external`` slots: parameters, optimizer
    state, tensors of an enclosing scope) no tensor holds any more once the function
    returned. Replays read the buffer the trace read: a function that replaced such a
    tensor by a new one (``state["ema"] = state["ema"] * 0.5 + x``) dropped the old one,
    and a replay would read the old value again. The holders are the tensors' storages,
    found once per trace (``gc.get_referrers``: a few ms)."""
    buffers = [slot.buffer for slot in recorder.slots if slot.kind == "external"]
    if not buffers:
        return 0
    storage_class = _classes()[0]
    held = {id(referrer.buffer) for referrer in gc.get_referrers(*buffers)
            if isinstance(referrer, storage_class)}  # fmt: skip
    return sum(1 for buffer in buffers if id(buffer) not in held)


# A signature traced this many times (Python-side values it depends on kept changing)
# gets a warning.
_RETRACE_WARNING = 8


# --- one compiled version -----------------------------------------------------------------------
class _Entry:
    def __init__(
        self,
        plan: Plan,
        structure: Any,
        recipe: list[Any],
        watches: list[tuple[Any, Any, Any]],
        traces: int,
        feeds: list[Any] = (),
    ) -> None:
        self.plan = plan
        self.structure = structure
        self.recipe = recipe
        self.watches = watches
        self.feeds = list(feeds)
        self.traces = traces  # how many times this signature was traced
        # the buffers of the tensors the trace captured (parameters, constants)
        self.captured = frozenset(
            id(slot.buffer)
            for slot in plan.slots
            if slot.kind in ("external", "const") and slot.buffer is not None
        )

    def stale(self) -> str | None:
        """What changed on the Python side since the trace (None if nothing did)."""
        for what, read, expected in self.watches:
            if read() != expected:
                return what if what.__class__ is str else what()
        return None

    def replay(self, tensors: list[Any]) -> Any:
        Storage, Tensor = _classes()  # noqa: N806 (the classes)
        for feed in self.feeds:
            feed()
        table = self.plan.run(tensors)
        storages: dict[int, Any] = {}
        results = []
        for item in self.recipe:
            kind = item[0]
            if kind == "new":
                _, slot, shape, strides, offset, dtype = item
                storage = storages.get(slot)
                if storage is None:
                    info = self.plan.slots[slot]
                    storage = storages[slot] = Storage(table[slot], info.device, info.backend)
                results.append(Tensor._make(storage, shape, strides, offset, dtype))
            elif kind == "copy":  # a tensor the program keeps (p.grad), replayed in place
                _, slot, shape, strides, offset, dtype = item
                info = self.plan.slots[slot]
                kept = Storage(table[slot], info.device, info.backend)
                results.append(Tensor._make(kept, shape, strides, offset, dtype).clone())
            elif kind == "arg":
                _, position, shape, strides, offset, dtype = item
                source = tensors[position]
                results.append(
                    Tensor._make(source._storage, shape, strides, source._offset + offset, dtype)
                )
            else:
                results.append(item[1])
        if self.structure is _TENSOR:  # one tensor returned (the structure is shared)
            return results[0]
        return _rebuild(self.structure, iter(results))


class CompiledFunction:
    """A function traced into fused kernels per argument signature. See :func:`compile`."""

    def __init__(self, fn: Callable[..., Any], fuse: bool = True) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.fuse = fuse
        self._entries: dict[Any, _Entry] = {}
        self._warm: set[Any] = set()  # signatures whose first (eager) call has run
        self._eager_only: set[Any] = set()  # signatures that cannot be replayed (see _trace)
        self.last_plan: Plan | None = None

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        return f"<kg.compile {name}: {len(self._entries)} compiled version(s)>"

    @property
    def plans(self) -> list[Plan]:
        return [entry.plan for entry in self._entries.values()]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves: list[Any] = []
        structure = _flatten_arguments(args, kwargs, leaves)
        key = (
            structure,
            _tensor_key(leaves),
            autograd.is_grad_enabled(),
            str(default_device()),
            _dtypes._default_float,  # integer / float promotion, as eager reads it per call
        )
        entry = self._entries.get(key)
        if entry is not None:
            if entry.captured and any(id(t._storage.buffer) in entry.captured for t in leaves):
                # an argument is a tensor the trace read as captured (a parameter passed
                # as x): the replay would read the argument for both; run eagerly
                if debug_level() >= 1:
                    log(f"kg.compile: {self._name()}: an argument is a captured tensor; eager")
                return self._warm_up(key, args, kwargs)
            changed = entry.stale()
            if changed is None:
                self.last_plan = entry.plan
                return entry.replay(leaves)
            self._retraced(entry, changed)
            return self._trace(key, args, kwargs, leaves, entry.traces + 1)
        if key not in self._warm or key in self._eager_only:
            return self._warm_up(key, args, kwargs)
        return self._trace(key, args, kwargs, leaves, 1)

    def _name(self) -> str:
        return getattr(self.fn, "__qualname__", "function")

    def _warm_up(self, key: Any, args: tuple, kwargs: dict) -> Any:
        """The first call of a signature runs eagerly, so that state created on first
        use (optimizer moments, momentum buffers, step counts) exists before the trace:
        otherwise the trace would record its creation and every replay would repeat it."""
        from ..tensor import Tensor

        result = self.fn(*args, **kwargs)
        outputs: list[Any] = []
        structure = _flatten(result, outputs, hashable=False)
        self._check_outputs(outputs)
        self._warm.add(key)
        if debug_level() >= 1:
            log(f"kg.compile: {self._name()}: first call ran eagerly; the next one is traced")
        detached = [v.detach() if isinstance(v, Tensor) else v for v in outputs]
        return _rebuild(structure, iter(detached))

    def _retraced(self, entry: _Entry, changed: str) -> None:
        if debug_level() >= 1:
            log(f"kg.compile: {self._name()}: {changed} changed since the trace; tracing again")
        if entry.traces + 1 == _RETRACE_WARNING:
            warnings.warn(
                f"kg.compile({self._name()}) has been traced {_RETRACE_WARNING} times for one "
                f"argument signature because {changed} keeps changing between calls (each "
                "change traces the function again, which is slower than running it eagerly). "
                "A value that takes few distinct values can be passed as an argument "
                "(each value is traced once); kg.optim's fused optimizers need no new "
                "trace for a new learning rate",
                RuntimeWarning,
                stacklevel=3,
            )

    def _check_outputs(self, outputs: list[Any]) -> None:
        for position, value in enumerate(outputs):
            node = value._node
            if node is not None and not node.released:
                raise TraceError(
                    f"kg.compile({self._name()}): output {position} carries an autograd graph "
                    "that the compiled version cannot rebuild, so backward() through it would "
                    "not work. Compile the whole training step (forward, loss.backward() and "
                    "the update) as one function, or run the forward under kg.no_grad() "
                    "(e.g. for inference)"
                )

    def _trace(self, key: Any, args: tuple, kwargs: dict, tensors: list[Any], traces: int) -> Any:
        from ..tensor import Tensor

        name = self._name()
        recorder = Recorder(tensors)
        with recorder:
            result = self.fn(*args, **kwargs)
        outputs: list[Any] = []
        structure = _flatten(result, outputs, hashable=False)
        self._check_outputs(outputs)
        del result
        gc.collect()  # autograd closures form cycles; free what nothing holds
        dropped = _dropped_captures(recorder)
        if dropped:  # the function replaced state it read: replays would read stale values
            self._eager_only.add(key)
            self._entries.pop(key, None)
            warnings.warn(
                f"kg.compile({name}): the function replaced {dropped} tensor(s) it read from "
                "outside it (e.g. state['ema'] = state['ema'] * 0.5 + x), so a replay would "
                "read the old values again; this signature runs eagerly from now on. Update "
                "such state in place (state['ema'].mul_(0.5).add_(x)) or pass it as an "
                "argument and return the new value",
                RuntimeWarning,
                stacklevel=3,
            )
            detached = [v.detach() if isinstance(v, Tensor) else v for v in outputs]
            return _rebuild(structure, iter(detached))
        launches = len(recorder.ops)
        recorder.give_constants_buffers({id(value._storage.buffer) for value in outputs})
        # tensors the program keeps (p.grad): replays write into them, so a returned one
        # is returned as a copy (a new buffer would leave p.grad as it was traced)
        kept = {id(value._storage.buffer) for value in recorder.watch_kept()}

        slots = recorder.slots
        slot_of = recorder._slot_of
        recipe: list[Any] = []
        output_slots: set[int] = set()
        for value in outputs:
            slot = slot_of.get(id(value._storage.buffer))
            info = slots[slot] if slot is not None else None
            if info is not None and info.kind == "new" and id(value._storage.buffer) in kept:
                recipe.append(
                    ("copy", slot, value.shape, value._strides, value._offset, value.dtype)
                )
            elif info is not None and info.kind == "new":
                output_slots.add(slot)
                recipe.append(
                    ("new", slot, value.shape, value._strides, value._offset, value.dtype)
                )
            elif info is not None and info.kind == "arg":
                position = next(
                    k for k, t in enumerate(tensors) if t._storage.buffer is value._storage.buffer
                )
                recipe.append(
                    (
                        "arg",
                        position,
                        value.shape,
                        value._strides,
                        value._offset - tensors[position]._offset,
                        value.dtype,
                    )
                )
            else:
                recipe.append(("object", value))
        escaping: dict[int, Any] = {}
        for index, info in enumerate(slots):
            if info.kind == "new" and index not in output_slots:
                buffer = info.reference()
                if buffer is not None:
                    escaping[index] = buffer
        live_out = set(output_slots) | set(escaping)
        live_out |= {i for i, s in enumerate(slots) if s.kind in ("arg", "external")}
        analysis = Analysis(recorder.ops, slots, live_out, fuse=self.fuse)
        steps = build_steps(analysis)
        arg_slots = {i: s.arg for i, s in enumerate(slots) if s.kind == "arg"}
        written = sorted(
            {
                slots[v.slot].arg
                for op in recorder.ops
                for v in op.outputs
                if slots[v.slot].kind == "arg"
            }
        )
        # every argument sharing a written buffer gets its version bumped
        written_args = [
            k
            for k, t in enumerate(tensors)
            if any(t._storage is tensors[w]._storage for w in written)
        ]
        plan = Plan(
            slots,
            steps,
            analysis,
            output_slots,
            escaping,
            arg_slots,
            written_args,
            launches,
        )
        entry = _Entry(plan, structure, recipe, recorder.watches, traces, recorder.feeds)
        self._entries[key] = entry
        self.last_plan = plan
        if debug_level() >= 1:
            log(
                f"kg.compile: traced {name}: {len(recorder.ops)} launches -> "
                f"{plan.kernel_count} kernels"
            )
        detached = [
            (v.detach().clone() if id(v._storage.buffer) in kept else v.detach())
            if isinstance(v, Tensor)
            else v
            for v in outputs
        ]  # (a kept tensor, p.grad, is written by the replays: the caller gets a copy)
        return _rebuild(structure, iter(detached))


def compile(fn: Callable[..., Any] | None = None, *, fuse: bool = True) -> Any:  # noqa: A001
    """Trace ``fn`` (a function of tensors) into fused kernels and replay them.

    >>> import kernelgrad as kg
    >>> @kg.compile
    ... def gelu_affine(x, w, b):
    ...     y = x @ w + b
    ...     return 0.5 * y * (1 + (y * 0.7071067811865476).erf())
    >>> x, w, b = kg.ones(2, 3), kg.ones(3, 4), kg.zeros(4)
    >>> gelu_affine(x, w, b).shape
    kg.Size([2, 4])

    * The first call with a new signature (shapes, strides, dtypes, devices of the
      tensor arguments, values of the other arguments) runs ``fn`` eagerly, so that
      state created on first use (an optimizer's moments and buffers) exists before the
      trace. The second call runs ``fn`` eagerly while recording every kernel it
      launches; the recording is fused (elementwise chains, reduction
      prologues/epilogues) into fewer kernels, cached, and replayed by later calls with
      the same signature, without running ``fn``'s Python code.
    * Whole training steps work: forward, ``loss.backward()``, ``optimizer.step()`` (or
      in-place parameter updates under ``kg.no_grad()``) are recorded and replayed in
      order. Set ``p.grad = None`` (``optimizer.zero_grad()``, not ``zero_()`` of a
      gradient from an earlier call) inside the step, so that each replay starts from
      fresh gradients.
    * A ``kg.optim`` optimizer stepped inside ``fn`` records its settings, which
      tensors hold its state and its parameters' ``requires_grad``; a call after any of
      them changed (``load_state_dict``, a new momentum, a parameter frozen) traces
      ``fn`` again rather than replaying the old values. The learning
      rate of the fused updates is the exception: replays read it from a tensor that is
      refreshed before each call, so a scheduler's ``step()`` needs no new trace.
    * A ``kg.nn`` module called inside ``fn`` (and every module inside it) is watched
      in its state at the end of the trace: its mode (``train()``/``eval()``), its
      attributes (settings, which parameters, buffers and sub-modules it holds), the
      memory, dtype and ``requires_grad`` of its tensors, and its hooks; a call after
      any of them changed (``model.eval()``, ``lin.bias.data = t``, ``m.double()``,
      ``p.requires_grad_(False)``) traces again. Values written into a parameter in
      place (``copy_()``, ``load_state_dict``) need no new trace.
    * Other Python numbers computed inside ``fn`` (a step counter of your own) are frozen
      at trace time; pass changing numbers as arguments (each new value is a new
      signature) or keep them in tensors.
    * A small host read inside ``fn`` (``.item()``, ``if flag:``, a bounds check) becomes
      a guard: replays read it again and raise ``GuardError`` if it changed (a zero's
      sign included). Larger reads (printing a tensor) raise
      :class:`~kernelgrad.compile.TraceError`.
    * Random draws are replayed from the stream they drew from (the default one, or the
      ``kg.Generator`` given), and ``kg.get_rng_state`` / ``kg.set_rng_state`` inside
      ``fn`` (``fork_rng``, activation checkpointing) in order with them; what a replay
      cannot follow (``kg.manual_seed`` inside ``fn``) raises a ``TraceError``.
    * Tensors returned are new on every call; tensors captured from outside (model
      parameters) are used by reference.

    ``KG_DEBUG=2`` prints one line per replayed kernel with its time; ``KG_DEBUG=4``
    prints the source of every generated kernel.
    """
    if fn is None:
        return lambda f: CompiledFunction(f, fuse=fuse)
    if isinstance(fn, CompiledFunction):
        return fn
    if not callable(fn):
        raise TypeError(f"kg.compile expects a function, got {type(fn).__name__}")
    return CompiledFunction(fn, fuse=fuse)


# --- counting launches ------------------------------------------------------------------------
class LaunchCounter:
    timed = False  # kg.profiler's counter times each backend primitive (timed_launch)

    def __init__(self) -> None:
        self.count = 0
        self.depth = 0
        self.names: list[str] = []

    def timed_launch(self, start: float, end: float) -> None:
        """The primitive whose name was appended last ran from ``start`` to ``end``
        (``time.perf_counter``; called only when ``timed``)."""


_COUNTED = (
    "elementwise",
    "elementwise_foreach",
    "reduce",
    "matmul",
    "matmul_bias",
    "take",
    "index_add",
    "random",
)


@contextlib.contextmanager
def count_launches() -> Iterator[LaunchCounter]:
    """Count kernel launches (backend primitives and fused kernels) in a block.

    >>> import kernelgrad as kg
    >>> with kg.compile.count_launches() as counter:
    ...     _ = kg.ones(3) * 2
    >>> counter.count
    2
    """
    with watch_launches(LaunchCounter()) as counter:
        yield counter


@contextlib.contextmanager
def watch_launches(counter: LaunchCounter) -> Iterator[LaunchCounter]:
    """What :func:`count_launches` does, with a counter of the caller's (kg.profiler
    gives one that also times each launch)."""
    from ..backends import CREATION_HOOKS, loaded_backends

    saved: list[tuple[Any, str, Any]] = []

    def wrap(backend: Any) -> None:
        for name in _COUNTED:
            original = getattr(backend, name, None)
            if original is None:  # an optional primitive this backend does not have
                continue

            def counted(*args: Any, _original: Any = original, _name: str = name) -> Any:
                if counter.depth:  # a primitive calling another one internally
                    return _original(*args)
                counter.count += 1
                label = _name
                if _name == "elementwise":
                    label = args[0].name
                elif _name == "elementwise_foreach":
                    label = f"{args[0].name}[{len(args[1])} tensors]"
                counter.names.append(label)
                counter.depth += 1
                start = time.perf_counter() if counter.timed else 0.0
                try:
                    return _original(*args)
                finally:
                    counter.depth -= 1
                    if counter.timed:
                        counter.timed_launch(start, time.perf_counter())

            saved.append((backend, name, backend.__dict__.get(name, _MISSING)))
            setattr(backend, name, counted)

    for backend in loaded_backends().values():
        wrap(backend)
    CREATION_HOOKS.append(wrap)  # a device first used inside the block is counted too
    LAUNCH_HOOKS.append(counter)
    try:
        yield counter
    finally:
        LAUNCH_HOOKS.remove(counter)
        CREATION_HOOKS.remove(wrap)
        for backend, name, previous in reversed(saved):
            if previous is _MISSING:
                backend.__dict__.pop(name, None)
            else:
                setattr(backend, name, previous)


_MISSING = object()

__all__ = ["compile", "CompiledFunction", "count_launches", "KernelError"]
