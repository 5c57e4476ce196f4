"""Layers against PyTorch's modules (weights copied across), initialisation statistics,
and mode-dependent behaviour (dropout, batch norm)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from tests.helpers import as_numpy, assert_close

RNG = np.random.default_rng(7)


def copy_parameters(source, target) -> None:
    """Copy a torch module's parameters and buffers into a kernelgrad module."""
    state = {name: value.detach().numpy().copy() for name, value in source.state_dict().items()}
    target.load_state_dict(state)


def run_both(mine, theirs, x: np.ndarray, device, rtol=1e-4, atol=1e-5):
    """Forward and backward through both modules; compare outputs, input and
    parameter gradients."""
    torch = pytest.importorskip("torch")
    kx = kg.tensor(x, device=device, requires_grad=x.dtype.kind == "f")
    tx = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    out, expected = mine(kx), theirs(tx)
    assert_close(out, expected.detach().numpy(), rtol=rtol, atol=atol)
    seed = RNG.standard_normal(expected.shape).astype(np.float32)
    out.backward(kg.tensor(seed, device=device))
    expected.backward(torch.tensor(seed))
    if x.dtype.kind == "f":
        assert_close(kx.grad, tx.grad.numpy(), rtol=rtol, atol=atol)
    for (name, p), (_, q) in zip(mine.named_parameters(), theirs.named_parameters()):
        assert_close(p.grad, q.grad.numpy(), rtol=rtol, atol=atol)
        assert name


@pytest.mark.torch
@pytest.mark.parametrize(
    "make",
    [
        lambda t: (nn.Linear(5, 3), t.nn.Linear(5, 3), (4, 5)),
        lambda t: (nn.Linear(5, 3, bias=False), t.nn.Linear(5, 3, bias=False), (2, 4, 5)),
        lambda t: (nn.Conv2d(3, 4, 3, padding=1), t.nn.Conv2d(3, 4, 3, padding=1), (2, 3, 5, 6)),
        lambda t: (
            nn.Conv2d(4, 6, (3, 2), stride=(2, 1), dilation=(1, 2), groups=2, bias=False),
            t.nn.Conv2d(4, 6, (3, 2), stride=(2, 1), dilation=(1, 2), groups=2, bias=False),
            (2, 4, 7, 6),
        ),
        lambda t: (
            nn.Conv2d(2, 2, 3, padding="same"), t.nn.Conv2d(2, 2, 3, padding="same"), (1, 2, 5, 5)
        ),
        lambda t: (
            nn.Conv1d(3, 2, 3, stride=2, padding=1),
            t.nn.Conv1d(3, 2, 3, stride=2, padding=1),
            (2, 3, 8),
        ),
        lambda t: (nn.MaxPool2d(2), t.nn.MaxPool2d(2), (2, 3, 6, 6)),
        lambda t: (nn.MaxPool2d(3, 2, 1), t.nn.MaxPool2d(3, 2, 1), (2, 2, 7, 7)),
        lambda t: (nn.AvgPool2d(2, 1), t.nn.AvgPool2d(2, 1), (1, 2, 5, 4)),
        lambda t: (nn.AdaptiveAvgPool2d((2, 2)), t.nn.AdaptiveAvgPool2d((2, 2)), (2, 3, 5, 4)),
        lambda t: (nn.MaxPool1d(2), t.nn.MaxPool1d(2), (2, 3, 8)),
        lambda t: (nn.AvgPool1d(3, 1, 1), t.nn.AvgPool1d(3, 1, 1), (2, 3, 8)),
        lambda t: (nn.LayerNorm((3, 4)), t.nn.LayerNorm((3, 4)), (2, 3, 4)),
        lambda t: (nn.Flatten(), t.nn.Flatten(), (2, 3, 4)),
        lambda t: (nn.Unflatten(1, (2, 3)), t.nn.Unflatten(1, (2, 3)), (4, 6)),
        lambda t: (nn.GELU(), t.nn.GELU(), (3, 4)),
        lambda t: (nn.LeakyReLU(0.1), t.nn.LeakyReLU(0.1), (3, 4)),
        lambda t: (nn.LogSoftmax(1), t.nn.LogSoftmax(1), (3, 4)),
        lambda t: (nn.Softmax(0), t.nn.Softmax(0), (3, 4)),
        lambda t: (nn.SiLU(), t.nn.SiLU(), (3, 4)),
        lambda t: (nn.Softplus(2.0), t.nn.Softplus(2.0), (3, 4)),
        lambda t: (nn.Tanh(), t.nn.Tanh(), (3, 4)),
        lambda t: (nn.Sigmoid(), t.nn.Sigmoid(), (3, 4)),
    ],
)  # fmt: skip
def test_layer_matches_torch(make, device):
    torch = pytest.importorskip("torch")
    mine, theirs, shape = make(torch)
    mine.to(device)
    copy_parameters(theirs, mine)
    run_both(mine, theirs, RNG.standard_normal(shape).astype(np.float32), device)


