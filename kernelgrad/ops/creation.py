"""Creating tensors: from data, constant fills, ranges, and random numbers.

Every function takes ``dtype=``, ``device=`` (the default device when None, see
``kg.device``) and ``requires_grad=``. Shapes may be given as ``zeros(3, 4)`` or
``zeros((3, 4))``. Python floats give the default float type (float32), Python ints
int64, and NumPy arrays keep their dtype.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np

from .. import tracing
from ..backends import get_backend, loaded_backends
from ..device import Device, as_device, default_device
from ..dtypes import DType, as_dtype, bool_, default_float, int64
from ..errors import ArgumentError, DTypeError, ShapeError
from ..shapes import normalize_size
from ..tensor import Tensor
from . import register
from .elementwise import IDENTITY, check_scalar_fits

register("full", "creation", ("kg.full", "kg.zeros", "kg.ones", "kg.empty"), False)
register("from_data", "creation", ("kg.tensor", "kg.from_numpy", "kg.arange"), False)
register("random", "random", ("kg.rand", "kg.randn", "kg.randint"), False)


def _device(device: Any) -> Device:
    return default_device() if device is None else as_device(device)


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_dtype(data: Any) -> DType:
    """The dtype kg.tensor gives ``data`` when none is requested."""
    if isinstance(data, np.ndarray):
        return as_dtype(data.dtype)
    if isinstance(data, np.generic):
        return as_dtype(data.dtype)
    array = np.asarray(data)
    if array.dtype.kind == "b":
        return bool_
    if array.dtype.kind in "iu":
        return int64
    if array.dtype.kind == "f":
        return default_float()
    raise DTypeError(
        f"tensor: cannot make a tensor from {type(data).__name__} data with NumPy dtype "
        f"{array.dtype}; give numbers, nested lists of numbers, or a NumPy array"
    )


def tensor(data: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (a number, nested lists, a NumPy array or
    another tensor).

    >>> import kernelgrad as kg
    >>> kg.tensor([[1, 2], [3, 4]]).dtype
    kg.int64
    >>> kg.tensor([1.5, 2.0]).dtype
    kg.float32
    """
    if isinstance(data, Tensor):
        result = data.detach().to(device=device, dtype=dtype)
        if result is data or result._storage is data._storage:
            result = result.clone()
        return _finish(result, requires_grad)
    target = _device(device)
    try:
        array = np.asarray(data)
    except ValueError as error:
        raise ShapeError(
            f"tensor: cannot make a tensor from this data: {error}. Nested lists must be "
            "rectangular (every row the same length)"
        ) from None
    chosen = as_dtype(dtype) if dtype is not None else _infer_dtype(data)
    if chosen.is_integer and array.dtype.kind in "iuf" and array.size:
        _check_integer_values(array, chosen)
    array = array.astype(chosen.numpy, copy=False)
    backend = get_backend(target)
    buffer = backend.from_numpy(np.ascontiguousarray(array))
    return _finish(Tensor._from_buffer(buffer, array.shape, chosen, target), requires_grad)


def _check_integer_values(array: np.ndarray, dtype: DType) -> None:
    """Data for an integer tensor must have integer values in range (PyTorch: "value
    cannot be converted to type int without overflow"); NumPy would wrap or give
    INT_MIN with a warning."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ArgumentError(
            f"tensor: the data holds NaN or infinity, which {dtype} cannot represent; make a "
            "floating point tensor"
        )
    limits = np.iinfo(dtype.numpy)
    low, high = array.min(), array.max()
    if low < limits.min or high > limits.max:
        raise ArgumentError(
            f"tensor: the data's values {low} to {high} do not fit {dtype} (range "
            f"{limits.min} to {limits.max}); choose a wider dtype"
        )


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like :func:`tensor`, but returns ``data`` itself when it already matches, and
    shares a NumPy array's memory (writes to one show in the other) when the result is a
    CPU tensor of the array's own dtype, as ``torch.as_tensor`` does; any layout without
    a negative stride is shared (transposed, sliced with a step). Otherwise the result
    is a copy: another dtype (asked for, or one a tensor converts, such as uint8),
    another device, a negative stride (which PyTorch refuses), or a read-only array.
    PyTorch shares a read-only array and warns that writing to the tensor is undefined;
    kernelgrad copies it, so in-place operations (``add_``, optimizer steps) stay
    defined. ``default_convert`` and the DataLoader's batches follow this rule.

    >>> import numpy as np, kernelgrad as kg
    >>> array = np.zeros(3, dtype=np.float32)
    >>> t = kg.as_tensor(array)
    >>> array[0] = 2.0
    >>> t.tolist()
    [2.0, 0.0, 0.0]
    """
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and _device(device).type == "cpu" and _shareable(data, dtype):
        try:
            return from_numpy(data)
        except DTypeError:  # a dtype kernelgrad has no tensor of: converted below
            pass
    return tensor(data, dtype=dtype, device=device)


