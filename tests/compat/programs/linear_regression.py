"""pytorch-tutorial (yunjey) "Linear Regression": NumPy data through torch.from_numpy,
nn.Linear(1, 1), MSELoss, SGD, predictions back to NumPy with detach().numpy(), and
torch.save of the state_dict; with the device idiom of the series' later examples
(the GPU when there is one)."""

import io

import numpy as np
import torch
import torch.nn as nn

REQUIRES = ()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
input_size, output_size, learning_rate = 1, 1, 0.01


def make_models():
    return {"model": nn.Linear(input_size, output_size)}


def make_data(rng):
    x_train = np.array(
        [[3.3], [4.4], [5.5], [6.71], [6.93], [4.168], [9.779], [6.182], [7.59], [2.167],
         [7.042], [10.791], [5.313], [7.997], [3.1]], dtype=np.float32
    )  # fmt: skip
    y_train = (0.3 * x_train + 0.5 + rng.normal(0, 0.1, x_train.shape)).astype(np.float32)
    return x_train, y_train


def train(models, data, steps):
    model = models["model"].to(device)
    x_train, y_train = data
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    losses = []
    for epoch in range(steps):
        inputs = torch.from_numpy(x_train).to(device)
        targets = torch.from_numpy(y_train).to(device)
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    predicted = model(torch.from_numpy(x_train).to(device)).detach().cpu().numpy()
    assert predicted.shape == (15, 1)
    torch.save(model.state_dict(), io.BytesIO())
    return losses


def check(losses):
    assert losses[-1] < losses[0]
