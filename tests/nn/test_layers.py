"""Layers against NumPy references (forward values, and input and parameter gradients by
central differences of the reference) and against PyTorch's modules (weights copied
across) where it is installed, initialisation statistics, and mode-dependent behaviour
(dropout, batch norm)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from tests.helpers import as_numpy, assert_close, numerical_grad
from tests.nn import reference as ref

RNG = np.random.default_rng(7)


def copy_parameters(source, target) -> None:
    """Copy a torch module's parameters and buffers into a kernelgrad module."""
    state = {name: value.detach().numpy().copy() for name, value in source.state_dict().items()}
    target.load_state_dict(state)


def randomise_parameters(module: nn.Module) -> None:
    """Random parameter values (not the initial ones: LayerNorm's are ones and zeros)."""
    with kg.no_grad():
        for p in module.parameters():
            p.copy_(kg.tensor(RNG.uniform(0.5, 1.5, p.shape) * RNG.choice([-1, 1], p.shape)))


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
    mine_parameters = list(mine.named_parameters())
    their_parameters = list(theirs.named_parameters())
    assert [name for name, _ in mine_parameters] == [name for name, _ in their_parameters]
    for (_, p), (_, q) in zip(mine_parameters, their_parameters, strict=True):
        assert_close(p.grad, q.grad.numpy(), rtol=rtol, atol=atol)


def run_numpy(mine, numpy_fn, x: np.ndarray, device, rtol=1e-4, atol=1e-5):
    """Forward and backward through the module; compare its output with
    ``numpy_fn(x, **parameters)`` and the input and parameter gradients with central
    differences of ``numpy_fn`` (all in float64)."""
    mine.zero_grad()
    parameters = dict(mine.named_parameters())
    names = list(parameters)
    values = [as_numpy(p).astype(np.float64) for p in parameters.values()]
    kx = kg.tensor(x, device=device, requires_grad=True)
    out = mine(kx)
    seed = RNG.standard_normal(out.shape)
    out.backward(kg.tensor(seed, dtype=out.dtype, device=device))

    def reference(x_values, *parameter_values):
        return numpy_fn(x_values, **dict(zip(names, parameter_values, strict=True)))

    assert_close(out, reference(x.astype(np.float64), *values), rtol=rtol, atol=atol)
    expected = numerical_grad(
        lambda *arrays: float((reference(*arrays) * seed).sum()), [x.astype(np.float64), *values]
    )
    assert_close(kx.grad, expected[0], rtol=rtol, atol=atol)
    for name, p, want in zip(names, parameters.values(), expected[1:], strict=True):
        assert p.grad is not None, f"{name} got no gradient"
        np.testing.assert_allclose(as_numpy(p.grad), want, rtol=rtol, atol=atol, err_msg=name)


