"""Collectives of CUDA tensors through NCCL (CuPy's ``cupy.cuda.nccl`` bindings).

One NCCL communicator per device, made on the first collective of a CUDA tensor: rank
0 asks NCCL for a unique id, the group's MPI communicator broadcasts it (with the
group's timeout), and every rank joins with it. Calls go on the default CUDA stream,
where kernelgrad's CUDA backend runs every kernel, so they are ordered after the kernels
that produced the data and before those that read the result; a CUDA event recorded
after each call is what :meth:`ProcessGroup.wait` polls. When a wait times out, the
communicator is aborted (``ncclCommAbort``) so that no kernel stays stuck on the GPU.

Tensors reach NCCL as raw device pointers from the CUDA Array Interface of their buffer
(plus the view's offset); a strided tensor is packed into a contiguous one first and the
result copied back, both on the same stream.

Needs ``cupy-cuda13x`` (or ``-cuda12x``) and ``nvidia-nccl-cu13`` (or ``-cu12``). Not
available under the CUDA simulator: CI checks this module's plumbing with a stand-in
communicator (``tests/distributed/test_cuda_nccl.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import lru_cache
from math import prod
from typing import Any

import numpy as np

from .errors import DistributedError

__all__ = ["NcclTransport", "import_nccl", "nccl_available"]

UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
NCCL_HINT = (
    "NCCL is reached through CuPy: pip install cupy-cuda13x nvidia-nccl-cu13 (CUDA 13) or "
    "cupy-cuda12x nvidia-nccl-cu12 (CUDA 12); or use init_process_group('mpi'), which "
    "moves CUDA tensors through host memory"
)


def import_nccl() -> Any:
    """CuPy's NCCL module; a :class:`DistributedError` saying how to install it."""
    try:
        from cupy.cuda import nccl
    except Exception as error:  # ImportError, or CuPy failing to find CUDA
        raise DistributedError(f"NCCL is not available ({error}). {NCCL_HINT}") from None
    if not getattr(nccl, "available", True):
        raise DistributedError(f"CuPy was built without NCCL. {NCCL_HINT}")
    return nccl


@lru_cache(maxsize=1)
def nccl_available() -> bool:
    """Whether NCCL can be used here (what ``backend="auto"`` asks)."""
    try:
        import_nccl()
    except DistributedError:
        return False
    return True


def device_pointer(tensor: Any) -> int:
    """The address of ``tensor``'s first element in device memory.

    Read from the buffer's CUDA Array Interface; under numba's CUDA simulator (buffers in
    host memory, no such interface) from its NumPy array interface."""
    buffer = tensor._storage.buffer
    interface = getattr(buffer, "__cuda_array_interface__", None)
    if interface is None:
        interface = buffer.__array_interface__
    return int(interface["data"][0]) + tensor._offset * tensor.dtype.itemsize


class _CupyEvent:
    """A CUDA event recorded on the default stream after an NCCL call."""

    def __init__(self) -> None:
        import cupy

        self.event = cupy.cuda.Event(disable_timing=True)
        self.event.record(cupy.cuda.Stream.null)

    def Test(self) -> bool:
        return bool(self.event.done)


