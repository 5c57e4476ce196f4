"""The CUDA backend's cached launch decisions (elementwise plans, reduction plans, typed
buffers): a call that differs from a cached one in strides, offset, dtype, shape, axes,
scalar type or buffer size class must never reuse the cached decision, and what a launch
reports (errors, KG_DEBUG lines, the compile check's recording, the pool's counts) is the
same for a cached launch as for the first one. Tiny shapes: these run in the simulator."""

from __future__ import annotations

import os

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import debug
from kernelgrad.backends import get_backend
from kernelgrad.backends.base import View
from kernelgrad.backends.cuda import codegen
from kernelgrad.device import as_device
from kernelgrad.errors import KernelError
from kernelgrad.ops.elementwise import OPS


@pytest.fixture
def backend(cuda: str):
    return get_backend(as_device(cuda))


def _view(tensor: kg.Tensor) -> View:
    return tensor._view()


def test_elementwise_strides_offsets_dtypes_and_shapes_after_a_cached_call(cuda):
    values = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = kg.tensor(values, device=cuda)
    y = kg.tensor(values[::-1].copy(), device=cuda)
    other = values[::-1]
    for _ in range(2):  # the second call runs from the cache
        np.testing.assert_array_equal((x + y).cpu().numpy(), values + other)
    cases = [
        (x.T + y.T, values.T + other.T),  # strides
        (x[1:] + y[1:], values[1:] + other[1:]),  # offset, shape
        (x[:, 1:4] + y[:, 2:5], values[:, 1:4] + other[:, 2:5]),  # different offsets
        (x[1:3] + y[2:4], values[1:3] + other[2:4]),  # same shape, other offsets
        (x + 1.5, values + 1.5),  # a scalar
        (x.to(kg.int32) + y.to(kg.int32), values.astype(np.int32) + other.astype(np.int32)),
        (x.to(kg.float64) + y, values.astype(np.float64) + other),  # compute dtype
        (x[0] + y, values[0] + other),  # broadcast: a stride-0 view
        (x.reshape(24) + y.reshape(24), (values + other).reshape(24)),
    ]
    for result, expected in cases:
        assert result.dtype.name == expected.dtype.name
        np.testing.assert_array_equal(result.cpu().numpy(), expected)
    # and back to the first pattern, with other buffers
    z = kg.tensor(values * 2, device=cuda)
    np.testing.assert_array_equal((z + y).cpu().numpy(), values * 2 + other)


def test_backend_elementwise_takes_each_calls_offsets_and_scalars(cuda, backend):
    """Same pattern (function, strides, dtypes): only offsets, buffers and the scalar
    change, and each call uses its own."""
    add = OPS["add"].scalar
    source = kg.tensor(np.arange(10, dtype=np.float32), device=cuda)
    for offset in (0, 3, 5, 3):
        out = kg.zeros(4, device=cuda)
        view = View(source._storage.buffer, (4,), (1,), offset, kg.float32)
        scalar = float(offset) / 2
        backend.elementwise(add, [_view(out)], [view, scalar], [kg.float32, kg.float32])
        expected = np.arange(offset, offset + 4, dtype=np.float32) + scalar
        np.testing.assert_array_equal(out.cpu().numpy(), expected)
    # an output with an offset into a larger buffer
    target = kg.zeros(8, device=cuda)
    out_view = View(target._storage.buffer, (4,), (2,), 1, kg.float32)
    backend.elementwise(add, [out_view], [source[:4]._view(), 1.0], [kg.float32, kg.float32])
    np.testing.assert_array_equal(target.cpu().numpy()[1::2], np.arange(4) + 1.0)
    assert target.cpu().numpy()[0::2].tolist() == [0.0] * 4


def test_in_place_ops_after_a_cached_call(cuda):
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(2):
        a = kg.tensor(values, device=cuda)
        a.add_(a)
        np.testing.assert_array_equal(a.cpu().numpy(), values * 2)
    a = kg.tensor(values, device=cuda)
    a[1:].mul_(3.0)  # a view with an offset, same strides
    expected = values.copy()
    expected[1:] *= 3
    np.testing.assert_array_equal(a.cpu().numpy(), expected)
    a.T.sub_(1.0)
    np.testing.assert_array_equal(a.cpu().numpy(), expected - 1)


