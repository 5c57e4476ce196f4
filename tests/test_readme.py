"""The README's Python examples run (except the GPU block, which needs a device)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    source = BLOCKS[index]
    if 'device="cuda"' in source:
        pytest.skip("the GPU example needs a GPU")
    # Run it as a script file: kernels need their source to be readable from a file.
    script = tmp_path / f"readme_example_{index}.py"
    script.write_text(source)
    monkeypatch.chdir(tmp_path)  # examples may write files
    runpy.run_path(str(script), run_name="__main__")
