"""Reference models: shapes, parameter counts, agreement with the same network in
PyTorch, and short training runs whose loss falls."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.models import CNN, MLP, LeNet5, build_model
from tests.helpers import assert_close

MLP_PARAMETERS = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10


@pytest.mark.parametrize(
    "name, count", [("lenet5", 61_706), ("mlp", MLP_PARAMETERS), ("cnn", 421_642)]
)
def test_models_map_images_to_ten_logits(name, count):
    model = build_model(name)
    assert model.num_parameters() == count
    assert model(kg.zeros(2, 1, 28, 28)).shape == (2, 10)


def test_build_model_names():
    assert isinstance(build_model("LeNet-5"), LeNet5)
    assert isinstance(build_model("lenet"), LeNet5)
    assert isinstance(build_model("MLP", hidden=(32,)), MLP)
    assert isinstance(build_model("cnn", channels=(4, 8), hidden=16), CNN)
    with pytest.raises(ValueError, match="lenet5, mlp, cnn"):
        build_model("resnet")


@pytest.mark.torch
def test_lenet5_matches_the_same_network_in_torch():
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    theirs = tnn.Sequential(
        tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(6, 16, 5), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
        tnn.Linear(400, 120), tnn.ReLU(), tnn.Linear(120, 84), tnn.ReLU(), tnn.Linear(84, 10),
    )  # fmt: skip
    mine = LeNet5()
    their_state = [v.detach().numpy() for v in theirs.state_dict().values()]
    mine.load_state_dict(dict(zip(mine.state_dict(), their_state, strict=True)))
    images = np.random.default_rng(0).standard_normal((4, 1, 28, 28)).astype(np.float32)
    labels = np.array([1, 5, 9, 0])
    loss = F.cross_entropy(mine(kg.tensor(images)), kg.tensor(labels))
    expected = tnn.functional.cross_entropy(theirs(torch.tensor(images)), torch.tensor(labels))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    expected.backward()
    for p, q in zip(mine.parameters(), theirs.parameters(), strict=True):
        assert_close(p.grad, q.grad.numpy(), rtol=1e-3, atol=1e-5)


def test_short_training_run_reduces_the_loss(device, simulated):
    """A few Adam steps on a fixed batch (a tiny network under the simulator)."""
    kg.manual_seed(0)
    rng = np.random.default_rng(0)
    if simulated:  # the same layers, on 6x6 images
        model = kg.nn.Sequential(
            kg.nn.Conv2d(1, 2, 3, padding=1), kg.nn.ReLU(), kg.nn.MaxPool2d(2),
            kg.nn.Flatten(), kg.nn.Linear(18, 10),
        )  # fmt: skip
        images = rng.standard_normal((2, 1, 6, 6)).astype(np.float32)
        steps, lr = 5, 0.03
    else:
        model = LeNet5()
        images = rng.standard_normal((16, 1, 28, 28)).astype(np.float32)
        steps, lr = 15, 3e-3
    labels = rng.integers(0, 10, len(images))
    model.to(device)
    x, y = kg.tensor(images, device=device), kg.tensor(labels, device=device)
    optimizer = kg.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0]
    model.eval()
    with kg.no_grad():
        predictions = model(x).argmax(1)
    assert predictions.device == device
