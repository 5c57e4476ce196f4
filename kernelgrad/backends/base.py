"""The Backend protocol: the small seam between the Tensor front end and a device.

A backend owns flat buffers of one dtype and runs a handful of primitive kernels over
*views* of them. It knows nothing of autograd, broadcasting rules or the public API: the
front end resolves those and hands the backend fully specified views (broadcast
dimensions arrive as stride 0; outputs are allocated by the front end).

Every backend implements the same primitives:

=================  =====================================================================
``empty``          allocate an uninitialised buffer of ``numel`` elements
``from_numpy``     copy a contiguous host array into a new buffer
``to_numpy``       copy a view back to a host NumPy array of the view's shape
``elementwise``    ``outputs[...] = fn(*inputs)`` for a :class:`ScalarFunction`
``reduce``         ``sum``, ``max``, ``min``, ``argmax``, ``argmin`` over some axes
``matmul``         batched matrix product (batch dims already broadcast)
``take``           gather along one dim with an integer index tensor
``index_add``      scatter-add along one dim (the gradient of ``take``)
``random``         fill a contiguous view with uniform, normal or integer samples
``synchronize``    wait for queued work (a no-op on the CPU)
=================  =====================================================================

One primitive is optional: ``elementwise_foreach(fn, items, compute_dtypes)`` runs
``elementwise`` for a list of ``(outputs, inputs)`` items of different shapes, in fewer
kernels if the backend can (the CPU backend's one kernel for many small tensors: an
optimizer's update of every parameter). Callers fall back to one ``elementwise`` per item
where a backend lacks it (``nn._fused.launch_each``), and while ``kg.compile`` traces
(its replay joins the items again, ``compile/plan.py``).

One more is optional, for ``kg.compile``: ``fused_reduce(reduction)`` takes a
:class:`~kernelgrad.backends.fused_reduce.FusedReduction` (a ``sum``/``max``/``min``
with an elementwise prologue and epilogue, described device-neutrally by
``compile/plan.py``) and returns a :class:`FusedReduceKernel`: the backend generates and
compiles its own form (``backends/<device>/fused_reduce.py``) and owns the launch policy.
``compile/graph.py`` fuses a reduction only where the backend has ``fused_reduce``;
without it the prologue, the reduction and the epilogue replay as separate launches
(``elementwise``, ``reduce``, ``elementwise``), with the same results.

Layers above the front end (nn, optim) never branch on a device's type: they ask the
backend a question with :func:`backend_capability`. A backend answers by a class
attribute of that name; one that does not declare it gets the default, which is always
the answer that is correct everywhere (only slower):

=================  ======================================================  =======
``host_memory``    buffers are host memory that Python may read and write     False
                   directly (``numpy_view``, no copy, nothing to wait for):
                   an optimizer keeps its step counts there and updates
                   them in Python instead of launching a kernel
``work_groups``    a launch's ``workgroup`` threads run together and          False
                   cooperate (GPUs): kernels written for a group of threads
                   per row are worth it; where False each index of an
                   ``ndrange`` is one loop iteration (the CPU) and a
                   one-thread-per-row form is used instead
=================  ======================================================  =======

Four more are optional, for ``kg.compile``'s replay: ``prepare_elementwise(fn, outputs,
inputs, compute_dtypes)``, ``prepare_elementwise_foreach(fn, items, compute_dtypes)`` and
``prepare_matmul(out, a, b)`` (with ``bias`` where the backend has ``matmul_bias``,
below) return a function of no arguments that launches the same
kernel with everything resolved once (views, kernel, argument list), or None where they
cannot; a replay calls it on every call for views whose buffers never change.
``prepare_kernel(program, launch)`` returns a function of the argument values
(``launch.arguments``, or the same list with some arrays replaced by ``kernel_array`` of
other buffers of the same layouts) that runs the ``@kg.kernel`` launch. The CPU backend
has all four; without them every replay step goes through the primitive.

One more is optional, for the eager affine map (``nn.functional.linear``):
``matmul_bias(out, a, b, bias)`` computes ``out = a @ b`` for 2-D views and adds the
1-D ``bias`` (``out``'s columns, its dtype) to every row, with the bits of ``matmul``
followed by the elementwise addition; without it ``linear`` launches the two.

One more joins prepared launches: ``join_launches(launches, table, bases, varying)``
takes each step's prepared launch over the replay's slot ``table`` (or None) with the
slots the step reads and writes, and returns ``[(first, stop, run)]``: each run of
consecutive launches it can call without Python in between, as ``run(table, bases)``
re-reading the ``varying`` slots (arguments, fresh outputs) from each call's table and
offsets; or None while it cannot say yet (a kernel still compiling elsewhere: the
replay asks again later). The CPU backend generates one native function per run
(``backends/cpu/native_replay.py``).

A backend whose work is queued rather than run at once may have ``capture(run)``
instead: it records the device work that calling ``run()`` (no arguments) queues,
queues that work once, and returns a function of no arguments that queues it again
(the CUDA backend: a CUDA graph, ``backends/cuda/graphs.py``). ``kg.compile``'s replay
hands it runs of steps that only launch device work, over buffers that stay put
(``compile/captured.py``); the backend raises :class:`CaptureUnsupportedError` when the work
cannot be captured, before any of it has run, and the replay then runs those steps one
by one as before.

One more serves eager ops: ``prepare_flat_elementwise(fn, kinds, compute_dtypes,
out_dtype, shape)`` (``kinds``: ``"array"`` or ``"scalar"`` per input) returns
``launch(out_buffer, *operands)``, each array input passed as its buffer and its offset,
each scalar as a number, for a new contiguous output from contiguous inputs of that
shape; or None. ``ops/elementwise.apply`` asks for it once per cached decision and calls
it instead of ``elementwise`` unless the instance's ``elementwise`` is wrapped.
``prepare_strided_elementwise(fn, kinds, compute_dtypes, out_dtype, shape,
input_strides)`` is the same for array inputs of other strides (a broadcast row or
column, a transposed input, a 0-d tensor), ``input_strides`` giving each input's strides
broadcast to ``shape`` (None for a scalar).
``prepare_reduce(kind, x_shape, x_strides, x_dtype, axes, out_dtype)`` is the same for a
reduction into a new contiguous output: ``launch(x_buffer, x_offset, out_buffer)``, or
None; ``ops/reduce.py`` caches it per (kind, dim, keepdim, input layout) and calls it
unless the instance's ``reduce`` is wrapped.
``prepare_elementwise_foreach_fed(fn, items, compute_dtypes, fed_array, fed_scalars)``
prepares an ``elementwise_foreach`` whose input ``fed_array`` (one contiguous view per
item) and scalars ``fed_scalars`` are given anew on each call, ``launch(arrays,
scalars)``: an optimizer's eager update (``nn._fused.prepare_each_fed``; Adam's fused
step), whose gradients and step sizes change while its parameters and state stay.

Three more let layers have kernels compiled ahead, while a forward pass runs, for the
launches their backward pass will make: ``prefetch_kernel(program, launch)`` (as
``launch_kernel``, but only compiling; ``Kernel.prefetch``) and
``prefetch_elementwise(fn, kinds, compute_dtypes, out_dtypes, array_dtypes, layouts)``
(``layouts``: ``"contiguous"``, ``"rows"``, ``"strided"``; ``nn._fused.prefetch``), and
``prefetch_elementwise_foreach(fn, kinds, compute_dtypes, out_dtypes, array_dtypes,
sizes)`` for ``elementwise_foreach`` over items of those element counts
(``nn._fused.prefetch_each``, an optimizer's update). They return at once; the CPU
backend hands the work to a compile worker.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any, NamedTuple, Protocol

import numpy as np

from ..dtypes import DType
from ..shapes import contiguous_strides


class CaptureUnsupportedError(RuntimeError):
    """Raised by a backend's ``capture`` when the work it was given cannot be recorded
    (a host read or synchronisation, a random draw, an error flag, a driver refusal);
    nothing of that work has run (see the module docstring)."""


class View(NamedTuple):
    """A strided window on a flat buffer; strides and offset count elements."""

    buffer: Any
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    dtype: DType


@dataclass(frozen=True)
class ScalarFunction:
    """Source text of a scalar function ``def <name>(x0, x1, ...)`` returning one value
    (or a tuple of ``nout`` values). Backends compile it into their elementwise kernels:
    the CPU with ``numba.njit``, CUDA with ``numba.cuda.jit(device=True)``. The source may
    use the ``math`` module and NumPy scalar casts (``np.float32(x)``, ``np.int64(x)``,
    ``np.bool_(x)``) and nothing else from outside the function: every backend's
    generated module imports ``math`` and ``numpy as np``."""

    name: str
    source: str
    nin: int
    nout: int = 1
    # The standard math function this equals ("exp", "log", ...), if any: a backend may
    # call a vendor routine for it instead of compiling ``source`` (the CPU backend uses
    # NumPy's SIMD loops, which Numba's scalar libm calls cannot match).
    library: str | None = None
    key: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(f"{self.name}\n{self.source}".encode()).hexdigest()[:16]
        object.__setattr__(self, "key", digest)

    @classmethod
    def from_python(
        cls, fn: Callable[..., Any], nout: int = 1, library: str | None = None
    ) -> ScalarFunction:
        source = textwrap.dedent(inspect.getsource(fn))
        nin = len(inspect.signature(fn).parameters)
        return cls(fn.__name__, source, nin, nout, library)


Operand = View | int | float | bool


class Backend(Protocol):
    """What every device backend provides. See the module docstring for the table."""

    name: str

    def empty(self, numel: int, dtype: DType) -> Any: ...

    def from_numpy(self, array: Any) -> Any: ...

    def to_numpy(self, view: View) -> Any: ...

    def elementwise(
        self,
        fn: ScalarFunction,
        outputs: Sequence[View],
        inputs: Sequence[Operand],
        compute_dtypes: Sequence[DType],
    ) -> None:
        """For every index of ``outputs[0].shape``: ``outputs[...] = fn(*inputs)``.

        Input views are already broadcast to the output shape (stride 0 where expanded);
        Python scalars are passed as kernel arguments. Each input is converted to its
        entry of ``compute_dtypes`` before ``fn`` sees it; results are converted to the
        output dtypes on store."""
        ...

    def reduce(self, kind: str, out: View, x: View, axes: tuple[int, ...]) -> None:
        """Reduce ``x`` over ``axes`` into the contiguous ``out`` (the kept dims in order).
        ``kind`` is ``sum``, ``max``, ``min``, ``argmax`` or ``argmin``; the arg kinds take
        exactly one axis and write int64 positions along it."""
        ...

    def matmul(self, out: View, a: View, b: View) -> None:
        """``out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]``; equal batch shapes."""
        ...

    def take(self, out: View, x: View, dim: int, index: View) -> Any:
        """``out = x`` indexed along ``dim`` by the int64 ``index`` (any shape).

        Returns None, or an offending index value if one was out of range."""
        ...

    def index_add(self, out: View, dim: int, index: View, source: View) -> Any:
        """``out`` indexed along ``dim`` by ``index`` += ``source`` (duplicates add up).

        Returns None, or an offending index value if one was out of range."""
        ...

    def random(self, out: View, distribution: str, low: float, high: float) -> None:
        """Fill the contiguous ``out`` with ``uniform`` [low, high), ``normal`` (mean low,
        std high) or ``integers`` [low, high) samples from the backend's generator."""
        ...

    def manual_seed(self, seed: int) -> None: ...

    def get_rng_state(self) -> Any:
        """The generator's state: a picklable object that :meth:`set_rng_state` accepts."""
        ...

    def set_rng_state(self, state: Any) -> None: ...

    def synchronize(self) -> None: ...

    def kernel_array(self, view: View) -> Any:
        """The array a ``@kg.kernel`` receives for ``view``: the view's shape and strides
        over its buffer, sharing memory (writes reach the tensor). None where the
        device's kernels cannot take the layout (CUDA: negative strides); the kernel
        layer then passes a contiguous copy and copies it back after a write."""
        ...

    def launch_kernel(self, program: KernelProgram, launch: KernelLaunch) -> None:
        """Run ``program`` (a ``@kg.kernel``) over ``launch.sizes`` work items.

        The backend generates its form of the kernel from ``program.info`` (the CPU:
        ``njit(parallel=True)`` loops, workgroups as phases split at barriers; CUDA: a
        grid of blocks), compiles it once per form (cached in ``program.launchers``
        under keys of its choosing) and launches it through ``program.run``, which turns
        compiler errors into ``KernelError`` and logs under ``KG_DEBUG``."""
        ...


