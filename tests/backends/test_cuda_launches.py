"""How the CUDA backend and kg.compile shape their kernels and launches: 32-bit index
arithmetic with a 64-bit variant for huge buffers, float32 sums with compensation,
a group of threads per short contiguous row, fused reductions split over blocks,
workgroup grids beyond CUDA's y/z limit, cross-entropy's row kernels.

Runs under the simulator in CI (``cuda`` fixture); the compiled code of the same kernels
is checked by ``tests/backends/test_compile_check.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends import get_backend
from kernelgrad.backends.cuda import codegen
from kernelgrad.backends.cuda import kernel_module as cuda_kernels
from kernelgrad.backends.cuda.recording import Recording
from kernelgrad.device import as_device
from tests.backends.test_cuda_backend import TINY


@pytest.fixture
def backend(cuda: str):
    backend = get_backend(as_device(cuda))
    saved = backend.policy
    backend.policy = TINY
    yield backend
    backend.policy = saved


def test_index_arithmetic_is_32_bit_unless_a_buffer_is_too_large(cuda, backend, monkeypatch):
    values = np.arange(90.0, dtype=np.float32).reshape(9, 10)
    x = kg.tensor(values, device=cuda)
    backend._elementwise_kernels.clear()
    np.testing.assert_array_equal((x.T * 2).cpu().numpy(), values.T * 2)
    assert {key[-2] for key in backend._elementwise_kernels} == {32}
    monkeypatch.setattr(codegen, "INDEX_LIMIT", 64)  # 90 elements count as huge now
    backend._elementwise_kernels.clear()
    np.testing.assert_array_equal((x.T * 2).cpu().numpy(), values.T * 2)
    np.testing.assert_array_equal(x.sum(0).cpu().numpy(), values.sum(0))
    assert {key[-2] for key in backend._elementwise_kernels} == {64}


def test_float32_sums_accumulate_in_float32_with_compensation(cuda, backend):
    values = np.ones(300, dtype=np.float32)
    values[::3] = 1e8
    values[1::3] = -1e8  # pairs that cancel, spread over threads and blocks
    x = kg.tensor(values, device=cuda)
    with Recording() as recording:
        total = x.sum().item()
        rows = x.reshape(3, 100).sum(1).cpu().numpy()
    assert total == 100.0  # float32 without compensation loses the ones entirely
    exact = values.reshape(3, 100).astype(np.float64).sum(1)
    np.testing.assert_array_equal(rows, exact.astype(np.float32))  # correctly rounded
    from numba.cuda import types

    for kernel in recording.kernels.values():
        assert kernel.kind == "reduce"
        arrays = [t for t in kernel.signature if isinstance(t, types.Array)]
        assert all(t.dtype != types.float64 for t in arrays), kernel.label


def test_short_contiguous_rows_are_reduced_by_a_group_of_threads(cuda, backend):
    values = np.random.default_rng(0).standard_normal((6, 7)).astype(np.float32)
    values[2, [1, 4]] = values[2].max() + 1  # a tie: the first index wins
    values[4, 3] = np.nan
    x = kg.tensor(values, device=cuda)
    np.testing.assert_allclose(x.sum(1).cpu().numpy(), values.sum(1), rtol=1e-6)
    record = backend.launcher.recent[-1]
    assert "mode='8 threads per row'" in str(record.operands)
    assert record.grid == 2 and record.block == 32  # 4 rows per block, 2 blocks
    assert x.argmax(1).cpu().tolist() == np.argmax(values, 1).tolist()
    np.testing.assert_array_equal(x.amax(1).cpu().numpy(), values.max(1))
    # over a strided dim: one thread per output, neighbouring threads on neighbours
    np.testing.assert_allclose(x.sum(0).cpu().numpy(), values.sum(0), rtol=1e-6)
    first_pass = [r for r in backend.launcher.recent if "reduced_strides=(7,)" in str(r.operands)]
    assert "mode='thread'" in str(first_pass[-1].operands)


def test_a_fused_sum_to_a_scalar_is_split_over_blocks(cuda, backend):
    values = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    x = kg.tensor(values, device=cuda)
    compiled = kg.compile(lambda a: (a * a).sum() / 2)
    for _ in range(2):
        compiled(x)
    with kg.compile.count_launches() as launches:
        result = compiled(x).item()
    assert launches.count == 2  # the pieces, then the combination and the epilogue
    labels = [r.name for r in backend.launcher.recent][-2:]
    assert labels[0] == labels[1] and labels[0].startswith("fused_")
    assert "pieces per output" in str(backend.launcher.recent[-1].operands)
    assert result == pytest.approx(float((values.astype(np.float64) ** 2).sum() / 2), rel=1e-6)


def test_fused_reductions_over_rows_and_with_few_elements(cuda, backend):
    values = np.random.default_rng(2).standard_normal((3, 90)).astype(np.float32)
    x = kg.tensor(values, device=cuda)
    compiled = kg.compile(lambda a: ((a * 2).amax(1), (a - 1).sum(1) * 0.5, a[:, :5].sum()))
    for _ in range(3):
        peak, half_sums, small = compiled(x)
    np.testing.assert_array_equal(peak.cpu().numpy(), (values * 2).max(1))
    np.testing.assert_allclose(half_sums.cpu().numpy(), (values - 1).sum(1) * 0.5, rtol=1e-5)
    assert small.item() == pytest.approx(float(values[:, :5].sum()), rel=1e-5)


def test_a_block_reduces_several_outputs_over_a_middle_dim(cuda, backend):
    """Two kept dims that do not coalesce, more outputs than blocks: each block
    unravels its next output with the kept shape again (the piece bounds once
    overwrote it: an out-of-bounds read from the second output of a block on)."""
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    x = kg.tensor(values, device=cuda)
    compiled = kg.compile(lambda a: (a * a).sum(-2, keepdim=True) * 2)
    for _ in range(3):
        result = compiled(x)
    assert backend.launcher.recent[-1].grid < 8  # 8 outputs: blocks take several
    np.testing.assert_allclose(
        result.cpu().numpy(), (values * values).sum(1, keepdims=True) * 2, rtol=1e-6
    )


@kg.kernel
def group_coordinates(local_out, group_out, global_out):
    i, j = kg.index(2)
    li, lj = kg.local_index(2)
    gi, gj = kg.group_index(2)
    if i < global_out.shape[0] and j < global_out.shape[1]:
        local_out[i, j] = 10 * li + lj
        group_out[i, j] = 100 * gi + gj
        global_out[i, j] = kg.index() + 1000 * kg.group_index()


def _coordinates(device: str, monkeypatch=None) -> list:
    outs = [kg.zeros(5, 3, dtype=kg.int64, device=device) for _ in range(3)]
    group_coordinates(*outs, ndrange=(5, 3), workgroup=(2, 2))
    return [o.cpu().numpy() for o in outs]


def test_workgroup_grids_beyond_the_y_limit_are_folded_onto_x(cuda, monkeypatch):
    expected = _coordinates("cpu")
    np.testing.assert_array_equal(_coordinates(cuda), expected)
    monkeypatch.setattr(cuda_kernels, "MAX_GRID_YZ", 2)  # 3 groups along y are too many
    before = len(group_coordinates.launchers)
    for got, want in zip(_coordinates(cuda), expected):
        np.testing.assert_array_equal(got, want)
    folded = [key for key in group_coordinates.launchers if key[0] == "cuda" and key[-1]]
    assert folded and len(group_coordinates.launchers) == before + 1


def test_grids_beyond_cuda_limits_are_refused_with_the_sizes(cuda, monkeypatch):
    monkeypatch.setattr(cuda_kernels, "MAX_GRID_YZ", 2)
    monkeypatch.setattr(cuda_kernels, "MAX_GRID_X", 4)
    outs = [kg.zeros(5, 3, dtype=kg.int64, device=cuda) for _ in range(3)]
    with pytest.raises(kg.KernelError, match=r"makes 6 groups; CUDA allows at most 4"):
        group_coordinates(*outs, ndrange=(5, 3), workgroup=(2, 2))


@pytest.mark.parametrize("classes", [3, 40])
def test_cross_entropy_rows_on_cuda_match_the_cpu(cuda, backend, classes):
    # the tiny policy gives each row a group of 4 or 64 threads
    rng = np.random.default_rng(classes)
    logits = rng.standard_normal((4, classes)).astype(np.float32) * 3
    targets = np.array([0, classes - 1, -100, 1])
    weight = rng.uniform(0.5, 2.0, classes).astype(np.float32)
    results = {}
    for device in ("cpu", cuda):
        x = kg.tensor(logits, device=device, requires_grad=True)
        loss = kg.nn.functional.cross_entropy(
            x,
            kg.tensor(targets, device=device),
            weight=kg.tensor(weight, device=device),
            label_smoothing=0.2,
        )
        loss.backward()
        results[device] = (loss.item(), x.grad.cpu().numpy())
    assert results[cuda][0] == pytest.approx(results["cpu"][0], rel=1e-6)
    np.testing.assert_allclose(results[cuda][1], results["cpu"][1], rtol=1e-5, atol=1e-7)
    assert not results[cuda][1][2].any()  # the ignored row


@kg.kernel
def lane_numbers(out):
    out[kg.index()] = kg.local_index()


class _OutOfRegisters:
    """A compiled kernel whose launches fail as numba-cuda's do when a block needs more
    registers than the GPU has per block (what the simulator cannot produce)."""

    def __getitem__(self, configuration):
        return self

    def __call__(self, *args):
        raise RuntimeError(
            "[701] Call to cuLaunchKernel results in CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
        )

    def get_regs_per_thread(self):
        return {("signature",): 166}

    def get_max_threads_per_block(self):
        return {("signature",): 384}


def test_a_workgroup_with_too_many_registers_names_the_largest_that_fits(cuda):
    out = kg.zeros(4, dtype=kg.int64, device=cuda)
    for narrow in (False, True):  # the launch's key (see kernel_module.launch)
        lane_numbers.launchers[("cuda", 1, True, narrow, False)] = _OutOfRegisters()
    try:
        with pytest.raises(kg.KernelError) as raised:
            lane_numbers(out, ndrange=4, workgroup=4)
    finally:
        lane_numbers.launchers.clear()
    message = str(raised.value)
    assert "kernel 'lane_numbers': a workgroup of 4 work items needs more registers" in message
    assert "166 registers per work item" in message and "at most 384 work items" in message
    lane_numbers(out, ndrange=4, workgroup=4)  # compiled again: runs
    np.testing.assert_array_equal(out.cpu().numpy(), [0, 1, 2, 3])


def test_launches_record_the_largest_block_of_each_kernel(cuda):
    """The compile check holds a kernel's registers against the largest block it was
    launched with (tests/backends/test_compile_check.py)."""
    out = kg.zeros(8, dtype=kg.int64, device=cuda)
    with Recording() as recording:
        lane_numbers(out, ndrange=8, workgroup=2)
        lane_numbers(out, ndrange=8, workgroup=4)
        lane_numbers(out, ndrange=8, workgroup=(2,))
        out.add_(1)  # a backend kernel: its launch's block too
    kernels = {k.name: k for k in recording.kernels.values()}
    assert kernels["kernel lane_numbers"].block_threads == 4
    assert kernels["kernel lane_numbers"].launches == 3
    assert all(k.block_threads >= 1 for k in recording.kernels.values())
