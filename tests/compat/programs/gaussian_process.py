"""Exact Gaussian-process regression in plain PyTorch, as the "GP regression from
scratch" tutorials write it: an RBF kernel with log-parameterised length scale, signal
and noise variances (nn.Parameter), the negative log marginal likelihood through
``torch.linalg.cholesky`` and ``torch.cholesky_solve`` (data fit, ``log`` of the
Cholesky diagonal, the constant), hyper-parameters trained with Adam, and the
predictive mean and variance at test points (``torch.linalg.solve_triangular``),
everything in float64; the likelihood checked against
``torch.distributions.MultivariateNormal(...).log_prob``.

20 noisy samples of a sine stand in for the tutorials' data; a few Adam steps."""

import math

import numpy as np
import torch
import torch.nn as nn

REQUIRES = ("linalg.cholesky", "cholesky_solve", "linalg.solve_triangular")


class GaussianProcess(nn.Module):
    def __init__(self, length_scale=1.0, signal_var=1.0, noise_var=0.1):
        super().__init__()
        self.log_length_scale = nn.Parameter(
            torch.tensor(math.log(length_scale), dtype=torch.float64)
        )
        self.log_signal_var = nn.Parameter(torch.tensor(math.log(signal_var), dtype=torch.float64))
        self.log_noise_var = nn.Parameter(torch.tensor(math.log(noise_var), dtype=torch.float64))

    def kernel(self, x1, x2):
        # squared exponential (RBF) kernel
        sqdist = torch.cdist(x1, x2, p=2) ** 2
        length_scale = self.log_length_scale.exp()
        return self.log_signal_var.exp() * torch.exp(-0.5 * sqdist / length_scale**2)

    def neg_log_marginal_likelihood(self, x, y):
        n = x.shape[0]
        K = self.kernel(x, x) + self.log_noise_var.exp() * torch.eye(n, dtype=x.dtype)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
        data_fit = 0.5 * (y.unsqueeze(-1).T @ alpha).squeeze()
        complexity = torch.log(torch.diagonal(L)).sum()
        constant = 0.5 * n * math.log(2 * math.pi)
        return data_fit + complexity + constant

    def forward(self, x_train, y_train, x_test):
        # predictive mean and variance
        n = x_train.shape[0]
        K = self.kernel(x_train, x_train) + self.log_noise_var.exp() * torch.eye(
            n, dtype=x_train.dtype
        )
        L = torch.linalg.cholesky(K)
        K_s = self.kernel(x_train, x_test)
        K_ss = self.kernel(x_test, x_test)
        alpha = torch.cholesky_solve(y_train.unsqueeze(-1), L)
        mean = (K_s.T @ alpha).squeeze(-1)
        v = torch.linalg.solve_triangular(L, K_s, upper=False)
        var = torch.diag(K_ss) - torch.sum(v**2, dim=0)
        return mean, var


def make_models():
    return {"gp": GaussianProcess(length_scale=0.5, signal_var=1.0, noise_var=0.1)}


def make_data(rng):
    x = rng.uniform(-3, 3, (20, 1))
    y = np.sin(x[:, 0]) + 0.1 * rng.standard_normal(20)
    x_test = np.linspace(-4, 4, 50).reshape(-1, 1)
    return x, y, x_test


def train(models, data, steps):
    model = models["gp"]
    x, y, x_test = (torch.from_numpy(a) for a in data)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    losses = []
    for i in range(steps):
        optimizer.zero_grad()
        loss = model.neg_log_marginal_likelihood(x, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        mean, var = model(x, y, x_test)
        std = var.clamp(min=0).sqrt()
        lower, upper = mean - 2 * std, mean + 2 * std
    assert mean.shape == (50,) and var.dtype == torch.float64
    assert bool((upper >= lower).all()) and bool((var > -1e-9).all())
    # the same likelihood through torch.distributions, as some tutorials write it
    with torch.no_grad():
        K = model.kernel(x, x) + model.log_noise_var.exp() * torch.eye(len(x), dtype=x.dtype)
        mvn = torch.distributions.MultivariateNormal(torch.zeros_like(y), covariance_matrix=K)
        nll = -mvn.log_prob(y)
        assert abs(nll.item() - model.neg_log_marginal_likelihood(x, y).item()) < 1e-8
    return losses


def check(losses):
    assert losses[-1] < losses[0]
