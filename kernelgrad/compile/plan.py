"""From fusion groups to an executable plan, and replaying it.

A plan is a list of steps, one per kernel launch: a fused elementwise kernel (a composed
:class:`~kernelgrad.backends.base.ScalarFunction` run by the backend's own
``elementwise`` primitive, so it works on every device), a fused reduction (a
:class:`~kernelgrad.backends.fused_reduce.FusedReduction` the backend's optional
``fused_reduce`` turns into a kernel), or a primitive replayed as recorded (matmul, gather,
scatter, random, unfused reductions).

Buffers are looked up in a table indexed by slot: arguments come from the call, outputs
are allocated fresh for every call (so returned tensors stay valid), scratch buffers are
allocated once when the plan is built (buffers whose lifetimes do not overlap share
memory), and buffers Python still holds after the trace (``p.grad``) are the trace's own.
Replaying runs no Python per op: only one call per kernel.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable
from math import prod
from typing import Any

import numpy as np

from ..backends.base import ScalarFunction, View
from ..backends.fused_reduce import FusedReduction
from ..debug import debug_level, log
from ..dtypes import DType
from .graph import Analysis, Group, lift
from .inline import convert, inlinable, inline
from .trace import LAUNCH_HOOKS, Op, Slot, ViewRef

RANDOM_STATE_OPS = ("rng_get", "rng_set", "generator_seed")


# --- composing scalar functions ---------------------------------------------------------------
class _Params:
    """The parameters of a composed scalar function: array loads and scalars."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.operands: list[Any] = []  # ViewRef or a Python number
        self.dtypes: list[DType] = []
        self._index: dict[Any, str] = {}

    def _add(self, key: Any, prefix: str, operand: Any, dtype: DType) -> str:
        """The parameter name of ``operand`` (one per ``key``), added on first use."""
        name = self._index.get(key)
        if name is None:
            name = self._index[key] = f"{prefix}{len(self.names)}"
            self.names.append(name)
            self.operands.append(operand)
            self.dtypes.append(dtype)
        return name

    def view(self, view: ViewRef, dtype: DType) -> str:
        return self._add(("view", view, dtype.name), "a", view, dtype)

    def arrays_then_scalars(self) -> list[str]:
        """Parameter names with the array loads first (the fused reduction's order)."""
        views = [n for n, x in zip(self.names, self.operands) if isinstance(x, ViewRef)]
        scalars = [n for n, x in zip(self.names, self.operands) if not isinstance(x, ViewRef)]
        return views + scalars

    def scalar(self, value: Any, dtype: DType) -> str:
        key = ("scalar", type(value).__name__, repr(value), dtype.name)
        return self._add(key, "s", value, dtype)


def compose(
    analysis: Analysis,
    group: Group,
    members: list[int],
    root: int,
    special: tuple[str, DType] | None = None,
) -> tuple[list[str], list[str], _Params]:
    """Body lines and result names of ``members`` (elementwise ops, in order) inlined
    into one function whose value is ``root``'s result. ``special`` names the
    parameter that stands for the group's reduction result (epilogues)."""
    params = _Params()
    lines: list[str] = []
    values: dict[int, list[str]] = {}
    for member in members:
        op = analysis.ops[member]
        compute = op.attrs["compute"]
        space = analysis.space(group, member)
        arguments = []
        for position, operand in enumerate(op.inputs):
            dtype = compute[position]
            if not isinstance(operand, ViewRef):
                arguments.append(params.scalar(operand, dtype))
                continue
            producer = group.fused.get(operand.slot)
            if producer is None:
                arguments.append(params.view(lift(operand, space), dtype))
                continue
            produced = analysis.ops[producer]
            source_dtype = produced.outputs[0].dtype
            if producer == group.reduce_op:
                assert special is not None
                expression = special[0]
            else:
                expression = values[producer][0]
            arguments.append(convert(expression, source_dtype, dtype))
        body, results = inline(op.attrs["fn"], arguments, f"o{member}_")
        lines += body
        values[member] = results
    return lines, values[root], params


def _function_source(name: str, parameters: list[str], lines: list[str], results: list[str]) -> str:
    out = [f"def {name}({', '.join(parameters)}):"]
    out += ["    " + line for line in lines]
    if len(results) == 1:
        out.append(f"    return {results[0]}")
    else:
        out.append(f"    return ({', '.join(results)},)")
    return "\n".join(out) + "\n"


def _name(analysis: Analysis, members: list[int], text: str) -> str:
    names = [
        analysis.ops[m].attrs["fn"].name for m in members if analysis.ops[m].kind == "elementwise"
    ]
    short = "_".join(dict.fromkeys(n.replace("ew_", "") for n in names))[:40]
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"fused_{short}_{digest}".replace("__", "_")


