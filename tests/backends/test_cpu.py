"""The CPU backend: generated kernels, the disk cache across processes, debug output."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from math import prod

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends.base import ScalarFunction, View
from kernelgrad.backends.cpu import codegen
from kernelgrad.dtypes import float32, int64
from tests.helpers import as_numpy, assert_close


def test_generated_kernel_source_is_readable_python():
    fn = ScalarFunction("mul_add", "def mul_add(x0, x1, x2):\n    return x0 * x1 + x2\n", 3)
    source = codegen.elementwise_source(
        fn.name, fn.source, 1, ("array", "array", "scalar"), [float32] * 3, [float32]
    )
    compile(source, "<generated>", "exec")
    assert "prange" in source and "def mul_add" in source
    reduce_source = codegen.reduce_source("argmax", float32, float32, int64)
    compile(reduce_source, "<generated>", "exec")


def test_backend_elementwise_with_several_outputs_and_strided_output():
    backend = kg.ones(1)._backend
    fn = ScalarFunction("split", "def split(x0):\n    return x0 * 2, x0 - 1\n", 1, nout=2)
    x = np.arange(6, dtype=np.float32)
    doubled = np.zeros(12, dtype=np.float32)  # written with stride 2
    shifted = np.zeros(6, dtype=np.int64)
    backend.elementwise(
        fn,
        [View(doubled, (6,), (2,), 0, float32), View(shifted, (6,), (1,), 0, int64)],
        [View(x, (6,), (1,), 0, float32)],
        [float32],
    )
    assert_close(doubled[::2], x * 2)
    assert_close(doubled[1::2], np.zeros(6))
    assert_close(shifted, (x - 1).astype(np.int64))


def test_an_input_that_is_the_outputs_own_view_is_read_from_the_output():
    """In-place updates pass the output's buffer once (so that LLVM can vectorise the
    loop); an input on the same buffer at another offset stays a separate operand."""
    from kernelgrad.backends.base import operand_kind as _operand_kind

    backend = kg.ones(1)._backend
    fn = ScalarFunction("axpy", "def axpy(x0, x1, x2):\n    return x0 + x1 * x2\n", 3)
    source = codegen.elementwise_source(
        fn.name, fn.source, 1, ("out0", "array", "scalar"), [float32] * 3, [float32]
    )
    assert "def flat(n, out0, in1, scalar2):" in source
    for size in (10, 300_000):  # serial and parallel kernels
        buffer = np.arange(size + 1, dtype=np.float32)
        expected = buffer.copy()
        expected[:size] += expected[1:] * 2
        whole = View(buffer, (size,), (1,), 0, float32)
        shifted = View(buffer, (size,), (1,), 1, float32)
        assert _operand_kind(whole, [whole]) == "out0"
        assert _operand_kind(shifted, [whole]) == "array"
        assert _operand_kind(2.0, [whole]) == "scalar"
        if size > 10:  # parallel chunks may race on overlapping memory: a separate copy
            shifted = View(buffer[1:].copy(), (size,), (1,), 0, float32)
        # Serially the shifted input is read ahead of the writes (in order, as LLVM's
        # overlap check keeps a loop whose operands overlap scalar).
        backend.elementwise(fn, [whole], [whole, shifted, 2.0], [float32] * 3)
        assert_close(buffer, expected)
        # The same through the strided kernel: every other element, in place.
        strided = View(buffer, (size // 2,), (2,), 0, float32)
        before = buffer.copy()
        backend.elementwise(fn, [strided], [strided, strided, 3.0], [float32] * 3)
        after = before.copy()
        after[: size // 2 * 2 : 2] *= 4
        assert_close(buffer, after)


def _foreach_launched_alone(backend, fn, items, compute):
    """Run ``elementwise_foreach`` and return the shapes of the items it launched on
    their own (through ``elementwise``) rather than in a shared kernel."""
    alone = []

    def elementwise(fn, outputs, inputs, compute):
        alone.append(outputs[0].shape)
        type(backend).elementwise(backend, fn, outputs, inputs, compute)

    backend.elementwise = elementwise
    try:
        backend.elementwise_foreach(fn, items, compute)
    finally:
        del backend.elementwise
    return alone


def test_elementwise_foreach_runs_small_contiguous_items_in_one_kernel():
    """Items of different sizes, in place, with a scalar that differs per item (passed as
    an array) and one that does not; a strided item and an item above the parallel
    threshold run on their own. Every result equals NumPy's."""
    from kernelgrad.backends.cpu import PARALLEL_THRESHOLD

    backend = kg.ones(1)._backend
    fn = ScalarFunction("axpy", "def axpy(x0, x1, x2, x3):\n    return x0 * x3 + x1 * x2\n", 4)
    rng = np.random.default_rng(5)
    sizes = [3, 100, 1, 17, PARALLEL_THRESHOLD + 5]
    targets = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    sources = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    expected = [t * 0.5 + s * (k + 1) for k, (t, s) in enumerate(zip(targets, sources))]
    items = []
    for k, (t, src) in enumerate(zip(targets, sources)):
        out = View(t, (t.size,), (1,), 0, float32)
        items.append(([out], [out, View(src, (src.size,), (1,), 0, float32), k + 1.0, 0.5]))
    strided = np.zeros(8, dtype=np.float32)  # every other element of it
    items.append(([View(strided, (4,), (2,), 0, float32)], [2.0, 3.0, 4.0, 0.0]))
    alone = _foreach_launched_alone(backend, fn, items, [float32] * 4)
    for got, want in zip(targets, expected):
        assert_close(got, want)
    assert_close(strided, [12, 0] * 4)
    assert alone == [(PARALLEL_THRESHOLD + 5,), (4,)]  # the other four: one kernel


