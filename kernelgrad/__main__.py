"""``python -m kernelgrad train|evaluate|info|download`` (the same as ``kernelgrad ...``)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
