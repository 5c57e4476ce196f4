""" "Spatial Transformer Networks Tutorial": the Net with its localization network
(Conv2d, MaxPool2d, ReLU(True)), the fc_loc regressor initialised to the identity
transformation through ``.data.zero_()`` and ``.data.copy_``, the stn forward
(F.affine_grid, F.grid_sample), the classifier with Dropout2d and functional dropout,
SGD on F.nll_loss, and test() with ``size_average=False`` and ``max(1,
keepdim=True)``.

Random 28x28 images stand in for MNIST (batches of 8 instead of 64)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

REQUIRES = ("nn.functional.affine_grid", "nn.functional.grid_sample", "nn.Dropout2d")

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# The tutorial starts from the identity transformation, so grid_sample samples exactly at
# pixel centres, where its gradient with respect to the grid jumps from one side's
# difference to the other's: a grid coordinate one float32 ulp apart (kernelgrad's
# affine_grid computes (2i + 1) / W - 1, PyTorch's linspace(-1, 1, W) * (W - 1) / W)
# picks the other side. The first losses agree to 1e-6, later ones to about 3e-3.
RTOL = 1e-2


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

        # Spatial transformer localization-network
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
        )

        # Regressor for the 3 * 2 affine matrix
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))

        # Initialize the weights/bias with identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    # Spatial transformer network forward function
    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)

        grid = F.affine_grid(theta, x.size())
        x = F.grid_sample(x, grid)

        return x

    def forward(self, x):
        # transform the input
        x = self.stn(x)

        # Perform the usual forward pass
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def make_models():
    return {"model": Net().to(device)}


def make_data(rng):
    images = ((rng.random((4, 8, 1, 28, 28)) - 0.1307) / 0.3081).astype("float32")
    targets = rng.integers(0, 10, (4, 8))
    return images, targets


def train(models, data, steps):
    model = models["model"]
    optimizer = optim.SGD(model.parameters(), lr=0.01)
    train_loader = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in zip(*data)]
    losses = []
    model.train()
    for batch_idx in range(steps):
        data_batch, target = train_loader[batch_idx % len(train_loader)]
        data_batch, target = data_batch.to(device), target.to(device)

        optimizer.zero_grad()
        output = model(data_batch)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    # test()
    with torch.no_grad():
        model.eval()
        test_loss = 0
        correct = 0
        for data_batch, target in train_loader[:2]:
            data_batch, target = data_batch.to(device), target.to(device)
            output = model(data_batch)

            # sum up batch loss
            test_loss += F.nll_loss(output, target, size_average=False).item()
            # get the index of the max log-probability
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()
        assert 0 <= correct <= 16 and test_loss > 0
        transformed = model.stn(train_loader[0][0].to(device)).cpu()
        assert tuple(transformed.shape) == (8, 1, 28, 28)
    return losses
