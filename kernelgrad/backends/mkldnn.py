"""``torch.backends.mkldnn`` (oneDNN): not used by kernelgrad; the switches are kept."""

from __future__ import annotations

enabled = True
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False
