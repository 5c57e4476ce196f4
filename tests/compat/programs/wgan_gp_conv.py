"""WGAN-GP with a convolutional critic, as Zeleni9/pytorch-wgan models/
wgan_gradient_penalty.py writes it: a DCGAN-style generator (ConvTranspose2d,
BatchNorm2d, ReLU, Tanh) and critic (Conv2d, InstanceNorm2d(affine=True), LeakyReLU,
no sigmoid), ``d_loss_real.backward(mone)`` with ``one = torch.tensor(1, dtype=
torch.float)``, ``mone = one * -1``, critic iterations before each generator step,
Adam(lr=1e-4, betas=(0.5, 0.999)), and calculate_gradient_penalty: eta expanded over the
images, ``Variable(interpolated, requires_grad=True)``, torch.autograd.grad(outputs=
prob_interpolated, inputs=interpolated, grad_outputs=torch.ones(prob_interpolated.size()),
create_graph=True, retain_graph=True)[0], ``((gradients.norm(2, dim=1) - 1) ** 2).mean()
* lambda_term``: second-order gradients through conv2d.

Changes: 1x16x16 random images, channel widths 8/16/32 instead of 256/512/1024 (one
layer fewer for the smaller images), a batch of 4, 2 critic iterations,
``torch.rand(b, 1, 1, 1)`` for ``torch.FloatTensor(b, 1, 1, 1).uniform_(0, 1)`` (so both
runs draw the same eta), the CUDA branches left out."""

import torch
import torch.nn as nn
import torch.optim as optim
from torch import autograd
from torch.autograd import Variable

REQUIRES = ("nn.InstanceNorm2d", "nn.ConvTranspose2d", "autograd.grad")

channels, z_dim, batch_size, critic_iter, lambda_term = 1, 8, 4, 2, 10
learning_rate, b1, b2 = 1e-4, 0.5, 0.999


