"""The NCCL path without NCCL: a stand-in communicator with CuPy's method names reads and
writes the memory behind the pointers it is given, as NCCL would, so the arguments the
transport passes (addresses with the view's offset, counts, dtypes, operators, stream)
are checked on real buffers: CPU buffers in the CPU pass, numba's simulated CUDA arrays
under ``.ci/run-cuda-sim``. The real NCCL run is on a GPU (benchmarks/bench_distributed.py
--nccl)."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.distributed.nccl import NcclTransport, device_pointer

from .jobs import ROOT, mpi_environment, run


class FakeNccl:
    """The constants of ``cupy.cuda.nccl`` the transport uses (values as in nccl.h)."""

    NCCL_UINT8, NCCL_INT32, NCCL_INT64, NCCL_FLOAT32, NCCL_FLOAT64 = 1, 2, 4, 7, 8
    NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN, NCCL_AVG = 0, 1, 2, 3, 4


class FakeNcclWithoutAverage(FakeNccl):
    NCCL_AVG = None  # NCCL before 2.10


DTYPES = {1: np.uint8, 2: np.int32, 4: np.int64, 7: np.float32, 8: np.float64}
OPS = {0: np.add, 1: np.multiply, 2: np.maximum, 3: np.minimum}


def memory(address: int, count: int, code: int) -> np.ndarray:
    """The ``count`` elements at ``address`` (shared, writable)."""
    dtype = np.dtype(DTYPES[code])
    buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(address)
    return np.frombuffer(buffer, dtype=dtype)


class FakeCommunicator:
    """Rank 0 of 2 with NCCL's semantics; the other rank holds ``peer(n)`` (0, 1, 2, ...
    plus 10), so every result shows which memory was read and written."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.aborted = False

    def peer(self, count: int, code: int) -> np.ndarray:
        return (np.arange(count) + 10).astype(DTYPES[code])

    def allReduce(self, send, receive, count, dtype, op, stream):
        self.calls.append(("allReduce", send, receive, count, dtype, op, stream))
        mine, theirs = memory(send, count, dtype).copy(), self.peer(count, dtype)
        result = (mine + theirs) / 2 if op == FakeNccl.NCCL_AVG else OPS[op](mine, theirs)
        memory(receive, count, dtype)[:] = result

    def broadcast(self, send, receive, count, dtype, root, stream):
        self.calls.append(("broadcast", send, receive, count, dtype, root, stream))
        source = memory(send, count, dtype).copy() if root == 0 else self.peer(count, dtype)
        memory(receive, count, dtype)[:] = source

    def allGather(self, send, receive, count, dtype, stream):
        self.calls.append(("allGather", send, receive, count, dtype, stream))
        mine = memory(send, count, dtype).copy()
        memory(receive, 2 * count, dtype)[:] = np.concatenate([mine, self.peer(count, dtype)])

    def reduceScatter(self, send, receive, count, dtype, op, stream):
        self.calls.append(("reduceScatter", send, receive, count, dtype, op, stream))
        mine, theirs = memory(send, 2 * count, dtype).copy(), self.peer(2 * count, dtype)
        result = (mine + theirs) / 2 if op == FakeNccl.NCCL_AVG else OPS[op](mine, theirs)
        memory(receive, count, dtype)[:] = result[:count]  # rank 0's block

    def abort(self):
        self.aborted = True

    def destroy(self):
        pass


class Done:
    def Test(self):
        return True


def transport(nccl=FakeNccl) -> tuple[NcclTransport, FakeCommunicator]:
    comm = FakeCommunicator()
    return NcclTransport(comm, nccl, Done, size=2), comm