def _shareable(array: np.ndarray, dtype: Any) -> bool:
    """A tensor of ``dtype`` (None: the array's) may share ``array``'s memory: it is
    writable (a tensor may be written in place), of that native numeric or bool dtype,
    and every stride is a non-negative multiple of the item size."""
    return (
        (dtype is None or np.dtype(as_dtype(dtype).numpy) == array.dtype)
        and array.flags.writeable
        and array.dtype.kind in "biuf"
        and array.dtype.isnative
        and _shares_strides(array)
    )


def _shares_strides(array: np.ndarray) -> bool:
    """Whether a tensor can view ``array``'s layout: every stride a non-negative
    multiple of the item size."""
    return all(stride >= 0 and stride % array.itemsize == 0 for stride in array.strides)


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor that shares memory with a NumPy array of any layout with
    non-negative strides (transposed, sliced with a step), as ``torch.from_numpy``.

    >>> import numpy as np, kernelgrad as kg
    >>> array = np.zeros((2, 3))
    >>> t = kg.from_numpy(array[:, ::2])
    >>> array[0, 2] = 5.0
    >>> t.tolist()
    [[0.0, 5.0], [0.0, 0.0]]
    """
    if not isinstance(array, np.ndarray):
        raise DTypeError(f"from_numpy expects a NumPy array, got {type(array).__name__}")
    dtype = as_dtype(array.dtype)
    if array.dtype != dtype.numpy:
        raise DTypeError(
            f"from_numpy shares memory, so it needs an array of a supported dtype (got "
            f"{array.dtype}); use kg.tensor(array) to copy and convert instead"
        )
    device = as_device("cpu")
    if not array.flags.writeable:  # shared all the same, as torch.from_numpy does
        warnings.warn(
            "from_numpy: the NumPy array is read-only, and the tensor shares its memory: "
            "reading works, but writing to the tensor in place will fail (inside a "
            "compiled kernel, with Numba's typing error about a 'readonly array'). To "
            "write, copy first: `kg.tensor(array)` or `kg.from_numpy(array.copy())`",
            UserWarning,
            stacklevel=2,
        )
    if array.flags.c_contiguous:
        return Tensor._from_buffer(array.reshape(-1), array.shape, dtype, device)
    if not _shares_strides(array):
        raise ArgumentError(
            f"from_numpy: at least one stride of the array is negative or not a multiple of "
            f"its item size (strides {array.strides}, in bytes), which tensors cannot share "
            "(PyTorch refuses it too); copy first: `kg.from_numpy(array.copy())` or "
            "`kg.tensor(array)`"
        )
    return _share_strided(array, dtype, device)


def _share_strided(array: np.ndarray, dtype: DType, device: Any) -> Tensor:
    """A tensor viewing the memory of a strided array: the flat buffer spans from its
    first to its last element, and the tensor is a strided view of that buffer."""
    strides = tuple(stride // array.itemsize for stride in array.strides)
    span = 1 + sum((size - 1) * stride for size, stride in zip(array.shape, strides))
    if array.size == 0:
        span = 0
    flat = np.lib.stride_tricks.as_strided(array, shape=(span,), strides=(array.itemsize,))
    base = Tensor._from_buffer(flat, (span,), dtype, device)
    from .movement import make_view

    view = make_view(base, array.shape, strides, 0)
    view._base = None  # the buffer belongs to NumPy; the view is the user's tensor
    return view


def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    shape = normalize_size(size, "empty")
    chosen = as_dtype(dtype) if dtype is not None else default_float()
    return _finish(Tensor._empty(shape, chosen, _device(device)), requires_grad)


def full(
    size: Any,
    fill_value: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``; the dtype follows the value."""
    shape = normalize_size((size,), "full")
    if dtype is None:
        dtype = _infer_dtype(fill_value)
    result = Tensor._empty(shape, as_dtype(dtype), _device(device))
    if not result.dtype.is_floating_point:
        check_scalar_fits(fill_value, result.dtype, "full")
    if result.numel():
        result._backend.elementwise(IDENTITY.scalar, [result._view()], [fill_value], [result.dtype])
    return _finish(result, requires_grad)


