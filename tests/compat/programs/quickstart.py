"""Learn the Basics, "Quickstart" (FashionMNIST): the NeuralNetwork module, the train and
test loops over DataLoaders, saving and loading the model.

Random 28x28 images stand in for FashionMNIST; the loops are the tutorial's."""

import io

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

REQUIRES = ("Tensor.type",)

device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


def make_models():
    return {"model": NeuralNetwork()}


def make_data(rng):
    images = rng.random((48, 1, 28, 28)).astype("float32")
    labels = rng.integers(0, 10, 48)
    return images, labels


def train_loop(dataloader, model, loss_fn, optimizer, losses):
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        X, y = X.to(device), y.to(device)
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())


def test_loop(dataloader, model, loss_fn):
    model.eval()
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            X, y = X.to(device), y.to(device)
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    test_loss /= num_batches
    correct /= size
    return test_loss, correct


def train(models, data, steps):
    model = models["model"].to(device)
    training_data = TensorDataset(torch.from_numpy(data[0]), torch.from_numpy(data[1]))
    train_dataloader = DataLoader(training_data, batch_size=16)
    test_dataloader = DataLoader(training_data, batch_size=16)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)
    losses = []
    while len(losses) < steps:
        train_loop(train_dataloader, model, loss_fn, optimizer, losses)
        test_loss, correct = test_loop(test_dataloader, model, loss_fn)
        assert 0 <= correct <= 1
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    model = NeuralNetwork().to(device)
    model.load_state_dict(torch.load(buffer, weights_only=True))
    assert abs(test_loop(test_dataloader, model, loss_fn)[0] - test_loss) < 1e-6
    return losses[:steps]
