"""The CPU backend's vectorisable math functions (``backends/cpu/vmath.py``).

Accuracy is measured in ulps of the result's dtype against references computed in higher
precision: float64 NumPy for float32 results, NumPy's extended ``longdouble`` for float64
results (and a series in ``longdouble`` for erf, which NumPy lacks).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import platform
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numba import njit, types

import kernelgrad as kg
from kernelgrad.backends.cpu import codegen, vmath
from kernelgrad.dtypes import float32
from kernelgrad.ops.elementwise import SIGMOID
from tests.helpers import assert_close

DTYPES = (np.float32, np.float64)
# Where sin/cos keep their error bound (see vmath's module docstring).
TRIG_LIMIT = {np.float32: 4.2e8, np.float64: 1.6e6}
EXTENDED = np.finfo(np.longdouble).nmant >= 63  # x86 80-bit or quad precision
MAX_ULP = 2.0


@functools.cache
def _loop(name: str):
    function = getattr(vmath, name)

    @njit(error_model="numpy")
    def apply(x, out):
        for i in range(x.size):
            out[i] = function(x[i])

    return apply


def vmath_apply(name: str, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    _loop(name)(x, out)
    return out


def _erf_series(x: np.ndarray) -> np.ndarray:
    """erf in longdouble: 2/sqrt(pi) exp(-x^2) sum 2^n x^(2n+1) / (1*3*...*(2n+1)), a
    series of positive terms (no cancellation); erf rounds to +-1 beyond 6.5."""
    a = np.minimum(np.abs(np.nan_to_num(x)), 6.5).astype(np.longdouble)
    twice_square = 2 * a * a
    term, total = a.copy(), a.copy()
    for n in range(1, 200):  # the terms fall below eps * total before n = 130
        term = term * twice_square / (2 * n + 1)
        total += term
    pi = np.longdouble("3.14159265358979323846264338327950288")
    value = 2 / np.sqrt(pi) * np.exp(-a * a) * total
    value = np.copysign(np.where(np.abs(x) >= 6.5, 1, value), x)
    return np.where(np.isnan(x), np.nan, value)


def reference(name: str, x: np.ndarray) -> np.ndarray:
    """The function in higher precision than x's dtype."""
    wide = x.astype(np.longdouble if x.dtype == np.float64 else np.float64)
    with np.errstate(all="ignore"):
        if name == "erf":
            return _erf_series(wide).astype(wide.dtype)
        return getattr(np, name)(wide)


