"""The CUDA backend's kernels: elementwise, reductions, matmul, gather/scatter, random
numbers, transfers, launch configurations and error reporting.

Runs under numba's CUDA simulator in CI (``.ci/run-cuda-sim``) and on a real GPU with
``KG_TEST_REAL_GPU=1 pytest --backend cuda``; skipped where CUDA is unavailable. Shapes
are tiny but cross block and tile edges: several tests install a small launch policy so
that multi-block, grid-stride and split-reduction paths run on a real GPU too.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends import get_backend
from kernelgrad.backends.base import ScalarFunction, View
from kernelgrad.backends.cuda.launch import LaunchPolicy
from kernelgrad.backends.cuda.runtime import DeviceProperties
from kernelgrad.device import as_device
from tests.helpers import assert_close


@pytest.fixture
def backend(cuda: str):
    return get_backend(as_device(cuda))


TINY = LaunchPolicy(
    threads=32,
    max_blocks=2,
    warp=1,
    reduce_threads=32,
    reduce_blocks=2,
    reduce_min_per_thread=1,
    serial_min_per_thread=2,
    tile=4,
    work_per_thread=4,
    max_matmul_blocks=2,
)


@pytest.fixture
def tiny_policy(backend):
    """Small blocks and grids, so that tiny shapes need several blocks and passes."""
    saved = backend.policy
    backend.policy = TINY
    yield TINY
    backend.policy = saved


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def recent_launches(backend, name: str) -> list:
    return [r for r in backend.launcher.recent if r.name == name]


# --- elementwise ---------------------------------------------------------------------------
def test_elementwise_contiguous_crosses_blocks(cuda, backend, tiny_policy):
    values = rng().standard_normal(100).astype(np.float32)
    x = kg.tensor(values, device=cuda)
    y = (x * 2.0 + 1.0).tanh()
    assert y.device == as_device("cuda")
    assert_close(y, np.tanh(values * 2 + 1), rtol=1e-5)
    record = recent_launches(backend, "tanh")[-1]
    assert record.grid == 2 and record.block == 32  # 100 elements: a grid-stride loop


def test_elementwise_uses_contiguous_variant_only_when_possible(cuda, backend):
    values = rng(1).standard_normal((4, 6)).astype(np.float32)
    x = kg.tensor(values, device=cuda)
    backend._elementwise_kernels.clear()
    _ = x.exp()
    assert [key[-1] for key in backend._elementwise_kernels] == [0]
    backend._elementwise_kernels.clear()
    y = x.T.exp()  # transposed: the strided kernel over two dims
    assert [key[-1] for key in backend._elementwise_kernels] == [2]
    assert_close(y, np.exp(values.T), rtol=1e-6)


@pytest.mark.parametrize("layout", ["permuted", "sliced", "broadcast", "offset"])
def test_elementwise_strided_layouts(cuda, layout):
    values = rng(2).standard_normal((3, 5, 4)).astype(np.float32)
    other = rng(3).standard_normal((3, 5, 4)).astype(np.float32)
    if layout == "permuted":
        x = kg.tensor(np.ascontiguousarray(values.transpose(2, 0, 1)), device=cuda).permute(1, 2, 0)
        expected_x = values
    elif layout == "sliced":
        big = kg.tensor(np.repeat(values, 2, axis=1), device=cuda)
        x = big[:, ::2, :]
        expected_x = values
    elif layout == "broadcast":
        x = kg.tensor(values[:, :1, :], device=cuda).expand(3, 5, 4)
        expected_x = np.broadcast_to(values[:, :1, :], (3, 5, 4))
    else:
        flat = kg.tensor(np.concatenate([np.zeros(7, np.float32), values.ravel()]), device=cuda)
        x = flat[7:].reshape(3, 5, 4)
        expected_x = values
    y = kg.tensor(other, device=cuda)
    assert_close(x * y - x, expected_x * other - expected_x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("dtype", "values"),
    [
        (kg.float64, [1.5, -2.25, 3.0]),
        (kg.int32, [4, -7, 9]),
        (kg.int64, [2**40, -3, 5]),
        (kg.bool, [True, False, True]),
    ],
)
def test_elementwise_dtypes_match_cpu(cuda, dtype, values):
    cpu = kg.tensor(values, dtype=dtype)
    gpu = kg.tensor(values, dtype=dtype, device=cuda)
    if dtype is kg.bool:
        results = [(gpu & ~gpu) | gpu, gpu == gpu, gpu.to(kg.int64) + 1]
        expected = [(cpu & ~cpu) | cpu, cpu == cpu, cpu.to(kg.int64) + 1]
    else:
        results = [gpu * 3 - 1, gpu > 0, gpu.abs(), kg.maximum(gpu, gpu * 2), gpu.to(kg.float32)]
        expected = [cpu * 3 - 1, cpu > 0, cpu.abs(), kg.maximum(cpu, cpu * 2), cpu.to(kg.float32)]
    for got, want in zip(results, expected):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


def test_elementwise_ieee_semantics(cuda):
    """inf and nan where a GPU gives them, also in the simulator (no Python exceptions)."""
    values = np.array([-2.0, 0.0, 3.0, 100.0], np.float32)
    x = kg.tensor(values, device=cuda)
    with np.errstate(all="ignore"):
        assert_close(x / 0, np.array([-np.inf, np.nan, np.inf, np.inf], np.float32))
        assert_close(x.exp(), np.exp(values), rtol=1e-6)
        assert_close(x.log(), np.log(values))
    assert_close(x.sign(), np.array([-1.0, 0.0, 1.0, 1.0], np.float32))


def test_elementwise_several_outputs(cuda, backend):
    source = "def divmod_(x, y):\n    return x // y, x - (x // y) * y\n"
    fn = ScalarFunction("divmod_", source, 2, nout=2)
    a = kg.tensor([7, -7, 9, 10, 11], device=cuda)
    quotient = kg.empty(5, dtype=kg.int64, device=cuda)
    remainder = kg.empty(5, dtype=kg.float64, device=cuda)
    backend.elementwise(
        fn, [quotient._view(), remainder._view()], [a._view(), 3], [kg.int64, kg.int64]
    )
    np.testing.assert_array_equal(quotient.cpu().numpy(), [2, -3, 3, 3, 3])
    np.testing.assert_array_equal(remainder.cpu().numpy(), [1.0, 2.0, 0.0, 1.0, 2.0])


def test_inplace_into_strided_view(cuda):
    base = kg.zeros(4, 6, device=cuda)
    column = base[:, 1::2]
    column.add_(kg.arange(12, device=cuda).reshape(4, 3).to(kg.float32))
    expected = np.zeros((4, 6), np.float32)
    expected[:, 1::2] = np.arange(12).reshape(4, 3)
    assert_close(base, expected)


# --- reductions ------------------------------------------------------------------------------
def test_sum_longer_than_a_block_splits_rows(cuda, backend, tiny_policy):
    values = rng(4).standard_normal(100).astype(np.float32)
    x = kg.tensor(values, device=cuda)
    total = x.sum()
    assert total.item() == pytest.approx(float(values.astype(np.float64).sum()), rel=1e-5)
    passes = recent_launches(backend, "reduce_sum")[-2:]
    assert "mode='32 threads per row'" in str(passes[0].operands)
    assert "nsplit=2" in str(passes[0].operands)  # two blocks share the row
    assert "nsplit=1" in str(passes[1].operands)  # the combining pass


@pytest.mark.parametrize("dims", [0, 1, 2, (0, 2), (1, 2), None])
def test_sum_and_max_over_any_dims(cuda, tiny_policy, dims):
    values = rng(5).standard_normal((5, 70, 3)).astype(np.float32)
    x = kg.tensor(values, device=cuda)
    axis = dims if not isinstance(dims, list) else tuple(dims)
    assert_close(x.sum(dim=dims), values.astype(np.float64).sum(axis=axis), rtol=1e-5, atol=1e-5)
    assert_close(x.amax(dim=dims), values.max(axis=axis))
    assert_close(x.amin(dim=dims), values.min(axis=axis))


def test_reduce_over_non_contiguous_input(cuda, tiny_policy):
    values = rng(6).standard_normal((40, 6)).astype(np.float32)
    x = kg.tensor(np.ascontiguousarray(values.T), device=cuda).T  # (40, 6), column-major
    assert_close(x.sum(dim=1), values.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert_close(x.sum(dim=0), values.sum(axis=0), rtol=1e-5, atol=1e-5)
    assert_close(x[::3].amax(dim=0), values[::3].max(axis=0))


def test_argmax_first_occurrence_and_nan(cuda, tiny_policy):
    values = np.zeros((3, 90), np.float32)
    values[0, [10, 50, 80]] = 5.0  # ties: the first index wins
    values[1, [40, 70]] = np.nan  # NaN wins, first NaN
    values[1, 5] = 9.0
    values[2] = -np.inf  # all equal: index 0
    x = kg.tensor(values, device=cuda)
    np.testing.assert_array_equal(x.argmax(dim=1).cpu().numpy(), [10, 40, 0])
    np.testing.assert_array_equal(x.argmin(dim=1).cpu().numpy(), [0, 40, 0])
    full = kg.tensor(np.arange(100.0, dtype=np.float32) % 7, device=cuda)
    assert full.argmax().item() == 6
    assert full.argmin().item() == 0


def test_integer_and_bool_reductions(cuda, tiny_policy):
    values = rng(7).integers(-50, 50, size=(4, 67))
    x = kg.tensor(values, device=cuda)
    assert x.sum().item() == values.sum()
    np.testing.assert_array_equal(x.amax(dim=1).cpu().numpy(), values.max(axis=1))
    np.testing.assert_array_equal(x.argmin(dim=0).cpu().numpy(), values.argmin(axis=0))
    mask = kg.tensor(values > 40, device=cuda)
    assert mask.sum().item() == int((values > 40).sum())
    assert bool(mask.any().item()) == bool((values > 40).any())
    assert bool(mask.all().item()) is False


@pytest.mark.parametrize(("shape", "block"), [((5, 7), 32), ((3, 300), 32), ((2, 9), 1)])
def test_fused_reductions_give_short_rows_at_most_a_warp(cuda, backend, shape, block, request):
    """A compiled function's fused reduction: a block per output, the policy's
    ``row_threads`` (at most a warp) for rows of up to 256 elements, pieces of whole
    blocks for longer ones. The simulator's own policy gives short rows one thread
    (``(2, 9)``, no shared-memory tree); the others run the tree with 32 threads."""
    if block == 32:
        request.getfixturevalue("tiny_policy")
    values = rng(9).standard_normal(shape).astype(np.float32)
    compiled = kg.compile(lambda a: (a * a + 1.0).sum(1).sqrt())
    x = kg.tensor(values, device=cuda)
    for _ in range(3):  # eager, traced, replayed
        result = compiled(x)
    expected = np.sqrt((values.astype(np.float64) ** 2 + 1.0).sum(1))
    assert_close(result, expected, rtol=1e-5, atol=1e-6)
    fused = [r for r in backend.launcher.recent if "fused" in r.name]
    assert fused and str(fused[-1].block) in (str(block), str((block, 1, 1)))


def test_reduce_policy_on_a_real_sized_device():
    policy = LaunchPolicy.for_device(DeviceProperties("H100", 132, (9, 0), 1024, False))
    assert policy.reduce_threads == 256 and policy.threads == 256
    assert policy.max_blocks == 8 * 132


# --- matmul ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((33, 33), (33, 33)), ((2, 33, 17), (17, 35)), ((3, 1, 5, 9), (2, 9, 4)), ((1, 7), (7, 1))],
)
def test_matmul_crosses_tile_edges(cuda, backend, a_shape, b_shape):
    a = rng(8).standard_normal(a_shape).astype(np.float32)
    b = rng(9).standard_normal(b_shape).astype(np.float32)
    result = kg.tensor(a, device=cuda) @ kg.tensor(b, device=cuda)
    assert_close(result, a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_transposed_and_sliced_operands(cuda):
    a = rng(10).standard_normal((20, 33)).astype(np.float64)
    b = rng(11).standard_normal((18, 20)).astype(np.float64)
    ta, tb = kg.tensor(a, device=cuda), kg.tensor(b, device=cuda)
    assert_close(ta.T @ tb.T, a.T @ b.T, rtol=1e-10, atol=1e-10)
    assert_close(ta[::2, 1::3].T @ tb[:, ::2].T, a[::2, 1::3].T @ b[:, ::2].T, rtol=1e-10)


def test_matmul_integer_dtypes(cuda):
    a = rng(12).integers(-5, 5, size=(9, 17))
    b = rng(13).integers(-5, 5, size=(17, 10))
    result = kg.tensor(a, device=cuda) @ kg.tensor(b, device=cuda)
    assert result.dtype == kg.int64
    np.testing.assert_array_equal(result.cpu().numpy(), a @ b)
    small = kg.tensor(a, dtype=kg.int32, device=cuda) @ kg.tensor(b, dtype=kg.int32, device=cuda)
    np.testing.assert_array_equal(small.cpu().numpy(), (a @ b).astype(np.int32))


def test_own_matmul_kernel_is_the_reference(cuda, backend):
    """The tiled kernel is the fallback and the reference for the vendor GEMM."""
    a = kg.tensor(rng(14).standard_normal((2, 19, 21)).astype(np.float32), device=cuda)
    b = kg.tensor(rng(15).standard_normal((2, 21, 23)).astype(np.float32), device=cuda)
    out = kg.empty(2, 19, 23, device=cuda)
    backend.matmul_kernel(out._view(), a._view(), b._view())
    assert_close(out, (a @ b).cpu().numpy(), rtol=1e-4, atol=1e-4)
    if kg.cuda.is_simulated():
        assert backend.matmul_impl == "kernel"


@pytest.mark.gpu
def test_vendor_matmul_matches_own_kernel(cuda, backend):
    pytest.importorskip("cupy")
    a = kg.randn(3, 257, 129, device=cuda)
    b = kg.randn(129, 130, device=cuda)
    assert backend.matmul_impl == "cublas"
    vendor = a @ b
    reference = kg.empty(3, 257, 130, device=cuda)
    backend.matmul_kernel(reference._view(), a._view(), b.expand(3, 129, 130)._view())
    assert_close(vendor, reference.cpu().numpy(), rtol=1e-4, atol=1e-4)


# --- gather / scatter-add --------------------------------------------------------------------
def test_take_rows_and_columns(cuda, tiny_policy):
    values = rng(16).standard_normal((7, 5)).astype(np.float32)
    x = kg.tensor(values, device=cuda)
    index = kg.tensor([[6, 0], [-1, 3]], device=cuda)
    assert_close(kg.take(x, 0, index), values[[[6, 0], [6, 3]]])
    assert_close(x.index_select(1, kg.tensor([4, 4, 0], device=cuda)), values[:, [4, 4, 0]])
    assert_close(x[kg.tensor([1, 2], device=cuda), 1:], values[[1, 2], 1:])


def test_take_from_a_view_whose_dims_do_not_merge(cuda):
    values = rng(17).standard_normal((3, 4, 5)).astype(np.float32)
    base = kg.tensor(np.ascontiguousarray(values.transpose(1, 0, 2)), device=cuda)
    x = base.permute(1, 0, 2)  # (3, 4, 5), dims 0 and 2 do not merge around dim 1
    assert_close(x.index_select(1, kg.tensor([3, 1], device=cuda)), values[:, [3, 1], :])


def test_take_out_of_range_raises_and_recovers(cuda):
    x = kg.arange(6, device=cuda)
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        kg.take(x, 0, kg.tensor([1, 9], device=cuda)).cpu()  # reported at the next read
    np.testing.assert_array_equal(kg.take(x, 0, kg.tensor([5, 0], device=cuda)).cpu(), [5, 0])


def test_index_add_accumulates_duplicates_with_atomics(cuda, tiny_policy):
    target = kg.zeros(4, 3, device=cuda)
    index = kg.tensor([1, 3, 1, 1, -1], device=cuda)
    source = kg.ones(4, 5, 3, device=cuda)[0]  # (5, 3)
    result = kg.index_add(target, 0, index, source)
    expected = np.zeros((4, 3), np.float32)
    expected[1] = 3
    expected[3] = 2
    assert_close(result, expected)
    with pytest.raises(IndexError):
        kg.index_add(target, 0, kg.tensor([0, 4, 0, 0, 0], device=cuda), source).cpu()


def test_take_gradient_is_index_add(cuda):
    values = rng(18).standard_normal((5, 3)).astype(np.float32)
    x = kg.tensor(values, device=cuda, requires_grad=True)
    picked = x.index_select(0, kg.tensor([0, 2, 2, 4], device=cuda))
    (picked * 2).sum().backward()
    expected = np.zeros((5, 3), np.float32)
    expected[[0, 4]] = 2
    expected[2] = 4
    assert_close(x.grad, expected)


# --- random numbers --------------------------------------------------------------------------
def test_random_is_reproducible_and_in_range(cuda):
    kg.manual_seed(123)
    first = kg.rand(300, device=cuda)
    normal = kg.randn(300, dtype=kg.float64, device=cuda)
    integers = kg.randint(-3, 4, (300,), device=cuda)
    kg.manual_seed(123)
    np.testing.assert_array_equal(first.cpu().numpy(), kg.rand(300, device=cuda).cpu().numpy())
    assert not np.array_equal(first.cpu().numpy(), kg.rand(300, device=cuda).cpu().numpy())
    u = first.cpu().numpy()
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.06 and abs(u.var() - 1 / 12) < 0.02
    z = normal.cpu().numpy()
    assert abs(z.mean()) < 0.2 and abs(z.std() - 1) < 0.15
    k = integers.cpu().numpy()
    assert k.min() == -3 and k.max() == 3 and k.dtype == np.int64


def test_random_numbers_do_not_depend_on_the_launch(cuda, backend):
    backend.manual_seed(7)
    default = kg.randn(70, device=cuda).cpu().numpy()
    saved = backend.policy
    backend.policy = dataclasses.replace(TINY, threads=4, max_blocks=3)
    try:
        backend.manual_seed(7)
        other = kg.randn(70, device=cuda).cpu().numpy()
    finally:
        backend.policy = saved
    np.testing.assert_array_equal(default, other)


def test_uniform_fill_of_a_view(cuda):
    x = kg.zeros(4, 6, device=cuda)
    kg.ops.creation.uniform_(x[:, 2:4], 5.0, 6.0)
    values = x.cpu().numpy()
    assert np.all(values[:, [0, 1, 4, 5]] == 0)
    assert np.all((values[:, 2:4] >= 5) & (values[:, 2:4] < 6))


# --- transfers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [kg.float32, kg.float64, kg.int32, kg.int64, kg.bool])
def test_round_trip_every_dtype(cuda, dtype):
    values = rng(19).integers(0, 2, size=(3, 4)) if dtype is kg.bool else np.arange(12) - 5
    host = kg.tensor(np.asarray(values).reshape(3, 4), dtype=dtype)
    device = host.to(cuda)
    assert device.device == as_device("cuda:0") and device.dtype == dtype
    back = device.cpu()
    assert back.device == as_device("cpu")
    np.testing.assert_array_equal(back.numpy(), host.numpy())


def test_transfers_of_views_both_ways(cuda):
    values = np.arange(60, dtype=np.float32).reshape(6, 10)
    host = kg.tensor(values)
    # host -> device from a strided view
    assert_close(host[1::2, ::3].to(cuda), values[1::2, ::3])
    on_device = kg.tensor(values, device=cuda)
    # device -> host: a dense window (copied whole, strided on the host) ...
    assert_close(on_device[:, 1:9].cpu(), values[:, 1:9])
    assert_close(on_device.T.cpu(), values.T)
    # ... and a sparse view (gathered on the device first)
    big = kg.tensor(np.arange(4000, dtype=np.float32).reshape(40, 100), device=cuda)
    assert_close(big[::13, 7].cpu(), np.arange(4000, dtype=np.float32).reshape(40, 100)[::13, 7])
    # device -> device copies of views
    assert_close(on_device[::2].clone(), values[::2])
    assert_close(kg.tensor(on_device[:, ::2]), values[:, ::2])


def test_transfer_to_the_same_device_returns_the_tensor(cuda):
    x = kg.ones(3, device=cuda)
    assert x.to("cuda") is x and x.to("cuda:0") is x and x.cuda() is x


def test_transfer_is_differentiable_both_ways(cuda):
    x = kg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = (x.to(cuda) ** 2).cpu().sum() + (x.to(cuda).cpu() * 3).sum()
    y.backward()
    assert x.grad.device == as_device("cpu")
    assert_close(x.grad, np.array([2.0, -4.0, 6.0]) + 3)


# --- errors ----------------------------------------------------------------------------------
def test_kernel_failure_names_kernel_shapes_and_launch(cuda, backend):
    if not kg.cuda.is_simulated():
        pytest.skip("provokes a Python exception inside a simulated kernel")
    fn = ScalarFunction("fails", "def fails(x):\n    raise ValueError('boom')\n", 1)
    x = kg.ones(3, 5, device=cuda)
    out = kg.empty(3, 5, device=cuda)
    with pytest.raises(kg.KernelError) as info:
        backend.elementwise(
            fn,
            [out._view()],
            [
                x.T.T._view(),
            ],
            [kg.float32],
        )
    message = str(info.value)
    assert "'fails'" in message and "grid=" in message and "block=" in message
    assert "(3, 5)" in message


def test_out_of_bounds_access_in_the_simulator_is_a_kernel_error(cuda, backend):
    if not kg.cuda.is_simulated():
        pytest.skip("only the simulator checks bounds")
    x = kg.ones(4, device=cuda)
    # A view that claims more elements than the buffer holds.
    bad = View(x._storage.buffer, (8,), (1,), 0, kg.float32)
    out = kg.empty(8, device=cuda)
    with pytest.raises(kg.KernelError, match="out-of-bounds"):
        backend.elementwise(
            ScalarFunction("identity", "def identity(x):\n    return x\n", 1),
            [out._view()],
            [bad],
            [kg.float32],
        )


def test_synchronize_reports_earlier_failures(cuda, backend, monkeypatch):
    def failing_synchronize() -> None:
        raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")

    kg.ones(2, device=cuda) + 1  # a launch to name
    monkeypatch.setattr(
        backend.launcher, "_cuda", type("C", (), {"synchronize": staticmethod(failing_synchronize)})
    )
    with pytest.raises(kg.KernelError) as info:
        kg.cuda.synchronize()
    message = str(info.value)
    assert "ILLEGAL_ADDRESS" in message and "add" in message
    assert "KG_CUDA_LAUNCH_BLOCKING" in message


def test_launch_policy_grid_choices():
    policy = LaunchPolicy.for_device(DeviceProperties("GPU", 100, (9, 0), 1024, False))
    assert policy.grid_for(1) == (1, 32)  # one warp, not a whole block
    assert policy.grid_for(1000) == (4, 256)
    assert policy.grid_for(10**9) == (800, 256)  # capped: a grid-stride loop does the rest
    simulated = LaunchPolicy.for_device(DeviceProperties("sim", 1, (9, 0), 1024, True))
    assert simulated.grid_for(5) == (1, 5)
    assert simulated.grid_for(1000) == (2, 32)
    for n in (1, 31, 32, 33, 257, 10**6):
        blocks, threads = policy.grid_for(n)
        assert threads % 32 == 0 and threads <= 256 and blocks <= policy.max_blocks
        assert blocks * threads >= min(n, policy.max_blocks * 256)


def test_numba_cuda_is_the_nvidia_implementation(cuda):
    from numba import cuda as numba_cuda

    assert getattr(numba_cuda, "implementation", "") == "NVIDIA"
    assert re.match(r"\d", __import__("numba_cuda").__version__)
