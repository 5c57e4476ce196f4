"""The CUDA backend object: the Backend protocol (``backends/base.py``) over numba-cuda.

A buffer is a 1-D numba device array of the tensor's dtype, handed out by the caching
pool (``memory.py``); views are (shape, strides, offset) over it, as on the CPU. Kernels
come from ``codegen.py`` (elementwise, reductions, matmul) and ``kernels.py`` (gather,
scatter-add, random numbers); launches go through ``launch.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from ...device import Device
from ...dtypes import DType, float64, int32, int64
from ...errors import KernelError, format_shape
from ...shapes import coalesce, contiguous_strides, is_contiguous
from .. import philox
from ..base import ScalarFunction, View, group_foreach_items
from . import codegen, foreach, graphs, rng, runtime
from .flags import DeferredErrors
from .graphs import refuse_while_capturing
from .launch import Launcher, LaunchPolicy
from .memory import CachingPool, OutOfMemoryError, format_bytes
from .vendor import (
    CupyGemm,
    cublas_error,
    cupy_package,
    fix_command,
    load_cupy,
    requested_matmul,
    warn_once,
)

_new_tuple = tuple.__new__
_IDENTITY = ScalarFunction("identity", "def identity(x):\n    return x\n", 1)


class _Operands:
    """Operand description for error messages and KG_DEBUG logs, formatted lazily.

    Keeps only metadata (a view without its buffer): launch records must never keep a
    buffer, and its pool block, alive."""

    __slots__ = ("items", "raw")

    def __init__(self, *items: tuple[str, Any]) -> None:
        self.items = [(name, item[1:] if isinstance(item, View) else item) for name, item in items]
        self.raw: Any = None

    @classmethod
    def of(cls, outputs: Sequence[Any], inputs: Sequence[Any]) -> _Operands:
        """The operands of an elementwise launch; named only when formatted (this runs on
        every launch)."""
        described = cls.__new__(cls)
        described.items = None
        described.raw = (
            [o[1:] for o in outputs],
            [x[1:] if type(x) is View else x for x in inputs],
        )
        return described

    def __str__(self) -> str:
        items = self.items
        if items is None:
            outputs, inputs = self.raw
            items = [(f"out{k}", o) for k, o in enumerate(outputs)]
            items += [(f"in{i}", x) for i, x in enumerate(inputs)]
        parts = []
        for name, item in items:
            if isinstance(item, tuple) and len(item) == 4 and isinstance(item[3], DType):
                shape, strides, offset, dtype = item
                parts.append(
                    f"{name} {dtype.name}{format_shape(shape)} strides {strides} offset {offset}"
                )
            else:
                parts.append(f"{name}={item!r}")
        return ", ".join(parts)


class _PatternOperands(tuple):
    """The operands of an elementwise launch, ``(pattern, offsets, scalars, nout)``:
    described from its plan's key, offsets and scalars when formatted (nothing is copied
    per launch; buffers are not kept). Made with ``tuple.__new__`` (no ``__init__`` to
    run on every launch)."""

    __slots__ = ()

    def __str__(self) -> str:
        pattern, offsets, scalars, nout = self
        shape = pattern[1]
        pairs = list(zip(pattern[2:-1:2], pattern[3:-1:2]))
        offsets, scalars = iter(offsets), iter(scalars)
        parts = []
        for k, (strides, dtype) in enumerate(pairs):
            name = f"out{k}" if k < nout else f"in{k - nout}"
            if strides is None:
                parts.append(f"{name}={next(scalars)} ({dtype.name})")
            else:
                parts.append(
                    f"{name} {dtype.name}{format_shape(shape)} strides {strides} "
                    f"offset {next(offsets)}"
                )
        return ", ".join(parts)


class _ElementwisePlan:
    """What an elementwise launch of one pattern (function, dtypes, shape, strides)
    needs besides the buffers, scalars and offsets, worked out once and reused: the
    kernel, the arguments before the offsets (the element count, and the coalesced
    shape for a strided kernel), those after them (the coalesced strides) and the grid."""

    __slots__ = ("blocks", "head", "kernel", "tail", "threads")

    def __init__(self, kernel: Any, head: tuple, tail: tuple, blocks: int, threads: int) -> None:
        self.kernel, self.head, self.tail = kernel, head, tail
        self.blocks, self.threads = blocks, threads


class _ReducePass:
    """One planned pass of a reduction over one input layout: the kernel, grid, the
    arguments that describe the layout, and (for rows split into pieces) the sizes of
    the partial results and the pass that combines them."""

    __slots__ = ("combine", "described", "dummy_acc", "dummy_index", "grid", "head",
                 "kernel", "name", "partial", "threads")  # fmt: skip

    def __init__(self, name: str, kernel: Any, grid: int, threads: int, head: tuple,
                 described: list) -> None:  # fmt: skip
        self.name, self.kernel, self.grid, self.threads = name, kernel, grid, threads
        self.head, self.described = head, described
        self.partial: tuple[int, DType, bool] | None = None
        self.combine: _ReducePass | None = None
        self.dummy_acc: Any = None
        self.dummy_index: Any = None


def _check_device(device: Device) -> None:
    cuda = runtime.import_cuda()
    if not runtime.cuda_available():
        raise RuntimeError(
            f"cannot use {device}: numba-cuda found no usable CUDA driver or GPU. On a "
            "machine without a GPU, set NUMBA_ENABLE_CUDASIM=1 before importing kernelgrad "
            "to run the CUDA backend in numba's simulator (slow; for tests). "
            "See docs/cuda.md."
        )
    count = len(cuda.gpus)
    if device.index is None or not 0 <= device.index < count:
        available = ", ".join(f"cuda:{i}" for i in range(count))
        raise RuntimeError(
            f"{device} does not exist: {count} CUDA device{'s' if count != 1 else ''} "
            f"available ({available})"
        )


class CUDABackend:
    name = "cuda"
    # capabilities (see backends/base.py): device memory; blocks of threads cooperate
    host_memory = False
    work_groups = True
    capturing = False  # a CUDA graph capture is open (graphs.py)

    def __init__(self, device: Device) -> None:
        _check_device(device)
        cuda = runtime.import_cuda()
        self.device = device
        self.index = int(device.index or 0)
        self.simulated = runtime.simulated()
        if self.simulated:
            runtime.prepare_simulator()
        self.properties = runtime.device_properties(self.index)
        self.memory = runtime.DeviceMemory(self.index)
        self.pool = CachingPool(self.memory, str(device))
        self.policy = LaunchPolicy.for_device(self.properties)
        self.stream = self.memory.stream  # every launch and copy is queued on it
        self.launcher = Launcher(
            str(device), cuda, self.simulated, self.memory.context, self.stream
        )
        self._cuda = cuda
        self._elementwise_kernels: dict[tuple, Any] = {}
        self._elementwise_plans: dict[tuple, _ElementwisePlan] = {}
        self._reduce_kernels: dict[tuple, Any] = {}
        self._reduce_plans: dict[tuple, _ReducePass] = {}
        self._matmul_kernels: dict[tuple, Any] = {}
        self._dummies: dict[str, Any] = {}
        self.errors = DeferredErrors(self.memory)
        self.random_stream = philox.Stream()
        from . import kernels

        self._kernels = kernels
        self._gemm: CupyGemm | None = None
        self.matmul_impl = self._choose_matmul()

    # --- memory ---------------------------------------------------------------------------
    def empty(self, numel: int, dtype: DType) -> Any:
        return self.pool.allocate(numel, dtype.numpy)

    def from_numpy(self, array: np.ndarray) -> Any:
        flat = np.ascontiguousarray(array).reshape(-1)
        buffer = self.pool.allocate(flat.size, flat.dtype)
        if flat.size:
            with self.memory.context():
                buffer.copy_to_device(flat, stream=self.stream)
        return buffer

    def to_numpy(self, view: View) -> np.ndarray:
        n = prod(view.shape)
        dtype = view.dtype.numpy
        if n == 0:
            return np.empty(view.shape, dtype=dtype)
        if is_contiguous(view.shape, view.strides):
            return self._copy_to_host(view.buffer, view.offset, n).reshape(view.shape)
        low, high = view.offset, view.offset
        for size, stride in zip(view.shape, view.strides):
            if stride > 0:
                high += (size - 1) * stride
            else:
                low += (size - 1) * stride
        span = high - low + 1
        if span <= 4 * n:
            # A dense enough window: copy it and apply the strides on the host.
            host = self._copy_to_host(view.buffer, low, span)
            itemsize = dtype.itemsize
            strided = np.lib.stride_tricks.as_strided(
                host[view.offset - low :],
                shape=view.shape,
                strides=tuple(s * itemsize for s in view.strides),
            )
            return np.array(strided, copy=True)
        # A sparse view (a column of a large matrix): gather it on the device first.
        packed = self.empty(n, view.dtype)
        target = View(packed, view.shape, contiguous_strides(view.shape), 0, view.dtype)
        self.elementwise(_IDENTITY, [target], [view], [view.dtype])
        return self._copy_to_host(packed, 0, n).reshape(view.shape)

    def _copy_to_host(self, buffer: Any, start: int, count: int) -> np.ndarray:
        """Copy on the stream and wait for it; kernels' error flags come back with the
        data (see ``flags.py``), and an error they reported is raised here."""
        refuse_while_capturing(self, "a copy from the device to the host")
        host = np.empty(count, dtype=buffer.dtype)
        with self.memory.context():
            buffer[start : start + count].copy_to_host(host, stream=self.stream)
            flags = self.errors.read()
            self.stream.synchronize()
        self.errors.raise_reported(flags)
        return host

    def copy_from(self, tensor: Any) -> Any:
        """A new buffer holding ``tensor``'s values (contiguous), copied from host memory
        or from this device without a NumPy round trip. None for another GPU (the front
        end then goes through the host)."""
        view = tensor._view()
        n = prod(view.shape)
        if tensor.device.type == "cpu":
            return self.from_numpy(tensor.numpy())
        if tensor.device != self.device:
            return None
        buffer = self.empty(n, view.dtype)
        if n == 0:
            return buffer
        if is_contiguous(view.shape, view.strides):
            with self.memory.context():
                source = view.buffer[view.offset : view.offset + n]
                buffer.copy_to_device(source, stream=self.stream)
        else:
            target = View(buffer, view.shape, contiguous_strides(view.shape), 0, view.dtype)
            self.elementwise(_IDENTITY, [target], [view], [view.dtype])
        return buffer

    def synchronize(self) -> None:
        refuse_while_capturing(self, "a synchronisation")
        self.launcher.synchronize()
        self.errors.check()

    def capture(self, run: Any) -> Any:
        """The device work ``run()`` queues, recorded as a CUDA graph, queued once; returns
        a function that queues it again (``Backend.capture``; ``graphs.py``)."""
        return graphs.capture(self, run)

    def error_slot(self, make_error: Any) -> tuple[Any, Any]:
        """A two-element int64 device buffer (zero) for a kernel to report a bad value
        into (``[value, 1]``), and what to call after the launch. The error
        ``make_error(value)`` is raised at the next device-to-host read or synchronise
        (see ``flags.py``), or by that call with ``KG_CUDA_LAUNCH_BLOCKING=1``."""
        refuse_while_capturing(self, "a kernel that reports errors through a flag")
        return self.errors.slot(make_error), self._after_flagged_launch

    def _after_flagged_launch(self) -> None:
        if self.launcher.blocking:
            self.errors.check(late=False)

    def _dummy(self, dtype: np.dtype) -> Any:
        """A one-element device array standing in for an unused kernel argument."""
        key = np.dtype(dtype).name
        array = self._dummies.get(key)
        if array is None:
            with self.memory.context():
                array = self._cuda.device_array(1, dtype=dtype, stream=self.stream)
                self._dummies[key] = array
        return array

    # --- elementwise ------------------------------------------------------------------------
    def elementwise(self, fn: ScalarFunction, outputs, inputs, compute_dtypes) -> None:
        if len(outputs) == 1 and len(inputs) == 2:
            x, y = inputs
            if type(x) is View and type(y) is View:
                self._binary(fn, outputs[0], x, y, compute_dtypes)
                return
        self._general(fn, outputs, inputs, compute_dtypes)

    def _binary(self, fn: ScalarFunction, out: View, x: View, y: View, compute_dtypes) -> None:
        """:meth:`elementwise` for the most common call, two arrays into one: the same
        plan key as :meth:`_general` builds, made without a loop."""
        limit = codegen.INDEX_LIMIT
        out_buffer, x_buffer, y_buffer = out.buffer, x.buffer, y.buffer
        x_dtype, y_dtype = compute_dtypes
        pattern = (
            fn.key,
            out.shape,
            out.strides,
            out.dtype,
            x.strides,
            x_dtype,
            y.strides,
            y_dtype,
            out_buffer.size >= limit or x_buffer.size >= limit or y_buffer.size >= limit,
        )
        plan = self._elementwise_plans.get(pattern)
        if plan is None:
            self._general(fn, [out], [x, y], compute_dtypes)  # plans it
            return
        offsets = (out.offset, x.offset, y.offset)
        self.launcher.launch(
            fn.name,
            plan.kernel,
            plan.blocks,
            plan.threads,
            _new_tuple(_PatternOperands, (pattern, offsets, (), 1)),
            (*plan.head, offsets, *plan.tail, out_buffer, x_buffer, y_buffer),
        )

    def _general(self, fn: ScalarFunction, outputs, inputs, compute_dtypes) -> None:
        # One pass over the operands: the plan's key (the pattern), the kernel's operands
        # (buffers, and scalars converted to their compute dtype) and the offsets.
        limit = codegen.INDEX_LIMIT  # the plan's index width depends on the buffers' sizes
        out = outputs[0]
        buffer = out.buffer
        key: list[Any] = [fn.key, out.shape, out.strides, out.dtype]
        operands: list[Any] = [buffer]
        offsets: list[int] = [out.offset]
        scalars: list[Any] = []
        wide = buffer.size >= limit
        if len(outputs) > 1:
            for o in outputs[1:]:
                buffer = o.buffer
                key += (o.strides, o.dtype)
                operands.append(buffer)
                offsets.append(o.offset)
                if buffer.size >= limit:
                    wide = True
        for x, dtype in zip(inputs, compute_dtypes):
            if type(x) is View:
                buffer = x.buffer
                key += (x.strides, dtype)
                operands.append(buffer)
                offsets.append(x.offset)
                if buffer.size >= limit:
                    wide = True
            else:
                value = dtype.numpy.type(x)
                key += (None, dtype)
                operands.append(value)
                scalars.append(value)
        key.append(wide)
        pattern = tuple(key)
        plan = self._elementwise_plans.get(pattern)
        if plan is None:
            if prod(outputs[0].shape) == 0:
                return
            plan = self._plan_elementwise(fn, outputs, inputs, compute_dtypes)
            if len(self._elementwise_plans) >= 4096:
                self._elementwise_plans.clear()
            self._elementwise_plans[pattern] = plan
        fixed_offsets = tuple(offsets)
        described = _new_tuple(_PatternOperands, (pattern, fixed_offsets, scalars, len(outputs)))
        self.launcher.launch(
            fn.name,
            plan.kernel,
            plan.blocks,
            plan.threads,
            described,
            (*plan.head, fixed_offsets, *plan.tail, *operands),
        )

    def _plan_elementwise(self, fn: ScalarFunction, outputs, inputs, compute_dtypes):
        shape = outputs[0].shape
        n = prod(shape)
        views = list(outputs) + [x for x in inputs if isinstance(x, View)]
        if n == 1:
            ndim, run_shape, run_strides = 0, (1,), [(1,)] * len(views)
        else:
            run_shape, run_strides = coalesce(shape, [v.strides for v in views])
            if len(run_shape) == 1 and all(s[0] == 1 for s in run_strides):
                ndim = 0
            else:
                ndim = len(run_shape)
        kinds = tuple(["array" if isinstance(x, View) else "scalar" for x in inputs])
        bits = codegen.index_bits(n, [v.buffer for v in views])
        key = (fn.key, kinds, tuple(compute_dtypes), tuple([o.dtype for o in outputs]), bits)
        key += (ndim,)
        kernel = self._elementwise_kernels.get(key)
        if kernel is None:
            source = codegen.elementwise_source(
                fn.name,
                fn.source,
                fn.nout,
                kinds,
                compute_dtypes,
                [o.dtype for o in outputs],
                ndim,
                bits,
            )
            kernel = self._elementwise_kernels[key] = _load_kernel(source, f"cuda_{fn.name}")
        blocks, threads = self.policy.grid_for(n)
        if ndim == 0:  # the flat kernel: (n, offsets, *operands)
            return _ElementwisePlan(kernel, (n,), (), blocks, threads)
        # the strided kernel: (n, shape, offsets, strides, *operands)
        flat_strides = tuple(s for strides in run_strides for s in strides)
        return _ElementwisePlan(kernel, (n, tuple(run_shape)), (flat_strides,), blocks, threads)

    def elementwise_foreach(self, fn: ScalarFunction, items, compute_dtypes) -> None:
        """:meth:`elementwise` for each ``(outputs, inputs)`` of ``items`` (each with its
        own shape), in as few launches as the kernel's parameters allow (``foreach.py``):
        items whose views are contiguous and whose operands have the same kinds and dtypes
        run together; the others run one by one."""

        def run_alone(outputs: Any, inputs: Any) -> None:
            self.elementwise(fn, outputs, inputs, compute_dtypes)

        groups = group_foreach_items(items, lambda numel: False, run_alone, splat=True)
        for (kinds, _), members in groups.items():
            self._foreach(fn, kinds, members, compute_dtypes)

    def _foreach(self, fn: ScalarFunction, kinds: tuple, members: list, compute_dtypes) -> None:
        final_kinds = list(kinds)
        for i, kind in enumerate(kinds):
            if kind == "scalar" and len({inputs[i] for _, inputs, _ in members}) > 1:
                final_kinds[i] = "scalars"  # a different value per item
        n_arrays = fn.nout + kinds.count("array") + kinds.count("splat")
        per_launch = foreach.items_per_launch(
            n_arrays, final_kinds.count("scalars"), final_kinds.count("scalar")
        )
        buffers = [v.buffer for outputs, inputs, _ in members for v in outputs]
        buffers += [x.buffer for _, inputs, _ in members for x in inputs if isinstance(x, View)]
        bits = codegen.index_bits(max(numel for _, _, numel in members), buffers)
        key = ("foreach", fn.key, tuple(final_kinds), tuple(compute_dtypes), bits)
        key += tuple(o.dtype for o in members[0][0])
        kernel = self._elementwise_kernels.get(key)
        if kernel is None:
            source = foreach.foreach_source(
                fn.name,
                fn.source,
                fn.nout,
                final_kinds,
                compute_dtypes,
                [o.dtype for o in members[0][0]],
                bits,
            )
            kernel = self._elementwise_kernels[key] = _load_kernel(source, f"cuda_each_{fn.name}")
        for first in range(0, len(members), per_launch):
            chunk = members[first : first + per_launch]
            numels = tuple(numel for _, _, numel in chunk)
            offsets: list[int] = []
            for outputs, inputs, _ in chunk:
                offsets += [o.offset for o in outputs]
                offsets += [
                    x.offset for x, kind in zip(inputs, kinds) if kind in ("array", "splat")
                ]
            args: list[Any] = [numels, tuple(offsets)]
            args += [tuple(outputs[k].buffer for outputs, _, _ in chunk) for k in range(fn.nout)]
            for i, (kind, dtype) in enumerate(zip(final_kinds, compute_dtypes)):
                convert = dtype.numpy.type
                if kind in ("array", "splat"):
                    args.append(tuple(inputs[i].buffer for _, inputs, _ in chunk))
                elif kind == "scalars":
                    args.append(tuple(convert(inputs[i]) for _, inputs, _ in chunk))
                elif kind == "scalar":
                    args.append(convert(chunk[0][1][i]))
            blocks, threads = self.policy.grid_for(max(numels))
            described = _Operands(("items", len(chunk)), ("numels", numels))
            name = f"{fn.name}[{len(chunk)} tensors]"
            self.launcher.launch(
                name, kernel, (blocks, len(chunk)), threads, described, tuple(args)
            )

    # --- reductions -------------------------------------------------------------------------
    def reduce(self, kind: str, out: View, x: View, axes: tuple[int, ...]) -> None:
        x_buffer, out_buffer = x.buffer, out.buffer
        limit = codegen.INDEX_LIMIT  # the kernels' index width depends on the buffers' sizes
        key = (kind, x.shape, x.strides, x.dtype, axes, out.shape, out.dtype)
        key += (x_buffer.size >= limit, out_buffer.size >= limit)
        plan = self._reduce_plans.get(key)
        if plan is None:
            if prod(out.shape) == 0:
                return
            plan = self._plan_reduce(kind, out, x, axes)
            if len(self._reduce_plans) >= 4096:
                self._reduce_plans.clear()
            self._reduce_plans[key] = plan
        self._run_reduce(plan, x_buffer, x.offset, out, plan.dummy_index)

    def _plan_reduce(self, kind: str, out: View, x: View, axes: tuple[int, ...]) -> _ReducePass:
        kept = [d for d in range(len(x.shape)) if d not in axes]
        kept_shape = tuple(x.shape[d] for d in kept)
        kshape, (kstrides, _) = coalesce(
            kept_shape, [tuple(x.strides[d] for d in kept), contiguous_strides(kept_shape)]
        )
        red_shape = tuple(x.shape[d] for d in axes)
        rshape, (rstrides,) = coalesce(red_shape, [tuple(x.strides[d] for d in axes)])
        n_red = prod(red_shape)
        if kind == "sum":
            # Floating-point sums accumulate in their own dtype with compensation
            # (codegen.compensated_add): float64-accurate without float64 arithmetic.
            acc = x.dtype if x.dtype.is_floating_point else int64
        else:
            acc = int32 if x.dtype.is_bool else x.dtype
        return self._plan_reduce_pass(
            kind,
            [x.buffer.size, out.buffer.size],
            x.dtype,
            acc,
            kshape,
            kstrides,
            rshape,
            rstrides,
            prod(out.shape),
            n_red,
            out,
            index_input=None,
        )

    def _plan_reduce_pass(
        self,
        kind: str,
        buffer_sizes: list[int],
        x_dtype: DType,
        acc: DType,
        kshape: tuple[int, ...],
        kstrides: tuple[int, ...],
        rshape: tuple[int, ...],
        rstrides: tuple[int, ...],
        n_out: int,
        n_red: int,
        out: View,
        index_input: Any,
    ) -> _ReducePass:
        """The plan of one pass; splits long rows (first pass only), and then plans the
        combining pass too.

        Contiguous rows are reduced by a group of threads each: a whole block for long
        rows, a group of 2-32 threads (several per block) for short ones, so that
        neighbouring threads read neighbouring elements; rows over a strided dim
        (``sum(dim=0)``) by one thread each, neighbouring threads taking neighbouring
        outputs."""
        policy = self.policy
        block = policy.reduce_threads
        is_arg = kind in ("argmax", "argmin")
        if n_red >= 2 * block:
            lanes = block
        else:
            lanes = min(_next_power_of_two(n_red), block, policy.row_threads)
        mode = "group" if rstrides[-1] == 1 and lanes > 1 else "thread"
        nsplit = 1
        if index_input is None:
            if mode == "group" and lanes == block and n_out < policy.reduce_blocks:
                per_thread = block * policy.reduce_min_per_thread
                nsplit = min(-(-policy.reduce_blocks // n_out), n_red // per_thread)
            elif mode == "thread" and n_out < policy.reduce_blocks * block:
                target = policy.reduce_blocks * block
                nsplit = min(-(-target // n_out), n_red // policy.serial_min_per_thread)
            nsplit = max(nsplit, 1)
        per_split = -(-n_red // nsplit) if n_red else 0
        if per_split:
            nsplit = -(-n_red // per_split)  # no empty pieces
        total = n_out * nsplit
        if mode == "group":
            groups = block // lanes
            grid, threads = min(-(-total // groups), policy.max_blocks), block
        else:
            grid, threads = policy.grid_for(total)
            lanes = 1
        # 64-bit indices when the work items or a buffer (input, output, partial
        # results) reach codegen.INDEX_LIMIT
        bits = codegen.index_bits(max(total, n_red, *buffer_sizes), [])

        key = (kind, x_dtype.name, acc.name, out.dtype.name, mode, len(kshape), len(rshape))
        key += (index_input is not None, block, lanes, bits)
        kernel = self._reduce_kernels.get(key)
        if kernel is None:
            source = codegen.reduce_source(
                kind,
                x_dtype,
                acc,
                out.dtype,
                mode,
                len(kshape),
                len(rshape),
                index_input is not None,
                block,
                lanes,
                bits,
            )
            kernel = self._reduce_kernels[key] = _load_kernel(source, f"cuda_reduce_{kind}")
        step = _ReducePass(
            f"reduce_{kind}",
            kernel,
            grid,
            threads,
            (
                n_out,
                n_red,
                nsplit,
                per_split,
                tuple(kshape),
                tuple(kstrides),
                tuple(rshape),
                tuple(rstrides),
            ),
            [
                ("kept", kshape),
                ("reduced", rshape),
                ("reduced_strides", rstrides),
                ("mode", mode if mode == "thread" else f"{lanes} threads per row"),
                ("nsplit", nsplit),
            ],
        )
        step.dummy_acc = self._dummy(acc.numpy)
        step.dummy_index = self._dummy(np.int64)
        if nsplit > 1:
            step.partial = (total, acc, is_arg)
            # the combining pass reads the pieces (and their indices for argmax/argmin)
            sizes = [total, out.buffer.size, total if is_arg else 1]
            step.combine = self._plan_reduce_pass(
                kind,
                sizes,
                acc,
                acc,
                (n_out,),
                (nsplit,),
                (nsplit,),
                (1,),
                n_out,
                nsplit,
                out,
                index_input=step.dummy_index,
            )
        return step

    def _run_reduce(
        self, step: _ReducePass, x_buffer: Any, x_offset: int, out: View, index_input: Any
    ) -> None:
        """Launch a planned pass (and its combining pass) on these buffers."""
        if step.partial is None:
            partial, partial_index = step.dummy_acc, step.dummy_index
        else:
            total, acc, is_arg = step.partial
            partial = self.empty(total, acc)
            partial_index = self.empty(total, int64) if is_arg else step.dummy_index
        args = (
            *step.head,
            x_buffer,
            x_offset,
            index_input,
            out.buffer,
            out.offset,
            partial,
            partial_index,
            step.partial is not None,
        )
        described = _Operands.__new__(_Operands)
        described.items = [("out", out[1:]), *step.described]
        described.raw = None
        self.launcher.launch(step.name, step.kernel, step.grid, step.threads, described, args)
        if step.combine is not None:
            self._run_reduce(step.combine, partial, 0, out, partial_index)

    # --- matmul -----------------------------------------------------------------------------
    def _choose_matmul(self) -> str:
        choice = requested_matmul()
        if choice == "kernel" or self.simulated:
            return "kernel"
        cupy = load_cupy()
        missing = "CuPy is not installed or sees no GPU" if cupy is None else cublas_error()
        if missing is not None:
            message = (
                f"cuBLAS is not available ({missing}): matmul and convolutions on "
                f"{self.device} use kernelgrad's own tiled kernel, several times slower. "
                f"Fix: {fix_command()}"
            )
            if choice == "cublas":
                raise RuntimeError(f"KG_CUDA_MATMUL=cublas, but {message}")
            if cupy is not None or cupy_package() is not None:
                warn_once("cublas", message)  # installed but broken: say it once
            return "kernel"
        self._use_gemm(cupy)
        return "cublas"

    def _use_gemm(self, cupy: Any) -> None:
        self._gemm = CupyGemm(cupy, self.index, self.memory.stream_handle)
        self.pool.release_hooks.append(self._gemm.free_cached)

    def set_matmul(self, impl: str) -> None:
        """Choose ``"cublas"`` (CuPy) or ``"kernel"`` (the own tiled kernel) for matmul."""
        if impl not in ("cublas", "kernel"):
            raise ValueError(f"matmul implementation must be 'cublas' or 'kernel', got {impl!r}")
        if impl == "cublas" and self._gemm is None:
            cupy = None if self.simulated else load_cupy()
            if cupy is None or cublas_error() is not None:
                raise RuntimeError(
                    f"cuBLAS matmul needs CuPy, cuBLAS and a real GPU: {fix_command()}"
                )
            self._use_gemm(cupy)
        self.matmul_impl = impl

    def matmul(self, out: View, a: View, b: View) -> None:
        gemm = self._gemm
        if self.matmul_impl == "cublas" and gemm is not None and gemm.supports(out.dtype.name):
            self._vendor_call("matmul (cuBLAS through CuPy)", gemm, gemm.matmul, out, a, b)
            return
        self.matmul_kernel(out, a, b)

    def _vendor_call(self, name: str, vendor: Any, call: Any, *views: View) -> None:
        """Run a vendor-library call on the backend's stream. Out of memory inside it: free
        both pools' cached blocks and try once more. Any other failure is a KernelError
        naming the call (the backend keeps using the library afterwards)."""
        for attempt in range(2):
            try:
                call(*views)
                return
            except Exception as error:
                if not vendor.is_out_of_memory(error):
                    operands = _Operands.of(views[:1], views[1:])
                    raise KernelError(
                        f"{name} failed on {self.device}: {type(error).__name__}: {error}. "
                        f"Operands: {operands}. KG_CUDA_MATMUL=kernel uses kernelgrad's own "
                        "kernel instead."
                    ) from error
                if attempt == 1:
                    raise OutOfMemoryError(
                        f"CUDA out of memory on {self.device} in {name}, also after freeing "
                        f"the cached blocks of kernelgrad's and CuPy's pools: {error}. "
                        f"{self.memory_summary()} Free tensors you no longer need or use a "
                        "smaller batch."
                    ) from error
                self.release_cached_memory()

    def release_cached_memory(self) -> None:
        """Collect dead tensors and hand every cached block (kernelgrad's pool and the
        vendor library's) back to the driver."""
        import gc

        gc.collect()
        self.pool.empty_cache()  # also runs the vendor pools' release hooks

    def memory_stats(self) -> dict[str, Any]:
        """The pool's statistics, and the vendor library's pool (CuPy's, 0 without it)."""
        stats = self.pool.stats()
        if self._gemm is not None:
            stats.update(self._gemm.pool_stats())
        return stats

    def memory_summary(self) -> str:
        stats = self.memory_stats()
        return (
            f"kernelgrad's pool: {format_bytes(stats['allocated_bytes'])} in use, "
            f"{format_bytes(stats['reserved_bytes'])} reserved; CuPy's pool: "
            f"{format_bytes(stats['vendor_pool_used_bytes'])} in use, "
            f"{format_bytes(stats['vendor_pool_reserved_bytes'])} reserved."
        )

    def matmul_kernel(self, out: View, a: View, b: View) -> None:
        """The own shared-memory tiled matmul (the fallback and the test reference)."""
        batch = out.shape[:-2]
        rows, columns = out.shape[-2:]
        inner = a.shape[-1]
        n_batch = prod(batch)
        if n_batch == 1:
            # No batch dims: the kernel ignores these (never pass empty tuples, which
            # type differently from the tuples of ints the other launches pass).
            batch_ndim, bshape, bstrides = 0, (1,), (0, 0, 0)
        else:
            bshape, batch_strides = coalesce(
                batch, [a.strides[:-2], b.strides[:-2], out.strides[:-2]]
            )
            batch_ndim = len(bshape)
            bstrides = tuple(s for strides in batch_strides for s in strides)
        dtype = out.dtype
        acc = dtype if dtype.is_floating_point else int64
        tile, wpt = self.policy.tile, self.policy.work_per_thread
        key = (dtype.name, batch_ndim, tile, wpt)
        kernel = self._matmul_kernels.get(key)
        if kernel is None:
            source = codegen.matmul_source(dtype, acc, batch_ndim, tile, wpt)
            kernel = self._matmul_kernels[key] = _load_kernel(source, "cuda_matmul")
        block_m = tile * wpt
        tiles = n_batch * -(-rows // block_m) * -(-columns // block_m)
        grid = min(tiles, self.policy.max_matmul_blocks)
        args = (
            rows,
            columns,
            inner,
            n_batch,
            bshape,
            bstrides,
            a.buffer,
            a.offset,
            a.strides[-2],
            a.strides[-1],
            b.buffer,
            b.offset,
            b.strides[-2],
            b.strides[-1],
            out.buffer,
            out.offset,
            out.strides[-2],
            out.strides[-1],
        )
        described = _Operands(("out", out), ("a", a), ("b", b))
        self.launcher.launch("matmul", kernel, grid, (tile, tile), described, args)

    # --- gather / scatter-add ---------------------------------------------------------------
    def _split(self, view: View, dim: int) -> tuple[int, int, int, int, int] | None:
        """(pre, x_pre, x_dim, post, x_post): the view as (pre, size, post) with one
        stride each, or None when the dims before or after ``dim`` do not merge."""
        pre_shape, post_shape = view.shape[:dim], view.shape[dim + 1 :]
        pre_shape_c, (pre_strides,) = coalesce(pre_shape, [view.strides[:dim]])
        post_shape_c, (post_strides,) = coalesce(post_shape, [view.strides[dim + 1 :]])
        if len(pre_shape_c) != 1 or len(post_shape_c) != 1:
            return None
        return (
            pre_shape_c[0],
            pre_strides[0],
            view.strides[dim],
            post_shape_c[0],
            post_strides[0],
        )

    def _contiguous(self, view: View) -> View:
        n = prod(view.shape)
        buffer = self.empty(n, view.dtype)
        target = View(buffer, view.shape, contiguous_strides(view.shape), 0, view.dtype)
        self.elementwise(_IDENTITY, [target], [view], [view.dtype])
        return target

    def take(self, out: View, x: View, dim: int, index: View) -> Any:
        split = self._split(x, dim)
        if split is None:
            x = self._contiguous(x)
            split = self._split(x, dim)
            assert split is not None
        pre, x_pre, x_dim, post, x_post = split
        n_index = prod(index.shape)
        n = pre * n_index * post
        if n == 0:
            return None
        blocks, threads = self.policy.grid_for(n)
        args = (
            n,
            pre,
            n_index,
            post,
            x.buffer,
            x.offset,
            x_pre,
            x_dim,
            x_post,
            x.shape[dim],
            index.buffer,
            index.offset,
            index.strides[0] if index.strides else 0,
            out.buffer,
            out.offset,
            self._index_error(dim, x.shape),
        )
        described = _Operands(("out", out), ("x", x), ("dim", dim), ("index", index))
        self.launcher.launch("take", self._kernels.take_kernel, blocks, threads, described, args)
        self._after_flagged_launch()
        return None

    def index_add(self, out: View, dim: int, index: View, source: View) -> Any:
        if out.dtype.is_floating_point:  # atomics add in any order
            from ...determinism import check_deterministic

            check_deterministic("index_add (scatter-add with CUDA atomics)")
        split = self._split(out, dim)
        if split is None:  # pragma: no cover - the front end passes a fresh clone
            raise ValueError("index_add needs a target whose dims around `dim` merge")
        pre, o_pre, o_dim, post, o_post = split
        if not is_contiguous(source.shape, source.strides):
            source = self._contiguous(source)
        n_index = prod(index.shape)
        n = pre * n_index * post
        if n == 0:
            return None
        blocks, threads = self.policy.grid_for(n)
        args = (
            n,
            pre,
            n_index,
            post,
            out.buffer,
            out.offset,
            o_pre,
            o_dim,
            o_post,
            out.shape[dim],
            index.buffer,
            index.offset,
            index.strides[0] if index.strides else 0,
            source.buffer,
            source.offset,
            self._index_error(dim, out.shape),
        )
        described = _Operands(("out", out), ("dim", dim), ("index", index), ("source", source))
        kernel = self._kernels.index_add_kernel
        self.launcher.launch("index_add", kernel, blocks, threads, described, args)
        self._after_flagged_launch()
        return None

    def _index_error(self, dim: int, shape: tuple[int, ...]) -> Any:
        """The error flag of a gather or scatter along ``dim`` of a tensor of ``shape``:
        an out-of-range index raises the IndexError the front end would raise."""
        size = shape[dim]

        def make_error(bad: int) -> IndexError:
            return IndexError(
                f"index {bad} is out of bounds for dimension {dim} with size {size} "
                f"(tensor of shape {format_shape(shape)})"
            )

        return self.errors.slot(make_error)

    # --- random numbers ---------------------------------------------------------------------
    def manual_seed(self, seed: int) -> None:
        self.random_stream.manual_seed(seed)

    def get_rng_state(self) -> dict[str, int]:
        return self.random_stream.get_state()

    def set_rng_state(self, state: dict[str, int]) -> None:
        self.random_stream.set_state(state)

    def random(self, out: View, distribution: str, low: float, high: float) -> None:
        """Philox4x32-10 (``backends/philox.py``): the same numbers as the CPU backend."""
        n = prod(out.shape)
        if n == 0:
            return
        if distribution not in ("uniform", "normal", "integers"):
            raise ValueError(f"unknown distribution {distribution!r}")
        refuse_while_capturing(self, "a random draw (its counter advances on the host)")
        seed_low, seed_high, counter = self.random_stream.take(n)
        kernels = rng.kernels()
        if distribution == "uniform":
            kernel = kernels.uniform_kernel
            args: tuple = (n, out.buffer, out.offset, float(low), float(high))
            args += (seed_low, seed_high, counter, out.dtype is float64)
        elif distribution == "normal":
            kernel = kernels.normal_kernel
            args = (n, out.buffer, out.offset, float(low), float(high))
            args += (seed_low, seed_high, counter)
        else:
            kernel = kernels.integers_kernel
            span = np.uint64(int(high) - int(low))
            args = (n, out.buffer, out.offset, int(low), span, seed_low, seed_high, counter)
        blocks, threads = self.policy.grid_for(n)
        described = _Operands(("out", out), ("distribution", distribution))
        self.launcher.launch(f"random_{distribution}", kernel, blocks, threads, described, args)

    # --- user kernels (@kg.kernel; kernel_module.py) ---------------------------------------
    def kernel_array(self, view: View) -> Any:
        if any(s < 0 for s in view.strides):
            return None  # a device array cannot step backwards
        from . import kernel_module

        return kernel_module.device_array(
            view.buffer, view.shape, view.strides, view.offset, view.dtype.numpy
        )

    def launch_kernel(self, program: Any, launch: Any) -> None:
        from . import kernel_module

        # Launches on foreign arrays only (CuPy, numba) run where their library queued
        # its work, the default stream.
        stream = self.stream if launch.tensors else 0
        kernel_module.launch(program, launch, stream, str(self.device))

    # --- introspection ----------------------------------------------------------------------
    def __repr__(self) -> str:
        kind = "simulated" if self.simulated else self.properties.name
        return f"<CUDABackend {self.device} ({kind}), matmul={self.matmul_impl}>"

    # --- kg.compile's fused reductions (fused_reduce.py) -------------------------------------
    def fused_reduce(self, reduction: Any) -> Any:
        """A kernel for ``reduction`` (a ``backends.fused_reduce.FusedReduction``): a
        generated numba-cuda module per index width, launched through ``self.launcher``
        on blocks sized by ``self.policy``."""
        from . import fused_reduce

        return fused_reduce.FusedReduceKernel(self, reduction)


def _next_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _load_kernel(source: str, prefix: str) -> Any:
    from ...codecache import load_module

    if runtime.simulated():
        source = codegen.for_simulator(source)
    return load_module(source, prefix).kernel
