"""A Gentle Introduction to torch.autograd: gradients of Q = 3a^3 - b^2 with an external
gradient, the graph through grad_fn.next_functions, torch.no_grad and
torch.inference_mode, and fine-tuning with frozen parameters (requires_grad = False,
a new classifier layer, an optimizer over its parameters only)."""

import torch
from torch import nn, optim

REQUIRES = ()


def make_models():
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5))  # "pretrained"
    return {"model": model, "classifier": nn.Linear(8, 3)}


def make_data(rng):
    return rng.standard_normal((4, 6)).astype("float32"), rng.integers(0, 3, 4)


def train(models, data, steps):
    a = torch.tensor([2.0, 3.0], requires_grad=True)
    b = torch.tensor([6.0, 4.0], requires_grad=True)
    Q = 3 * a**3 - b**2
    external_grad = torch.tensor([1.0, 1.0])
    Q.backward(gradient=external_grad)
    assert (9 * a**2 == a.grad).all() and (-2 * b == b.grad).all()

    x = torch.rand(5, 5)
    y = torch.rand(5, 5)
    z = torch.rand((5, 5), requires_grad=True)
    assert not (x + y).requires_grad and (x + z).requires_grad
    loss = (x * z).relu().sum()
    assert loss.grad_fn.name() == "SumBackward0"
    assert loss.grad_fn.next_functions[0][0].name() == "ReluBackward0"
    with torch.no_grad():
        assert not (x * z).requires_grad
    with torch.inference_mode():
        assert not (x * z).requires_grad

    model = models["model"]
    for param in model.parameters():
        param.requires_grad = False
    model[2] = models["classifier"]  # a new classifier, the only part that trains
    optimizer = optim.SGD(model[2].parameters(), lr=0.1, momentum=0.9)
    inputs, labels = torch.from_numpy(data[0]), torch.from_numpy(data[1])
    frozen = model[0].weight.clone()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert model[0].weight.grad is None and (model[0].weight == frozen).all()
    return losses


def check(losses):
    assert losses[-1] < losses[0]