def ulp_errors(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """|got - expected| in units of the spacing of got's dtype at expected; 0 where
    got equals expected rounded (including NaN and infinities), inf where one side is
    NaN or infinite and the other is not."""
    dtype = got.dtype
    with np.errstate(all="ignore"):
        rounded = expected.astype(dtype)
        spacing = np.spacing(np.abs(rounded)).astype(np.longdouble)
        errors = np.abs(got.astype(np.longdouble) - expected.astype(np.longdouble)) / spacing
    same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
    errors = np.where(same, 0.0, errors)
    return np.where(np.isnan(errors), np.inf, errors).astype(np.float64)


def assert_within_ulp(name: str, x: np.ndarray, bound: float = MAX_ULP) -> None:
    if x.size == 0:
        return
    got = vmath_apply(name, x)
    expected = reference(name, x)
    errors = ulp_errors(got, expected)
    worst = int(np.argmax(errors))
    assert errors[worst] <= bound, (
        f"{name}({x[worst]!r}) = {got[worst]!r}, expected {expected[worst]!r}: "
        f"{errors[worst]:.2f} ulp (bound {bound})"
    )


def wide_sample(dtype, count: int, seed: int, positive: bool = False) -> np.ndarray:
    """Magnitudes log-uniform over every exponent of the dtype (denormals included)."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    low = math.log2(info.smallest_subnormal)
    high = math.log2(float(info.max)) - 0.01
    values = np.exp2(rng.uniform(low, high, count).astype(np.longdouble)).astype(dtype)
    if not positive:
        values *= rng.choice(np.array([-1, 1], dtype=dtype), count)
    return values


def uniform(dtype, low: float, high: float, count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, count).astype(dtype)


def _skip_without_extended(dtype) -> None:
    if dtype == np.float64 and not EXTENDED:
        pytest.skip("NumPy's longdouble has no extra precision on this platform")


# --- accuracy over wide ranges ---------------------------------------------------------
def _samples(name: str, dtype) -> list[np.ndarray]:
    n = 40_000
    if name in ("sin", "cos"):
        limit = TRIG_LIMIT[dtype]
        rng = np.random.default_rng(7)
        magnitudes = np.exp2(rng.uniform(-30, math.log2(limit), n))
        near_zeros = (np.arange(1, 5001) * (np.pi / 2)).astype(dtype)  # results near 0
        return [
            (magnitudes * rng.choice([-1, 1], n)).astype(dtype),
            uniform(dtype, -10, 10, n, 8),
            near_zeros,
        ]
    samples = [wide_sample(dtype, n, 1, positive=name == "log")]
    core = {
        "exp": (-104, 89) if dtype == np.float32 else (-746, 710),
        "expm1": (-5, 5),
        "log": (0.3, 3),
        "log1p": (-1, 2),
        "tanh": (-10, 10),
        "erf": (-7, 7),
    }[name]
    samples.append(uniform(dtype, *core, n, 2))
    tiny = wide_sample(dtype, n, 3) * dtype(2.0**-100 if dtype == np.float64 else 2.0**-60)
    samples.append(tiny)
    return samples


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", vmath.FUNCTIONS)
def test_accuracy_over_wide_ranges(name, dtype):
    _skip_without_extended(dtype)
    for x in _samples(name, dtype):
        assert_within_ulp(name, x)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", vmath.FUNCTIONS)
@given(data=st.data())
def test_accuracy_on_arbitrary_floats(name, dtype, data):
    """Any float, NaN and infinities included: within 2 ulp (sin/cos: inside their range;
    outside it, finite arguments still give results in [-1, 1])."""
    _skip_without_extended(dtype)
    width = 32 if dtype == np.float32 else 64
    x = data.draw(hnp.arrays(dtype, st.integers(1, 48), elements=st.floats(width=width)), label="x")
    if name in ("sin", "cos"):
        outside = np.abs(x) > TRIG_LIMIT[dtype]
        got = vmath_apply(name, x)
        finite = np.isfinite(x)
        assert np.all(np.abs(got[outside & finite]) <= 1)
        x = x[~outside]
    assert_within_ulp(name, x)


# --- special values --------------------------------------------------------------------
INF, NAN = math.inf, math.nan
SPECIAL = {
    "exp": [(-INF, 0.0), (INF, INF), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0)],
    "expm1": [(-INF, -1.0), (INF, INF), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (-60.0, -1.0)],
    "log": [
        (0.0, -INF),
        (-0.0, -INF),
        (-1.0, NAN),
        (-INF, NAN),
        (INF, INF),
        (NAN, NAN),
        (1.0, 0.0),
    ],
    "log1p": [
        (-1.0, -INF),
        (-2.0, NAN),
        (-INF, NAN),
        (INF, INF),
        (NAN, NAN),
        (0.0, 0.0),
        (-0.0, -0.0),
    ],
    "tanh": [(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (30.0, 1.0)],
    "sin": [(INF, NAN), (-INF, NAN), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0)],
    "cos": [(INF, NAN), (-INF, NAN), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0)],
    "erf": [(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (-7.0, -1.0)],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", vmath.FUNCTIONS)
def test_special_values(name, dtype):
    inputs, expected = zip(*SPECIAL[name], strict=True)
    got = vmath_apply(name, np.array(inputs, dtype=dtype))
    for x, value, want in zip(inputs, got, expected, strict=True):
        if math.isnan(want):
            assert math.isnan(value), f"{name}({x}) = {value}, expected nan"
        else:
            assert value == want and math.copysign(1, value) == math.copysign(1, want), (
                f"{name}({x}) = {value!r}, expected {want!r}"
            )


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exp_overflow_and_underflow_thresholds(dtype):
    """Around log(max float) and log(min denormal / 2): inf, denormals and 0 exactly where
    the correctly rounded function has them."""
    _skip_without_extended(dtype)
    info = np.finfo(dtype)
    centres = [math.log(float(info.max)), math.log(float(info.smallest_subnormal)) - math.log(2)]
    x = np.concatenate([c + np.linspace(-2e-3, 2e-3, 2001) * abs(c) for c in centres])
    x = x.astype(dtype)
    got = vmath_apply("exp", x)
    assert np.all(ulp_errors(got, reference("exp", x)) <= 1.0)
    assert np.isinf(got).any() and np.isfinite(got[got > 1]).any()
    assert (got == 0).any() and ((got > 0) & (got < info.smallest_normal)).any()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_log_of_denormals_and_tiny_arguments(dtype):
    _skip_without_extended(dtype)
    info = np.finfo(dtype)
    denormals = np.array([info.smallest_subnormal, info.smallest_normal / 3], dtype=dtype)
    assert_within_ulp("log", denormals, 1.0)
    tiny = np.array([1e-30, -1e-30, info.smallest_subnormal, 2e-8], dtype=dtype)
    for name in ("expm1", "log1p", "tanh", "sin", "erf"):
        assert_within_ulp(name, tiny, 1.0)
    assert np.array_equal(vmath_apply("tanh", tiny[:3]), tiny[:3])  # tanh x = x exactly


# --- typing, integers, plain Python ------------------------------------------------------
@functools.cache
def _integer_loop(name: str):
    function = getattr(vmath, name)

    @njit
    def apply(x):
        out = np.empty(x.size, dtype=np.float64)
        for i in range(x.size):
            out[i] = function(x[i])
        return out

    return apply


@pytest.mark.parametrize("name", vmath.FUNCTIONS)
def test_integer_arguments_compute_in_float64_like_math(name):
    values = np.array([1, 2, 3, 10], dtype=np.int64)
    expected = np.array([getattr(math, name)(float(v)) for v in values])
    assert_close(_integer_loop(name)(values), expected, rtol=1e-15, atol=0)


def test_result_dtype_follows_the_argument():
    @njit
    def exp_of(x):
        return vmath.exp(x)

    exp_of(np.float32(1.0))
    exp_of(1.0)
    exp_of(3)
    returned = {sig.args[0]: sig.return_type for sig in exp_of.nopython_signatures}
    assert returned[types.float32] == types.float32
    assert returned[types.float64] == types.float64
    assert returned[types.int64] == types.float64


def test_plain_python_calls_fall_back_to_numpy():
    assert vmath.exp(1.0) == pytest.approx(math.e)
    assert vmath.log(np.float32(0.0)) == -np.inf
    assert vmath.erf(0.5) == pytest.approx(math.erf(0.5))
    assert_close(vmath.tanh(np.array([0.0, 1.0])), np.tanh([0.0, 1.0]))


@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64"),
    reason="vector instruction sets known to LLVM's vectoriser",
)
@pytest.mark.parametrize("name", vmath.FUNCTIONS)
def test_loops_vectorise_without_libm_calls(name):
    vmath_apply(name, np.ones(8, np.float32))
    vmath_apply(name, np.ones(8, np.float64))
    for signature in _loop(name).signatures:
        llvm = _loop(name).inspect_llvm(signature)
        assert re.search(r"<\d+ x (float|double)>", llvm), f"{name}{signature} did not vectorise"
        scalar_math = re.findall(
            r"call [^@]*@(llvm\.(?:exp|log|sin|cos)\w*|\w*(?:exp|log|erf|tanh)f?)\(", llvm
        )
        assert not scalar_math, f"{name}{signature} calls {scalar_math}"


# --- the disk cache ----------------------------------------------------------------------
def test_functions_using_vmath_load_from_numbas_cache_in_a_new_process(tmp_path):
    (tmp_path / "uses_vmath.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            from numba import njit
            from kernelgrad.backends.cpu import vmath

            @njit(cache=True)
            def apply(x):
                out = np.empty_like(x)
                for i in range(x.size):
                    out[i] = vmath.tanh(x[i]) + vmath.erf(x[i]) + vmath.log1p(x[i] * x[i])
                return out
            """
        )
    )
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np
        import uses_vmath
        result = uses_vmath.apply(np.linspace(-2, 2, 5).astype(np.float32))
        stats = uses_vmath.apply.stats
        print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()), result.tolist())
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        ).stdout.split(" ", 2)
        for _ in range(2)
    ]
    assert runs[0][:2] == ["0", "1"], "the first process compiles"
    assert runs[1][:2] == ["1", "0"], "the second process loads the machine code"
    assert runs[0][2] == runs[1][2]


