"""Explicitly fused elementwise kernels with several outputs.

``ops.elementwise.apply`` runs scalar functions with one output. Some layers and the
optimizers want one kernel that reads several tensors and writes several (Adam's
parameter, first and second moment; the gradient of every position of a pooling
window). The backend protocol already supports that: a :class:`ScalarFunction` may
return a tuple of ``nout`` values, each stored into its own output view. This module
is the thin front end for it: it checks devices and shapes, broadcasts inputs, and
bumps the version counter of every output (they are written in place).

Like every elementwise op, a fused kernel is one scalar Python function, compiled by
whichever backend holds the tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import tracing
from ..backends.base import ScalarFunction, View
from ..dtypes import DType
from ..errors import DeviceMismatchError, ShapeError, format_shape
from ..tensor import Tensor

_GENERATED: dict[tuple[str, int, int], ScalarFunction] = {}


def launch(
    fn: ScalarFunction,
    outputs: Sequence[Tensor],
    inputs: Sequence[Any],
    compute_dtype: DType,
) -> None:
    """``outputs[k][...] = fn(*inputs)[k]`` for every index of the outputs' shape.

    Every output has the same shape; tensor inputs broadcast to it; Python numbers are
    passed as scalars. All values are converted to ``compute_dtype`` before ``fn`` sees
    them. No autograd is recorded: callers attach their own VJP, or run under no_grad.
    """
    outs, views = _views(fn, outputs, inputs)
    outputs[0]._backend.elementwise(fn, outs, views, [compute_dtype] * len(inputs))
    for out in outputs:
        out._storage.version += 1


def launch_each(
    fn: ScalarFunction,
    items: Sequence[tuple[Sequence[Tensor], Sequence[Any]]],
    compute_dtype: DType,
) -> None:
    """:func:`launch` for each ``(outputs, inputs)`` of ``items``, in as few kernels as the
    backend can: a backend with ``elementwise_foreach`` (the CPU's) runs the items of one
    device in one kernel. An optimizer updates every parameter this way: one launch
    instead of one per parameter (an Adam step of LeNet-5 on the CPU: 290 -> 245 us).
    While kg.compile traces, the items are launched one by
    one, as the trace records (and fuses) per-tensor kernels."""

    by_device: dict[Any, list[tuple[Sequence[Tensor], Sequence[Any]]]] = {}
    for item in items:
        # one backend object per device, hashed by identity (a Device hashes in Python)
        by_device.setdefault(item[0][0]._storage.backend, []).append(item)
    for same_device in by_device.values():
        backend = same_device[0][0][0]._backend
        foreach = getattr(backend, "elementwise_foreach", None)
        if foreach is None or len(same_device) == 1 or tracing.active_recorder() is not None:
            for outputs, inputs in same_device:
                launch(fn, outputs, inputs, compute_dtype)
            continue
        foreach(
            fn,
            [_views(fn, outputs, inputs) for outputs, inputs in same_device],
            [compute_dtype] * fn.nin,
        )
        for outputs, _ in same_device:
            for out in outputs:
                out._storage.version += 1


class FedLaunch:
    """:func:`launch_each` of a fixed list of items, prepared once, with the operands that
    change from call to call given on each call (see :func:`prepare_each_fed`)."""

    __slots__ = ("_backend", "_launch", "_shapes", "_storages")

    def __init__(self, backend: Any, launch: Callable, items: Sequence, fed_array: int) -> None:
        self._backend = backend
        self._launch = launch
        # what each fed array must be: the shape, strides and dtype it had when prepared
        self._shapes = [
            (inputs[fed_array]._shape, inputs[fed_array]._strides, inputs[fed_array].dtype)
            for _, inputs in items
        ]
        self._storages = [out._storage for outputs, _ in items for out in outputs]

    def ready(self) -> bool:
        """Whether a call launches now: nothing watches the backend's primitives (a
        kg.compile trace, ``count_launches``, which wrap them on the instance and must
        see the launches through them: the caller then takes :func:`launch_each`)."""
        watched = self._backend.__dict__
        return (
            "elementwise_foreach" not in watched
            and "elementwise" not in watched
            and tracing.active_recorder() is None
        )

    def accepts(self, arrays: Sequence[Tensor]) -> bool:
        """Whether ``arrays`` (one fed tensor per item) have the layouts prepared for."""
        backend = self._backend
        for x, (shape, strides, dtype) in zip(arrays, self._shapes):
            if (
                x._shape != shape
                or x._strides != strides
                or x.dtype is not dtype
                or x._storage.backend is not backend
            ):
                return False
        return len(arrays) == len(self._shapes)

    def __call__(self, arrays: Sequence[Tensor], scalars: Sequence[Any]) -> None:
        """Launch with these fed tensors (checked with :meth:`accepts` by the caller) and
        numbers; every output's version counter goes up, as in :func:`launch_each`."""
        self._launch(
            [_new_view(View, (x._storage.buffer, x._shape, x._strides, x._offset, x.dtype))
             for x in arrays],
            scalars,
        )  # fmt: skip
        for storage in self._storages:
            storage.version += 1


