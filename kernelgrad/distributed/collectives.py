"""Collectives on tensors: ``all_reduce``, ``broadcast``, ``all_gather``,
``reduce_scatter`` and ``barrier``, as in ``torch.distributed``.

Where a tensor lives decides the transport: CPU memory goes through MPI (mpi4py's buffer
interface: a contiguous tensor is handed over as it is, without a copy; a strided one is
packed into a contiguous array first and unpacked after), CUDA memory through NCCL when
the group's backend allows it (``"nccl"``, or ``"auto"`` with NCCL installed), else
through MPI via host memory.

Each collective runs through :func:`kernelgrad.compile.external.run_host_op`, so it can
be called inside a ``kg.compile``d step: the trace records it and every replay repeats it
at the same place. An ``async_op=True`` call returns a :class:`Work` whose ``wait()``
finishes it (two recorded ops under ``kg.compile``: start and wait).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from ..compile.external import run_host_op
from .errors import DistributedError
from .group import ProcessGroup, get_group

__all__ = [
    "ReduceOp",
    "Work",
    "all_reduce",
    "broadcast",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "barrier",
]


class ReduceOp:
    """Reduction operators (strings work too: ``"sum"``, ``"mean"``, ...)."""

    SUM = "sum"
    MEAN = "mean"
    AVG = "mean"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


_OPS = ("sum", "mean", "max", "min", "product")


def _check_op(op: str) -> str:
    name = str(op).lower()
    if name == "avg":
        name = "mean"
    if name not in _OPS:
        raise ValueError(f"op must be one of {', '.join(_OPS)}, got {op!r}")
    return name


class Work:
    """A collective started with ``async_op=True``; :meth:`wait` completes it."""

    def __init__(self, finish: Callable[[], None]) -> None:
        self._finish: Callable[[], None] | None = finish

    def wait(self) -> bool:
        """Block until the collective has completed and its results are in place."""
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()
        return True

    def is_completed(self) -> bool:
        return self._finish is None


# --- tensors to transport buffers -----------------------------------------------------------------
def _check_tensor(tensor: Any, what: str) -> None:
    from ..tensor import Tensor

    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what} takes kernelgrad tensors, got {type(tensor).__name__}")


def _host_array(tensor: Any) -> np.ndarray:
    """A NumPy view of a CPU tensor's memory (no copy; strides as the tensor's)."""
    from ..backends.base import strided_array

    return strided_array(tensor._storage.buffer, tensor.shape, tensor._strides, tensor._offset)


def _same_device(tensors: Sequence[Any], what: str) -> Any:
    devices = {str(t.device) for t in tensors}
    if len(devices) > 1:
        from ..errors import DeviceMismatchError

        raise DeviceMismatchError(
            f"{what}: the tensors are on {', '.join(sorted(devices))}; a collective works "
            "on tensors of one device (move them with .to(device))"
        )
    return tensors[0].device


def _same_dtype(tensors: Sequence[Any], what: str) -> None:
    dtypes = {t.dtype.name for t in tensors}
    if len(dtypes) > 1:
        raise TypeError(f"{what}: the tensors have dtypes {', '.join(sorted(dtypes))}; use one")


def _transport(group: ProcessGroup, device: Any) -> str:
    """``"mpi"`` (host memory), ``"nccl"`` or ``"staged"`` (CUDA through host memory)."""
    if device.type == "cpu":
        return "mpi"
    if group.backend == "mpi":
        return "staged"
    if group.backend == "nccl":
        return "nccl"
    from .nccl import nccl_available

    return "nccl" if nccl_available() else "staged"


class _Host:
    """Contiguous host arrays standing for tensors during an MPI collective: the tensors'
    own memory when it is contiguous CPU memory, else packed copies written back by
    :meth:`unpack` (strided CPU tensors, and CUDA tensors staged through the host)."""

    def __init__(self, tensors: Sequence[Any], written: Sequence[int]) -> None:
        self.tensors = list(tensors)
        self.written = set(written)
        self.arrays: list[np.ndarray] = []
        self.packed: list[bool] = []
        for tensor in self.tensors:
            if tensor.device.type == "cpu":
                array = _host_array(tensor)
                packed = not array.flags.c_contiguous
                self.arrays.append(np.ascontiguousarray(array) if packed else array)
            else:
                from ..compile.trace import active_recorder

                if active_recorder() is not None:
                    raise DistributedError(
                        "a collective on CUDA tensors through MPI (host memory) cannot run "
                        "inside kg.compile; use the NCCL backend (init_process_group('nccl'), "
                        "pip install nvidia-nccl-cu13) or run the step eagerly"
                    )
                packed = True
                self.arrays.append(np.ascontiguousarray(tensor.cpu().numpy()))
            self.packed.append(packed)

    def unpack(self) -> None:
        for position, tensor in enumerate(self.tensors):
            if position not in self.written or not self.packed[position]:
                continue
            if tensor.device.type == "cpu":
                _host_array(tensor)[...] = self.arrays[position]
            else:
                from ..ops.creation import from_numpy

                tensor.copy_(from_numpy(self.arrays[position]))


def _mpi_buffer(array: np.ndarray, MPI: Any) -> Any:  # noqa: N803
    """The buffer spec mpi4py needs: booleans travel as bytes (MPI's logical ops)."""
    if array.dtype == np.bool_:
        return [array.view(np.uint8), MPI.BYTE]
    return array


def _mpi_op(op: str, dtype: np.dtype, MPI: Any) -> Any:  # noqa: N803
    if dtype == np.bool_:
        if op in ("sum", "max"):
            return MPI.BOR
        if op in ("min", "product"):
            return MPI.BAND
        raise TypeError("the mean of boolean tensors is not defined; convert them to float")
    return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "product": MPI.PROD}[
        op
    ]


