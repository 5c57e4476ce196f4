"""``kg.nn.device_function``: small networks evaluated per work item inside kernels.

Every network is checked against its own batched forward (``model.eval()``), in both
weight modes, on the device of the run (CPU, or CUDA under the simulator with tiny N).
"""

from __future__ import annotations

import re
import runpy
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ShapeError
from kernelgrad.nn import UnsupportedLayerError, device_function
from tests.helpers import as_numpy, assert_close, cache_hits_in_two_processes

ROOT = Path(__file__).resolve().parents[2]
nn = kg.nn
MODES = ("constants", "arrays")


def _rows(simulated: bool) -> int:
    return 3 if simulated else 37


def _evaluate(net, inputs, device):
    """Run ``net`` on every row of ``inputs`` inside a kernel; returns a NumPy array."""
    rows = inputs.shape[0]
    out = kg.zeros(rows, net.out_features, device=device, dtype=net.dtype)
    if net.weights_mode == "constants":

        @kg.kernel
        def evaluate(out, inputs):
            i = kg.index()
            net(inputs[i, :], out[i, :])

        evaluate(out, inputs, ndrange=rows)
    else:

        @kg.kernel
        def evaluate_with_weights(out, weights, inputs):
            i = kg.index()
            net(weights, inputs[i, :], out[i, :])

        evaluate_with_weights(out, net.weights.to(device), inputs, ndrange=rows)
    return as_numpy(out)


def _reference(model, inputs):
    model.eval()
    with kg.no_grad():
        return as_numpy(model(inputs.cpu()))


def _inputs(rows, features, seed=0, dtype=kg.float32, device="cpu", scale=2.0):
    values = np.random.default_rng(seed).normal(scale=scale, size=(rows, features))
    return kg.tensor(values, dtype=dtype, device=device)


def _every_activation():
    model = nn.Sequential(
        nn.Linear(3, 6),
        nn.Softplus(beta=2.0, threshold=1.0),  # both sides of the threshold
        nn.Linear(6, 6),
        nn.LeakyReLU(0.1),
        nn.Linear(6, 6),
        nn.ReLU(),
        nn.Linear(6, 5),
        nn.GELU(),
        nn.Linear(5, 5),
        nn.GELU(approximate="tanh"),
        nn.Linear(5, 5),
        nn.SiLU(),
        nn.Softplus(),
        nn.Linear(5, 5),
        nn.Sigmoid(),
        nn.Linear(5, 3),
        nn.Softmax(dim=-1),
    )
    with kg.no_grad():  # pre-activations of a few units, both signs
        for parameter in model.parameters():
            parameter.mul_(2.5)
    return model


def _batch_norm_net():
    norm = nn.BatchNorm1d(5)
    with kg.no_grad():
        norm.running_mean.copy_(kg.tensor([0.5, -1.0, 0.0, 2.0, 0.25]))
        norm.running_var.copy_(kg.tensor([1.5, 0.5, 2.0, 1.0, 0.75]))
        norm.weight.copy_(kg.tensor([1.0, 2.0, -0.5, 0.75, 1.25]))
        norm.bias.copy_(kg.tensor([0.1, 0.0, -0.2, 0.3, 0.0]))
    return nn.Sequential(nn.Linear(4, 5), norm, nn.Tanh(), nn.Linear(5, 2), nn.LogSoftmax(1))