# --- steps ------------------------------------------------------------------------------------
class _Template:
    """A view whose buffer comes from the slot table at run time."""

    __slots__ = ("dtype", "offset", "shape", "slot", "strides")

    def __init__(self, ref: ViewRef) -> None:
        self.slot = ref.slot
        self.shape = ref.shape
        self.strides = ref.strides
        self.offset = ref.offset
        self.dtype = ref.dtype

    def view(self, table: list[Any], bases: list[int]) -> View:
        return View(
            table[self.slot], self.shape, self.strides, self.offset + bases[self.slot], self.dtype
        )


def _materialize(operands: list[Any], table: list[Any], bases: list[int]) -> list[Any]:
    return [x.view(table, bases) if isinstance(x, _Template) else x for x in operands]


def _template(x: Any) -> Any:
    return _Template(x) if isinstance(x, (ViewRef, _Template)) else x


class Step:
    label = "step"
    shape: tuple[int, ...] = ()
    # only launches device work over the slot table (no host read, no host-side state such
    # as a random counter): may be captured into a device graph (captured.py)
    device_only = False

    def run(self, table: list[Any], bases: list[int]) -> None:  # pragma: no cover
        raise NotImplementedError

    def prepare(self, table: list[Any], bases: list[int]) -> Callable[[], None] | None:
        """This step over these buffers as a function of no arguments with everything
        resolved once (views, kernel, argument list), for a step whose buffers are the
        same on every call; None where the step or its backend cannot (it then runs
        through :meth:`run`)."""
        return None


class ElementwiseStep(Step):
    device_only = True

    def __init__(self, backend: Any, fn: ScalarFunction, outputs, inputs, compute) -> None:
        self.backend = backend
        self.fn = fn
        self.outputs = [_Template(v) for v in outputs]
        self.inputs = [_template(x) for x in inputs]
        self.compute = list(compute)
        self.label = fn.name
        self.shape = outputs[0].shape

    def run(self, table: list[Any], bases: list[int]) -> None:
        self.backend.elementwise(
            self.fn,
            [o.view(table, bases) for o in self.outputs],
            _materialize(self.inputs, table, bases),
            self.compute,
        )

    def prepare(self, table: list[Any], bases: list[int]) -> Callable[[], None] | None:
        prepare = getattr(self.backend, "prepare_elementwise", None)
        if prepare is None:
            return None
        return prepare(
            self.fn,
            [o.view(table, bases) for o in self.outputs],
            _materialize(self.inputs, table, bases),
            self.compute,
        )


class ForeachStep(Step):
    """Several independent launches of one scalar function replayed as one
    ``elementwise_foreach`` launch (an optimizer's update of every parameter, Adam's
    per-parameter step counts): see :func:`batch_foreach`."""

    device_only = True

    def __init__(self, members: list[ElementwiseStep]) -> None:
        first = members[0]
        self.backend = first.backend
        self.fn = first.fn
        self.compute = first.compute
        self.items = [(step.outputs, step.inputs) for step in members]
        self.outputs = [o for step in members for o in step.outputs]
        self.inputs = [x for step in members for x in step.inputs]
        self.label = f"{first.fn.name}[{len(members)} tensors]"
        self.shape = first.shape

    def _items(self, table: list[Any], bases: list[int]) -> list[tuple[list[View], list[Any]]]:
        return [
            ([o.view(table, bases) for o in outputs], _materialize(inputs, table, bases))
            for outputs, inputs in self.items
        ]

    def run(self, table: list[Any], bases: list[int]) -> None:
        self.backend.elementwise_foreach(self.fn, self._items(table, bases), self.compute)

    def prepare(self, table: list[Any], bases: list[int]) -> Callable[[], None] | None:
        prepare = getattr(self.backend, "prepare_elementwise_foreach", None)
        if prepare is None:
            return None
        return prepare(self.fn, self._items(table, bases), self.compute)


def batch_foreach(steps: list[Step]) -> list[Step]:
    """Runs of adjacent elementwise steps that apply one scalar function to independent
    buffers, joined into one :class:`ForeachStep` where the backend has
    ``elementwise_foreach``. A trace records a multi-tensor launch item by item (so that
    dead items are dropped and producers fuse into each item); this joins them again,
    and also joins launches that eager code makes one at a time (Adam's step counts
    under a trace). Steps join only when no step of the run reads or writes a buffer
    that another one writes, so their order does not matter."""
    batched: list[Step] = []
    run: list[ElementwiseStep] = []
    written: set[int] = set()
    touched: set[int] = set()

    def flush() -> None:
        if len(run) > 1:
            batched.append(ForeachStep(list(run)))
        else:
            batched.extend(run)
        run.clear()
        written.clear()
        touched.clear()

    for step in steps:
        if type(step) is not ElementwiseStep or not hasattr(step.backend, "elementwise_foreach"):
            flush()
            batched.append(step)
            continue
        outputs, reads = _slots_of(step)
        joins = (
            run
            and step.backend is run[0].backend
            and step.fn.key == run[0].fn.key
            and step.compute == run[0].compute
            and not (outputs | reads) & written
            and not outputs & touched
        )
        if not joins:
            flush()
        run.append(step)
        written.update(outputs)
        touched.update(outputs | reads)
    flush()
    return batched