def _check_mean(op: str, tensor: Any) -> None:
    if op == "mean" and not tensor.dtype.is_floating_point:
        raise TypeError(
            f"all_reduce(op='mean') needs a floating point tensor, got {tensor.dtype}; "
            "reduce with 'sum' and divide, or convert with .float()"
        )


def _describe(kind: str, tensor: Any, extra: str = "") -> str:
    count = prod(tensor.shape)
    return f"{kind}{extra} of {count:,} {tensor.dtype.name} element(s) on {tensor.device}"


def _bump(tensors: Sequence[Any]) -> None:
    for tensor in tensors:
        tensor._storage.version += 1


# --- running a collective -------------------------------------------------------------------------
class _Collective:
    """One collective call: ``start`` begins it on the transport, ``finish`` waits and
    puts the results in place. Both take the tensors (the replay's, under kg.compile)."""

    def __init__(
        self,
        group: ProcessGroup,
        label: str,
        tensors: list[Any],
        written: list[int],
        start_mpi: Callable[[ProcessGroup, list[np.ndarray]], Any] | None,
        start_nccl: Callable[[Any, list[Any]], Any] | None,
        description: str,
        mean: bool = False,
    ) -> None:
        self.group = group
        self.label = label
        self.tensors = tensors
        self.written = written
        self.start_mpi = start_mpi
        self.start_nccl = start_nccl
        self.description = description
        self.mean = mean  # divide by the world size after a sum (NCCL averages itself)
        self.device = _same_device(tensors, label) if tensors else None
        self.route = _transport(group, self.device) if tensors else "mpi"
        self.state: dict[str, Any] = {}

    def start(self, tensors: list[Any]) -> None:
        group = self.group
        if self.route == "nccl":
            transport = group.nccl_transport(self.device)
            self.state["pending"] = group.start(
                lambda: self.start_nccl(transport, tensors), self.description, transport.abort
            )
            return
        host = _Host(tensors, self.written)
        self.state["host"] = host
        self.state["pending"] = group.start(
            lambda: self.start_mpi(group, host.arrays), self.description
        )

    def finish(self, tensors: list[Any]) -> None:
        self.group.wait(self.state.pop("pending"))
        host = self.state.pop("host", None)
        if host is not None:
            host.unpack()
        if self.mean and self.route != "nccl" and self.group.size > 1:
            _divide(tensors[0], self.group.size)
        _bump([tensors[position] for position in self.written])

    def run(self, async_op: bool) -> Work | None:
        if not async_op:
            run_host_op(
                self.label,
                lambda tensors: (self.start(tensors), self.finish(tensors)),
                self.tensors,
                self.written,
            )
            return None
        run_host_op(f"{self.label} (start)", self.start, self.tensors)
        return Work(
            lambda: run_host_op(f"{self.label} (wait)", self.finish, self.tensors, self.written)
        )


