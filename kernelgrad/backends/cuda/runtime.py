"""The thin layer between the CUDA backend and numba-cuda.

Everything that differs between a real GPU and Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) lives here: how a raw block of device memory is allocated,
how a typed 1-D array is laid over it, what the device is called and how many
multiprocessors it has, and which exceptions mean "out of memory". The rest of the
backend is written once against this module.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np


def simulated() -> bool:
    """True when numba-cuda runs kernels in its Python simulator (no GPU involved)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "") == "1"


# The interpreter's thread switch interval under the simulator (seconds; Python's
# default is 0.005).
SIMULATOR_SWITCH_INTERVAL = 0.0002


def prepare_simulator() -> None:
    """Two adjustments to numba's CUDA simulator, made once by a simulated backend.

    * **Thread switches every 0.2 ms, not 5.** The simulator runs each CUDA thread as a
      Python thread, and its launch loop polls them while holding the interpreter lock:
      a thread waiting at a barrier (``syncthreads``) got the lock back only after a
      switch interval, so each barrier cost ~5 ms per block (a compiled MLP step of a few
      hundred parameters took 3.4 s; now 0.45 s). Only ever shortened; the simulator is
      for tests.
    * **One shared array per block, whichever thread gets there first.** The simulator
      gives a block's threads the same ``cuda.shared.array`` by looking it up per source
      line and creating it when missing, without a lock: two threads that reached the
      line together each made their own array, and neither saw the other's writes (a
      wrong result; rare at 5 ms switches, every few hundred launches at 0.2 ms). The
      lookup is made under a lock here, keyed as numba keys it (file and line of the
      call)."""
    if sys.getswitchinterval() > SIMULATOR_SWITCH_INTERVAL:
        sys.setswitchinterval(SIMULATOR_SWITCH_INTERVAL)
    from numba.cuda.simulator import kernelapi

    shared = kernelapi.FakeCUDAShared
    if getattr(shared.array, "locked", False):
        return
    unlocked = shared.array
    lock = threading.Lock()

    def array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        if shape == 0 or alignment is not None:  # dynamic shared memory; a refusal
            return unlocked(self, shape, dtype, alignment)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        with lock:
            found = self._allocations.get(key)
            if found is None:
                if isinstance(dtype, kernelapi.types.Type):  # float32 -> np.float32
                    dtype = kernelapi.numpy_support.as_dtype(dtype)
                found = self._allocations[key] = np.empty(shape, dtype)
        return found

    array.locked = True  # type: ignore[attr-defined]
    shared.array = array


def import_cuda() -> Any:
    """``numba.cuda``, with an error that says how to install it."""
    try:
        from numba import cuda
    except ImportError as error:  # pragma: no cover - numba is a dependency
        raise RuntimeError(
            "the CUDA backend needs numba-cuda: `pip install kernelgrad[cuda]` (see "
            "docs/cuda.md for the CUDA 12 / CUDA 13 choice)"
        ) from error
    return cuda


def cuda_available() -> bool:
    """A GPU that numba-cuda can drive, or the simulator."""
    try:
        cuda = import_cuda()
        return bool(cuda.is_available())
    except Exception:
        return False


def device_count() -> int:
    if not cuda_available():
        return 0
    return len(import_cuda().gpus)


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    multiprocessors: int
    compute_capability: tuple[int, int]
    max_threads_per_block: int
    simulated: bool


def device_properties(index: int) -> DeviceProperties:
    cuda = import_cuda()
    if simulated():
        return DeviceProperties("CUDA simulator", 1, (9, 0), 1024, True)
    with cuda.gpus[index]:
        device = cuda.get_current_device()
        name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
        return DeviceProperties(
            name,
            int(device.MULTIPROCESSOR_COUNT),
            tuple(device.compute_capability),
            int(device.MAX_THREADS_PER_BLOCK),
            False,
        )


_NO_SWITCH = contextlib.nullcontext()  # reusable: entering it does nothing