@pytest.mark.torch
@pytest.mark.parametrize("dims", [2, 3, 4])
def test_batch_norm_matches_torch_over_training_and_evaluation(dims, device):
    torch = pytest.importorskip("torch")
    shape = {2: (6, 3), 3: (4, 3, 5), 4: (4, 3, 2, 3)}[dims]
    kind = "BatchNorm2d" if dims == 4 else "BatchNorm1d"
    mine = getattr(nn, kind)(3, momentum=0.2).to(device)
    theirs = getattr(torch.nn, kind)(3, momentum=0.2)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
        theirs.bias.uniform_(-0.5, 0.5)
    copy_parameters(theirs, mine)
    for _ in range(2):
        run_both(mine, theirs, RNG.standard_normal(shape).astype(np.float32) * 2 + 1, device)
    for name in ("running_mean", "running_var"):
        assert_close(getattr(mine, name), getattr(theirs, name).numpy(), rtol=1e-5)
    assert mine.num_batches_tracked.item() == 2
    mine.eval()
    theirs.eval()
    run_both(mine, theirs, RNG.standard_normal(shape).astype(np.float32), device)


def test_batch_norm_cumulative_average_and_no_running_stats(device):
    bn = nn.BatchNorm1d(2, momentum=None).to(device)
    batches = [RNG.standard_normal((5, 2)).astype(np.float32) for _ in range(3)]
    for batch in batches:
        bn(kg.tensor(batch, device=device))
    expected = np.mean([b.mean(axis=0) for b in batches], axis=0)
    assert_close(bn.running_mean, expected, rtol=1e-5, atol=1e-6)
    plain = nn.BatchNorm2d(2, affine=False, track_running_stats=False).to(device)
    assert list(plain.parameters()) == [] and plain.state_dict() == {}
    out = plain.eval()(
        kg.tensor(RNG.standard_normal((3, 2, 2, 2)), dtype=kg.float32, device=device)
    )
    assert_close(out.mean((0, 2, 3)), [0.0, 0.0], atol=1e-5)
    with pytest.raises(ValueError, match="channels"):
        bn(kg.zeros(3, 4, device=device))


@pytest.mark.torch
def test_embedding_matches_torch(device):
    torch = pytest.importorskip("torch")
    mine, theirs = (
        nn.Embedding(7, 3, padding_idx=0).to(device),
        torch.nn.Embedding(7, 3, padding_idx=0),
    )
    assert as_numpy(mine.weight)[0].tolist() == [0.0, 0.0, 0.0]
    copy_parameters(theirs, mine)
    run_both(mine, theirs, np.array([[0, 3, 6], [1, 0, 3]]), device)


def test_dropout_module_obeys_the_mode(device):
    drop = nn.Dropout(0.5).to(device)
    x = kg.ones(1000, device=device)
    assert (as_numpy(drop(x)) == 0).any()
    drop.eval()
    assert drop(x) is x
    assert repr(drop) == "Dropout(p=0.5)"


@pytest.mark.parametrize(
    "initialiser, shape, expected_std",
    [
        (lambda w: nn.init.kaiming_uniform_(w, nonlinearity="relu"), (200, 100), 0.1414),
        (lambda w: nn.init.kaiming_normal_(w, mode="fan_out"), (200, 100), 0.1),
        (lambda w: nn.init.xavier_uniform_(w), (200, 100), math.sqrt(2 / 300)),
        (lambda w: nn.init.xavier_normal_(w, gain=2.0), (200, 100), 2 * math.sqrt(2 / 300)),
        (lambda w: nn.init.normal_(w, 1.0, 0.5), (100, 100), 0.5),
        (lambda w: nn.init.uniform_(w, -1.0, 1.0), (100, 100), 1 / math.sqrt(3)),
        (lambda w: nn.init.trunc_normal_(w, std=1.0, a=-10.0, b=10.0), (100, 100), 1.0),
    ],
)  # fmt: skip
def test_initialisers_have_the_right_spread(initialiser, shape, expected_std):
    kg.manual_seed(3)
    weight = kg.empty(*shape)
    assert initialiser(weight) is weight
    std = float(as_numpy(weight).std())
    assert abs(std - expected_std) < 0.05 * expected_std


