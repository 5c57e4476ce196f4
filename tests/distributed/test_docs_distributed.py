"""The training script of docs/distributed.md runs (here as a group of one process; the
2-process behaviour of the same calls is what the other tests of this folder check)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "distributed.md"


def test_the_training_script_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("mpi4py")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    scripts = [block for block in blocks if "init_process_group()" in block]
    assert len(scripts) == 1
    script = tmp_path / "train.py"
    script.write_text(scripts[0])
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="__main__")
    assert re.findall(r"epoch \d: loss \d\.\d{4}", capsys.readouterr().out) != []
    assert (tmp_path / "model.safetensors").is_file()
