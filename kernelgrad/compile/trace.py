"""Recording a function's backend calls.

Every Tensor operation ends in a call of one of the backend's primitives (``empty``,
``elementwise``, ``reduce``, ``matmul``, ``take``, ...) with fully specified views. That
is the narrowest point through which all computation passes, so tracing needs no change
to the front end: for the duration of a trace, the backend objects' primitive methods
are wrapped (instance attributes that shadow the class's methods) so that each call is
executed *and* recorded with its views. Elementwise calls carry the scalar function's
source, so fusion later composes sources.

Buffers are identified by *slots*:

* ``arg``: the storage of a tensor argument (views are recorded relative to it);
* ``new``: allocated during the trace (``backend.empty``); a weak reference tells, after
  the function returns, whether Python still holds it (an output, ``p.grad``, a cache);
* ``const``: created from host data during the trace (``kg.tensor([...])`` inside). A
  constant that the function writes in place or returns becomes a ``new`` slot filled
  from a copy of the host data by a recorded copy (:meth:`Recorder.give_constants_buffers`):
  replaying it in place would start from the previous call's values, and returning it
  would hand out one tensor to every call;
* ``external``: any other buffer the function touched (parameters, captured tensors).

Reading values back to the host (``.item()``, ``bool(t)``) cannot be replayed without
running Python again. A small read is recorded as a *guard* (replays read the value again
and stop if it changed); a larger one (printing a tensor) stops the trace with an error.

Random numbers come from a stream on the host (a seed and a counter per backend), which a
replay must move as the eager calls would: each draw is recorded with the
``kg.Generator`` it drew from (None: the device's default stream), and reads and
restores of a stream's state (``get_rng_state`` / ``set_rng_state``: ``fork_rng``,
activation checkpointing's recompute) and a generator's seeding are recorded as steps
that the replay runs in order with the draws.

Trace state is per thread (as JAX keeps it): the backend objects are shared by the whole
process, so the wrappers installed on them dispatch each call to the recorder of the
*calling* thread, and a thread that is not tracing passes straight through. Work that
another thread does while a trace runs is neither recorded nor refused, and two threads
may trace at once.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from math import prod
from typing import Any

from .. import tracing
from ..backends import loaded_backends
from ..backends.base import ScalarFunction, View
from ..dtypes import DType
from ..errors import KernelError

# Launch counters (kernelgrad.compile.count_launches) that also want to see launches
# that do not go through a backend primitive: user kernels and fused reductions.
LAUNCH_HOOKS: list[Any] = []


class _TraceState(threading.local):
    """The recorders of the traces in progress on this thread (innermost last)."""

    def __init__(self) -> None:
        self.recorders: list[Recorder] = []


_state = _TraceState()


def active_recorder() -> Recorder | None:
    """The recorder of the trace in progress on the calling thread (user kernels report
    their launches to it), or None."""
    recorders = _state.recorders
    return recorders[-1] if recorders else None


# nn and optim ask kernelgrad.tracing (below them) whether a trace records; answer it.
tracing.register_recorder_lookup(active_recorder)


class TraceError(KernelError):
    """The function did something kg.compile cannot record and replay."""


@dataclass(frozen=True)
class ViewRef:
    """A view of a slot's buffer; for ``arg`` slots the offset is relative to the
    argument's own offset."""

    slot: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    dtype: DType


@dataclass
class Slot:
    kind: str  # "arg", "new", "const" or "external"
    dtype: DType | None = None
    numel: int = 0
    arg: int = -1  # arg: position of the first tensor argument with this buffer
    base_offset: int = 0  # arg: that argument's offset
    buffer: Any = None  # const / external: the buffer itself
    reference: Any = None  # new: a weak reference to the buffer
    device: Any = None
    backend: Any = None
    # const: a second copy of the host data, untouched by the function, and how many ops
    # had been recorded when the constant was made (see Recorder.give_constants_buffers)
    initial: Any = None
    made_after: int = 0


@dataclass
class Op:
    # elementwise, reduce, matmul, take, index_add, random, guard, kernel, external, and
    # the random-state steps rng_get, rng_set and generator_seed (plan.RandomStateStep)
    kind: str
    outputs: list[ViewRef]
    inputs: list[Any]  # ViewRef or a Python number
    attrs: dict[str, Any] = field(default_factory=dict)

    def input_views(self) -> list[ViewRef]:
        return [x for x in self.inputs if isinstance(x, ViewRef)]


