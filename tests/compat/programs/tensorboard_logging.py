"""Recipe "How to use TensorBoard with PyTorch" with parts of "Visualizing Models, Data,
and Training with TensorBoard": SummaryWriter, add_scalar("Loss/train") while a linear
model trains, add_histogram of its weights, add_image, add_graph, flush and close.

The event files go to a temporary folder."""

import os
import tempfile

import torch
from torch.utils.tensorboard import SummaryWriter

REQUIRES = ("utils.tensorboard",)


def make_models():
    return {"model": torch.nn.Linear(1, 1)}


def make_data(rng):
    x = torch.arange(-5, 5, 0.1).view(-1, 1).numpy()
    y = (-5 * x + 0.1 * rng.standard_normal(x.shape)).astype("float32")
    return x, y


def train(models, data, steps):
    log_dir = tempfile.mkdtemp()
    writer = SummaryWriter(log_dir)
    x, y = torch.from_numpy(data[0]), torch.from_numpy(data[1])
    model = models["model"]
    criterion = torch.nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    writer.add_graph(model, x)
    writer.add_image("inputs", torch.rand(3, 8, 8))
    losses = []
    for epoch in range(steps):
        y1 = model(x)
        loss = criterion(y1, y)
        writer.add_scalar("Loss/train", loss, epoch)
        writer.add_histogram("weight", model.weight, epoch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    writer.flush()
    writer.close()
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(log_dir))
    return losses


def check(losses):
    assert losses[-1] < losses[0]
