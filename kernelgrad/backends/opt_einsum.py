"""``torch.backends.opt_einsum``: kernelgrad's ``einsum`` chooses its own contraction
order; the switches are kept as set."""

from __future__ import annotations

enabled = False
strategy = None


def is_available() -> bool:
    return False