# --- the hook in the code generator -------------------------------------------------------
def test_rewrite_replaces_only_single_argument_math_calls():
    source = textwrap.dedent(
        """
        def f(x, y):
            a = math.exp(-x) + math.log(y, 2) + math.sqrt(x)
            return math.tanh(math.erf(a)) * math.pi
        """
    )
    rewritten, header = vmath.vectorise_math_calls(source)
    assert "_kg_vmath.exp(-x)" in rewritten
    assert "_kg_vmath.tanh(_kg_vmath.erf(a))" in rewritten
    assert "math.log(y, 2)" in rewritten and "math.sqrt(x)" in rewritten
    assert "math.pi" in rewritten
    assert vmath.SOURCE_DIGEST in header and "import vmath as _kg_vmath" in header
    unchanged = "def g(x):\n    return x * 2  # math.exp(x) in a comment\n"
    assert vmath.vectorise_math_calls(unchanged) == (unchanged, "")


def test_generated_modules_name_the_vmath_digest_only_when_they_use_it():
    exp_source = codegen.elementwise_source(
        "f", "def f(x0):\n    return math.exp(x0)\n", 1, ("array",), [float32], [float32]
    )
    assert "_kg_vmath.exp(x0)" in exp_source and vmath.SOURCE_DIGEST in exp_source
    compile(exp_source, "<generated>", "exec")
    plain = codegen.elementwise_source(
        "g", "def g(x0):\n    return x0 + 1\n", 1, ("array",), [float32], [float32]
    )
    assert "vmath" not in plain


