"""Module forward hooks (``register_forward_pre_hook``, ``register_forward_hook``) as
PyTorch runs them: the feature-extraction idiom, replaced arguments and outputs,
keyword arguments, order, removal and ``always_call``; the same programs under PyTorch
give the same results."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg


def _hook_program(lib):
    """Feature extraction, an input pre-hook, an output-replacing hook and removal."""
    nn = lib.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    rng = np.random.default_rng(0)
    state = {
        k: lib.tensor(rng.standard_normal(tuple(v.shape)).astype("f4"))
        for k, v in model.state_dict().items()
    }
    model.load_state_dict(state)
    activation = {}

    def get_activation(name):
        def hook(model, input, output):  # noqa: A002 (the idiom's names)
            activation[name] = output.detach()

        return hook

    model[0].register_forward_hook(get_activation("fc1"))
    calls = []
    double = model[2].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    shift = model[2].register_forward_hook(lambda m, args, out: out + 1)
    model[2].register_forward_hook(lambda m, args, out: calls.append("last"))
    model[2].register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    x = lib.tensor(np.array([[1.0, -2.0, 0.5], [-1.0, 2.0, 1.5]], dtype="f4"))
    first = model(x)
    first.sum().backward()
    grad = model[0].weight.grad.numpy().copy()
    double.remove()
    with shift:
        second = model(x)
    third = model(x)
    return (
        activation["fc1"].numpy(),
        first.detach().numpy(),
        second.detach().numpy(),
        third.detach().numpy(),
        grad,
        calls,
    )


def test_forward_hooks_run_as_in_pytorch():
    ours = _hook_program(kg)
    out = kg.nn.Sequential(kg.nn.Linear(3, 4), kg.nn.ReLU(), kg.nn.Linear(4, 2))
    assert "_forward_hooks" not in out.__dict__  # no hooks: the plain forward call
    assert ours[5] == ["first", "last"] * 3
    # the removed handles: no doubling after the first call, no +1 after the with block
    assert not np.allclose(ours[1], ours[2]) and not np.allclose(ours[2], ours[3])
    torch = pytest.importorskip("torch")
    theirs = _hook_program(torch)
    for a, b in zip(ours[:5], theirs[:5]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert ours[5] == theirs[5]


def test_hooks_with_kwargs_see_and_replace_keyword_arguments():
    class Scale(kg.nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    module = Scale()
    seen = []
    module.register_forward_pre_hook(
        lambda m, args, kwargs: (args, {**kwargs, "factor": 3.0}), with_kwargs=True
    )
    module.register_forward_hook(
        lambda m, args, kwargs, out: seen.append(kwargs["factor"]), with_kwargs=True
    )
    assert module(kg.tensor([2.0]), factor=5.0).tolist() == [6.0]
    assert seen == [3.0]
    module.register_forward_pre_hook(lambda m, args, kwargs: "bad", with_kwargs=True)
    with pytest.raises(RuntimeError, match="must return None or a tuple"):
        module(kg.tensor([2.0]))


def test_always_call_hooks_run_when_forward_raises():
    class Broken(kg.nn.Module):
        def forward(self, x):
            raise ValueError("broken forward")

    module = Broken()
    seen = []
    module.register_forward_hook(
        lambda m, args, out: seen.append(("always", out)), always_call=True
    )
    module.register_forward_hook(lambda m, args, out: seen.append("normal"))
    with pytest.raises(ValueError, match="broken forward"):
        module(kg.ones(1))
    assert seen == [("always", None)]
    with pytest.raises(TypeError, match="callable"):
        module.register_forward_hook("not a function")
