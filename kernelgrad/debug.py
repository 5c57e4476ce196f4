"""``KG_DEBUG`` levels, in the spirit of tinygrad's ``DEBUG``.

* ``KG_DEBUG=1``: one line when a kernel is compiled, or loaded from the disk cache
  (``kernel double_ (cpu) loaded from the disk cache in 0.00 s``).
* ``KG_DEBUG=2``: also one line per kernel launch: name, shape, time.
* ``KG_DEBUG=4``: also the source of every generated kernel module.

The level is read from the environment when kernelgrad is imported; ``set_debug_level``
changes it at run time.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_level = int(os.environ.get("KG_DEBUG", "0") or 0)


def debug_level() -> int:
    return _level


def set_debug_level(level: int) -> None:
    global _level
    _level = int(level)


def log(message: str) -> None:
    print(f"[kernelgrad] {message}", file=sys.stderr)


def compile_counts(dispatcher: Any) -> tuple[int, int]:
    """(signatures held, disk-cache hits) of a Numba dispatcher; taken before a call, it
    lets :func:`compile_action` tell what the call did."""
    try:
        hits = sum(dispatcher.stats.cache_hits.values())
    except (AttributeError, TypeError):
        hits = 0
    return len(getattr(dispatcher, "overloads", ())), hits


def compile_action(dispatcher: Any, before: tuple[int, int]) -> str | None:
    """``"compiled"`` or ``"loaded from the disk cache"`` when the dispatcher gained a
    signature since ``before`` (:func:`compile_counts`), else None."""
    signatures, hits = compile_counts(dispatcher)
    if signatures == before[0]:
        return None
    return "loaded from the disk cache" if hits != before[1] else "compiled"
