"""Public PyTorch tutorials and examples, run with only the import changed.

Every program in ``programs/`` runs under kernelgrad (``import torch`` gives kernelgrad,
see harness.py) and must train: finite losses, and a falling loss where the program's
``check`` says so. Where PyTorch is installed, the same program also runs under
PyTorch from identical initial weights, and the per-step losses must agree. A program
that needs something kernelgrad lacks skips with the names of what is missing."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import kernelgrad as kg
from tests.compat import harness

NAMES = harness.program_names()
STEPS = 4


@pytest.fixture(autouse=True)
def _default_devices_restored():
    """A program may set the default device (neural_style: ``torch.set_default_device``),
    which lasts for the process: reset kernelgrad's and PyTorch's after each test.
    (PyTorch 2.13's ``F.l1_loss(..., weight=w)`` gives wrong values while a default
    device is set, which broke tests/nn/test_loss_signatures.py's references.)"""
    yield
    kg.set_default_device(None)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_default_device(None)


def skip_if_missing(name: str) -> None:
    missing = harness.missing_requirements(name)
    if missing:
        pytest.skip("needs " + ", ".join(f"kg.{dotted}" for dotted in missing))


def test_there_are_programs_of_every_kind():
    assert len(NAMES) >= 10


@pytest.mark.parametrize("name", NAMES)
def test_runs_with_only_the_import_changed(name):
    skip_if_missing(name)
    program = harness.load_program(name, "kernelgrad")
    kg.manual_seed(0)
    losses = program.train(program.make_models(), program.make_data(_rng()), STEPS)
    assert len(losses) == STEPS and all(isinstance(loss, float) for loss in losses)
    assert np.all(np.isfinite(losses)), losses
    if hasattr(program, "check"):
        program.check(losses)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")  # its add_graph
@pytest.mark.parametrize("name", NAMES)
def test_matches_pytorch_from_identical_weights(name):
    torch = pytest.importorskip("torch")
    skip_if_missing(name)
    reference = harness.load_program(name, "torch")
    ours = harness.load_program(name, "kernelgrad")
    torch.manual_seed(0)
    torch_models = reference.make_models()
    kg_models = ours.make_models()
    harness.copy_weights(torch_models, kg_models)
    harness.no_dropout(torch_models)
    harness.no_dropout(kg_models)
    with harness.shared_random_stream(torch), harness.functional_dropout_off(torch):
        expected = reference.train(torch_models, reference.make_data(_rng()), STEPS)
    with harness.shared_random_stream(kg), harness.functional_dropout_off(kg):
        got = ours.train(kg_models, ours.make_data(_rng()), STEPS)
    tolerance = getattr(ours, "RTOL", 1e-4)
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=1e-5)


def test_a_tutorial_picks_the_gpu_when_there_is_one(device):
    """linear_regression's `torch.device("cuda" if torch.cuda.is_available() else "cpu")`
    gives the CUDA backend under the simulator (the simulated pass) and the CPU without
    it, with nothing else changed."""
    program = harness.load_program("linear_regression", "kernelgrad")
    assert program.device == kg.device(device)
    models = program.make_models()
    losses = program.train(models, program.make_data(_rng()), 3)
    assert models["model"].weight.device == kg.device(device)
    program.check(losses)


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)
