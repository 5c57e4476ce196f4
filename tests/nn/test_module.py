"""Module mechanics: discovery of parameters, buffers and children; modes; state_dict;
moving; containers; printing."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import nn
from tests.helpers import as_numpy


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(kg.ones(3))
        self.linear = nn.Linear(3, 2)
        self.register_buffer("count", kg.zeros(1))
        self.register_buffer("cache", kg.zeros(2), persistent=False)
        self.not_a_parameter = kg.ones(4)  # a plain tensor attribute: ignored
        self.layers = [nn.Linear(2, 2)]  # a plain list: ignored, as in PyTorch

    def forward(self, x):
        return self.linear(x * self.scale)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(2, 1, bias=False))
        self.shared = self.block.linear  # the same module twice: counted once

    def forward(self, x):
        return self.head(self.block(x))


def test_parameters_buffers_and_children_are_found_by_walking_attributes():
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["block.scale", "block.linear.weight", "block.linear.bias", "head.1.weight"]
    assert len(list(net.parameters())) == 4
    assert [name for name, _ in net.named_buffers()] == ["block.count", "block.cache"]
    assert [name for name, _ in net.named_children()] == ["block", "head", "shared"]
    assert [name for name, _ in net.named_modules()] == [
        "",
        "block",
        "block.linear",
        "head",
        "head.0",
        "head.1",
    ]
    assert net.num_parameters() == 3 + 6 + 2 + 2
    assert all(p.requires_grad for p in net.parameters())


def test_state_dict_holds_parameters_and_persistent_buffers():
    net = Net()
    state = net.state_dict()
    assert list(state) == [
        "block.scale",
        "block.count",
        "block.linear.weight",
        "block.linear.bias",
        "head.1.weight",
        "shared.weight",  # a module reachable under two names is saved under both
        "shared.bias",
    ]
    assert not any(t.requires_grad for t in state.values())
    # shares memory with the module
    with kg.no_grad():
        net.block.scale.fill_(5.0)
    assert as_numpy(state["block.scale"]).tolist() == [5.0, 5.0, 5.0]


def test_load_state_dict_round_trip_and_error_report():
    source, target = Net(), Net()
    target.load_state_dict(source.state_dict())
    assert list(source.state_dict()) == list(target.state_dict())
    for (name, a), (_, b) in zip(
        source.state_dict().items(), target.state_dict().items(), strict=True
    ):
        np.testing.assert_array_equal(as_numpy(a), as_numpy(b), err_msg=name)

    broken = dict(source.state_dict())
    del broken["shared.weight"], broken["shared.bias"]
    del broken["block.scale"]
    broken["extra"] = kg.zeros(1)
    broken["head.1.weight"] = kg.zeros(3, 3)
    with pytest.raises(nn.StateDictError) as error:
        target.load_state_dict(broken)
    message = str(error.value)
    assert "missing keys: block.scale, shared.weight, shared.bias" in message
    assert "unexpected keys: extra" in message
    assert "head.1.weight: the module has shape (1, 2), the state_dict has (3, 3)" in message

    del broken["head.1.weight"]
    result = target.load_state_dict(broken, strict=False)
    assert result.missing_keys == ["block.scale", "head.1.weight", "shared.weight", "shared.bias"]
    assert result.unexpected_keys == ["extra"]


def test_load_state_dict_accepts_numpy_and_converts_dtype():
    layer = nn.Linear(2, 1)
    layer.load_state_dict({"weight": np.array([[1.0, 2.0]]), "bias": np.array([3.0])})
    assert layer.weight.dtype is kg.float32
    assert as_numpy(layer.weight).tolist() == [[1.0, 2.0]]
    assert as_numpy(layer(kg.ones(1, 2))).tolist() == [[6.0]]


def test_train_eval_and_zero_grad():
    net = Net()
    assert net.training and net.block.linear.training
    net.eval()
    assert not net.training and not net.head[1].training
    net.train()
    assert net.head[0].training
    net(kg.ones(4, 3)).sum().backward()
    assert net.block.scale.grad is not None
    net.zero_grad(set_to_none=False)
    assert as_numpy(net.block.scale.grad).tolist() == [0.0, 0.0, 0.0]
    net.zero_grad()
    assert net.block.scale.grad is None


def test_to_keeps_parameter_identity_and_converts_floating_state():
    net = Net()
    with kg.no_grad():
        net.block.count.fill_(7.0)
    before = {name: as_numpy(t).copy() for name, t in net.state_dict().items()}
    x = np.random.default_rng(5).standard_normal((2, 3))
    output = as_numpy(net(kg.tensor(x, dtype=kg.float32)))
    parameter = net.block.scale
    optimizer = kg.optim.SGD(net.parameters(), lr=0.1)
    net.to(kg.float64)
    assert net.block.scale is parameter and parameter.dtype is kg.float64
    assert net.block.count.dtype is kg.float64
    for name, value in net.state_dict().items():  # the same values, now in float64
        np.testing.assert_array_equal(as_numpy(value), before[name].astype(np.float64), name)
    double_output = net(kg.tensor(x, dtype=kg.float64))
    np.testing.assert_allclose(as_numpy(double_output), output, rtol=1e-6, atol=1e-7)
    double_output.sum().backward()
    gradient = as_numpy(net.block.scale.grad).copy()
    optimizer.step()  # the optimizer still updates the (same) parameters
    np.testing.assert_allclose(as_numpy(net.block.scale), 1.0 - 0.1 * gradient, rtol=1e-12)
    updated = as_numpy(net.block.linear.weight).copy()
    assert net.double() is net and net.float().block.linear.weight.dtype is kg.float32
    np.testing.assert_array_equal(as_numpy(net.block.linear.weight), updated.astype(np.float32))
    bn = nn.BatchNorm1d(2).to(kg.float64)
    assert bn.num_batches_tracked.dtype is kg.int64  # integer buffers stay integer
    with pytest.raises(TypeError):
        net.to(kg.int32)


def test_to_device_moves_parameters_and_buffers(device):
    net = Net()
    before = {name: as_numpy(t).copy() for name, t in net.state_dict().items()}
    expected = as_numpy(net(kg.ones(2, 3)))
    net.to(device)
    assert all(p.device == device for p in net.parameters())
    assert all(b.device == device for b in net.buffers())
    for name, value in net.state_dict().items():
        np.testing.assert_array_equal(as_numpy(value), before[name], err_msg=name)
    out = net(kg.ones(2, 3, device=device))
    assert out.device == device
    np.testing.assert_allclose(as_numpy(out), expected, rtol=1e-6, atol=1e-7)


def test_assignment_rules():
    net = Net()
    with pytest.raises(TypeError, match="Parameter"):
        net.block.scale = kg.ones(3)  # a tensor into a parameter slot
    net.block.scale = nn.Parameter(kg.zeros(3))
    net.block.linear.bias = None  # optional parameters may be removed
    assert "block.linear.bias" not in net.state_dict()
    with pytest.raises(TypeError, match="buffer"):
        net.block.count = 3
    del net.block.count
    assert "block.count" not in net.state_dict()

    class Forgetful(nn.Module):
        def __init__(self) -> None:
            self.weight = nn.Parameter(kg.ones(1))

    with pytest.raises(AttributeError, match="super"):
        Forgetful()


def test_parameter_basics():
    p = nn.Parameter(kg.zeros(2))
    assert isinstance(p, kg.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not nn.Parameter(kg.zeros(2), requires_grad=False).requires_grad
    assert type(p * 2) is kg.Tensor
    with pytest.raises(TypeError):
        nn.Parameter(kg.zeros(2, dtype=kg.int64))


def test_deepcopy_and_pickle_give_independent_modules():
    net = Net()
    clone = copy.deepcopy(net)
    assert isinstance(clone.block.scale, nn.Parameter)
    assert clone.shared is clone.block.linear  # sharing is preserved
    with kg.no_grad():
        clone.block.scale.fill_(7.0)
    assert as_numpy(net.block.scale).tolist() == [1.0, 1.0, 1.0]
    restored = pickle.loads(pickle.dumps(net))
    np.testing.assert_array_equal(
        as_numpy(restored.block.linear.weight), as_numpy(net.block.linear.weight)
    )
    assert isinstance(restored.block.scale, nn.Parameter)


def test_sequential_module_list_and_module_dict():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    seq.append(nn.Sigmoid())
    assert [name for name, _ in seq.named_children()] == ["0", "1", "2", "3"]
    assert seq(kg.zeros(5, 2)).shape == (5, 1)
    from collections import OrderedDict

    named = nn.Sequential(OrderedDict([("encode", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert [name for name, _ in named.named_parameters()] == ["encode.weight", "encode.bias"]

    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
    layers.append(nn.Linear(2, 3))
    layers.insert(0, nn.Identity())
    assert len(layers) == 4 and isinstance(layers[0], nn.Identity)
    assert [name for name, _ in layers.named_parameters()][:2] == ["1.weight", "1.bias"]
    del layers[0]
    assert [name for name, _ in layers.named_parameters()][:2] == ["0.weight", "0.bias"]

    heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 2)})
    assert list(heads) == ["a", "b"] and "a" in heads and len(heads) == 2
    assert [name for name, _ in heads.named_parameters()] == [
        "a.weight",
        "a.bias",
        "b.weight",
        "b.bias",
    ]


def test_repr_is_readable():
    text = repr(nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.Linear(4, 2)))
    assert text == (
        "Sequential(\n"
        "  (0): Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))\n"
        "  (1): ReLU()\n"
        "  (2): Linear(in_features=4, out_features=2, bias=True)\n"
        ")"
    )


def test_apply_and_requires_grad():
    net = Net()
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and "Linear" in seen
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
