"""Matrix products through the OpenBLAS library NumPy loaded: small ones on one BLAS
thread, large ones split across Numba's threads (``split_gemm.py``).

NumPy's wheels bundle OpenBLAS, whose worker threads busy-wait for a while after each
call. A training step alternates products with the backend's Numba kernels, which run
on Numba's OpenMP pool: with both pools on the same cores, each waited for cores the
other pool's spinning workers held. Small products therefore run on the calling thread
(on a 2-core machine a LeNet-5 training step took 8.5-9.3 ms with every product
threaded and 7.4-7.8 ms with products below 2**24 multiply-adds on one thread), and
larger ones are cut into one block per Numba thread, each block one single-threaded
``cblas_?gemm`` call inside a ``prange``: one pool, as PyTorch runs MKL on its own
OpenMP pool, and OpenBLAS's workers are never woken. On the same machine a product alone
takes as long either way (128x784x256: 266 us split, 273 us on OpenBLAS's threads), but
a training step of the ``cnn`` model, whose convolutions make batched products, went
from 40.6-44.8 to 34.1-35.7 ms (``benchmarks/bench_conv.py``, ``KG_BLAS_SPLIT=0`` and 1
alternating). Once products were split on Numba's pool, the line between the two fell
from 2**24 to 2**20 multiply-adds: LeNet-5's fully connected products (1.3M and 6.1M)
and an LSTM's 20x200x800 steps (3.2M) gain from two threads too (LeNet-5 eager step
5.6-9.1 -> 4.7-7.5 ms, compiled 3.9-5.2 -> 2.9-4.0 ms over four alternating rounds of
``bench_lenet.py --compile``; the compiled LSTM step of ``bench_lstm.py --compile``
34.2 -> 29.4 ms; the MLP 784-256-10 step unchanged).
The split serves float32 and float64 products of matrices with unit
stride along rows or columns, batched over leading dims that one stride walks; other
large products run as NumPy runs them.

**kernelgrad's own copy of OpenBLAS.** The products are computed by a copy of OpenBLAS
loaded for kernelgrad alone: the ``scipy-openblas64`` package (the build NumPy's wheels
bundle, as a package of its own), opened from its file so that it is a second instance
beside NumPy's, with one thread for good (every call runs on the thread that makes it;
parallel products are split as above) and a kernel set chosen for the CPU. OpenBLAS
picks its kernels by the instruction sets a CPU reports; on AMD's Zen 4 it takes the
AVX-512 kernels written for Intel's Skylake-X, which Zen 4 runs on 256-bit units, and
its AVX2 (``Haswell``) kernels are faster there: on a 2-core Zen 4 virtual machine, one
thread (``benchmarks/bench_blas.py``: NumPy's copy, 0.3.31 / ours with OpenBLAS's choice,
0.3.34 / ours with Haswell kernels), the MLP's forward product 574 / 515 / 492 us,
LeNet-5's first convolution's weight gradient 869 / 856 / 759 us, a 64-channel 3x3
convolution's product 12.01 / 12.06 / 11.49 ms (``OPENBLAS_CORETYPE``, the library's
own setting, read when the library loads). So on a Zen 4 CPU (AMD, family
25, with AVX-512) kernelgrad's copy loads with ``OPENBLAS_CORETYPE=Haswell``;
elsewhere OpenBLAS chooses as it always does. ``KG_BLAS_CORETYPE=NAME`` sets the kernel
set (any name OpenBLAS's ``OPENBLAS_CORETYPE`` takes; ``auto`` leaves it to OpenBLAS),
and a user's ``OPENBLAS_CORETYPE`` is left to apply. Owning the instance also means
that NumPy's own BLAS threads are never changed by kernelgrad, and that kernelgrad's
products run the same way when NumPy uses another BLAS (MKL, Accelerate).
``KG_BLAS_OWN=0`` uses NumPy's library instead, as below.

Without the package (or with ``KG_BLAS_OWN=0``) the products go through the OpenBLAS
library NumPy loaded: the thread count is then set through ``openblas_set_num_threads``,
looked up in that library, and put back after each call, so NumPy code that the user
runs in the same process keeps its threads. With another BLAS in NumPy (MKL,
Accelerate, a system library) nothing is found and every product runs as NumPy runs it.
``KG_BLAS_SMALL=N`` sets the size (in multiply-adds) below which products use one thread
(0 turns the single-thread path off); ``KG_BLAS_SPLIT=0`` runs large products on
NumPy's OpenBLAS and its own threads instead of splitting them.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.util
import os
from collections.abc import Callable
from math import prod
from typing import Any, ClassVar

import numba
import numpy as np

from ..base import whole_number_setting
from . import split_gemm

DEFAULT_SMALL_PRODUCT = 1 << 20
_NAMES = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


# cblas_sgemm / cblas_dgemm of OpenBLAS's 64-bit-integer interface (NumPy 2's wheels),
# by NumPy dtype (a dtype is a quick dictionary key; its ``.name`` takes ~2 us).
_GEMM_NAMES = {
    np.dtype(np.float32): ("scipy_cblas_sgemm64_", "cblas_sgemm64_"),
    np.dtype(np.float64): ("scipy_cblas_dgemm64_", "cblas_dgemm64_"),
}


class _Blas:
    looked_up = False
    setter: Any = None  # NumPy's OpenBLAS's thread count: set, read
    getter: Any = None
    threads = 1  # NumPy's library's own thread count (what NumPy uses)
    small = DEFAULT_SMALL_PRODUCT
    # NumPy dtype -> address of cblas_?gemm (ILP64) of the library kernelgrad calls
    gemm: ClassVar[dict[np.dtype, int]] = {}
    split = True  # KG_BLAS_SPLIT
    own = False  # kernelgrad's own copy of OpenBLAS (one thread for good) is loaded
    own_getter: Any = None  # its thread count
    core = ""  # the kernel set of the library kernelgrad calls, as OpenBLAS names it


def _small_product_size() -> int:
    return whole_number_setting(
        "KG_BLAS_SMALL", DEFAULT_SMALL_PRODUCT, minimum=0, unit="multiply-adds"
    )


def _look_up() -> None:
    """Load kernelgrad's own copy of OpenBLAS, and find OpenBLAS's thread setter in the
    copy NumPy loaded (``numpy.libs``)."""
    _Blas.looked_up = True
    _Blas.small = _small_product_size()
    split = whole_number_setting("KG_BLAS_SPLIT", 1, minimum=0, unit="switch values (0 or 1)")
    _Blas.split = split > 0
    own = _own_library()
    if own is not None:
        _Blas.own = True
        _Blas.own_getter = _thread_functions(own)[1]
        _Blas.gemm = _gemm_addresses(own)
        _Blas.core = _core_name(own)
    folder = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(folder, "*openblas*"))):
        try:
            library = ctypes.CDLL(path)  # already loaded by NumPy: the same copy
        except OSError:
            continue
        functions = _thread_functions(library)
        if functions is None:
            continue
        _Blas.setter, _Blas.getter = functions
        _Blas.threads = max(int(_Blas.getter()), 1)
        if not _Blas.own:
            _Blas.gemm = _gemm_addresses(library)
            _Blas.core = _core_name(library)
        return


def _thread_functions(library: Any) -> tuple[Any, Any] | None:
    """OpenBLAS's ``set_num_threads`` and ``get_num_threads`` in ``library``."""
    for name in _NAMES:
        setter = getattr(library, name, None)
        getter = getattr(library, name.replace("set_num", "get_num"), None)
        if setter is None or getter is None:
            continue
        setter.argtypes = [ctypes.c_int]
        setter.restype = None
        getter.restype = ctypes.c_int
        return setter, getter
    return None