_RECORDED = (
    "empty",
    "from_numpy",
    "elementwise",
    "reduce",
    "matmul",
    "matmul_bias",  # optional (nn.functional.linear); recorded as a matmul with a bias
    "take",
    "index_add",
    "random",
)
# Host reads of at most this many elements (a bounds check's flag, a loss) are recorded
# as guards; larger ones stop the trace.
GUARD_LIMIT = 64

_HOST_READ_ADVICE = (
    "A compiled function is replayed without running its Python code, so it cannot "
    "depend on tensor values seen from Python. Return the tensor and read it after the "
    "call (e.g. `loss = step(x); print(loss.item())`), or leave this code out of kg.compile"
)
# what the function did (as the error says it) and what to do instead
_FORBIDDEN = {
    "to_numpy": (
        "reads tensor values on the host (.item(), .tolist(), printing, bool(t))",
        _HOST_READ_ADVICE,
    ),
    "numpy_view": ("converts a tensor to NumPy (.numpy())", _HOST_READ_ADVICE),
    "manual_seed": (
        "reseeds the random generator (kg.manual_seed)",
        "A replay does not run the function's Python code, so it would not reseed. Call "
        "kg.manual_seed before calling the compiled function, or, to draw the same numbers "
        "on every call, restore a state saved outside it with kg.set_rng_state(state) "
        "inside it, or draw from a kg.Generator made and seeded inside it "
        "(kg.Generator().manual_seed(seed); both are replayed)",
    ),
    "copy_from": (
        "moves a tensor between devices",
        "Move the tensors before calling the compiled function, or leave this code out of "
        "kg.compile",
    ),
    # nn._fused.launch_each launches item by item while tracing; a direct call would run
    # kernels that the trace does not see.
    "elementwise_foreach": (
        "runs one kernel over several tensors",
        "Launch them one by one while tracing (kernelgrad.nn._fused.launch_each)",
    ),
}
# The random streams' state, read and set from Python (kg.get_rng_state,
# kg.set_rng_state, fork_rng, activation checkpointing's recompute): recorded and
# replayed in order with the draws (plan.RandomStateStep), see Recorder._get_rng_state.
_RANDOM_STATE = ("get_rng_state", "set_rng_state")


