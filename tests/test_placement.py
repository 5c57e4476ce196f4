"""``kg.on``: inputs moved in, results moved back (both directions), nesting, containers,
the home-device rules, gradients and in-place writes.

Backend-parametrised: ``device`` is "cpu" or "cuda". With "cuda" both directions cross
devices (CPU -> CUDA -> CPU and CUDA -> CPU -> CUDA); with "cpu" the same code paths run
without a copy.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.device import as_device
from tests.helpers import assert_close

Pair = namedtuple("Pair", ["first", "second"])


def test_inputs_in_results_back_from_the_host(device):
    x = kg.tensor([1.0, 2.0, 3.0])
    seen = {}

    def fn(t):
        seen["input"] = t.device
        seen["created"] = kg.zeros(1).device
        return t * 2

    result = kg.on(device, fn, x)
    assert seen["input"] == as_device(device)
    assert seen["created"] == as_device(device)  # creation defaults to the block's device
    assert result.device == as_device("cpu")  # back where x came from
    assert_close(result, [2.0, 4.0, 6.0])


def test_inputs_in_results_back_to_the_device(device):
    """The other direction: device tensors run on the CPU and come back to the device."""
    x = kg.tensor([1.0, -2.0], device=device)
    result = kg.on("cpu", lambda t: (t.relu() + 1, t.device), x)
    values, inside = result
    assert inside == as_device("cpu")
    assert values.device == as_device(device)
    assert_close(values, [2.0, 1.0])


def test_decorator_form(device):
    @kg.on(device)
    def affine(x, weight, bias=None):
        assert x.device == weight.device == as_device(device)
        return x @ weight + (bias if bias is not None else 0)

    x = kg.ones(2, 3)
    w = kg.ones(3, 4)
    out = affine(x, w, bias=kg.ones(4))
    assert out.device == as_device("cpu") and out.shape == (2, 4)
    assert_close(out, np.full((2, 4), 4.0))
    assert affine.__name__ == "affine"


def test_nested_containers_in_and_out(device):
    data = {
        "pair": Pair(kg.ones(2), [kg.zeros(1), 3, "text"]),
        "ordered": OrderedDict(w=kg.full((2,), 5.0)),
    }

    def fn(batch):
        first, (zero, three, text) = batch["pair"]
        assert first.device == zero.device == batch["ordered"]["w"].device == as_device(device)
        return {"sum": first + batch["ordered"]["w"], "items": (zero, three, text)}

    result = kg.on(device, fn, data)
    assert result["sum"].device == as_device("cpu")
    assert result["items"][0].device == as_device("cpu")
    assert result["items"][1:] == (3, "text")
    assert_close(result["sum"], [6.0, 6.0])


def test_nesting_returns_each_result_to_its_own_home(device):
    def inner(t):
        assert t.device == as_device("cpu")
        return t + 1

    def outer(t):
        assert t.device == as_device(device)
        middle = kg.on("cpu", inner, t)
        assert middle.device == as_device(device)  # the inner block's home is the device
        return middle * 10

    result = kg.on(device, outer, kg.tensor([1.0, 2.0]))
    assert result.device == as_device("cpu")
    assert_close(result, [20.0, 30.0])


def test_home_device_without_tensor_inputs(device):
    assert kg.on(device, lambda: kg.arange(3)).device == as_device("cpu")
    with kg.device(device):
        made = kg.on("cpu", lambda: kg.arange(3))
    assert made.device == as_device(device)  # the default device at the call


def test_home_device_with_inputs_on_several_devices(device):
    a = kg.ones(2)
    b = kg.ones(2, device=device)
    result = kg.on(device, lambda x, y: x + y, a, b)
    assert result.device == kg.default_device()  # inputs disagree: the default device
    with kg.device(device):
        inside = kg.on(device, lambda x, y: x + y, a, b)
    assert inside.device == as_device(device)


def test_gradients_flow_back_through_the_moves(device):
    x = kg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = kg.on(device, lambda t: (t * t).sum(), x)
    assert loss.device == as_device("cpu")
    loss.backward()
    assert x.grad.device == as_device("cpu")
    assert_close(x.grad, [2.0, 4.0, 6.0])
    w = kg.tensor([1.0, -1.0], device=device, requires_grad=True)
    out = kg.on("cpu", lambda t: (t.exp()).sum(), w)
    out.backward()
    assert w.grad.device == as_device(device)
    assert_close(w.grad, np.exp([1.0, -1.0]), rtol=1e-6)


def test_in_place_changes_are_written_back(device):
    x = kg.tensor([1.0, 2.0])
    same = kg.on(device, lambda t: t.mul_(3), x)
    assert_close(x, [3.0, 6.0])  # as if the function had run on x itself
    assert same is x  # an input returned as it is comes back as the caller's tensor
    y = kg.tensor([1.0, 2.0])
    kg.on(device, lambda t: t * 3, y)
    assert_close(y, [1.0, 2.0])  # untouched inputs stay untouched


def test_a_tensor_passed_twice_is_moved_once(device):
    x = kg.ones(3)

    def fn(a, b):
        assert a is b
        return a

    kg.on(device, fn, x, x)


def test_non_tensor_arguments_and_results_pass_through(device):
    assert kg.on(device, lambda n, s="x": (n * 2, s), 4, s="y") == (8, "y")


def test_usage_errors():
    with pytest.raises(TypeError, match="must be callable"):
        kg.on("cpu", 3)
    with pytest.raises(TypeError, match="no further arguments"):
        kg.on("cpu", None, 1)
    with pytest.raises(ValueError, match="unknown device type"):
        kg.on("tpu", lambda: 0)
