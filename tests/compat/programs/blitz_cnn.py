"""Deep Learning with PyTorch: A 60 Minute Blitz, "Training a Classifier" (CIFAR-10).

The tutorial's network, loss, optimizer and training loop; random 3x32x32 images stand in
for CIFAR-10 (batches of 4, as in the tutorial), and it runs a few steps."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

REQUIRES = ()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # flatten all dimensions except batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def make_models():
    return {"net": Net()}


def make_data(rng):
    images = rng.standard_normal((8, 4, 3, 32, 32)).astype("float32")
    labels = rng.integers(0, 10, (8, 4))
    return images, labels


def train(models, data, steps):
    net = models["net"]
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    losses = []
    for i in range(steps):
        inputs, labels = torch.from_numpy(data[0][i % 8]), torch.from_numpy(data[1][i % 8])
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    with torch.no_grad():  # the tutorial's evaluation: predicted classes
        _, predicted = torch.max(net(torch.from_numpy(data[0][0])), 1)
    assert tuple(predicted.shape) == (4,)
    return losses
