"""``torch.backends.mkl``: kernelgrad's CPU products go through NumPy's BLAS
(OpenBLAS in NumPy's wheels), not MKL."""

from __future__ import annotations


def is_available() -> bool:
    return False
