"""``nn.DataParallel`` / ``nn.parallel.data_parallel`` without CUDA or on one device: a
wrapped model trains exactly as the unwrapped one, its state dict has PyTorch's
``module.`` keys, and several devices are refused with the way kernelgrad does it."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import UnsupportedError

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-1.0, 1.0, 0.0], [2.0, 0.5, 1.0]], "f4")
Y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]], "f4")


def _train(wrap, device):
    kg.manual_seed(0)
    model = kg.nn.Sequential(kg.nn.Linear(3, 4), kg.nn.Tanh(), kg.nn.Linear(4, 2)).to(device)
    net = kg.nn.DataParallel(model) if wrap else model
    # (with a GPU, DataParallel has moved the model to cuda:0 even in the CPU pass)
    device = next(model.parameters()).device
    optimizer = kg.optim.SGD(net.parameters(), lr=0.5)
    x = kg.tensor(X, device=device)
    y = kg.tensor(Y, device=device)
    losses = []
    for _ in range(2):
        optimizer.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    weights = {k: v.cpu().numpy() for k, v in model.state_dict().items()}
    return net, losses, weights, device


def test_a_wrapped_model_trains_as_the_unwrapped_one(device):
    wrapped, losses, weights, placed = _train(True, device)
    _, plain_losses, plain_weights, _ = _train(False, placed)
    assert losses == plain_losses and losses[-1] < losses[0]
    for key, value in plain_weights.items():
        np.testing.assert_array_equal(weights[key], value)
    assert list(wrapped.state_dict()) == ["module." + key for key in plain_weights]
    assert isinstance(wrapped.module, kg.nn.Sequential)
    out = kg.nn.parallel.data_parallel(wrapped.module, kg.tensor(X, device=device))
    np.testing.assert_array_equal(out.cpu().numpy(), wrapped(kg.tensor(X)).cpu().numpy())


def test_state_dict_keys_and_loading_match_pytorch():
    torch = pytest.importorskip("torch")
    ours = kg.nn.DataParallel(kg.nn.Sequential(kg.nn.Linear(3, 2), kg.nn.BatchNorm1d(2)))
    theirs = torch.nn.DataParallel(
        torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    )
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.eval()
    ours.eval()
    with torch.no_grad():
        theirs.module[1].running_mean.fill_(0.25)
    ours.load_state_dict({k: kg.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = np.ones((2, 3), "f4")
    np.testing.assert_allclose(
        ours(kg.tensor(x)).detach().cpu().numpy(),
        theirs(torch.tensor(x)).detach().numpy(),
        rtol=1e-6,
    )


def test_several_devices_are_refused_naming_distributed_data_parallel(monkeypatch):
    from kernelgrad.nn.parallel import _data_parallel

    monkeypatch.setattr(_data_parallel, "_cuda_device_count", lambda: 2)
    with pytest.raises(UnsupportedError, match="DistributedDataParallel") as error:
        kg.nn.DataParallel(kg.nn.Linear(2, 2))
    assert "device_ids=[0]" in str(error.value)
    with pytest.raises(UnsupportedError, match=r"device_ids=\[0, 1\]"):
        kg.nn.parallel.data_parallel(kg.nn.Linear(2, 2), kg.ones(1, 2), device_ids=["cuda:0", 1])