class NcclTransport:
    """NCCL calls on contiguous CUDA tensors; each returns an object with ``Test()``.

    ``nccl`` is CuPy's module (or a stand-in with the same names), ``comm`` an
    ``NcclCommunicator``, ``make_event`` makes the completion event; ``on_device()`` makes
    the communicator's GPU CuPy's current device around each call (stream 0 and the event
    belong to the current device)."""

    def __init__(
        self,
        comm: Any,
        nccl: Any,
        make_event: Callable[[], Any],
        size: int,
        on_device: Callable[[], Any] = contextlib.nullcontext,
    ) -> None:
        self.comm = comm
        self.nccl = nccl
        self.make_event = make_event
        self.size = size
        self.on_device = on_device

    @classmethod
    def create(cls, group: Any, device: Any) -> NcclTransport:
        nccl = import_nccl()
        import cupy

        unique_id = np.zeros(UNIQUE_ID_BYTES, dtype=np.int64)
        if group.rank == 0:
            unique_id[:] = nccl.get_unique_id()  # 128 signed chars
        group.wait(
            group.start(lambda: group.comm.Ibcast(unique_id, root=0), "broadcast of the NCCL id")
        )
        index = device.index or 0
        with cupy.cuda.Device(index):
            comm = nccl.NcclCommunicator(group.size, tuple(int(x) for x in unique_id), group.rank)
        return cls(comm, nccl, _CupyEvent, group.size, lambda: cupy.cuda.Device(index))

    # --- arguments --------------------------------------------------------------------------
    def _dtype(self, tensor: Any) -> int:
        names = {
            "float32": "NCCL_FLOAT32",
            "float64": "NCCL_FLOAT64",
            "int32": "NCCL_INT32",
            "int64": "NCCL_INT64",
            "bool": "NCCL_UINT8",
        }
        name = names.get(tensor.dtype.name)
        if name is None:
            raise TypeError(f"NCCL collectives do not take {tensor.dtype} tensors")
        return getattr(self.nccl, name)

    def _op(self, op: str, tensor: Any) -> tuple[int, bool]:
        """NCCL's operator for ``op``, and whether the result still needs dividing by
        the world size (a mean where NCCL has no ``ncclAvg``)."""
        if tensor.dtype.name == "bool":
            if op == "mean":
                raise TypeError("the mean of boolean tensors is not defined; convert them")
            op = "max" if op in ("sum", "max") else "min"
        if op == "mean":
            average = getattr(self.nccl, "NCCL_AVG", None)
            if average is not None:
                return average, False
            return self.nccl.NCCL_SUM, True
        names = {"sum": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN", "product": "NCCL_PROD"}
        return getattr(self.nccl, names[op]), False

    def _contiguous(self, tensor: Any) -> Any:
        return tensor if tensor.is_contiguous() else tensor.contiguous()

    def _finish(self, written: Any, packed: Any, divide: bool) -> Any:
        """Stream-ordered follow-ups (a mean's division, unpacking), then the event."""
        if divide:
            packed.mul_(1.0 / self.size)
        if packed is not written:
            written.copy_(packed)
        return self.make_event()

    # --- collectives --------------------------------------------------------------------------
    def all_reduce(self, tensor: Any, op: str) -> Any:
        with self.on_device():
            packed = self._contiguous(tensor)
            nccl_op, divide = self._op(op, tensor)
            pointer = device_pointer(packed)
            self.comm.allReduce(
                pointer, pointer, prod(packed.shape), self._dtype(packed), nccl_op, 0
            )
            return self._finish(tensor, packed, divide)

    def broadcast(self, tensor: Any, root: int) -> Any:
        with self.on_device():
            packed = self._contiguous(tensor)
            pointer = device_pointer(packed)
            self.comm.broadcast(pointer, pointer, prod(packed.shape), self._dtype(packed), root, 0)
            return self._finish(tensor, packed, False)

    def all_gather(self, output: Any, input: Any) -> Any:  # noqa: A002
        with self.on_device():
            packed = self._contiguous(output)
            source = self._contiguous(input)
            self.comm.allGather(
                device_pointer(source),
                device_pointer(packed),
                prod(source.shape),
                self._dtype(source),
                0,
            )
            return self._finish(output, packed, False)

    def reduce_scatter(self, output: Any, input: Any, op: str) -> Any:  # noqa: A002
        with self.on_device():
            packed = self._contiguous(output)
            source = self._contiguous(input)
            nccl_op, divide = self._op(op, output)
            self.comm.reduceScatter(
                device_pointer(source),
                device_pointer(packed),
                prod(packed.shape),
                self._dtype(packed),
                nccl_op,
                0,
            )
            return self._finish(output, packed, divide)

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # the communicator may already be broken
            self.comm.abort()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.comm.destroy()