def test_elementwise_foreach_reads_a_broadcast_element_per_item_in_the_same_kernel():
    """An input of one element broadcast to an item's shape (a traced optimizer's step
    size, a 0-d tensor per parameter) does not make the item strided: every item still
    runs in the one kernel, each reading its own element."""
    backend = kg.ones(1)._backend
    fn = ScalarFunction("scaled", "def scaled(x0, x1):\n    return x0 * x1\n", 2)
    targets = [np.arange(n, dtype=np.float32) for n in (3, 5, 1)]
    factors = [np.array([k + 2.0], dtype=np.float32) for k in range(3)]
    items = []
    for t, f in zip(targets, factors):
        out = View(t, (t.size,), (1,), 0, float32)
        items.append(([out], [out, View(f, (t.size,), (0,), 0, float32)]))
    expected = [t * f[0] for t, f in zip(targets, factors)]
    alone = _foreach_launched_alone(backend, fn, items, [float32] * 2)
    for got, want in zip(targets, expected):
        assert_close(got, want)
    assert alone == []


def test_a_zero_dim_input_broadcast_over_contiguous_views_runs_the_flat_kernel():
    """``x * t`` with a 0-d ``t`` reads t's one element for every index ("splat") in the
    flat kernel instead of taking the strided kernel for its zero strides; a transposed
    operand keeps the strided kernel. Results equal NumPy's for both."""
    backend = kg.ones(1)._backend
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for scale_dtype in (kg.float32, kg.float64):
        scale = kg.tensor(1.5, dtype=scale_dtype)
        assert_close(as_numpy(kg.tensor(x) * scale), x * 1.5)
        assert_close(as_numpy(kg.tensor(x).T * scale), x.T * 1.5)
    kinds = [key[2] for key in backend._elementwise_modules if key[0] == "elementwise_source"]
    assert any("splat" in k for k in kinds), kinds