class KernelProgram(Protocol):
    """A ``@kg.kernel`` as the kernel layer hands it to :meth:`Backend.launch_kernel`
    (``kernel/launch.py``'s ``Kernel``).

    User kernels reach a device through two methods of the backend:

    =================  =================================================================
    ``kernel_array``   the array a kernel receives for a view (shares its memory), or
                       None where the device's kernels cannot take that layout (a copy)
    ``launch_kernel``  generate, compile (once per form) and launch a ``KernelProgram``
    =================  =================================================================

    The kernel layer parses the user's function into a device-neutral
    :class:`~kernelgrad.backends.kernel_source.KernelInfo` and decides the arguments;
    the backend owns everything device-specific: the generated module (loops, grid,
    shared memory, barriers), the compiler options, and the launch policy (threads,
    blocks, streams). Each backend keeps its generator in
    ``backends/<device>/kernel_module.py``."""

    info: Any  # backends.kernel_source.KernelInfo: the analysed function
    fastmath: bool  # allow reassociation and fused multiply-adds
    parallel: bool | None  # CPU: always (True) or never (False) spread over cores
    launchers: dict[Any, Any]  # the backends' compiled forms of this kernel

    def run(
        self, launcher: Any, call: Callable[[], None], label: str, sizes: tuple[int, ...]
    ) -> None:
        """Call ``call()`` (which runs ``launcher``): compiler errors become a
        ``KernelError`` naming the kernel and the generated file; ``KG_DEBUG`` logs."""
        ...