def test_all_reduce_passes_the_views_address_and_count(device):
    base = kg.arange(12.0, device=device).reshape(3, 4)
    row = base[1]  # contiguous, 4 elements from offset 4
    nccl, comm = transport()
    assert nccl.all_reduce(row, "sum").Test()
    name, send, receive, count, dtype, op, stream = comm.calls[0]
    address = device_pointer(base)
    assert (name, send, receive, count) == ("allReduce", address + 16, address + 16, 4)
    assert (dtype, op, stream) == (FakeNccl.NCCL_FLOAT32, FakeNccl.NCCL_SUM, 0)
    expected = np.arange(12.0).reshape(3, 4)
    expected[1] += np.arange(4) + 10
    np.testing.assert_array_equal(base.cpu().numpy(), expected)


@pytest.mark.parametrize("nccl", [FakeNccl, FakeNcclWithoutAverage])
def test_mean_of_a_strided_view(device, nccl):
    base = kg.arange(12.0, device=device).reshape(4, 3)
    column = base[:, 2]  # strided: packed, reduced, unpacked
    stand_in, comm = transport(nccl)
    stand_in.all_reduce(column, "mean")
    expected = np.arange(12.0).reshape(4, 3)
    expected[:, 2] = (expected[:, 2] + np.arange(4) + 10) / 2
    np.testing.assert_allclose(base.cpu().numpy(), expected)
    op = comm.calls[0][5]
    assert op == (FakeNccl.NCCL_AVG if nccl is FakeNccl else FakeNccl.NCCL_SUM)
    assert comm.calls[0][1] != device_pointer(base) + 2 * 4  # the packed copy went


@pytest.mark.parametrize(
    "dtype,code", [("int64", FakeNccl.NCCL_INT64), ("float64", FakeNccl.NCCL_FLOAT64)]
)
def test_max_broadcast_gather_and_scatter(device, dtype, code):
    nccl, comm = transport()
    x = kg.tensor(np.array([3, 20, 5], dtype=dtype), device=device)
    nccl.all_reduce(x, "max")
    np.testing.assert_array_equal(x.cpu().numpy(), [10, 20, 12])
    assert comm.calls[-1][4:6] == (code, FakeNccl.NCCL_MAX)
    y = kg.tensor(np.array([1, 2], dtype=dtype), device=device)
    nccl.broadcast(y, root=1)
    np.testing.assert_array_equal(y.cpu().numpy(), [10, 11])
    out = kg.zeros(2, 2, dtype=dtype, device=device)
    nccl.all_gather(out, kg.tensor(np.array([7, 8], dtype=dtype), device=device))
    np.testing.assert_array_equal(out.cpu().numpy(), [[7, 8], [10, 11]])
    block = kg.zeros(2, dtype=dtype, device=device)
    nccl.reduce_scatter(block, kg.tensor(np.array([1, 1, 1, 1], dtype=dtype), device=device), "sum")
    np.testing.assert_array_equal(block.cpu().numpy(), [11, 12])
    assert [call[0] for call in comm.calls] == [
        "allReduce",
        "broadcast",
        "allGather",
        "reduceScatter",
    ]
    assert all(call[-1] == 0 for call in comm.calls)  # the default stream


def test_every_call_runs_on_the_communicators_device(device):
    """NCCL's stream 0 and the completion event belong to the current device: each call
    happens inside ``on_device()`` (CuPy's ``Device(index)`` on a GPU)."""
    current = []

    class OnDevice:
        def __enter__(self):
            current.append("gpu of this rank")

        def __exit__(self, *exc):
            current.pop()

    comm = FakeCommunicator()
    seen = []
    original = comm.allReduce
    comm.allReduce = lambda *args: (seen.append(list(current)), original(*args))
    nccl = NcclTransport(comm, FakeNccl, lambda: seen.append(list(current)) or Done(), 2, OnDevice)
    nccl.all_reduce(kg.ones(3, device=device), "sum")
    assert seen == [["gpu of this rank"], ["gpu of this rank"]] and current == []