NETWORKS = {
    "mlp-4-4-4": lambda: nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)),
    "every-activation": _every_activation,
    "batch-norm-log-softmax": _batch_norm_net,
    "identities-nested-no-bias": lambda: nn.Sequential(
        nn.Flatten(),
        nn.Sequential(nn.Linear(3, 4, bias=False), nn.Dropout(0.5), nn.Tanh()),
        nn.Identity(),
        nn.Linear(4, 2, bias=False),
    ),
    "activation-first": lambda: nn.Sequential(nn.Tanh(), nn.Linear(3, 3), nn.ReLU()),
    "single-linear": lambda: nn.Linear(5, 3),
    "wide-hidden": lambda: nn.Sequential(
        nn.Linear(2, 19), nn.Tanh(), nn.Linear(19, 17), nn.ReLU(), nn.Linear(17, 2)
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_kernel_results_equal_the_batched_forward(name, mode, device, simulated):
    kg.manual_seed(1)
    model = NETWORKS[name]()
    net = device_function(model, weights=mode)
    inputs = _inputs(_rows(simulated), net.in_features, device=device)
    assert_close(_evaluate(net, inputs, device), _reference(model, inputs), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mode", MODES)
def test_float64_networks_compute_in_float64(mode, device, simulated):
    kg.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 2)).double()
    net = device_function(model, weights=mode)
    assert net.dtype == kg.float64
    inputs = _inputs(_rows(simulated), 3, dtype=kg.float64, device=device)
    assert_close(_evaluate(net, inputs, device), _reference(model, inputs), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("mode", MODES)
def test_inputs_of_another_dtype_are_converted(mode, device, simulated):
    kg.manual_seed(3)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    net = device_function(model, weights=mode)
    inputs = _inputs(_rows(simulated), 3, dtype=kg.float64, device=device)
    expected = _reference(model, inputs.to(kg.float32))
    assert_close(_evaluate(net, inputs, device), expected, rtol=1e-5, atol=2e-6)


def _private_vector_kernel(net):
    # the state lives in kg.private arrays, as in an ODE integrator
    @kg.kernel
    def twice(out, inputs):
        i = kg.index()
        state = kg.private(2, kg.float32)
        result = kg.private(2, kg.float32)
        state[0] = inputs[i, 0]
        state[1] = inputs[i, 1]
        for _ in range(2):  # apply the network twice
            net(state, result)
            state[0] = result[0]
            state[1] = result[1]
        out[i, 0] = state[0]
        out[i, 1] = state[1]

    return twice


def test_private_arrays_as_input_and_output(device, simulated):
    kg.manual_seed(4)
    model = nn.Sequential(nn.Linear(2, 6), nn.Tanh(), nn.Linear(6, 2))
    net = device_function(model)
    inputs = _inputs(_rows(simulated), 2, device=device)
    out = kg.zeros(inputs.shape[0], 2, device=device)
    _private_vector_kernel(net)(out, inputs, ndrange=inputs.shape[0])
    with kg.no_grad():
        expected = as_numpy(model(model(inputs.cpu())))
    assert_close(as_numpy(out), expected, rtol=1e-5, atol=2e-6)


def test_arrays_mode_takes_new_weights_without_a_new_kernel(device, simulated):
    kg.manual_seed(5)
    model = nn.Sequential(nn.Linear(3, 5), nn.Sigmoid(), nn.Linear(5, 2))
    net = device_function(model, weights="arrays")

    @kg.kernel
    def evaluate(out, weights, inputs):
        i = kg.index()
        net(weights, inputs[i, :], out[i, :])

    inputs = _inputs(_rows(simulated), 3, device=device)
    out = kg.zeros(inputs.shape[0], 2, device=device)
    evaluate(out, net.weights.to(device), inputs, ndrange=inputs.shape[0])
    assert_close(as_numpy(out), _reference(model, inputs), rtol=1e-5, atol=2e-6)
    with kg.no_grad():  # "more training"
        for parameter in model.parameters():
            parameter.mul_(-1.5)
    evaluate(out, net.pack_weights(model, device=device), inputs, ndrange=inputs.shape[0])
    assert_close(as_numpy(out), _reference(model, inputs), rtol=1e-5, atol=2e-6)
    assert len(evaluate.launchers) == 1  # one compiled kernel for both weight sets


def test_functions_of_one_architecture_keep_their_own_weights():
    kg.manual_seed(6)
    first = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    second = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    net_first = device_function(first, weights="arrays")
    net_second = device_function(second, weights="arrays")
    assert net_first.source == net_second.source  # the code depends on the sizes only
    assert not np.array_equal(net_first.weights.numpy(), net_second.weights.numpy())
    assert net_first.weights.numel() == net_first.num_weights == 2 * 3 + 3 + 3 + 1


def test_pack_weights_refuses_another_architecture():
    net = device_function(nn.Sequential(nn.Linear(2, 3), nn.Tanh()), weights="arrays")
    with pytest.raises(ShapeError, match="architecture differs"):
        net.pack_weights(nn.Sequential(nn.Linear(2, 4), nn.Tanh()))
    with pytest.raises(ShapeError, match="architecture differs"):
        net.pack_weights(nn.Sequential(nn.Linear(2, 3), nn.ReLU()))


def test_attributes_and_source():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    net = device_function(model, name="policy")
    assert (net.in_features, net.out_features, net.num_weights) == (4, 2, 23)
    assert net.weights_mode == "constants" and net.weights is None
    assert net.__name__ == "policy" and "def policy(x, out):" in net.source
    assert "Linear(in_features=4, out_features=3" in net.__doc__
    assert net.layers == ("0: Linear(4 -> 3)", "1: relu", "2: Linear(3 -> 2)")
    weight = float(model[0].weight[0, 0].item())
    assert repr(float(np.float32(weight))) in net.source  # the weights are literals


def test_constant_functions_can_be_called_from_python():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    net = device_function(model)
    x = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    out = np.zeros(2, dtype=np.float32)
    net(x, out)  # plain Python: handy for debugging a network
    assert_close(out, _reference(model, kg.tensor(x[None]))[0], rtol=1e-5, atol=1e-6)


# --- errors ----------------------------------------------------------------------------------
class Twice(nn.Module):
    def forward(self, x):
        return 2 * x


@pytest.mark.parametrize(
    ("model", "layer"),
    [
        (nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)), "'1' (LayerNorm)"),
        (nn.Sequential(nn.Conv1d(1, 2, 3), nn.Flatten(), nn.Linear(4, 2)), "'0' (Conv1d)"),
        (nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Tanh(), Twice())), "'1.1' (Twice)"),
        (nn.Sequential(nn.Linear(2, 2), nn.Softmax(dim=0)), "'1' (Softmax)"),
        (nn.Sequential(nn.Flatten(0), nn.Linear(2, 2)), "'0' (Flatten)"),
        (nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2, track_running_stats=False)), "'1'"),
    ],
)
def test_unsupported_layers_are_named(model, layer):
    with pytest.raises(UnsupportedLayerError) as caught:
        device_function(model)
    message = str(caught.value)
    assert f"layer {layer}" in message
    assert "Supported: Linear" in message
    assert "outside the kernel" in message
    assert isinstance(caught.value, TypeError)


