"""``@kg.kernel`` without workgroups: index ranges, argument layouts, scalars, errors."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import DeviceMismatchError, InplaceError, KernelError, ShapeError
from tests.helpers import as_numpy, assert_close, cache_hits_in_two_processes


@kg.kernel
def clamp_(img):
    i = kg.index()
    v = img[i]
    if v > 1.0:
        img[i] = 1.0
    elif v < 0.0:
        img[i] = 0.0


@kg.kernel
def axpy_transposed(out, a, b, alpha):
    i, j = kg.index(2)
    out[i, j] = a[i, j] + alpha * b[j, i]


@kg.kernel
def fill_coordinates(out):
    i, j, k = kg.index(3)
    out[i, j, k] = 100 * i + 10 * j + k


@kg.kernel
def linear_positions(out):
    out[kg.index()] = kg.index()


@kg.kernel
def guarded_square(out, x, n):
    i = kg.index()
    if i >= n:
        return
    out[i] = x[i] * x[i]


def _image(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 2.0, shape).astype(np.float32)


def test_clamp_2d_image(device, simulated):
    shape = (6, 5) if simulated else (30, 20)
    values = _image(shape)
    img = kg.tensor(values, device=device)
    version = img._storage.version
    clamp_(img, ndrange=img.numel())
    assert_close(img, np.clip(values, 0.0, 1.0))
    assert img._storage.version == version + 1


def test_clamp_through_views_reaches_base(device):
    values = _image((4, 6), seed=1)
    base = kg.tensor(values, device=device)
    strided = base[:, ::2]  # non-contiguous: copied, run, copied back
    clamp_(strided, ndrange=strided.numel())
    expected = values.copy()
    expected[:, ::2] = np.clip(values[:, ::2], 0.0, 1.0)
    assert_close(base, expected)

    transposed = kg.tensor(values, device=device).T
    clamp_(transposed, ndrange=transposed.numel())
    assert_close(transposed, np.clip(values.T, 0.0, 1.0))


def test_two_dimensional_index_with_strided_arguments(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b_storage = np.arange(24, dtype=np.float32).reshape(4, 6)
    b = kg.tensor(b_storage, device=device)[:, ::2]  # shape (4, 3), strides (6, 2)
    out = kg.zeros(3, 4, device=device)
    axpy_transposed(out, kg.tensor(a, device=device), b, 0.5, ndrange=(3, 4))
    assert_close(out, a + 0.5 * b_storage[:, ::2].T)


def test_three_dimensional_index(device):
    out = kg.zeros(2, 3, 4, dtype=kg.int64, device=device)
    fill_coordinates(out, ndrange=(2, 3, 4))
    i, j, k = np.indices((2, 3, 4))
    assert_close(out, 100 * i + 10 * j + k)


def test_linear_index_over_a_grid_and_flat_view_of_nd_tensor(device):
    out = kg.zeros(3, 5, dtype=kg.int64, device=device)
    linear_positions(out, ndrange=(3, 5))
    assert_close(out, np.arange(15).reshape(3, 5))


def test_early_return_and_integer_scalar(device):
    x = kg.arange(8, dtype=kg.float32, device=device)
    out = kg.full((8,), -1.0, device=device)
    guarded_square(out, x, 5, ndrange=8)
    assert_close(out, [0, 1, 4, 9, 16, -1, -1, -1])


def test_empty_range_launches_nothing(device):
    x = kg.zeros(0, device=device)
    clamp_(x, ndrange=0)
    assert x.numel() == 0


def test_numpy_arrays_run_on_the_cpu():
    values = _image((3, 4), seed=2)
    array = values.copy()
    clamp_(array, ndrange=array.size)
    np.testing.assert_array_equal(array, np.clip(values, 0.0, 1.0))


TILE_SCALE = 3.0


def _scale(v):
    return v * TILE_SCALE


@kg.kernel
def scale_with_helper(x):
    i = kg.index()
    x[i] = _scale(x[i]) + kg.exp(0.0)


def test_helpers_globals_and_kg_math(device):
    x = kg.tensor([1.0, 2.0], device=device)
    scale_with_helper(x, ndrange=2)
    assert_close(x, [4.0, 7.0])


def _clipped(v, low):
    return kg.minimum(kg.maximum(v, low), 1.0)  # in a helper too


@kg.kernel
def maximum_and_minimum(highest, lowest, clipped, x, y):
    i = kg.index()
    highest[i] = kg.maximum(x[i], y[i])
    lowest[i] = kg.minimum(x[i], y[i])
    clipped[i] = _clipped(x[i], 0.0)


@kg.elementwise
def elementwise_maximum(x, y):
    if x > 100.0:  # a branch: not traced, compiled from the source
        return x
    return kg.maximum(x, y)


def test_maximum_and_minimum_propagate_nan_in_kernels_as_the_tensor_ops(device):
    """kg.maximum/minimum inside kernels propagate NaN from either argument (as the
    tensor ops do), and treat signed zeros as they do."""
    nan = float("nan")
    values = [(1.0, 2.0), (2.0, 1.0), (nan, 1.0), (1.0, nan), (-0.0, 0.0), (0.0, -0.0)]
    x = kg.tensor([a for a, _ in values], device=device)
    y = kg.tensor([b for _, b in values], device=device)
    outs = [kg.zeros(len(values), device=device) for _ in range(3)]
    maximum_and_minimum(*outs, x, y, ndrange=len(values))
    expected = [kg.maximum(x, y), kg.minimum(x, y), kg.minimum(kg.maximum(x, 0.0), 1.0)]
    outs.append(elementwise_maximum(x, y))
    expected.append(expected[0])
    for got, want in zip(outs, expected):
        got, want = got.cpu().numpy(), want.cpu().numpy()
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want)).all()


# --- errors --------------------------------------------------------------------------------
def test_markers_outside_a_kernel_raise():
    with pytest.raises(KernelError, match="only has a meaning inside"):
        kg.index()
    with pytest.raises(KernelError, match=r"@kg.kernel"):
        kg.barrier()


def test_mixed_devices_name_the_arguments():
    x = kg.zeros(3)
    with pytest.raises(DeviceMismatchError, match=r"'img' on cpu.*device=cuda"):
        clamp_(x, ndrange=3, device="cuda")


def test_wrong_ndrange_rank():
    out = kg.zeros(2, 2)
    with pytest.raises(ShapeError, match=r"kg.index\(2\).*1-dimensional"):
        axpy_transposed(out, out, out, 1.0, ndrange=4)


def test_wrong_argument_count_and_type():
    with pytest.raises(TypeError, match="takes 1 arguments"):
        clamp_(kg.zeros(2), kg.zeros(2), ndrange=2)
    with pytest.raises(TypeError, match="argument 'img' is a str"):
        clamp_("image", ndrange=2)


def test_writing_a_tensor_that_requires_grad_is_refused():
    w = kg.zeros(3, requires_grad=True)
    with pytest.raises(InplaceError, match="requires grad"):
        clamp_(w, ndrange=3)
    with kg.no_grad():
        clamp_(w, ndrange=3)


def test_writing_a_broadcast_view_is_refused():
    x = kg.zeros(1).expand(4)
    with pytest.raises(KernelError, match="zero stride"):
        clamp_(x, ndrange=4)


def _set_first(row):
    row[0] = 1.0


@kg.kernel
def set_first_of_rows(out):
    i = kg.index()
    _set_first(out[i, :])  # a row view, written by the helper


def test_a_row_view_passed_to_a_helper_counts_as_written(device):
    out = kg.zeros(3, 2, device=device)
    version = out._storage.version
    set_first_of_rows(out, ndrange=3)
    assert out._storage.version != version
    assert_close(as_numpy(out), [[1.0, 0.0]] * 3)
    with pytest.raises(InplaceError, match="requires grad"):
        set_first_of_rows(kg.zeros(3, 2, device=device, requires_grad=True), ndrange=3)


@kg.kernel
def transcendental(out, x):
    i = kg.index()
    v = x[i]
    out[i] = math.tanh(v) + kg.exp(-v * v) + math.log1p(v * v) + math.erf(v)


def test_math_functions_on_the_cpu_use_vectorisable_versions(device):
    from kernelgrad.backends.cpu.kernel_module import kernel_source

    if device == "cpu":
        assert "_kg_vmath.tanh(" in kernel_source(transcendental.info, 1, False)
    values = np.linspace(-6, 6, 50, dtype=np.float32)
    out = kg.zeros(50, device=device)
    transcendental(out, kg.tensor(values, device=device), ndrange=50)
    x = values.astype(np.float64)
    erf = np.vectorize(math.erf)(x)
    expected = np.tanh(x) + np.exp(-x * x) + np.log1p(x * x) + erf
    assert_close(as_numpy(out), expected, rtol=1e-6, atol=1e-6)


def test_returning_a_value_is_refused():
    def returns(x):
        return x[kg.index()]

    with pytest.raises(KernelError, match="cannot return a value"):
        kg.kernel(returns)


def test_tensor_globals_are_refused():
    table = kg.zeros(3)

    def uses_global(x):
        x[kg.index()] = table[0]

    with pytest.raises(KernelError, match="'table', a Tensor"):
        kg.kernel(uses_global)


def test_numba_typing_errors_become_kernel_errors():
    @kg.kernel
    def bad(x):
        i = kg.index()
        x[i] = "text"

    with pytest.raises(KernelError, match="failed to compile"):
        bad(kg.zeros(2), ndrange=2)


def test_reserved_names():
    def reserved(x):
        _kg_lin = 1
        x[_kg_lin] = 0.0

    with pytest.raises(KernelError, match="reserved"):
        kg.kernel(reserved)


# --- disk cache -----------------------------------------------------------------------------
CACHE_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import kernelgrad as kg
    from tests.kernel.test_kernel import clamp_

    x = kg.tensor(np.array([-1.0, 0.5, 2.0], dtype=np.float32))
    clamp_(x, ndrange=3)
    assert x.tolist() == [0.0, 0.5, 1.0]
    launchers = next(iter(clamp_.launchers.values()))
    print("hits", sum(sum(d.stats.cache_hits.values()) for d in launchers))
    """
)


