"""``kg.optim.swa_utils`` against ``torch.optim.swa_utils``: AveragedModel's averages
(SWA, EMA through avg_fn and multi_avg_fn, with and without buffers) after several
updates, SWALR's rates per epoch, update_bn's running statistics, the signatures and
errors; and an equal-weight average on every backend against NumPy."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.optim import swa_utils
from tests.helpers import as_numpy

RNG = np.random.default_rng(3)
INPUTS = [RNG.standard_normal((5, 3)).astype(np.float32) for _ in range(4)]


def _models(torch):
    """The same small network with batch norm in PyTorch and kernelgrad."""
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4, momentum=0.3), torch.nn.Linear(4, 2)
    )
    mine = kg.nn.Sequential(
        kg.nn.Linear(3, 4), kg.nn.BatchNorm1d(4, momentum=0.3), kg.nn.Linear(4, 2)
    )
    with kg.no_grad():
        for name, value in theirs.state_dict().items():
            mine.state_dict()[name].copy_(kg.tensor(value.numpy()))
    return theirs, mine


AVERAGES = {
    "swa": {},
    "swa-buffers": {"use_buffers": True},
    "ema-multi": {"multi_avg_fn": ("get_ema_multi_avg_fn", 0.9)},
    "ema-multi-buffers": {"multi_avg_fn": ("get_ema_multi_avg_fn", 0.9), "use_buffers": True},
    "ema": {"avg_fn": ("get_ema_avg_fn", 0.8)},
    "swa-multi": {"multi_avg_fn": ("get_swa_multi_avg_fn",)},
    "swa-fn": {"avg_fn": ("get_swa_avg_fn",)},
}


def _options(module, spec):
    options = dict(spec)
    for key in ("avg_fn", "multi_avg_fn"):
        if key in options:
            name, *args = options[key]
            options[key] = getattr(module, name)(*args)
    return options


@pytest.mark.torch
@pytest.mark.parametrize("case", list(AVERAGES))
def test_averaged_model_matches_pytorch(case):
    torch = pytest.importorskip("torch")
    theirs, mine = _models(torch)
    their_average = torch.optim.swa_utils.AveragedModel(
        theirs, **_options(torch.optim.swa_utils, AVERAGES[case])
    )
    my_average = swa_utils.AveragedModel(mine, **_options(swa_utils, AVERAGES[case]))
    for k, x in enumerate(INPUTS):
        theirs(torch.tensor(x))  # training mode: the running statistics move
        mine(kg.tensor(x))
        with torch.no_grad():
            for p in theirs.parameters():
                p.mul_(1.1).add_(0.1 * k)
        with kg.no_grad():
            for p in mine.parameters():
                p.mul_(1.1).add_(0.1 * k)
        their_average.update_parameters(theirs)
        my_average.update_parameters(mine)
    expected = their_average.state_dict()
    got = my_average.state_dict()
    assert list(got) == list(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(
            as_numpy(got[name]), value.numpy(), rtol=1e-6, atol=1e-7, err_msg=name
        )
    assert got["n_averaged"].dtype == kg.int64 and int(got["n_averaged"]) == 4
    x = kg.tensor(INPUTS[0])
    my_average.eval()
    their_average.eval()
    np.testing.assert_allclose(
        as_numpy(my_average(x)),
        their_average(torch.tensor(INPUTS[0])).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_swa_average_on_every_backend(device):
    """Three updates of a tiny layer: the equal-weight mean of the three snapshots (the
    first update copies), on the averaged copy's device; the model is untouched."""
    model = kg.nn.Linear(2, 1).to(device)
    average = swa_utils.AveragedModel(model)
    snapshots = []
    for k in range(3):
        with kg.no_grad():
            model.weight.add_(float(k + 1))
        snapshots.append(as_numpy(model.weight).copy())
        average.update_parameters(model)
    np.testing.assert_allclose(
        as_numpy(average.module.weight), np.mean(snapshots, axis=0), rtol=1e-6
    )
    assert average.module.weight.device == model.weight.device
    assert average.module.weight is not model.weight
    np.testing.assert_array_equal(as_numpy(model.weight), snapshots[-1])
    assert int(average.n_averaged.item()) == 3


SCHEDULES = [
    {"swa_lr": 0.05},
    {"swa_lr": [0.05, 0.01], "anneal_epochs": 3, "anneal_strategy": "linear"},
    {"swa_lr": 0.02, "anneal_epochs": 0},
]


@pytest.mark.torch
@pytest.mark.parametrize("options", SCHEDULES, ids=["cos", "linear-per-group", "no-anneal"])
def test_swalr_rates_are_pytorchs(options):
    torch = pytest.importorskip("torch")
    rates = []
    for library, module in ((torch, torch.optim.swa_utils), (kg, swa_utils)):
        a, b = library.nn.Parameter(library.zeros(2)), library.nn.Parameter(library.zeros(2))
        optimizer = library.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.3}], lr=0.5)
        schedule = module.SWALR(optimizer, **options)
        seen = []
        for _ in range(12):
            seen.append([g["lr"] for g in optimizer.param_groups] + schedule.get_last_lr())
            optimizer.step()
            schedule.step()
        rates.append(np.array(seen))
        state = schedule.state_dict()
    np.testing.assert_allclose(rates[1], rates[0], rtol=1e-12)
    # a state_dict restores the schedule (and its annealing function)
    a, b = kg.nn.Parameter(kg.zeros(2)), kg.nn.Parameter(kg.zeros(2))
    optimizer = kg.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.5)
    restored = swa_utils.SWALR(optimizer, swa_lr=1.0, anneal_strategy="linear")
    restored.load_state_dict(state)
    assert restored._anneal_strategy == options.get("anneal_strategy", "cos")
    assert restored.anneal_func is getattr(
        restored, "_cosine_anneal" if restored._anneal_strategy == "cos" else "_linear_anneal"
    )
    assert "anneal_func" not in state and "optimizer" not in state


