"""``KG_DEBUG`` levels, in the spirit of tinygrad's ``DEBUG``.

* ``KG_DEBUG=1``: one line when a kernel is compiled (or loaded from the disk cache).
* ``KG_DEBUG=2``: also one line per kernel launch: name, shape, time.
* ``KG_DEBUG=4``: also the source of every generated kernel module.

The level is read from the environment when kernelgrad is imported; ``set_debug_level``
changes it at run time.
"""

from __future__ import annotations

import os
import sys

_level = int(os.environ.get("KG_DEBUG", "0") or 0)


def debug_level() -> int:
    return _level


def set_debug_level(level: int) -> None:
    global _level
    _level = int(level)


def log(message: str) -> None:
    print(f"[kernelgrad] {message}", file=sys.stderr)