def test_kernels_load_from_the_disk_cache_in_a_new_process(tmp_path):
    """A second process finds the compiled machine code and does not recompile."""
    script = textwrap.dedent(
        """
        import kernelgrad as kg
        from kernelgrad.debug import set_debug_level
        set_debug_level(1)
        x = kg.arange(10.0)
        y = (x * 2 + 1).exp().sum()
        print(round(y.item(), 3))
        """
    )
    env = dict(os.environ, KERNELGRAD_CACHE_DIR=str(tmp_path))
    first = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    second = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert first.stdout == second.stdout
    assert "compiled" in first.stderr
    assert "compiled" not in second.stderr
    generated = list((tmp_path / "kernels").glob("kg_cpu_*.py"))
    assert generated, "generated kernel modules are written to the cache folder"


def test_debug_level_two_prints_one_line_per_launch(capsys):
    from kernelgrad.debug import set_debug_level

    x = kg.ones(4)
    (x + 1).sum()  # compile or load first: those calls log a different line
    set_debug_level(2)
    try:
        (x + 1).sum()
    finally:
        set_debug_level(0)
    lines = [line for line in capsys.readouterr().err.splitlines() if "[kernelgrad] cpu" in line]
    assert len(lines) == 2
    assert "add" in lines[0] and "reduce_sum" in lines[1]


def test_wide_broadcast_and_transposed_inputs():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal(257).astype(np.float32)
    assert_close(kg.tensor(a) + kg.tensor(b), a + b)
    assert_close(kg.tensor(a).T * 2, a.T * 2)
    c = rng.standard_normal((3, 40_000)).astype(np.float32)
    assert_close(kg.tensor(c)[:, ::-3] - 1, c[:, ::-3] - 1)


def test_every_elementwise_path_agrees_with_numpy():
    """Small and large (serial and parallel), flat and strided, short and long rows."""
    rng = np.random.default_rng(1)
    big = rng.standard_normal((64, 3, 30, 31)).astype(np.float32)  # > parallel threshold
    small = big[:1, :, :6, :6]
    for values in (big, small):
        t = kg.tensor(values)
        assert_close(t * 2, values * 2)  # flat
        assert_close(t.permute(3, 1, 0, 2) + 1, values.transpose(3, 1, 0, 2) + 1)  # strided
        assert_close(
            t[:, :, ::2, ::-3] - t[:, :, 1::2, ::-3],
            values[:, :, ::2, ::-3] - values[:, :, 1::2, ::-3],
        )
    # Rows of 5 elements over many outer dims (an im2col copy): the odometer carries.
    image = rng.standard_normal((16, 3, 12, 12)).astype(np.float32)
    patches = kg.tensor(image).unfold(2, 5, 1).unfold(3, 5, 1)
    expected = np.lib.stride_tricks.sliding_window_view(image, (5, 5), axis=(2, 3))
    assert_close(patches.contiguous(), expected)
    # Long rows split into several chunks, with a broadcast operand of stride 0.
    wide = rng.standard_normal((2, 50_000)).astype(np.float32)
    column = rng.standard_normal((2, 1)).astype(np.float32)
    assert_close(kg.tensor(wide) * kg.tensor(column), wide * column)