# Adjacent independent elementwise steps of one shape joined into one kernel: at most
# this many (a kernel's argument list grows with each).
JOIN_LIMIT = 8


def join_elementwise(steps: list[Step]) -> list[Step]:
    """Runs of adjacent elementwise steps over one output shape that do not depend on
    each other (a loss's division and the backward pass's seed of ones), joined into
    one kernel with the outputs of all: horizontal fusion, one launch instead of
    several. The same independence rule as :func:`batch_foreach` applies."""
    joined: list[Step] = []
    run: list[ElementwiseStep] = []
    written: set[int] = set()
    touched: set[int] = set()

    def flush() -> None:
        joined.append(run[0] if len(run) == 1 else _joined_step(run))
        run.clear()
        written.clear()
        touched.clear()

    for step in steps:
        if type(step) is not ElementwiseStep or not inlinable(step.fn):
            if run:
                flush()
            joined.append(step)
            continue
        outputs, reads = _slots_of(step)
        if run and not (
            len(run) < JOIN_LIMIT
            and step.backend is run[0].backend
            and step.shape == run[0].shape
            and not (outputs | reads) & written
            and not outputs & touched
        ):
            flush()
        run.append(step)
        written.update(outputs)
        touched.update(outputs | reads)
    if run:
        flush()
    return joined


def _slots_of(step: ElementwiseStep) -> tuple[set[int], set[int]]:
    """The slots ``step`` writes and those it reads."""
    return {o.slot for o in step.outputs}, {x.slot for x in step.inputs if isinstance(x, _Template)}


def _joined_step(run: list[ElementwiseStep]) -> ElementwiseStep:
    names: list[str] = []
    operands: list[Any] = []
    compute: list[DType] = []
    lines: list[str] = []
    results: list[str] = []
    for position, step in enumerate(run):
        arguments = []
        for operand, dtype in zip(step.inputs, step.compute):
            arguments.append(f"a{len(names)}")
            names.append(arguments[-1])
            operands.append(operand)
            compute.append(dtype)
        body, values = inline(step.fn, arguments, f"h{position}_")
        lines += body
        results += values
    text = _function_source("FN", names, lines, results)
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    name = "joined_" + "_".join(dict.fromkeys(s.fn.name for s in run))[:40] + "_" + digest
    fn = ScalarFunction(name, text.replace("def FN(", f"def {name}(", 1), len(names), len(results))
    outputs = [o for step in run for o in step.outputs]
    return ElementwiseStep(run[0].backend, fn, outputs, operands, compute)


class PrimitiveStep(Step):
    """A recorded primitive replayed as it was called."""

    def __init__(self, op: Op) -> None:
        self.op = op
        self.kind = op.kind
        self.backend = op.attrs["backend"]
        self.outputs = [_Template(v) for v in op.outputs]
        self.inputs = [_template(x) for x in op.inputs]
        self.label = op.kind if op.kind != "reduce" else f"reduce_{op.attrs['kind']}"
        self.shape = op.outputs[0].shape
        # a gather or scatter reports a bad index to the host; a random draw advances the
        # backend's counter on the host
        self.device_only = op.kind in ("matmul", "reduce")

    def prepare(self, table: list[Any], bases: list[int]) -> Callable[[], None] | None:
        prepare = getattr(self.backend, "prepare_matmul", None)
        if self.kind != "matmul" or prepare is None:
            return None
        inputs = _materialize(self.inputs, table, bases)
        # (a third input is a bias added to every row: recorded from matmul_bias)
        return prepare(self.outputs[0].view(table, bases), *inputs)

    def run(self, table: list[Any], bases: list[int]) -> None:
        attrs = self.op.attrs
        out = self.outputs[0].view(table, bases)
        inputs = _materialize(self.inputs, table, bases)
        if self.kind == "reduce":
            self.backend.reduce(attrs["kind"], out, inputs[0], attrs["axes"])
        elif self.kind == "matmul" and len(inputs) == 3:
            self.backend.matmul_bias(out, *inputs)
        elif self.kind == "matmul":
            self.backend.matmul(out, inputs[0], inputs[1])
        elif self.kind == "take":
            bad = self.backend.take(out, inputs[0], attrs["dim"], inputs[1])
            if bad is not None:
                raise IndexError(
                    f"index {bad} is out of bounds for dimension {attrs['dim']} with size "
                    f"{inputs[0].shape[attrs['dim']]} (in a compiled function)"
                )
        elif self.kind == "index_add":
            bad = self.backend.index_add(out, attrs["dim"], inputs[1], inputs[2])
            if bad is not None:
                raise IndexError(
                    f"index {bad} is out of bounds for dimension {attrs['dim']} with size "
                    f"{out.shape[attrs['dim']]} (in a compiled function)"
                )
        elif self.kind == "random":
            generator = attrs.get("generator")
            if generator is None:
                self.backend.random(out, attrs["distribution"], attrs["low"], attrs["high"])
            else:  # from the kg.Generator the trace drew from, as the eager call does
                from ..ops.creation import draw_from_generator

                draw_from_generator(
                    generator,
                    self.backend,
                    out,
                    attrs["distribution"],
                    attrs["low"],
                    attrs["high"],
                )
        else:  # pragma: no cover
            raise AssertionError(self.kind)


