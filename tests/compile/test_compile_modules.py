"""kg.compile watches the Python-side state of the modules a traced function calls:
their mode (``train()``/``eval()``), settings (``momentum``, ``p``), which parameters,
buffers and sub-modules they hold, the memory, dtype and ``requires_grad`` of those
tensors, and their hooks. A change between calls traces again, so compiled calls equal
eager calls on a copy of the model; no change replays without running Python."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad import nn
from tests.helpers import as_numpy


def _state(model, optimizer=None):
    """Parameters, buffers and optimizer state as NumPy arrays, in order."""
    arrays = [as_numpy(t.detach()) for t in model.parameters()]
    arrays += [as_numpy(t.detach()) for t in model.buffers()]
    if optimizer is not None:
        for p in model.parameters():
            for value in optimizer.state.get(p, {}).values():
                if isinstance(value, kg.Tensor):
                    arrays.append(as_numpy(value.detach()))
    return arrays


def _assert_close(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _batch(device, call, dtype=kg.float32):
    rng = np.random.default_rng(call)
    x = kg.tensor(rng.standard_normal((6, 4)), dtype=dtype, device=device)
    y = kg.tensor(rng.standard_normal((6, 2)), dtype=dtype, device=device)
    return x, y


class Step:
    """A training step over ``model`` that counts how often its Python code runs (a
    replay does not run it)."""

    def __init__(self, model, make_optimizer):
        self.model = model
        self.optimizer = make_optimizer(model.parameters())
        self.python_runs = 0

    def __call__(self, x, y):
        self.python_runs += 1
        self.optimizer.zero_grad()
        loss = ((self.model(x) - y) ** 2).mean()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def _train_against_eager(device, model, make_optimizer, between, calls=6):
    """Calls 1-``calls`` of a compiled training step against eager steps on a deep copy
    of ``model``; ``between(call, model)`` changes both models before each call. Returns
    how often the compiled step's Python code ran."""
    model.to(device)
    eager = Step(copy.deepcopy(model), make_optimizer)
    compiled = Step(model, make_optimizer)
    step = kg.compile(compiled)
    for call in range(1, calls + 1):
        between(call, eager.model)
        between(call, compiled.model)
        x, y = _batch(device, call)
        kg.manual_seed(100 + call)  # the same dropout masks on both sides
        expected = eager(x, y)
        kg.manual_seed(100 + call)
        got = step(x, y)
        np.testing.assert_allclose(as_numpy(got), as_numpy(expected), rtol=1e-5, atol=1e-6)
        _assert_close(
            _state(compiled.model, compiled.optimizer), _state(eager.model, eager.optimizer)
        )
    return compiled.python_runs


def _dropout_batchnorm_model():
    kg.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2)
    )


def _sgd(params):
    return kg.optim.SGD(params, lr=0.1, momentum=0.9)


def _adam(params):
    return kg.optim.Adam(params, lr=0.05)


# --- mode and settings ------------------------------------------------------------------------
def test_train_eval_train_switches_trace_again_and_equal_eager_steps(device):
    """Dropout stops dropping and BatchNorm uses (and no longer updates) its running
    statistics in eval mode; a replay of the training-mode trace did neither."""

    def modes(call, model):
        model.train(call not in (3, 4))

    runs = _train_against_eager(device, _dropout_batchnorm_model(), _sgd, modes)
    # 1 eager, 2 traced, 3 eval: traced, 4 replayed, 5 train: traced, 6 replayed
    assert runs == 4


def test_eval_under_no_grad_stops_dropout_in_replays(device):
    kg.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).to(device)
    twin = copy.deepcopy(model)

    def predict(x):
        with kg.no_grad():
            return model(x)

    compiled = kg.compile(predict)
    x = kg.ones(1, 2, device=device)
    for _ in range(3):
        compiled(x)
    model.eval()
    twin.eval()
    for _ in range(2):  # the new trace, then its replay
        with kg.no_grad():
            expected = twin(x)
        np.testing.assert_allclose(as_numpy(compiled(x)), as_numpy(expected), rtol=1e-6)


