"""A generative adversarial network of two small MLPs learning a 2-D distribution (the
DCGAN tutorial's training loop with Linear layers instead of convolutions): BCELoss,
Adam with betas (0.5, 0.999), real and fake labels made with torch.full and fill_,
and fake.detach() for the discriminator step."""

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

REQUIRES = ()

nz, batch_size = 4, 16
real_label, fake_label = 1.0, 0.0


def make_models():
    netG = nn.Sequential(nn.Linear(nz, 32), nn.ReLU(), nn.Linear(32, 2))
    netD = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
    return {"netG": netG, "netD": netD}


def make_data(rng):
    angles = rng.uniform(0, 6.283, (8, batch_size))
    return (np.stack([np.cos(angles), np.sin(angles)], axis=-1) * 2).astype("float32")


def train(models, data, steps):
    netG, netD = models["netG"], models["netD"]
    criterion = nn.BCELoss()
    optimizerD = optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    losses = []
    for i in range(steps):
        real = torch.from_numpy(data[i % len(data)])
        netD.zero_grad()
        label = torch.full((batch_size,), real_label, dtype=torch.float)
        errD_real = criterion(netD(real).view(-1), label)
        errD_real.backward()
        fake = netG(torch.randn(batch_size, nz))
        label.fill_(fake_label)
        errD_fake = criterion(netD(fake.detach()).view(-1), label)
        errD_fake.backward()
        optimizerD.step()
        netG.zero_grad()
        label.fill_(real_label)
        errG = criterion(netD(fake).view(-1), label)
        errG.backward()
        optimizerG.step()
        losses.append(errD_real.item() + errD_fake.item() + errG.item())
    return losses
