"""The CUDA backend's elementwise_foreach (one launch for many tensors) and the Adam step it
serves: results equal one launch per tensor, and a group's update is two launches."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.backends import get_backend
from kernelgrad.backends.base import ScalarFunction, View
from kernelgrad.backends.cuda import foreach
from kernelgrad.device import as_device
from kernelgrad.dtypes import float32
from tests.helpers import assert_close


@pytest.fixture
def backend(cuda: str):
    return get_backend(as_device(cuda))


@pytest.fixture
def launches(backend, monkeypatch) -> list[str]:
    """Names of the kernels the backend launches."""
    names: list[str] = []
    launch = backend.launcher.launch

    def counted(name, *args):
        names.append(name)
        return launch(name, *args)

    monkeypatch.setattr(backend.launcher, "launch", counted)
    return names


def step_and_double(p, g, scale, bias):
    return p - scale * g, g * 2.0 + bias


STEP_AND_DOUBLE = ScalarFunction.from_python(step_and_double, nout=2)


def view(t: kg.Tensor) -> View:
    return t._view()


@pytest.mark.parametrize("per_launch", [None, 2])
def test_foreach_equals_one_elementwise_per_item(backend, launches, monkeypatch, per_launch):
    if per_launch is not None:  # parameter space for two items per launch only
        monkeypatch.setattr(foreach, "items_per_launch", lambda *counts: per_launch)
    rng = np.random.default_rng(0)
    sizes = [(5,), (33,), (1,), (2, 35)]
    ps = [rng.standard_normal(s).astype(np.float32) for s in sizes]
    gs = [rng.standard_normal(s).astype(np.float32) for s in sizes]
    params = [kg.tensor(p, device="cuda") for p in ps]
    grads = [kg.tensor(g, device="cuda") for g in gs]
    doubled = [kg.empty(*s, device="cuda") for s in sizes]
    strided = kg.tensor(np.ones((3, 4), np.float32), device="cuda").T  # runs on its own
    strided_out = kg.empty(4, 3, device="cuda")
    items = [
        ([view(p), view(d)], [view(p), view(g), 0.5 + k, 1.0])
        for k, (p, d, g) in enumerate(zip(params, doubled, grads))
    ]
    items.append(([view(strided), view(strided_out)], [view(strided), view(strided), 0.5, 1.0]))
    items.append(
        (
            [view(kg.empty(0, device="cuda"))] * 2,
            [view(kg.empty(0, device="cuda"))] * 2 + [1.0, 1.0],
        )
    )
    backend.elementwise_foreach(STEP_AND_DOUBLE, items, [float32] * 4)
    for k, (p, g) in enumerate(zip(ps, gs)):
        assert_close(params[k], p - (0.5 + k) * g)
        assert_close(doubled[k], g * 2 + 1)
    assert_close(strided, np.full((4, 3), 0.5))
    assert_close(strided_out, np.full((4, 3), 3.0))
    grouped = [name for name in launches if "tensors]" in name]
    assert len(grouped) == (1 if per_launch is None else 2)
    assert len(launches) == len(grouped) + 1  # and the strided item alone


def test_a_broadcast_element_per_item_shares_the_launch(backend, launches):
    """A 0-d tensor broadcast to an item (a traced optimizer's step size) is read in
    the shared launch ("splat"), not run as a strided item of its own."""
    sizes = [(3,), (2, 5)]
    params = [kg.ones(*s, device="cuda") for s in sizes]
    grads = [kg.full(s, 2.0, device="cuda") for s in sizes]
    scales = [kg.tensor(0.25 * (k + 1), device="cuda") for k in range(2)]
    doubled = [kg.empty(*s, device="cuda") for s in sizes]
    items = [
        ([view(p), view(d)], [view(p), view(g), scale._broadcast_view(p.shape), 1.0])
        for p, d, g, scale in zip(params, doubled, grads, scales)
    ]
    launches.clear()  # the fills that made the tensors
    backend.elementwise_foreach(STEP_AND_DOUBLE, items, [float32] * 4)
    for k, s in enumerate(sizes):
        assert_close(params[k], np.full(s, 1.0 - 0.25 * (k + 1) * 2.0))
        assert_close(doubled[k], np.full(s, 5.0))
    assert len(launches) == 1 and "tensors]" in launches[0], launches


def small_model():
    return kg.nn.Sequential(kg.nn.Linear(3, 4), kg.nn.Tanh(), kg.nn.Linear(4, 2))


def train(model, optimizer, device, steps):
    x = kg.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), device=device)
    target = kg.tensor([1, 0], device=device)
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(x), target).backward()
        optimizer.step()


@pytest.mark.parametrize("optimizer", [kg.optim.Adam, kg.optim.AdamW])
def test_an_adam_step_on_cuda_is_two_launches_and_equals_the_cpus(backend, launches, optimizer):
    kg.manual_seed(3)
    reference = small_model()
    kg.manual_seed(3)
    with kg.device("cuda"):
        model = small_model()
    train(reference, optimizer(reference.parameters(), lr=0.05), "cpu", 3)
    adam = optimizer(model.parameters(), lr=0.05)
    train(model, adam, "cuda", 2)
    launches.clear()
    train(model, adam, "cuda", 1)
    updates = [name for name in launches if name.startswith(("adam_update", "set_count"))]
    assert updates == ["adam_update[4 tensors]", "set_count[4 tensors]"]
    assert not [name for name in launches if name.startswith("adam_step")]
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        assert_close(mine, theirs.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert [adam.state[p]["step"].item() for p in model.parameters()] == [3.0] * 4


def test_a_reloaded_adam_state_reads_its_step_counts_once(backend):
    kg.manual_seed(4)
    with kg.device("cuda"):
        model = small_model()
    adam = kg.optim.Adam(model.parameters(), lr=0.05)
    train(model, adam, "cuda", 2)
    resumed = kg.optim.Adam(model.parameters(), lr=0.05)
    resumed.load_state_dict(adam.state_dict())
    train(model, resumed, "cuda", 1)
    assert [resumed.state[p]["step"].item() for p in model.parameters()] == [3.0] * 4