def test_initialiser_details():
    w = kg.empty(10, 4, 3, 3)
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))  # PyTorch's default: bound 1/sqrt(fan_in)
    assert float(as_numpy(w).max()) <= 1 / math.sqrt(36) + 1e-7
    nn.init.trunc_normal_(w, a=-0.5, b=0.5)
    assert float(np.abs(as_numpy(w)).max()) <= 0.5
    nn.init.constant_(w, 0.25)
    assert (as_numpy(w) == 0.25).all()
    nn.init.zeros_(w)
    nn.init.ones_(w)
    assert (as_numpy(w) == 1).all()
    assert nn.init.calculate_gain("tanh") == 5 / 3
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError):
        nn.init.calculate_gain("unknown")
    with pytest.raises(ValueError):
        nn.init.xavier_uniform_(kg.empty(3))
    parameter = nn.Parameter(kg.zeros(3, 3))
    nn.init.normal_(parameter)  # works on parameters that require grad
    assert parameter.requires_grad and parameter.is_leaf


def test_default_initialisation_matches_pytorch_bounds():
    kg.manual_seed(0)
    layer = nn.Linear(50, 400)
    bound = 1 / math.sqrt(50)
    for tensor in (layer.weight, layer.bias):
        values = as_numpy(tensor)
        assert values.min() >= -bound and values.max() <= bound
        assert values.max() > 0.9 * bound  # uniform over the whole range
    conv = nn.Conv2d(3, 8, 5)
    assert float(np.abs(as_numpy(conv.weight)).max()) <= 1 / math.sqrt(75)


@pytest.mark.parametrize("in_features, out_features", [(0, 3), (3, 0), (0, 0)])
def test_zero_size_linear_layers_behave_as_in_pytorch(in_features, out_features):
    """PyTorch allows Linear(0, n): initialising a zero-element weight warns and does
    nothing, the bias bound 1/sqrt(0) becomes 0, and the output is the bias."""
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        layer = nn.Linear(in_features, out_features)
    assert layer.weight.shape == (out_features, in_features)
    if in_features == 0:
        assert (as_numpy(layer.bias) == 0).all()
    x = kg.ones(5, in_features, requires_grad=True)
    out = layer(x)
    assert out.shape == (5, out_features) and (as_numpy(out) == 0).all()
    out.sum().backward()
    assert layer.weight.grad.shape == (out_features, in_features)
    assert as_numpy(layer.bias.grad).tolist() == [5.0] * out_features
    with pytest.warns(UserWarning, match="zero-element"):
        nn.Conv2d(0, 2, 3)
    with pytest.warns(UserWarning, match="zero-element"):
        assert nn.init.kaiming_normal_(kg.empty(3, 0)).shape == (3, 0)


@pytest.mark.torch
def test_zero_size_linear_layers_match_torch():
    torch = pytest.importorskip("torch")
    for in_features, out_features in ((0, 3), (3, 0)):
        with pytest.warns(UserWarning):
            mine = nn.Linear(in_features, out_features)
        with pytest.warns(UserWarning):
            theirs = torch.nn.Linear(in_features, out_features)
        copy_parameters(theirs, mine)
        run_both(mine, theirs, RNG.standard_normal((4, in_features)).astype(np.float32), "cpu")


def test_loss_modules(device):
    logits = kg.tensor(RNG.standard_normal((4, 3)), dtype=kg.float32, device=device)
    target = kg.tensor([0, 2, 1, 2], device=device)
    expected = kg.nn.functional.cross_entropy(logits, target, label_smoothing=0.1).item()
    assert nn.CrossEntropyLoss(label_smoothing=0.1)(logits, target).item() == pytest.approx(
        expected
    )
    log_probs = logits.log_softmax(1)
    assert nn.NLLLoss()(log_probs, target).item() == pytest.approx(expected, rel=0.2)
    a, b = kg.ones(3, device=device), kg.zeros(3, device=device)
    assert nn.MSELoss()(a, b).item() == 1.0
    assert nn.L1Loss(reduction="sum")(a, b).item() == 3.0
    half = kg.full((3,), 0.5, device=device)
    assert nn.BCELoss()(half, a).item() == pytest.approx(math.log(2), rel=1e-6)
    assert nn.BCEWithLogitsLoss()(b, a).item() == pytest.approx(math.log(2), rel=1e-6)


def test_layer_reprs():
    assert repr(nn.Linear(3, 2)) == "Linear(in_features=3, out_features=2, bias=True)"
    assert repr(nn.Conv2d(3, 8, 3, stride=2, bias=False, groups=1)) == (
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), bias=False)"
    )
    assert repr(nn.MaxPool2d(2)) == (
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    )
    assert repr(nn.BatchNorm2d(4)) == (
        "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    )
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.Embedding(5, 2, padding_idx=1)) == "Embedding(5, 2, padding_idx=1)"
