"""``torch.backends.mkl``: kernelgrad's CPU products go through OpenBLAS (its own
copy, see ``kernelgrad/backends/cpu/blas.py``), not MKL."""

from __future__ import annotations


def is_available() -> bool:
    return False
