"""``@kg.kernel``: one Python function, compiled for the device its tensors live on.

>>> import kernelgrad as kg
>>> @kg.kernel
... def add_one_(x):
...     i = kg.index()
...     x[i] += 1.0
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from .. import autograd
from ..debug import compile_action, compile_counts, debug_level, log
from ..device import Device, as_device
from ..errors import DeviceMismatchError, InplaceError, KernelError, ShapeError
from . import arrays, transform

_CUDA_THREADS = 256
_MAX_CUDA_BLOCK = 1024
# CUDA's grid limits: 2**31 - 1 blocks along x, 65,535 along y and z.
MAX_GRID_X = 2**31 - 1
MAX_GRID_YZ = 65535


def _as_sizes(value: Any, what: str, kernel_name: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    if not isinstance(value, (tuple, list)) or not value:
        raise ShapeError(
            f"kernel '{kernel_name}': {what} must be an int or a tuple of ints, got {value!r}"
        )
    sizes = []
    for v in value:
        if not isinstance(v, (int, np.integer)) or int(v) < 0:
            raise ShapeError(
                f"kernel '{kernel_name}': {what} entries must be non-negative ints, got {value!r}"
            )
        sizes.append(int(v))
    return tuple(sizes)


class _Argument:
    """One converted argument: the object handed to the compiled kernel, and what to
    do after the launch."""

    __slots__ = ("copy_back", "device", "name", "tensor", "type_code", "value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.value: Any = None
        self.device: Device | None = None
        self.tensor: Any = None
        self.copy_back: Any = None
        self.type_code: Any = None


class Kernel:
    """A compiled-on-demand kernel. Call it as ``k(*args, ndrange=..., workgroup=...)``.

    See :func:`kernel` for the rules, and ``docs/kernels.md`` for the GPU model."""

    def __init__(
        self,
        fn: Callable[..., Any],
        workgroup: Any = None,
        parallel: bool | None = None,
        fastmath: bool = False,
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.default_workgroup = workgroup
        self.parallel = parallel
        self.fastmath = bool(fastmath)
        self.info = transform.analyze(fn)
        if self.info.uses_barrier:
            from .phases import check_structure

            check_structure(self.info)
        self._launchers: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return f"<kg.kernel {self.info.name}({', '.join(self.info.params)})>"

    # --- launching --------------------------------------------------------------------------
    def __call__(
        self,
        *args: Any,
        ndrange: Any,
        workgroup: Any = None,
        device: Any = None,
    ) -> None:
        recorder = _trace().active_recorder()
        if recorder is not None:  # inside kg.compile's trace: run and record the launch
            recorder.kernel_call(self, args, ndrange, workgroup, device)
            return
        self.launch(args, ndrange, workgroup, device)

    def launch(self, args: Sequence[Any], ndrange: Any, workgroup: Any, device: Any) -> None:
        """Check, convert and launch (what calling the kernel does)."""
        info = self.info
        if len(args) != len(info.params):
            raise TypeError(
                f"kernel '{info.name}' takes {len(info.params)} arguments "
                f"({', '.join(info.params)}), got {len(args)}"
            )
        sizes = _as_sizes(ndrange, "ndrange", info.name)
        ndim = len(sizes)
        bad_dims = sorted(d for d in info.index_dims if d not in (0, ndim))
        if bad_dims:
            raise ShapeError(
                f"kernel '{info.name}' asks for kg.index({bad_dims[0]}) (or local/group "
                f"index) but was launched with a {ndim}-dimensional ndrange {sizes}; pass "
                f"ndrange with {bad_dims[0]} sizes, or use kg.index() for the linear index"
            )
        if workgroup is None:
            workgroup = self.default_workgroup
        group = None
        if workgroup is not None:
            group = _as_sizes(workgroup, "workgroup", info.name)
            if len(group) == 1 and ndim > 1:
                group = group + (1,) * (ndim - 1)
            if len(group) != ndim or any(w < 1 for w in group):
                raise ShapeError(
                    f"kernel '{info.name}': workgroup {workgroup!r} must have one positive "
                    f"size per ndrange dimension ({ndim})"
                )
        elif info.uses_workgroup:
            raise KernelError(
                f"kernel '{info.name}' uses kg.local_index/group_index/shared/barrier, so it "
                "needs a workgroup size: pass workgroup=(...) with one size per ndrange "
                "dimension (for example workgroup=(16, 16))"
            )

        for counter in _trace().LAUNCH_HOOKS:
            counter.count += 1
            counter.names.append(f"kernel {info.name}")
        converted = [self._convert(name, value) for name, value in zip(info.params, args)]
        target = self._device(converted, device)
        try:
            self._prepare_arrays(converted, target)
            narrow = _narrow_floats(converted)
            if prod(sizes) == 0:
                return
            if _recording().active():
                self._record(converted, sizes, group, narrow)
            if target.type == "cpu":
                self._launch_cpu(converted, sizes, group, narrow)
            else:
                self._launch_cuda(converted, sizes, group, target, narrow)
        finally:
            self._finish(converted)

    # --- arguments ------------------------------------------------------------------------
    def _convert(self, name: str, value: Any) -> _Argument:
        argument = _Argument(name)
        if isinstance(value, _tensor_class()):
            argument.tensor = value
            argument.device = value.device
            if name in self.info.written:
                if autograd.is_grad_enabled() and value.requires_grad:
                    raise InplaceError(
                        f"kernel '{self.info.name}' may write into argument '{name}', a tensor "
                        "that requires grad, while gradients are recorded. Launch it under "
                        "`with kg.no_grad():`, or give the kernel a backward with "
                        "kg.custom_vjp so that it joins autograd"
                    )
                _check_writable(self.info.name, name, value.shape, value._strides)
            return argument
        kind = type(value)  # plain numbers first: the common case, and cheap to test
        if kind is int:
            argument.value = value
            argument.type_code = "i"
            return argument
        if kind is float:
            argument.value = value
            argument.type_code = "f64"
            return argument
        array_device = arrays.device_of_array(value)
        if array_device is not None:
            argument.device = as_device(array_device)
            argument.value = value
            return argument
        if isinstance(value, (bool, np.bool_)):
            argument.value = bool(value)
            argument.type_code = "b"
        elif isinstance(value, (int, np.integer)):
            argument.value = int(value)
            argument.type_code = "i"
        elif isinstance(value, np.floating):
            argument.value = value
            argument.type_code = "f32" if value.dtype == np.float32 else "f64"
        elif isinstance(value, float):
            argument.value = value
            argument.type_code = "f64"
        else:
            raise TypeError(
                f"kernel '{self.info.name}': argument '{name}' is a {type(value).__name__}; "
                "kernels take tensors, NumPy or CUDA arrays, and numbers"
            )
        return argument

    def _device(self, converted: Sequence[_Argument], requested: Any) -> Device:
        placed = [(a.name, a.device) for a in converted if a.device is not None]
        devices = {d for _, d in placed}
        if requested is not None:
            devices.add(as_device(requested))
        if len(devices) > 1:
            listing = ", ".join(f"'{n}' on {d}" for n, d in placed)
            if requested is not None:
                listing += f", device={as_device(requested)}"
            raise DeviceMismatchError(
                f"kernel '{self.info.name}' got arrays on different devices ({listing}); a "
                "kernel runs on one device, where its data lives. Move them first, e.g. "
                "`x = x.to('cuda')`"
            )
        if devices:
            return devices.pop()
        from ..device import default_device

        return default_device()

    def _prepare_arrays(self, converted: Sequence[_Argument], target: Device) -> None:
        info = self.info
        for argument in converted:
            if argument.tensor is not None:
                tensor = argument.tensor
                flatten = argument.name in info.linear and tensor.ndim != 1
                work = tensor  # only its memory is used (no autograd)
                needs_copy = (flatten and not tensor.is_contiguous()) or (
                    target.type == "cuda" and any(s < 0 for s in tensor._strides)
                )
                if needs_copy:
                    with autograd.no_grad():
                        work = tensor.detach().clone()
                    if argument.name in info.written:
                        argument.copy_back = work
                shape, strides = work.shape, work._strides
                if flatten:
                    shape, strides = (work.numel(),), (1,)
                buffer = work._storage.buffer
                if target.type == "cpu":
                    argument.value = arrays.cpu_view(buffer, shape, strides, work._offset)
                else:
                    argument.value = arrays.cuda_view(
                        buffer, shape, strides, work._offset, tensor.dtype.numpy
                    )
                argument.type_code = ("A", tensor.dtype.name, len(shape))
            elif argument.type_code is None:  # a raw array
                value = argument.value
                if argument.name in info.linear and len(value.shape) != 1:
                    if target.type == "cpu":
                        if not value.flags.c_contiguous:
                            raise KernelError(
                                f"kernel '{info.name}': argument '{argument.name}' is indexed "
                                "with one index (linear indexing), which needs a contiguous "
                                "array; pass np.ascontiguousarray(...) or a tensor"
                            )
                        value = value.reshape(-1)
                    else:
                        value = value.reshape(value.size)
                    argument.value = value
                dtype_name = np.dtype(value.dtype).name
                argument.type_code = ("A", dtype_name, len(value.shape))

    def _finish(self, converted: Sequence[_Argument]) -> None:
        from ..ops.elementwise import copy_into

        for argument in converted:
            tensor = argument.tensor
            if tensor is None:
                continue
            if argument.copy_back is not None:
                with autograd.no_grad():
                    copy_into(tensor.detach(), argument.copy_back)
            elif argument.name in self.info.written:
                tensor._storage.version += 1

    def _record(
        self, converted: Sequence[_Argument], sizes: tuple, group: Any, narrow: bool
    ) -> None:
        """Report this launch, in its CUDA form, to the compile check's recording
        (``backends/cuda/recording.py``); a CPU launch is recorded with the types its
        arguments would have on CUDA (arrays of the same dtype, rank and layout), so that
        examples too large for the simulator can run on the CPU."""
        recording = _recording()
        info = self.info
        ndim, workgroup = len(sizes), group is not None
        _, _, folded, counts = self._cuda_grid(sizes, group)
        recording.record_source(
            f"kernel {info.name}",
            (id(self), ndim, workgroup, narrow, folded),
            lambda: transform.cuda_source(info, ndim, workgroup, self.fastmath, narrow, folded),
            f"kernel_cuda_{info.name}",
            recording.argument_types([*sizes, *counts] + [a.value for a in converted]),
            info.injected,
        )

    # --- compilation ------------------------------------------------------------------------
    def _launcher(
        self,
        device_type: str,
        ndim: int,
        workgroup: bool,
        types: Any,
        narrow: bool,
        folded: bool = False,
    ) -> Any:
        key = (device_type, ndim, workgroup, types, narrow, folded)
        launcher = self._launchers.get(key)
        if launcher is not None:
            return launcher
        from ..codecache import load_module

        if device_type == "cpu":
            arg_types = dict(zip(self.info.params, types)) if workgroup else None
            source = transform.cpu_source(
                self.info, ndim, workgroup, arg_types, self.fastmath, narrow
            )
        else:
            source = transform.cuda_source(
                self.info, ndim, workgroup, self.fastmath, narrow, folded
            )
        module = load_module(source, f"kernel_{device_type}_{self.info.name}")
        for name, value in self.info.injected.items():
            setattr(module, name, value)
        launcher = module.kernel
        if device_type == "cpu":
            launcher = (module.kernel, module.kernel_serial)
        self._launchers[key] = launcher
        return launcher

    def _run(self, launcher: Any, call: Callable[[], None], label: str, sizes: tuple) -> None:
        level = debug_level()
        start = time.perf_counter() if level >= 1 else 0.0
        before = compile_counts(launcher) if level >= 1 else (0, 0)
        try:
            call()
        except Exception as error:
            if type(error).__module__.startswith("numba"):
                raise KernelError(
                    f"kernel '{self.info.name}' ({label}) failed to compile or run: {error}\n"
                    f"The generated source is {launcher.py_func.__code__.co_filename}; "
                    "kernels may use Numba's supported Python subset (numbers, arrays, "
                    "math, loops, branches)."
                ) from error
            raise
        if level >= 1:
            elapsed = time.perf_counter() - start
            action = compile_action(launcher, before)
            if action is not None:
                log(f"kernel {self.info.name} ({label}) {action} in {elapsed:.2f} s")
            elif level >= 2:
                log(
                    f"{label:<4} kernel {self.info.name:<20} ndrange={sizes!s:<16} "
                    f"{elapsed * 1e6:9.1f} us"
                )

    def _launch_cpu(
        self, converted: Sequence[_Argument], sizes: tuple[int, ...], group: Any, narrow: bool
    ) -> None:
        types = tuple(a.type_code for a in converted)
        parallel, serial = self._launcher("cpu", len(sizes), group is not None, types, narrow)
        values = [a.value for a in converted]
        if group is None:
            arguments = list(sizes) + values
            items = prod(sizes)
        else:
            groups = [-(-n // w) for n, w in zip(sizes, group)]
            arguments = list(sizes) + list(group) + groups + values
            items = prod(groups) * prod(group)
        # Below the CPU backend's threshold the items run on the calling thread.
        spread = self.parallel
        if spread is None:
            from ..backends import cpu

            spread = items >= cpu.PARALLEL_THRESHOLD
        launcher = parallel if spread else serial
        self._run(launcher, lambda: launcher(*arguments), "cpu", sizes)

    def _cuda_grid(self, sizes: tuple[int, ...], group: Any) -> tuple[Any, Any, bool, tuple]:
        """(grid, block, folded, group counts passed as arguments) of a CUDA launch.

        A workgroup launch puts index dimension d on grid axis z, y, x (the last on x);
        when a leading dimension has more groups than grid y and z allow (65,535), the
        groups are numbered along x alone and the kernel recovers their coordinates
        (``transform.cuda_source(folded=True)``)."""
        name = self.info.name
        if group is None:
            blocks = -(-prod(sizes) // _CUDA_THREADS)
            if blocks > MAX_GRID_X:
                raise KernelError(
                    f"kernel '{name}': ndrange {sizes} needs {blocks} blocks of "
                    f"{_CUDA_THREADS} threads; CUDA allows at most {MAX_GRID_X}. Let each "
                    "work item handle several elements (a loop in the kernel)"
                )
            return blocks, _CUDA_THREADS, False, ()
        if len(sizes) > 3:
            raise KernelError(
                f"kernel '{name}': a workgroup launch on CUDA supports at most "
                f"3 index dimensions, got {len(sizes)}"
            )
        if prod(group) > _MAX_CUDA_BLOCK:
            raise KernelError(
                f"kernel '{name}': workgroup {group} has {prod(group)} work "
                f"items; CUDA allows at most {_MAX_CUDA_BLOCK} per block"
            )
        counts = tuple(-(-n // w) for n, w in zip(sizes, group))
        grid = tuple(reversed(counts))
        block = tuple(reversed(group))
        if max(grid[1:], default=0) <= MAX_GRID_YZ and grid[0] <= MAX_GRID_X:
            return grid, block, False, ()
        if prod(counts) > MAX_GRID_X:
            raise KernelError(
                f"kernel '{name}': ndrange {sizes} with workgroup {group} makes "
                f"{prod(counts)} groups; CUDA allows at most {MAX_GRID_X}. Use larger "
                "workgroups, or let each work item handle several elements"
            )
        return prod(counts), block, True, counts

    def _launch_cuda(
        self,
        converted: Sequence[_Argument],
        sizes: tuple[int, ...],
        group: Any,
        device: Device,
        narrow: bool,
    ) -> None:
        grid, block, folded, counts = self._cuda_grid(sizes, group)
        launcher = self._launcher("cuda", len(sizes), group is not None, None, narrow, folded)
        values = [a.value for a in converted]
        stream = 0
        for argument in converted:
            if argument.tensor is not None:
                stream = getattr(argument.tensor._backend, "stream", 0) or 0
                break
        configured = launcher[grid, block, stream]
        self._run(launcher, lambda: configured(*sizes, *counts, *values), str(device), sizes)


_TENSOR: list[type] = []
_TRACE: list[Any] = []
_RECORDING: list[Any] = []


def _trace() -> Any:
    """kernelgrad.compile.trace (imported on first use: it imports this module)."""
    if not _TRACE:
        from ..compile import trace

        _TRACE.append(trace)
    return _TRACE[0]


def _recording() -> Any:
    """kernelgrad.backends.cuda.recording (a small module without numba imports)."""
    if not _RECORDING:
        from ..backends.cuda import recording

        _RECORDING.append(recording)
    return _RECORDING[0]


def _tensor_class() -> type:
    """kernelgrad's Tensor class (imported on first use: this module loads before it)."""
    if not _TENSOR:
        from ..tensor import Tensor

        _TENSOR.append(Tensor)
    return _TENSOR[0]