class StateCell:
    """Where a replay keeps a random stream's state that an ``rng_get`` step read, for
    the ``rng_set`` steps that restore it later in the same replay."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: Any = None


class Recorder:
    """Context manager: record the primitive calls that the entering thread makes."""

    def __init__(self, arg_tensors: list[Any]) -> None:
        self.slots: list[Slot] = []
        self.ops: list[Op] = []
        self.watches: list[tuple[Any, Any, Any]] = []
        self.feeds: list[Any] = []
        self.kept: dict[tuple[int, str], tuple[Any, str]] = {}  # see keep()
        # modules called while tracing (each once) and the function that makes their
        # watch when the trace ends (see watch_module)
        self._modules: dict[int, Any] = {}
        self._make_module_watch: Any = None
        self._slot_of: dict[int, int] = {}
        self._installed: list[_Installation] = []
        self._patched: set[int] = set()
        self._depth = 0
        # the kg.Generator whose draw is in progress (Recorder.drawing_from), or None
        self._drawing: Any = None
        # id of each state get_rng_state returned -> (that object, its value then, its cell)
        self._rng_reads: dict[int, tuple[Any, Any, StateCell]] = {}
        for position, tensor in enumerate(arg_tensors):
            buffer = tensor._storage.buffer
            if id(buffer) in self._slot_of:
                continue
            self._slot_of[id(buffer)] = len(self.slots)
            self.slots.append(
                Slot(
                    "arg",
                    dtype=tensor.dtype,
                    arg=position,
                    base_offset=tensor._offset,
                    device=tensor.device,
                    backend=tensor._storage.backend,
                )
            )

    def watch(self, what: Any, read: Any) -> None:
        """Record a Python-side value the traced code depends on (an optimizer's
        learning rate, the identity of its state tensors): ``read()`` is called now and
        before every replay, and a replay whose value differs is traced again instead of
        replaying kernels recorded with the old value. ``what`` names it in the log: a
        string, or a function that returns one (called only once the value changed)."""
        self.watches.append((what, read, read()))

    def keep(self, owner: Any, attribute: str) -> None:
        """``owner.attribute`` was given a tensor by the traced code (autograd storing a
        leaf's ``.grad``); see :meth:`watch_kept`."""
        self.kept.setdefault((id(owner), attribute), (owner, attribute))

    def watch_kept(self) -> list[Any]:
        """Once the function returned: watch that every attribute given a tensor during
        the trace still holds the tensor it holds now. Replays write into that tensor's
        memory and cannot store a new one, so after ``p.grad = None`` (or another tensor)
        outside the compiled function the next call traces again, as eager would give
        ``p.grad`` a new gradient. Returns the tensors held now."""
        if not self.kept:
            return []
        held = [(owner, attribute, getattr(owner, attribute)) for owner, attribute in
                self.kept.values()]  # fmt: skip

        def unchanged() -> bool:
            return all(getattr(owner, attribute) is value for owner, attribute, value in held)

        self.watch("a tensor the function stored (a parameter's .grad, set to None or "
                   "replaced outside the compiled function: call optimizer.zero_grad() "
                   "inside it)", unchanged)  # fmt: skip
        return [value for _, _, value in held if value is not None]

    def watch_module(self, module: Any, make_watch: Any) -> None:
        """``module`` was called while tracing (``Module.__call__`` reports it): when
        the trace ends, the Python-side state of every module called is watched, through
        one object that ``make_watch(modules)`` returns (nn's, which knows what a
        module's forward reads): one check per replay however many modules there are.
        Every trace in progress on the thread watches it: a function compiled and traced
        inside another one's trace is recorded into both (see :func:`_through`)."""
        for recorder in _state.recorders:
            if id(module) not in recorder._modules:
                recorder._modules[id(module)] = module
                recorder._make_module_watch = make_watch

    def _watch_modules(self) -> None:
        """Watch the modules called, in their state at the end of the trace: a replay
        leaves Python-side state as the trace left it, so that is the state the next
        call starts from unless the caller changed something in between (``eval()``,
        a parameter replaced, ``requires_grad_``), and then it traces again."""
        if self._modules:
            watch = self._make_module_watch(list(self._modules.values()))
            self.watch(watch.describe, watch.unchanged)

    def before_replay(self, feed: Any) -> None:
        """Call ``feed()`` before every replay of this trace: it writes Python-side values
        that change between calls (an optimizer's learning rate under a schedule) into
        tensors that the recorded kernels read, so that such a change needs no new trace."""
        if feed not in self.feeds:
            self.feeds.append(feed)

    def host_op(self, label: str, fn: Any, tensors: Any, written: Any = ()) -> Any:
        """Run ``fn(tensors)`` now and, in order, on every replay
        (:func:`kernelgrad.compile.external.run_host_op`)."""
        from .external import run_host_op

        return run_host_op(label, fn, tensors, written)

    # --- random generators --------------------------------------------------------------------
    @contextlib.contextmanager
    def drawing_from(self, generator: Any) -> Iterator[None]:
        """Within the block, the backend's stream is ``generator``'s (a ``kg.Generator``
        draw swaps its state in and out: ``ops.creation._DrawnFrom``): the draws are
        recorded as drawn from ``generator``, so that a replay draws from it again
        (and leaves the default stream alone), and the swap's own reads, restores and
        seeding of the stream are part of the draw, not recorded. Every trace in progress
        on this thread is told, as each of them records a backend call."""
        recorders = list(_state.recorders)
        previous = [recorder._drawing for recorder in recorders]
        for recorder in recorders:
            recorder._drawing = generator
        try:
            yield
        finally:
            for recorder, drawing in zip(recorders, previous):
                recorder._drawing = drawing

    def generator_seeded(self, generator: Any) -> None:
        """``generator`` was made or seeded (``kg.Generator()``, ``manual_seed``) by the
        traced code: a replay seeds it again at this point (it reuses the generator
        object of the trace), so that its draws repeat as the eager calls' do."""
        for recorder in _state.recorders:
            if not recorder._depth:
                recorder.ops.append(
                    Op(
                        "generator_seed",
                        [],
                        [],
                        {"generator": generator, "seed": generator.initial_seed(), "backend": None},
                    )
                )

    # --- slots ------------------------------------------------------------------------------
    def _new_slot(self, slot: Slot, buffer: Any) -> int:
        index = len(self.slots)
        self.slots.append(slot)
        self._slot_of[id(buffer)] = index
        return index

    def ref(self, view: View, backend: Any) -> ViewRef:
        buffer = view.buffer
        index = self._slot_of.get(id(buffer))
        if index is None:
            index = self._new_slot(
                Slot(
                    "external",
                    dtype=view.dtype,
                    buffer=buffer,
                    backend=backend,
                    device=getattr(backend, "device", None),
                ),
                buffer,
            )
        slot = self.slots[index]
        offset = view.offset - slot.base_offset if slot.kind == "arg" else view.offset
        return ViewRef(index, tuple(view.shape), tuple(view.strides), offset, view.dtype)

    def operand(self, value: Any, backend: Any) -> Any:
        return self.ref(value, backend) if isinstance(value, View) else value

    # --- interception -----------------------------------------------------------------------
    def __enter__(self) -> Recorder:
        self._installed = _install(list(loaded_backends().values()))
        self._patched = {id(installation.backend) for installation in self._installed}
        _state.recorders.append(self)
        with _install_lock:
            tracing.RECORDING[0] += 1
        return self

    def __exit__(self, *exc_info: Any) -> None:
        with _install_lock:
            tracing.RECORDING[0] -= 1
        _state.recorders.remove(self)
        _uninstall(self._installed)
        if exc_info[0] is None:
            self._watch_modules()
        for backend in loaded_backends().values():
            if id(backend) not in self._patched and exc_info[0] is None:
                raise TraceError(
                    f"kg.compile: the function used the {backend.name} device for the first "
                    "time while being traced; use that device once before calling the "
                    "compiled function"
                )

    def intercept(self, backend: Any, name: str, original: Any, args: tuple[Any, ...]) -> Any:
        """Handle one call of the backend method ``name`` made by this recorder's
        thread: record it, guard a host read, or refuse; ``original`` runs it."""
        if name in _RECORDED:
            recording = getattr(self, "_" + name)(backend, original)
            return self._outermost(recording, original)(*args)
        if name == "to_numpy":
            return self._guard(backend, original)(*args)
        if self._drawing is not None and name in (*_RANDOM_STATE, "manual_seed"):
            return original(*args)  # a generator draw's swap (see drawing_from)
        if name == "get_rng_state":
            return self._get_rng_state(backend, original)
        if name == "set_rng_state":
            return self._set_rng_state(backend, original, *args)
        return _refuse(name, _FORBIDDEN[name])(*args)

    def _get_rng_state(self, backend: Any, original: Any) -> Any:
        """A read of the stream's state (``kg.get_rng_state``; ``fork_rng`` and
        checkpointing save the state this way) is recorded as a step: a replay reads
        the state of *its* moment into a cell, for the ``set_rng_state`` calls that give
        this very object back (restoring the trace's state instead would rewind the
        stream to it on every call)."""
        state = original()
        if not self._depth:
            cell = StateCell()
            self._rng_reads[id(state)] = (state, copy.deepcopy(state), cell)
            self.ops.append(Op("rng_get", [], [], {"backend": backend, "cell": cell}))
        return state

    def _set_rng_state(self, backend: Any, original: Any, state: Any) -> Any:
        """A restore of the stream's state is recorded as a step: of the state a
        ``get_rng_state`` of this trace returned (the object itself, unchanged), a
        replay restores what the matching read found in that replay; of any other state
        (one saved before the call: the same noise on every call), that state. A copy or
        a changed version of a state read here cannot be told from a constant, and
        would be replayed as one: refused."""
        if not self._depth:
            read = self._rng_reads.get(id(state))  # (the reads are kept: ids stay unique)
            if read is not None and state == read[1]:
                attrs = {"backend": backend, "cell": read[2]}
            elif read is not None or any(state == seen for _, seen, _ in self._rng_reads.values()):
                raise TraceError(
                    "kg.compile: the function restores a random state (kg.set_rng_state) "
                    "that is a copy or a changed version of one it read with "
                    "kg.get_rng_state while being traced. A replay does not run the "
                    "function's Python code: it restores a state read in the same call only "
                    "when given back the very object get_rng_state returned, unchanged. "
                    "Pass that object back, or leave this code out of kg.compile"
                )
            else:
                attrs = {"backend": backend, "state": copy.deepcopy(state)}
            self.ops.append(Op("rng_set", [], [], attrs))
        return original(state)

    def _guard(self, backend: Any, original: Any) -> Any:
        """A small host read (``.item()`` of a flag or a loss) is allowed and recorded as
        a *guard*: every replay reads the value again and stops with an error if it
        differs, because the Python code that read it might then have taken another
        path. Larger reads stop the trace."""
        refuse = _refuse("to_numpy", _FORBIDDEN["to_numpy"])

        def to_numpy(view: View) -> Any:
            if self._depth:
                return original(view)
            if prod(view.shape) > GUARD_LIMIT:
                refuse()
            value = original(view)
            self.ops.append(
                Op(
                    "guard",
                    [],
                    [self.ref(view, backend)],
                    {"expected": value.copy(), "where": _caller(), "backend": backend},
                )
            )
            return value

        return to_numpy

    def _outermost(self, recording: Any, original: Any) -> Any:
        """Record only calls made by the front end: a backend primitive that calls
        another one internally (a reduction allocating scratch space, a copy made
        contiguous) is replayed as the one primitive it is."""

        def call(*args: Any) -> Any:
            if self._depth:
                return original(*args)
            self._depth += 1
            try:
                return recording(*args)
            finally:
                self._depth -= 1

        return call

    # --- user kernels -------------------------------------------------------------------------
    def kernel_call(
        self, kernel: Any, args: tuple[Any, ...], ndrange: Any, workgroup: Any, device: Any
    ) -> None:
        """Run a ``@kg.kernel`` launch and record it as one op (the copies it may make
        inside are part of it, not recorded separately)."""
        from ..tensor import Tensor

        if self._depth:
            kernel.launch(args, ndrange, workgroup, device)
            return
        specs: list[Any] = []
        reads: list[ViewRef] = []
        writes: list[ViewRef] = []
        for name, value in zip(kernel.info.params, args):
            if isinstance(value, Tensor):
                ref = self.ref(value._view(), value._backend)
                specs.append(("tensor", ref, value._storage.device, value._storage.backend))
                reads.append(ref)
                if name in kernel.info.written:
                    writes.append(ref)
            else:
                specs.append(("value", value))
        self._depth += 1
        try:
            kernel.launch(args, ndrange, workgroup, device)
        finally:
            self._depth -= 1
        self.ops.append(
            Op(
                "kernel",
                writes,
                reads,
                {
                    "kernel": kernel,
                    "specs": specs,
                    "ndrange": ndrange,
                    "workgroup": workgroup,
                    "device": device,
                    "backend": None,
                },
            )
        )

    # --- recorded primitives -----------------------------------------------------------------
    def _empty(self, backend: Any, original: Any) -> Any:
        def empty(numel: int, dtype: DType) -> Any:
            buffer = original(numel, dtype)
            index = self._new_slot(
                Slot("new", dtype=dtype, numel=int(numel), device=backend.device, backend=backend),
                buffer,
            )
            key = id(buffer)
            self.slots[index].reference = weakref.ref(buffer)
            weakref.finalize(buffer, _forget, self._slot_of, key, index)
            return buffer

        return empty

    def _from_numpy(self, backend: Any, original: Any) -> Any:
        def from_numpy(array: Any) -> Any:
            buffer = original(array)
            slot = Slot("const", dtype=None, buffer=buffer, device=backend.device, backend=backend)
            # the host data as it came, should the function write the constant in place or
            # return it (constants are small: a mask, a table, an index list)
            slot.initial = original(array)
            slot.made_after = len(self.ops)
            self._new_slot(slot, buffer)
            return buffer

        return from_numpy

    def persist(self, tensor: Any) -> None:
        """See :meth:`kernelgrad.tracing.TraceRecorder.persist`."""
        index = self._slot_of.get(id(tensor._storage.buffer))
        if index is not None and self.slots[index].kind == "const":
            self.slots[index].initial = None

    def give_constants_buffers(self, returned: set[int]) -> None:
        """After the function returned: every constant (``kg.tensor([...])`` made inside)
        that the function wrote in place, or returned (``returned``: the ids of the
        returned tensors' buffers), becomes a ``new`` slot, filled from the untouched copy
        of its host data by a copy recorded where the constant was made. So each replay
        starts from the host data, as each eager call does, and returns a tensor of its
        own (replaying the writes on the one buffer accumulated them across calls, and a
        returned constant was one tensor shared by every call)."""
        from ..dtypes import as_dtype
        from ..ops.elementwise import IDENTITY

        written = {view.slot for op in self.ops for view in op.outputs}
        fills = []  # (where the constant was made, the op that fills its buffer)
        for index, slot in enumerate(self.slots):
            if slot.kind != "const" or slot.initial is None:
                continue
            if index not in written and id(slot.buffer) not in returned:
                continue  # read only: replays read the one buffer, as before
            buffer, initial = slot.buffer, slot.initial
            dtype, numel = as_dtype(buffer.dtype), int(buffer.size)
            source = self._new_slot(
                Slot("const", buffer=initial, device=slot.device, backend=slot.backend), initial
            )
            slot.kind, slot.dtype, slot.numel = "new", dtype, numel
            slot.reference, slot.buffer, slot.initial = weakref.ref(buffer), None, None
            whole = ((numel,), (1,), 0, dtype)
            fill = Op(
                "elementwise",
                [ViewRef(index, *whole)],
                [ViewRef(source, *whole)],
                {"fn": IDENTITY.scalar, "compute": (dtype,), "backend": slot.backend},
            )
            fills.append((slot.made_after, fill))
        for position, fill in sorted(fills, key=lambda item: item[0], reverse=True):
            self.ops.insert(position, fill)

    def _elementwise(self, backend: Any, original: Any) -> Any:
        def elementwise(fn: ScalarFunction, outputs: Any, inputs: Any, compute_dtypes: Any) -> Any:
            op = Op(
                "elementwise",
                [self.ref(v, backend) for v in outputs],
                [self.operand(x, backend) for x in inputs],
                {"fn": fn, "compute": tuple(compute_dtypes), "backend": backend},
            )
            result = original(fn, outputs, inputs, compute_dtypes)
            self.ops.append(op)
            return result

        return elementwise

    def _reduce(self, backend: Any, original: Any) -> Any:
        def reduce(kind: str, out: View, x: View, axes: tuple[int, ...]) -> Any:
            op = Op(
                "reduce",
                [self.ref(out, backend)],
                [self.ref(x, backend)],
                {"kind": kind, "axes": tuple(axes), "backend": backend},
            )
            result = original(kind, out, x, axes)
            self.ops.append(op)
            return result

        return reduce

    def _matmul(self, backend: Any, original: Any) -> Any:
        def matmul(out: View, a: View, b: View, *bias: View) -> Any:
            op = Op(
                "matmul",
                [self.ref(out, backend)],
                [self.ref(v, backend) for v in (a, b, *bias)],
                {"backend": backend},
            )
            result = original(out, a, b, *bias)
            self.ops.append(op)
            return result

        return matmul

    # ``matmul_bias(out, a, b, bias)`` (optional): a matmul with a third input, the bias
    # (``plan.PrimitiveStep`` replays it as such)
    _matmul_bias = _matmul

    def _take(self, backend: Any, original: Any) -> Any:
        def take(out: View, x: View, dim: int, index: View) -> Any:
            op = Op(
                "take",
                [self.ref(out, backend)],
                [self.ref(x, backend), self.ref(index, backend)],
                {"dim": dim, "backend": backend},
            )
            result = original(out, x, dim, index)
            self.ops.append(op)
            return result

        return take

    def _index_add(self, backend: Any, original: Any) -> Any:
        def index_add(out: View, dim: int, index: View, source: View) -> Any:
            out_ref = self.ref(out, backend)
            op = Op(
                "index_add",
                [out_ref],
                [out_ref, self.ref(index, backend), self.ref(source, backend)],
                {"dim": dim, "backend": backend},
            )
            result = original(out, dim, index, source)
            self.ops.append(op)
            return result

        return index_add

    def _random(self, backend: Any, original: Any) -> Any:
        def random(out: View, distribution: str, low: float, high: float) -> Any:
            op = Op(
                "random",
                [self.ref(out, backend)],
                [],
                {
                    "distribution": distribution,
                    "low": low,
                    "high": high,
                    "backend": backend,
                    # the kg.Generator drawn from (None: the default stream): a replay
                    # draws from it again (plan.PrimitiveStep)
                    "generator": self._drawing,
                },
            )
            result = original(out, distribution, low, high)
            self.ops.append(op)
            return result

        return random


_MISSING = object()


class _Installation:
    """The dispatching wrappers on one backend object, shared by every trace in
    progress (on any thread) and removed when the last one ends."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.users = 0
        self.enabled = True
        self.saved: list[tuple[str, Any, Any]] = []  # (name, previous, dispatcher)
        for name in (*_RECORDED, *_FORBIDDEN, *_RANDOM_STATE):
            if not hasattr(backend, name):
                continue  # an optional primitive this backend lacks
            dispatcher = self._dispatcher(name, getattr(backend, name))
            self.saved.append((name, backend.__dict__.get(name, _MISSING), dispatcher))
            setattr(backend, name, dispatcher)

    def _dispatcher(self, name: str, original: Any) -> Any:
        backend = self.backend

        def dispatch(*args: Any) -> Any:
            recorders = _state.recorders
            if not recorders or not self.enabled:
                return original(*args)  # a thread that is not tracing
            return _through(recorders, len(recorders) - 1, backend, name, original, args)

        return dispatch

    def remove(self) -> None:
        self.enabled = False  # a dispatcher left in place below another wrapper passes
        for name, previous, dispatcher in reversed(self.saved):
            if self.backend.__dict__.get(name) is not dispatcher:
                continue  # wrapped again since (a launch counter): it passes through now
            if previous is _MISSING:
                self.backend.__dict__.pop(name, None)
            else:
                setattr(self.backend, name, previous)
        self.saved.clear()


def _through(
    recorders: list[Recorder], level: int, backend: Any, name: str, original: Any, args: tuple
) -> Any:
    """Pass a call through the thread's nested traces, innermost first: each records it
    (a trace inside a trace records into both), the outermost runs it."""
    if level < 0:
        return original(*args)

    def inner(*inner_args: Any) -> Any:
        return _through(recorders, level - 1, backend, name, original, inner_args)

    return recorders[level].intercept(backend, name, inner, args)


_installations: dict[int, _Installation] = {}
_install_lock = threading.Lock()


def _install(backends: list[Any]) -> list[_Installation]:
    with _install_lock:
        installed = []
        for backend in backends:
            installation = _installations.get(id(backend))
            if installation is None:
                installation = _installations[id(backend)] = _Installation(backend)
            installation.users += 1
            installed.append(installation)
        return installed


def _uninstall(installed: list[_Installation]) -> None:
    with _install_lock:
        for installation in installed:
            installation.users -= 1
            if installation.users == 0:
                installation.remove()
                del _installations[id(installation.backend)]


def _caller() -> str:
    """``file:line`` of the code that read a value: the innermost frame of the user's
    code, and the kernelgrad frame it called (e.g. a bounds check), if any."""
    import inspect
    import os

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    readers = {
        "_host_copy",
        "item",
        "tolist",
        "_one_element",
        "__bool__",
        "__float__",
        "__int__",
        "__index__",
        "__repr__",
        "__format__",
        "__array__",
    }
    library = None
    for frame in inspect.stack()[2:]:
        filename = os.path.abspath(frame.filename)
        if filename.startswith(package):
            relative = os.path.relpath(filename, package)
            reading = relative == "tensor.py" and frame.function in readers
            if library is None and not reading and not relative.startswith("compile"):
                library = f"{os.path.relpath(filename, os.path.dirname(package))}:{frame.lineno}"
            continue
        where = f"{frame.filename}:{frame.lineno}"
        return f"{where} (in {library})" if library else where
    return library or "unknown location"


def _forget(slot_of: dict[int, int], key: int, index: int) -> None:
    """A buffer allocated during the trace died: its id may be reused by another."""
    if slot_of.get(key) == index:
        del slot_of[key]


def _refuse(name: str, reason: tuple[str, str]) -> Any:
    """A stand-in for the backend method ``name`` that raises ``TraceError``, saying
    what the function did and what to do instead (``reason``, from ``_FORBIDDEN``)."""
    what, advice = reason

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise TraceError(f"kg.compile: the function {what} while being traced. {advice}")

    return refuse
