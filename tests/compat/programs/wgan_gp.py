"""WGAN-GP (Gulrajani et al., 2017) as eriklindernoren/PyTorch-GAN implementations/
wgan_gp/wgan_gp.py writes it: an MLP generator (BatchNorm1d with eps 0.8, LeakyReLU,
Tanh) and critic, ``Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor``,
``Variable``, the gradient penalty through torch.autograd.grad(outputs=D(interpolates),
inputs=interpolates, grad_outputs=..., create_graph=True, retain_graph=True,
only_inputs=True), Adam with betas (0.5, 0.999), a generator step every n_critic
critic steps.

Changes: 1x8x8 images of random data instead of MNIST, smaller widths, n_critic 2,
and ``np.random.seed(0)`` at the start of training so the two runs draw the same
``np.random`` noise (the script draws z and alpha with NumPy's global generator)."""

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
from torch.autograd import Variable

REQUIRES = ("autograd.grad", "FloatTensor")

latent_dim, img_size, channels, batch_size = 8, 8, 1, 16
lr, b1, b2, n_critic, lambda_gp = 0.0002, 0.5, 0.999, 2, 10
img_shape = (channels, img_size, img_size)

cuda = True if torch.cuda.is_available() else False


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(latent_dim, 16, normalize=False),
            *block(16, 32),
            *block(32, 64),
            nn.Linear(64, int(np.prod(img_shape))),
            nn.Tanh(),
        )

    def forward(self, z):
        img = self.model(z)
        img = img.view(img.shape[0], *img_shape)
        return img


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        self.model = nn.Sequential(
            nn.Linear(int(np.prod(img_shape)), 32),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(32, 16),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(16, 1),
        )

    def forward(self, img):
        img_flat = img.view(img.shape[0], -1)
        validity = self.model(img_flat)
        return validity


def make_models():
    return {"generator": Generator(), "discriminator": Discriminator()}


def make_data(rng):
    return rng.uniform(-1, 1, (8, batch_size, *img_shape)).astype("float32")


Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor


def compute_gradient_penalty(D, real_samples, fake_samples):
    """Calculates the gradient penalty loss for WGAN GP"""
    # Random weight term for interpolation between real and fake samples
    alpha = Tensor(np.random.random((real_samples.size(0), 1, 1, 1)))
    # Get random interpolation between real and fake samples
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = Variable(Tensor(real_samples.shape[0], 1).fill_(1.0), requires_grad=False)
    # Get gradient w.r.t. interpolates
    gradients = autograd.grad(
        outputs=d_interpolates,
        inputs=interpolates,
        grad_outputs=fake,
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]
    gradients = gradients.view(gradients.size(0), -1)
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
    return gradient_penalty


def train(models, data, steps):
    generator, discriminator = models["generator"], models["discriminator"]
    if cuda:
        generator.cuda()
        discriminator.cuda()
    optimizer_G = torch.optim.Adam(generator.parameters(), lr=lr, betas=(b1, b2))
    optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=lr, betas=(b1, b2))
    np.random.seed(0)
    losses = []
    for i in range(steps):
        imgs = torch.from_numpy(data[i % len(data)])
        # Configure input
        real_imgs = Variable(imgs.type(Tensor))

        # ---------------------
        #  Train Discriminator
        # ---------------------

        optimizer_D.zero_grad()

        # Sample noise as generator input
        z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], latent_dim))))

        # Generate a batch of images
        fake_imgs = generator(z)

        # Real images
        real_validity = discriminator(real_imgs)
        # Fake images
        fake_validity = discriminator(fake_imgs)
        # Gradient penalty
        gradient_penalty = compute_gradient_penalty(discriminator, real_imgs.data, fake_imgs.data)
        # Adversarial loss
        d_loss = (
            -torch.mean(real_validity) + torch.mean(fake_validity) + lambda_gp * gradient_penalty
        )

        d_loss.backward()
        optimizer_D.step()

        optimizer_G.zero_grad()

        # Train the generator every n_critic steps
        g_loss_value = 0.0
        if i % n_critic == 0:
            # -----------------
            #  Train Generator
            # -----------------

            # Generate a batch of images
            fake_imgs = generator(z)
            # Loss measures generator's ability to fool the discriminator
            # Train on fake images
            fake_validity = discriminator(fake_imgs)
            g_loss = -torch.mean(fake_validity)

            g_loss.backward()
            optimizer_G.step()
            g_loss_value = g_loss.item()

        losses.append(d_loss.item() + g_loss_value)
    return losses