class RandomStateStep(Step):
    """A change of a random stream's state, replayed in order with the draws (see
    ``trace.Recorder._get_rng_state``): ``rng_get`` reads the backend's stream state
    into a cell, ``rng_set`` restores the state a cell holds (read earlier in the same
    replay) or a constant one, ``generator_seed`` seeds a ``kg.Generator`` again."""

    def __init__(self, op: Op) -> None:
        self.kind = op.kind
        self.attrs = op.attrs
        self.backend = op.attrs["backend"]
        self.label = {
            "rng_get": "read random state",
            "rng_set": "restore random state",
            "generator_seed": "seed generator",
        }[op.kind]

    def run(self, table: list[Any], bases: list[int]) -> None:
        attrs = self.attrs
        if self.kind == "rng_get":
            attrs["cell"].state = self.backend.get_rng_state()
        elif self.kind == "rng_set":
            cell = attrs.get("cell")
            self.backend.set_rng_state(cell.state if cell is not None else attrs["state"])
        else:
            attrs["generator"].manual_seed(attrs["seed"])


class GuardError(RuntimeError):
    """A value the traced Python code read on the host differs on this call."""


def same_values(value: np.ndarray, expected: np.ndarray) -> bool:
    """Whether Python code that read ``expected`` would see ``value`` as the same: equal
    element for element, NaN equal to NaN (whatever its bits), and a zero's sign counted
    (``x / s.item()`` is ``inf`` for 0.0 and ``-inf`` for -0.0, though ``0.0 == -0.0``)."""
    if not np.array_equal(value, expected, equal_nan=True):
        return False
    if value.dtype.kind not in "fc":
        return True
    parts = (value.real, value.imag) if value.dtype.kind == "c" else (value,)
    expected_parts = (expected.real, expected.imag) if value.dtype.kind == "c" else (expected,)
    for part, expected_part in zip(parts, expected_parts):
        zeros = expected_part == 0
        if not np.array_equal(np.signbit(part[zeros]), np.signbit(expected_part[zeros])):
            return False
    return True


class GuardStep(Step):
    """Re-read a value the traced code read on the host; stop if it changed."""

    def __init__(self, op: Op) -> None:
        self.backend = op.attrs["backend"]
        self.expected = op.attrs["expected"]
        self._expected_bytes = np.ascontiguousarray(self.expected).tobytes()
        self.where = op.attrs["where"]
        self.inputs = [_Template(op.inputs[0])]
        self.label = "guard (host read)"
        self.shape = op.inputs[0].shape

    def run(self, table: list[Any], bases: list[int]) -> None:
        value = self.backend.to_numpy(self.inputs[0].view(table, bases))
        if value.tobytes() == self._expected_bytes:  # the same bits: equal (the usual case)
            return
        if not same_values(value, self.expected):
            raise GuardError(
                f"kg.compile: while being traced, the function read a tensor value on the "
                f"host at {self.where} (it was {self.expected.tolist()!r}); on this call it "
                f"is {value.tolist()!r}, so the Python code might take another path than "
                "the trace did, and the compiled version stops here (the kernels before "
                "this point have run). If this is a check (an index out of range), run the "
                "function eagerly to get its error; otherwise return the tensor and read "
                "it after the call instead of reading it inside"
            )


