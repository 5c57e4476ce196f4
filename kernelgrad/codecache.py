"""Generated kernel source, written to content-hashed files and imported.

Numba caches compiled machine code only for functions that live in a real source file,
so every generated kernel module is written to ``<cache>/kernels/<prefix>_<hash>.py``
and imported from there; Numba's ``cache=True`` then keeps the compiled code in the
``__pycache__`` folder beside it, and a second process loads it instead of compiling.
The hash covers the source and the kernelgrad version, so a file never changes once
written and stale machine code is never loaded.

The cache folder is ``$KERNELGRAD_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernelgrad``, else
``~/.cache/kernelgrad``. Deleting it is always safe.

``KG_DEBUG=4`` prints the source of every generated module when it is first loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

from . import __version__
from .debug import debug_level

_lock = threading.Lock()
_modules: dict[str, ModuleType] = {}
_cache_root: Path | None = None


def cache_dir() -> Path:
    """The folder that holds generated kernel source and Numba's compiled code."""
    global _cache_root
    if _cache_root is None:
        configured = os.environ.get("KERNELGRAD_CACHE_DIR")
        if configured:
            root = Path(configured)
        else:
            base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            root = Path(base) / "kernelgrad"
        try:
            (root / "kernels").mkdir(parents=True, exist_ok=True)
            # A name of its own: processes starting together (the ranks of a job) would
            # otherwise delete each other's probe, and one would fall back to a private
            # folder and compile every kernel again.
            fd, probe = tempfile.mkstemp(dir=root / "kernels", prefix=".write-test-")
            os.close(fd)
            os.unlink(probe)
        except OSError:
            # A read-only home: still work, with a per-process folder (no reuse).
            root = Path(tempfile.mkdtemp(prefix="kernelgrad-cache-"))
            (root / "kernels").mkdir(parents=True, exist_ok=True)
        _cache_root = root
    return _cache_root


DIGEST_LENGTH = 20  # hex digits of the hash in a generated module's name


def source_digest(source: str) -> str:
    digest = hashlib.sha256(f"kernelgrad {__version__}\n{source}".encode()).hexdigest()
    return digest[:DIGEST_LENGTH]


def load_module(source: str, prefix: str) -> ModuleType:
    """Import ``source`` as a module from a content-hashed file (written once)."""
    name = f"kg_{prefix}_{source_digest(source)}"
    module = _modules.get(name)
    if module is not None:
        return module
    with _lock:
        module = _modules.get(name)
        if module is not None:
            return module
        path = cache_dir() / "kernels" / f"{name}.py"
        if not path.exists():
            # Write to a temporary name, then rename: a reader never sees half a file.
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as handle:
                handle.write(source)
            os.replace(tmp, path)
        if debug_level() >= 4:
            print(f"[kernelgrad] generated module {path}\n{source}", file=sys.stderr)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _modules[name] = module
        return module