def test_generated_kernels_call_vmath():
    rng = np.random.default_rng(3)
    values = rng.standard_normal((40, 30)).astype(np.float32) * 4
    tensor = kg.tensor(values)
    expected = 1 / (1 + np.exp(-values.astype(np.float64)))
    assert_close(tensor.sigmoid(), expected, rtol=1e-6, atol=1e-7)  # flat kernel
    assert_close(tensor.T.sigmoid(), expected.T, rtol=1e-6, atol=1e-7)  # strided kernel
    assert_close(tensor.T.tanh(), np.tanh(values.T.astype(np.float64)), rtol=1e-6, atol=1e-7)
    modules = tensor._backend._elementwise_modules.values()
    assert any(
        getattr(module, "_kg_vmath", None) is vmath and hasattr(module, "sigmoid")
        for module in modules
    ), "the sigmoid kernel module imports vmath"


def test_generated_kernels_vectorise(tmp_path):
    """A freshly compiled sigmoid kernel (math.exp inside a branch) has vector code and no
    libm call."""
    scalar = SIGMOID.scalar
    source = codegen.elementwise_source(
        scalar.name, scalar.source, 1, ("array",), [float32], [float32]
    )
    path = tmp_path / "kg_test_sigmoid_kernel.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.linspace(-5, 5, 64, dtype=np.float32)
    out = np.empty_like(x)
    module.flat_serial(x.size, out, x)
    assert_close(out, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6, atol=1e-7)
    llvm = module.flat_serial.inspect_llvm(module.flat_serial.signatures[0])
    assert re.search(r"<\d+ x float>", llvm)
    assert not re.search(r"call [^@]*@(llvm\.exp\.|expf?\()", llvm)
