"""Recurrent layers: PyTorch's weights loaded into kernelgrad's layers (state_dict) give
PyTorch's outputs, final states and gradients; shapes and options; a NumPy reference of
the LSTM and GRU equations on the CUDA backend."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ArgumentError, BackwardError, DTypeError, ShapeError
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
    with pytest.raises(ArgumentError, match="proj_size has to be smaller than hidden_size"):
        kg.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ArgumentError, match="only supported for LSTM"):
        kg.nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ShapeError, match="LSTM: the input has 5 features"):
        kg.nn.LSTM(3, 4)(kg.randn(2, 2, 5))
    with pytest.raises(ShapeError, match=r"h_0 must have shape \(1, 2, 4\)"):
        kg.nn.LSTM(3, 4)(kg.randn(2, 2, 3), (kg.zeros(2, 2, 4), kg.zeros(1, 2, 4)))


def _copy_state(torch_module, ours):
    ours.load_state_dict(
        {k: kg.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()}
    )


def _states(kind, options, batch, rng):
    """Initial states for a layer with ``options`` (h_0, and c_0 for an LSTM)."""
    directions = 2 if options.get("bidirectional") else 1
    count = directions * options.get("num_layers", 1)
    h0 = rng.standard_normal((count, batch, options.get("proj_size") or HIDDEN))
    c0 = rng.standard_normal((count, batch, HIDDEN))
    return (
        (h0.astype(np.float32), c0.astype(np.float32))
        if kind == "LSTM"
        else (h0.astype(np.float32),)
    )


def _call(layer, kind, x, states):
    """(output, h_n, c_n or None) of a layer of either library."""
    if kind == "LSTM":
        output, (h, c) = layer(x, tuple(states) if states else None)
        return output, h, c
    output, h = layer(x, states[0] if states else None)
    return output, h, None


def _compare_with_pytorch(torch, theirs, ours, kind, make_input, states, rng):
    """Run both layers on the same input and states (``make_input(library, x)`` builds
    the layer's input from a leaf, e.g. a PackedSequence) and compare outputs, final
    states and the gradients of the input, the states and every parameter."""
    x = make_input.values
    x_theirs = torch.tensor(x, requires_grad=True)
    x_ours = kg.tensor(x, requires_grad=True)
    states_theirs = [torch.tensor(s, requires_grad=True) for s in states]
    states_ours = [kg.tensor(s, requires_grad=True) for s in states]
    results_theirs = _call(theirs, kind, make_input(torch, x_theirs), states_theirs)
    results_ours = _call(ours, kind, make_input(kg, x_ours), states_ours)
    loss_theirs = loss_ours = 0.0
    for name, got, expected in zip(("output", "h_n", "c_n"), results_ours, results_theirs):
        if expected is None:
            assert got is None
            continue
        if hasattr(expected, "batch_sizes"):  # a PackedSequence: compare its data
            got, expected = got.data, expected.data
        np.testing.assert_allclose(
            got.detach().numpy(), expected.detach().numpy(), 1e-5, 1e-6, err_msg=name
        )
        weight = rng.standard_normal(tuple(expected.shape)).astype(np.float32)
        loss_theirs = loss_theirs + (expected * torch.tensor(weight)).sum()
        loss_ours = loss_ours + (got * kg.tensor(weight)).sum()
    loss_theirs.backward()
    loss_ours.backward()
    leaves = [("input", x_ours, x_theirs)]
    leaves += [(f"state {k}", s, t) for k, (s, t) in enumerate(zip(states_ours, states_theirs))]
    parameters = dict(theirs.named_parameters())
    leaves += [(name, p, parameters[name]) for name, p in ours.named_parameters()]
    for name, got, expected in leaves:
        np.testing.assert_allclose(
            got.grad.numpy(), expected.grad.numpy(), 1e-4, 1e-5, err_msg=f"gradient of {name}"
        )


class _Padded:
    """The layer's input is the tensor itself."""

    def __init__(self, values):
        self.values = values

    def __call__(self, library, x):
        return x


# PyTorch's oneDNN path warns that it runs LSTMs with projections without it
@pytest.mark.filterwarnings("ignore:LSTM with projections")
@pytest.mark.torch
@pytest.mark.parametrize(
    "kind, options",
    [
        ("LSTM", {"num_layers": 2, "bidirectional": True}),
        ("LSTM", {"batch_first": True}),
        ("LSTM", {"proj_size": 2, "num_layers": 2, "bidirectional": True, "batch_first": True}),
        ("LSTM", {"proj_size": 3, "bias": False}),
        ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}),
        ("GRU", {"bias": False}),
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
    x = _Padded(rng.standard_normal(shape).astype(np.float32))
    for states in (_states(kind, options, BATCH, rng), ()):
        theirs.zero_grad()
        ours.zero_grad()
        _compare_with_pytorch(torch, theirs, ours, kind, x, states, rng)


def test_projections_follow_pytorchs_names_and_shapes():
    lstm = kg.nn.LSTM(FEATURES, HIDDEN, num_layers=2, proj_size=2, bidirectional=True)
    names = [name for name, _ in lstm.named_parameters()]
    assert names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert names[5] == "weight_ih_l0_reverse" and len(names) == 20
    assert lstm.weight_hh_l0.shape == (4 * HIDDEN, 2)
    assert lstm.weight_hr_l0_reverse.shape == (2, HIDDEN)
    assert lstm.weight_ih_l1.shape == (4 * HIDDEN, 2 * 2)
    assert [len(group) for group in lstm.all_weights] == [5] * 4
    assert repr(lstm) == "LSTM(3, 4, proj_size=2, num_layers=2, bidirectional=True)"
    output, (h, c) = lstm(kg.randn(SEQ, BATCH, FEATURES))
    assert output.shape == (SEQ, BATCH, 4) and h.shape == (4, BATCH, 2)
    assert c.shape == (4, BATCH, HIDDEN)
    output, (h, c) = lstm(kg.randn(SEQ, FEATURES))  # unbatched
    assert output.shape == (SEQ, 4) and h.shape == (4, 2) and c.shape == (4, HIDDEN)
    with pytest.raises(ShapeError, match=r"h_0 must have shape \(4, 2, 2\) .*proj_size"):
        lstm(kg.randn(SEQ, BATCH, FEATURES), (kg.zeros(4, 2, 4), kg.zeros(4, 2, 4)))
    with pytest.raises(ArgumentError, match="positive integer or zero"):
        kg.nn.LSTM(3, 4, proj_size=-1)


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


# --- packed sequences ---------------------------------------------------------------------------
class _Packed:
    """The layer's input is the padded leaf packed with these lengths."""

    def __init__(self, values, lengths, batch_first, enforce_sorted):
        self.values = values
        self.lengths = lengths
        self.batch_first = batch_first
        self.enforce_sorted = enforce_sorted

    def __call__(self, library, x):
        pack = library.nn.utils.rnn.pack_padded_sequence
        return pack(x, self.lengths, self.batch_first, self.enforce_sorted)


@pytest.mark.filterwarnings("ignore:LSTM with projections")
@pytest.mark.torch
@pytest.mark.parametrize(
    "kind, options, lengths",
    [
        ("LSTM", {"num_layers": 2, "bidirectional": True}, [4, 3, 3, 1]),
        ("LSTM", {"proj_size": 2, "bidirectional": True, "batch_first": True}, [2, 4, 1, 3]),
        ("LSTM", {"dropout": 0.0, "num_layers": 2}, [1, 1, 4, 2]),
        ("GRU", {"num_layers": 2, "bidirectional": True}, [2, 4, 1, 3]),
        ("GRU", {"batch_first": True, "bias": False}, [4, 4, 2, 1]),
        ("RNN", {"nonlinearity": "relu", "bidirectional": True}, [1, 3, 2, 3]),
        ("RNN", {"num_layers": 2}, [3, 2, 2, 1]),
    ],
)
def test_packed_sequences_match_pytorch(kind, options, lengths):
    """Variable lengths: the output's data, each sequence's final state (taken at its own
    last step) and the gradients of the input, the states and the parameters."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    theirs = getattr(torch.nn, kind)(FEATURES, HIDDEN, **options)
    ours = getattr(kg.nn, kind)(FEATURES, HIDDEN, **options)
    _copy_state(theirs, ours)
    rng = np.random.default_rng(1)
    batch_first = options.get("batch_first", False)
    steps, batch = max(lengths), len(lengths)
    shape = (batch, steps, FEATURES) if batch_first else (steps, batch, FEATURES)
    values = rng.standard_normal(shape).astype(np.float32)
    ordered = lengths == sorted(lengths, reverse=True)
    x = _Packed(values, lengths, batch_first, enforce_sorted=ordered)
    for states in (_states(kind, options, batch, rng), ()):
        theirs.zero_grad()
        ours.zero_grad()
        _compare_with_pytorch(torch, theirs, ours, kind, x, states, rng)


def test_empty_batches_and_bad_inputs():
    gru = kg.nn.GRU(2, 3, bidirectional=True)
    x = kg.randn(3, 0, 2, requires_grad=True)  # no sequences: empty results, as PyTorch
    output, h_n = gru(x)
    assert output.shape == (3, 0, 6) and h_n.shape == (2, 0, 3)
    output.sum().backward()
    assert x.grad.shape == (3, 0, 2)
    with pytest.raises(ShapeError, match="sequence length larger than 0"):
        kg.nn.LSTM(2, 3, batch_first=True)(kg.randn(2, 0, 2))
    with pytest.raises(DTypeError, match=r"h_0 is kg.float64 but the input is kg.float32"):
        kg.nn.LSTM(2, 3)(
            kg.randn(4, 2, 2), (kg.zeros(1, 2, 3, dtype=kg.float64), kg.zeros(1, 2, 3))
        )


def test_packed_input_errors_name_the_problem():
    packed = kg.nn.utils.rnn.pack_padded_sequence(kg.randn(4, 3, 2), [3, 2, 1])
    with pytest.raises(ShapeError, match="the input has 2 features"):
        kg.nn.LSTM(5, 4)(packed)
    with pytest.raises(ShapeError, match=r"hx must have shape \(1, 3, 4\)"):
        kg.nn.GRU(2, 4)(packed, kg.zeros(1, 2, 4))


def test_packed_lstm_with_projection_equals_each_sequence_alone(device):
    """Each sequence's output and final state in a packed batch are those of the
    sequence run alone (both directions, two layers, a projection, given states)."""
    kg.manual_seed(4)
    lstm = kg.nn.LSTM(2, 3, num_layers=2, proj_size=2, bidirectional=True).to(device)
    rng = np.random.default_rng(4)
    lengths = [2, 3, 1]
    sequences = [rng.standard_normal((n, 2)).astype(np.float32) for n in lengths]
    h0 = rng.standard_normal((4, 3, 2)).astype(np.float32)
    c0 = rng.standard_normal((4, 3, 3)).astype(np.float32)
    packed = kg.nn.utils.rnn.pack_sequence(
        [kg.tensor(s, device=device) for s in sequences], enforce_sorted=False
    )
    states = (kg.tensor(h0, device=device), kg.tensor(c0, device=device))
    output, (h_n, c_n) = lstm(packed, states)
    padded, _ = kg.nn.utils.rnn.pad_packed_sequence(output, batch_first=True)
    for row, values in enumerate(sequences):
        alone = (kg.tensor(h0[:, row], device=device), kg.tensor(c0[:, row], device=device))
        expected, (h, c) = lstm(kg.tensor(values, device=device), alone)
        assert_close(padded[row, : lengths[row]], expected.cpu().numpy(), 1e-5, 1e-6)
        assert_close(h_n[:, row], h.cpu().numpy(), 1e-5, 1e-6)
        assert_close(c_n[:, row], c.cpu().numpy(), 1e-5, 1e-6)


def test_packed_gru_gradients_match_central_differences(device):
    kg.manual_seed(5)
    gru = kg.nn.GRU(1, 2, bidirectional=True, dtype=kg.float64).to(device)
    rng = np.random.default_rng(5)
    x, h0 = rng.standard_normal((3, 2, 1)), rng.standard_normal((2, 2, 2))

    def run(values, states):
        packed = kg.nn.utils.rnn.pack_padded_sequence(values, [1, 3], enforce_sorted=False)
        output, h_n = gru(packed, states)
        return kg.cat([output.data.reshape(-1), h_n.reshape(-1)])

    check_grad(run, x, h0, device=device)


def test_second_derivatives_through_a_layer_are_refused():
    lstm = kg.nn.LSTM(2, 3)
    x = kg.randn(3, 1, 2, requires_grad=True)
    output, _ = lstm(x)
    with pytest.raises(BackwardError, match="create_graph"):
        output.sum().backward(create_graph=True)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_compiled_training_step_equals_eager_steps(kind, device):
    def make():
        kg.manual_seed(6)
        options = {"proj_size": 2} if kind == "LSTM" else {}
        layer = getattr(kg.nn, kind)(2, 3, **options)
        layer.to(device)
        return layer, kg.optim.SGD(layer.parameters(), lr=0.5)

    def stepper(layer, optimizer):
        def step(packed):
            optimizer.zero_grad()
            output, state = layer(packed)
            h_n = state[0] if kind == "LSTM" else state
            loss = (output.data * output.data).sum() + h_n.sum()
            loss.backward()
            optimizer.step()
            return loss

        return step

    rng = np.random.default_rng(6)
    x = kg.tensor(rng.standard_normal((3, 2, 2)), dtype=kg.float32, device=device)
    packed = kg.nn.utils.rnn.pack_padded_sequence(x, [3, 2])
    eager_layer, eager_optimizer = make()
    compiled_layer, compiled_optimizer = make()
    eager = stepper(eager_layer, eager_optimizer)
    compiled = kg.compile(stepper(compiled_layer, compiled_optimizer))
    for _ in range(3):
        assert_close(compiled(packed), eager(packed).item(), 1e-5, 1e-6)
    for got, expected in zip(compiled_layer.parameters(), eager_layer.parameters()):
        assert_close(got.detach(), expected.detach().cpu().numpy(), 1e-5, 1e-6)
