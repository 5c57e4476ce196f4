"""Recurrent layers: PyTorch's weights loaded into kernelgrad's layers (state_dict) give
PyTorch's outputs, final states and gradients; shapes and options; a NumPy reference of
the LSTM and GRU equations on the CUDA backend."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ShapeError, UnsupportedError
from tests.helpers import assert_close, check_grad

SEQ, BATCH, FEATURES, HIDDEN = 3, 2, 3, 4


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _numpy_lstm(x, w_ih, w_hh, b_ih, b_hh):
    h = np.zeros((x.shape[1], w_hh.shape[1]))
    c = np.zeros_like(h)
    outputs = []
    for step in x:
        i, f, g, o = np.split(step @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs), h, c


def _numpy_gru(x, w_ih, w_hh, b_ih, b_hh):
    h = np.zeros((x.shape[1], w_hh.shape[1]))
    outputs = []
    for step in x:
        x_r, x_z, x_n = np.split(step @ w_ih.T + b_ih, 3, axis=1)
        h_r, h_z, h_n = np.split(h @ w_hh.T + b_hh, 3, axis=1)
        r, z = _sigmoid(x_r + h_r), _sigmoid(x_z + h_z)
        h = (1 - z) * np.tanh(x_n + r * h_n) + z * h
        outputs.append(h)
    return np.stack(outputs), h


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_one_layer_matches_the_numpy_equations(kind, device):
    kg.manual_seed(0)
    layer = getattr(kg.nn, kind)(FEATURES, HIDDEN).to(device)
    x = np.random.default_rng(0).standard_normal((SEQ, BATCH, FEATURES)).astype(np.float32)
    weights = [p.detach().cpu().numpy().astype(np.float64) for p in layer.parameters()]
    output, state = layer(kg.tensor(x, device=device))
    if kind == "LSTM":
        expected, h, c = _numpy_lstm(x.astype(np.float64), *weights)
        assert_close(state[1][0], c, rtol=1e-5, atol=1e-6)
        state = state[0]
    else:
        expected, h = _numpy_gru(x.astype(np.float64), *weights)
    assert_close(output, expected, rtol=1e-5, atol=1e-6)
    assert_close(state[0], h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_gradients_match_central_differences(kind, device):
    kg.manual_seed(1)
    layer = getattr(kg.nn, kind)(2, 3, dtype=kg.float64).to(device)
    x = np.random.default_rng(1).standard_normal((2, 2, 2))

    def run(values):
        output = layer(values)[0]
        return output

    check_grad(run, x, device=device)


def test_parameters_and_shapes_follow_pytorch():
    lstm = kg.nn.LSTM(FEATURES, HIDDEN, num_layers=2, bidirectional=True, batch_first=True)
    names = [name for name, _ in lstm.named_parameters()]
    assert names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert names[4] == "weight_ih_l0_reverse" and len(names) == 16
    assert lstm.weight_ih_l1.shape == (4 * HIDDEN, 2 * HIDDEN)
    bound = 1 / np.sqrt(HIDDEN)
    assert all(float(p.abs().amax().item()) <= bound for p in lstm.parameters())
    output, (h, c) = lstm(kg.randn(BATCH, SEQ, FEATURES))
    assert output.shape == (BATCH, SEQ, 2 * HIDDEN)
    assert h.shape == c.shape == (4, BATCH, HIDDEN)
    output, h = kg.nn.GRU(FEATURES, HIDDEN, bias=False)(kg.randn(SEQ, FEATURES))  # unbatched
    assert output.shape == (SEQ, HIDDEN) and h.shape == (1, HIDDEN)
    assert kg.nn.GRUCell(FEATURES, HIDDEN)(kg.randn(BATCH, FEATURES)).shape == (BATCH, HIDDEN)
    with pytest.raises(UnsupportedError, match="proj_size"):
        kg.nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ShapeError, match="LSTM: the input has 5 features"):
        kg.nn.LSTM(3, 4)(kg.randn(2, 2, 5))
    with pytest.raises(ShapeError, match=r"h_0 must have shape \(1, 2, 4\)"):
        kg.nn.LSTM(3, 4)(kg.randn(2, 2, 3), (kg.zeros(2, 2, 4), kg.zeros(1, 2, 4)))


def _copy_state(torch_module, ours):
    ours.load_state_dict(
        {k: kg.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()}
    )


@pytest.mark.torch
@pytest.mark.parametrize(
    "kind, options",
    [
        ("LSTM", {"num_layers": 2, "bidirectional": True}),
        ("LSTM", {"batch_first": True}),
        ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
        ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
        ("RNN", {"bias": False, "bidirectional": True}),
    ],
)
def test_layers_with_pytorch_weights_match_pytorch(kind, options):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(FEATURES, HIDDEN, **options)
    ours = getattr(kg.nn, kind)(FEATURES, HIDDEN, **options)
    _copy_state(theirs, ours)
    rng = np.random.default_rng(0)
    shape = (BATCH, SEQ, FEATURES) if options.get("batch_first") else (SEQ, BATCH, FEATURES)
    x = rng.standard_normal(shape).astype(np.float32)
    states = (
        2 * options.get("num_layers", 1)
        if options.get("bidirectional")
        else options.get("num_layers", 1)
    )
    h0 = rng.standard_normal((states, BATCH, HIDDEN)).astype(np.float32)
    x_theirs = torch.tensor(x, requires_grad=True)
    x_ours = kg.tensor(x, requires_grad=True)
    if kind == "LSTM":
        c0 = rng.standard_normal(h0.shape).astype(np.float32)
        out_t, (h_t, c_t) = theirs(x_theirs, (torch.tensor(h0), torch.tensor(c0)))
        out_k, (h_k, c_k) = ours(x_ours, (kg.tensor(h0), kg.tensor(c0)))
        np.testing.assert_allclose(c_k.numpy(), c_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    else:
        out_t, h_t = theirs(x_theirs, torch.tensor(h0))
        out_k, h_k = ours(x_ours, kg.tensor(h0))
    np.testing.assert_allclose(out_k.detach().numpy(), out_t.detach().numpy(), 1e-5, 1e-6)
    np.testing.assert_allclose(h_k.detach().numpy(), h_t.detach().numpy(), 1e-5, 1e-6)
    weight = rng.standard_normal(out_t.shape).astype(np.float32)
    ((out_t * torch.tensor(weight)).sum() + h_t.sum()).backward()
    ((out_k * kg.tensor(weight)).sum() + h_k.sum()).backward()
    np.testing.assert_allclose(x_ours.grad.numpy(), x_theirs.grad.numpy(), 1e-4, 1e-5)
    grads_theirs = dict(theirs.named_parameters())
    for name, parameter in ours.named_parameters():
        np.testing.assert_allclose(
            parameter.grad.numpy(), grads_theirs[name].grad.numpy(), 1e-4, 1e-5, err_msg=name
        )


@pytest.mark.torch
@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_with_pytorch_weights_match_pytorch(kind):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(FEATURES, HIDDEN)
    ours = getattr(kg.nn, kind)(FEATURES, HIDDEN)
    _copy_state(theirs, ours)
    x = np.random.default_rng(2).standard_normal((BATCH, FEATURES)).astype(np.float32)
    h = np.random.default_rng(3).standard_normal((BATCH, HIDDEN)).astype(np.float32)
    state_t = (torch.tensor(h), torch.tensor(h * 0.5)) if kind == "LSTMCell" else torch.tensor(h)
    state_k = (kg.tensor(h), kg.tensor(h * 0.5)) if kind == "LSTMCell" else kg.tensor(h)
    out_t, out_k = theirs(torch.tensor(x), state_t), ours(kg.tensor(x), state_k)
    if kind == "LSTMCell":
        np.testing.assert_allclose(out_k[1].numpy(), out_t[1].detach().numpy(), 1e-5, 1e-6)
        out_t, out_k = out_t[0], out_k[0]
    np.testing.assert_allclose(out_k.detach().numpy(), out_t.detach().numpy(), 1e-5, 1e-6)
    out_t.sum().backward()
    out_k.sum().backward()
    np.testing.assert_allclose(
        ours.weight_hh.grad.numpy(), theirs.weight_hh.grad.numpy(), 1e-4, 1e-5
    )


def test_dropout_applies_between_layers_in_training_only():
    kg.manual_seed(3)
    lstm = kg.nn.LSTM(FEATURES, HIDDEN, num_layers=2, dropout=0.5)
    reference = kg.nn.LSTM(FEATURES, HIDDEN, num_layers=2)
    reference.load_state_dict(lstm.state_dict())
    x = kg.randn(SEQ, BATCH, FEATURES)
    assert_close(lstm.eval()(x)[0], reference(x)[0])
    trained = lstm.train()(x)[0]
    assert not np.allclose(trained.numpy(), reference(x)[0].numpy())
    single = kg.nn.LSTM(FEATURES, HIDDEN, num_layers=1, dropout=0.5).train()
    single.load_state_dict({k: v for k, v in lstm.state_dict().items() if "l1" not in k})
    first_layer = kg.nn.LSTM(FEATURES, HIDDEN)
    first_layer.load_state_dict(single.state_dict())
    assert_close(single(x)[0], first_layer(x)[0])  # no dropout after the last layer