# (id, constructor called with kg.nn or torch.nn, NumPy reference, input shape)
LAYERS = [
    ("linear", lambda m: m.Linear(5, 3), ref.linear, (4, 5)),
    ("linear-no-bias", lambda m: m.Linear(5, 3, bias=False), ref.linear, (2, 4, 5)),
    (
        "conv2d",
        lambda m: m.Conv2d(3, 4, 3, padding=1),
        lambda x, weight, bias: ref.conv2d(x, weight, bias, padding=1),
        (2, 3, 5, 6),
    ),
    (
        "conv2d-groups",
        lambda m: m.Conv2d(4, 6, (3, 2), stride=(2, 1), dilation=(1, 2), groups=2, bias=False),
        lambda x, weight: ref.conv2d(x, weight, None, (2, 1), 0, (1, 2), 2),
        (2, 4, 7, 6),
    ),
    (
        "conv2d-same",
        lambda m: m.Conv2d(2, 2, 3, padding="same"),
        lambda x, weight, bias: ref.conv2d(x, weight, bias, padding="same"),
        (1, 2, 5, 5),
    ),
    (
        "conv1d",
        lambda m: m.Conv1d(3, 2, 3, stride=2, padding=1),
        lambda x, weight, bias: ref.conv1d(x, weight, bias, stride=2, padding=1),
        (2, 3, 8),
    ),
    ("max_pool2d", lambda m: m.MaxPool2d(2), lambda x: ref.max_pool2d(x, 2), (2, 3, 6, 6)),
    (
        "max_pool2d-padded",
        lambda m: m.MaxPool2d(3, 2, 1),
        lambda x: ref.max_pool2d(x, 3, 2, 1),
        (2, 2, 7, 7),
    ),
    ("avg_pool2d", lambda m: m.AvgPool2d(2, 1), lambda x: ref.avg_pool2d(x, 2, 1), (1, 2, 5, 4)),
    (
        "adaptive_avg_pool2d",
        lambda m: m.AdaptiveAvgPool2d((2, 2)),
        lambda x: ref.adaptive_avg_pool2d(x, (2, 2)),
        (2, 3, 5, 4),
    ),
    ("max_pool1d", lambda m: m.MaxPool1d(2), lambda x: ref.max_pool1d(x, 2), (2, 3, 8)),
    (
        "avg_pool1d",
        lambda m: m.AvgPool1d(3, 1, 1),
        lambda x: ref.avg_pool1d(x, 3, 1, 1),
        (2, 3, 8),
    ),
    (
        "layer_norm",
        lambda m: m.LayerNorm((3, 4)),
        lambda x, weight, bias: ref.layer_norm(x, (3, 4), weight, bias),
        (2, 3, 4),
    ),
    ("flatten", lambda m: m.Flatten(), lambda x: x.reshape(x.shape[0], -1), (2, 3, 4)),
    ("unflatten", lambda m: m.Unflatten(1, (2, 3)), lambda x: x.reshape(4, 2, 3), (4, 6)),
    ("gelu", lambda m: m.GELU(), ref.gelu, (3, 4)),
    ("leaky_relu", lambda m: m.LeakyReLU(0.1), lambda x: ref.leaky_relu(x, 0.1), (3, 4)),
    ("log_softmax", lambda m: m.LogSoftmax(1), lambda x: ref.log_softmax(x, 1), (3, 4)),
    ("softmax", lambda m: m.Softmax(0), lambda x: ref.softmax(x, 0), (3, 4)),
    ("silu", lambda m: m.SiLU(), ref.silu, (3, 4)),
    ("softplus", lambda m: m.Softplus(2.0), lambda x: ref.softplus(x, 2.0), (3, 4)),
    ("tanh", lambda m: m.Tanh(), np.tanh, (3, 4)),
    ("sigmoid", lambda m: m.Sigmoid(), ref.sigmoid, (3, 4)),
]


@pytest.mark.parametrize(
    "make, numpy_fn, shape", [case[1:] for case in LAYERS], ids=[case[0] for case in LAYERS]
)
def test_layer_matches_references(make, numpy_fn, shape, device, reference):
    mine = make(nn).to(device)
    x = RNG.standard_normal(shape).astype(np.float32)
    if reference == "torch":
        torch = pytest.importorskip("torch")
        theirs = make(torch.nn)
        copy_parameters(theirs, mine)
        run_both(mine, theirs, x, device)
    else:
        randomise_parameters(mine)
        run_numpy(mine, numpy_fn, x, device)