def test_compiled_kernels_are_cached_on_disk_across_processes(tmp_path):
    runs = cache_hits_in_two_processes(["-c", CACHE_SCRIPT], tmp_path)
    assert runs[0] == 0
    assert runs[1] >= 1
    assert list((tmp_path / "kernels").glob("kg_kernel_cpu_clamp__*.py"))


def test_results_round_trip_to_numpy(device):
    values = _image((2, 3), seed=3)
    img = kg.tensor(values, device=device)
    clamp_(img, ndrange=6)
    assert np.array_equal(as_numpy(img), np.clip(values, 0, 1))


# --- options: parallel, fastmath; slices of arguments ---------------------------------------
@kg.kernel(parallel=True, fastmath=True)
def row_sums(out, x, width):
    i = kg.index()
    row = x[i * width : i * width + width]  # a read-only view of one row
    total = 0.0
    for k in range(width):
        total += row[k]
    out[i] = total


@kg.kernel(parallel=False)
def add_one_to_rows(x, width):
    i = kg.index()
    row = x[i * width : i * width + width]
    for k in range(width):
        row[k] += 1.0


def test_fastmath_and_parallel_kernels_compute_the_same_sums(device):
    values = np.random.default_rng(4).standard_normal((3, 37)).astype(np.float32)
    out = kg.zeros(3, device=device)
    row_sums(out, kg.tensor(values.ravel(), device=device), 37, ndrange=3)
    assert_close(out, values.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_parallel_option_picks_the_cpu_launcher(monkeypatch):
    from kernelgrad.backends.cpu import kernel_module

    chosen = []
    original = kernel_module._launchers

    def spy(*args):
        parallel, serial = original(*args)

        def run_parallel(*a):
            chosen.append("parallel")
            return parallel(*a)

        def run_serial(*a):
            chosen.append("serial")
            return serial(*a)

        return run_parallel, run_serial

    monkeypatch.setattr(kernel_module, "_launchers", spy)
    x = kg.zeros(6)
    row_sums(kg.zeros(2), x, 3, ndrange=2)  # 2 items, parallel=True: spread anyway
    add_one_to_rows(x, 3, ndrange=2)  # parallel=False
    clamp_(x, ndrange=6)  # automatic: few items run on the calling thread
    assert chosen == ["parallel", "serial", "serial"]
    from kernelgrad.backends import cpu

    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", 4)  # the backend's threshold decides
    clamp_._eager.clear()  # (read when a launch is first made, as the environment is)
    clamp_(x, ndrange=6)
    assert chosen[-1] == "parallel"


def test_fastmath_reaches_the_generated_source():
    from kernelgrad.backends.cpu import kernel_module as cpu_kernels
    from kernelgrad.backends.cuda import kernel_module as cuda_kernels

    for source in (
        cpu_kernels.kernel_source(row_sums.info, 1, False, fastmath=True),
        cuda_kernels.kernel_source(row_sums.info, 1, False, fastmath=True),
    ):
        assert "fastmath" in source
    assert "fastmath" not in cpu_kernels.kernel_source(clamp_.info, 1, False)


def test_a_read_only_slice_is_not_a_write(device):
    x = kg.ones(6, device=device, requires_grad=True)
    version = x._storage.version
    out = kg.zeros(2, device=device)
    row_sums(out, x, 3, ndrange=2)  # no InplaceError although x requires grad
    assert x._storage.version == version
    assert as_numpy(out).tolist() == [3.0, 3.0]
    assert "x" not in row_sums.info.written and "out" in row_sums.info.written


def test_writing_through_a_slice_writes_the_argument(device):
    assert "x" in add_one_to_rows.info.written
    x = kg.zeros(6, device=device)
    version = x._storage.version
    add_one_to_rows(x, 3, ndrange=2)
    assert x._storage.version > version
    assert as_numpy(x).tolist() == [1.0] * 6
    with pytest.raises(InplaceError, match="requires grad"):
        add_one_to_rows(kg.zeros(6, device=device, requires_grad=True), 3, ndrange=2)


def test_the_kernel_layer_imports_no_backend_folder():
    """kernel/ reaches device code generation only through the Backend protocol
    (docs/architecture.md): a third backend is one new folder."""
    import ast
    import pathlib

    import kernelgrad.kernel

    folder = pathlib.Path(kernelgrad.kernel.__file__).parent
    offenders = []
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module or ''}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.lstrip(".").split(".")
                if "backends" in parts and parts[parts.index("backends") + 1 :][:1] in (
                    ["cpu"],
                    ["cuda"],
                ):
                    offenders.append(f"{path.name}:{node.lineno} {name}")
    assert not offenders, offenders