def test_a_new_batchnorm_momentum_traces_again(device):
    def momentum(call, model):
        if call == 4:
            model[1].momentum = 0.5

    runs = _train_against_eager(device, _dropout_batchnorm_model(), _sgd, momentum)
    assert runs == 3  # eager, traced, traced again at call 4


# --- tensors and sub-modules replaced ---------------------------------------------------------
def _set_data(model):
    model[2].bias.data = kg.full((2,), 5.0, device=model[2].bias.device)


def _new_parameter(model):
    weight = model[2].weight
    model[2].weight = nn.Parameter(kg.full(weight.shape, 0.25, device=weight.device))


def _new_buffer(model):
    mean = model[1].running_mean
    model[1].running_mean = kg.full(mean.shape, 0.5, device=mean.device)


def _new_layer(model):
    kg.manual_seed(9)
    model[2] = nn.Linear(3, 2).to(model[0].weight.device)


REPLACEMENTS = {
    "data": _set_data,
    "parameter": _new_parameter,
    "buffer": _new_buffer,
    "layer": _new_layer,
}


@pytest.mark.parametrize("name", list(REPLACEMENTS))
def test_replaced_tensors_and_layers_are_used_by_later_calls(device, name):
    kg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2)).to(device)
    model.eval()
    twin = copy.deepcopy(model)

    def predict(x):
        with kg.no_grad():
            return model(x)

    compiled = kg.compile(predict)
    for call in range(1, 7):
        if call == 4:
            REPLACEMENTS[name](model)
            REPLACEMENTS[name](twin)
        x, _ = _batch(device, call)
        with kg.no_grad():
            expected = twin(x)
        np.testing.assert_allclose(as_numpy(compiled(x)), as_numpy(expected), rtol=1e-6)


def test_double_between_calls_computes_in_float64(device):
    kg.manual_seed(0)
    lin = nn.Linear(2, 1).to(device)
    twin = copy.deepcopy(lin)

    def forward(layer):
        def run(x):
            with kg.no_grad():
                return layer(x.to(layer.weight.dtype))

        return run

    compiled, eager = kg.compile(forward(lin)), forward(twin)
    x = kg.ones(1, 2, device=device)
    for call in range(1, 6):
        if call == 3:
            for layer in (lin, twin):
                layer.double()
                with kg.no_grad():
                    layer.weight.mul_(2)
        got, expected = compiled(x), eager(x)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(as_numpy(got), as_numpy(expected), rtol=1e-12)
    assert got.dtype == kg.float64


# --- freezing ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make_optimizer", [_sgd, _adam], ids=["sgd-momentum", "adam"])
def test_freezing_and_unfreezing_a_parameter_between_calls(device, make_optimizer):
    """A frozen weight gets no gradient, so the step leaves it alone (Adam and SGD skip
    a parameter without one); unfrozen, it is updated again."""

    def freeze(call, model):
        if call == 3:
            model[0].weight.requires_grad_(False)
        if call == 5:
            model[0].weight.requires_grad_(True)

    kg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    runs = _train_against_eager(device, model, make_optimizer, freeze)
    assert runs == 4  # eager, traced, traced frozen (call 3), traced unfrozen (call 5)


@pytest.mark.parametrize("make_optimizer", [_sgd, _adam], ids=["sgd-momentum", "adam"])
def test_the_optimizer_watches_requires_grad_of_parameters_outside_modules(device, make_optimizer):
    """Tensors trained without a module: only the optimizer sees them."""

    def make():
        kg.manual_seed(0)
        return [kg.randn(4, 2, device=device, requires_grad=True) for _ in range(2)]

    def step_over(params, optimizer):
        def step(x, y):
            optimizer.zero_grad()
            loss = ((x @ params[0] + x @ params[1] - y) ** 2).mean()
            loss.backward()
            optimizer.step()
            return loss.detach()

        return step

    ours, theirs = make(), make()
    ours_optimizer, theirs_optimizer = make_optimizer(ours), make_optimizer(theirs)
    compiled = kg.compile(step_over(ours, ours_optimizer))
    eager = step_over(theirs, theirs_optimizer)
    for call in range(1, 7):
        if call in (3, 5):
            for params in (ours, theirs):
                params[1].requires_grad_(call == 5)
        x, y = _batch(device, call)
        np.testing.assert_allclose(as_numpy(compiled(x, y)), as_numpy(eager(x, y)), rtol=1e-5)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(as_numpy(a.detach()), as_numpy(b.detach()), rtol=1e-5)