def prepare_each_fed(
    fn: ScalarFunction,
    items: Sequence[tuple[Sequence[Tensor], Sequence[Any]]],
    compute_dtype: DType,
    fed_array: int,
    fed_scalars: Sequence[int],
) -> FedLaunch | None:
    """:func:`launch_each` of ``items`` prepared once for repeated calls in which input
    ``fed_array`` of each item (a tensor of the same layout each time) and the numbers at
    ``fed_scalars`` (one value per position for every item) change, and nothing else:
    the backend resolves its grouping, kernels and the other buffers once
    (``prepare_elementwise_foreach_fed``, optional in the Backend protocol). An
    optimizer's update: its parameters and state stay from step to step, its gradients
    and step sizes do not. None where the backend cannot, the items span devices, or
    kg.compile traces."""
    if not items or tracing.active_recorder() is not None:
        return None
    backend = items[0][0][0]._storage.backend
    prepare = getattr(backend, "prepare_elementwise_foreach_fed", None)
    if prepare is None:
        return None
    for outputs, inputs in items:
        for t in (*outputs, *(x for x in inputs if isinstance(x, Tensor))):
            if t._storage.backend is not backend:
                return None
    if not all(isinstance(inputs[fed_array], Tensor) for _, inputs in items):
        return None
    views = [_views(fn, outputs, inputs) for outputs, inputs in items]
    launch = prepare(fn, views, [compute_dtype] * fn.nin, fed_array, tuple(fed_scalars))
    return None if launch is None else FedLaunch(backend, launch, items, fed_array)


_new_view = tuple.__new__  # View(...) without the named tuple's Python-level __new__

_ASKED: set[tuple] = set()  # compile-ahead requests the layers made (asked_before)


def asked_before(key: tuple) -> bool:
    """Whether the kernels ``key`` names were asked for ahead already, noting that they
    now have been. Those forms depend on dtypes, devices and static settings only, so a
    layer asks once per key, not on every pass (an ask costs stand-ins, conversions and
    a lookup in the compiled-code cache)."""
    if key in _ASKED:
        return True
    _ASKED.add(key)
    return False


def prefetch(fn: ScalarFunction, like: Tensor, layouts: Sequence[str]) -> None:
    """Have ``fn``'s kernel, every operand an array of ``like``'s dtype, compiled ahead
    for each of ``layouts`` (``"contiguous"``, ``"rows"``: strided with contiguous rows,
    ``"strided"``) where the backend can (``prefetch_elementwise``: a compile worker on
    the CPU); returns at once. A layer calls it for a kernel its backward pass will
    launch, so that it compiles while the forward pass goes on."""
    prefetch_elementwise = getattr(like._backend, "prefetch_elementwise", None)
    if prefetch_elementwise is None or tracing.active_recorder() is not None:
        return
    if asked_before(("elementwise", fn.key, like.dtype, like._backend, tuple(layouts))):
        return
    dtype = like.dtype
    inputs = [dtype] * fn.nin
    prefetch_elementwise(fn, ("array",) * fn.nin, inputs, [dtype] * fn.nout, inputs, layouts)