@pytest.mark.parametrize("dims", [2, 3, 4])
def test_batch_norm_matches_references_over_training_and_evaluation(dims, device, reference):
    shape = {2: (6, 3), 3: (4, 3, 5), 4: (4, 3, 2, 3)}[dims]
    kind = "BatchNorm2d" if dims == 4 else "BatchNorm1d"
    mine = getattr(nn, kind)(3, momentum=0.2).to(device)
    batches = [RNG.standard_normal(shape).astype(np.float32) * 2 + 1 for _ in range(2)]
    evaluation = RNG.standard_normal(shape).astype(np.float32)
    if reference == "torch":
        torch = pytest.importorskip("torch")
        theirs = getattr(torch.nn, kind)(3, momentum=0.2)
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            theirs.bias.uniform_(-0.5, 0.5)
        copy_parameters(theirs, mine)
        for batch in batches:
            run_both(mine, theirs, batch, device)
        expected_mean, expected_var = theirs.running_mean.numpy(), theirs.running_var.numpy()
    else:
        randomise_parameters(mine)
        for batch in batches:
            run_numpy(mine, ref.batch_norm_training, batch, device)
        expected_mean, expected_var = ref.running_statistics(
            [b.astype(np.float64) for b in batches], 0.2, 3
        )
    assert_close(mine.running_mean, expected_mean, rtol=1e-5)
    assert_close(mine.running_var, expected_var, rtol=1e-5)
    assert mine.num_batches_tracked.item() == 2
    mine.eval()
    if reference == "torch":
        theirs.eval()
        run_both(mine, theirs, evaluation, device)
    else:
        run_numpy(
            mine,
            lambda x, weight, bias: ref.batch_norm(x, expected_mean, expected_var, weight, bias),
            evaluation,
            device,
        )
    # evaluation leaves the running statistics alone
    assert_close(mine.running_mean, expected_mean, rtol=1e-5)
    assert mine.num_batches_tracked.item() == 2


def test_batch_norm_cumulative_average_and_no_running_stats(device):
    bn = nn.BatchNorm1d(2, momentum=None).to(device)
    batches = [RNG.standard_normal((5, 2)).astype(np.float32) for _ in range(3)]
    for batch in batches:
        bn(kg.tensor(batch, device=device))
    expected_mean, expected_var = ref.running_statistics(
        [b.astype(np.float64) for b in batches], None, 2
    )
    assert_close(bn.running_mean, expected_mean, rtol=1e-5, atol=1e-6)
    assert_close(bn.running_var, expected_var, rtol=1e-5, atol=1e-6)
    plain = nn.BatchNorm2d(2, affine=False, track_running_stats=False).to(device)
    assert list(plain.parameters()) == [] and plain.state_dict() == {}
    values = RNG.standard_normal((3, 2, 2, 2)).astype(np.float32)
    out = plain.eval()(kg.tensor(values, device=device))  # batch statistics even in eval mode
    assert_close(out, ref.batch_norm_training(values.astype(np.float64)), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="channels"):
        bn(kg.zeros(3, 4, device=device))


def test_embedding_matches_references(device, reference):
    mine = nn.Embedding(7, 3, padding_idx=0).to(device)
    assert as_numpy(mine.weight)[0].tolist() == [0.0, 0.0, 0.0]
    index = np.array([[0, 3, 6], [1, 0, 3]])
    if reference == "torch":
        torch = pytest.importorskip("torch")
        theirs = torch.nn.Embedding(7, 3, padding_idx=0)
        copy_parameters(theirs, mine)
        run_both(mine, theirs, index, device)
        return
    table = as_numpy(mine.weight).astype(np.float64)
    out = mine(kg.tensor(index, device=device))
    assert_close(out, table[index])
    seed = RNG.standard_normal((2, 3, 3))
    out.backward(kg.tensor(seed, dtype=kg.float32, device=device))
    assert_close(mine.weight.grad, ref.embedding_grad(index, 7, seed, padding_idx=0), rtol=1e-5)


def test_dropout_module_obeys_the_mode(device):
    drop = nn.Dropout(0.5).to(device)
    x = kg.ones(1000, device=device)
    values = as_numpy(drop(x))
    assert 0.4 < (values == 0).mean() < 0.6
    assert set(values.tolist()) == {0.0, 2.0}  # the kept ones scaled by 1 / (1 - p)
    drop.eval()
    assert drop(x) is x
    assert repr(drop) == "Dropout(p=0.5, inplace=False)"  # as PyTorch


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
    a, b = kg.ones(3, device=device), kg.zeros(3, device=device)
    assert nn.MSELoss()(a, b).item() == 1.0
    assert nn.L1Loss(reduction="sum")(a, b).item() == 3.0
    half = kg.full((3,), 0.5, device=device)
    assert nn.BCELoss()(half, a).item() == pytest.approx(math.log(2), rel=1e-6)
    assert nn.BCEWithLogitsLoss()(b, a).item() == pytest.approx(math.log(2), rel=1e-6)
    logits = kg.zeros(2, 4, device=device)  # uniform: -log(1/4) per sample
    target = kg.tensor([1, 3], device=device)
    assert nn.CrossEntropyLoss()(logits, target).item() == pytest.approx(math.log(4), rel=1e-6)
    assert nn.NLLLoss()(logits.log_softmax(1), target).item() == pytest.approx(
        math.log(4), rel=1e-6
    )


