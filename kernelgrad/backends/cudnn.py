"""``torch.backends.cudnn``: kernelgrad calls no cuDNN; the switches are kept as set and
change nothing (see ``torch_settings.py``)."""

from __future__ import annotations

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: kernelgrad's convolutions are its own kernels (or cuBLAS products)."""
    return False


def version() -> None:
    """None: no cuDNN is loaded."""
    return None