# --- what does not trace again ----------------------------------------------------------------
class Counting(nn.Module):
    """A layer whose forward stores a Python value and a tensor on itself each call."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        self.last = self.inner(x)
        return self.last.tanh()


def test_unchanged_modules_replay_without_running_python(device):
    """The state is taken when the trace ends: what a forward stores on its module
    (a counter, a cached tensor) is what the next call starts from, not a change."""
    kg.manual_seed(0)
    model = Counting().to(device)
    step = Step(model, _sgd)
    compiled = kg.compile(step)
    x, y = _batch(device, 0)
    for _ in range(5):
        compiled(x, y)
    assert step.python_runs == 2
    assert model.calls == 2


def test_a_forward_hook_registered_between_calls_traces_again(device):
    kg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 2)).to(device)

    def predict(x):
        with kg.no_grad():
            return model(x)

    compiled = kg.compile(predict)
    x, _ = _batch(device, 0)
    for _ in range(3):
        compiled(x)
    with kg.no_grad():
        plain = model(x)
    handle = model[0].register_forward_hook(lambda module, args, output: output * 2)
    for _ in range(2):
        np.testing.assert_allclose(as_numpy(compiled(x)), 2 * as_numpy(plain), rtol=1e-6)
    handle.remove()
    np.testing.assert_allclose(as_numpy(compiled(x)), as_numpy(plain), rtol=1e-6)


def test_repeated_mode_switches_warn_and_name_the_module(device):
    kg.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).to(device)

    def predict(x):
        with kg.no_grad():
            return model(x)

    compiled = kg.compile(predict)
    x = kg.ones(1, 2, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in range(12):
            model.train(call % 2 == 0)
            compiled(x)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1
    assert "the mode of Sequential (train()/eval()" in messages[0], messages[0]


def test_a_module_called_three_times_is_watched_once(device):
    """A module called several times in one step is watched once (one watch per trace
    however many modules or calls)."""
    kg.manual_seed(0)
    layer = nn.Linear(4, 4).to(device)

    def predict(x):
        with kg.no_grad():
            return F.relu(layer(layer(layer(x))))

    compiled = kg.compile(predict)
    x, _ = _batch(device, 0)
    for _ in range(3):
        compiled(x)
    (entry,) = compiled._entries.values()
    assert len(entry.watches) == 1


def test_zero_grad_at_the_end_of_the_step_still_replays(device):
    """Whether a parameter has a ``.grad`` when the optimizer steps is decided by the
    traced code itself (here: backward gives one, and zero_grad() after the step drops
    it), so it is not watched: watched at the step, it would differ from the start of
    every later call and trace every call again."""
    kg.manual_seed(0)
    model = nn.Linear(3, 2).to(device)
    optimizer = _sgd(model.parameters())
    runs = []

    def step(x):
        runs.append(1)
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.detach()

    compiled = kg.compile(step)
    for _ in range(5):
        compiled(kg.ones(2, 3, device=device))
    assert len(runs) == 2


def test_a_function_traced_inside_another_trace_watches_modules_for_both(device):
    kg.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).to(device)
    twin = copy.deepcopy(model)

    def predict(x):
        with kg.no_grad():
            return model(x)

    inner = kg.compile(predict)
    outer = kg.compile(lambda x: inner(x) * 2)
    x = kg.ones(1, 2, device=device)
    for _ in range(3):  # outer: eager, traced (inner traced inside it), replayed
        outer(x)
    model.eval()
    twin.eval()
    with kg.no_grad():
        expected = 2 * as_numpy(twin(x))
    np.testing.assert_allclose(as_numpy(outer(x)), expected, rtol=1e-6)