def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros: ``kg.zeros(2, 3)`` or ``kg.zeros((2, 3))``.

    >>> import kernelgrad as kg
    >>> kg.zeros(2, 3).shape
    kg.Size([2, 3])
    """
    shape = normalize_size(size, "zeros")
    return full(
        shape, 0, dtype=dtype or default_float(), device=device, requires_grad=requires_grad
    )


def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    shape = normalize_size(size, "ones")
    return full(
        shape, 1, dtype=dtype or default_float(), device=device, requires_grad=requires_grad
    )


def _like(x: Tensor, dtype: Any, device: Any) -> tuple[DType, Any]:
    return (as_dtype(dtype) if dtype is not None else x.dtype), (device or x.device)


def zeros_like(
    x: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    d, dev = _like(x, dtype, device)
    return full(x.shape, 0, dtype=d, device=dev, requires_grad=requires_grad)


def ones_like(
    x: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    d, dev = _like(x, dtype, device)
    return full(x._shape, 1, dtype=d, device=dev, requires_grad=requires_grad)


def full_like(
    x: Tensor, fill_value: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    d, dev = _like(x, dtype, device)
    return full(x.shape, fill_value, dtype=d, device=dev, requires_grad=requires_grad)


def empty_like(
    x: Tensor, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    d, dev = _like(x, dtype, device)
    return empty(x.shape, dtype=d, device=dev, requires_grad=requires_grad)


def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Values from ``start`` (inclusive) to ``end`` (exclusive) in steps of ``step``.

    >>> import kernelgrad as kg
    >>> kg.arange(4).tolist(), kg.arange(0, 1, 0.25).tolist()
    ([0, 1, 2, 3], [0.0, 0.25, 0.5, 0.75])
    """
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ArgumentError("arange: step must not be zero")
    is_float = any(isinstance(v, float) for v in (start, end, step))
    chosen = as_dtype(dtype) if dtype is not None else (default_float() if is_float else int64)
    _refuse_bool(chosen, "arange")
    if not all(math.isfinite(v) for v in (start, end, step)):
        raise ArgumentError(
            f"arange: start, end and step must be finite, got {start}, {end}, {step}"
        )
    count = max(0, math.ceil((end - start) / step))
    values = start + np.arange(count, dtype=np.float64 if is_float else np.int64) * step
    return tensor(values, dtype=chosen, device=device, requires_grad=requires_grad)