# --- the collectives -------------------------------------------------------------------------
def all_reduce(tensor: Any, op: str = ReduceOp.SUM, *, async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` across all ranks, in place: every rank ends with the sum (or
    mean, max, min, product) of every rank's values.

    >>> import kernelgrad as kg
    >>> _ = kg.distributed.init_process_group("mpi")
    >>> t = kg.tensor([1.0, 2.0])
    >>> kg.distributed.all_reduce(t, op="mean")
    >>> t.tolist()  # a group of one: the mean of one rank's values
    [1.0, 2.0]
    >>> kg.distributed.destroy_process_group()
    """
    _check_tensor(tensor, "all_reduce")
    op = _check_op(op)
    _check_mean(op, tensor)
    group = get_group()

    def start_mpi(group: ProcessGroup, arrays: list[np.ndarray]) -> Any:
        MPI = group.MPI  # noqa: N806
        array = arrays[0]
        return group.comm.Iallreduce(
            MPI.IN_PLACE, _mpi_buffer(array, MPI), op=_mpi_op(op, array.dtype, MPI)
        )

    def start_nccl(transport: Any, tensors: list[Any]) -> Any:
        return transport.all_reduce(tensors[0], op)

    return _Collective(
        group,
        "all_reduce",
        [tensor],
        [0],
        start_mpi,
        start_nccl,
        _describe("all_reduce", tensor, f" ({op})"),
        mean=op == "mean",
    ).run(async_op)


def _divide(tensor: Any, size: int) -> None:
    if tensor.device.type == "cpu":
        array = _host_array(tensor)
        np.multiply(array, array.dtype.type(1.0 / size), out=array)
    else:
        tensor.mul_(1.0 / size)


def broadcast(tensor: Any, src: int = 0, *, async_op: bool = False) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every other rank.

    >>> import kernelgrad as kg
    >>> _ = kg.distributed.init_process_group("mpi")
    >>> t = kg.tensor([3, 4])
    >>> kg.distributed.broadcast(t, src=0)
    >>> t.tolist()
    [3, 4]
    >>> kg.distributed.destroy_process_group()
    """
    _check_tensor(tensor, "broadcast")
    group = get_group()
    _check_rank(src, group, "src")

    def start_mpi(group: ProcessGroup, arrays: list[np.ndarray]) -> Any:
        return group.comm.Ibcast(_mpi_buffer(arrays[0], group.MPI), root=src)

    def start_nccl(transport: Any, tensors: list[Any]) -> Any:
        return transport.broadcast(tensors[0], src)

    return _Collective(
        group,
        "broadcast",
        [tensor],
        [0],
        start_mpi,
        start_nccl,
        _describe("broadcast", tensor, f" from rank {src}"),
    ).run(async_op)


def _check_pair(what: str, large: tuple[str, Any], small: tuple[str, Any], group: Any) -> None:
    """Two tensors of one dtype, the ``large`` one world size times the ``small`` one."""
    (large_name, large_tensor), (small_name, small_tensor) = large, small
    _check_tensor(large_tensor, what)
    _check_tensor(small_tensor, what)
    _same_dtype([large_tensor, small_tensor], what)
    if prod(large_tensor.shape) != group.size * prod(small_tensor.shape):
        raise ValueError(
            f"{what}: {large_name} has {prod(large_tensor.shape)} elements, it needs "
            f"{group.size} (world size) x {prod(small_tensor.shape)} ({small_name} "
            f"{tuple(small_tensor.shape)})"
        )


def _check_rank(rank: int, group: ProcessGroup, name: str) -> None:
    if not 0 <= int(rank) < group.size:
        raise ValueError(f"{name}={rank} is not a rank of this group of {group.size} process(es)")


def all_gather_into_tensor(output: Any, input: Any, *, async_op: bool = False) -> Work | None:  # noqa: A002
    """``output`` (world size x ``input``'s shape, or its first dimension world size
    times as long) receives every rank's ``input``, in rank order.

    >>> import kernelgrad as kg
    >>> _ = kg.distributed.init_process_group("mpi")
    >>> out = kg.empty(1, 2)
    >>> kg.distributed.all_gather_into_tensor(out, kg.tensor([5.0, 6.0]))
    >>> out.tolist()
    [[5.0, 6.0]]
    >>> kg.distributed.destroy_process_group()
    """
    group = get_group()
    _check_pair("all_gather_into_tensor", ("output", output), ("input", input), group)

    def start_mpi(group: ProcessGroup, arrays: list[np.ndarray]) -> Any:
        MPI = group.MPI  # noqa: N806
        return group.comm.Iallgather(_mpi_buffer(arrays[1], MPI), _mpi_buffer(arrays[0], MPI))

    def start_nccl(transport: Any, tensors: list[Any]) -> Any:
        return transport.all_gather(tensors[0], tensors[1])

    return _Collective(
        group,
        "all_gather",
        [output, input],
        [0],
        start_mpi,
        start_nccl,
        _describe("all_gather", input),
    ).run(async_op)


def all_gather(tensor_list: list[Any], tensor: Any, *, async_op: bool = False) -> Work | None:
    """``tensor_list[r]`` receives rank r's ``tensor`` (a list of world size tensors of
    ``tensor``'s shape).

    >>> import kernelgrad as kg
    >>> _ = kg.distributed.init_process_group("mpi")
    >>> parts = [kg.empty(2)]
    >>> kg.distributed.all_gather(parts, kg.tensor([1.0, 2.0]))
    >>> parts[0].tolist()
    [1.0, 2.0]
    >>> kg.distributed.destroy_process_group()
    """
    _check_tensor(tensor, "all_gather")
    group = get_group()
    _check_list(tensor_list, tensor, group, "all_gather", "tensor_list")
    from ..ops.creation import empty

    gathered = empty(group.size, *tensor.shape, dtype=tensor.dtype, device=tensor.device)

    def scatter_back() -> None:
        from ..autograd import no_grad

        with no_grad():
            for rank, target in enumerate(tensor_list):
                target.copy_(gathered[rank])

    work = all_gather_into_tensor(gathered, tensor, async_op=True)
    assert work is not None
    if async_op:
        return Work(lambda: (work.wait(), scatter_back()))
    work.wait()
    scatter_back()
    return None


def _check_list(tensors: list[Any], like: Any, group: ProcessGroup, what: str, name: str) -> None:
    if len(tensors) != group.size:
        raise ValueError(
            f"{what}: {name} has {len(tensors)} tensor(s); it needs one per rank ({group.size})"
        )
    for rank, item in enumerate(tensors):
        _check_tensor(item, what)
        if item.shape != like.shape or item.dtype is not like.dtype:
            raise ValueError(
                f"{what}: {name}[{rank}] has shape {tuple(item.shape)} and dtype "
                f"{item.dtype}; every entry needs {tuple(like.shape)} and {like.dtype}"
            )


def reduce_scatter_tensor(
    output: Any,
    input: Any,  # noqa: A002
    op: str = ReduceOp.SUM,
    *,
    async_op: bool = False,
) -> Work | None:
    """Reduce ``input`` (world size x ``output``'s elements) across ranks and give rank r
    the r-th block of the result in ``output``.

    >>> import kernelgrad as kg
    >>> _ = kg.distributed.init_process_group("mpi")
    >>> out = kg.empty(2)
    >>> kg.distributed.reduce_scatter_tensor(out, kg.tensor([1.0, 2.0]))
    >>> out.tolist()
    [1.0, 2.0]
    >>> kg.distributed.destroy_process_group()
    """
    op = _check_op(op)
    group = get_group()
    _check_pair("reduce_scatter_tensor", ("input", input), ("output", output), group)
    _check_mean(op, output)

    def start_mpi(group: ProcessGroup, arrays: list[np.ndarray]) -> Any:
        MPI = group.MPI  # noqa: N806
        return group.comm.Ireduce_scatter_block(
            _mpi_buffer(arrays[1], MPI),
            _mpi_buffer(arrays[0], MPI),
            op=_mpi_op(op, arrays[0].dtype, MPI),
        )

    def start_nccl(transport: Any, tensors: list[Any]) -> Any:
        return transport.reduce_scatter(tensors[0], tensors[1], op)

    return _Collective(
        group,
        "reduce_scatter",
        [output, input],
        [0],
        start_mpi,
        start_nccl,
        _describe("reduce_scatter", input, f" ({op})"),
        mean=op == "mean",
    ).run(async_op)


def reduce_scatter(
    output: Any, input_list: list[Any], op: str = ReduceOp.SUM, *, async_op: bool = False
) -> Work | None:
    """``output`` on rank r receives the reduction over ranks of their ``input_list[r]``.

    >>> import kernelgrad as kg
    >>> _ = kg.distributed.init_process_group("mpi")
    >>> out = kg.empty(2)
    >>> kg.distributed.reduce_scatter(out, [kg.tensor([3.0, 4.0])])
    >>> out.tolist()
    [3.0, 4.0]
    >>> kg.distributed.destroy_process_group()
    """
    _check_tensor(output, "reduce_scatter")
    group = get_group()
    _check_list(input_list, output, group, "reduce_scatter", "input_list")
    from ..ops.movement import stack

    return reduce_scatter_tensor(output, stack(list(input_list)), op, async_op=async_op)


def barrier(*, async_op: bool = False) -> Work | None:
    """Wait until every rank has reached this call (with the group's timeout).

    >>> import kernelgrad as kg
    >>> _ = kg.distributed.init_process_group("mpi")
    >>> kg.distributed.barrier()
    >>> kg.distributed.destroy_process_group()
    """
    group = get_group()

    def start_mpi(group: ProcessGroup, arrays: list[np.ndarray]) -> Any:
        return group.comm.Ibarrier()

    return _Collective(group, "barrier", [], [], start_mpi, None, "barrier").run(async_op)