class KernelStep(Step):
    """A ``@kg.kernel`` launch, replayed with tensors rebuilt over the slot table."""

    device_only = True

    def __init__(self, op: Op) -> None:
        self.kernel = op.attrs["kernel"]
        self.ndrange = op.attrs["ndrange"]
        self.workgroup = op.attrs["workgroup"]
        self.device = op.attrs["device"]
        self.specs = [
            ("tensor", _Template(spec[1]), spec[2], spec[3]) if spec[0] == "tensor" else spec
            for spec in op.attrs["specs"]
        ]
        self.label = f"kernel {self.kernel.info.name}"
        self.shape = tuple(self.ndrange) if isinstance(self.ndrange, tuple) else (self.ndrange,)
        self.inputs = [spec[1] for spec in self.specs if spec[0] == "tensor"]

    def _arguments(self, table: list[Any], bases: list[int]) -> list[Any]:
        from ..tensor import Storage, Tensor

        args = []
        for spec in self.specs:
            if spec[0] == "tensor":
                template, device, backend = spec[1], spec[2], spec[3]
                storage = Storage(table[template.slot], device, backend)
                args.append(
                    Tensor._make(
                        storage,
                        template.shape,
                        template.strides,
                        template.offset + bases[template.slot],
                        template.dtype,
                    )
                )
            else:
                args.append(spec[1])
        return args

    def run(self, table: list[Any], bases: list[int]) -> None:
        from ..autograd import no_grad

        with no_grad():
            self.kernel.launch(
                self._arguments(table, bases), self.ndrange, self.workgroup, self.device
            )

    def prepare(self, table: list[Any], bases: list[int]) -> Callable[[], None] | None:
        prepared = self._prepared(table, bases)
        if prepared is None:
            return None
        return functools.partial(prepared.call, prepared.arguments)

    def prepare_rebound(
        self, table: list[Any], bases: list[int], varying: set[int]
    ) -> Callable[[list[Any], list[int]], None] | None:
        """Like :meth:`prepare`, for a step some of whose tensors live in buffers that
        change from call to call (``varying`` slots: the arguments): a function of the
        slot table that makes only those tensors' arrays again."""
        prepared = self._prepared(table, bases)
        if prepared is None:
            return None
        rebound = []
        for index, spec in enumerate(self.specs):
            if spec[0] == "tensor" and spec[1].slot in varying:
                template = spec[1]
                shape, strides = template.shape, template.strides
                if prepared.flatten[index]:
                    shape, strides = (prod(shape),), (1,)
                rebound.append(
                    (index, template.slot, shape, strides, template.offset, template.dtype)
                )
        return functools.partial(_rebound_launch, prepared, tuple(rebound))

    def _prepared(self, table: list[Any], bases: list[int]) -> Any:
        from ..autograd import no_grad

        with no_grad():
            return self.kernel.prepare(
                self._arguments(table, bases), self.ndrange, self.workgroup, self.device
            )


def _rebound_launch(prepared: Any, rebound: tuple, table: list[Any], bases: list[int]) -> None:
    arguments = list(prepared.arguments)
    kernel_array = prepared.backend.kernel_array
    for index, slot, shape, strides, offset, dtype in rebound:
        arguments[index] = kernel_array(
            View(table[slot], shape, strides, offset + bases[slot], dtype)
        )
    prepared.call(arguments)


class FusedReduceStep(Step):
    """A fused reduction: the kernel its backend made from a
    :class:`~kernelgrad.backends.fused_reduce.FusedReduction`
    (``backend.fused_reduce``), called with the buffers and offsets of its views."""

    device_only = True

    def __init__(self, kernel: Any, views: list[ViewRef], label: str) -> None:
        self.kernel = kernel
        self.label = label
        self.views = [_Template(v) for v in views]

    def _operands(self, table: list[Any], bases: list[int]) -> tuple[list[Any], list[int]]:
        arrays = [table[t.slot] for t in self.views]
        offsets = [t.offset + bases[t.slot] for t in self.views]
        return arrays, offsets

    def run(self, table: list[Any], bases: list[int]) -> None:
        launches = self.kernel.launches
        for counter in LAUNCH_HOOKS:
            counter.count += launches
            counter.names += [self.label] * launches
        self.kernel.run(*self._operands(table, bases))

    def prepare(self, table: list[Any], bases: list[int]) -> Callable[[], None] | None:
        return self.kernel.prepare(*self._operands(table, bases))


def _split_operands(params: _Params | None, single: ViewRef | None) -> tuple[list, list]:
    if params is None:
        return ([single] if single is not None else []), []
    views = [x for x in params.operands if isinstance(x, ViewRef)]
    scalars = [
        d.numpy.type(x)
        for x, d in zip(params.operands, params.dtypes)
        if not isinstance(x, ViewRef)
    ]
    return views, scalars


# --- building ---------------------------------------------------------------------------------
def build_steps(analysis: Analysis) -> list[Step]:
    steps: list[Step] = []
    for group in analysis.groups:
        root_op = analysis.ops[group.root]
        if group.reduce_op is not None:
            steps.append(_fused_reduce(analysis, group))
        elif len(group.members) == 1:
            if root_op.kind == "kernel":
                steps.append(KernelStep(root_op))
            elif root_op.kind == "external":
                from .external import ExternalStep

                steps.append(ExternalStep(root_op))
            elif root_op.kind == "guard":
                steps.append(GuardStep(root_op))
            elif root_op.kind in RANDOM_STATE_OPS:
                steps.append(RandomStateStep(root_op))
            elif root_op.kind == "elementwise":
                steps.append(
                    ElementwiseStep(
                        root_op.attrs["backend"],
                        root_op.attrs["fn"],
                        root_op.outputs,
                        root_op.inputs,
                        root_op.attrs["compute"],
                    )
                )
            else:
                steps.append(PrimitiveStep(root_op))
        else:
            steps.append(_fused_elementwise(analysis, group))
    return join_elementwise(batch_foreach(steps))


