"""Large matrix products split across Numba's threads, each part one single-threaded
``cblas_?gemm`` call of OpenBLAS (kernelgrad's own copy, or the one NumPy loaded: see
``blas.py``).

Why: OpenBLAS keeps a thread pool of its own, whose workers spin for a long time after
each call. A training step alternates products with the backend's Numba kernels, which
run on Numba's OpenMP pool; two pools on the same cores then take turns waiting for
cores the other pool's spinning workers hold (see ``blas.py`` and ``__init__.py``'s
``_configure_thread_pools``). PyTorch runs its BLAS on the same OpenMP pool as its own
kernels. Here the product's output is cut into one block of rows (or of columns) per
Numba thread, and each thread multiplies its block with OpenBLAS set to one thread: one
pool, no OpenBLAS workers woken.

The library is called through its address, passed as an argument, so the kernel holds
no ctypes object and Numba can cache it on disk like every other kernel.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import carray, get_num_threads, njit, prange, types
from numba.extending import intrinsic, register_jitable

ROW_MAJOR = 101  # CBLAS_ORDER
NO_TRANSPOSE = 111  # CBLAS_TRANSPOSE
TRANSPOSE = 112


def _gemm_call(scalar_type: types.Float) -> Any:
    """An intrinsic calling ``cblas_?gemm(RowMajor, ta, tb, m, n, k, 1, a, lda, b, ldb,
    0, c, ldc)`` through the function at ``address``, for ``scalar_type`` (float32:
    sgemm, float64: dgemm). ``a``, ``b`` and ``c`` are addresses (integers), the
    dimensions 64-bit integers (OpenBLAS's ILP64 interface)."""

    @intrinsic
    def call(typingctx, address, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
        sig = types.void(address, ta, tb, m, n, k, a, lda, b, ldb, c, ldc)

        def codegen(context, builder, signature, args):
            (address, ta, tb, m, n, k, a, lda, b, ldb, c, ldc) = args
            enum = ir.IntType(32)
            blasint = ir.IntType(64)
            pointer = ir.IntType(8).as_pointer()
            scalar = context.get_value_type(scalar_type)
            function_type = ir.FunctionType(
                ir.VoidType(),
                [enum, enum, enum, blasint, blasint, blasint, scalar]
                + [pointer, blasint, pointer, blasint, scalar, pointer, blasint],
            )
            function = builder.inttoptr(address, function_type.as_pointer())
            arguments = [
                ir.Constant(enum, ROW_MAJOR),
                builder.trunc(ta, enum),
                builder.trunc(tb, enum),
                m,
                n,
                k,
                ir.Constant(scalar, 1.0),
                builder.inttoptr(a, pointer),
                lda,
                builder.inttoptr(b, pointer),
                ldb,
                ir.Constant(scalar, 0.0),
                builder.inttoptr(c, pointer),
                ldc,
            ]
            builder.call(function, arguments)
            return context.get_dummy_value()

        return sig, codegen

    return call


_sgemm = _gemm_call(types.float32)
_dgemm = _gemm_call(types.float64)


@intrinsic
def _pointer(typingctx, address, like):
    """A pointer to values of ``like``'s type (a float) at ``address`` (an integer),
    for ``numba.carray``. (One intrinsic typed by its argument: two intrinsics passed
    as arguments would share one compiled form, both named alike.)"""
    sig = types.CPointer(like)(address, like)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


@register_jitable
def _add_bias_at(item, c, ldc, row_start, row_stop, col_start, col_stop, bias, bias_step):
    """``c[i, j] += bias[j]`` for the rows and columns of a block of the row-major
    matrix at address ``c`` (leading dimension ``ldc``), the bias at address ``bias``
    with ``bias_step`` bytes from one element to the next: what the separate
    elementwise addition of a bias computes, in the matrix's precision, while the block
    is in cache (row by row over contiguous memory, which LLVM vectorises)."""
    if item == 4:
        zero32 = np.float32(0.0)
        _add_rows(c, ldc, row_start, row_stop, col_start, col_stop, bias, bias_step, 4, zero32)
    else:
        zero64 = np.float64(0.0)
        _add_rows(c, ldc, row_start, row_stop, col_start, col_stop, bias, bias_step, 8, zero64)


@register_jitable
def _add_rows(c, ldc, row_start, row_stop, col_start, col_stop, bias, bias_step, size, zero):
    """:func:`_add_bias_at` for elements of ``size`` bytes, of ``zero``'s type."""
    width = col_stop - col_start
    if bias_step == size:  # a contiguous bias (the usual case)
        added = carray(_pointer(bias + col_start * size, zero), (width,))
        for i in range(row_start, row_stop):
            row = carray(_pointer(c + (i * ldc + col_start) * size, zero), (width,))
            for j in range(width):
                row[j] += added[j]
    else:  # (stride 0: one value expanded; else every step-th element)
        for i in range(row_start, row_stop):
            row = carray(_pointer(c + (i * ldc + col_start) * size, zero), (width,))
            for j in range(width):
                row[j] += carray(_pointer(bias + (col_start + j) * bias_step, zero), (1,))[0]


@njit(cache=True, nogil=True)
def _gemm(address, item, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    if item == 4:
        _sgemm(address, ta, tb, m, n, k, a, lda, b, ldb, c, ldc)
    else:
        _dgemm(address, ta, tb, m, n, k, a, lda, b, ldb, c, ldc)


@njit(nogil=True)  # not cached: get_num_threads reads the threading layer's address
def split_parts(count):
    """How many blocks ``split_gemm`` cuts each of ``count`` products into on the
    calling thread's Numba thread count: one per thread when there are fewer than two
    matrices per thread, else whole matrices (called from Python before a split, and
    from a native replay's generated code)."""
    threads = get_num_threads()
    return threads if count < 2 * threads else 1


@njit(parallel=True, cache=True, nogil=True)
def split_gemm(
    address, item, parts, by_rows, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, bias, bias_step, batch
):
    """``c = a @ b`` (row-major ``c``) for each of ``batch`` matrices, each product in
    ``parts`` blocks of rows (``by_rows``) or of columns, one ``cblas_?gemm`` call per
    block. ``a`` and ``b`` are addresses of row-major (``NO_TRANSPOSE``) or column-major
    (``TRANSPOSE``) matrices with leading dimensions ``lda``/``ldb``; ``batch`` is a
    tuple (count, a's, b's and c's batch strides in bytes: 0 for an operand shared by
    every product); ``item`` is the element size in bytes (4: sgemm, 8: dgemm) and
    ``address`` the address of that function. ``bias`` (an address, or 0 for none) is a
    vector of ``n`` elements ``bias_step`` bytes apart that each block adds to its rows
    after its product (:func:`_add_bias_at`)."""
    count, a_step, b_step, c_step = batch
    total = m if by_rows else n
    block = (total + parts - 1) // parts
    for task in prange(count * parts):
        matrix = task // parts
        part = task - matrix * parts
        start = part * block
        stop = min(total, start + block)
        if stop <= start:
            continue
        _block(
            address, item, by_rows, ta, tb, m, n, k, a + matrix * a_step, lda,
            b + matrix * b_step, ldb, c + matrix * c_step, ldc, bias, bias_step, start, stop,
        )  # fmt: skip


@register_jitable
def _block(
    address, item, by_rows, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, bias, bias_step, start, stop
):
    """One block of a split product: rows ``start..stop`` of ``a`` and ``c``
    (``by_rows``) or columns ``start..stop`` of ``b`` and ``c``, one ``cblas_?gemm``
    call, then the bias (an address, 0 for none) added to the block. The one rule of
    :func:`split_gemm`, :func:`gemm_batch`, :func:`_split_matrix` and
    :func:`_gemm_matrix`, so that they make the same calls."""
    if by_rows:
        a_offset = start * lda if ta == NO_TRANSPOSE else start
        _gemm(
            address, item, ta, tb, stop - start, n, k,
            a + a_offset * item, lda, b, ldb, c + start * ldc * item, ldc,
        )  # fmt: skip
        if bias:
            _add_bias_at(item, c, ldc, start, stop, 0, n, bias, bias_step)
    else:
        b_offset = start if tb == NO_TRANSPOSE else start * ldb
        _gemm(
            address, item, ta, tb, m, stop - start, k,
            a, lda, b + b_offset * item, ldb, c + start * item, ldc,
        )  # fmt: skip
        if bias:
            _add_bias_at(item, c, ldc, 0, m, start, stop, bias, bias_step)


@njit(cache=True, nogil=True)
def gemm_batch(
    address, item, by_rows, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, bias, bias_step, batch
):
    """``split_gemm`` on the calling thread, one ``cblas_?gemm`` call per matrix (the
    same arguments but the part count): each matrix is one block of one part
    (:func:`_block`). A small product in a native replay (``native_replay.py``) or a
    prepared one."""
    count, a_step, b_step, c_step = batch
    total = m if by_rows else n
    for matrix in range(count):
        _block(
            address, item, by_rows, ta, tb, m, n, k, a + matrix * a_step, lda,
            b + matrix * b_step, ldb, c + matrix * c_step, ldc, bias, bias_step, 0, total,
        )  # fmt: skip


@register_jitable
def layout(rows, cols, row_stride, col_stride, item):
    """(NO_TRANSPOSE, leading dimension) for a row-major matrix, (TRANSPOSE, leading
    dimension) for a column-major one, (0, 0) for a layout BLAS cannot read (strides in
    bytes, ``item`` the element size). Plain Python where ``blas.py`` calls it, inlined
    in :func:`_gemm_matrix`: one rule for eager, prepared and compiled products."""
    if col_stride == item and row_stride % item == 0 and row_stride >= item * cols:
        return NO_TRANSPOSE, row_stride // item
    if row_stride == item and col_stride % item == 0 and col_stride >= item * rows:
        return TRANSPOSE, col_stride // item
    return 0, 0


def gemm_matrix(address: int, left: Any, right: Any, out: Any, bias: Any = None) -> bool:
    """:func:`_gemm_matrix`, compiled on first use for matrices of ``out``'s dtype in any
    layout: one compiled function per dtype, where a signature per combination of row-
    and column-major operands would compile (and slow a cold start) once each. ``bias``
    (a 1-D array of ``out``'s columns, or None) is added to every row after the product."""
    compiled = _compiled(_matrix_dispatchers, _gemm_matrix, out, parallel=False)
    return compiled(address, left, right, out, *_bias_arguments(out, bias))


def split_matrix(
    address: int, parts: int, left: Any, right: Any, out: Any, bias: Any = None
) -> bool:
    """:func:`_split_matrix`, compiled on first use per dtype as :func:`gemm_matrix`."""
    compiled = _compiled(_split_dispatchers, _split_matrix, out, parallel=True)
    return compiled(address, parts, left, right, out, *_bias_arguments(out, bias))


_matrix_dispatchers: dict[Any, Any] = {}  # NumPy dtype -> compiled _gemm_matrix
_split_dispatchers: dict[Any, Any] = {}  # NumPy dtype -> compiled _split_matrix
# the bias argument where there is none (not read), per dtype: one compiled signature
_NO_BIAS = {np.dtype(t): np.empty(0, t) for t in (np.float32, np.float64)}


def _bias_arguments(out: Any, bias: Any) -> tuple[Any, bool]:
    """(the bias array, whether it is read): where there is none, an empty array of
    ``out``'s dtype stands in, so that one compiled signature serves both."""
    if bias is None:
        return _NO_BIAS[out.dtype], False
    return bias, True


def _compiled(table: dict, function: Any, out: Any, parallel: bool) -> Any:
    """``function`` compiled for 2-D arrays of ``out``'s dtype in any layout (and a
    1-D bias of that dtype), kept in ``table``."""
    compiled = table.get(out.dtype)
    if compiled is None:
        dtype = types.float32 if out.itemsize == 4 else types.float64
        matrix = types.Array(dtype, 2, "A")
        head = (types.int64,) if not parallel else (types.int64, types.int64)
        bias = types.Array(dtype, 1, "A")
        signature = types.boolean(*head, matrix, matrix, matrix, bias, types.boolean)
        compiled = njit([signature], cache=True, nogil=True, parallel=parallel)(function)
        table[out.dtype] = compiled
    return compiled


@register_jitable
def _operands(left, right, out, bias, has_bias):
    """What a gemm call needs of three 2-D arrays: (ta, lda, tb, ldb, ldc, m, n, k,
    item, a, b, c, bias address, bias step), with ta = 0 where no single gemm call
    serves (an empty dimension, strides BLAS cannot read, a column-major ``out``);
    addresses are signed integers (an unsigned one makes its sums with offsets floats),
    the bias address 0 without ``has_bias``."""
    m, k = left.shape
    n = right.shape[1]
    item = out.itemsize
    ta, lda = layout(m, k, left.strides[0], left.strides[1], item)
    tb, ldb = layout(k, n, right.strides[0], right.strides[1], item)
    tc, ldc = layout(m, n, out.strides[0], out.strides[1], item)
    if m < 1 or n < 1 or k < 1 or tb == 0 or tc != NO_TRANSPOSE:
        ta = 0
    bias_address = np.int64(bias.ctypes.data) if has_bias else np.int64(0)
    a, b, c = np.int64(left.ctypes.data), np.int64(right.ctypes.data), np.int64(out.ctypes.data)
    return ta, lda, tb, ldb, ldc, m, n, k, item, a, b, c, bias_address, bias.strides[0]


def _gemm_matrix(address, left, right, out, bias, has_bias):
    """``out = left @ right`` (+ ``bias`` on every row) for 2-D arrays of one float
    dtype, by one ``cblas_?gemm`` call on the calling thread: :func:`_split_matrix`'s
    block of one part (so the same bits as ``gemm_batch``, ``split_gemm`` and
    ``split_matrix`` for a product of one part); False, with nothing written, where no
    gemm layout serves (see :func:`_operands`)."""
    ta, lda, tb, ldb, ldc, m, n, k, item, a, b, c, bias_at, step = _operands(
        left, right, out, bias, has_bias
    )
    if ta == 0:
        return False
    by_rows = m >= n
    _block(
        address, item, by_rows, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, bias_at, step, 0,
        m if by_rows else n,
    )  # fmt: skip
    return True


def _split_matrix(address, parts, left, right, out, bias, has_bias):
    """:func:`split_gemm` of one 2-D product in ``parts`` blocks (the same blocks and
    calls, so the same bits as a prepared or natively replayed product), taking the
    arrays themselves, so no arguments are worked out in Python; each block adds
    ``bias`` to its part of ``out`` (when ``has_bias``) after its product, while the
    block is in cache. False, with nothing written, where no gemm layout serves."""
    ta, lda, tb, ldb, ldc, m, n, k, item, a, b, c, bias_at, step = _operands(
        left, right, out, bias, has_bias
    )
    if ta == 0:
        return False
    by_rows = m >= n
    total = m if by_rows else n
    block = (total + parts - 1) // parts
    for part in prange(parts):
        start = part * block
        stop = min(total, start + block)
        if stop > start:
            _block(
                address, item, by_rows, ta, tb, m, n, k, a, lda, b, ldb, c, ldc,
                bias_at, step, start, stop,
            )  # fmt: skip
    return True
