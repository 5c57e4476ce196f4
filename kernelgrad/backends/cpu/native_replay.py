"""kg.compile's replay as native calls (``Backend.join_launches``).

A replay (``compile/plan.py``) runs a list of prepared launches, each a Python call of a
Numba-compiled kernel with its arguments bound: 1-3 us of Python per kernel, which on a
small model is most of the step. Here each run of consecutive launches becomes one
generated Numba function that calls every kernel's compiled code through its address,
so no Python runs between them. Nothing is compiled again: the generated function holds
only the calls (tens of milliseconds to compile), and each kernel runs the machine code
it already had (its serial or ``prange`` form, whichever the launch had chosen).

What a launch can be, and how it is called natively:

* ``functools.partial(kernel, *arguments)`` of a Numba dispatcher (a generated
  elementwise, foreach or fused-reduction kernel), also behind a ``ParallelTwin`` or
  ``WorkerCompiled`` (``compile_ahead.py``): the compiled form for the arguments' types;
* a ``@kg.kernel`` launch (``kernel_module.prepare``): the same, with its ndrange prefix;
* a :class:`~kernelgrad.backends.cpu.blas.PreparedProduct`: ``split_gemm`` (large) or
  ``gemm_batch`` (small, on the calling thread), with OpenBLAS set to one thread around
  the whole run instead of around each product;
* several of these (``_each``) or none (``_nothing``).

Anything else (NumPy's own ``matmul``, a library function, a guard, a host operation)
ends a run and replays in Python as before.

Arrays are matched to the replay's slots by address. An array over a buffer that is the
same on every call (scratch, parameters, optimizer state, an array the launch owns) is
made in the generated code at its fixed address; an array over a slot whose buffer
changes from call to call (an argument, a fresh output) at the same distance from that
call's buffer and offset, which the generated function takes as arguments. Shapes and
strides are those the launch was prepared with (a replay's are fixed).

A ``prange`` form still compiling in a worker process (``compile_ahead``) makes
:func:`join` answer None: the replay stays in Python and asks again later, so the
native calls are built once every form is final.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic

from ...debug import debug_level, log


class _PendingError(Exception):
    """A compiled form is still on its way from a compile worker."""


class _UnsupportedError(Exception):
    """A launch this module cannot call natively."""


Launch = Callable[[], None]


def join(
    launches: Sequence[tuple[Launch | None, Sequence[int]]],
    table: Sequence[Any],
    bases: Sequence[int],
    varying: set[int],
) -> list[tuple[int, int, Callable[[list[Any], list[int]], None]]] | None:
    """Runs of consecutive ``launches`` (each a prepared launch over ``table``'s
    buffers, or None, and the slots its step reads and writes) joined into native
    calls: ``[(first, stop, run)]``, ``run(table, bases)`` replaying
    ``launches[first:stop]`` with the ``varying`` slots' buffers and offsets read from
    that call's ``table`` and ``bases``. None while a compiled form is still being
    compiled in a worker (ask again later)."""
    slots = _SlotFinder(table, bases, varying)
    calls: list[list[tuple[Any, tuple]] | None] = []
    try:
        for launch, step_slots in launches:
            calls.append(None if launch is None else _calls_or_none(launch, slots, step_slots))
    except _PendingError:
        return None
    pieces = []
    start = 0
    while start < len(calls):
        if calls[start] is None:
            start += 1
            continue
        stop = start
        while stop < len(calls) and calls[stop] is not None:
            stop += 1
        piece = _build(calls[start:stop], slots, f"steps {start}-{stop - 1}")
        if piece is not None:
            pieces.append((start, stop, piece))
        start = stop
    return pieces


def _calls_or_none(launch: Launch, slots: _SlotFinder, step_slots: Sequence[int]) -> Any:
    """``[(dispatcher, arguments, described arguments)]`` of a launch, or None where
    it cannot be called natively."""
    try:
        return [(_resolve(callee), args, _arguments(args, slots, step_slots))
                for callee, args in _unpack(launch)]  # fmt: skip
    except _UnsupportedError:
        return None


def _unpack(launch: Any) -> list[tuple[Any, tuple]]:
    """``[(callee, arguments)]`` a launch makes, in order."""
    from . import _each, _nothing, blas, kernel_module, split_gemm

    if launch is _nothing:
        return []
    if isinstance(launch, blas.PreparedProduct):
        if launch.arguments is None:
            raise _UnsupportedError
        operands = ((8, launch.left), (10, launch.right), (12, launch.out))
        if launch.bias is not None:
            operands += ((14, launch.bias),)
        product = _Product((launch.arguments, operands))
        return [("split" if launch.split else split_gemm.gemm_batch, product)]
    if not isinstance(launch, functools.partial) or launch.keywords:
        raise _UnsupportedError
    func, args = launch.func, launch.args
    if func is _each:
        return [call for inner in args[0] for call in _unpack(inner)]
    if func is kernel_module._call:  # partial(partial(_call, launcher, prefix), arguments)
        launcher, prefix, arguments = args
        return [(launcher, (*prefix, *arguments))]
    return [(func, args)]


class _Product(tuple):
    """``split_gemm``'s arguments with the operands whose addresses they hold:
    ``(arguments, ((position, array), ...))``."""


def _resolve(callee: Any) -> Any:
    """The Numba dispatcher behind ``callee``."""
    from .compile_ahead import ParallelTwin, WorkerCompiled

    if callee == "split":
        return callee
    if isinstance(callee, ParallelTwin):
        if not callee.ready:
            job = callee.job
            if job is None or not job.done():
                raise _PendingError
            callee.ready = True  # as its next call would: the worker's form is on disk
        callee = callee.parallel
    if isinstance(callee, WorkerCompiled):
        if callee.job is not None:
            raise _PendingError
        callee = callee.dispatcher
    if not isinstance(callee, Dispatcher):
        raise _UnsupportedError
    return callee


class _SlotFinder:
    """Where an array lies: in a varying slot's buffer (read again on each call), in a
    buffer that stays the same, or in neither (an array the launch owns)."""

    def __init__(self, table: Sequence[Any], bases: Sequence[int], varying: set[int]) -> None:
        self.table = table
        self.bases = bases
        self.varying = varying
        self.ranges: list[tuple[int, int, int]] = []  # (start address, end, slot)
        for slot, buffer in enumerate(table):
            if isinstance(buffer, np.ndarray) and buffer.ndim == 1:
                start = buffer.ctypes.data
                self.ranges.append((start, start + buffer.nbytes, slot))
        self.moving: dict[int, int] = {}  # varying slot -> k of its parameters B<k>, O<k>

    def find(self, array: np.ndarray, step_slots: Sequence[int]) -> tuple[int, bool] | None:
        """``(slot, varying)`` of the slot among the step's whose buffer holds all of
        ``array``, or None where none does. Raises ``_UnsupportedError`` where the memory is
        a varying slot's and also another's (an argument that is a parameter's tensor)."""
        low, high = _extent(array)
        found = {s for start, end, s in self.ranges if start <= low and high <= end}
        mine = found.intersection(step_slots)
        if not mine:
            if found & self.varying:
                raise _UnsupportedError
            return None
        moving = mine & self.varying
        if moving and (len(moving) != len(mine) or len({id(self.table[s]) for s in mine}) > 1):
            raise _UnsupportedError
        slot = min(mine)
        return slot, bool(moving)

    def view(self, array: np.ndarray, step_slots: Sequence[int]) -> _ArrayAt:
        """``array`` as the generated code rebuilds it: at its own address where that
        stays the same, or at an offset into a varying slot's buffer of the call."""
        return _ArrayAt(array, self.address(array, step_slots))

    def address(self, array: np.ndarray, step_slots: Sequence[int]) -> int | _Address:
        """The address of ``array``'s first element: the number where its buffer stays
        the same, else an :class:`_Address` into the call's buffer of its slot."""
        place = self.find(array, step_slots)
        if place is None or not place[1]:
            return array.ctypes.data
        slot = place[0]
        buffer = self.table[slot]
        k = self.moving.setdefault(slot, len(self.moving))
        offset = array.ctypes.data - buffer.ctypes.data - self.bases[slot] * buffer.itemsize
        return _Address(k, offset)


def _extent(array: np.ndarray) -> tuple[int, int]:
    """The first and one-past-last byte address ``array`` touches."""
    low = high = array.ctypes.data
    for size, stride in zip(array.shape, array.strides):
        if size == 0:
            return low, low
        if stride > 0:
            high += (size - 1) * stride
        else:
            low += (size - 1) * stride
    return low, high + array.itemsize


class _ArrayAt:
    """An array argument the generated code makes from an address (a number, or an
    :class:`_Address` into a varying slot's buffer) and the original's type, shape and
    strides, without a reference count: the buffers outlive the call (the replay's
    table holds them, :class:`_Run` the others)."""

    def __init__(self, array: np.ndarray, address: int | _Address) -> None:
        self.array = array
        self.address = address


class _Address:
    """An address ``offset_bytes`` past the start of varying slot ``k``'s data at the
    call's offset (an array over an argument or a fresh output, or such a product
    operand)."""

    def __init__(self, k: int, offset_bytes: int) -> None:
        self.k, self.offset_bytes = k, offset_bytes


def _arguments(args: Any, slots: _SlotFinder, step_slots: Sequence[int]) -> tuple:
    """The launch's arguments, arrays over the replay's buffers replaced by
    :class:`_ArrayAt` and a product's operand addresses by :class:`_Address` where they
    change from call to call."""
    if isinstance(args, _Product):
        arguments, operands = args
        out = list(arguments)
        for position, array in operands:
            out[position] = slots.address(array, step_slots)
        return _Product((tuple(out), operands))
    return tuple(_argument(a, slots, step_slots) for a in args)


def _argument(value: Any, slots: _SlotFinder, step_slots: Sequence[int]) -> Any:
    if isinstance(value, tuple):
        return tuple(_argument(v, slots, step_slots) for v in value)
    if isinstance(value, np.ndarray):
        return slots.view(value, step_slots)
    return value


# --- code generation ----------------------------------------------------------------------
#
# A run becomes one LLVM function in Numba's calling convention, taking one argument: an
# array of the varying slots' data pointers (each at that call's offset). It calls each
# kernel's compiled code through its address with arguments made in place: arrays as
# Numba's array structs (no meminfo, no parent: reference counting skips them, and the
# buffers outlive the call), numbers and tuples as constants. No Numba typing or
# lowering runs, so a run of a few hundred launches compiles in well under a second.
# ``_enter`` (a Numba function, compiled once per tuple type of the buffers and cached on
# disk) takes the buffers and offsets from Python, makes the pointer array and calls it;
# an exception a kernel raises comes back through both.


def _compiled(dispatcher: Any, argument_types: tuple) -> Any:
    """The compile result of ``dispatcher`` for ``argument_types`` (compiled or loaded
    from the disk cache if the dispatcher does not hold it yet)."""
    result = dispatcher.overloads.get(argument_types)
    if result is None:
        dispatcher.compile(argument_types)
        result = dispatcher.overloads[argument_types]
    return result


@intrinsic
def _call_replay(typingctx, address, buffers, offsets):
    """Call the generated function at ``address`` with the data pointers of
    ``buffers`` (a tuple of 1-D arrays), each ``offsets[k]`` elements in."""
    sig = types.none(address, buffers, offsets)

    def codegen(context, builder, signature, args):
        address, buffers, offsets = args
        buffer_types = signature.args[1]
        byte = ir.IntType(8).as_pointer()
        intp = context.get_value_type(types.intp)
        count = max(len(buffer_types), 1)
        pointers = cgutils.alloca_once(builder, byte, size=count)
        for k, array_type in enumerate(buffer_types):
            array = context.make_array(array_type)(
                context, builder, builder.extract_value(buffers, k)
            )
            itemsize = context.get_abi_sizeof(context.get_data_type(array_type.dtype))
            offset = builder.mul(builder.extract_value(offsets, k), ir.Constant(intp, itemsize))
            data = builder.add(builder.ptrtoint(array.data, intp), offset)
            builder.store(
                builder.inttoptr(data, byte), builder.gep(pointers, [ir.Constant(intp, k)])
            )
        function_type = context.call_conv.get_function_type(types.none, [types.voidptr])
        function = builder.inttoptr(address, function_type.as_pointer())
        status, _ = context.call_conv.call_function(
            builder, function, types.none, [types.voidptr], [builder.bitcast(pointers, byte)]
        )
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(nogil=True, cache=True)
def _enter(address, buffers, offsets):
    _call_replay(address, buffers, offsets)


_ARRAY_FIELDS = ("meminfo", "parent", "nitems", "itemsize", "data", "shape", "strides")


class _Code:
    """An argument computed when the run runs: a product's part count."""

    def __init__(self, count: int) -> None:
        self.count = count


_names = itertools.count()


def _build(calls: list, slots: _SlotFinder, label: str) -> Callable | None:
    """One generated function for these calls, or None where it cannot be made."""
    from numba.core.registry import cpu_target

    from . import split_gemm

    context = cpu_target.target_context
    intp_type = context.get_value_type(types.intp)
    byte = ir.IntType(8).as_pointer()
    keep: list[Any] = []  # compile results and arrays the generated code points into
    moving: dict[int, Any] = {}  # k -> varying slot k's data pointer (at the call's offset)
    products = False

    module = ir.Module(name="kg_native_replay")
    function_type = context.call_conv.get_function_type(types.none, [types.voidptr])
    name = f"kg_native_replay_{next(_names)}"
    function = ir.Function(module, function_type, name=name)
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    [pointer_array] = context.call_conv.get_arguments(function)
    pointer_array = builder.bitcast(pointer_array, byte.as_pointer())

    ks = sorted({k for _, _, arguments in (c for run in calls for c in run)
                 for k in _varying(arguments)})  # fmt: skip
    for position, k in enumerate(ks):  # the pointer array holds them in this order
        pointer = builder.gep(pointer_array, [ir.Constant(intp_type, position)])
        moving[k] = builder.ptrtoint(builder.load(pointer), intp_type)

    def address(value: int | _Address) -> Any:
        if isinstance(value, _Address):
            return builder.add(moving[value.k], ir.Constant(intp_type, value.offset_bytes))
        return ir.Constant(intp_type, value)

    def call(result: Any, values: list[Any]) -> Any:
        signature = result.signature
        callee_type = context.call_conv.get_function_type(
            signature.return_type, list(signature.args)
        )
        pointer = result.library.get_pointer_to_function(result.fndesc.llvm_func_name)
        if not pointer:
            raise _UnsupportedError
        callee = builder.inttoptr(ir.Constant(intp_type, pointer), callee_type.as_pointer())
        status, value = context.call_conv.call_function(
            builder, callee, signature.return_type, list(signature.args), values
        )
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return value

    def value(argument: Any, value_type: Any) -> Any:
        if isinstance(argument, _ArrayAt):
            array = argument.array
            if not isinstance(argument.address, _Address):
                keep.append(array)  # its address is in the code (not a call's buffer)
            struct = context.get_value_type(value_type)
            if context.data_model_manager[value_type]._fields != _ARRAY_FIELDS:
                raise _UnsupportedError  # not Numba's usual array layout
            data_type = struct.elements[4]
            at = argument.address
            members = [
                ir.Constant(struct.elements[0], None),  # meminfo: none (not counted)
                ir.Constant(struct.elements[1], None),  # parent: none
                ir.Constant(intp_type, array.size),
                ir.Constant(intp_type, array.itemsize),
                ir.Constant(data_type, None) if isinstance(at, _Address)
                else ir.Constant(intp_type, at).inttoptr(data_type),
                ir.Constant(struct.elements[5], list(array.shape)),
                ir.Constant(struct.elements[6], list(array.strides)),
            ]  # fmt: skip
            made = ir.Constant(struct, members)
            if isinstance(at, _Address):
                made = builder.insert_value(made, builder.inttoptr(address(at), data_type), 4)
            return made
        if isinstance(argument, _Address):
            return address(argument)
        if isinstance(argument, _Code):
            parts = _compiled(split_gemm.split_parts, (types.intp,))
            keep.append(parts)
            return call(parts, [ir.Constant(intp_type, argument.count)])
        if isinstance(argument, tuple):
            if not isinstance(value_type, types.BaseTuple) or len(value_type) != len(argument):
                raise _UnsupportedError
            items = [value(a, t) for a, t in zip(argument, value_type)]
            return context.make_tuple(builder, value_type, items)
        if isinstance(argument, np.ndarray) or not isinstance(
            value_type, (types.Number, types.Boolean, types.NoneType)
        ):
            raise _UnsupportedError
        return context.get_constant_generic(builder, value_type, argument)

    try:
        for dispatcher, original, arguments in (call for run in calls for call in run):
            if isinstance(arguments, _Product):
                products = True
                keep.extend(  # the operands whose addresses are in the code
                    array
                    for position, array in original[1]
                    if not isinstance(arguments[0][position], _Address)
                )
                original, arguments = original[0], arguments[0]
                if dispatcher == "split":  # split_gemm takes the part count third
                    dispatcher = split_gemm.split_gemm
                    count = original[-1][0]
                    original = (*original[:2], split_gemm.split_parts(count), *original[2:])
                    arguments = (*arguments[:2], _Code(count), *arguments[2:])
            argument_types = tuple(dispatcher.typeof_pyval(a) for a in original)
            result = _compiled(dispatcher, argument_types)
            keep.append(result)
            values = [value(a, t) for a, t in zip(arguments, result.signature.args)]
            call(result, values)
        context.call_conv.return_value(builder, context.get_dummy_value())
        with global_compiler_lock:
            library = context.codegen().create_library(name)
            library.add_ir_module(module)
            library.finalize()
            entry = library.get_pointer_to_function(name)
    except _UnsupportedError:
        return None
    except Exception as error:  # a failure to generate or compile: replay in Python
        if debug_level() >= 1:
            log(f"kg.compile: could not join {label} into one native call ({error})")
        return None
    keep.append(library)
    by_k = {k: slot for slot, k in slots.moving.items()}
    return _Run(entry, [by_k[k] for k in ks], keep, products)


def _varying(argument: Any) -> list[int]:
    """The varying slots (their k) a described argument reads."""
    if isinstance(argument, _Address):
        return [argument.k]
    if isinstance(argument, _ArrayAt):
        return _varying(argument.address)
    if isinstance(argument, tuple):  # a tuple argument, or a product's (arguments, operands)
        return [k for item in argument for k in _varying(item)]
    return []


class _Run:
    """One native call for a run of launches: ``run(table, bases)``."""

    __slots__ = ("address", "keep", "products", "slots")

    def __init__(self, address: int, slots: list[int], keep: list, products: bool) -> None:
        self.address = address
        self.slots = tuple(slots)
        self.keep = keep  # compiled code and arrays the generated code points into
        self.products = products

    def __call__(self, table: list[Any], bases: list[int]) -> None:
        slots = self.slots
        buffers = tuple([table[s] for s in slots])
        offsets = tuple([bases[s] for s in slots])
        if not self.products:
            _enter(self.address, buffers, offsets)
            return
        from . import blas

        blas.one_thread()
        try:
            _enter(self.address, buffers, offsets)
        finally:
            blas.all_threads()
