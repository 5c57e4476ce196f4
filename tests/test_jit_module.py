"""kg.jit (torch.jit): script and trace return what they are given (eager, same results);
TorchScript archives are refused with the way to save weights instead."""

from __future__ import annotations

import pytest

import kernelgrad as kg
from kernelgrad.errors import UnsupportedError


def test_script_and_trace_return_the_object_and_it_runs_eagerly(tmp_path):
    model = kg.nn.Sequential(kg.nn.Linear(3, 2), kg.nn.ReLU())
    x = kg.ones(4, 3)
    expected = model(x).tolist()
    assert kg.jit.script(model) is model
    assert kg.jit.trace(model, (x,)) is model
    assert kg.jit.trace(model, x)(x).tolist() == expected

    @kg.jit.script
    def double(t):
        return t * 2

    assert double(kg.ones(2)).tolist() == [2.0, 2.0]

    class Block(kg.nn.Module):
        @kg.jit.ignore
        def helper(self):
            return 1

        @kg.jit.unused
        def other(self):
            return 2

        @kg.jit.export
        def third(self):
            return 3

        @kg.jit.ignore(drop=True)
        def dropped(self):
            return 4

    block = Block()
    assert (block.helper(), block.other(), block.third(), block.dropped()) == (1, 2, 3, 4)
    assert kg.jit.is_scripting() is False and kg.jit.is_tracing() is False
    assert kg.jit.annotate(list, []) == []


def test_save_and_load_of_torchscript_raise_naming_state_dict(tmp_path):
    model = kg.jit.script(kg.nn.Linear(2, 2))
    with pytest.raises(UnsupportedError, match=r"kg\.save\(model\.state_dict\(\), path\)"):
        kg.jit.save(model, tmp_path / "m.pt")
    with pytest.raises(NotImplementedError, match="no TorchScript"):
        kg.jit.load(tmp_path / "m.pt")
    with pytest.raises(AttributeError, match="no TorchScript"):
        kg.jit.ScriptModule  # noqa: B018


@pytest.mark.torch
def test_the_names_are_pytorchs():
    import inspect

    import torch

    for name in ("script", "trace", "trace_module", "save", "load"):
        theirs = list(inspect.signature(getattr(torch.jit, name)).parameters)[:2]
        ours = list(inspect.signature(getattr(kg.jit, name)).parameters)[:2]
        assert ours == theirs, name
    for name in ("ignore", "unused", "export", "is_scripting", "is_tracing", "annotate"):
        assert callable(getattr(torch.jit, name)) and callable(getattr(kg.jit, name))
