"""Learning PyTorch with Examples, "PyTorch: nn": the polynomial fit as
nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1)) with MSELoss(reduction="sum") and a
hand-written gradient step over model.parameters()."""

import math

import torch

REQUIRES = ()


def make_models():
    return {"model": torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))}


def make_data(rng):
    return None


def train(models, data, steps):
    model = models["model"]
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)

    loss_fn = torch.nn.MSELoss(reduction="sum")
    learning_rate = 1e-6
    losses = []
    for t in range(steps):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        losses.append(loss.item())
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
    linear_layer = model[0]
    assert (
        tuple(linear_layer.weight.shape) == (1, 3)
        and linear_layer.bias.item() == linear_layer.bias.item()
    )
    return losses


def check(losses):
    assert losses[-1] < losses[0]