def _own_library() -> Any:
    """kernelgrad's own instance of OpenBLAS (see the module docstring), on one thread,
    or None: ``KG_BLAS_OWN=0``, the ``scipy-openblas64`` package missing, or its library
    already loaded by other code (then it is not ours to set to one thread)."""
    if whole_number_setting("KG_BLAS_OWN", 1, minimum=0, unit="switch values (0 or 1)") == 0:
        return None
    spec = importlib.util.find_spec("scipy_openblas64")  # found, not imported: importing
    if spec is None or not spec.submodule_search_locations:  # loads it for everyone
        return None
    folder = os.path.join(next(iter(spec.submodule_search_locations)), "lib")
    paths = sorted(glob.glob(os.path.join(folder, "*scipy_openblas64_*")))
    paths = [p for p in paths if p.endswith((".so", ".dylib", ".dll"))]
    if not paths:
        return None
    settings = {"OPENBLAS_NUM_THREADS": "1"}  # no worker threads are started at load
    core = _core_type()
    if core:
        settings["OPENBLAS_CORETYPE"] = core
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)  # read by the library's constructor, as it loads
    try:
        library = ctypes.CDLL(paths[0])  # local symbols: NumPy and SciPy keep their own
    except OSError:
        return None
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    functions = _thread_functions(library)
    if functions is None or int(functions[1]()) != 1:
        return None  # loaded before, by code that set it up for itself
    return library


