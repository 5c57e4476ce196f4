"""Workgroups: local and group indices, shared memory and barriers, on every device."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import KernelError
from tests.helpers import as_numpy, assert_close

ROOT = Path(__file__).resolve().parents[2]
TILE = 4


@kg.kernel
def matmul_tiled(c, a, b):
    i, j = kg.index(2)
    li, lj = kg.local_index(2)
    tile_a = kg.shared((TILE, TILE), kg.float32)
    tile_b = kg.shared((TILE, TILE), kg.float32)
    n = a.shape[0]
    k = a.shape[1]
    m = b.shape[1]
    acc = 0.0
    for t in range((k + TILE - 1) // TILE):
        col = t * TILE + lj
        row = t * TILE + li
        if i < n and col < k:
            tile_a[li, lj] = a[i, col]
        else:
            tile_a[li, lj] = 0.0
        if row < k and j < m:
            tile_b[li, lj] = b[row, j]
        else:
            tile_b[li, lj] = 0.0
        kg.barrier()
        for kk in range(TILE):
            acc += tile_a[li, kk] * tile_b[kk, lj]
        kg.barrier()
    if i < n and j < m:
        c[i, j] = acc


GROUP = 8


@kg.kernel
def group_sums(out, x, n):
    i = kg.index()
    lane = kg.local_index()
    partial = kg.shared(GROUP, kg.float32)
    if i < n:
        partial[lane] = x[i]
    else:
        partial[lane] = 0.0
    kg.barrier()
    stride = GROUP // 2
    while stride > 0:
        if lane < stride:
            partial[lane] += partial[lane + stride]
        kg.barrier()
        stride //= 2
    if lane == 0:
        out[kg.group_index()] = partial[0]


@kg.kernel
def positions(local_out, group_out, global_out):
    i, j = kg.index(2)
    li, lj = kg.local_index(2)
    gi, gj = kg.group_index(2)
    if i < global_out.shape[0] and j < global_out.shape[1]:
        local_out[i, j] = 10 * li + lj
        group_out[i, j] = 10 * gi + gj
        global_out[i, j] = kg.index()


def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_tiled_matmul_crosses_tile_edges(device):
    a, b = _random((9, 7), 0), _random((7, 10), 1)
    c = kg.zeros(9, 10, device=device)
    ndrange = (-(-9 // TILE) * TILE, -(-10 // TILE) * TILE)
    matmul_tiled(
        c,
        kg.tensor(a, device=device),
        kg.tensor(b, device=device),
        ndrange=ndrange,
        workgroup=(TILE, TILE),
    )
    assert_close(c, a @ b, rtol=1e-5, atol=1e-5)


def test_tiled_matmul_with_partial_groups_and_transposed_input(device):
    a, b = _random((5, 6), 2), _random((6, 3), 3)
    a_t = kg.tensor(np.ascontiguousarray(a.T), device=device).T  # strided view
    c = kg.zeros(5, 3, device=device)
    matmul_tiled(c, a_t, kg.tensor(b, device=device), ndrange=(5, 3), workgroup=(TILE, TILE))
    assert_close(c, a @ b, rtol=1e-5, atol=1e-5)


def test_tree_reduction_with_barriers_in_a_while_loop(device):
    x = _random(21, 4)
    groups = -(-21 // GROUP)
    out = kg.zeros(groups, device=device)
    group_sums(out, kg.tensor(x, device=device), 21, ndrange=groups * GROUP, workgroup=GROUP)
    padded = np.concatenate([x, np.zeros(groups * GROUP - 21, np.float32)])
    assert_close(out, padded.reshape(groups, GROUP).sum(axis=1), rtol=1e-5, atol=1e-5)


@kg.kernel
def scan_steps(out, x, first):
    # `step` and `seen` are the same in every work item: on the CPU one number per group,
    # set once per group; `seen` is read in a phase before that phase updates it
    i = kg.index()
    lane = kg.local_index()
    values = kg.shared(GROUP, kg.float32)
    values[lane] = x[i]
    step = first
    seen = 0
    kg.barrier()
    while step < GROUP:
        if step <= lane:  # a lower bound: this phase still visits every work item
            out[i] += values[lane - step] + seen
        seen = seen + step
        kg.barrier()
        step *= 2
    if 0 == lane:  # noqa: SIM300
        out[i] += 1000.0 * seen


def test_group_uniform_variables_and_narrowed_phases(device):
    x = _random(2 * GROUP, 5)
    out = kg.zeros(2 * GROUP, device=device)
    scan_steps(out, kg.tensor(x, device=device), 1, ndrange=2 * GROUP, workgroup=GROUP)
    expected = np.zeros(2 * GROUP, np.float32)
    for group in range(2):
        values = x[group * GROUP : (group + 1) * GROUP]
        step, seen = 1, 0
        while step < GROUP:
            for lane in range(step, GROUP):
                expected[group * GROUP + lane] += values[lane - step] + seen
            seen += step
            step *= 2
        expected[group * GROUP] += 1000.0 * seen
    assert_close(out, expected, rtol=1e-5, atol=1e-4)


def test_the_cpu_runs_uniform_statements_once_and_narrows_phase_loops():
    """A tree reduction on the CPU: `stride` is one number per group, and the halving
    phases loop over the work items that pass their test only."""
    from kernelgrad.backends.cpu.kernel_module import kernel_source

    vector = ("A", "float32", 1)
    source = kernel_source(group_sums.info, 1, True, {"out": vector, "x": vector, "n": "i"})
    source = source[: source.index("def kernel_serial(")]
    assert "_kg_v_stride" not in source
    assert "stride = GROUP // 2" in source and "stride //= 2" in source
    assert "for _kg_llin in range(min(_kg_G, stride)):" in source
    assert "for _kg_llin in range(max(0, 0), min(_kg_G, (0) + 1)):" in source


def test_local_group_and_linear_indices(device):
    shape = (5, 6)
    local = kg.zeros(*shape, dtype=kg.int64, device=device)
    group = kg.zeros(*shape, dtype=kg.int64, device=device)
    linear = kg.zeros(*shape, dtype=kg.int64, device=device)
    positions(local, group, linear, ndrange=shape, workgroup=(2, 4))
    i, j = np.indices(shape)
    assert_close(local, 10 * (i % 2) + j % 4)
    assert_close(group, 10 * (i // 2) + j // 4)
    assert_close(linear, i * shape[1] + j)


PAIR = 4


def _pairs_and_ranks(out, counts, x, n):
    # four barriers, shared arrays of two dtypes, per-item variables (`mine`,
    # `following`: an element of a shared array) and a group-wide one (`shift`) across
    # them; the range need not be a whole number of groups
    i = kg.index()
    lane = kg.local_index()
    values = kg.shared(PAIR, kg.float32)
    above = kg.shared(PAIR, kg.int32)
    mine = 0.0
    if i < n:
        mine = x[i]
    values[lane] = mine
    kg.barrier()
    count = 0
    for other in range(PAIR):
        if values[other] > mine:
            count += 1
    above[lane] = count
    kg.barrier()
    shift = 1
    following = values[(lane + shift) % PAIR]
    kg.barrier()
    values[lane] = mine + following
    kg.barrier()
    if i < n:
        out[i] = values[lane] - mine
        counts[i] = above[lane] + 10 * above[(lane + 1) % PAIR]


pairs_and_ranks = {
    "parallel": kg.kernel(parallel=True)(_pairs_and_ranks),
    "serial": kg.kernel(parallel=False)(_pairs_and_ranks),
}


@pytest.mark.parametrize("form", ["parallel", "serial"])
@pytest.mark.parametrize("n", [1, 7, 53])  # 1, 2 and 14 groups: fewer, more than chunks
def test_several_barriers_and_shared_arrays_of_two_dtypes(device, form, n):
    x = _random(n, 6)
    out = kg.zeros(n, device=device)
    counts = kg.zeros(n, dtype=kg.int32, device=device)
    groups = -(-n // PAIR)
    pairs_and_ranks[form](out, counts, kg.tensor(x, device=device), n, ndrange=n, workgroup=PAIR)
    padded = np.concatenate([x, np.zeros(groups * PAIR - n, np.float32)]).reshape(groups, PAIR)
    above = (padded[:, None, :] > padded[:, :, None]).sum(axis=2)
    expected_counts = above + 10 * np.roll(above, -1, axis=1)
    assert_close(out, np.roll(padded, -1, axis=1).reshape(-1)[:n], rtol=1e-6, atol=1e-6)
    assert as_numpy(counts).tolist() == expected_counts.reshape(-1)[:n].tolist()


def _transpose_tiles(out, x):
    # a non-square 2-D group: the per-item `v` and the linear local index across a
    # barrier; each group writes its tile transposed through shared memory
    i, j = kg.index(2)
    li, lj = kg.local_index(2)
    tile = kg.shared((2, 3), kg.float64)
    v = -1.0
    if i < x.shape[0] and j < x.shape[1]:
        v = x[i, j]
    tile[li, lj] = v
    kg.barrier()
    lin = kg.local_index()
    if i < x.shape[0] and j < x.shape[1]:
        out[i, j] = v + 1000.0 * tile[1 - li, 2 - lj] + 1e6 * lin


transpose_tiles = {
    "parallel": kg.kernel(parallel=True)(_transpose_tiles),
    "serial": kg.kernel(parallel=False)(_transpose_tiles),
}


@pytest.mark.parametrize("form", ["parallel", "serial"])
def test_two_dimensional_group_with_a_per_item_variable(device, form):
    shape = (5, 7)
    x = np.arange(35, dtype=np.float64).reshape(shape)
    out = kg.zeros(*shape, dtype=kg.float64, device=device)
    transpose_tiles[form](out, kg.tensor(x, device=device), ndrange=shape, workgroup=(2, 3))
    padded = np.full((6, 9), -1.0)
    padded[:5, :7] = x
    i, j = np.indices(shape)
    li, lj = i % 2, j % 3
    partner = padded[i - li + 1 - li, j - lj + 2 - lj]
    assert_close(out, x + 1000.0 * partner + 1e6 * (li * 3 + lj))


@kg.kernel(parallel=True)
def positions3(local_out, group_out, global_out, linear_out):
    i, j, k = kg.index(3)
    li, lj, lk = kg.local_index(3)
    gi, gj, gk = kg.group_index(3)
    kg.barrier()
    if i < global_out.shape[0] and j < global_out.shape[1] and k < global_out.shape[2]:
        local_out[i, j, k] = 100 * li + 10 * lj + lk
        group_out[i, j, k] = 100 * gi + 10 * gj + gk
        global_out[i, j, k] = kg.index()
        linear_out[i, j, k] = kg.local_index()


def test_three_dimensional_groups(device):
    shape = (3, 5, 4)
    outs = [kg.zeros(*shape, dtype=kg.int64, device=device) for _ in range(4)]
    positions3(*outs, ndrange=shape, workgroup=(2, 2, 3))
    i, j, k = np.indices(shape)
    assert_close(outs[0], 100 * (i % 2) + 10 * (j % 2) + k % 3)
    assert_close(outs[1], 100 * (i // 2) + 10 * (j // 2) + k // 3)
    assert_close(outs[2], (i * 5 + j) * 4 + k)  # linear over the ndrange given
    assert_close(outs[3], ((i % 2) * 2 + j % 2) * 3 + k % 3)


def test_the_cpu_allocates_per_chunk_and_nests_item_loops():
    """Shared and per-item arrays are made once per chunk of groups, not per group; the
    work items of a 2-D group are nested loops (no division per item)."""
    from kernelgrad.backends.cpu.kernel_module import kernel_source

    matrix = ("A", "float32", 2)
    source = kernel_source(matmul_tiled.info, 2, True, {"c": matrix, "a": matrix, "b": matrix})
    source = source[: source.index("def kernel_serial(")]
    lines = source.splitlines()
    chunk = next(n for n, line in enumerate(lines) if "in prange(_kg_chunks)" in line)
    groups = next(n for n, line in enumerate(lines) if line.strip().startswith("for _kg_k in"))
    allocations = [n for n, line in enumerate(lines) if "np.empty(" in line]
    assert len(allocations) == 3 and all(chunk < n < groups for n in allocations)
    assert "for _kg_t1 in range(_kg_w1):" in source
    assert "_kg_llin //" not in source


def test_workgroup_required():
    with pytest.raises(KernelError, match="needs a workgroup size"):
        group_sums(kg.zeros(1), kg.zeros(8), 8, ndrange=8)


# --- structural errors, found when the function is decorated ------------------------------------
def test_barrier_under_an_item_dependent_branch_is_refused():
    def divergent(x):
        i = kg.index()
        if i < 3:
            kg.barrier()
        x[i] = 0.0

    with pytest.raises(KernelError, match=r"depends on the work item's index.*i < 3") as info:
        kg.kernel(divergent)
    assert "line" in str(info.value)


def test_barrier_inside_an_unsupported_statement_is_refused():
    def in_with(x):
        i = kg.index()
        for _ in range(2):
            try:
                kg.barrier()
            finally:
                x[i] = 0.0

    with pytest.raises(KernelError, match="Try is not supported"):
        kg.kernel(in_with)


def test_return_in_a_kernel_with_barriers_is_refused():
    def early_exit(x):
        i = kg.index()
        if i > 4:
            return
        kg.barrier()
        x[i] = 0.0

    with pytest.raises(KernelError, match="'return' is not supported"):
        kg.kernel(early_exit)


def test_break_out_of_a_barrier_loop_is_refused():
    def breaks(x):
        for t in range(3):
            kg.barrier()
            if t == 1:
                break

    with pytest.raises(KernelError, match="'break' would leave a loop"):
        kg.kernel(breaks)


def test_shared_must_be_declared_at_top_level():
    def nested_shared(x):
        if x.shape[0] > 1:
            tile = kg.shared(4, kg.float32)
            tile[0] = 1.0

    with pytest.raises(KernelError, match="top level"):
        kg.kernel(nested_shared)


def test_shared_shape_must_be_constant():
    def dynamic_shared(x):
        tile = kg.shared(x.shape, kg.float32)
        tile[0] = 1.0

    with pytest.raises(KernelError, match="constant"):
        kg.kernel(dynamic_shared)


# --- the CUDA form under Numba's simulator ------------------------------------------------------
SIMULATOR_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from numba import cuda
    from tests.kernel.test_kernel import clamp_
    from tests.kernel.test_workgroup import TILE, GROUP, group_sums, matmul_tiled

    values = np.random.default_rng(0).uniform(-1, 2, (6, 5)).astype(np.float32)
    image = cuda.to_device(values)
    clamp_(image, ndrange=values.size)
    assert np.array_equal(image.copy_to_host(), np.clip(values, 0, 1))

    a = np.random.default_rng(1).standard_normal((9, 7)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((7, 6)).astype(np.float32)
    c = cuda.to_device(np.zeros((9, 6), np.float32))
    matmul_tiled(c, cuda.to_device(a), cuda.to_device(b), ndrange=(12, 8),
                 workgroup=(TILE, TILE))
    assert np.allclose(c.copy_to_host(), a @ b, atol=1e-5)

    x = np.arange(11, dtype=np.float32)
    out = cuda.to_device(np.zeros(2, np.float32))
    group_sums(out, cuda.to_device(x), 11, ndrange=16, workgroup=GROUP)
    assert np.allclose(out.copy_to_host(), [x[:8].sum(), x[8:].sum()])
    print("simulated ok")
    """
)


def test_cuda_form_runs_in_the_simulator(tmp_path):
    """The generated CUDA kernels (plain and workgroup) on Numba device arrays, in a
    process with the simulator enabled (the CUDA backend is not needed for this)."""
    env = dict(
        os.environ,
        NUMBA_ENABLE_CUDASIM="1",
        KERNELGRAD_CACHE_DIR=str(tmp_path),
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-c", SIMULATOR_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "simulated ok" in done.stdout