def linspace(
    start: float,
    end: float,
    steps: int,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    if steps < 0:
        raise ArgumentError(f"linspace: steps must be non-negative, got {steps}")
    chosen = as_dtype(dtype) if dtype is not None else default_float()
    _refuse_bool(chosen, "linspace")
    if not chosen.is_floating_point and not (math.isfinite(start) and math.isfinite(end)):
        raise ArgumentError(
            f"linspace: a range of {chosen} needs finite ends, got {start} and {end}"
        )
    values = np.linspace(start, end, steps)
    return tensor(values, dtype=chosen, device=device, requires_grad=requires_grad)


def _refuse_bool(dtype: DType, op: str) -> None:
    """A range of bools is not meaningful; PyTorch raises too (``"linspace_cpu" not
    implemented for 'Bool'``), where NumPy would quietly give ``[False, True, True]``."""
    if dtype is bool_:
        raise DTypeError(
            f"{op}: dtype bool is not supported for a range of values; make the range in an "
            f"integer or float dtype and compare it, e.g. `kg.{op}(...) > 0`"
        )


def eye(
    n: int, m: int | None = None, dtype: Any = None, device: Any = None, requires_grad: bool = False
) -> Tensor:
    """The identity matrix (``n`` x ``m``, square by default)."""
    rows, columns = normalize_size((n, n if m is None else m), "eye")
    chosen = as_dtype(dtype) if dtype is not None else default_float()
    return tensor(np.eye(rows, columns), dtype=chosen, device=device, requires_grad=requires_grad)


# --- random numbers --------------------------------------------------------------------------
class _SeedState:
    seed: ClassVar[int | None] = None
    seeded_devices: ClassVar[set[Device]] = set()


def manual_seed(seed: int) -> None:
    """Seed the random generators of every device (those in use and those to come).

    Each backend has its own generator: the same seed gives reproducible numbers on one
    device, not the same numbers on different devices."""
    _SeedState.seed = int(seed)
    _SeedState.seeded_devices = set()
    for device, backend in loaded_backends().items():
        backend.manual_seed(int(seed))
        _SeedState.seeded_devices.add(device)


def get_rng_state(device: Any = None) -> Any:
    """The state of ``device``'s random generator (default: the default device), to give
    back to :func:`set_rng_state` later, e.g. when resuming training from a checkpoint.

    >>> import kernelgrad as kg
    >>> state = kg.get_rng_state()
    >>> first = kg.rand(3).tolist()
    >>> kg.set_rng_state(state)
    >>> kg.rand(3).tolist() == first
    True
    """
    target = _device(device)
    backend = get_backend(target)
    if _SeedState.seed is not None and target not in _SeedState.seeded_devices:
        backend.manual_seed(_SeedState.seed)
        _SeedState.seeded_devices.add(target)
    return backend.get_rng_state()


def set_rng_state(state: Any, device: Any = None) -> None:
    """Restore a state that :func:`get_rng_state` returned for the same kind of device."""
    target = _device(device)
    get_backend(target).set_rng_state(state)
    _SeedState.seeded_devices.add(target)  # a later manual_seed still re-seeds it


class Generator:
    """PyTorch's ``torch.Generator``: a random stream of its own on one device. The
    functions that take ``generator=`` (``rand``, ``randn``, ``randint``, ``randperm``,
    ``normal``, ``bernoulli``, ``multinomial``) draw from it and leave the device's default
    stream (``kg.manual_seed``) where it was; ``random_split``, ``DataLoader`` and the
    samplers take their seed from its ``initial_seed()``. Its numbers are the device's
    Philox stream seeded with its seed: a generator seeded with ``s`` gives what
    ``kg.manual_seed(s)`` would (PyTorch's generator gives other numbers).

    >>> import kernelgrad as kg
    >>> g = kg.Generator().manual_seed(7)
    >>> first = kg.rand(3, generator=g).tolist()
    >>> kg.rand(3, generator=kg.Generator().manual_seed(7)).tolist() == first
    True

    Inside ``kg.compile`` the draws from a generator are replayed from that generator,
    and so are its creation and ``manual_seed`` (a replay seeds the trace's generator
    object again); ``seed``, ``get_state`` and ``set_state`` are refused there (their
    values are Python's, which a replay does not see).
    """

    def __init__(self, device: Any = "cpu") -> None:
        self.device = as_device(device)
        self._seed = 67280421310721  # PyTorch's default seed
        self._state: Any = None  # the backend's stream state, made from the seed when first used
        _seeded_while_tracing(self)

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self._state = None
        _seeded_while_tracing(self)
        return self

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        """Seed with a fresh random number (returned)."""
        import secrets

        _refuse_while_tracing("seeds a kg.Generator from fresh entropy (Generator.seed())")
        self.manual_seed(secrets.randbits(63))
        return self._seed

    def get_state(self) -> Any:
        """The stream's state (the backend's: a dict of its Philox seed and counter), for
        :meth:`set_state`."""
        _refuse_while_tracing("reads a kg.Generator's state (Generator.get_state())")
        return dict(self._state) if self._state is not None else {"seed": self._seed, "fresh": 1}

    def set_state(self, state: Any) -> Generator:
        _refuse_while_tracing("sets a kg.Generator's state (Generator.set_state())")
        if state.get("fresh"):
            return self.manual_seed(state["seed"])
        self._state = dict(state)
        return self

    def __repr__(self) -> str:
        return f"<kg.Generator on {self.device}, initial seed {self._seed}>"


def _seeded_while_tracing(generator: Generator) -> None:
    """Tell a ``kg.compile`` trace in progress on this thread that ``generator`` was
    made or seeded, so that its replays seed it again (``Recorder.generator_seeded``)."""
    recorder = tracing.active_recorder()
    if recorder is not None:
        recorder.generator_seeded(generator)


def _refuse_while_tracing(what: str) -> None:
    """Refuse a generator operation that kg.compile cannot replay while a trace runs on
    this thread."""
    tracing.refuse(
        f"kg.compile: the function {what} while being traced. A replay does not run "
        "the function's Python code, so it would not see that value. Do it outside the "
        "compiled function; inside, draw from a kg.Generator made or seeded with "
        "manual_seed (both replayed), or save the default stream's state with "
        "kg.get_rng_state and restore it with kg.set_rng_state (replayed)"
    )


class _DrawnFrom:
    """Within the block, the device's random stream is ``generator``'s (see
    :class:`Generator`); its default stream is put back at the end. While ``kg.compile``
    traces, the trace is told (``Recorder.drawing_from``), so that it records the draws
    as the generator's, and the swap as part of them."""

    def __init__(self, generator: Generator | None, device: Device) -> None:
        self.generator, self.device = generator, device
        self.marking: Any = None

    def __enter__(self) -> None:
        generator = self.generator
        if generator is None:
            return
        if not isinstance(generator, Generator):
            raise ArgumentError(f"generator must be a kg.Generator, got {type(generator).__name__}")
        if generator.device.type != self.device.type:
            from ..errors import DeviceMismatchError

            raise DeviceMismatchError(
                f"the generator is on {generator.device} but the numbers are made on "
                f"{self.device}; make it with kg.Generator({str(self.device)!r})"
            )
        recorder = tracing.active_recorder()
        if recorder is not None:
            self.marking = recorder.drawing_from(generator)
            self.marking.__enter__()
        try:
            self.saved = get_rng_state(self.device)
            backend = get_backend(self.device)
            if generator._state is None:
                backend.manual_seed(generator._seed)
            else:
                backend.set_rng_state(generator._state)
        except BaseException:
            self._unmark()
            raise

    def __exit__(self, *_: Any) -> None:
        if self.generator is None:
            return
        try:
            backend = get_backend(self.device)
            self.generator._state = backend.get_rng_state()
            backend.set_rng_state(self.saved)
        finally:
            self._unmark()

    def _unmark(self) -> None:
        if self.marking is not None:
            marking, self.marking = self.marking, None
            marking.__exit__(None, None, None)


def draw_from_generator(
    generator: Generator, backend: Any, out: Any, kind: str, low: float, high: float
) -> None:
    """Fill the view ``out`` with ``backend.random`` samples from ``generator``'s stream,
    leaving the device's default stream where it was: what :func:`rand` and the others
    do with ``generator=``, and what a ``kg.compile`` replay of such a draw does."""
    with _DrawnFrom(generator, backend.device):
        backend.random(out, kind, low, high)


def _random(
    shape: tuple[int, ...],
    dtype: DType,
    device: Any,
    kind: str,
    low: float,
    high: float,
    generator: Generator | None = None,
) -> Tensor:
    target = _device(device)
    backend = get_backend(target)
    if _SeedState.seed is not None and target not in _SeedState.seeded_devices:
        backend.manual_seed(_SeedState.seed)  # a device first used after manual_seed
        _SeedState.seeded_devices.add(target)
    result = Tensor._empty(shape, dtype, target)
    if result.numel():
        with _DrawnFrom(generator, target):
            backend.random(result._view(), kind, low, high)
    return result


def rand(
    *size: Any,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform samples in [0, 1)."""
    shape = normalize_size(size, "rand")
    chosen = as_dtype(dtype) if dtype is not None else default_float()
    _check_float(chosen, "rand")
    samples = _random(shape, chosen, device, "uniform", 0.0, 1.0, generator)
    return _finish(samples, requires_grad)


def randn(
    *size: Any,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal samples (mean 0, standard deviation 1)."""
    shape = normalize_size(size, "randn")
    chosen = as_dtype(dtype) if dtype is not None else default_float()
    _check_float(chosen, "randn")
    samples = _random(shape, chosen, device, "normal", 0.0, 1.0, generator)
    return _finish(samples, requires_grad)


def randint(
    low: int,
    high: int | None = None,
    size: Any = None,
    *,
    generator: Generator | None = None,
    dtype: Any = None,
    device: Any = None,
) -> Tensor:
    """Integers uniform in [low, high): ``kg.randint(10, (3,))`` or ``kg.randint(2, 10, (3,))``."""
    if size is None:
        if isinstance(high, (tuple, list)):
            low, high, size = 0, low, high
        else:
            raise ArgumentError("randint: give the size, e.g. kg.randint(0, 10, (3, 4))")
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ArgumentError(f"randint: high ({high}) must be greater than low ({low})")
    shape = normalize_size((size,), "randint")
    chosen = as_dtype(dtype) if dtype is not None else int64
    return _random(shape, chosen, device, "integers", low, high, generator)


def rand_like(x: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    d, dev = _like(x, dtype, device)
    return rand(x.shape, dtype=d, device=dev)


def randn_like(x: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    d, dev = _like(x, dtype, device)
    return randn(x.shape, dtype=d, device=dev)


def _check_float(dtype: DType, op: str) -> None:
    if not dtype.is_floating_point:
        raise DTypeError(f"{op} makes floating point numbers; use randint for integers")


def uniform_(x: Tensor, low: float = 0.0, high: float = 1.0) -> Tensor:
    """Fill ``x`` in place with uniform samples in [low, high) (used by ``nn.init``)."""
    samples = _random(x.shape, x.dtype, x.device, "uniform", low, high)
    from .elementwise import copy_into

    copy_into(x, samples)
    return x


def normal_(x: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill ``x`` in place with normal samples (used by ``nn.init``)."""
    samples = _random(x.shape, x.dtype, x.device, "normal", mean, std)
    from .elementwise import copy_into

    copy_into(x, samples)
    return x