# OpenBLAS's choice on AMD's Zen 4 (Skylake-X kernels) is slower there than its Haswell
# kernels (see the module docstring): family 25 covers Zen 3 and Zen 4, and of those only
# Zen 4 has AVX-512.
_ZEN4 = {"vendor_id": "AuthenticAMD", "cpu family": "25"}


def _core_type() -> str | None:
    """The kernel set kernelgrad's copy of OpenBLAS loads with: ``KG_BLAS_CORETYPE``
    (``auto``: OpenBLAS's choice), else none where the user set ``OPENBLAS_CORETYPE``
    (the library reads it), else ``Haswell`` on a Zen 4 CPU."""
    chosen = os.environ.get("KG_BLAS_CORETYPE", "").strip()
    if chosen:
        return None if chosen.lower() == "auto" else chosen
    if os.environ.get("OPENBLAS_CORETYPE"):
        return None
    return "Haswell" if _cpu_is_zen4() else None


def _cpu_is_zen4(cpuinfo: str = "/proc/cpuinfo") -> bool:
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as file:
            first = file.read().split("\n\n", 1)[0]  # the first processor's entry
    except OSError:
        return False
    fields = {}
    for line in first.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return (
        all(fields.get(key) == value for key, value in _ZEN4.items())
        and "avx512f" in fields.get("flags", "").split()
    )


def _core_name(library: Any) -> str:
    for name in ("scipy_openblas_get_corename64_", "openblas_get_corename64_"):
        function = getattr(library, name, None)
        if function is not None:
            function.restype = ctypes.c_char_p
            return function().decode()
    return ""


def describe() -> str:
    """Which BLAS computes kernelgrad's CPU products (for ``kg.info``)."""
    single_thread_available()
    if _Blas.own:
        return f"OpenBLAS, kernelgrad's own copy (scipy-openblas64), {_Blas.core} kernels"
    if _Blas.gemm:
        return f"OpenBLAS, NumPy's copy, {_Blas.core} kernels"
    return "NumPy's BLAS"


def _gemm_addresses(library: Any) -> dict[np.dtype, int]:
    found = {}
    for dtype, names in _GEMM_NAMES.items():
        for name in names:
            function = getattr(library, name, None)
            if function is not None:
                found[dtype] = ctypes.cast(function, ctypes.c_void_p).value
                break
    return found


def single_thread_available() -> bool:
    """Whether small products can be run on one BLAS thread (kernelgrad's own copy, or
    NumPy's threaded OpenBLAS set to one thread around the call)."""
    if not _Blas.looked_up:
        _look_up()
    return _Blas.own or (_Blas.setter is not None and _Blas.threads > 1)


def current_threads() -> int | None:
    """NumPy's BLAS's thread count now (None where it cannot be read)."""
    single_thread_available()
    return int(_Blas.getter()) if _Blas.getter is not None else None


def calling_threads() -> int | None:
    """The thread count now of the BLAS kernelgrad's products call (kernelgrad's own
    copy: always 1)."""
    single_thread_available()
    return int(_Blas.own_getter()) if _Blas.own else current_threads()


def matmul(
    left: np.ndarray,
    right: np.ndarray,
    out: np.ndarray,
    multiply_adds: int,
    bias: np.ndarray | None = None,
) -> None:
    """``np.matmul(left, right, out=out)`` (then ``out += bias`` with a ``bias`` of
    ``out``'s columns and dtype) for what :func:`matrix_product` does not serve: on one
    BLAS thread when the product has fewer than ``KG_BLAS_SMALL`` multiply-adds, split
    across Numba's threads when it has more (``split_gemm.py``); the same ``cblas_?gemm``
    calls as a prepared product, so the same bits."""
    if single_thread_available() and multiply_adds < _Blas.small:
        _small(left, right, out, bias)
    else:
        prepare(left, right, out, multiply_adds, bias)()