def test_reductions_after_a_cached_call(cuda):
    values = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    x = kg.tensor(values, device=cuda)
    for _ in range(2):
        np.testing.assert_allclose(x.sum(1).cpu().numpy(), values.sum(1), rtol=1e-5)
    np.testing.assert_allclose(x.T.sum(1).cpu().numpy(), values.sum(0), rtol=1e-5)  # strides
    square = values[:, :5].copy()
    s = kg.tensor(square, device=cuda)
    for view, expected in [(s, square), (s.T, square.T), (s, square)]:  # same shape
        np.testing.assert_allclose(view.sum(1).cpu().numpy(), expected.sum(1), rtol=1e-5)
    rows = kg.tensor(values[1:].copy(), device=cuda)
    np.testing.assert_allclose(rows.sum(1).cpu().numpy(), values[1:].sum(1), rtol=1e-5)
    np.testing.assert_allclose(x[1:].sum(1).cpu().numpy(), values[1:].sum(1), rtol=1e-5)
    np.testing.assert_allclose(x[:, 2:].sum(1).cpu().numpy(), values[:, 2:].sum(1), rtol=1e-5)
    np.testing.assert_allclose(x.sum(0).cpu().numpy(), values.sum(0), rtol=1e-5)  # axes
    np.testing.assert_allclose(x.sum().item(), values.sum(), rtol=1e-5)
    np.testing.assert_allclose(x[2:].sum().item(), values[2:].sum(), rtol=1e-5)
    as_int = x.to(kg.int32)
    assert as_int.sum(1).cpu().numpy().tolist() == values.astype(np.int32).sum(1).tolist()
    assert x.to(kg.float64).sum(1).dtype == kg.float64
    # argmax over rows split into pieces (indices combined by a second pass), twice,
    # then over an offset view of the same layout
    long = np.random.default_rng(1).standard_normal(200).astype(np.float32)
    t = kg.tensor(long, device=cuda)
    for _ in range(2):
        assert t.argmax().item() == int(np.argmax(long))
    assert t[7:107].argmax().item() == int(np.argmax(long[7:107]))
    assert t[50:150].amax().item() == long[50:150].max()


def test_a_larger_buffer_class_gets_its_own_plan(cuda, backend, monkeypatch):
    """The index width (32 or 64 bits) depends on the buffers' sizes, which the plans'
    keys include: a call with a buffer past the limit never reuses a 32-bit plan."""
    values = np.arange(30, dtype=np.float32).reshape(5, 6)
    x = kg.tensor(values, device=cuda)
    np.testing.assert_array_equal((x.T * 2).cpu().numpy(), values.T * 2)
    np.testing.assert_allclose(x.sum(0).cpu().numpy(), values.sum(0))
    monkeypatch.setattr(codegen, "INDEX_LIMIT", 25)  # 30 elements count as huge now
    backend._elementwise_kernels.clear()
    backend._reduce_kernels.clear()
    np.testing.assert_array_equal((x.T * 2).cpu().numpy(), values.T * 2)
    np.testing.assert_allclose(x.sum(0).cpu().numpy(), values.sum(0))
    assert {key[-2] for key in backend._elementwise_kernels} == {64}
    # the first pass reads x (64-bit); the pass combining its pieces reads only small
    # buffers (32-bit)
    first_passes = [key for key in backend._reduce_kernels if not key[7]]
    assert first_passes and {key[-1] for key in first_passes} == {64}