class DeviceMemory:
    """Raw device allocations, typed views over them, and the stream that orders all
    work on one device.

    ``allocate_raw(nbytes)`` returns an opaque block (a numba ``uint8`` device array);
    ``typed(block, numel, dtype)`` returns the 1-D device array of ``dtype`` that tensors
    use as their buffer. It shares the block's memory (and keeps it alive).

    ``stream`` is the one explicit stream of the device (see docs/cuda.md, "Streams"):
    every kernel, copy and vendor call of the backend is queued on it, so they run in
    program order whatever the process's default-stream settings or CuPy's current
    stream are. Buffers carry it as their stream, so their ``__cuda_array_interface__``
    names it and a consumer (CuPy, PyTorch) waits for it. It synchronises with the
    legacy default stream (created with ``CU_STREAM_DEFAULT``), like numba's own."""

    def __init__(self, index: int) -> None:
        self.index = index
        self._cuda = import_cuda()
        self._simulated = simulated()
        # With one device (the common case) there is nothing to switch between.
        self.single = self._simulated or len(self._cuda.gpus) == 1
        with self.context():
            self.stream = self._cuda.stream()
        if self._simulated:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            self._fake_array = FakeCUDAArray
        else:
            from numba.cuda.cudadrv.devicearray import DeviceNDArray

            self._arrays = DeviceArrays(DeviceNDArray, self.stream)

    @property
    def stream_handle(self) -> int:
        """The stream's CUDA handle as an integer (0 under the simulator)."""
        return 0 if self._simulated else int(self.stream.handle)

    def context(self) -> Any:
        """A context manager that makes this device current (a no-op with one device)."""
        if self.single:
            return _NO_SWITCH
        return self._cuda.gpus[self.index]

    def allocate_raw(self, nbytes: int) -> Any:
        with self.context():
            block = self._cuda.device_array(nbytes, dtype=np.uint8, stream=self.stream)
        if self._simulated:
            block.typed_views = {}  # (numel, dtype) -> the block's memory as NumPy array
        return block

    def typed(self, block: Any, numel: int, dtype: np.dtype) -> Any:
        if not self._simulated:
            return self._arrays.make(block.gpu_data, numel, dtype)
        # The block's memory as a NumPy array of ``dtype`` is kept with the block; the
        # simulator's array forwards attribute reads to it through ``__getattr__``
        # (~0.3 us each), so ``size``, read by every launch, is set on the array itself
        # as a real device array has it.
        views = block.typed_views
        key = (numel, dtype)
        view = views.get(key)
        if view is None:
            view = views[key] = block._ary[: numel * dtype.itemsize].view(dtype)
        array = self._fake_array(view)
        array.size = numel
        return array

    def to_device(self, array: np.ndarray) -> Any:
        """A new (unpooled) device array holding ``array``, copied on the stream."""
        with self.context():
            return self._cuda.to_device(array, stream=self.stream)

    def release_raw_memory(self) -> None:
        """Let numba hand freed blocks back to the driver now (not at its next flush)."""
        if self._simulated:
            return
        with self.context():
            self._cuda.current_context().deallocations.clear()

    def free_bytes(self) -> int | None:
        """Free memory on the device as the driver sees it (None in the simulator)."""
        if self._simulated:
            return None
        with self.context():
            free, _total = self._cuda.current_context().get_memory_info()
            return int(free)

    def total_bytes(self) -> int | None:
        if self._simulated:
            return None
        with self.context():
            _free, total = self._cuda.current_context().get_memory_info()
            return int(total)


class DeviceArrays:
    """Makes the typed 1-D arrays that tensors use as buffers:
    ``array_type(shape=(numel,), strides=(itemsize,), dtype=dtype, stream=stream,
    gpu_data=gpu_data)``.

    numba-cuda's constructor normalises the shape and strides and builds a layout
    descriptor every time (~1.3 us on the host), and the first launch that takes a new
    array works out its numba type (``_numba_type_``, a cached property: ~6 us); the
    pool asks for the same few (numel, dtype) again and again. The attributes the
    constructor sets for a (numel, dtype), and the numba type, which depends only on
    them, are kept right after the first construction (before anything else, such as
    the pointer's memory-view shim, is cached on that array); a new array gets a copy
    of them with its own ``gpu_data`` (~0.4 us in all). Empty arrays are always
    constructed (numba gives them a null pointer of their own)."""

    def __init__(self, array_type: type, stream: Any) -> None:
        self._type = array_type
        self._stream = stream
        self._states: dict[tuple[int, np.dtype], dict[str, Any]] = {}

    def make(self, gpu_data: Any, numel: int, dtype: np.dtype) -> Any:
        state = self._states.get((numel, dtype))
        if state is not None:
            array = object.__new__(self._type)
            array.__dict__.update(state)
            array.gpu_data = gpu_data
            return array
        array = self._type(
            shape=(numel,),
            strides=(dtype.itemsize,),
            dtype=dtype,
            stream=self._stream,
            gpu_data=gpu_data,
        )
        if numel and len(self._states) < 4096:
            array._numba_type_  # noqa: B018 - computed (and cached on the array) now
            state = dict(array.__dict__)
            del state["gpu_data"]
            self._states[numel, dtype] = state
        return array


def is_out_of_memory(error: BaseException) -> bool:
    """Does a numba-cuda exception mean the driver ran out of device memory?"""
    text = f"{type(error).__name__}: {error}"
    return "OUT_OF_MEMORY" in text or "out of memory" in text.lower()