@dataclass
class KernelLaunch:
    """One launch of a ``@kg.kernel``, with its arguments converted."""

    sizes: tuple[int, ...]  # ndrange, one size per index dimension
    group: tuple[int, ...] | None  # the workgroup (one size per dimension), or None
    arguments: list[Any]  # per parameter: an array from kernel_array, or a number
    types: tuple[Any, ...]  # per parameter: "i", "b", "f32", "f64" or ("A", dtype, ndim)
    narrow: bool  # the float32 rule applies: float literals and constants are float32
    tensors: bool = True  # some argument is a kernelgrad tensor (not only foreign arrays)


class FusedReduceKernel(Protocol):
    """What ``Backend.fused_reduce`` returns: one fused reduction compiled for one
    layout. ``arrays`` and ``offsets`` (in elements) are the buffers of the reduction's
    views in the order prologue arrays, epilogue arrays, outputs."""

    launches: int  # kernels one run launches (kg.compile.count_launches counts them)

    def run(self, arrays: Sequence[Any], offsets: Sequence[int]) -> None:
        """Launch the reduction on these buffers."""
        ...

    def prepare(self, arrays: Sequence[Any], offsets: Sequence[int]) -> Callable[[], None] | None:
        """The launch with every argument bound, for buffers that never change (a
        replay calls it instead of :meth:`run`), or None where the backend has none."""
        ...


