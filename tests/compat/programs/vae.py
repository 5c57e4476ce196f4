"""pytorch/examples "vae": the variational autoencoder (784-400-20 encoder with mean and
log-variance heads, reparameterisation with randn_like, sigmoid decoder), the
binary-cross-entropy plus KL-divergence loss, Adam, and sampling from the prior.

Random images in [0, 1] stand in for MNIST."""

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

REQUIRES = ()


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def make_models():
    return {"model": VAE()}


def make_data(rng):
    return rng.random((32, 1, 28, 28)).astype("float32")


def train(models, data, steps):
    model = models["model"]
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(data)), batch_size=8
    )
    model.train()
    losses = []
    while len(losses) < steps:
        for batch_idx, (data_batch,) in enumerate(train_loader):
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data_batch)
            loss = loss_function(recon_batch, data_batch, mu, logvar)
            loss.backward()
            optimizer.step()
            losses.append(loss.item() / len(data_batch))
    model.eval()
    with torch.no_grad():
        sample = torch.randn(64, 20)
        sample = model.decode(sample).cpu()
        assert tuple(sample.view(64, 1, 28, 28).shape) == (64, 1, 28, 28)
    return losses[:steps]


def check(losses):
    assert losses[-1] < losses[0]
