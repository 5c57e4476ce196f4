"""The CUDA caching memory pool: size classes, reuse, statistics, no growth across training
steps, out-of-memory errors and recovery.

Under the simulator the pool's raw blocks are numba's fake device arrays, so all of its
bookkeeping runs here exactly as on a GPU.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends import get_backend
from kernelgrad.backends.cuda.memory import MIN_BLOCK, OutOfMemoryError, round_size
from kernelgrad.device import as_device


@pytest.fixture
def pool(cuda):
    pool = get_backend(as_device(cuda)).pool
    gc.collect()
    yield pool
    pool.set_limit(None)


def test_size_classes_waste_less_than_a_quarter():
    assert round_size(0) == round_size(1) == round_size(MIN_BLOCK) == MIN_BLOCK
    previous = 0
    for nbytes in list(range(1, 5000, 37)) + [10**6, 10**6 + 1, 3 * 2**20, 2**31 + 5]:
        size = round_size(nbytes)
        assert size >= nbytes
        assert size < max(MIN_BLOCK + 1, nbytes * 1.25 + 1)
        assert size >= previous  # monotonic
        previous = size
    # few classes: a training loop's sizes map onto a small set of free lists
    assert len({round_size(n) for n in range(1, 2**20, 997)}) < 60


def test_allocation_and_release_are_counted(cuda, pool):
    before = kg.cuda.memory_stats()
    x = kg.empty(1000, device=cuda)  # 4000 bytes -> a 4096-byte block
    during = kg.cuda.memory_stats()
    assert during["allocated_bytes"] - before["allocated_bytes"] == round_size(4000)
    assert during["requested_bytes"] - before["requested_bytes"] == 4000
    assert during["active_blocks"] == before["active_blocks"] + 1
    assert during["num_allocs"] == before["num_allocs"] + 1
    assert kg.cuda.memory_allocated() == during["allocated_bytes"]
    del x
    after = kg.cuda.memory_stats()
    assert after["allocated_bytes"] == before["allocated_bytes"]
    assert after["num_frees"] == during["num_frees"] + 1
    assert after["reserved_bytes"] >= after["allocated_bytes"]
    assert after["cached_bytes"] == after["reserved_bytes"] - after["allocated_bytes"]


def test_freed_blocks_are_reused(cuda, pool):
    x = kg.empty(777, device=cuda)
    del x
    stats = kg.cuda.memory_stats()
    y = kg.empty(777, device=cuda)
    again = kg.cuda.memory_stats()
    assert again["num_raw_allocs"] == stats["num_raw_allocs"]
    assert again["num_cache_hits"] == stats["num_cache_hits"] + 1
    del y


def test_views_keep_the_buffer_alive(cuda, pool):
    base = kg.arange(300, device=cuda).to(kg.float32)
    view = base[10:20]
    allocated = kg.cuda.memory_allocated()
    del base
    assert kg.cuda.memory_allocated() == allocated  # the view still uses the storage
    kg.zeros(300, device=cuda)  # a new tensor must not get the view's block
    np.testing.assert_array_equal(view.cpu().numpy(), np.arange(10, 20, dtype=np.float32))
    del view
    assert kg.cuda.memory_allocated() < allocated


def test_empty_cache_returns_cached_blocks(cuda, pool):
    tensors = [kg.empty(5000 + i, device=cuda) for i in range(3)]
    del tensors
    before = kg.cuda.memory_stats()
    assert before["cached_bytes"] > 0
    kg.cuda.empty_cache()
    after = kg.cuda.memory_stats()
    assert after["cached_bytes"] == 0 and after["cached_blocks"] == 0
    assert after["reserved_bytes"] == after["allocated_bytes"]
    assert after["num_raw_frees"] > before["num_raw_frees"]


def test_peak_and_reset(cuda, pool):
    kg.cuda.reset_peak_memory_stats()
    base = kg.cuda.memory_allocated()
    x = kg.empty(100_000, device=cuda)
    del x
    assert kg.cuda.max_memory_allocated() >= base + 400_000
    kg.cuda.reset_peak_memory_stats()
    assert kg.cuda.max_memory_allocated() == kg.cuda.memory_allocated()


def _mlp_step(params, x, labels, lr=0.1):
    w1, b1, w2, b2 = params
    hidden = (x @ w1 + b1).relu()
    logits = hidden @ w2 + b2
    loss = -(logits.log_softmax(1) * labels).sum(dim=1).mean()
    loss.backward()
    with kg.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None
    return loss.item()


def test_memory_in_use_does_not_grow_across_training_steps(cuda, pool):
    kg.manual_seed(0)
    x = kg.randn(12, 5, device=cuda)
    labels = kg.tensor(np.eye(3, dtype=np.float32)[np.arange(12) % 3], device=cuda)
    params = [
        (kg.randn(5, 8, device=cuda) * 0.5).requires_grad_(),
        kg.zeros(8, device=cuda, requires_grad=True),
        (kg.randn(8, 3, device=cuda) * 0.5).requires_grad_(),
        kg.zeros(3, device=cuda, requires_grad=True),
    ]
    losses, allocated, raw = [], [], []
    for _step in range(5):
        losses.append(_mlp_step(params, x, labels))
        stats = kg.cuda.memory_stats()
        allocated.append(stats["allocated_bytes"])
        raw.append(stats["num_raw_allocs"])
    assert losses[-1] < losses[0]  # it trains
    assert allocated[4] == allocated[1]  # bytes in use after step 5 == after step 2
    assert raw[4] == raw[1]  # and every step after the first is served from the cache


def test_out_of_memory_error_and_recovery(cuda, pool):
    kg.cuda.empty_cache()  # no cached block may serve the request below
    keep = kg.empty(1000, device=cuda)
    stats = kg.cuda.memory_stats()
    kg.cuda.set_memory_limit(stats["reserved_bytes"] + 64 * 1024)
    with pytest.raises(kg.cuda.OutOfMemoryError) as info:
        kg.empty(100_000, device=cuda)  # 400 KB, beyond the limit
    message = str(info.value)
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, OutOfMemoryError)
    assert "390.62 KiB" in message  # asked
    assert "in use" in message and "reserved" in message and "free" in message
    assert "cuda:0 in empty (called from test_cuda_memory.py:" in message  # op and caller
    assert kg.cuda.memory_stats()["num_ooms"] == stats["num_ooms"] + 1
    # The pool is still usable: small tensors fit, and kernels still run.
    y = kg.ones(100, device=cuda) * 2
    assert y.sum().item() == 200.0
    kg.cuda.set_memory_limit(None)
    big = kg.empty(100_000, device=cuda)
    assert big.shape == (100_000,)
    del keep, big


def test_out_of_memory_first_frees_cached_blocks(cuda, pool):
    cached = [kg.empty(20_000, device=cuda) for _ in range(4)]  # 4 x 80 KB
    del cached
    stats = kg.cuda.memory_stats()
    assert stats["cached_bytes"] >= 4 * 80_000
    kg.cuda.set_memory_limit(stats["allocated_bytes"] + 200_000)
    x = kg.empty(40_000, device=cuda)  # 160 KB fits only once the cache is returned
    assert kg.cuda.memory_stats()["cached_bytes"] == 0
    del x


def test_out_of_memory_collects_reference_cycles(cuda, pool):
    kg.cuda.empty_cache()

    class Holder:
        pass

    holder = Holder()
    holder.self = holder
    holder.tensor = kg.empty(50_000, device=cuda)  # 200 KB, only freed by the collector
    gc.disable()
    try:
        del holder
        stats = kg.cuda.memory_stats()
        kg.cuda.set_memory_limit(stats["reserved_bytes"] + 10_000)
        x = kg.empty(50_000, device=cuda)  # needs the cycle's memory
    finally:
        gc.enable()
    assert x.shape == (50_000,)


def test_memory_stats_of_an_unused_pool_are_zero():
    from kernelgrad.backends.cuda.memory import zero_stats

    stats = zero_stats()
    assert stats["allocated_bytes"] == 0 and stats["limit_bytes"] is None
    assert set(stats) >= {"allocated_bytes", "reserved_bytes", "peak_allocated_bytes"}


@pytest.mark.gpu
def test_real_device_out_of_memory_is_recoverable(cuda, pool):
    total = pool.memory.total_bytes()
    assert total is not None
    with pytest.raises(kg.cuda.OutOfMemoryError, match="free"):
        kg.empty(2 * total // 4, device=cuda)  # twice the device's memory, in float32
    x = kg.ones(1000, device=cuda)
    assert x.sum().item() == 1000.0