LOGITS = RNG.standard_normal((4, 3)).astype(np.float32)
TARGET = np.array([0, 2, 1, 2])
CLASS_WEIGHT = np.array([0.5, 2.0, 1.5], dtype=np.float32)
PROBABILITIES = RNG.uniform(0.1, 0.9, (4, 3)).astype(np.float32)
VALUES = RNG.standard_normal((4, 3)).astype(np.float32)


# (loss module, its input, its target, the reference of its value); the options are not
# the defaults, so the test also checks that the module passes them on
LOSS_MODULES = {
    "cross_entropy": (
        lambda w: nn.CrossEntropyLoss(weight=w, ignore_index=1, label_smoothing=0.1),
        LOGITS,
        TARGET,
        lambda: ref.cross_entropy(
            LOGITS.astype(np.float64), TARGET, CLASS_WEIGHT, ignore_index=1, label_smoothing=0.1
        ),
    ),
    "nll": (
        lambda w: nn.NLLLoss(weight=w, reduction="sum"),
        LOGITS,
        TARGET,
        lambda: ref.nll_loss(LOGITS.astype(np.float64), TARGET, CLASS_WEIGHT, reduction="sum"),
    ),
    "mse": (
        lambda w: nn.MSELoss(),
        VALUES,
        PROBABILITIES,
        lambda: ref.mse_loss(VALUES, PROBABILITIES),
    ),
    "l1": (
        lambda w: nn.L1Loss(reduction="sum"),
        VALUES,
        PROBABILITIES,
        lambda: ref.l1_loss(VALUES, PROBABILITIES, reduction="sum"),
    ),
    "bce": (
        lambda w: nn.BCELoss(weight=w),
        PROBABILITIES,
        PROBABILITIES[::-1].copy(),
        lambda: ref.binary_cross_entropy(
            PROBABILITIES.astype(np.float64), PROBABILITIES[::-1], CLASS_WEIGHT
        ),
    ),
    "bce_with_logits": (
        lambda w: nn.BCEWithLogitsLoss(pos_weight=w, reduction="none"),
        VALUES,
        PROBABILITIES,
        lambda: ref.binary_cross_entropy_with_logits(
            VALUES.astype(np.float64), PROBABILITIES, reduction="none", pos_weight=CLASS_WEIGHT
        ),
    ),
}


@pytest.mark.parametrize("name", list(LOSS_MODULES))
def test_loss_modules_match_numpy(name, device):
    make, inputs, target, expected = LOSS_MODULES[name]
    module = make(kg.tensor(CLASS_WEIGHT, device=device))
    loss = module(kg.tensor(inputs, device=device), kg.tensor(target, device=device))
    assert_close(loss, expected(), rtol=1e-5, atol=1e-6)


def test_layer_reprs():
    assert repr(nn.Linear(3, 2)) == "Linear(in_features=3, out_features=2, bias=True)"
    assert repr(nn.Conv2d(3, 8, 3, stride=2, bias=False, groups=1)) == (
        "Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), bias=False)"
    )
    assert repr(nn.MaxPool2d(2)) == (
        "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    )
    assert repr(nn.BatchNorm2d(4)) == (  # PyTorch 2.x's, with its bias= flag
        "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
    )
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.Embedding(5, 2, padding_idx=1)) == "Embedding(5, 2, padding_idx=1)"