def _fused_elementwise(analysis: Analysis, group: Group) -> Step:
    root_op = analysis.ops[group.root]
    lines, results, params = compose(analysis, group, group.members, group.root)
    text = _function_source("FN", params.names, lines, results)
    name = _name(analysis, group.members, text)
    fn = ScalarFunction(
        name, text.replace("def FN(", f"def {name}(", 1), len(params.names), len(results)
    )
    return ElementwiseStep(
        root_op.attrs["backend"], fn, root_op.outputs, params.operands, params.dtypes
    )


def reduce_parts(analysis: Analysis, group: Group) -> tuple[FusedReduction, list[ViewRef]]:
    """The device-neutral description of the group's fused reduction, and its views in
    the order the backend's kernel takes them (prologue arrays, epilogue arrays,
    outputs)."""
    reduce_index = group.reduce_op
    assert reduce_index is not None
    reduce_op = analysis.ops[reduce_index]
    kind = reduce_op.attrs["kind"]
    x_view = reduce_op.inputs[0]
    out_dtype = reduce_op.outputs[0].dtype
    prologue_members = [m for m in group.members if analysis.is_prologue(group, m)]
    epilogue_members = [m for m in group.members if m != reduce_index and m not in prologue_members]

    prologue_params = None
    prologue_source = None
    if prologue_members:
        pro_root = group.fused.get(x_view.slot)
        assert pro_root is not None
        lines, results, prologue_params = compose(analysis, group, prologue_members, pro_root)
        produced = analysis.ops[pro_root]
        value = convert(results[0], produced.outputs[0].dtype, x_view.dtype)
        text = _function_source("FN", prologue_params.arrays_then_scalars(), lines, [value])
        name = _name(analysis, prologue_members, text)
        prologue_source = (name, text.replace("def FN(", f"def {name}(", 1))

    epilogue_params = None
    epilogue_source = None
    if epilogue_members:
        root_op = analysis.ops[group.root]
        lines, results, epilogue_params = compose(
            analysis, group, epilogue_members, group.root, special=("r", out_dtype)
        )
        text = _function_source("FN", ["r"] + epilogue_params.arrays_then_scalars(), lines, results)
        name = _name(analysis, epilogue_members, text)
        epilogue_source = (name, text.replace("def FN(", f"def {name}(", 1))
        outputs = root_op.outputs
    else:
        outputs = reduce_op.outputs
    names = (
        analysis.ops[m].attrs["fn"].name
        if analysis.ops[m].kind == "elementwise"
        else f"reduce_{kind}"
        for m in group.members
    )
    label = ("fused_" + "_".join(dict.fromkeys(names)))[:60]
    x_dtype = x_view.dtype
    pro_views, pro_scalars = _split_operands(prologue_params, None if prologue_params else x_view)
    epi_views, epi_scalars = _split_operands(epilogue_params, None)
    eshape = tuple(outputs[0].shape)
    out_views = list(outputs) if eshape else [_scalar_view(v) for v in outputs]
    reduction = FusedReduction(
        kind=kind,
        x_shape=tuple(x_view.shape),
        axes=tuple(reduce_op.attrs["axes"]),
        x_dtype=x_dtype,
        out_dtype=out_dtype,
        prologue=prologue_source,
        prologue_arrays=_array_dtypes(prologue_params) if prologue_params else [x_dtype],
        prologue_strides=[tuple(v.strides) for v in pro_views],
        prologue_scalars=pro_scalars,
        epilogue=epilogue_source,
        epilogue_arrays=_array_dtypes(epilogue_params),
        epilogue_strides=[tuple(v.strides) for v in epi_views],
        epilogue_scalars=epi_scalars,
        eshape=eshape or (1,),
        out_dtypes=[v.dtype for v in outputs],
        out_strides=[tuple(v.strides) for v in out_views],
        label=label,
    )
    return reduction, [*pro_views, *epi_views, *out_views]


def _array_dtypes(params: _Params | None) -> list[DType]:
    if params is None:
        return []
    return [d for x, d in zip(params.operands, params.dtypes) if isinstance(x, ViewRef)]


def _fused_reduce(analysis: Analysis, group: Group) -> Step:
    """The backend's kernel for the group's fused reduction (``backend.fused_reduce``:
    only groups whose backend has it fuse a reduction, ``graph.Analysis``)."""
    reduction, views = reduce_parts(analysis, group)
    backend = analysis.ops[group.reduce_op].attrs["backend"]
    return FusedReduceStep(backend.fused_reduce(reduction), views, reduction.label)


def _scalar_view(view: ViewRef) -> ViewRef:
    return ViewRef(view.slot, (1,), (0,), view.offset, view.dtype)


# --- the plan ---------------------------------------------------------------------------------
DEFAULT_NATIVE_REPLAY = 8


def _replays_before_joining() -> int | None:
    """After how many replays a plan asks its backend to join its steps into native
    calls (``KG_NATIVE_REPLAY``, default 8): joining costs a fraction of a second once,
    which a function called only a few times would not win back. 0: never."""
    from ..backends.base import whole_number_setting

    count = whole_number_setting("KG_NATIVE_REPLAY", DEFAULT_NATIVE_REPLAY, 0, "replays")
    return count - 1 if count > 0 else None