def matrix_product(
    left: np.ndarray, right: np.ndarray, out: np.ndarray, multiply_adds: int, bias: Any = None
) -> bool:
    """A 2-D product with kernelgrad's own OpenBLAS (+ ``bias`` on every row) in one
    compiled call that takes the arrays and checks their layouts itself
    (``split_gemm.gemm_matrix`` / ``split_matrix``: ~1 us, where working out
    ``split_gemm``'s arguments in Python takes ~10), the bias added by each thread to its
    block while it is in cache; the same ``cblas_?gemm`` calls as a prepared product.
    False, with nothing written, for any other product and layouts no gemm call reads
    (copy such operands, then :func:`matmul`)."""
    if not _Blas.looked_up:
        _look_up()
    return _Blas.own and _matrix(left, right, out, multiply_adds, bias)


def _matrix(
    left: np.ndarray, right: np.ndarray, out: np.ndarray, multiply_adds: int, bias: Any
) -> bool:
    """A 2-D product (+ bias) in one compiled call; False, with nothing written, for
    other products and where no gemm layout serves."""
    address = _Blas.gemm.get(out.dtype)
    if address is None or not (left.ndim == right.ndim == out.ndim == 2):
        return False
    if not (left.dtype == right.dtype == out.dtype) or (
        bias is not None and bias.dtype != out.dtype
    ):
        return False
    if multiply_adds < _Blas.small:
        return split_gemm.gemm_matrix(address, left, right, out, bias)
    if not _Blas.split:
        return False
    return split_gemm.split_matrix(address, split_gemm.split_parts(1), left, right, out, bias)


def _small(left: np.ndarray, right: np.ndarray, out: np.ndarray, bias: Any = None) -> None:
    """A small product on the calling thread: with kernelgrad's own OpenBLAS, the
    ``cblas_?gemm`` calls a prepared product makes (the same arguments: the same bits);
    else, and for what no single gemm layout serves, NumPy on one BLAS thread."""
    if _Blas.own:
        arguments = _split_arguments(left, right, out, bias)
        if arguments is not None:
            split_gemm.gemm_batch(*arguments)
            return
    _on_one_thread(left, right, out, bias)


def prepare(
    left: np.ndarray,
    right: np.ndarray,
    out: np.ndarray,
    multiply_adds: int,
    bias: np.ndarray | None = None,
) -> Callable[[], None]:
    """:func:`matmul` of these arrays (and ``bias``) as a function of no arguments, with
    the decisions (thread count, split, leading dimensions) taken once."""
    if not single_thread_available():
        return functools.partial(_numpy_product, left, right, out, bias)
    if multiply_adds < _Blas.small:
        arguments = _split_arguments(left, right, out, bias)
        return PreparedProduct(left, right, out, arguments, False, bias)
    arguments = None
    threads = numba.get_num_threads()
    if _Blas.split and (threads > 1 or _Blas.own):  # (on one thread: one call of ours)
        arguments = _split_arguments(left, right, out, bias)
    if arguments is None:
        return functools.partial(_numpy_product, left, right, out, bias)
    return PreparedProduct(left, right, out, arguments, threads > 1, bias)


def _numpy_product(left: np.ndarray, right: np.ndarray, out: np.ndarray, bias: Any) -> None:
    np.matmul(left, right, out=out)
    if bias is not None:
        np.add(out, bias, out=out)


class PreparedProduct:
    """A product :func:`prepare` made: calling it runs ``left @ right`` into ``out``
    on one BLAS thread (``split`` False: a small product, ``split_gemm.gemm_batch``)
    or split across Numba's threads (``split_gemm.split_gemm``). ``arguments`` are
    ``split_gemm``'s but the part count (the operands' addresses among them), or None
    for a small product no single ``cblas_?gemm`` layout serves (NumPy runs it on one
    BLAS thread). A native replay (``native_replay.py``) makes the same calls with the
    same arguments, so prepared and natively replayed products agree bit for bit (and
    with eager ones, which NumPy runs with the same call, but for its ``?syrk`` for
    ``x @ x.T``). ``bias`` (or None) is added to every row of ``out`` after the product
    (by ``split_gemm``'s blocks, whose ``arguments`` hold its address)."""

    __slots__ = ("arguments", "bias", "left", "out", "right", "split")

    def __init__(
        self, left, right, out, arguments: tuple | None, split: bool, bias: Any = None
    ) -> None:
        self.left, self.right, self.out = left, right, out
        self.arguments = arguments
        self.split = split
        self.bias = bias

    def __call__(self) -> None:
        if self.split:
            _split(self.arguments)
        elif self.arguments is not None:  # the call a native replay makes, bit for bit
            one_thread()
            try:
                split_gemm.gemm_batch(*self.arguments)
            finally:
                all_threads()
        else:
            _on_one_thread(self.left, self.right, self.out, self.bias)


