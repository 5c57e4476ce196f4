""" "Transfer Learning for Computer Vision Tutorial": train_model (train and val phases
per epoch, ``torch.set_grad_enabled(phase == 'train')``, ``torch.max(outputs, 1)``,
running corrects as a tensor and ``.double()`` accuracy, StepLR stepped per training
phase, the best weights saved with torch.save to a file in a TemporaryDirectory and
loaded back with ``torch.load(..., weights_only=True)``), both of the tutorial's ways:
fine-tuning the whole network (SGD with momentum) and the network as a fixed feature
extractor (``requires_grad = False`` on every parameter, a new ``fc`` layer, an
optimizer of ``model_conv.fc.parameters()``).

A small CNN with an ``fc`` head and random weights stands in for torchvision's
pretrained resnet18, random 3x32x32 images for the ants and bees (batches of 4, as in
the tutorial); the losses are those of the training batches."""

import os
from tempfile import TemporaryDirectory

import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim import lr_scheduler

REQUIRES = ()

device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"


class SmallResNetStandIn(nn.Module):
    """In place of ``models.resnet18(weights='IMAGENET1K_V1')``: convolutions, then
    ``fc``, with the attribute names the tutorial uses."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)),
        )
        self.fc = nn.Linear(16, 1000)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def make_models():
    model_ft = SmallResNetStandIn()
    num_ftrs = model_ft.fc.in_features
    # Here the size of each output sample is set to 2.
    # Alternatively, it can be generalized to ``nn.Linear(num_ftrs, len(class_names))``.
    model_ft.fc = nn.Linear(num_ftrs, 2)

    model_conv = SmallResNetStandIn()
    for param in model_conv.parameters():
        param.requires_grad = False
    # Parameters of newly constructed modules have requires_grad=True by default
    num_ftrs = model_conv.fc.in_features
    model_conv.fc = nn.Linear(num_ftrs, 2)
    return {"model_ft": model_ft, "model_conv": model_conv}


def make_data(rng):
    images = rng.standard_normal((12, 3, 32, 32)).astype("float32")
    labels = rng.integers(0, 2, 12)
    return images, labels


def train_model(
    model, criterion, optimizer, scheduler, dataloaders, dataset_sizes, losses, num_epochs=25
):
    # Create a temporary directory to save training checkpoints
    with TemporaryDirectory() as tempdir:
        best_model_params_path = os.path.join(tempdir, "best_model_params.pt")

        torch.save(model.state_dict(), best_model_params_path)
        best_acc = 0.0

        for epoch in range(num_epochs):
            # Each epoch has a training and validation phase
            for phase in ["train", "val"]:
                if phase == "train":
                    model.train()  # Set model to training mode
                else:
                    model.eval()  # Set model to evaluate mode

                running_loss = 0.0
                running_corrects = 0

                # Iterate over data.
                for inputs, labels in dataloaders[phase]:
                    inputs = inputs.to(device)
                    labels = labels.to(device)

                    # zero the parameter gradients
                    optimizer.zero_grad()

                    # forward
                    # track history if only in train
                    with torch.set_grad_enabled(phase == "train"):
                        outputs = model(inputs)
                        _, preds = torch.max(outputs, 1)
                        loss = criterion(outputs, labels)

                        # backward + optimize only if in training phase
                        if phase == "train":
                            loss.backward()
                            optimizer.step()
                            losses.append(loss.item())

                    # statistics
                    running_loss += loss.item() * inputs.size(0)
                    running_corrects += torch.sum(preds == labels.data)
                if phase == "train":
                    scheduler.step()

                epoch_loss = running_loss / dataset_sizes[phase]
                epoch_acc = running_corrects.double() / dataset_sizes[phase]
                assert epoch_loss > 0 and 0 <= float(epoch_acc) <= 1

                # deep copy the model
                if phase == "val" and epoch_acc > best_acc:
                    best_acc = epoch_acc
                    torch.save(model.state_dict(), best_model_params_path)

        # load best model weights
        model.load_state_dict(torch.load(best_model_params_path, weights_only=True))
    return model


def train(models, data, steps):
    images, labels = data
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
    image_datasets = {
        "train": torch.utils.data.Subset(dataset, range(8)),
        "val": torch.utils.data.Subset(dataset, range(8, 12)),
    }
    dataloaders = {
        x: torch.utils.data.DataLoader(image_datasets[x], batch_size=4, num_workers=0)
        for x in ["train", "val"]
    }
    dataset_sizes = {x: len(image_datasets[x]) for x in ["train", "val"]}
    criterion = nn.CrossEntropyLoss()
    epochs = (steps + 1) // 2
    losses_ft, losses_conv = [], []

    model_ft = models["model_ft"].to(device)
    # Observe that all parameters are being optimized
    optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.001, momentum=0.9)
    # Decay LR by a factor of 0.1 every 7 epochs
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)
    model_ft = train_model(
        model_ft,
        criterion,
        optimizer_ft,
        exp_lr_scheduler,
        dataloaders,
        dataset_sizes,
        losses_ft,
        num_epochs=epochs,
    )

    model_conv = models["model_conv"].to(device)
    frozen = model_conv.features[0].weight.detach().clone()
    # Observe that only parameters of final layer are being optimized as
    # opposed to before.
    optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.001, momentum=0.9)
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=7, gamma=0.1)
    model_conv = train_model(
        model_conv,
        criterion,
        optimizer_conv,
        exp_lr_scheduler,
        dataloaders,
        dataset_sizes,
        losses_conv,
        num_epochs=epochs,
    )
    assert torch.equal(model_conv.features[0].weight, frozen)
    assert model_conv.features[0].weight.grad is None
    return [a + b for a, b in zip(losses_ft, losses_conv)][:steps]
