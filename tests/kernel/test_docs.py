"""The examples of docs/kernels.md run (on the CPU), in order, as one module."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "kernels.md"
DEVICE_LINE = 'device = "cuda" if kg.cuda.is_available() else "cpu"'


def test_kernels_md_examples_run(tmp_path, backend_name):
    if backend_name != "cpu":
        pytest.skip("the documentation's sizes are too large for the CUDA simulator")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 8
    source = "\n\n".join(blocks)
    assert DEVICE_LINE in source
    # Kernels need their source in a real file, so the examples run from one.
    module = tmp_path / "kernels_md_examples.py"
    module.write_text(source.replace(DEVICE_LINE, 'device = "cpu"'))
    runpy.run_path(str(module), run_name="kernels_md_examples")
