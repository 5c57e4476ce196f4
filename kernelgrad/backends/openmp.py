"""``torch.backends.openmp``: kernelgrad's CPU kernels run on Numba's OpenMP pool."""

from __future__ import annotations


def is_available() -> bool:
    return True
