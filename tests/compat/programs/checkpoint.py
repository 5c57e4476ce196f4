"""Recipe "Saving and loading a general checkpoint in PyTorch": the model's and the
optimizer's state_dicts, the epoch and the loss saved in one dict with torch.save,
loaded with torch.load into new objects, and training resumed with model.train().

The recipe's Net (the 60-minute blitz network) on random images."""

import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

REQUIRES = ()


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def make_models():
    return {"net": Net()}


def make_data(rng):
    return rng.standard_normal((4, 3, 32, 32)).astype("float32"), rng.integers(0, 10, 4)


def step(net, optimizer, inputs, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(net(inputs), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def train(models, data, steps):
    net = models["net"]
    optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    inputs, labels = torch.from_numpy(data[0]), torch.from_numpy(data[1])
    half = steps // 2
    losses = [step(net, optimizer, inputs, labels) for _ in range(half)]

    PATH = os.path.join(tempfile.mkdtemp(), "model.pt")
    torch.save(
        {
            "epoch": half,
            "model_state_dict": net.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "loss": losses[-1],
        },
        PATH,
    )

    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    checkpoint = torch.load(PATH, weights_only=True)
    model.load_state_dict(checkpoint["model_state_dict"])
    optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
    epoch = checkpoint["epoch"]
    loss = checkpoint["loss"]
    assert epoch == half and loss == losses[-1]
    model.train()
    losses += [step(model, optimizer, inputs, labels) for _ in range(steps - half)]
    os.remove(PATH)
    return losses


def check(losses):
    assert losses[-1] < losses[0]