def prefetch_each(
    fn: ScalarFunction, kinds: Sequence[str], tensors: Sequence[Tensor], dtype: DType
) -> None:
    """Have the kernels that :func:`launch_each` will run for one item per tensor of
    ``tensors`` (each item the tensor's shape, every operand contiguous, ``kinds`` per
    input: ``"array"``, ``"scalar"``, or ``"out<k>"`` for output ``k`` read in place)
    compiled ahead where the backend can (``prefetch_elementwise_foreach``); returns
    at once. An optimizer calls it when it is made, so that its first step finds its
    update kernel compiled."""
    if not tensors or tracing.active_recorder() is not None:
        return
    prefetch = getattr(tensors[0]._backend, "prefetch_elementwise_foreach", None)
    if prefetch is None:
        return
    arrays = [dtype for kind in kinds if kind == "array"]
    sizes = [t.numel() for t in tensors]
    prefetch(fn, tuple(kinds), [dtype] * fn.nin, [dtype] * fn.nout, arrays, sizes)


def _views(fn: ScalarFunction, outputs: Sequence[Tensor], inputs: Sequence[Any]) -> tuple:
    """The backend views of one launch, after checking counts, devices and shapes."""
    if len(outputs) != fn.nout:
        raise ValueError(f"{fn.name}: expected {fn.nout} outputs, got {len(outputs)}")
    if len(inputs) != fn.nin:
        raise ValueError(f"{fn.name}: expected {fn.nin} inputs, got {len(inputs)}")
    shape = outputs[0]._shape
    device = outputs[0].device
    for t in list(outputs) + [x for x in inputs if isinstance(x, Tensor)]:
        if t._storage.device is not device and t.device != device:
            raise DeviceMismatchError(
                f"{fn.name}: expected every tensor on {device}, found one on {t.device}"
            )
    for out in outputs:
        if out._shape != shape:
            raise ShapeError(
                f"{fn.name}: outputs must share one shape, got {format_shape(shape)} and "
                f"{format_shape(out.shape)}"
            )
    views = [x._broadcast_view(shape) if isinstance(x, Tensor) else x for x in inputs]
    return [o._view() for o in outputs], views


def error_flag(device: Any, make_error: Callable[[int], BaseException]) -> tuple[Tensor, Any]:
    """A two-element int64 tensor (zero) for a kernel to report a bad value into
    (``[value, 1]``), and a function to call right after the launch, which raises
    ``make_error(value)`` if the kernel reported one: ``ops.indexing``'s flags, shared by
    the gathers there. On the CPU the function reads the flag at once (one flag per
    device and thread, zeroed again when it reports an error); a backend with
    ``error_slot`` (CUDA) hands out a slot of its flag table and raises the error at its
    next device-to-host read (``backends/cuda/flags.py``); while kg.compile traces, the
    check is recorded as a host operation (``ops.indexing.traced_error_flag``)."""
    from ..ops.indexing import _error_flag

    return _error_flag(device, make_error)


def _add(x, y):
    return x + y


_ADD = ScalarFunction.from_python(_add)


def accumulate(target: Tensor, source: Tensor) -> None:
    """``target += source`` for two views of equal shape and dtype that do not overlap
    (one kernel, none of the checks that ``Tensor.add_`` makes for autograd)."""
    launch(_ADD, [target], [target, source], target.dtype)


def from_source(name: str, source: str, nin: int, nout: int) -> ScalarFunction:
    """A scalar function built from generated source (cached by name and arity)."""
    key = (name, nin, nout)
    fn = _GENERATED.get(key)
    if fn is None:
        fn = _GENERATED[key] = ScalarFunction(name, source, nin, nout)
    return fn
