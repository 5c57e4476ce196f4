"""The CPU backend: flat NumPy buffers and Numba kernels.

* elementwise and reduction kernels are generated from scalar functions (see
  ``codegen.py``), compiled with ``numba.njit(parallel=True)`` and cached on disk;
* ``matmul`` calls OpenBLAS (kernelgrad's own copy, with kernels chosen for the CPU; see
  ``blas.py``), which beats any loop Numba generates;
* gather and scatter-add are hand-written kernels (``kernels.py``);
* random numbers come from Philox4x32-10 (``rng.py``), bit for bit as on CUDA.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from ...debug import debug_level, log
from ...device import Device
from ...dtypes import DType, float64, int64
from ...shapes import coalesce, contiguous_strides
from .. import philox
from ..base import (
    ScalarFunction,
    View,
    group_foreach_items,
    operand_kind,
    strided_array,
    whole_number_setting,
)
from . import blas, codegen, rng
from .memory import HostBufferCache

_ACC_SUM = {"float32": float64, "float64": float64}


def get_cpu_capability() -> str:
    """``torch.backends.cpu.get_cpu_capability()``: the widest SIMD the CPU has."""
    from ..torch_settings import cpu_capability

    return cpu_capability()


def _parallel_threshold() -> int:
    """Below this many elements (or work items) a kernel runs on the calling thread:
    waking the sleeping worker threads for a parallel region costs more than the work.
    ``KG_PARALLEL_THRESHOLD`` overrides the default (see docs/nn.md, "Speed")."""
    return whole_number_setting(
        "KG_PARALLEL_THRESHOLD", DEFAULT_PARALLEL_THRESHOLD, minimum=1, unit="elements"
    )


# Measured on 2-core virtual machines: waking the workers took a few microseconds on
# one and 50-90 on another, where a 131,072-element ReLU runs in ~22 us on one thread
# and ~90 us on two; between matrix products (OpenBLAS's workers busy-wait after each
# call) the parallel launch was slower still. A 784-256-10 MLP step: 3.3 -> 1.8 ms.
DEFAULT_PARALLEL_THRESHOLD = 131072
# The CPU backend's kernels, @kg.kernel launches and kg.compile's fused reductions all
# decide with this one value.
PARALLEL_THRESHOLD = _parallel_threshold()
# Accumulators per work item in the column reduction.
COLUMN_BLOCK = 256


# Rounds libgomp's workers spin after a parallel region before they sleep (see below).
DEFAULT_SPINCOUNT = 10000


def _configure_thread_pools() -> None:
    """Make Numba's OpenMP workers spin only briefly after a parallel region ends.

    libgomp's workers otherwise spin for a long time (300,000 rounds) after each region,
    and OpenBLAS's workers busy-wait after each call. Alternating Numba kernels and
    matrix products (every training step does) then leaves one pool's workers waiting
    for a core the other pool's spinning workers hold: on 2 cores, small products became
    100-400x slower and a LeNet-5 step took 3x longer. Not spinning at all
    (``GOMP_SPINCOUNT=0``) makes every parallel region wake sleeping workers, 50-90 us
    each on a 2-core virtual machine, several times per step. A short spin catches the
    next region of a training step without starving the BLAS: on that machine
    (benchmarks/bench_lenet.py, 2 runs each) a LeNet-5 step took 6.55-6.68 ms with 0,
    6.17-6.18 ms with 3,000, 5.6-5.9 ms with 10,000-30,000; a 784-1024-1024-10 MLP step
    (large products on 2 BLAS threads) 8.6-9.2 ms with 0, 9.6 with 3,000, 15 with
    30,000. Those figures predate ``split_gemm.py``: large products now run on Numba's
    pool with OpenBLAS on one thread, so OpenBLAS's own workers no longer compete, and
    the eager step's Python between kernels (tens of microseconds) outlasts 3,000
    rounds: alternating 3,000 / 10,000 / 30,000 (``benchmarks/bench_lenet.py --compile
    [--model mlp]``, two rounds each) gave the MLP 784-256-10 step 1.47-1.61 / 1.23-1.24 /
    1.21-1.22 ms eager and 0.88-0.89 / 0.77-0.78 / 0.78-0.80 ms compiled, LeNet-5
    5.07-5.66 / 4.51-5.19 / 4.83-5.15 ms eager and 2.91-3.18 / 2.96-3.37 / 3.90-5.00 ms
    compiled: 10,000 is the default. ``GOMP_SPINCOUNT`` must be in the environment
    before Numba starts its OpenMP pool, hence here, before the first kernel; a value
    the user set wins."""
    os.environ.setdefault("GOMP_SPINCOUNT", str(DEFAULT_SPINCOUNT))


# Standard math functions that NumPy evaluates with SIMD loops (see ScalarFunction.library).
_NUMPY_UFUNCS = {
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
}
_pools: dict[int, Any] = {}


def _thread_pool(threads: int) -> Any:
    pool = _pools.get(threads)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = _pools[threads] = ThreadPoolExecutor(threads, thread_name_prefix="kernelgrad")
    return pool


def _quiet_ufunc(ufunc: Any, source: np.ndarray, target: np.ndarray) -> None:
    # Same results as the scalar definitions: inf/nan without NumPy's warnings.
    with np.errstate(all="ignore"):
        ufunc(source, out=target)


# Side of the square blocks used when an operand is transposed relative to the output.
TILE = 32


def _blocking(shape: tuple[int, ...], strides: list[tuple[int, ...]]) -> tuple[int, int]:
    """Work-item size for the strided kernel: (column chunk, rows per item).

    Normally an item covers about CHUNK elements: whole rows, or a piece of one long row.
    When some operand steps by 1 along the rows but not along the columns (a transpose),
    square TILE x TILE blocks keep both its reads and the other operands' accesses within
    a few cache lines."""
    cols = shape[-1]
    crossed = len(shape) >= 2 and any(
        abs(st[-2]) == 1 and st[-1] != 1 for st in strides if st[-2] or st[-1]
    )
    if crossed and shape[-2] > 1:
        return TILE, TILE
    if cols >= codegen.CHUNK:
        return codegen.CHUNK, 1
    return max(cols, 1), max(1, codegen.CHUNK // max(cols, 1))


def _interleave(arrays: list[Any], kinds: Any, scalars: list[Any], n_outputs: int) -> list[Any]:
    """Kernel arguments in parameter order: outputs, then each input (array or scalar;
    an input that is an output's own view is not passed again)."""
    args = list(arrays[:n_outputs])
    array_iter = iter(arrays[n_outputs:])
    scalar_iter = iter(scalars)
    for kind in kinds:
        if kind == "array":
            args.append(next(array_iter))
        elif kind == "scalar":
            args.append(next(scalar_iter))
    return args


def _interleave_flat(arrays: list[Any], kinds: Any, scalars: list[Any]) -> list[Any]:
    """The flat kernel's arguments after the element count: the output, then each input
    (an array, a one-element splat, or a scalar) in order."""
    args = [arrays[0]]
    array_iter = iter(arrays[1:])
    scalar_iter = iter(scalars)
    for kind in kinds:
        args.append(next(scalar_iter) if kind == "scalar" else next(array_iter))
    return args


def _numpy_view(view: View) -> np.ndarray:
    """A NumPy array that shares the view's memory."""
    return strided_array(view.buffer, view.shape, view.strides, view.offset)


_CONTIGUOUS_STRIDES: dict[tuple[int, ...], tuple[int, ...]] = {}  # shape -> its strides


class CPUBackend:
    name = "cpu"
    # capabilities (see backends/base.py): buffers are NumPy arrays in host memory; a
    # kernel's ndrange is a parallel loop, without cooperating groups of threads
    host_memory = True
    work_groups = False

    def __init__(self, device: Device) -> None:
        _configure_thread_pools()
        import numba

        self.device = device
        self._numba = numba
        self._threads = numba.get_num_threads()
        self.buffers = HostBufferCache()
        self._elementwise_modules: dict[tuple, Any] = {}
        self._flat_kernels: dict[tuple, tuple[Any, Any]] = {}  # see _flat_one_output
        self._elementwise_plans: dict[tuple, tuple] = {}  # see elementwise
        self._reduce_modules: dict[tuple, Any] = {}
        self._reduce_plans: dict[tuple, Any] = {}  # launchers (or None), see reduce
        self.random_stream = philox.Stream()
        self._dummy: dict[str, np.ndarray] = {}

    # --- memory ---------------------------------------------------------------------
    def empty(self, numel: int, dtype: DType) -> np.ndarray:
        return self.buffers.empty(numel, dtype.numpy)

    def memory_stats(self) -> dict[str, int]:
        """The large-buffer cache: bytes and blocks held for reuse, hits and misses."""
        return self.buffers.stats()

    def empty_cache(self) -> None:
        """Return every cached host buffer to the system allocator."""
        self.buffers.clear()

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True, order="C").reshape(-1)

    def to_numpy(self, view: View) -> np.ndarray:
        return np.array(_numpy_view(view), copy=True)

    def numpy_view(self, view: View) -> np.ndarray:
        """Zero-copy NumPy array over the view (the CPU's ``Tensor.numpy()``)."""
        return _numpy_view(view)

    def synchronize(self) -> None:
        pass

    # --- elementwise ----------------------------------------------------------------
    def elementwise(self, fn: ScalarFunction, outputs, inputs, compute_dtypes) -> None:
        if prod(outputs[0].shape) == 0:
            return
        if fn.library is not None and self._library_call(fn, outputs, inputs, compute_dtypes):
            return
        if len(outputs) == 1 and self._flat_one_output(fn, outputs[0], inputs, compute_dtypes):
            return
        _launch(*self._elementwise_launch(fn, outputs, inputs, compute_dtypes))

    def prepare_elementwise(
        self, fn: ScalarFunction, outputs, inputs, compute_dtypes
    ) -> Callable[[], None] | None:
        """:meth:`elementwise` of these views as a function of no arguments that launches
        the kernel with its arguments bound once (kg.compile's replay of buffers that stay
        the same from call to call); None for a function NumPy runs (``fn.library``)."""
        if prod(outputs[0].shape) == 0:
            return _nothing
        if fn.library is not None:
            return None
        _, kernel, _, *args = self._elementwise_launch(fn, outputs, inputs, compute_dtypes)
        return functools.partial(kernel, *args)

    def _elementwise_launch(self, fn: ScalarFunction, outputs, inputs, compute_dtypes) -> tuple:
        """``(name, kernel, shape, *arguments)`` of the generated kernel for these views
        (the kernel and its layout arguments cached per function, operand kinds, dtypes,
        shape, strides and offsets)."""
        shape = outputs[0].shape
        numel = prod(shape)
        kinds = tuple(
            ["scalar" if type(x) is not View else operand_kind(x, outputs) for x in inputs]
        )
        kinds = _with_splats(kinds, inputs, outputs)
        views = [*outputs, *[x for x, kind in zip(inputs, kinds) if kind == "array"]]
        small = numel < PARALLEL_THRESHOLD
        key = (fn.key, kinds, small, *compute_dtypes, shape, *[o.dtype for o in outputs])
        key += (*[(v.strides, v.offset) for v in views],)
        plan = self._elementwise_plans.get(key)
        if plan is None:
            plan = self._elementwise_plan(fn, kinds, compute_dtypes, outputs, views, small)
            if len(self._elementwise_plans) >= 4096:
                self._elementwise_plans.clear()
            self._elementwise_plans[key] = plan
        kernel, layout = plan
        if layout is None:
            # every view contiguous: plain 1-D slices of the buffers, no index arithmetic
            args: list[Any] = [o.buffer[o.offset : o.offset + numel] for o in outputs]
            for x, kind, dtype in zip(inputs, kinds, compute_dtypes):
                if kind == "array":
                    args.append(x.buffer[x.offset : x.offset + numel])
                elif kind == "scalar":
                    args.append(dtype.numpy.type(x))
                elif kind == "splat":
                    args.append(x.buffer[x.offset : x.offset + 1])
            return (fn.name, kernel, shape, numel, *args)
        scalars = [
            dtype.numpy.type(x) for x, dtype in zip(inputs, compute_dtypes) if type(x) is not View
        ]
        buffers = [v.buffer for v in views]
        return (
            fn.name,
            kernel,
            shape,
            *layout,
            *_interleave(buffers, kinds, scalars, len(outputs)),
        )

    def _elementwise_plan(
        self, fn: ScalarFunction, kinds: tuple, compute_dtypes, outputs, views, small: bool
    ) -> tuple[Any, tuple | None]:
        """What :meth:`elementwise` decides for one operand pattern and layout (cached
        there per function, kinds, dtypes, shape, strides and offsets): the kernel, and
        for strided views the kernel's layout arguments (coalesced loop shape, offsets,
        strides, blocking), or None when every view is contiguous (the flat kernel)."""
        module = self._generated(codegen.elementwise_source, fn, kinds, compute_dtypes, outputs)
        shape = outputs[0].shape
        contiguous = contiguous_strides(shape)
        if all(v.strides == contiguous for v in views):
            return (module.flat_serial if small else module.flat), None
        run_shape, run_strides = coalesce(shape, [v.strides for v in views])
        layout = (
            np.array(run_shape, dtype=np.int64),
            np.array([v.offset for v in views], dtype=np.int64),
            np.array(run_strides, dtype=np.int64).reshape(len(views), len(run_shape)),
            *_blocking(run_shape, run_strides),
        )
        if all(strides[-1] == 1 for strides in run_strides):  # contiguous rows
            return (module.rows_serial if small else module.rows), layout
        return (module.strided_serial if small else module.strided), layout

    def _flat_one_output(self, fn: ScalarFunction, out: View, inputs, compute_dtypes) -> bool:
        """:meth:`elementwise`'s common case, with its decisions cached: one output and
        every array contiguous (an input that is exactly the output, as in ``a.add_(b)``,
        is read from the output). The kernels are looked up under (function, operand
        kinds, dtypes) without building the generated module's key. Returns False when
        the call does not qualify (the general path runs instead)."""
        shape = out.shape
        contiguous = _CONTIGUOUS_STRIDES.get(shape)
        if contiguous is None:
            contiguous = contiguous_strides(shape)
            if len(_CONTIGUOUS_STRIDES) < 4096:
                _CONTIGUOUS_STRIDES[shape] = contiguous
        if out.strides != contiguous:
            return False
        numel = prod(shape)
        buffer, offset = out.buffer, out.offset
        # a buffer that is exactly the view is passed as it is (a slice is a new array)
        whole = offset == 0 and len(buffer) == numel
        args: list[Any] = [buffer if whole else buffer[offset : offset + numel]]
        kinds: list[str] = []
        for x, dtype in zip(inputs, compute_dtypes):
            if type(x) is not View:
                kinds.append("scalar")
                args.append(dtype.numpy.type(x))
            elif x.strides != contiguous:
                return False
            elif x.buffer is buffer and x.offset == offset:
                kinds.append("out0")
            else:
                kinds.append("array")
                source = x.buffer
                if x.offset or len(source) != numel:
                    source = source[x.offset : x.offset + numel]
                args.append(source)
        kernels = self._flat_pair(fn, kinds, compute_dtypes, out.dtype)
        kernel = kernels[0] if numel < PARALLEL_THRESHOLD else kernels[1]
        if debug_level():
            _launch(fn.name, kernel, shape, numel, *args)
        else:
            kernel(numel, *args)
        return True

    def _flat_pair(
        self, fn: ScalarFunction, kinds: Sequence[str], compute_dtypes, out_dtype
    ) -> tuple:
        """(serial, parallel) flat kernels of ``fn`` for one output of ``out_dtype`` and
        these operand kinds, looked up without building the generated module's key."""
        key = (fn.key, *kinds, *compute_dtypes, out_dtype)
        kernels = self._flat_kernels.get(key)
        if kernels is None:
            out = View(None, (0,), (1,), 0, out_dtype)  # codegen reads only the dtype
            module = self._generated(
                codegen.elementwise_source, fn, tuple(kinds), compute_dtypes, [out]
            )
            kernels = self._flat_kernels[key] = (module.flat_serial, module.flat)
        return kernels

    def prepare_flat_elementwise(
        self, fn: ScalarFunction, kinds: tuple[str, ...], compute_dtypes, out_dtype, shape
    ) -> Callable[..., None] | None:
        """:meth:`elementwise` of a new contiguous output of ``shape`` from contiguous
        arrays of that shape and scalars (``kinds``: ``"array"`` or ``"scalar"`` per
        input), as a function ``launch(out_buffer, *operands)`` that takes each array
        input as its buffer and offset (two arguments) and each scalar as a number. The
        front end's eager ops call it with their decisions cached (``ops/elementwise.py``),
        so a repeated ``a + b`` does no layout work at all. None where NumPy runs the
        function (``fn.library``) or there is nothing to compute."""
        numel = prod(shape)
        if fn.library is not None or numel == 0:
            return None
        serial, parallel = self._flat_pair(fn, kinds, compute_dtypes, out_dtype)
        kernel = serial if numel < PARALLEL_THRESHOLD else parallel
        name = fn.name

        def part(buffer: Any, offset: int) -> Any:
            if offset == 0 and len(buffer) == numel:
                return buffer  # a slice would be a new array object
            return buffer[offset : offset + numel]

        if kinds == ("array", "array"):

            def launch(out: Any, a: Any, a_offset: int, b: Any, b_offset: int) -> None:
                if a_offset or len(a) != numel:
                    a = a[a_offset : a_offset + numel]
                if b_offset or len(b) != numel:
                    b = b[b_offset : b_offset + numel]
                if debug_level():
                    _launch(name, kernel, shape, numel, out, a, b)
                else:
                    kernel(numel, out, a, b)

            return launch
        if kinds == ("array",):

            def launch(out: Any, a: Any, a_offset: int) -> None:
                if a_offset or len(a) != numel:
                    a = a[a_offset : a_offset + numel]
                if debug_level():
                    _launch(name, kernel, shape, numel, out, a)
                else:
                    kernel(numel, out, a)

            return launch
        converters = [dtype.numpy.type for dtype in compute_dtypes]

        def launch(out: Any, *operands: Any) -> None:
            args = [numel, out]
            position = 0
            for kind, convert in zip(kinds, converters):
                if kind == "array":
                    args.append(part(operands[position], operands[position + 1]))
                    position += 2
                else:
                    args.append(convert(operands[position]))
                    position += 1
            if debug_level():
                _launch(name, kernel, shape, *args)
            else:
                kernel(*args)

        return launch

    def prepare_strided_elementwise(
        self, fn: ScalarFunction, kinds: tuple[str, ...], compute_dtypes, out_dtype, shape,
        input_strides: Sequence[tuple[int, ...] | None],
    ) -> Callable[..., None] | None:  # fmt: skip
        """:meth:`prepare_flat_elementwise` for array inputs of any strides (in elements,
        per input; None for a scalar), broadcast ones (stride 0) among them: the kernel
        and its layout arguments are chosen once, and ``launch(out_buffer, *operands)``
        only slots in the buffers (and the offsets, when they are not 0, as they are for
        tensors of their own)."""
        numel = prod(shape)
        if fn.library is not None or numel == 0:
            return None
        out = View(None, shape, contiguous_strides(shape), 0, out_dtype)
        stand_ins = [  # views of no buffer at offset 0 for the arrays; 0 for the scalars
            0 if strides is None else View(None, shape, strides, 0, dtype)
            for strides, dtype in zip(input_strides, compute_dtypes)
        ]
        kinds = _with_splats(tuple(kinds), stand_ins, [out])
        views = [out, *[x for x, kind in zip(stand_ins, kinds) if kind == "array"]]
        small = numel < PARALLEL_THRESHOLD
        kernel, layout = self._elementwise_plan(fn, kinds, compute_dtypes, [out], views, small)
        converters = [dtype.numpy.type for dtype in compute_dtypes]
        name = fn.name
        zeros = (0,) * len(views)
        if layout is not None and kinds == ("array", "array"):  # a * row, a + b.T: no loop

            def launch_pair(out: Any, a: Any, a_offset: int, b: Any, b_offset: int) -> None:
                run = layout
                if a_offset or b_offset:
                    offsets = np.array((0, a_offset, b_offset), dtype=np.int64)
                    run = (layout[0], offsets, *layout[2:])
                if debug_level():
                    _launch(name, kernel, shape, *run, out, a, b)
                else:
                    kernel(*run, out, a, b)

            return launch_pair

        def launch(out_buffer: Any, *operands: Any) -> None:
            arrays, offsets, scalars = [out_buffer], [0], []
            position = 0
            for kind, convert in zip(kinds, converters):
                if kind == "scalar":
                    scalars.append(convert(operands[position]))
                    position += 1
                    continue
                buffer, offset = operands[position], operands[position + 1]
                position += 2
                if kind == "splat":
                    arrays.append(buffer[offset : offset + 1])
                elif layout is None:  # contiguous
                    arrays.append(buffer[offset : offset + numel])
                else:
                    arrays.append(buffer)
                    offsets.append(offset)
            if layout is None:
                args = [numel, *_interleave_flat(arrays, kinds, scalars)]
            else:
                run = layout
                if tuple(offsets) != zeros:
                    run = (layout[0], np.array(offsets, dtype=np.int64), *layout[2:])
                args = [*run, *_interleave(arrays, kinds, scalars, 1)]
            if debug_level():
                _launch(name, kernel, shape, *args)
            else:
                kernel(*args)

        return launch

    def prefetch_elementwise(
        self, fn: ScalarFunction, kinds: tuple[str, ...], compute_dtypes, out_dtypes,
        array_dtypes, layouts: Sequence[str],
    ) -> None:  # fmt: skip
        """Compile ``fn``'s kernel ahead in a compile worker (``compile_ahead.prefetch``)
        for one operand pattern (``kinds``: ``"array"`` or ``"scalar"`` per input;
        ``array_dtypes``: the input arrays' dtypes) and each of ``layouts``:
        ``"contiguous"``, ``"rows"`` (strided, each row contiguous) or ``"strided"``.
        The serial forms are the ones compiled: a first launch runs the serial form
        until the worker has the parallel one. Returns at once."""
        from .compile_ahead import prefetch as compile_ahead

        stand_ins = [View(None, (0,), (1,), 0, dtype) for dtype in out_dtypes]
        module = self._generated(
            codegen.elementwise_source, fn, tuple(kinds), compute_dtypes, stand_ins
        )
        arrays = [np.empty(1, dtype=d.numpy) for d in (*out_dtypes, *array_dtypes)]
        scalars = [d.numpy.type(0) for kind, d in zip(kinds, compute_dtypes) if kind == "scalar"]
        count = len(arrays)
        for layout in layouts:
            form = {"contiguous": "flat", "rows": "rows", "strided": "strided"}[layout]
            if form == "flat":
                args = (1, *_interleave(arrays, kinds, scalars, len(out_dtypes)))
            else:
                shape, offsets = np.ones(2, dtype=np.int64), np.zeros(count, dtype=np.int64)
                strides = np.ones((count, 2), dtype=np.int64)
                args = (shape, offsets, strides, 1, 1)
                args += (*_interleave(arrays, kinds, scalars, len(out_dtypes)),)
            compile_ahead(module, f"{form}_serial", args)

    def prefetch_elementwise_foreach(
        self, fn: ScalarFunction, kinds: tuple[str, ...], compute_dtypes, out_dtypes,
        array_dtypes, sizes: Sequence[int],
    ) -> None:  # fmt: skip
        """Compile ahead, in a compile worker, what :meth:`elementwise_foreach` will run
        for items of these sizes (element counts), every array contiguous, with these
        operand ``kinds`` (``"array"``, ``"scalar"`` or ``"out<k>"`` per input; scalars
        the same for every item) and dtypes: the serial kernel of the small items
        together, and the flat kernel of the items that run alone. Returns at once."""
        from .compile_ahead import prefetch as compile_ahead

        small = [n for n in sizes if 0 < n < PARALLEL_THRESHOLD]
        if len(small) == 1 or any(n >= PARALLEL_THRESHOLD for n in sizes):
            self.prefetch_elementwise(
                fn, kinds, compute_dtypes, out_dtypes, array_dtypes, ("contiguous",)
            )
        if len(small) < 2:
            return
        members = []
        for n in small:  # stand-in views over one-element buffers: only the types count
            outputs = [View(np.empty(1, dtype=d.numpy), (n,), (1,), 0, d) for d in out_dtypes]
            arrays = iter(array_dtypes)
            inputs: list[Any] = []
            for kind in kinds:
                if kind.startswith("out"):
                    inputs.append(outputs[int(kind[3:])])
                elif kind == "array":
                    d = next(arrays)
                    inputs.append(View(np.empty(1, dtype=d.numpy), (n,), (1,), 0, d))
                else:
                    inputs.append(0.0)
            members.append((outputs, inputs, n))
        _, kernel, _, *args = self._foreach_launch(fn, kinds, members, compute_dtypes)
        module = sys.modules.get(kernel.py_func.__module__)
        if module is not None:
            compile_ahead(module, "foreach", tuple(args))

    def elementwise_foreach(self, fn: ScalarFunction, items, compute_dtypes) -> None:
        """:meth:`elementwise` for each ``(outputs, inputs)`` of ``items`` (each item with
        its own shape). Items below the parallel threshold whose views are all contiguous
        and whose operands have the same kinds and dtypes run together in one serial
        kernel (see ``codegen.foreach_source``); the others run one by one. An optimizer's
        update of every parameter of a small network is then one launch, not one per
        parameter (an Adam step of LeNet-5's ten parameters: 290 -> 245 us, most of the
        rest being the optimizer's Python per parameter)."""

        def run_alone(outputs: Any, inputs: Any) -> None:
            self.elementwise(fn, outputs, inputs, compute_dtypes)

        def alone(numel: int) -> bool:
            return numel >= PARALLEL_THRESHOLD or fn.library is not None

        groups = group_foreach_items(items, alone, run_alone, splat=True)
        for (kinds, _), members in groups.items():
            _launch(*self._foreach_launch(fn, kinds, members, compute_dtypes))

    def prepare_elementwise_foreach(
        self, fn: ScalarFunction, items, compute_dtypes
    ) -> Callable[[], None] | None:
        """:meth:`elementwise_foreach` of these items as a function of no arguments (see
        :meth:`prepare_elementwise`)."""
        if fn.library is not None:
            return None
        launches: list[Callable[[], None]] = []

        def run_alone(outputs: Any, inputs: Any) -> None:
            launch = self.prepare_elementwise(fn, outputs, inputs, compute_dtypes)
            assert launch is not None  # not a library function
            launches.append(launch)

        def alone(numel: int) -> bool:
            return numel >= PARALLEL_THRESHOLD

        groups = group_foreach_items(items, alone, run_alone, splat=True)
        for (kinds, _), members in groups.items():
            _, kernel, _, *args = self._foreach_launch(fn, kinds, members, compute_dtypes)
            launches.append(functools.partial(kernel, *args))
        return launches[0] if len(launches) == 1 else functools.partial(_each, tuple(launches))

    def prepare_elementwise_foreach_fed(
        self,
        fn: ScalarFunction,
        items,
        compute_dtypes,
        fed_array: int,
        fed_scalars: Sequence[int],
    ) -> Callable[[Sequence[View], Sequence[Any]], None] | None:
        """:meth:`elementwise_foreach` of these items with some operands given anew on
        each call: a function ``launch(arrays, scalars)`` where ``arrays[i]`` is the view
        of item ``i``'s input ``fed_array`` (contiguous, of the item's shape and of the
        dtype that input has in ``items``) and ``scalars[j]`` the number for input
        ``fed_scalars[j]`` of every item. The grouping, the kernels and the other
        operands' buffers are resolved once, here: an optimizer's update, whose
        gradients and step sizes change from step to step while its parameters and
        state stay, launches the same kernels as :meth:`elementwise_foreach` without
        redoing its decisions (an Adam step of a 4-parameter MLP: ~70 -> ~10 us of host
        time). None where the items do not allow it: ``fn`` a library function, a view
        that is not contiguous, the fed input not a separate array, a fed scalar not a
        number."""
        if fn.library is not None:
            return None
        fed = frozenset(fed_scalars)
        index: dict[int, int] = {}  # id(an item's outputs) -> the item's position
        pattern = []
        for position, (outputs, inputs) in enumerate(items):
            contiguous = contiguous_strides(outputs[0].shape)
            views = [*outputs, *(x for x in inputs if type(x) is View)]
            if any(v.strides != contiguous for v in views):
                return None
            if operand_kind(inputs[fed_array], outputs) != "array":
                return None
            if any(type(inputs[i]) is View for i in fed):
                return None
            # one value for every item, as on each call: a kernel argument of kind "scalar"
            inputs = [items[0][1][i] if i in fed else x for i, x in enumerate(inputs)]
            index[id(outputs)] = position
            pattern.append((outputs, inputs))
        units: list[_FedUnit] = []

        def run_alone(outputs: Any, inputs: Any) -> None:
            name, kernel, shape, *args = self._elementwise_launch(
                fn, outputs, inputs, compute_dtypes
            )
            kinds = ["scalar" if type(x) is not View else operand_kind(x, outputs) for x in inputs]
            kinds = list(_with_splats(tuple(kinds), inputs, outputs))
            first = 1 + len(outputs)  # after the element count and the outputs
            units.append(_FedUnit(name, kernel, shape, args, kinds, first, fed_array, fed,
                                  [(index[id(outputs)], prod(shape))], False))  # fmt: skip

        def alone(numel: int) -> bool:
            return numel >= PARALLEL_THRESHOLD

        groups = group_foreach_items(pattern, alone, run_alone, splat=True)
        for (kinds, _), members in groups.items():
            name, kernel, shape, *args = self._foreach_launch(fn, kinds, members, compute_dtypes)
            where = [(index[id(outputs)], numel) for outputs, _, numel in members]
            units.append(_FedUnit(name, kernel, shape, args, list(kinds), fn.nout, fed_array,
                                  fed, where, True))  # fmt: skip
        types = [compute_dtypes[i].numpy.type for i in fed_scalars]
        positions = {i: j for j, i in enumerate(fed_scalars)}
        for unit in units:
            unit.scalars = [(at, positions[i]) for at, i in unit.scalars]

        def launch(arrays: Sequence[View], scalars: Sequence[Any]) -> None:
            typed = [make(value) for make, value in zip(types, scalars)]
            logged = debug_level()
            for unit in units:
                args = unit.args.copy()
                if unit.grouped:
                    args[unit.array] = tuple(
                        [
                            arrays[k].buffer[arrays[k].offset : arrays[k].offset + numel]
                            for k, numel in unit.items
                        ]
                    )
                else:
                    k, numel = unit.items[0]
                    args[unit.array] = arrays[k].buffer[arrays[k].offset : arrays[k].offset + numel]
                for at, j in unit.scalars:
                    args[at] = typed[j]
                if logged:
                    _launch(unit.name, unit.kernel, unit.shape, *args)
                else:
                    unit.kernel(*args)

        return launch

    def _foreach_launch(self, fn: ScalarFunction, kinds: tuple, members: list, compute_dtypes):
        args: list[Any] = [
            tuple(outputs[k].buffer[outputs[k].offset : outputs[k].offset + numel]
                  for outputs, _, numel in members)
            for k in range(fn.nout)
        ]  # fmt: skip
        final_kinds = list(kinds)
        for i, (kind, dtype) in enumerate(zip(kinds, compute_dtypes)):
            if kind == "array":
                args.append(
                    tuple(inputs[i].buffer[inputs[i].offset : inputs[i].offset + numel]
                          for _, inputs, numel in members)
                )  # fmt: skip
            elif kind == "splat":
                args.append(
                    tuple(inputs[i].buffer[inputs[i].offset : inputs[i].offset + 1]
                          for _, inputs, _ in members)
                )  # fmt: skip
            elif kind == "scalar":
                values = [inputs[i] for _, inputs, _ in members]
                if all(v == values[0] for v in values):
                    args.append(dtype.numpy.type(values[0]))
                else:
                    final_kinds[i] = "scalars"
                    args.append(np.array(values, dtype=dtype.numpy))
        module = self._generated(
            codegen.foreach_source, fn, tuple(final_kinds), compute_dtypes, members[0][0]
        )
        return (f"{fn.name}[{len(members)} tensors]", module.foreach, (len(members),), *args)

    def _generated(self, make_source: Any, fn: ScalarFunction, kinds, compute_dtypes, outputs):
        """The module ``make_source`` (``codegen.elementwise_source`` or ``foreach_source``)
        generates for ``fn`` and this operand pattern, generated and loaded once."""
        out_dtypes = [o.dtype for o in outputs]
        key = (make_source.__name__, fn.key, kinds, *compute_dtypes, None, *out_dtypes)
        module = self._elementwise_modules.get(key)
        if module is None:
            source = make_source(fn.name, fn.source, fn.nout, kinds, compute_dtypes, out_dtypes)
            prefix = "cpu_" if make_source is codegen.elementwise_source else "cpu_foreach_"
            module = _load_module(source, prefix + fn.name)
            self._elementwise_modules[key] = module
        return module

    def _library_call(self, fn: ScalarFunction, outputs, inputs, compute_dtypes) -> bool:
        """Run a standard math function (exp, log, tanh, ...) with NumPy's SIMD loops on
        contiguous floating-point arrays, split across the cores. Returns False when the
        call does not qualify (the generated kernel runs instead)."""
        ufunc = _NUMPY_UFUNCS.get(fn.library)
        if ufunc is None or len(inputs) != 1 or len(outputs) != 1:
            return False
        x, out = inputs[0], outputs[0]
        if (
            type(x) is not View
            or not x.dtype.is_floating_point
            or not (x.dtype is out.dtype is compute_dtypes[0])
        ):
            return False
        contiguous = contiguous_strides(out.shape)
        if x.strides != contiguous or out.strides != contiguous or x.shape != out.shape:
            return False
        n = prod(out.shape)
        source = x.buffer[x.offset : x.offset + n]
        target = out.buffer[out.offset : out.offset + n]
        start = time.perf_counter() if debug_level() >= 2 else 0.0
        threads = self._numba.get_num_threads()
        if n < PARALLEL_THRESHOLD or threads == 1:
            _quiet_ufunc(ufunc, source, target)
        else:
            bounds = [n * k // threads for k in range(threads + 1)]
            pieces = [
                (ufunc, source[bounds[k] : bounds[k + 1]], target[bounds[k] : bounds[k + 1]])
                for k in range(threads)
            ]
            list(_thread_pool(threads).map(lambda piece: _quiet_ufunc(*piece), pieces))
        if debug_level() >= 2:
            _log_launch(f"{fn.name}(numpy)", out.shape, start)
        return True

    # --- reductions -----------------------------------------------------------------
    def reduce(self, kind: str, out: View, x: View, axes: tuple[int, ...]) -> None:
        key = (kind, x.shape, x.strides, axes, x.dtype, out.shape, out.dtype)
        if key in self._reduce_plans:
            launch = self._reduce_plans[key]
        else:
            launch = self._reduce_launcher(kind, out, x, axes)
            if len(self._reduce_plans) >= 4096:
                self._reduce_plans.clear()
            self._reduce_plans[key] = launch
        if launch is not None:
            target = out.buffer[out.offset : out.offset + prod(out.shape)]
            launch(x.buffer, x.offset, target)

    def prepare_reduce(
        self,
        kind: str,
        x_shape: tuple[int, ...],
        x_strides: tuple[int, ...],
        x_dtype: DType,
        axes: tuple[int, ...],
        out_dtype: DType,
    ) -> Callable[[Any, int, Any], None] | None:
        """:meth:`reduce` of an input of this layout over ``axes`` into a new contiguous
        output, as ``launch(x_buffer, x_offset, out_buffer)`` with its decisions made
        once (the eager reductions' cached path, ``ops/reduce.py``); None where there is
        nothing to launch."""
        out_shape = tuple(s for d, s in enumerate(x_shape) if d not in axes)
        out = View(None, out_shape, contiguous_strides(out_shape), 0, out_dtype)
        return self._reduce_launcher(kind, out, View(None, x_shape, x_strides, 0, x_dtype), axes)

    def _reduce_launcher(
        self, kind: str, out: View, x: View, axes: tuple[int, ...]
    ) -> Callable[[Any, int, Any], None] | None:
        """The reduction of :meth:`_reduce_plan` as ``launch(x_buffer, x_offset,
        out_buffer)`` (the contiguous output's elements), or None where there is nothing
        to launch: :meth:`reduce` caches it per layout, :meth:`prepare_reduce` hands it
        out."""
        n_out, name, kernel, shapes, columns, nsplit, acc = self._reduce_plan(kind, out, x, axes)
        if n_out == 0:
            return None
        x_shape = x.shape
        if columns:  # the column kernel, in blocks of this many columns

            def launch(buffer: Any, offset: int, target: Any) -> None:
                _launch(name, kernel, x_shape, *shapes, buffer, offset, target, columns)

            return launch
        if nsplit > 1:  # a long reduction split in parts: partial results per call

            def launch(buffer: Any, offset: int, target: Any) -> None:
                partial_value = np.empty(n_out * nsplit, dtype=acc.numpy)
                partial_index = np.empty(n_out * nsplit, dtype=np.int64)
                _launch(
                    name, kernel, x_shape, *shapes, buffer, offset, target,
                    partial_value, partial_index, nsplit,
                )  # fmt: skip

            return launch
        dummies = (self._dummy_array(acc), self._dummy_array(int64), 1)

        def launch(buffer: Any, offset: int, target: Any) -> None:
            _launch(name, kernel, x_shape, *shapes, buffer, offset, target, *dummies)

        return launch

    def _reduce_plan(self, kind: str, out: View, x: View, axes: tuple[int, ...]) -> tuple:
        """What :meth:`reduce` decides for one (kind, input layout, axes, output): the
        number of outputs, the kernel and its name, the coalesced shapes and strides (as
        the kernel's arrays), the column kernel's block of columns (0 where it does not
        run), the split of long reductions, and the accumulator dtype. Cached per layout
        by :meth:`reduce`."""
        n_out = prod(out.shape)
        acc = _ACC_SUM.get(x.dtype.name, int64) if kind == "sum" else x.dtype
        if n_out == 0:
            return n_out, "", None, (), 0, 1, acc
        kept = [d for d in range(len(x.shape)) if d not in axes]
        kept_shape = tuple(x.shape[d] for d in kept)
        kshape, (kstrides, _) = coalesce(
            kept_shape,
            [tuple(x.strides[d] for d in kept), contiguous_strides(kept_shape)],
        )
        red_shape = tuple(x.shape[d] for d in axes)
        rshape, (rstrides,) = coalesce(red_shape, [tuple(x.strides[d] for d in axes)])
        n_red = prod(red_shape)

        key = (kind, x.dtype.name, acc.name, out.dtype.name)
        module = self._reduce_modules.get(key)
        if module is None:
            source = codegen.reduce_source(kind, x.dtype, acc, out.dtype)
            module = _load_module(source, f"cpu_reduce_{kind}")
            self._reduce_modules[key] = module

        shapes = (
            np.array(kshape, dtype=np.int64),
            np.array(kstrides, dtype=np.int64),
            np.array(rshape, dtype=np.int64),
            np.array(rstrides, dtype=np.int64),
        )
        small = n_out * n_red < PARALLEL_THRESHOLD
        # Reducing over outer dims while the kept elements are contiguous: accumulate
        # whole blocks of columns at once (vectorised), one pass over the input, in
        # blocks of at least COLUMN_BLOCK columns and as wide as one thread's share of
        # the row, so that each work item streams long runs of memory (4096x4096 over
        # dim 0: 8.9 ms in blocks of 256, 6.6 ms in blocks of 2048 on 2 threads). Small
        # problems run its serial form, ~5x faster than the general serial kernel for a
        # 128x256 bias gradient (bench_core.py: 32.9 -> 6.3 us). (Compiled on the
        # calling thread at its first use, not by a compile worker while the general
        # kernel runs: the two forms can differ in the last bit, and results must not
        # depend on when a worker finished.)
        if kstrides[-1] == 1 and kshape[-1] >= 8 and min(abs(s) for s in rstrides) > 1:
            name = f"reduce_{kind}(columns)"
            if small:
                return n_out, name, module.columns_serial, shapes, COLUMN_BLOCK, 1, acc
            threads = self._numba.get_num_threads()
            block = max(COLUMN_BLOCK, -(-kshape[-1] // threads))
            return n_out, name, module.columns, shapes, block, 1, acc

        threads = self._numba.get_num_threads()
        nsplit = 1
        if not small and n_out < 4 * threads and n_red >= 2 * codegen.CHUNK:
            nsplit = min(-(-4 * threads // n_out), -(-n_red // codegen.CHUNK))
        kernel = module.kernel_serial if small else module.kernel
        return n_out, f"reduce_{kind}", kernel, shapes, 0, nsplit, acc

    def _dummy_array(self, dtype: DType) -> np.ndarray:
        array = self._dummy.get(dtype.name)
        if array is None:
            array = self._dummy[dtype.name] = np.zeros(1, dtype=dtype.numpy)
        return array

    # --- matmul ---------------------------------------------------------------------
    def matmul(self, out: View, a: View, b: View) -> None:
        """OpenBLAS (small products on one BLAS thread, see ``blas.py``). Operands
        whose strides BLAS cannot use are copied first: NumPy would otherwise fall back
        to a naive loop, 5-10x slower."""
        self._matmul(out, a, b, None)

    def matmul_bias(self, out: View, a: View, b: View, bias: View) -> None:
        """``out = a @ b`` for 2-D views, then ``bias`` (a 1-D view of ``out``'s columns)
        added to every row, each thread adding it to the block it multiplied while that
        block is in cache: the bits of :meth:`matmul` followed by the elementwise
        addition, without a second pass over ``out`` (``nn.functional.linear``)."""
        self._matmul(out, a, b, bias)

    def _matmul(self, out: View, a: View, b: View, bias: View | None) -> None:
        start = time.perf_counter() if debug_level() >= 2 else 0.0
        left, right, result = _numpy_view(a), _numpy_view(b), _numpy_view(out)
        multiply_adds = prod(out.shape) * (a.shape[-1] if len(a.shape) else 1)
        added = None if bias is None else _numpy_view(bias)
        # (a 2-D product's compiled call checks the layouts itself; copies only where
        # it cannot read one)
        if not blas.matrix_product(left, right, result, multiply_adds, added):
            left, right = self._blas_ready(left), self._blas_ready(right)
            blas.matmul(left, right, result, multiply_adds, added)
        if debug_level() >= 2:
            _log_launch("matmul(BLAS)" if bias is None else "matmul+bias(BLAS)", out.shape, start)

    def prepare_matmul(
        self, out: View, a: View, b: View, bias: View | None = None
    ) -> Callable[[], None] | None:
        """:meth:`matmul` (:meth:`matmul_bias` with a ``bias``) of these views as a
        function of no arguments (see :meth:`prepare_elementwise`); None where an operand
        needs a copy first."""
        left, right = _numpy_view(a), _numpy_view(b)
        if self._blas_ready(left) is not left or self._blas_ready(right) is not right:
            return None
        multiply_adds = prod(out.shape) * (a.shape[-1] if len(a.shape) else 1)
        added = None if bias is None else _numpy_view(bias)
        return blas.prepare(left, right, _numpy_view(out), multiply_adds, added)

    def _blas_ready(self, array: np.ndarray) -> np.ndarray:
        """The array itself if BLAS can read its matrices (unit stride along rows or
        columns), else a contiguous copy."""
        if array.ndim < 2:
            return array
        rows, cols = array.shape[-2:]
        if rows <= 1 or cols <= 1 or blas.matrix_layout(array) is not None:
            return array
        copy = self.buffers.empty(array.size, array.dtype).reshape(array.shape)
        copy[...] = array
        return copy

    # --- gather / scatter -------------------------------------------------------------
    def _split_at(self, shape: tuple[int, ...], dim: int) -> tuple[int, int, int]:
        return prod(shape[:dim]), shape[dim], prod(shape[dim + 1 :])

    def take(self, out: View, x: View, dim: int, index: View) -> Any:
        from .kernels import take_kernel, take_kernel_serial

        x_array = np.ascontiguousarray(_numpy_view(x)).reshape(-1)
        index_array = np.ascontiguousarray(_numpy_view(index), dtype=np.int64).reshape(-1)
        pre, size, post = self._split_at(x.shape, dim)
        error = np.zeros(2, dtype=np.int64)
        target = out.buffer[out.offset : out.offset + prod(out.shape)]
        kernel = take_kernel if target.size >= PARALLEL_THRESHOLD else take_kernel_serial
        _launch("take", kernel, out.shape, x_array, pre, size, post, index_array, target, error)
        return int(error[0]) if error[1] else None

    def index_add(self, out: View, dim: int, index: View, source: View) -> Any:
        from .kernels import index_add_kernel, index_add_kernel_serial

        index_array = np.ascontiguousarray(_numpy_view(index), dtype=np.int64).reshape(-1)
        source_array = np.ascontiguousarray(_numpy_view(source)).reshape(-1)
        pre, size, post = self._split_at(out.shape, dim)
        error = np.zeros(2, dtype=np.int64)
        target = out.buffer[out.offset : out.offset + prod(out.shape)]
        parallel = source_array.size >= PARALLEL_THRESHOLD
        _launch(
            "index_add",
            index_add_kernel if parallel else index_add_kernel_serial,
            out.shape,
            target,
            pre,
            size,
            post,
            index_array,
            source_array,
            error,
        )
        return int(error[0]) if error[1] else None

    # --- random -----------------------------------------------------------------------
    def manual_seed(self, seed: int) -> None:
        self.random_stream.manual_seed(seed)

    def get_rng_state(self) -> Any:
        return self.random_stream.get_state()

    def set_rng_state(self, state: Any) -> None:
        self.random_stream.set_state(state)

    def random(self, out: View, distribution: str, low: float, high: float) -> None:
        """Philox4x32-10 (``backends/philox.py``): the same numbers as the CUDA backend."""
        n = prod(out.shape)
        target = out.buffer[out.offset : out.offset + n]
        start = time.perf_counter() if debug_level() >= 2 else 0.0
        rng.fill(target, distribution, low, high, self.random_stream, n >= PARALLEL_THRESHOLD)
        if debug_level() >= 2:
            _log_launch(f"random_{distribution}", out.shape, start)

    # --- user kernels (@kg.kernel; kernel_module.py) ------------------------------------
    def kernel_array(self, view: View) -> np.ndarray:
        return _numpy_view(view)

    def launch_kernel(self, program: Any, launch: Any) -> None:
        from . import kernel_module

        kernel_module.launch(program, launch)

    def prepare_kernel(self, program: Any, launch: Any) -> Callable[[list[Any]], None]:
        """:meth:`launch_kernel` as a function of the argument values (see
        ``kernel_module.prepare``), for ``kg.compile``'s replay."""
        from . import kernel_module

        return kernel_module.prepare(program, launch)

    def join_launches(self, launches, table, bases, varying):
        """Runs of kg.compile's prepared launches joined into one native call each, so
        no Python runs between their kernels (``native_replay.join``); None while a
        kernel's compiled form is still on its way from a compile worker."""
        from . import native_replay

        return native_replay.join(launches, table, bases, varying)

    def prefetch_kernel(self, program: Any, launch: Any) -> None:
        """Compile the form :meth:`launch_kernel` would run for this launch ahead, in a
        compile worker (``kernel_module.prefetch``); returns at once."""
        from . import kernel_module

        kernel_module.prefetch(program, launch)

    # --- kg.compile's fused reductions (fused_reduce.py) --------------------------------
    def fused_reduce(self, reduction: Any) -> Any:
        """A kernel for ``reduction`` (a ``backends.fused_reduce.FusedReduction``): a
        generated Numba module, its ``prange`` form or its serial twin by size."""
        from . import fused_reduce

        return fused_reduce.FusedReduceKernel(reduction, PARALLEL_THRESHOLD)


def _load_module(source: str, prefix: str) -> Any:
    from ...codecache import load_module
    from .compile_ahead import install_twins

    return install_twins(load_module(source, prefix))


class _FedUnit:
    """One launch of ``prepare_elementwise_foreach_fed``: the kernel, its arguments with
    the fed ones to fill in (``array``: the position of the fed array, or of the tuple
    of them for a grouped kernel; ``scalars``: (position, input) pairs), and the items it
    covers as (item position, element count)."""

    __slots__ = ("args", "array", "grouped", "items", "kernel", "name", "scalars", "shape")

    def __init__(self, name: str, kernel: Any, shape: tuple[int, ...], args: list[Any],
                 kinds: list[str], first: int, fed_array: int, fed: frozenset[int],
                 items: list[tuple[int, int]], grouped: bool) -> None:  # fmt: skip
        self.name, self.kernel, self.shape, self.args = name, kernel, shape, list(args)
        self.items, self.grouped = items, grouped
        self.array = -1
        self.scalars: list[tuple[int, int]] = []
        at = first
        for i, kind in enumerate(kinds):
            if kind.startswith("out"):  # read from an output: no argument of its own
                continue
            if i == fed_array:
                self.array = at
            elif i in fed:
                self.scalars.append((at, i))
            at += 1


def _nothing() -> None:
    pass


def _each(launches: tuple[Callable[[], None], ...]) -> None:
    for launch in launches:
        launch()


def _with_splats(kinds: tuple[str, ...], inputs: Any, outputs: Any) -> tuple[str, ...]:
    """``kinds`` with each input of one element broadcast over the whole shape (all
    strides zero: a 0-d tensor such as a traced optimizer's step size) marked
    ``"splat"`` when every other view is contiguous, so that the flat kernel runs (it
    reads the element once per item) instead of the strided one."""
    splats = [kind == "array" and not any(x.strides) for kind, x in zip(kinds, inputs)]
    if not any(splats):
        return kinds
    contiguous = contiguous_strides(outputs[0].shape)
    others = [*outputs, *(x for x, k, s in zip(inputs, kinds, splats) if k == "array" and not s)]
    if any(v.strides != contiguous for v in others):
        return kinds
    return tuple("splat" if splat else kind for kind, splat in zip(kinds, splats))


def _launch(name: str, kernel: Any, shape: tuple[int, ...], *args: Any) -> None:
    if debug_level() < 1:
        kernel(*args)
        return
    signatures_before = len(kernel.signatures)
    misses_before = sum(kernel.stats.cache_misses.values())
    start = time.perf_counter()
    kernel(*args)
    if len(kernel.signatures) != signatures_before:
        elapsed = time.perf_counter() - start
        compiled = sum(kernel.stats.cache_misses.values()) != misses_before
        action = "compiled" if compiled else "loaded from the disk cache"
        log(f"{action} {name} (signature {len(kernel.signatures)}) in {elapsed:.2f} s")
    elif debug_level() >= 2:
        _log_launch(name, shape, start)


def _log_launch(name: str, shape: tuple[int, ...], start: float) -> None:
    elapsed = (time.perf_counter() - start) * 1e6
    log(f"cpu {name:<24} shape={shape!s:<20} {elapsed:9.1f} us")


def create_backend(device: Device) -> CPUBackend:
    return CPUBackend(device)
