"""Lazy layers (``LazyConv*``, ``LazyConvTranspose*``, ``LazyBatchNorm*``,
``LazyInstanceNorm*``) against PyTorch's: sizes from the first input or a loaded state
dict, the plain layer after it, forward and backward, ``state_dict`` before it."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from tests.helpers import assert_close
from tests.nn.test_layers import copy_parameters, run_both

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(5)

CONVS = [
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 6)),
    ("LazyConv2d", (4, 3), {"stride": 2, "groups": 2}, (1, 4, 5, 5)),
    ("LazyConv3d", (2, 2), {}, (1, 2, 3, 3, 3)),
    ("LazyConvTranspose1d", (3, 3), {"stride": 2}, (2, 2, 4)),
    ("LazyConvTranspose2d", (4, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (1, 2, 3, 3)),
    ("LazyConvTranspose3d", (2, 2), {"stride": 2}, (1, 2, 2, 2, 2)),
]
NORMS = [
    ("LazyBatchNorm1d", {}, (4, 3, 2)),
    ("LazyBatchNorm2d", {"momentum": 0.3}, (2, 3, 2, 2)),
    ("LazyBatchNorm3d", {"affine": False}, (2, 2, 2, 2, 2)),
    ("LazyInstanceNorm1d", {}, (2, 3, 5)),
    ("LazyInstanceNorm2d", {"track_running_stats": False}, (2, 3, 3, 3)),
    ("LazyInstanceNorm3d", {"affine": False}, (2, 2, 2, 2, 3)),
]


@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), CONVS, ids=[c[0] for c in CONVS])
@pytest.mark.parametrize("loaded_first", [False, True])
def test_lazy_convolutions_match_pytorch(device, name, args, kwargs, shape, loaded_first):
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    mine = getattr(nn, name)(*args, **kwargs).to(device)
    assert repr(mine) == repr(theirs)
    assert mine.has_uninitialized_params() and theirs.has_uninitialized_params()
    weight = mine.weight
    optimizer = kg.optim.SGD(mine.parameters(), lr=0.1)  # built before the sizes are known
    x = RNG.standard_normal(shape).astype(np.float32)
    theirs(torch.tensor(x))
    if loaded_first:  # the sizes come from the state dict
        copy_parameters(theirs, mine)
    else:
        mine(kg.tensor(x, device=device))
        copy_parameters(theirs, mine)
    plain = getattr(nn, name[len("Lazy") :])
    assert type(mine) is plain and mine.weight is weight
    assert repr(mine) == repr(theirs) and mine.weight.shape == tuple(theirs.weight.shape)
    run_both(mine, theirs, x, device)
    before = weight.detach().cpu().numpy().copy()
    optimizer.step()  # the optimizer holds the filled parameter
    assert_close(weight, before - 0.1 * theirs.weight.grad.numpy(), 1e-5, 1e-6)


@pytest.mark.parametrize(("name", "kwargs", "shape"), NORMS, ids=[n[0] for n in NORMS])
def test_lazy_normalisation_matches_pytorch(device, name, kwargs, shape):
    theirs = getattr(torch.nn, name)(**kwargs)
    mine = getattr(nn, name)(**kwargs)
    assert repr(mine) == repr(theirs)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    x = RNG.standard_normal(shape).astype(np.float32)
    run_both(mine, theirs, x, device)  # the first call gives the sizes, on the device
    assert type(mine) is getattr(nn, name[len("Lazy") :]) and repr(mine) == repr(theirs)
    run_both(mine, theirs, x * 2 + 1, device)
    for key, value in theirs.state_dict().items():
        assert_close(mine.state_dict()[key], value.numpy(), 1e-5, 1e-6)
    if mine.weight is not None:
        assert mine.weight.device == kg.tensor(0.0, device=device).device
    mine.eval(), theirs.eval()
    run_both(mine, theirs, x, device)


def test_state_dict_before_the_first_call_lists_placeholders():
    for mine, theirs in [
        (nn.LazyConv2d(4, 3), torch.nn.LazyConv2d(4, 3)),
        (nn.LazyConvTranspose1d(2, 3, bias=False), torch.nn.LazyConvTranspose1d(2, 3, bias=False)),
        (nn.LazyBatchNorm1d(), torch.nn.LazyBatchNorm1d()),
        (nn.LazyInstanceNorm3d(affine=False), torch.nn.LazyInstanceNorm3d(affine=False)),
        (nn.LazyLinear(3), torch.nn.LazyLinear(3)),
    ]:
        ours, expected = mine.state_dict(), theirs.state_dict()
        assert list(ours) == list(expected)
        assert [repr(v) for v in ours.values()] == [repr(v) for v in expected.values()]
    placeholder = nn.LazyBatchNorm2d().state_dict()["running_mean"]
    assert isinstance(placeholder, nn.UninitializedBuffer)
    assert isinstance(nn.LazyConv1d(2, 2).weight, nn.UninitializedParameter)
    # a deep copy is still lazy and shares nothing
    layer = nn.LazyConv1d(2, 2)
    twin = copy.deepcopy(layer)
    twin(kg.ones(1, 3, 4))
    assert type(layer) is nn.LazyConv1d and type(twin) is nn.Conv1d
    assert isinstance(layer.weight, nn.UninitializedParameter)


def test_parameters_follow_the_input(device):
    conv = nn.LazyConv1d(2, 3)
    conv(kg.ones(1, 4, 5, dtype=kg.float64, device=device))
    assert conv.weight.dtype == kg.float64 and conv.bias.dtype == kg.float64
    assert conv.weight.device == kg.ones(1, device=device).device
    norm = nn.LazyBatchNorm2d()
    norm(kg.ones(2, 3, 2, 2, dtype=kg.float64, device=device))
    assert norm.running_mean.dtype == kg.float64 and norm.num_batches_tracked.item() == 1
    assert norm.running_var.device == kg.ones(1, device=device).device
    linear = nn.LazyLinear(2)
    linear(kg.ones(1, 3, dtype=kg.float64, device=device))
    assert linear.weight.dtype == kg.float64


def test_lazy_layer_errors():
    with pytest.raises(ValueError, match="groups=2 does not divide"):
        nn.LazyConv2d(4, 3, groups=2)(kg.ones(1, 3, 5, 5))
    with pytest.raises(kg.ShapeError, match="expected a 4-d"):
        nn.LazyConv2d(4, 3)(kg.ones(5))
    with pytest.raises(kg.ShapeError, match="2 or 3-d input"):
        nn.LazyBatchNorm1d()(kg.ones(2, 3, 4, 5))
