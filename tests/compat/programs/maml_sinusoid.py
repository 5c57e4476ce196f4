"""Model-agnostic meta-learning (Finn et al., 2017) on sinusoid regression, written the
common way in plain PyTorch (as in the MAML tutorials and dragen1860/MAML-Pytorch): a
functional forward with explicit weights (F.linear(x, w, b)), inner-loop updates
``w - inner_lr * g`` from torch.autograd.grad(..., create_graph=True), and an outer Adam
step through the inner updates (second-order MAML).

Each task is a sinusoid ``A sin(x + phase)``; a meta-batch of tasks with K support and K
query points each, drawn with NumPy; the network is smaller (1-20-20-1)."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

REQUIRES = ("autograd.grad",)

inner_lr, meta_lr, inner_steps, meta_batch, K = 0.01, 1e-3, 2, 4, 10


class MAMLNet(nn.Module):
    def __init__(self, dims=(1, 20, 20, 1)):
        super().__init__()
        self.params = nn.ParameterList()
        for fan_in, fan_out in zip(dims[:-1], dims[1:]):
            w = nn.Parameter(torch.empty(fan_out, fan_in))
            nn.init.kaiming_normal_(w)
            self.params.append(w)
            self.params.append(nn.Parameter(torch.zeros(fan_out)))

    def forward(self, x, params=None):
        if params is None:
            params = list(self.params)
        n = len(params) // 2
        for i in range(n):
            w, b = params[2 * i], params[2 * i + 1]
            x = F.linear(x, w, b)
            if i < n - 1:
                x = F.relu(x)
        return x


def make_models():
    return {"model": MAMLNet()}


def make_data(rng):
    def sample_tasks(n):
        amplitude = rng.uniform(0.1, 5.0, (n, 1, 1))
        phase = rng.uniform(0, np.pi, (n, 1, 1))
        x = rng.uniform(-5.0, 5.0, (n, 2 * K, 1))
        return x.astype("float32"), (amplitude * np.sin(x + phase)).astype("float32")

    return [sample_tasks(meta_batch) for _ in range(8)]


def inner_adapt(model, x_support, y_support):
    fast_weights = list(model.params)
    for _ in range(inner_steps):
        loss = F.mse_loss(model(x_support, fast_weights), y_support)
        grads = torch.autograd.grad(loss, fast_weights, create_graph=True)
        fast_weights = [w - inner_lr * g for w, g in zip(fast_weights, grads)]
    return fast_weights


def train(models, data, steps):
    model = models["model"]
    meta_optimizer = torch.optim.Adam(model.parameters(), lr=meta_lr)
    losses = []
    for step in range(steps):
        xs, ys = data[step % len(data)]
        xs, ys = torch.from_numpy(xs), torch.from_numpy(ys)
        meta_optimizer.zero_grad()
        meta_loss = 0.0
        for task in range(meta_batch):
            x_support, y_support = xs[task, :K], ys[task, :K]
            x_query, y_query = xs[task, K:], ys[task, K:]
            fast_weights = inner_adapt(model, x_support, y_support)
            meta_loss = meta_loss + F.mse_loss(model(x_query, fast_weights), y_query)
        meta_loss = meta_loss / meta_batch
        meta_loss.backward()
        meta_optimizer.step()
        losses.append(meta_loss.item())
    return losses