def test_other_errors():
    with pytest.raises(UnsupportedLayerError, match="no Linear layer"):
        device_function(nn.Sequential(nn.Tanh()))
    with pytest.raises(ShapeError, match="'2' takes 5 features but the layers before it produce 4"):
        device_function(nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(5, 2)))
    with pytest.raises(ValueError, match="'constants' or 'arrays'"):
        device_function(nn.Linear(2, 2), weights="registers")
    with pytest.raises(ValueError, match="Python identifier"):
        device_function(nn.Linear(2, 2), name="two words")
    with pytest.raises(ValueError, match="Use weights='arrays'"):
        device_function(nn.Linear(64, 64))
    with pytest.raises(TypeError, match=r"expects a kg\.nn\.Module"):
        device_function(lambda x: x)


def test_the_documentation_example_runs(tmp_path, backend_name):
    if backend_name != "cpu":
        pytest.skip("the documentation's sizes are too large for the CUDA simulator")
    text = (ROOT / "docs" / "device-functions.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 1
    source = blocks[0] + "\nassert float((out - model(inputs)).abs().max()) < 1e-5\n"
    module = tmp_path / "device_functions_md_example.py"  # kernels need a source file
    module.write_text(source)
    runpy.run_path(str(module), run_name="device_functions_md_example")


# --- disk cache ------------------------------------------------------------------------------
CACHE_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import kernelgrad as kg

    kg.manual_seed(0)
    model = kg.nn.Sequential(kg.nn.Linear(2, 3), kg.nn.Tanh(), kg.nn.Linear(3, 1))
    net = kg.nn.device_function(model)

    @kg.kernel
    def evaluate(out, inputs):
        i = kg.index()
        net(inputs[i, :], out[i, :])

    inputs = kg.ones(4, 2)
    out = kg.zeros(4, 1)
    evaluate(out, inputs, ndrange=4)
    assert np.allclose(out.numpy(), model(inputs).detach().numpy(), atol=1e-6)
    launchers = next(iter(evaluate.launchers.values()))
    print("hits", sum(sum(d.stats.cache_hits.values()) for d in launchers))
    """
)


def test_kernels_calling_a_network_are_cached_on_disk(tmp_path):
    script = tmp_path / "uses_network.py"  # kernels need their source in a file
    script.write_text(CACHE_SCRIPT)
    hits = cache_hits_in_two_processes([str(script)], tmp_path / "cache")
    assert hits == [0, hits[1]] and hits[1] >= 1
    assert list((tmp_path / "cache" / "kernels").glob("kg_devfn_network_*.py"))