def _narrow_floats(converted: Sequence[_Argument]) -> bool:
    """The float32 rule: a kernel whose floating-point array arguments are all float32
    computes in float32. Its float literals become float32 (``transform.narrow_floats``)
    and so do Python float arguments (weak, as Python numbers are next to tensors);
    NumPy scalars keep their type. Returns whether the rule applies."""
    float32_arrays = wider = False
    for argument in converted:
        code = argument.type_code
        if isinstance(code, tuple):  # an array: ("A", dtype name, ndim)
            if code[1] == "float32":
                float32_arrays = True
            elif code[1].startswith("float"):
                wider = True
    if not float32_arrays or wider:
        return False
    for argument in converted:
        if argument.type_code == "f64" and type(argument.value) is float:
            argument.value = np.float32(argument.value)
            argument.type_code = "f32"
    return True


def _check_writable(kernel_name: str, name: str, shape: tuple, strides: tuple) -> None:
    for size, stride in zip(shape, strides):
        if stride == 0 and size > 1:
            raise KernelError(
                f"kernel '{kernel_name}' may write into argument '{name}', which is an "
                f"expanded (broadcast) view of shape {shape} with a zero stride: several "
                "elements share one memory location. Pass `.contiguous()` (a copy) instead"
            )


def kernel(
    fn: Callable[..., Any] | None = None,
    *,
    workgroup: Any = None,
    parallel: bool | None = None,
    fastmath: bool = False,
) -> Any:
    """Compile a Python function into a kernel that runs where its tensors live.

    The function body describes one *work item*; ``kg.index()`` says which. Launch it
    with ``ndrange`` (the number of work items: an int or a tuple for a grid) and
    optionally ``workgroup`` (the size of a group of items that share ``kg.shared``
    memory and meet at ``kg.barrier()``):

    >>> import kernelgrad as kg
    >>> @kg.kernel
    ... def clamp_(img):
    ...     i = kg.index()
    ...     v = img[i]
    ...     if v > 1.0:
    ...         img[i] = 1.0
    ...     elif v < 0.0:
    ...         img[i] = 0.0
    >>> img = kg.tensor([[-0.5, 0.5], [1.5, 0.25]])
    >>> clamp_(img, ndrange=img.numel())
    >>> img.tolist()
    [[0.0, 0.5], [1.0, 0.25]]

    Rules:

    * Tensor arguments arrive as arrays of their shape and strides, sharing memory
      (writes reach the tensor, whatever view it is). An argument that the body only
      ever indexes with *one* index (``img[i]``) is seen flat, in row-major order
      (linear indexing); a non-contiguous one is copied and copied back.
    * Numbers arrive as numbers; NumPy arrays run on the CPU, CUDA arrays on the GPU.
    * All arrays must live on one device: CPU tensors compile with
      ``numba.njit(parallel=True)``, CUDA tensors with ``numba.cuda.jit``.
    * Writes bump the written tensors' version counters (autograd's in-place check).
    * Compiled code is cached on disk; a second process loads it.
    * On the CPU, a launch of at least 131,072 work items (``KG_PARALLEL_THRESHOLD``) is
      spread over the cores and a smaller one runs on the calling thread (waking the
      worker threads costs more than many thousand cheap items). ``parallel=True``
      always spreads the items (for kernels whose items each do a lot of work, such as
      a loop over a whole row or image), ``parallel=False`` never does. CUDA launches ignore it.
    * ``fastmath=True`` lets the compiler reorder floating-point sums (so that a sum
      in a loop is vectorised) and fuse ``a * b + c`` into one multiply-add; results
      then differ from the written order in the last bits. On the CPU NaN and infinity
      keep their meaning; on CUDA it is numba-cuda's ``fastmath`` (which also flushes
      denormals to zero and uses faster division and square roots).
    """
    if fn is None:
        return lambda f: Kernel(f, workgroup, parallel, fastmath)
    return Kernel(fn, workgroup, parallel, fastmath)