def test_a_failing_cached_launch_names_its_own_operands(cuda, backend, monkeypatch):
    values = np.arange(10, dtype=np.float32)
    x = kg.tensor(values, device=cuda)
    (x[:4] + x[:4]).cpu()  # cached: the plan of a 4-element contiguous add
    from kernelgrad.backends.cuda import launch

    def fail(self, *args):
        raise RuntimeError("simulated launch failure")

    monkeypatch.setattr(launch._SimulatedLaunch, "__call__", fail)
    with pytest.raises(KernelError) as caught:
        x[3:7] + x[5:9]
    message = str(caught.value)
    assert "CUDA kernel 'add' failed" in message and "simulated launch failure" in message
    assert "in0 float32(4,) strides (1,) offset 3" in message
    assert "in1 float32(4,) strides (1,) offset 5" in message
    monkeypatch.undo()
    x[2:].sum().item()  # cached: the plan of an 8-element sum
    monkeypatch.setattr(launch._SimulatedLaunch, "__call__", fail)
    with pytest.raises(KernelError) as caught:
        x[:6].sum()
    assert "'reduce_sum' failed" in str(caught.value) and "reduced=(6,)" in str(caught.value)
    records = backend.launcher.recent
    assert records[-1].name == "reduce_sum" and "reduced=(6,)" in str(records[-1])


def test_cached_launches_are_logged_recorded_and_synchronised(cuda, backend, monkeypatch, capsys):
    from kernelgrad.backends.cuda.recording import Recording

    a = kg.ones(4, device=cuda)
    for _ in range(2):
        (a + a).cpu()
        a.sum().item()
    with Recording() as recording:
        a + a
        a.sum()
    names = {kernel.name for kernel in recording.kernels.values()}
    assert {"add", "reduce_sum"} <= names
    monkeypatch.setattr(debug, "_level", 2)
    a + a
    assert "add" in capsys.readouterr().err
    monkeypatch.setattr(debug, "_level", 0)
    waits: list[int] = []
    monkeypatch.setattr(backend.launcher, "blocking", True)
    monkeypatch.setattr(backend.launcher._cuda, "synchronize", lambda: waits.append(1))
    a + a
    assert waits == [1]


def test_the_pool_counts_cached_allocations(cuda, backend):
    a = kg.ones(16, device=cuda)
    (a + a).cpu()
    before = kg.cuda.memory_stats()
    results = [a + a for _ in range(3)]
    after = kg.cuda.memory_stats()
    assert after["num_allocs"] - before["num_allocs"] == 3
    assert after["active_blocks"] - before["active_blocks"] == 3
    assert after["num_cache_hits"] + after["num_raw_allocs"] == after["num_allocs"]
    del results
    freed = kg.cuda.memory_stats()
    assert freed["active_blocks"] == before["active_blocks"]
    assert freed["num_frees"] - before["num_frees"] == 3


@pytest.mark.skipif(
    os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", reason="numba-cuda's real device arrays"
)
def test_device_arrays_made_from_a_template_equal_constructed_ones():
    """runtime.DeviceArrays copies the constructor's attributes per (numel, dtype): the
    arrays it makes must be what the constructor makes (checked without a GPU, with
    stand-in device pointers)."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    from kernelgrad.backends.cuda.runtime import DeviceArrays

    class Pointer:  # a stand-in for a block's MemoryPointer
        pass

    stream = object()
    arrays = DeviceArrays(DeviceNDArray, stream)
    for numel, dtype in [(10, np.float32), (10, np.float32), (3, np.int64), (10, np.int8)]:
        dtype = np.dtype(dtype)
        pointer = Pointer()
        made = arrays.make(pointer, numel, dtype)
        expected = DeviceNDArray(
            shape=(numel,), strides=(dtype.itemsize,), dtype=dtype, stream=stream,
            gpu_data=pointer,
        )  # fmt: skip
        assert type(made) is DeviceNDArray
        assert made.gpu_data is pointer and made.stream is stream
        assert made._numba_type_ == expected._numba_type_  # what a launch types it as
        assert set(vars(made)) == set(vars(expected))
        for name in ("shape", "strides", "dtype", "size", "ndim", "alloc_size"):
            assert getattr(made, name) == getattr(expected, name), name
        assert len(made) == numel and made.is_c_contiguous()