@pytest.mark.torch
def test_update_bn_matches_pytorch():
    torch = pytest.importorskip("torch")
    theirs, mine = _models(torch)
    theirs.eval()
    mine.eval()
    loader = [(x, 0) for x in INPUTS[:3]]
    torch.optim.swa_utils.update_bn([(torch.tensor(x), y) for x, y in loader], theirs)
    swa_utils.update_bn([(kg.tensor(x), y) for x, y in loader], mine)
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(
            as_numpy(mine.state_dict()[name]), value.numpy(), rtol=1e-5, atol=1e-6, err_msg=name
        )
    assert not mine.training and mine[1].momentum == 0.3  # both restored
    # plain tensors (not pairs) work too, and a model without batch norm is left alone
    swa_utils.update_bn([kg.tensor(x) for x in INPUTS[:3]], mine)
    np.testing.assert_allclose(
        as_numpy(mine[1].running_mean), theirs[1].running_mean.numpy(), rtol=1e-5, atol=1e-6
    )
    plain = kg.nn.Linear(3, 2)
    swa_utils.update_bn([kg.tensor(INPUTS[0])], plain)
    assert plain.training


@pytest.mark.torch
def test_signatures_and_errors_are_pytorchs():
    torch = pytest.importorskip("torch")
    theirs = torch.optim.swa_utils
    assert set(swa_utils.__all__) == set(theirs.__all__)
    for name in theirs.__all__:
        mine, other = getattr(swa_utils, name), getattr(theirs, name)
        for method in ("__init__", "update_parameters", "step", "get_lr"):
            if isinstance(other, type) and not hasattr(other, method):
                continue
            if isinstance(other, type):
                mine_fn, other_fn = getattr(mine, method, None), getattr(other, method)
                if method != "__init__" and other_fn is getattr(object, method, None):
                    continue
            else:
                mine_fn, other_fn = mine, other
            got = [
                (p.name, p.kind, p.default) for p in inspect.signature(mine_fn).parameters.values()
            ]
            expected = [
                (p.name, p.kind, p.default) for p in inspect.signature(other_fn).parameters.values()
            ]
            assert got == expected, (name, method)
            if not isinstance(other, type):
                break
    for bad in (-0.1, 1.5):
        for module in (theirs, swa_utils):
            with pytest.raises(ValueError, match="Invalid decay value"):
                module.get_ema_avg_fn(bad)
            with pytest.raises(ValueError, match="Invalid decay value"):
                module.get_ema_multi_avg_fn(bad)
    linear = kg.nn.Linear(2, 1)
    with pytest.raises(AssertionError, match="only one of avg_fn and multi_avg_fn"):
        swa_utils.AveragedModel(
            linear, avg_fn=swa_utils.get_swa_avg_fn(), multi_avg_fn=swa_utils.get_swa_multi_avg_fn()
        )
    optimizer = kg.optim.SGD(linear.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        swa_utils.SWALR(optimizer, swa_lr=0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs"):
        swa_utils.SWALR(optimizer, swa_lr=0.1, anneal_epochs=-1)
    with pytest.raises(ValueError):
        swa_utils.SWALR(optimizer, swa_lr=[0.1, 0.2])
    assert kg.optim.swa_utils is swa_utils


@pytest.mark.torch
def test_pytorchs_swa_recipe_gives_pytorchs_model():
    """The recipe of PyTorch's swa_utils documentation (a cosine schedule, then SWALR
    and averaging from epoch ``swa_start``, update_bn over the loader at the end) run
    by both libraries from the same weights: the same averaged model."""
    torch = pytest.importorskip("torch")
    theirs, mine = _models(torch)
    targets = [RNG.integers(0, 2, 5) for _ in INPUTS]
    outputs = []
    for library, model in ((torch, theirs), (kg, mine)):
        loader = [(library.tensor(x), library.tensor(t)) for x, t in zip(INPUTS, targets)]
        optimizer = library.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        swa_model = library.optim.swa_utils.AveragedModel(model)
        scheduler = library.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=6)
        swa_scheduler = library.optim.swa_utils.SWALR(optimizer, swa_lr=0.05, anneal_epochs=2)
        for epoch in range(6):
            for x, t in loader:
                optimizer.zero_grad()
                library.nn.functional.cross_entropy(model(x), t).backward()
                optimizer.step()
            if epoch >= 2:
                swa_model.update_parameters(model)
                swa_scheduler.step()
            else:
                scheduler.step()
        library.optim.swa_utils.update_bn(loader, swa_model)
        swa_model.eval()
        outputs.append(swa_model(loader[0][0]).detach().numpy())
    np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-4, atol=1e-5)
