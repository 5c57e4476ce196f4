"""``torch.func.functional_call`` / ``torch.nn.utils.stateless.functional_call``
(kernelgrad/nn/utils/stateless.py): a module called with some parameters and buffers
replaced for one call, as MAML's inner loop uses it; against PyTorch where installed."""

from __future__ import annotations

import io

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import UnsupportedError


def _net(library):
    nn = library.nn
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16, 3),
    )  # fmt: skip


def _maml_step(library, model, x, y, inner_lr=0.1):
    """One MAML meta-gradient with functional_call: an inner step on (x, y) through the
    adapted weights, the outer loss differentiated back to the original parameters."""
    F = library.nn.functional
    params = dict(model.named_parameters())
    loss = F.cross_entropy(library.func.functional_call(model, params, (x,)), y)
    grads = library.autograd.grad(loss, list(params.values()), create_graph=True)
    fast = {name: p - inner_lr * g for (name, p), g in zip(params.items(), grads)}
    outer = F.cross_entropy(library.func.functional_call(model, fast, (x,)), y)
    outer.backward()
    return outer.item(), {name: p.grad.numpy() for name, p in model.named_parameters()}


@pytest.mark.torch
def test_a_maml_meta_gradient_matches_pytorch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = _net(torch)
    ours = _net(kg)
    buffer = io.BytesIO()
    torch.save(theirs.state_dict(), buffer)
    buffer.seek(0)
    ours.load_state_dict(kg.load(buffer))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 1, 4, 4)).astype("f4")
    y = rng.integers(0, 3, 5)
    expected = _maml_step(torch, theirs, torch.tensor(x), torch.tensor(y))
    got = _maml_step(kg, ours, kg.tensor(x), kg.tensor(y))
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5)
    for name, grad in expected[1].items():
        np.testing.assert_allclose(got[1][name], grad, rtol=1e-4, atol=1e-6, err_msg=name)
    # the module has its own parameters back, and BatchNorm's running statistics were
    # updated by the calls, as in PyTorch
    assert all(isinstance(p, kg.nn.Parameter) for p in ours.parameters())
    np.testing.assert_allclose(
        ours[1].running_mean.numpy(), theirs[1].running_mean.numpy(), rtol=1e-5, atol=1e-7
    )


def test_names_not_given_keep_the_modules_own_tensors():
    layer = kg.nn.Linear(2, 1)
    x = kg.tensor([[1.0, 2.0]])
    out = kg.func.functional_call(layer, {"weight": kg.ones(1, 2)}, x)
    assert np.allclose(out.detach().numpy(), 3.0 + layer.bias.detach().numpy())
    buffers = {"running_mean": kg.full((2,), 5.0)}
    norm = kg.nn.BatchNorm1d(2).eval()
    got = kg.func.functional_call(norm, buffers, args=(kg.zeros(1, 2),))
    assert np.allclose(got.detach().numpy(), -5.0 / np.sqrt(1 + 1e-5))
    assert norm.running_mean.tolist() == [0.0, 0.0]


def test_several_dicts_tied_weights_strict_and_errors():
    model = kg.nn.Sequential(kg.nn.Embedding(3, 2), kg.nn.Linear(2, 3, bias=False))
    model[1].weight = model[0].weight  # tied, as a language model's decoder
    x = kg.tensor([0, 2])
    zeros = kg.zeros(3, 2)
    out = kg.func.functional_call(model, {"0.weight": zeros}, (x,))
    assert out.abs().sum().item() == 0.0  # the decoder used the same (zero) tensor
    with pytest.raises(ValueError, match="tied"):
        kg.func.functional_call(model, {"0.weight": zeros, "1.weight": kg.ones(3, 2)}, (x,))
    with pytest.raises(ValueError, match="multiple dictionaries"):
        kg.func.functional_call(model, ({"0.weight": zeros}, {"0.weight": zeros}), (x,))
    layer = kg.nn.Linear(2, 1)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): 'bias'"):
        kg.func.functional_call(layer, {"weight": kg.ones(1, 2)}, (kg.ones(1, 2),), strict=True)
    with pytest.raises(RuntimeError, match="Unexpected key\\(s\\): 'extra'"):
        kg.func.functional_call(
            layer, {"weight": kg.ones(1, 2), "bias": kg.ones(1), "extra": kg.ones(1)},
            (kg.ones(1, 2),), strict=True,
        )  # fmt: skip
    kg.func.functional_call(layer, {"extra": kg.ones(1)}, (kg.ones(1, 2),))
    assert not hasattr(layer, "extra")  # an unexpected name is set for the call only


def test_the_module_is_restored_when_the_call_raises():
    layer = kg.nn.Linear(2, 1)
    weight = layer.weight
    with pytest.raises(Exception, match="2"):
        kg.func.functional_call(layer, {"weight": kg.ones(1, 3)}, (kg.ones(1, 2),))
    assert layer.weight is weight


def test_the_stateless_spelling_warns_as_pytorch_and_func_names_what_is_missing():
    layer = kg.nn.Linear(2, 1)
    with pytest.warns(FutureWarning, match=r"torch\.func\.functional_call"):
        kg.nn.utils.stateless.functional_call(layer, {}, (kg.ones(1, 2),))
    with pytest.raises(AttributeError, match=r"kg\.autograd\.grad"):
        kg.func.grad  # noqa: B018
    with pytest.raises(AttributeError, match="no function transforms"):
        kg.func.vmap  # noqa: B018
    parametrized = kg.nn.utils.parametrizations.weight_norm(kg.nn.Linear(2, 1))
    with pytest.raises(UnsupportedError, match="parametrization"):
        kg.func.functional_call(parametrized, {"weight": kg.ones(1, 2)}, (kg.ones(1, 2),))
