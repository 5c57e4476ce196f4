"""Recurrent layers' time loops joined into native calls (``nn/_recurrence._time_loop``
over ``Backend.join_launches``): from the JOIN_AFTER-th call of a shape on, the CPU runs
a loop's launches from generated code over each call's buffers. The results must be the
launches' own, bit for bit, and traced or counted launches must still be seen one by
one."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.nn import _recurrence


def _train(monkeypatch, join_after, make, packed=False, calls=5):
    monkeypatch.setattr(_recurrence, "JOIN_AFTER", join_after)
    _recurrence._JOINED.clear()
    kg.manual_seed(0)
    layer = make()
    rng = np.random.default_rng(0)
    results = []
    for _ in range(calls):
        x = kg.tensor(rng.standard_normal((5, 3, 4)), dtype=kg.float32, requires_grad=True)
        source = kg.nn.utils.rnn.pack_padded_sequence(x, [5, 4, 2]) if packed else x
        output = layer(source)[0]
        if packed:
            output = kg.nn.utils.rnn.pad_packed_sequence(output)[0]
        (output * output).sum().backward()
        grads = [p.grad.numpy().copy() for p in layer.parameters()]
        results.append((output.detach().numpy(), x.grad.numpy(), grads))
        layer.zero_grad()
    joined = [v for v in _recurrence._JOINED.values() if isinstance(v, list)]
    return results, joined


LAYERS = {
    "lstm": lambda: kg.nn.LSTM(4, 6, 2),
    "lstm-projected-bidirectional": lambda: kg.nn.LSTM(4, 6, proj_size=3, bidirectional=True),
    "gru-bidirectional": lambda: kg.nn.GRU(4, 6, bidirectional=True),
    "gru-no-bias": lambda: kg.nn.GRU(4, 6, bias=False),
    "rnn-relu": lambda: kg.nn.RNN(4, 6, 2, nonlinearity="relu"),
}


@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("packed", [False, True])
def test_joined_time_loops_compute_what_the_launches_compute(monkeypatch, name, packed):
    direct, none = _train(monkeypatch, 10**6, LAYERS[name], packed)
    joined, runs = _train(monkeypatch, 2, LAYERS[name], packed)
    assert not none
    assert runs, "no time loop was joined"  # forward and backward of each layer
    for (out_a, dx_a, grads_a), (out_b, dx_b, grads_b) in zip(direct, joined):
        np.testing.assert_array_equal(out_a, out_b)
        np.testing.assert_array_equal(dx_a, dx_b)
        for a, b in zip(grads_a, grads_b):
            np.testing.assert_array_equal(a, b)


def test_a_joined_loop_still_shows_its_launches_to_count_launches(monkeypatch):
    monkeypatch.setattr(_recurrence, "JOIN_AFTER", 1)
    _recurrence._JOINED.clear()
    layer = kg.nn.GRU(4, 6)
    x = kg.ones((5, 3, 4))
    layer(x)  # joined at once
    assert any(isinstance(v, list) for v in _recurrence._JOINED.values())
    with kg.compile.count_launches() as counted:
        layer(x)
    assert counted.count >= 2 * 5  # a product and a cell kernel per step, each seen


def test_a_compiled_function_traces_a_joined_loop_step_by_step(monkeypatch):
    monkeypatch.setattr(_recurrence, "JOIN_AFTER", 1)
    _recurrence._JOINED.clear()
    kg.manual_seed(1)
    layer = kg.nn.LSTM(4, 6)
    compiled = kg.compile(lambda x: layer(x)[0].sum())
    rng = np.random.default_rng(2)
    with kg.no_grad():
        for _ in range(4):
            x = kg.tensor(rng.standard_normal((5, 3, 4)), dtype=kg.float32)
            assert compiled(x).item() == pytest.approx(layer(x)[0].sum().item(), rel=1e-6)
    assert any(isinstance(v, list) for v in _recurrence._JOINED.values())
    assert len(compiled.last_plan.steps) > 2 * 5  # the trace saw every step's launches
