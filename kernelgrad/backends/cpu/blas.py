"""Matrix products through NumPy's BLAS, small ones on one BLAS thread.

NumPy's wheels bundle OpenBLAS, whose worker threads busy-wait for a while after each
call. A training step alternates small products with the backend's Numba kernels; each
small product woke OpenBLAS's workers, which then held a core that the next kernel's
OpenMP workers needed. On a 2-core machine a LeNet-5 training step took 8.5-9.3 ms with
every product threaded and 7.4-7.8 ms with products below 2**24 multiply-adds on the
calling thread (``benchmarks/bench_lenet.py``), while a 784-1024-1024-10 MLP step, whose
products are large, stayed at 14 ms. Large products keep all of the BLAS's threads: a
second thread nearly halves them (1024^3: 13.1 -> 6.6 ms; 128x784x256: 348 -> 219 us,
which is why the line is not higher: a 784-256-10 MLP step took 1.95 ms with it at
2**24 and 2.3 ms at 2**26).

The thread count is set through ``openblas_set_num_threads``, looked up in the OpenBLAS
library NumPy loaded, and put back after each small product, so NumPy code that the user
runs in the same process keeps its threads. With another BLAS (MKL, Accelerate, a system
library) nothing is found and every product runs as NumPy runs it.
``KG_BLAS_SMALL=N`` sets the size (in multiply-adds) below which products use one thread;
0 turns the single-thread path off.
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any

import numpy as np

from ..base import whole_number_setting

DEFAULT_SMALL_PRODUCT = 1 << 24
_NAMES = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


class _Blas:
    looked_up = False
    setter: Any = None
    getter: Any = None
    threads = 1  # the library's own thread count (what NumPy uses)
    small = DEFAULT_SMALL_PRODUCT


def _small_product_size() -> int:
    return whole_number_setting(
        "KG_BLAS_SMALL", DEFAULT_SMALL_PRODUCT, minimum=0, unit="multiply-adds"
    )


def _look_up() -> None:
    """Find OpenBLAS's thread setter in the copy NumPy loaded (``numpy.libs``)."""
    _Blas.looked_up = True
    _Blas.small = _small_product_size()
    folder = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in sorted(glob.glob(os.path.join(folder, "*openblas*"))):
        try:
            library = ctypes.CDLL(path)  # already loaded by NumPy: the same copy
        except OSError:
            continue
        for name in _NAMES:
            setter = getattr(library, name, None)
            getter = getattr(library, name.replace("set_num", "get_num"), None)
            if setter is None or getter is None:
                continue
            setter.argtypes = [ctypes.c_int]
            setter.restype = None
            getter.restype = ctypes.c_int
            _Blas.setter, _Blas.getter = setter, getter
            _Blas.threads = max(int(getter()), 1)
            return


def single_thread_available() -> bool:
    """Whether small products can be run on one BLAS thread."""
    if not _Blas.looked_up:
        _look_up()
    return _Blas.setter is not None and _Blas.threads > 1


def current_threads() -> int | None:
    """The BLAS's thread count now (None where it cannot be read)."""
    single_thread_available()
    return int(_Blas.getter()) if _Blas.getter is not None else None


def matmul(left: np.ndarray, right: np.ndarray, out: np.ndarray, multiply_adds: int) -> None:
    """``np.matmul(left, right, out=out)``, on one BLAS thread when the product has
    fewer than ``KG_BLAS_SMALL`` multiply-adds."""
    if multiply_adds >= _Blas.small or not single_thread_available():
        np.matmul(left, right, out=out)
        return
    _Blas.setter(1)
    try:
        np.matmul(left, right, out=out)
    finally:
        _Blas.setter(_Blas.threads)