def one_thread() -> None:
    """Set the BLAS kernelgrad calls to one thread (around code that calls
    ``cblas_?gemm`` from Numba's threads); :func:`all_threads` puts its own count back.
    Nothing to do for kernelgrad's own copy, which has one thread for good."""
    if not _Blas.own:
        _Blas.setter(1)


def all_threads() -> None:
    if not _Blas.own:
        _Blas.setter(_Blas.threads)


def _on_one_thread(left: np.ndarray, right: np.ndarray, out: np.ndarray, bias: Any = None) -> None:
    """``np.matmul`` with NumPy's OpenBLAS (where found) on one thread (then ``out +=
    bias``)."""
    if _Blas.setter is None:
        _numpy_product(left, right, out, bias)
        return
    _Blas.setter(1)
    try:
        _numpy_product(left, right, out, bias)
    finally:
        _Blas.setter(_Blas.threads)


def _split(arguments: tuple) -> None:
    parts = split_gemm.split_parts(arguments[-1][0])
    one_thread()
    try:
        split_gemm.split_gemm(arguments[0], arguments[1], parts, *arguments[2:])
    finally:
        all_threads()


def matrix_layout(array: np.ndarray) -> tuple[int, int] | None:
    """(NO_TRANSPOSE, leading dimension) for row-major matrices, (TRANSPOSE, leading
    dimension) for column-major ones, None for any other layout (``split_gemm.layout``)."""
    rows, cols = array.shape[-2:]
    row_stride, col_stride = array.strides[-2:]
    found = split_gemm.layout(rows, cols, row_stride, col_stride, array.itemsize)
    return found if found[0] else None


def _batch_step(array: np.ndarray, batch: tuple[int, ...]) -> int | None:
    """The distance in bytes from one matrix of ``array`` to the next when its leading
    dims are broadcast to ``batch`` and walked in order, if one distance serves the whole
    walk (0 for a matrix shared by every product); None otherwise."""
    lead = array.shape[:-2]
    pad = len(batch) - len(lead)
    sizes = (1,) * pad + lead
    strides = (0,) * pad + array.strides[:-2]
    step = None
    span = 1
    for size, stride, target in reversed(list(zip(sizes, strides, batch))):
        if target == 1:
            continue
        if size == 1:
            stride = 0  # broadcast along this dim
        elif size != target:
            return None
        if step is None:
            step, span = stride, target
        elif stride != step * span:
            return None
        else:
            span *= target
    return step or 0


def _split_arguments(
    left: np.ndarray, right: np.ndarray, out: np.ndarray, bias: np.ndarray | None = None
) -> tuple | None:
    """The arguments of ``split_gemm`` but the part count, or None where the product is
    not one the split serves: an operand of one dimension, another dtype, an empty
    matrix, a layout BLAS cannot read, batch dims that no single stride walks, NumPy's
    BLAS not OpenBLAS's 64-bit interface. A matrix of one row or column is a matrix
    like another (a packed recurrent layer's last steps run one row). With ``bias`` (a
    vector of ``out``'s columns and dtype, added to every row) its address and stride in
    bytes, else two zeros, come before the batch tuple."""
    dtype = out.dtype
    address = _Blas.gemm.get(dtype)
    if address is None or left.ndim < 2 or right.ndim < 2:
        return None
    if not (left.dtype == right.dtype == dtype):
        return None
    m, k = left.shape[-2:]
    n = right.shape[-1]
    if min(m, n, k) < 1:
        return None
    a, b, c = matrix_layout(left), matrix_layout(right), matrix_layout(out)
    if a is None or b is None or c is None or c[0] != split_gemm.NO_TRANSPOSE:
        return None
    batch = out.shape[:-2]
    steps = [_batch_step(x, batch) for x in (left, right, out)]
    if None in steps:
        return None
    added = (0, 0)
    if bias is not None:
        if bias.dtype != dtype or bias.shape != (n,) or bias.strides[0] < 0:
            return None
        added = (bias.ctypes.data, bias.strides[0])
    return (
        address, dtype.itemsize, m >= n, a[0], b[0], m, n, k,
        left.ctypes.data, a[1], right.ctypes.data, b[1], out.ctypes.data, c[1],
        *added, (prod(batch), *steps),
    )  # fmt: skip
