"""senya-ashukha/real-nvp-pytorch (real-nvp-pytorch.ipynb): a RealNVP normalizing flow on
two moons. Six affine coupling layers with alternating binary masks (held in an
``nn.Parameter(mask, requires_grad=False)``), scale nets ending in Tanh and translation
nets, ``f`` (data to latent, the log-det-Jacobian summed from ``new_zeros``) and ``g``
(latent to data), a ``distributions.MultivariateNormal`` prior, Adam over the
parameters that require grad with ``loss.backward(retain_graph=True)``, and sampling
from the prior through ``g``.

The nets are 64 wide instead of 256, the moons (sklearn's ``make_moons`` written with
NumPy) are 64 points drawn once instead of fresh each step, and a few steps run
(the notebook runs 5001)."""

import numpy as np
import torch
from torch import distributions, nn

REQUIRES = ("distributions.MultivariateNormal",)


class RealNVP(nn.Module):
    def __init__(self, nets, nett, mask, prior):
        super(RealNVP, self).__init__()

        self.prior = prior
        self.mask = nn.Parameter(mask, requires_grad=False)
        self.t = torch.nn.ModuleList([nett() for _ in range(len(masks))])
        self.s = torch.nn.ModuleList([nets() for _ in range(len(masks))])

    def g(self, z):
        x = z
        for i in range(len(self.t)):
            x_ = x * self.mask[i]
            s = self.s[i](x_) * (1 - self.mask[i])
            t = self.t[i](x_) * (1 - self.mask[i])
            x = x_ + (1 - self.mask[i]) * (x * torch.exp(s) + t)
        return x

    def f(self, x):
        log_det_J, z = x.new_zeros(x.shape[0]), x
        for i in reversed(range(len(self.t))):
            z_ = self.mask[i] * z
            s = self.s[i](z_) * (1 - self.mask[i])
            t = self.t[i](z_) * (1 - self.mask[i])
            z = (1 - self.mask[i]) * (z - t) * torch.exp(-s) + z_
            log_det_J -= s.sum(dim=1)
        return z, log_det_J

    def log_prob(self, x):
        z, logp = self.f(x)
        return self.prior.log_prob(z) + logp

    def sample(self, batchSize):
        z = self.prior.sample((batchSize, 1))
        logp = self.prior.log_prob(z)
        x = self.g(z)
        return x


nets = lambda: nn.Sequential(
    nn.Linear(2, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.LeakyReLU(), nn.Linear(64, 2), nn.Tanh()
)
nett = lambda: nn.Sequential(
    nn.Linear(2, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.LeakyReLU(), nn.Linear(64, 2)
)
masks = torch.from_numpy(np.array([[0, 1], [1, 0]] * 3).astype(np.float32))
prior = distributions.MultivariateNormal(torch.zeros(2), torch.eye(2))


def make_models():
    flow = RealNVP(nets, nett, masks, prior)
    return {"flow": flow}


def make_moons(rng, n_samples=100, noise=None):
    # sklearn.datasets.make_moons
    n_out = n_samples // 2
    n_in = n_samples - n_out
    outer_circ_x = np.cos(np.linspace(0, np.pi, n_out))
    outer_circ_y = np.sin(np.linspace(0, np.pi, n_out))
    inner_circ_x = 1 - np.cos(np.linspace(0, np.pi, n_in))
    inner_circ_y = 1 - np.sin(np.linspace(0, np.pi, n_in)) - 0.5
    X = np.vstack([np.append(outer_circ_x, inner_circ_x), np.append(outer_circ_y, inner_circ_y)]).T
    y = np.hstack([np.zeros(n_out, dtype=np.intp), np.ones(n_in, dtype=np.intp)])
    if noise is not None:
        X += rng.normal(scale=noise, size=X.shape)
    return X, y


def make_data(rng):
    return make_moons(rng, n_samples=64, noise=0.05)[0].astype(np.float32)


def train(models, data, steps):
    flow = models["flow"]
    optimizer = torch.optim.Adam([p for p in flow.parameters() if p.requires_grad == True], lr=1e-4)  # noqa: E712
    losses = []
    for t in range(steps):
        noisy_moons = data
        loss = -flow.log_prob(torch.from_numpy(noisy_moons)).mean()

        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        losses.append(loss.item())

    # the notebook's figures: the data mapped to the latent space, and samples
    z = flow.f(torch.from_numpy(data))[0].detach().numpy()
    x = flow.sample(100).detach().numpy()
    assert z.shape == (64, 2) and x.shape == (100, 1, 2)
    assert np.isfinite(z).all() and np.isfinite(x).all()
    return losses


def check(losses):
    assert losses[-1] < losses[0]