class Plan:
    """Steps plus the buffer table recipe; ``run`` replays one call."""

    def __init__(
        self,
        slots: list[Slot],
        steps: list[Step],
        analysis: Analysis,
        output_slots: set[int],
        escaping: dict[int, Any],
        arg_slots: dict[int, int],
        written_args: list[int],
        eager_launches: int,
    ) -> None:
        self.slots = slots
        self.steps = steps
        self.analysis = analysis
        self.output_slots = sorted(output_slots)
        self.arg_slots = arg_slots  # slot -> tensor argument position
        self.written_args = written_args
        self.eager_launches = eager_launches
        self.table: list[Any] = [None] * len(slots)
        for index, slot in enumerate(slots):
            if slot.kind in ("const", "external"):
                self.table[index] = slot.buffer
        for index, buffer in escaping.items():
            self.table[index] = buffer
        hoisted = self._hoist_constant_fills(set(escaping))
        self._allocate_scratch(set(escaping) | hoisted)
        self._prepared: list[tuple[Callable[..., None] | None, bool]] | None = None
        # runs of steps the backend joined into native calls (Backend.join_launches):
        # first step -> (stop, run); asked after _join_wait more replays (KG_NATIVE_REPLAY),
        # and again after 1, 2, 4... more while the backend answers "not yet"
        self._joined: dict[int, tuple[int, Callable[[list[Any], list[int]], None]]] = {}
        self._join_wait: int | None = _replays_before_joining()
        self._join_backoff = 1

    def _prepare(
        self, table: list[Any], bases: list[int]
    ) -> list[tuple[Callable[..., None] | None, bool]]:
        """Each step prepared once (done at the first replay, after the trace has
        compiled every kernel): ``(launch, False)`` for a step whose buffers are the
        same on every call (scratch, parameters, optimizer state: not the arguments, not
        the fresh outputs), ``launch`` being one call of its kernel with a bound argument
        list (see ``Step.prepare``); ``(launch, True)`` for a step that reads or writes
        the arguments and can be rebound to them (``prepare_rebound``: ``launch(table,
        bases)``); ``(None, False)`` for the others, which run through ``Step.run``."""
        varying = set(self.arg_slots) | set(self.output_slots)
        prepared: list[tuple[Callable[..., None] | None, bool]] = []
        for step in self.steps:
            prepare = getattr(step, "prepare", None)  # host ops (external.py) have none
            rebind = getattr(step, "prepare_rebound", None)
            touched = varying.intersection(_step_slots(step))
            if prepare is not None and not touched:
                prepared.append((prepare(table, bases), False))
            elif rebind is not None and touched:
                launch = rebind(table, bases, touched)
                prepared.append((launch, launch is not None))
            else:
                prepared.append((None, False))
        return prepared

    def _join(self, table: list[Any], bases: list[int]) -> None:
        """Ask the backend to join runs of consecutive steps into native calls
        (``Backend.join_launches``: the CPU generates one native function per run that
        calls the kernels' compiled code, so no Python runs between them). Steps it
        cannot join (guards, host operations, library functions) run as before. While
        the backend answers None (a kernel still compiling elsewhere) the question is
        asked again after 1, 2, 4, ... more replays."""
        backends = {id(slot.backend): slot.backend for slot in self.slots if slot.backend}
        join = capture = None
        if len(backends) == 1:
            backend = next(iter(backends.values()))
            join = getattr(backend, "join_launches", None)
            capture = getattr(backend, "capture", None)
        if join is None and capture is not None:
            from .captured import graph_runs

            self._join_wait = None
            self._joined = graph_runs(self, backend)
            if debug_level() >= 1:
                joined, count = self.native
                log(f"kg.compile: {joined} of {len(self.steps)} steps replay in {count} graph(s)")
            return
        if join is None:
            self._join_wait = None
            return
        launches = []
        for step in self.steps:
            prepare = getattr(step, "prepare", None)
            launches.append((prepare(table, bases) if prepare else None, _step_slots(step)))
        varying = set(self.arg_slots) | set(self.output_slots)
        runs = join(launches, table, bases, varying)
        if runs is None:
            self._join_wait = self._join_backoff
            self._join_backoff = min(2 * self._join_backoff, 256)
            return
        self._join_wait = None
        self._joined = {first: (stop, run) for first, stop, run in runs}
        if debug_level() >= 1:
            joined = sum(stop - first for first, stop, _ in runs)
            log(
                f"kg.compile: {joined} of {len(self.steps)} steps replay in {len(runs)} "
                "native call(s)"
            )

    @property
    def native(self) -> tuple[int, int]:
        """(steps replayed in native calls, native calls) per replay: see :meth:`_join`."""
        return sum(stop - first for first, (stop, _) in self._joined.items()), len(self._joined)

    @property
    def kernel_count(self) -> int:
        return len(self.steps)

    def _hoist_constant_fills(self, escaping: set[int]) -> set[int]:
        """Fills that write the same values on every call leave the replay: an
        elementwise step of numbers only (no array input) into a scratch slot that no
        other operation writes (the backward pass's seed, ``ones_like(loss)``, on every
        traced training step) runs once, here, into a buffer of its own that no other
        slot shares; later steps read it as they read a parameter. Returns the slots."""
        writes: dict[int, int] = {}
        for op in self.analysis.ops:
            for ref in op.outputs:
                writes[ref.slot] = writes.get(ref.slot, 0) + 1
        outputs = set(self.output_slots)
        kept: list[Step] = []
        hoisted: set[int] = set()
        for step in self.steps:
            slot = _constant_fill_slot(step)
            if (
                slot is None
                or writes.get(slot) != 1
                or slot in escaping
                or slot in outputs
                or self.slots[slot].kind != "new"
            ):
                kept.append(step)
                continue
            info = self.slots[slot]
            self.table[slot] = info.backend.empty(info.numel, info.dtype)
            step.run(self.table, [0] * len(self.table))
            hoisted.add(slot)
        self.steps = kept
        return hoisted

    def _allocate_scratch(self, escaping: set[int]) -> None:
        """One buffer per scratch slot, shared between slots whose lifetimes (first
        write to last read, in steps) do not overlap."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for position, step in enumerate(self.steps):
            for slot in _step_slots(step):
                first.setdefault(slot, position)
                last[slot] = position
        outputs = set(self.output_slots)
        pool: list[tuple[Any, Any, int, int]] = []  # (key, buffer, busy_until, slot)
        for slot in sorted(first, key=lambda s: first[s]):
            info = self.slots[slot]
            if info.kind != "new" or slot in escaping or slot in outputs:
                continue
            key = (id(info.backend), info.dtype.name, info.numel)
            reused = None
            for k, (pool_key, _buffer, busy_until, _slot) in enumerate(pool):
                if pool_key == key and busy_until < first[slot]:
                    reused = k
                    break
            if reused is None:
                buffer = info.backend.empty(info.numel, info.dtype)
                pool.append((key, buffer, last[slot], slot))
            else:
                buffer = pool[reused][1]
                pool[reused] = (key, buffer, last[slot], slot)
            self.table[slot] = buffer

    def run(self, tensors: list[Any]) -> list[Any]:
        """Replay with these argument tensors; returns the table (for the outputs)."""
        table = list(self.table)
        bases = [0] * len(table)
        for slot, position in self.arg_slots.items():
            tensor = tensors[position]
            table[slot] = tensor._storage.buffer
            bases[slot] = tensor._offset
        for slot in self.output_slots:
            info = self.slots[slot]
            if info.kind == "new":
                table[slot] = info.backend.empty(info.numel, info.dtype)
        level = debug_level()
        if level == 0 and not LAUNCH_HOOKS:
            prepared = self._prepared
            if prepared is None:
                prepared = self._prepared = self._prepare(table, bases)
            if self._join_wait is not None:
                if self._join_wait == 0:
                    self._join(table, bases)
                else:
                    self._join_wait -= 1
            joined = self._joined
            steps = self.steps
            position = 0
            while position < len(steps):
                run = joined.get(position)
                if run is not None:
                    run[1](table, bases)
                    position = run[0]
                    continue
                launch, rebound = prepared[position]
                if launch is None:
                    steps[position].run(table, bases)
                elif rebound:
                    launch(table, bases)
                else:
                    launch()
                position += 1
        else:  # launches counted or logged: every step through its backend's primitive
            for step in self.steps:
                if level >= 2:
                    start = time.perf_counter()
                    step.run(table, bases)
                    elapsed = (time.perf_counter() - start) * 1e6
                    log(
                        f"compiled {step.label[:36]:<36} shape={step.shape!s:<18} {elapsed:9.1f} us"
                    )
                else:
                    step.run(table, bases)
        for position in self.written_args:
            tensors[position]._storage.version += 1
        return table

    def describe(self) -> str:
        joined, calls = self.native
        lines = [f"{len(self.steps)} kernels (eager: {self.eager_launches} launches)"]
        if calls:
            lines[0] += f"; {joined} of them replayed in {calls} native call(s)"
        for step in self.steps:
            lines.append(f"  {step.label}  {step.shape}")
        return "\n".join(lines)


def _constant_fill_slot(step: Step) -> int | None:
    """The slot an elementwise step of numbers only writes (a fill), else None."""
    if type(step) is not ElementwiseStep or len(step.outputs) != 1:
        return None
    if any(isinstance(x, _Template) for x in step.inputs):
        return None
    return step.outputs[0].slot


def step_templates(step: Step) -> list[_Template]:
    """The views over the slot table a step reads or writes."""
    found = []
    for name in ("outputs", "inputs", "views"):
        for item in getattr(step, name, []) or []:
            if isinstance(item, _Template):
                found.append(item)
    return found


def _step_slots(step: Step) -> list[int]:
    return [template.slot for template in step_templates(step)]
