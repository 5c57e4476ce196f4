"""Learn the Basics, "Datasets & DataLoaders": a custom Dataset class (__init__,
__len__, __getitem__ with transform and target_transform), DataLoader with shuffling and
worker processes, iterating batches, random_split into training and validation sets,
and a SubsetRandomSampler; a small MLP trains on the batches.

Random arrays stand in for the image files and the labels file."""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, SubsetRandomSampler, random_split

REQUIRES = ()


class CustomImageDataset(Dataset):
    def __init__(self, images, labels, transform=None, target_transform=None):
        self.img_labels = labels
        self.images = images
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.img_labels)

    def __getitem__(self, idx):
        image = torch.from_numpy(self.images[idx])
        label = int(self.img_labels[idx])
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label


def make_models():
    return {"model": nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4))}


def make_data(rng):
    return rng.random((40, 8, 8)).astype(np.float32), rng.integers(0, 4, 40)


def train(models, data, steps):
    model = models["model"]
    dataset = CustomImageDataset(*data, transform=lambda image: (image - 0.5) / 0.25)
    train_set, val_set = random_split(dataset, [32, 8])
    assert len(train_set) == 32 and len(val_set) == 8
    val_loader = DataLoader(dataset, batch_size=4, sampler=SubsetRandomSampler(range(32, 40)))
    assert sorted(int(y) for _, labels in val_loader for y in labels) == sorted(data[1][32:])

    # shuffle=False so that both libraries see the same batches in the comparison
    train_dataloader = DataLoader(dataset, batch_size=8, shuffle=False, num_workers=2)
    train_features, train_labels = next(iter(train_dataloader))
    assert tuple(train_features.size()) == (8, 8, 8) and tuple(train_labels.size()) == (8,)

    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    while len(losses) < steps:
        for X, y in train_dataloader:
            loss = loss_fn(model(X), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses[:steps]