def test_every_reduction_path_agrees_with_numpy():
    rng = np.random.default_rng(2)
    tall = rng.standard_normal((5000, 300)).astype(np.float32)
    t = kg.tensor(tall)
    # Columns kernel (reduce over the outer dim, kept elements contiguous).
    assert_close(t.sum(0), tall.astype(np.float64).sum(0), rtol=1e-5, atol=1e-4)
    assert_close(t.amax(0), tall.max(0))
    assert_close(t.argmin(0), tall.argmin(0))
    batch = rng.standard_normal((40, 8, 30, 30)).astype(np.float32)
    assert_close(
        kg.tensor(batch).sum((0, 2)), batch.astype(np.float64).sum((0, 2)), rtol=1e-5, atol=1e-4
    )
    # Row kernel, serial and parallel, with and without splitting the reduced range.
    assert_close(t.sum(1), tall.astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    assert_close(t[:3].sum(1), tall[:3].astype(np.float64).sum(1), rtol=1e-5, atol=1e-4)
    assert_close(t.T.argmax(1), tall.T.argmax(1))
    assert_close(kg.tensor(batch).mean((1, 3)), batch.mean((1, 3)), rtol=1e-5, atol=1e-5)
    ints = rng.integers(-50, 50, (3000, 40))
    assert_close(kg.tensor(ints).sum(0), ints.sum(0))
    assert_close(kg.tensor(ints).max(0).values, ints.max(0))


SMALL_COLUMN_CASES = [  # (shape, dims, dtype, op): kept elements contiguous, reduced strided
    ((128, 256), 0, np.float32, "sum"),
    ((3, 40, 16), (0, 1), np.float64, "sum"),
    ((64, 24), 0, np.int32, "sum"),
    ((50, 9, 8), 1, np.float32, "amax"),
    ((33, 12), 0, np.float32, "argmax"),
]


@pytest.mark.parametrize(("shape", "dims", "dtype", "op"), SMALL_COLUMN_CASES)
def test_small_reductions_over_outer_dims_run_the_serial_column_form(
    shape, dims, dtype, op, capsys
):
    from kernelgrad.debug import set_debug_level

    rng = np.random.default_rng(3)
    values = rng.standard_normal(shape) * 100
    if op == "argmax":
        values = np.round(values / 50)  # ties: the first index wins
    values = values.astype(dtype)
    x = kg.tensor(values)
    set_debug_level(2)
    try:
        result = {"sum": x.sum, "amax": x.amax, "argmax": x.argmax}[op](dims)
    finally:
        set_debug_level(0)
    kind = "max" if op == "amax" else op
    assert f"reduce_{kind}(columns)" in capsys.readouterr().err
    wide = values.astype(np.float64) if op == "sum" else values
    expected = {"sum": np.sum, "amax": np.max, "argmax": np.argmax}[op](wide, dims)
    np.testing.assert_allclose(as_numpy(result), expected, rtol=1e-5, atol=1e-3)


def test_matmuls_with_strides_blas_cannot_use_agree_with_numpy():
    """Batched, broadcast, skinny and permuted operands (copied before BLAS when needed)."""
    rng = np.random.default_rng(3)
    cases = [
        ((4, 64, 96), (4, 96, 128)),  # batch split
        ((1, 64, 96), (4, 96, 128)),  # batch split with a broadcast left operand
        ((300, 200), (200, 100)),  # row split
        ((1, 500), (500, 4000)),  # one row: column split
    ]
    for left, right in cases:
        a = rng.standard_normal(left).astype(np.float32)
        b = rng.standard_normal(right).astype(np.float32)
        assert_close(kg.tensor(a) @ kg.tensor(b), a @ b, rtol=1e-4, atol=1e-4)
        assert_close(
            kg.tensor(a).mT.mT @ kg.tensor(b).mT.contiguous().mT, a @ b, rtol=1e-4, atol=1e-4
        )


def test_buffer_cache_never_reuses_memory_a_numpy_view_can_still_see():
    kept = (kg.ones(1000, 1000) * 2).numpy()  # the tensor dies; the NumPy view lives on
    sliced = (kg.ones(600, 600) * 5)[10:20].numpy()
    for _ in range(5):
        kg.ones(1000, 1000) * 3  # same size class: would reuse a released block
        kg.ones(600, 600) * 7
    assert (kept == 2.0).all()
    assert (sliced == 5.0).all()


def test_buffer_cache_reuses_blocks_nothing_can_see():
    x = kg.ones(700, 700)
    backend = x._backend
    (x * 2).sum()  # warm the size class
    hits = backend.memory_stats()["hits"]
    for _ in range(5):
        (x * 2).sum()
    assert backend.memory_stats()["hits"] >= hits + 5


def test_parallel_threshold_comes_from_the_environment(monkeypatch):
    from kernelgrad.backends import cpu

    monkeypatch.setenv("KG_PARALLEL_THRESHOLD", "1000")
    assert cpu._parallel_threshold() == 1000
    monkeypatch.setenv("KG_PARALLEL_THRESHOLD", "")
    assert cpu._parallel_threshold() == cpu.DEFAULT_PARALLEL_THRESHOLD
    monkeypatch.setenv("KG_PARALLEL_THRESHOLD", "many")
    with pytest.raises(ValueError, match="KG_PARALLEL_THRESHOLD must be a whole number"):
        cpu._parallel_threshold()


def test_small_products_run_on_one_blas_thread_and_leave_numpys_threads_alone(monkeypatch):
    """Eager small products make the ``cblas_?gemm`` call a prepared one (kg.compile's
    replay) makes, on one thread: with kernelgrad's own OpenBLAS through
    ``gemm_matrix``, with NumPy's through NumPy (set to one thread around the call)."""
    from kernelgrad.backends.cpu import blas, split_gemm

    if not blas.single_thread_available():
        pytest.skip("neither kernelgrad's own OpenBLAS nor a threaded OpenBLAS in NumPy")
    before = blas.current_threads()
    seen = []
    real_matmul, real_gemm, real_matrix = np.matmul, split_gemm.gemm_batch, split_gemm.gemm_matrix

    def spy_matmul(*args, **kwargs):
        seen.append(("numpy", blas.current_threads()))
        return real_matmul(*args, **kwargs)

    def spy_gemm(*args):
        seen.append(("cblas", blas.calling_threads()))
        return real_gemm(*args)

    def spy_matrix(*args):
        seen.append(("cblas matrix", blas.calling_threads()))
        return real_matrix(*args)

    monkeypatch.setattr(blas.np, "matmul", spy_matmul)
    monkeypatch.setattr(split_gemm, "gemm_batch", spy_gemm)
    monkeypatch.setattr(split_gemm, "gemm_matrix", spy_matrix)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(20, dtype=np.float32).reshape(4, 5)
    eager = (kg.tensor(a) @ kg.tensor(b)).numpy()
    assert_close(eager, a @ b)
    out = np.zeros((3, 5), np.float32)
    blas.prepare(a, b, out, 60)()  # prepared for kg.compile's replay: cblas_sgemm itself
    np.testing.assert_array_equal(out, a @ b)
    if blas._Blas.own:
        np.testing.assert_array_equal(out, eager)  # the same call: the same bits
    # a matrix times a vector (one dimension), prepared: not a gemm, NumPy runs it
    vector = np.zeros(3, np.float32)
    blas.prepare(a, b[:, 0].copy(), vector, 12)()
    np.testing.assert_array_equal(vector, a @ b[:, 0])
    eager_call = ("cblas matrix", 1) if blas._Blas.own else ("numpy", 1)
    assert seen == [eager_call, ("cblas", 1), ("numpy", 1)]  # each on one thread
    assert blas.current_threads() == before  # and NumPy's own count is back


def test_kernelgrads_own_openblas_leaves_numpys_library_alone():
    """kernelgrad's products run on a copy of OpenBLAS of its own, one thread for good:
    NumPy's thread count is never changed, and NumPy's products are NumPy's."""
    from kernelgrad.backends.cpu import blas

    if not blas.single_thread_available() or not blas._Blas.own:
        pytest.skip("scipy-openblas64 is not installed (or KG_BLAS_OWN=0)")
    assert blas.calling_threads() == 1
    before = blas.current_threads()
    rng = np.random.default_rng(1)
    for shape in [(3, 4, 5), (300, 200, 100)]:  # a small product and a split one
        m, k, n = shape
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((n, k)).astype(np.float32)
        assert_close(kg.tensor(a) @ kg.tensor(b).T, a @ b.T, rtol=1e-5, atol=1e-4)
        assert blas.current_threads() == before
    assert "kernelgrad's own copy" in blas.describe()
    assert "OPENBLAS_CORETYPE" not in os.environ or os.environ["OPENBLAS_CORETYPE"]


@pytest.mark.parametrize(
    ("vendor", "family", "flags", "zen4"),
    [
        ("AuthenticAMD", "25", "fpu sse2 avx2 avx512f avx512bw", True),  # Zen 4
        ("AuthenticAMD", "25", "fpu sse2 avx2", False),  # Zen 3: no AVX-512
        ("AuthenticAMD", "26", "fpu sse2 avx2 avx512f", False),  # Zen 5: full-width units
        ("GenuineIntel", "6", "fpu sse2 avx2 avx512f", False),
    ],
)
def test_openblas_kernels_for_zen4_are_chosen_from_cpuinfo(tmp_path, vendor, family, flags, zen4):
    from kernelgrad.backends.cpu import blas

    entry = f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nflags\t\t: {flags}\n"
    other = "processor\t: 1\nvendor_id\t: Other\n"
    path = tmp_path / "cpuinfo"
    path.write_text(entry + "\n" + other)
    assert blas._cpu_is_zen4(str(path)) is zen4
    assert blas._cpu_is_zen4(str(tmp_path / "missing")) is False


def test_openblas_core_type_settings(monkeypatch):
    from kernelgrad.backends.cpu import blas

    monkeypatch.setattr(blas, "_cpu_is_zen4", lambda: True)
    monkeypatch.delenv("KG_BLAS_CORETYPE", raising=False)
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    assert blas._core_type() == "Haswell"
    monkeypatch.setenv("OPENBLAS_CORETYPE", "SkylakeX")  # the user's own: the library reads it
    assert blas._core_type() is None
    monkeypatch.setenv("KG_BLAS_CORETYPE", "Zen")
    assert blas._core_type() == "Zen"
    monkeypatch.setenv("KG_BLAS_CORETYPE", "auto")
    assert blas._core_type() is None
    monkeypatch.setattr(blas, "_cpu_is_zen4", lambda: False)
    monkeypatch.delenv("KG_BLAS_CORETYPE")
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert blas._core_type() is None


_BLAS_MODE_SCRIPT = """
import os, numpy as np, kernelgrad as kg
from kernelgrad.backends.cpu import blas
before = blas.current_threads()
rng = np.random.default_rng(0)
for m, k, n in [(3, 4, 5), (300, 200, 100)]:
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    assert np.allclose((kg.tensor(a) @ kg.tensor(b)).numpy(), a @ b, rtol=1e-5, atol=1e-4)
assert blas.current_threads() == before
assert os.environ.get("OPENBLAS_CORETYPE") is None  # put back after loading
print(blas.describe())
"""


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"KG_BLAS_OWN": "0"}, "NumPy's copy"),
        ({"KG_BLAS_CORETYPE": "Haswell"}, "own copy (scipy-openblas64), Haswell kernels"),
    ],
)
def test_blas_library_settings_in_a_fresh_process(settings, expected):
    from kernelgrad.backends.cpu import blas

    if not blas.single_thread_available() or not blas._Blas.gemm:
        pytest.skip("no OpenBLAS found to call directly")
    if "KG_BLAS_CORETYPE" in settings and not blas._Blas.own:
        pytest.skip("scipy-openblas64 is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "KG_BLAS_OWN")}
    env.update(settings)
    result = subprocess.run(
        [sys.executable, "-c", _BLAS_MODE_SCRIPT], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_blas_small_product_size_comes_from_the_environment(monkeypatch):
    from kernelgrad.backends.cpu import blas

    monkeypatch.setenv("KG_BLAS_SMALL", "1000")
    assert blas._small_product_size() == 1000
    monkeypatch.setenv("KG_BLAS_SMALL", "big")
    with pytest.raises(ValueError, match="KG_BLAS_SMALL must be a whole number"):
        blas._small_product_size()


def _split_ready():
    from kernelgrad.backends.cpu import blas

    if not blas.single_thread_available() or not blas._Blas.gemm:
        pytest.skip("NumPy's BLAS is not OpenBLAS's threaded 64-bit-integer build")
    return blas


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_split_gemm_blocks_agree_with_numpy_for_every_layout(dtype, parts):
    """Row-major and column-major operands, padded leading dimensions (slices of larger
    arrays), split by rows and by columns, more parts than rows."""
    from kernelgrad.backends.cpu import split_gemm

    blas = _split_ready()
    rng = np.random.default_rng(parts)
    for m, k, n in [(37, 19, 5), (6, 23, 41), (5, 3, 2)]:
        for left in (
            rng.standard_normal((m, k + 3))[:, 1 : k + 1],  # row-major, lda > k
            rng.standard_normal((k + 2, m)).T[:, :k],  # column-major, lda > m
        ):
            for right in (rng.standard_normal((k, n)), rng.standard_normal((n + 4, k)).T[:, :n]):
                a, b = left.astype(dtype), right.astype(dtype)
                padded = np.full((m, n + 2), np.nan, dtype=dtype)
                out = padded[:, :n]  # ldc > n
                arguments = blas._split_arguments(a, b, out) or pytest.fail(f"{m, k, n}")
                for by_rows in (True, False):
                    out[...] = np.nan
                    address, item = arguments[:2]
                    split_gemm.split_gemm(address, item, parts, by_rows, *arguments[3:])
                    assert_close(out, a @ b, rtol=1e-5, atol=1e-5)
                assert np.isnan(padded[:, n:]).all()  # nothing written past each row


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((3, 5, 7), (3, 7, 4)),  # a batch of products
        ((5, 7), (6, 7, 4)),  # one left matrix for every product
        ((2, 3, 5, 7), (1, 1, 7, 4)),  # one right matrix, broadcast over two batch dims
        ((1, 6, 5), (1, 5, 9)),  # a batch of one
    ],
)
def test_split_gemm_runs_batched_products(left, right):
    blas = _split_ready()
    rng = np.random.default_rng(len(left) + len(right))
    a = rng.standard_normal(left).astype(np.float32)
    b = rng.standard_normal(right).astype(np.float32).swapaxes(-1, -2).copy().swapaxes(-1, -2)
    out = np.empty(np.broadcast_shapes(left[:-2], right[:-2]) + (left[-2], right[-1]), np.float32)
    arguments = blas._split_arguments(a, b, out)
    assert arguments is not None
    blas._split(arguments)
    assert_close(out, np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_split_gemm_refuses_batch_dims_no_single_stride_walks():
    blas = _split_ready()
    a = np.ones((3, 1, 4, 4), np.float32)  # broadcast inside, not outside: two strides
    b = np.ones((1, 2, 4, 4), np.float32)
    assert blas._split_arguments(a, b, np.empty((3, 2, 4, 4), np.float32)) is None


def test_large_products_split_across_numbas_threads_with_one_blas_thread(monkeypatch):
    """A product above KG_BLAS_SMALL runs as split_gemm (OpenBLAS on one thread inside
    each part) and leaves NumPy's thread count as it was; KG_BLAS_SPLIT=0 turns it off."""
    import numba

    from kernelgrad.backends.cpu import split_gemm

    blas = _split_ready()
    if numba.get_num_threads() < 2:
        pytest.skip("Numba runs one thread")
    before = blas.current_threads()
    seen = []

    def spy_on(name, parts_at):
        real = getattr(split_gemm, name)

        def spy(*args):
            seen.append((name, args[parts_at], blas.calling_threads()))
            return real(*args)

        monkeypatch.setattr(split_gemm, name, spy)

    spy_on("split_gemm", 2)
    spy_on("split_matrix", 1)  # a 2-D product with kernelgrad's own OpenBLAS
    monkeypatch.setattr(blas._Blas, "small", 1000)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 40, 30)).astype(np.float32)
    b = rng.standard_normal((20, 30)).astype(np.float32)
    assert_close(kg.tensor(a[0]) @ kg.tensor(b).T, a[0] @ b.T, rtol=1e-5, atol=1e-5)
    assert_close(kg.tensor(a) @ kg.tensor(b).T, a @ b.T, rtol=1e-5, atol=1e-5)
    threads = numba.get_num_threads()
    two_d = "split_matrix" if blas._Blas.own else "split_gemm"
    assert seen == [(two_d, threads, 1), ("split_gemm", threads, 1)]
    assert blas.current_threads() == before
    monkeypatch.setattr(blas._Blas, "split", False)
    assert_close(kg.tensor(a[0]) @ kg.tensor(b).T, a[0] @ b.T, rtol=1e-5, atol=1e-5)
    assert_close(kg.tensor(a) @ kg.tensor(b).T, a @ b.T, rtol=1e-5, atol=1e-5)
    assert len(seen) == 2