CAPABILITIES: dict[str, bool] = {"host_memory": False, "work_groups": False}


def backend_capability(backend: Any, name: str) -> bool:
    """The backend's answer to the capability question ``name`` (see the module
    docstring), or the question's default where the backend does not declare it.

    >>> import kernelgrad as kg
    >>> backend_capability(kg.zeros(1)._backend, "host_memory")
    True
    """
    if name not in CAPABILITIES:
        raise ValueError(
            f"unknown backend capability {name!r}; the questions a backend answers are "
            f"{', '.join(sorted(CAPABILITIES))} (declare a new one in CAPABILITIES, with the "
            "default that is correct on every backend)"
        )
    return bool(getattr(backend, name, CAPABILITIES[name]))


def operand_kind(x: Any, outputs: Sequence[View]) -> str:
    """How an elementwise input is passed: ``"scalar"``, ``"array"``, or ``"out<k>"`` when
    it is exactly the view of output ``k`` (same buffer, offset and strides: an in-place
    update), which a kernel can then read from that output instead of a second argument."""
    if type(x) is not View:
        return "scalar"
    for k, out in enumerate(outputs):
        if x.buffer is out.buffer and x.offset == out.offset and x.strides == out.strides:
            return f"out{k}"
    return "array"


def group_foreach_items(
    items: Sequence[tuple[Sequence[View], Sequence[Operand]]],
    alone: Callable[[int], bool],
    run_alone: Callable[[Sequence[View], Sequence[Operand]], None],
    splat: bool = False,
) -> dict[tuple, list[tuple[Sequence[View], Sequence[Operand], int]]]:
    """The items of ``elementwise_foreach`` that can share kernels, grouped by operand
    kinds (:func:`operand_kind`) and array dtypes, as ``(outputs, inputs, numel)``.
    ``run_alone(outputs, inputs)`` runs the others at once: items with a strided view,
    those ``alone(numel)`` picks, and groups of one. Empty items are dropped. With
    ``splat``, an input view of one element broadcast to the item's shape (all strides
    zero: a 0-d tensor such as a traced optimizer's step size) is of kind ``"splat"``
    (the kernel reads its one element) instead of making the item strided."""
    groups: dict[tuple, list[tuple[Sequence[View], Sequence[Operand], int]]] = {}
    for outputs, inputs in items:
        shape = outputs[0].shape
        numel = prod(shape)
        if numel == 0:
            continue
        kinds = tuple(
            ["scalar" if type(x) is not View else operand_kind(x, outputs) for x in inputs]
        )
        if splat:
            kinds = tuple(
                "splat" if kind == "array" and not any(x.strides) else kind
                for kind, x in zip(kinds, inputs)
            )
        arrays = [*outputs, *(x for x, kind in zip(inputs, kinds) if kind == "array")]
        contiguous = contiguous_strides(shape)
        if alone(numel) or any(v.strides != contiguous for v in arrays):
            run_alone(outputs, inputs)
            continue
        groups.setdefault((kinds, tuple(v.dtype for v in arrays)), []).append(
            (outputs, inputs, numel)
        )
    for key, members in list(groups.items()):
        if len(members) == 1:
            run_alone(members[0][0], members[0][1])
            del groups[key]
    return groups


