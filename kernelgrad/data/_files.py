"""Atomic file writes: write to a hidden temporary file beside the target, then rename.

A reader (or a second process) never sees half a file, and an error leaves nothing
behind. Files get the ordinary permissions (0o666 less the umask), not mkstemp's 0o600,
so that a shared dataset folder stays readable by everyone.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """``with atomic_writer(path) as handle: handle.write(...)``: ``path`` appears only
    when the block finishes without an exception."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.chmod(temporary, _default_mode())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    with atomic_writer(path) as handle:
        handle.write(payload)