class Generator(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        # Filters [32, 16, 8]
        # Input_dim = z_dim
        # Output_dim = C (number of channels)
        self.main_module = nn.Sequential(
            # Z latent vector z_dim
            nn.ConvTranspose2d(
                in_channels=z_dim, out_channels=32, kernel_size=2, stride=1, padding=0
            ),
            nn.BatchNorm2d(num_features=32),
            nn.ReLU(True),
            # State (32x2x2)
            nn.ConvTranspose2d(in_channels=32, out_channels=16, kernel_size=4, stride=2, padding=1),
            nn.BatchNorm2d(num_features=16),
            nn.ReLU(True),
            # State (16x4x4)
            nn.ConvTranspose2d(in_channels=16, out_channels=8, kernel_size=4, stride=2, padding=1),
            nn.BatchNorm2d(num_features=8),
            nn.ReLU(True),
        )
        # State (8x8x8)
        self.output = nn.ConvTranspose2d(
            in_channels=8, out_channels=channels, kernel_size=4, stride=2, padding=1
        )
        # output of main module --> Image (Cx16x16)
        self.tanh = nn.Tanh()

    def forward(self, x):
        x = self.main_module(x)
        x = self.output(x)
        return self.tanh(x)


class Discriminator(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        # Filters [8, 16, 32]
        # Input_dim = channels (Cx16x16)
        # Output_dim = 1
        self.main_module = nn.Sequential(
            # Omitting batch normalization in critic because our new penalized training
            # objective (WGAN with gradient penalty) is no longer valid in this setting,
            # since we penalize the norm of the critic's gradient with respect to each
            # input independently and not the enitre batch. There is not good & fast
            # implementation of layer normalization --> using per instance normalization
            # nn.InstanceNorm2d()
            # Image (Cx16x16)
            nn.Conv2d(in_channels=channels, out_channels=8, kernel_size=4, stride=2, padding=1),
            nn.InstanceNorm2d(8, affine=True),
            nn.LeakyReLU(0.2, inplace=True),
            # State (8x8x8)
            nn.Conv2d(in_channels=8, out_channels=16, kernel_size=4, stride=2, padding=1),
            nn.InstanceNorm2d(16, affine=True),
            nn.LeakyReLU(0.2, inplace=True),
            # State (16x4x4)
            nn.Conv2d(in_channels=16, out_channels=32, kernel_size=4, stride=2, padding=1),
            nn.InstanceNorm2d(32, affine=True),
            nn.LeakyReLU(0.2, inplace=True),
        )
        # output of main module --> State (32x2x2)
        self.output = nn.Sequential(
            # The output of D is no longer a probability, we do not apply sigmoid at the
            # output of D.
            nn.Conv2d(in_channels=32, out_channels=1, kernel_size=2, stride=1, padding=0)
        )

    def forward(self, x):
        x = self.main_module(x)
        return self.output(x)


def make_models():
    return {"G": Generator(channels), "D": Discriminator(channels)}


def make_data(rng):
    return rng.uniform(-1, 1, (8, batch_size, channels, 16, 16)).astype("float32")


def calculate_gradient_penalty(D, real_images, fake_images):
    eta = torch.rand(batch_size, 1, 1, 1)
    eta = eta.expand(batch_size, real_images.size(1), real_images.size(2), real_images.size(3))

    interpolated = eta * real_images + ((1 - eta) * fake_images)

    # define it to calculate gradient
    interpolated = Variable(interpolated, requires_grad=True)

    # calculate probability of interpolated examples
    prob_interpolated = D(interpolated)

    # calculate gradients of probabilities with respect to examples
    gradients = autograd.grad(
        outputs=prob_interpolated,
        inputs=interpolated,
        grad_outputs=torch.ones(prob_interpolated.size()),
        create_graph=True,
        retain_graph=True,
    )[0]

    grad_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lambda_term
    return grad_penalty


def train(models, data, steps):
    G, D = models["G"], models["D"]
    d_optimizer = optim.Adam(D.parameters(), lr=learning_rate, betas=(b1, b2))
    g_optimizer = optim.Adam(G.parameters(), lr=learning_rate, betas=(b1, b2))
    one = torch.tensor(1, dtype=torch.float)
    mone = one * -1
    losses = []
    batches = iter(range(10**6))
    for g_iter in range(steps):
        # Requires grad, Generator requires_grad = False
        for p in D.parameters():
            p.requires_grad = True

        # Train Dicriminator forward-loss-backward-update self.critic_iter times while 1
        # Generator forward-loss-backward-update
        for d_iter in range(critic_iter):
            D.zero_grad()

            images = torch.from_numpy(data[next(batches) % len(data)])
            z = torch.rand((batch_size, z_dim, 1, 1))

            # Train discriminator
            # WGAN - Training discriminator more iterations than generator
            # Train with real images
            d_loss_real = D(images)
            d_loss_real = d_loss_real.mean()
            d_loss_real.backward(mone)

            # Train with fake images
            fake_images = G(z)
            d_loss_fake = D(fake_images)
            d_loss_fake = d_loss_fake.mean()
            d_loss_fake.backward(one)

            # Train with gradient penalty
            gradient_penalty = calculate_gradient_penalty(D, images.data, fake_images.data)
            gradient_penalty.backward()

            d_loss = d_loss_fake - d_loss_real + gradient_penalty
            Wasserstein_D = d_loss_real - d_loss_fake
            d_optimizer.step()

        # Generator update
        for p in D.parameters():
            p.requires_grad = False  # to avoid computation

        G.zero_grad()
        # train generator
        # compute loss with fake images
        z = torch.randn(batch_size, z_dim, 1, 1)
        fake_images = G(z)
        g_loss = D(fake_images)
        g_loss = g_loss.mean()
        g_loss.backward(mone)
        g_cost = -g_loss
        g_optimizer.step()
        losses.append(d_loss.item() + g_cost.item() + Wasserstein_D.item())
    return losses
