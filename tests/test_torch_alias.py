"""import kernelgrad.as_torch / kernelgrad.torch_alias: torch imports give kernelgrad."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kernelgrad as kg
from kernelgrad.torch_alias import aliased
from tests.helpers import ROOT

PROGRAM = """
import kernelgrad.as_torch
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import kernelgrad
model = nn.Linear(3, 1)
loader = DataLoader(TensorDataset(torch.ones(4, 3), torch.zeros(4, 1)), batch_size=2)
loss = sum(F.mse_loss(model(x), y).item() for x, y in loader)
print(torch is kernelgrad, type(model).__module__, loss >= 0)
"""


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_the_first_line_ports_a_program():
    done = run(PROGRAM)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "kernelgrad.nn.linear", "True"]


def test_it_refuses_when_pytorch_is_already_imported():
    pytest.importorskip("torch")
    done = run("import torch\nimport kernelgrad.as_torch")
    assert done.returncode != 0
    assert "import kernelgrad.as_torch before anything imports torch" in done.stderr


def test_aliased_sets_pytorch_aside_and_puts_it_back():
    real = sys.modules.get("torch")
    with aliased():
        import torch
        import torch.nn.functional as F
        from torch.utils.data import DataLoader

        assert torch is kg and F is kg.nn.functional and DataLoader is kg.data.DataLoader
        assert F.__name__ == "kernelgrad.nn.functional"  # modules keep their own names
        with pytest.raises(ModuleNotFoundError, match=r"kernelgrad has no kernelgrad\.nothing"):
            import torch.nothing
    assert sys.modules.get("torch") is real


def test_uninstall_forgets_the_alias():
    code = (
        "import sys\nfrom kernelgrad import torch_alias\ntorch_alias.install()\n"
        "torch_alias.install()  # twice is once\nimport torch.optim\ntorch_alias.uninstall()\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] == 'torch'))"
    )
    done = run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