def test_products_of_one_row_or_column_run_as_gemm_calls():
    """A matrix of one row or column is still a gemm (a packed recurrent layer's last
    steps run one row): split or on one thread, the result is NumPy's."""
    blas = _split_ready()
    rng = np.random.default_rng(0)
    for m, k, n in [(1, 5, 3), (4, 1, 3), (4, 5, 1), (1, 300, 1)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((n, k)).astype(np.float32).T  # column-major
        for split in (False, True):
            out = np.zeros((m, n), np.float32)
            arguments = blas._split_arguments(a, b, out)
            assert arguments is not None
            blas.PreparedProduct(a, b, out, arguments, split)()
            np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_products_the_split_does_not_serve_fall_back_to_numpy():
    blas = _split_ready()
    f32 = np.ones((4, 4), np.float32)
    assert blas._split_arguments(np.ones(4, np.float32), f32, f32[0]) is None  # a vector
    assert blas._split_arguments(f32.astype(np.int64), f32, f32) is None  # integers
    assert blas._split_arguments(np.ones((0, 4), np.float32), f32, f32[:0]) is None  # empty
    assert blas._split_arguments(f32, f32, np.ones((4, 4), np.float32).T) is None  # out F-order
    assert blas._split_arguments(f32[:, ::2], f32[:2], f32[:, :4]) is None  # strided columns


@pytest.mark.parametrize(
    ("shape", "axes"),
    [
        ((128, 256), (0,)),  # a bias gradient: column sums
        ((3, 5, 40), (0, 1)),  # two reduced dims before the kept one
        ((6, 9), (0,)),  # one short block
        ((40, 5), (0,)),  # under 8 outputs: the per-output form
        ((300, 200), (0,)),  # more outputs than one block of COLUMNS
    ],
)
def test_fused_column_sums_agree_with_numpy(shape, axes):
    """kg.compile's fused sum over leading axes with the kept axis contiguous runs the
    column form (rows added into blocks of outputs), with a prologue and an epilogue."""
    from kernelgrad.backends.cpu.fused_reduce import FusedReduceKernel
    from kernelgrad.backends.fused_reduce import FusedReduction
    from kernelgrad.dtypes import float32

    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(prod(shape) + 3).astype(np.float32)
    bias = rng.standard_normal(shape[-1]).astype(np.float32)
    strides = tuple(prod(shape[d + 1 :]) for d in range(len(shape)))
    reduction = FusedReduction(
        "sum", shape, axes, float32, float32,
        ("twice", "def twice(a0):\n    return a0 * 2.0\n"), [float32], [strides], [],
        ("plus", "def plus(r, a0):\n    return r + a0\n"), [float32], [(1,)], [],
        (shape[-1],), [float32], [(1,)], "test",
    )  # fmt: skip
    kernel = FusedReduceKernel(reduction, 1 << 17)
    assert ("sums" in kernel.kernel.py_func.__code__.co_varnames) == (shape[-1] >= 8)
    out = np.zeros(shape[-1], np.float32)
    kernel.run([x, bias, out], [3, 0, 0])  # the input starts 3 elements in
    expected = (x[3:].reshape(shape) * 2).sum(axis=axes) + bias
    assert_close(out, expected, rtol=1e-5, atol=1e-5)