def test_booleans_travel_as_bytes(device):
    nccl, comm = transport()
    flags = kg.tensor([False, True, False], device=device)
    nccl.all_reduce(flags, "sum")  # a logical or: the peer's bytes 10, 11, 12 are all true
    assert flags.cpu().tolist() == [True, True, True]
    assert comm.calls[0][4:6] == (FakeNccl.NCCL_UINT8, FakeNccl.NCCL_MAX)
    with pytest.raises(TypeError, match="mean of boolean tensors"):
        nccl.all_reduce(flags, "mean")


def test_collectives_of_cuda_tensors_take_the_nccl_route(device):
    """Through the public all_reduce: a group whose backend is "nccl" hands CUDA tensors
    to its NCCL transport (here the stand-in), CPU tensors to MPI."""
    if device != "cuda":
        pytest.skip("the route of CUDA tensors (the simulator pass runs it)")
    pytest.importorskip("mpi4py")
    group = kg.distributed.init_process_group("mpi")
    try:
        group.backend = "nccl"  # without importing CuPy
        stand_in, comm = transport()
        group._nccl["cuda:0"] = group._nccl["cuda"] = stand_in
        x = kg.tensor([1.0, 2.0], device="cuda")
        kg.distributed.all_reduce(x, op="mean")
        assert x.cpu().tolist() == [5.5, 6.5]  # (x + [10, 11]) / 2 by the stand-in
        cpu = kg.tensor([1.0, 2.0])
        kg.distributed.all_reduce(cpu, op="mean")  # MPI, a group of one
        assert cpu.tolist() == [1.0, 2.0] and len(comm.calls) == 1
    finally:
        kg.distributed.destroy_process_group()


def test_nccl_backend_without_nccl_says_how_to_install():
    pytest.importorskip("mpi4py")
    from kernelgrad.distributed import nccl

    if nccl.nccl_available():
        pytest.skip("NCCL is installed here")
    with pytest.raises(kg.distributed.DistributedError, match="pip install cupy-cuda13x"):
        kg.distributed.init_process_group("nccl")
    assert not kg.distributed.is_initialized()


STAGED = """
import sys
import numpy as np
import kernelgrad as kg
import kernelgrad.distributed as dist
dist.init_process_group("mpi", timeout=120)
rank = dist.get_rank()
base = kg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3) * (rank + 1), device="cuda")
dist.all_reduce(base[:, 1], op="mean")
flat = kg.tensor([rank + 1.0, 5.0], device="cuda")
dist.all_reduce(flat, op="max")
dist.broadcast(flat, src=1)
# One file per rank: the ranks' standard outputs interleave when mpiexec merges them.
with open(f"{sys.argv[1]}/rank{rank}.txt", "w") as out:
    out.write(f"RESULT {rank} {base.cpu().tolist()} {flat.cpu().tolist()}")
"""


def test_cuda_tensors_through_mpi_on_two_ranks(simulated, mpiexec, tmp_path):
    """backend "mpi": CUDA tensors are staged through host memory (2 simulated ranks)."""
    if not simulated:
        pytest.skip("runs in the CUDA simulator pass")
    script = tmp_path / "staged.py"
    script.write_text(STAGED)
    environment = mpi_environment()
    environment["NUMBA_ENABLE_CUDASIM"] = "1"
    job = run(
        [mpiexec, "-n", "2", sys.executable, str(script), str(tmp_path)], environment, cwd=ROOT
    )
    assert job.returncode == 0, job.stdout + job.stderr
    lines = [(tmp_path / f"rank{rank}.txt").read_text() for rank in range(2)]
    middle = [1.5, 6.0]  # column 1 of rank 0 ([1, 4]) and rank 1 ([2, 8]), averaged
    for rank, line in enumerate(lines):
        scale = rank + 1
        expected = [[0.0, middle[0], 2.0 * scale], [3.0 * scale, middle[1], 5.0 * scale]]
        assert line == f"RESULT {rank} {expected} {[2.0, 5.0]}"