def whole_number_setting(name: str, default: int, minimum: int, unit: str) -> int:
    """The whole number in environment variable ``name`` (at least ``minimum``), or
    ``default`` where it is unset or empty; ``unit`` names what it counts in the error."""
    value = os.environ.get(name, "")
    if not value:
        return default
    try:
        return max(int(value), minimum)
    except ValueError:
        raise ValueError(f"{name} must be a whole number of {unit}, got {value!r}") from None


def strided_array(buffer: np.ndarray, shape: tuple, strides: tuple, offset: int) -> np.ndarray:
    """A NumPy array of ``shape`` and ``strides`` (in elements) starting ``offset``
    elements into the 1-D ``buffer``, sharing its memory."""
    # A run of the buffer is a slice (0.2 us; the constructor below takes 1.9 us), a
    # row-major matrix a slice reshaped (0.7 us).
    if offset >= 0:
        if strides == (1,):
            stop = offset + shape[0]
            if stop <= len(buffer):
                return buffer if offset == 0 and stop == len(buffer) else buffer[offset:stop]
        elif len(strides) == 2 and strides[1] == 1 and strides[0] == shape[1]:
            stop = offset + shape[0] * shape[1]
            if stop <= len(buffer):
                return buffer[offset:stop].reshape(shape)
    itemsize = buffer.itemsize
    byte_strides = tuple(s * itemsize for s in strides)
    try:  # the ndarray constructor is ~5x faster than as_strided (and checks the bounds)
        return np.ndarray(shape, buffer.dtype, buffer, offset * itemsize, byte_strides)
    except (TypeError, ValueError):
        return np.lib.stride_tricks.as_strided(
            buffer[offset:], shape=shape, strides=byte_strides, writeable=True
        )
