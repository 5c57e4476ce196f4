"""The CUDA compile check (``kernelgrad.cuda_compile_check``): what it detects, on small
kernels compiled with NVVM and nvJitLink for sm_90, and a slice of the full check.

Needs numba-cuda's compiler wheels (``numba-cuda[cu13]``) but no GPU; skipped where they
are missing, and in the simulated pass (the compiler must run without the simulator).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kernelgrad as kg

ROOT = Path(__file__).resolve().parents[2]
CC = (9, 0)
SUMMARY = re.compile(
    r"^(\d+) kernels compiled for sm_90, (\d+) failed, (\d+) with float64 arithmetic in "
    r"float32 kernels, (\d+) spilling$"
)


@pytest.fixture(scope="module")
def compilecheck():
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("the compiler runs without the CUDA simulator (CPU pass only)")
    from kernelgrad.backends.cuda import compilecheck

    reason = compilecheck.compiler_available(CC)
    if reason is not None:
        pytest.skip(f"no CUDA compiler here: {reason}")
    import numba.cuda.dispatcher as dispatcher

    saved = dispatcher.get_current_device
    compilecheck._install_fake_device(CC)
    yield compilecheck
    dispatcher.get_current_device = saved


def _types():
    from numba.cuda import types

    return types


def recorded(body: str, signature: tuple, kind: str = "kernel"):
    """A recorded kernel whose module defines ``kernel`` with ``body``."""
    from kernelgrad.backends.cuda.recording import RecordedKernel

    source = (
        "import math\nimport numpy as np\nfrom numba import cuda\n"
        f"KIND = {kind!r}\n\n@cuda.jit\n{body}"
    )
    return RecordedKernel("probe", kind, signature, source=source, prefix="compile_check_test")


def test_float64_arithmetic_in_a_float32_kernel_is_found(compilecheck):
    types = _types()
    signature = (types.float32[::1], types.float32[::1])
    wide = recorded(
        "def kernel(out, x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
        "        out[i] = x[i] * 0.5 + 1.0\n",
        signature,
    )
    narrow = recorded(
        "def kernel(out, x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
        "        out[i] = x[i] * np.float32(0.5) + np.float32(1.0)\n",
        signature,
    )
    report = compilecheck.compile_kernel(wide, CC)
    assert report.error is None and report.float32
    assert report.float64_in_float32 and report.float64_ops["fma"] >= 1
    assert not compilecheck.compile_kernel(narrow, CC).float64_in_float32
    # A float64 output is not a float32 kernel: its arithmetic is not flagged.
    wide.signature = (types.float64[::1], types.float32[::1])
    assert not compilecheck.compile_kernel(wide, CC).float64_in_float32


def test_conversions_and_libdevice_range_reduction_are_not_arithmetic(compilecheck):
    types = _types()
    report = compilecheck.compile_kernel(
        recorded(
            "def kernel(out, x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
            "        out[i] = math.sin(x[i])\n",
            (types.float64[::1], types.float32[::1]),
        ),
        CC,
    )
    assert report.error is None
    # sinf's slow path for huge arguments multiplies in float64 inside libdevice.
    assert not report.float64_ops


def test_64_bit_division_in_an_elementwise_kernel_is_found(compilecheck):
    types = _types()
    body = (
        "def kernel(out, x, columns):\n    i = cuda.grid(1)\n    if i < out.size:\n"
        "        out[i] = x[i // columns]\n"
    )
    signature = (types.float32[::1], types.float32[::1], types.int64)
    report = compilecheck.compile_kernel(recorded(body, signature, "elementwise"), CC)
    assert report.division_64 >= 1 and report.index_division and report.failed
    # The same code in a user kernel is reported but is not a failure.
    assert not compilecheck.compile_kernel(recorded(body, signature, "kernel"), CC).failed


def test_compile_errors_are_reported(compilecheck):
    types = _types()
    report = compilecheck.compile_kernel(
        recorded("def kernel(out):\n    out[0] = 'text'\n", (types.float32[::1],)), CC
    )
    assert report.failed and "does not compile" in report.problems()[0]


# A kernel keeping 64 values live at once: well over 64 registers per thread (166 for
# sm_90), so it spills under a tight register cap and overfills a block of 1024 threads.
MANY_REGISTERS = (
    "def kernel(out, x):\n    i = cuda.grid(1)\n    acc = cuda.local.array(64, np.float32)\n"
    "    for k in range(64):\n        acc[k] = x[i + k] * x[i + 2 * k]\n"
    "    for r in range(8):\n        for k in range(64):\n"
    "            acc[k] = acc[k] * acc[(k + r) % 64] + x[k]\n"
    "    total = np.float32(0)\n    for k in range(64):\n        total += acc[k]\n"
    "    out[i] = total\n"
)


def test_spills_are_read_from_the_assembler(compilecheck):
    from numba import cuda

    types = _types()
    kernel = recorded(MANY_REGISTERS, (types.float32[::1], types.float32[::1]))
    function, _ = compilecheck.load_function(kernel)
    ptx, _ = cuda.compile_ptx(function, kernel.signature, cc=CC)
    tight = compilecheck.link(ptx, CC, ["-maxrregcount=16"])
    assert compilecheck.spilled_bytes(tight) > 0
    assert compilecheck.spilled_bytes(compilecheck.link(ptx, CC)) == 0


@pytest.mark.usefixtures("compilecheck")
def test_a_slice_of_the_check_passes_and_prints_the_summary(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    environment["KERNELGRAD_CACHE_DIR"] = str(tmp_path)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    done = subprocess.run(
        [sys.executable, "-m", "kernelgrad.cuda_compile_check", "--parts", "kernels,random"],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    summary = SUMMARY.match(lines[-1])
    assert summary, lines[-1]
    compiled, failed, float64, spilling = (int(g) for g in summary.groups())
    assert compiled >= 8 + 7 and failed == float64 == spilling == 0  # 7 random kernels


# --- the compiled code of the backend's and kg.compile's kernels -----------------------------
def _generated(source: str, signature: tuple, kind: str):
    from kernelgrad.backends.cuda.recording import RecordedKernel

    return RecordedKernel("probe", kind, signature, source=source, prefix="compile_check_test")


def _tuple(n: int):
    types = _types()
    return types.UniTuple(types.int64, n)


@pytest.mark.parametrize("bits", [32, 64])
def test_strided_elementwise_kernels_divide_in_32_bits(compilecheck, bits):
    from kernelgrad.backends.cuda import codegen
    from kernelgrad.dtypes import float32

    types = _types()
    add = "def add(x, y):\n    return x + y\n"
    source = codegen.elementwise_source(
        "add", add, 1, ("array", "array"), [float32] * 2, [float32], 3, bits
    )
    array = types.float32[::1]
    signature = (types.int64, _tuple(3), _tuple(3), _tuple(9), array, array, array)
    report = compilecheck.compile_kernel(_generated(source, signature, "elementwise"), CC)
    assert report.error is None
    # 32 bits: none (before: 5-16 per strided kernel); the variant for huge buffers has them
    assert (report.division_64 == 0) == (bits == 32), report.summary()


def test_float32_reductions_compute_in_float32(compilecheck):
    from kernelgrad.backends.cuda import codegen
    from kernelgrad.backends.cuda import fused_reduce as fused
    from kernelgrad.dtypes import float32

    types = _types()
    array, index = types.float32[::1], types.int64[::1]
    i64 = types.int64
    for mode, lanes in (("group", 256), ("group", 8), ("thread", 1)):
        source = codegen.reduce_source(
            "sum", float32, float32, float32, mode, 1, 2, False, 256, lanes, 32
        )
        signature = (i64, i64, i64, i64, _tuple(1), _tuple(1), _tuple(2), _tuple(2), array, i64)
        signature += (index, array, i64, array, index, types.boolean)
        report = compilecheck.compile_kernel(_generated(source, signature, "reduce"), CC)
        assert report.error is None and report.float32
        assert not report.float64_ops and report.division_64 == 0, (mode, report.summary())
    prologue = ("scaled", "def scaled(a0):\n    return a0 * 0.5 + 1.0\n")
    source = fused.cuda_reduce_source(
        "sum", float32, float32, prologue, [float32], 0, None, [], 0, [float32], (1, 1, 1), 128
    )
    signature = (i64, i64, i64, i64, i64, _tuple(1), _tuple(1), _tuple(1), _tuple(1))
    signature += (_tuple(1), _tuple(1), _tuple(1), _tuple(1), _tuple(1), _tuple(1))
    signature += (array, array, array)
    report = compilecheck.compile_kernel(_generated(source, signature, "fused_reduce"), CC)
    assert report.error is None and report.float32 and not report.float64_ops
    assert report.division_64 == 0, report.summary()


def test_the_float32_rule_removes_float64_arithmetic_from_user_kernels(compilecheck):
    from kernelgrad.backends.cuda.kernel_module import kernel_source
    from kernelgrad.kernel import transform

    types = _types()

    def smooth(out, x, alpha):
        i = kg.index()
        total = 0.0
        for k in range(4):
            total += x[i * 4 + k] * 0.25
        out[i] = alpha * total + 1.0

    info = transform.analyze(smooth)
    signatures = {
        True: (types.int64, types.float32[::1], types.float32[::1], types.float32),
        False: (types.int64, types.float32[::1], types.float32[::1], types.float64),
    }
    for narrow, signature in signatures.items():
        source = kernel_source(info, 1, False, narrow=narrow)
        report = compilecheck.compile_kernel(_generated(source, signature, "kernel"), CC)
        assert report.error is None
        assert bool(report.float64_ops) != narrow, report.summary()


def test_random_kernels_must_round_every_product_on_its_own():
    """One seed gives the same numbers on every device only if the CUDA kernels round
    each product as the CPU does: a fused multiply-add or a plain product (which ptxas
    may contract) is a failure of the check."""
    fused = "\tfma.rn.f64 \t%fd3, %fd1, %fd2, %fd4;"
    plain = "\tmul.f64 \t%fd3, %fd1, %fd2;"
    rounded = "\tmul.rn.f64 \t%fd3, %fd1, %fd2;"
    from kernelgrad.backends.cuda.compilecheck import contracted_product

    assert "fused multiply-add" in contracted_product(fused)
    assert "may fuse" in contracted_product(plain)
    assert contracted_product(rounded) is None


# --- math.floor/ceil/trunc: int64 on CUDA as on the CPU ---------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_integer_rounding_compiles_with_int64_results(compilecheck, dtype):
    """A ``@kg.kernel`` using ``math.floor/ceil/trunc`` (tests/kernel/test_integer_rounding.py),
    launched on the CPU and recorded in its CUDA form, compiles for sm_90; the rounding
    device functions return int64 (numba-cuda's own ``floor(float32)`` is float32), and
    a float32 kernel keeps its float arithmetic in float32."""
    from kernelgrad.backends.cuda.recording import Recording
    from tests.kernel.test_integer_rounding import VALUES, rounded

    types = _types()
    with Recording() as recording:
        out = kg.zeros(len(VALUES), 6, dtype=kg.int64)
        x = kg.tensor(VALUES, dtype=getattr(kg, dtype))
        rounded(out, x, kg.arange(0, 100, 10, dtype=kg.int64), ndrange=len(VALUES))
    (kernel,) = recording.kernels.values()
    report = compilecheck.compile_kernel(kernel, CC, keep=True)
    assert report.error is None, report.error
    if dtype == "float32":
        assert not report.float64_ops, report.summary()
    assert not report.spill_bytes
    function, _ = compilecheck.load_function(kernel)
    argument = getattr(types, dtype)
    for name in ("floor", "ceil", "trunc"):
        helper = function.__globals__[f"_kg_{name}"]
        results = {o.signature.args: o.signature.return_type for o in helper.overloads.values()}
        assert results[(argument,)] == types.int64
    suffix = "f32" if dtype == "float32" else "f64"
    assert f"cvt.rmi.{suffix}.{suffix}" in report.ptx  # floor in the argument's type
    assert f"cvt.rpi.{suffix}.{suffix}" in report.ptx  # ceil
    assert f"cvt.rzi.s64.{suffix}" in report.ptx  # then to int64


# --- registers against the largest block a kernel is launched with -----------------------------
def test_block_registers_follow_the_per_warp_allocation():
    from kernelgrad.backends.cuda.compilecheck import REGISTERS_PER_BLOCK, block_registers

    assert block_registers(255, 256) == REGISTERS_PER_BLOCK  # 256 threads always fit
    assert block_registers(64, 1024) == REGISTERS_PER_BLOCK
    assert block_registers(65, 1024) > REGISTERS_PER_BLOCK  # 65 * 32 rounds up to 2304
    assert block_registers(166, 384) <= REGISTERS_PER_BLOCK < block_registers(166, 416)
    assert block_registers(1, 1) == 256  # a warp's smallest allocation


def test_a_block_needing_more_registers_than_the_gpu_has_is_found(compilecheck):
    types = _types()
    kernel = recorded(MANY_REGISTERS, (types.float32[::1], types.float32[::1]))
    kernel.block_threads = 256
    report = compilecheck.compile_kernel(kernel, CC)
    assert report.error is None and report.registers > 64, report.summary()
    assert not report.failed and not report.problems()
    kernel.block_threads = 1024
    report = compilecheck.compile_kernel(kernel, CC)
    assert report.failed
    (problem,) = report.problems()
    assert "launched with blocks of 1024 threads" in problem
    assert "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in problem
    most = int(re.search(r"at most (\d+) threads per block", problem)[1])
    assert most % 32 == 0
    assert compilecheck.block_registers(report.registers, most) <= report.register_limit
    assert compilecheck.block_registers(report.registers, most + 32) > report.register_limit
