"""The CUDA backend's runtime plumbing, checked in the simulator: one explicit stream for
every launch and copy, kernel-reported errors without a synchronisation per call."""

from __future__ import annotations

import time

import numpy as np
import pytest
from numba import cuda

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.backends import get_backend
from kernelgrad.device import as_device


@pytest.fixture
def backend(cuda: str):
    return get_backend(as_device(cuda))


@pytest.fixture
def simulator(cuda: str) -> None:
    if not kg.cuda.is_simulated():
        pytest.skip("instruments the simulator's kernels and arrays")


@pytest.fixture
def synchronisations(backend, monkeypatch) -> list[str]:
    """Counts waits for the device: stream synchronisations and copies to the host."""
    calls: list[str] = []
    wait = backend.stream.synchronize
    array_type = type(kg.zeros(1, device="cuda")._storage.buffer)
    copy_to_host = array_type.copy_to_host

    def counted_wait() -> None:
        calls.append("synchronize")
        wait()

    def counted_copy(self, *args, **kwargs):
        calls.append("copy_to_host")
        return copy_to_host(self, *args, **kwargs)

    monkeypatch.setattr(backend.stream, "synchronize", counted_wait)
    monkeypatch.setattr(array_type, "copy_to_host", counted_copy)
    return calls


def training_step(device: str) -> float:
    kg.manual_seed(0)
    with kg.device(device):
        model = kg.nn.Sequential(kg.nn.Linear(3, 4), kg.nn.ReLU(), kg.nn.Linear(4, 2))
    optimizer = kg.optim.Adam(model.parameters(), lr=0.1)
    x = kg.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3)).to(device)
    loss = F.cross_entropy(model(x), kg.tensor([0, 1], device=device))
    loss.backward()
    optimizer.step()
    picked = kg.take(model[0].weight, 0, kg.tensor([1, 0], device=device))
    return loss.item() + float(picked.sum().item())


def test_every_launch_and_copy_is_queued_on_the_backends_stream(backend, simulator, monkeypatch):
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    seen: list[tuple[str, object]] = []
    configure = FakeCUDAKernel.__getitem__

    def recording(self, configuration):
        stream = configuration[2] if len(configuration) > 2 else None
        seen.append((f"launch {self.__name__}", stream))
        return configure(self, configuration)

    monkeypatch.setattr(FakeCUDAKernel, "__getitem__", recording)

    def recording_copy(name: str):
        original = getattr(FakeCUDAArray, name)

        def copy(self, *args, stream=0):
            seen.append((name, stream))
            return original(self, *args, stream=stream)

        return copy

    for name in ("copy_to_device", "copy_to_host"):
        monkeypatch.setattr(FakeCUDAArray, name, recording_copy(name))
    training_step("cuda")
    kinds = {kind.split(" ")[0] for kind, _ in seen}
    assert kinds == {"launch", "copy_to_device", "copy_to_host"}
    elsewhere = [kind for kind, stream in seen if stream is not backend.stream]
    assert not elsewhere, f"not on the backend's stream: {elsewhere}"


def test_index_errors_cost_no_wait_per_call_and_are_raised_once_at_the_next_read(
    backend, synchronisations
):
    x = kg.arange(6, device="cuda")
    logits = kg.zeros(2, 3, device="cuda")
    targets = kg.tensor([0, 2], device="cuda")
    for _ in range(3):
        kg.take(x, 0, kg.tensor([1, 5], device="cuda"))
        F.cross_entropy(logits, targets)
    assert synchronisations == []  # no device round trip per call
    kg.take(x, 0, kg.tensor([9], device="cuda"))
    F.cross_entropy(logits, targets)
    with pytest.raises(IndexError, match=r"index 9 is out of bounds .* launched earlier"):
        logits.sum().item()
    assert logits.sum().item() == 0.0  # raised once, and the flags are clear again
    F.cross_entropy(logits, kg.tensor([0, 3], device="cuda"))
    with pytest.raises(IndexError, match="target class index 3 is out of range"):
        kg.cuda.synchronize()


def test_launch_blocking_raises_index_errors_in_the_call_that_launched_them(backend, monkeypatch):
    monkeypatch.setattr(backend.launcher, "blocking", True)
    with pytest.raises(IndexError, match="index 9 is out of bounds") as raised:
        kg.take(kg.arange(6, device="cuda"), 0, kg.tensor([9], device="cuda"))
    assert "launched earlier" not in str(raised.value)
    with pytest.raises(IndexError, match="3 classes"):
        F.cross_entropy(kg.zeros(2, 3, device="cuda"), kg.tensor([0, 3], device="cuda"))


def test_a_full_flag_table_is_checked_before_a_slot_is_reused(backend, synchronisations):
    from kernelgrad.backends.cuda.flags import SLOTS

    kg.cuda.synchronize()  # start from an empty table
    x = kg.arange(4, device="cuda")
    index = kg.tensor([1], device="cuda")
    for _ in range(SLOTS - 1):
        kg.take(x, 0, index)
    waited = synchronisations.count("synchronize")
    kg.take(x, 0, index)
    kg.take(x, 0, index)
    assert synchronisations.count("synchronize") == waited + 1


def test_a_blocks_threads_share_one_shared_array_in_the_simulator(backend, simulator, monkeypatch):
    """numba's simulator created a block's ``cuda.shared.array`` when its first thread
    reached the line, without a lock: threads arriving while it was being made each
    made their own and missed each other's writes (a wrong result, e.g. a row of a
    matmul tile; runtime.prepare_simulator locks the lookup). A slow allocation that
    lets the other threads run makes the collision certain."""
    allocate = np.empty

    def slow_empty(*args, **kwargs):
        time.sleep(0.001)  # (releases the interpreter lock: the other threads run)
        return allocate(*args, **kwargs)

    @cuda.jit
    def sum_in_shared_memory(out):
        slots = cuda.shared.array(8, np.int64)
        slots[cuda.threadIdx.x] = cuda.threadIdx.x + 1
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            total = 0
            for i in range(8):
                total += slots[i]
            out[cuda.blockIdx.x] = total

    out = np.zeros(2, np.int64)
    monkeypatch.setattr(np, "empty", slow_empty)
    sum_in_shared_memory[2, 8](out)
    monkeypatch.undo()
    assert out.tolist() == [8 * 9 // 2] * 2
