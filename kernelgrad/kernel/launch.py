"""``@kg.kernel``: one Python function, compiled for the device its tensors live on.

>>> import kernelgrad as kg
>>> @kg.kernel
... def add_one_(x):
...     i = kg.index()
...     x[i] += 1.0
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from .. import autograd
from ..backends import get_backend, kernel_launches_recorded, record_kernel_launch
from ..backends.base import KernelLaunch, View
from ..debug import compile_action, compile_counts, debug_level, log
from ..device import Device, as_device
from ..errors import DeviceMismatchError, InplaceError, KernelError, ShapeError
from . import arrays, transform


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

    __slots__ = ("copied", "copy_back", "device", "name", "tensor", "type_code", "value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.value: Any = None
        self.device: Device | None = None
        self.tensor: Any = None
        self.copy_back: Any = None
        self.copied = False  # the kernel got a copy of the tensor (a layout it cannot take)
        self.type_code: Any = None


class PreparedLaunch:
    """A kernel launch with its checks and conversions done (:meth:`Kernel.prepare`):
    ``call(arguments)`` runs the compiled form over ``arguments``, the backend's values
    of the kernel's arguments in order. ``kg.compile``'s replay calls it with
    ``arguments`` as they are, or with the arrays of some tensor arguments replaced by
    ``backend.kernel_array`` of other buffers of the same layouts (``flatten[i]``: the
    kernel indexes argument ``i`` with one index, so it takes the flat memory)."""

    __slots__ = ("arguments", "backend", "call", "flatten")

    def __init__(
        self,
        call: Callable[[list[Any]], None],
        arguments: list[Any],
        flatten: list[bool],
        backend: Any,
    ) -> None:
        self.call = call
        self.arguments = arguments
        self.flatten = flatten
        self.backend = backend


class Kernel:
    """A compiled-on-demand kernel. Call it as ``k(*args, ndrange=..., workgroup=...)``.

    See :func:`kernel` for the rules, and ``docs/kernels.md`` for the GPU model."""

    def __init__(
        self,
        fn: Callable[..., Any],
        workgroup: Any = None,
        parallel: bool | None = None,
        fastmath: bool = False,
        static: Sequence[str] = (),
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.default_workgroup = workgroup
        self.parallel = parallel
        self.fastmath = bool(fastmath)
        self.info = transform.analyze(fn)
        if self.info.uses_barrier:
            from ..backends.kernel_phases import check_structure

            check_structure(self.info)
        # compiled forms, filled by the backends (Backend.launch_kernel)
        self.launchers: dict[Any, Any] = {}
        self.static = tuple([static] if isinstance(static, str) else static)
        if self.static:
            from .specialize import check_static

            check_static(self.info, self.static)
        self._static_at = [self.info.params.index(name) for name in self.static]
        self._forms: dict[tuple, Kernel] = {}  # per static values: a specialised Kernel
        self._eager: dict[tuple, tuple] = {}  # launches remembered by Kernel.launch

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
        """Check, convert and launch (what calling the kernel does). A launch like an
        earlier one (the same argument dtypes, shapes, strides, devices, gradient
        flags, integers, ndrange and workgroup) reuses that one's checks and
        conversions where the backend has ``prepare_kernel`` (see :meth:`_eager_key`)."""
        key = None
        if not _trace().LAUNCH_HOOKS and not debug_level() and not kernel_launches_recorded():
            key = self._eager_key(args, ndrange, workgroup, device)
            entry = self._eager.get(key, _NEW) if key is not None else None
            if entry is None:  # a launch that cannot be remembered (see _remember)
                key = None
            elif entry is not _NEW:
                _launch_prepared(entry, args)
                return
        self._launch_checked(args, ndrange, workgroup, device)
        if key is not None:
            self._remember(key, args, ndrange, workgroup, device)

    def _launch_checked(
        self, args: Sequence[Any], ndrange: Any, workgroup: Any, device: Any
    ) -> None:
        sizes, group = self._launch_shape(len(args), ndrange, workgroup)
        for counter in _trace().LAUNCH_HOOKS:
            counter.count += 1
            counter.names.append(f"kernel {self.info.name}")
        program, converted, backend = self._arguments(args, device)
        try:
            launch = self._kernel_launch(converted, sizes, group, backend)
            if launch is None:
                return
            record_kernel_launch(program, launch)  # the CUDA compile check, when active
            backend.launch_kernel(program, launch)
        finally:
            self._finish(converted)

    def _eager_key(
        self, args: Sequence[Any], ndrange: Any, workgroup: Any, device: Any
    ) -> tuple | None:
        """What a launch's checks and conversions depend on, or None where a launch is
        not cached (arguments other than tensors and Python numbers, an ndrange or
        workgroup other than ints and tuples of ints)."""
        key: list[Any] = [autograd._mode.enabled, device]
        for sizes in (ndrange, workgroup):
            kind = type(sizes)
            if kind is tuple:
                key.append(sizes)
            elif kind is int or sizes is None:
                key.append((sizes,))
            else:
                return None
        tensor_class = _tensor_class()
        for value in args:
            kind = type(value)
            if kind is int or kind is bool:
                key.append((kind, value))
            elif kind is float:
                key.append(float)
            elif isinstance(value, tensor_class):
                storage = value._storage
                key.append(
                    (
                        value.dtype,
                        value._shape,
                        value._strides,
                        storage.backend,
                        value.requires_grad,
                    )
                )
            else:
                return None
        try:
            return tuple(key)
        except TypeError:  # pragma: no cover - an unhashable device argument
            return None

    def _remember(
        self, key: tuple, args: Sequence[Any], ndrange: Any, workgroup: Any, device: Any
    ) -> None:
        """Keep this (successful) launch's checks and conversions under ``key`` (None
        where the backend cannot prepare it, so that the next launch does not try)."""
        if len(self._eager) >= 256:
            self._eager.clear()
        with autograd.no_grad():
            prepared = self.prepare(args, ndrange, workgroup, device)
        if prepared is None:
            self._eager[key] = None
            return
        recipe = []
        tensor_class = _tensor_class()
        for position, value in enumerate(args):
            if isinstance(value, tensor_class):
                recipe.append(_FLAT if prepared.flatten[position] else _TENSOR)
            elif type(value) is float and type(prepared.arguments[position]) is np.float32:
                recipe.append(_FLOAT32)  # the float32 rule (see _narrow_floats)
            else:
                recipe.append(_AS_IS)
        written = [p for p, name in enumerate(self.info.params) if name in self.info.written]
        written = [p for p in written if isinstance(args[p], tensor_class)]
        self._eager[key] = (prepared, recipe, written)

    def prepare(
        self, args: Sequence[Any], ndrange: Any, workgroup: Any, device: Any
    ) -> PreparedLaunch | None:
        """This launch with every check and conversion done once, for ``kg.compile``'s
        replay, which launches it again over the same buffers or over others of the same
        layouts (see :class:`PreparedLaunch`). None where the backend has no
        ``prepare_kernel``, where an argument had to be copied for the kernel (a copy
        would be stale on the next call), or where the ndrange is empty. Call it after
        one :meth:`launch` of the same arguments (which compiled the kernel)."""
        sizes, group = self._launch_shape(len(args), ndrange, workgroup)
        program, converted, backend = self._arguments(args, device)
        prepare = getattr(backend, "prepare_kernel", None)
        if prepare is None:
            return None
        launch = self._kernel_launch(converted, sizes, group, backend)
        if launch is None or any(a.copied for a in converted):
            return None
        linear = self.info.linear
        flatten = [
            a.tensor is not None and a.name in linear and a.tensor.ndim != 1 for a in converted
        ]
        return PreparedLaunch(prepare(program, launch), list(launch.arguments), flatten, backend)

    def prefetch(self, *args: Any, ndrange: Any, workgroup: Any = None, device: Any = None) -> None:
        """Start compiling this kernel for a later launch whose arguments have the same
        dtypes, ranks and static values as ``args`` (their sizes and contents do not
        matter: small stand-ins will do), where the backend can do that in the background
        (the CPU: a compile worker process, docs/kernels.md). Returns at once; does
        nothing where the backend cannot, while ``kg.compile`` traces, or when the form
        is compiled already. A layer calls it for the kernels its backward pass will
        launch, so that they compile while the forward pass runs."""
        if _trace().active_recorder() is not None:
            return
        sizes, group = self._launch_shape(len(args), ndrange, workgroup)
        program, converted, backend = self._arguments(args, device)
        prefetch = getattr(backend, "prefetch_kernel", None)
        try:
            if prefetch is not None:
                launch = self._kernel_launch(converted, sizes, group, backend)
                if launch is not None:
                    prefetch(program, launch)
        finally:
            self._finish(converted)

    def _launch_shape(
        self, count: int, ndrange: Any, workgroup: Any
    ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
        """The ndrange's and workgroup's sizes, checked against the kernel."""
        info = self.info
        if count != len(info.params):
            raise TypeError(
                f"kernel '{info.name}' takes {len(info.params)} arguments "
                f"({', '.join(info.params)}), got {count}"
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
        return sizes, group

    def _arguments(self, args: Sequence[Any], device: Any) -> tuple[Kernel, list[_Argument], Any]:
        """The kernel's form for these static values, the converted arguments, and the
        backend of the device they are on."""
        program = self._form(args) if self._static_at else self
        converted = [self._convert(name, value) for name, value in zip(self.info.params, args)]
        backend = get_backend(self._device(converted, device))
        return program, converted, backend

    def _kernel_launch(
        self,
        converted: list[_Argument],
        sizes: tuple[int, ...],
        group: tuple[int, ...] | None,
        backend: Any,
    ) -> KernelLaunch | None:
        """The backend's launch description (arrays made from the tensors, the float32
        rule applied); None for an empty ndrange."""
        self._prepare_arrays(converted, backend)
        narrow = _narrow_floats(converted)
        if prod(sizes) == 0:
            return None
        return KernelLaunch(
            sizes,
            group,
            [a.value for a in converted],
            tuple(a.type_code for a in converted),
            narrow,
            any(a.tensor is not None for a in converted),
        )

    def _form(self, args: Sequence[Any]) -> Kernel:
        """The kernel specialised on the values of its static arguments (made once per
        combination; ``kernel/specialize.py``)."""
        from .specialize import specialize, static_value

        values = tuple(
            static_value(self.info.name, self.static[k], args[at])
            for k, at in enumerate(self._static_at)
        )
        key = tuple((type(v), v) for v in values)  # True and 1 compile differently
        form = self._forms.get(key)
        if form is None:
            form = copy.copy(self)
            form.info = specialize(self.info, dict(zip(self.static, values)))
            form.launchers = {}
            form._static_at = []
            form._forms = {}
            self._forms[key] = form
        return form

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

    def _prepare_arrays(self, converted: Sequence[_Argument], backend: Any) -> None:
        info = self.info
        for argument in converted:
            if argument.tensor is not None:
                tensor = argument.tensor
                flatten = argument.name in info.linear and tensor.ndim != 1
                work = tensor  # only its memory is used (no autograd)
                value = None
                if not (flatten and not tensor.is_contiguous()):
                    value = backend.kernel_array(_view(work, flatten))
                if value is None:  # a layout the kernel cannot take: a contiguous copy
                    with autograd.no_grad():
                        work = tensor.detach().clone()
                    argument.copied = True
                    if argument.name in info.written:
                        argument.copy_back = work
                    value = backend.kernel_array(_view(work, flatten))
                argument.value = value
                argument.type_code = ("A", tensor.dtype.name, 1 if flatten else tensor.ndim)
            elif argument.type_code is None:  # a raw array
                value = argument.value
                if argument.name in info.linear and len(value.shape) != 1:
                    if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
                        raise KernelError(
                            f"kernel '{info.name}': argument '{argument.name}' is indexed "
                            "with one index (linear indexing), which needs a contiguous "
                            "array; pass np.ascontiguousarray(...) or a tensor"
                        )
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

    # --- running (called back by the backend) -------------------------------------------
    def run(self, launcher: Any, call: Callable[[], None], label: str, sizes: tuple) -> None:
        """Run ``call`` (a launch of ``launcher``, a compiled form of this kernel):
        Numba's errors become a ``KernelError`` naming the kernel and the generated file;
        under ``KG_DEBUG`` compiles (and launches) are logged."""
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


# how _launch_prepared makes each argument's value (see Kernel._remember)
_TENSOR, _FLAT, _FLOAT32, _AS_IS = range(4)
_NEW = object()  # Kernel._eager has no entry for a key yet


def _launch_prepared(entry: tuple, args: Sequence[Any]) -> None:
    """A launch like the one ``entry`` remembers: only the tensors' arrays are made
    again (their buffers and offsets change; their layouts are the key's)."""
    prepared, recipe, written = entry
    kernel_array = prepared.backend.kernel_array
    values = []
    for value, how in zip(args, recipe):
        if how == _TENSOR:
            values.append(kernel_array(_view(value, False)))
        elif how == _FLAT:
            values.append(kernel_array(_view(value, True)))
        elif how == _FLOAT32:
            values.append(np.float32(value))
        else:
            values.append(value)
    prepared.call(values)
    for position in written:
        args[position]._storage.version += 1


def _view(tensor: Any, flatten: bool) -> View:
    """The tensor's memory as a backend view (its flat memory when ``flatten``: the caller
    made sure it is contiguous)."""
    shape, strides = tensor._shape, tensor._strides
    if flatten:
        shape, strides = (tensor.numel(),), (1,)
    # View(...) through tuple.__new__: the named tuple's own __new__ is a Python function
    return _new_view(View, (tensor._storage.buffer, shape, strides, tensor._offset, tensor.dtype))


_new_view = tuple.__new__


_TENSOR_CLASS: list[type] = []
_TRACE: list[Any] = []


def _trace() -> Any:
    """kernelgrad.compile.trace (imported on first use: it imports this module)."""
    if not _TRACE:
        from ..compile import trace

        _TRACE.append(trace)
    return _TRACE[0]


def _tensor_class() -> type:
    """kernelgrad's Tensor class (imported on first use: this module loads before it)."""
    if not _TENSOR_CLASS:
        from ..tensor import Tensor

        _TENSOR_CLASS.append(Tensor)
    return _TENSOR_CLASS[0]


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
    static: Sequence[str] = (),
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
    * ``static=("k", ...)`` names integer or boolean parameters whose values are
      compiled into the kernel: each combination of values compiles a form of its own,
      in which branches on them are decided (``if k == 5:`` keeps only the path taken).
      For a kernel with fast paths for a few shapes it saves compile time; a parameter
      that takes many values would compile many forms.
    """
    if fn is None:
        return lambda f: Kernel(f, workgroup, parallel, fastmath, static)
    return Kernel(fn, workgroup, parallel, fastmath, static)
