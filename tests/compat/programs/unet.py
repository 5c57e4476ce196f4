"""milesial/Pytorch-UNet: the U-Net parts (DoubleConv with BatchNorm2d and in-place
ReLU, Down with MaxPool2d, Up by nn.Upsample(mode="bilinear", align_corners=True) or
ConvTranspose2d, F.pad to the skip connection's size, torch.cat, OutConv), the UNet,
dice_score.py (dice_coeff with torch.where, multiclass_dice_coeff, dice_loss),
train.py's step (channels_last images, RMSprop with momentum and foreach=True,
ReduceLROnPlateau on the Dice score, ``torch.cuda.amp.GradScaler(enabled=amp)`` and
``torch.autocast(..., enabled=amp)`` with amp off, CrossEntropyLoss plus the Dice loss
of F.softmax against F.one_hot(...).permute(0, 3, 1, 2), clip_grad_norm_) and
evaluate.py (argmax masks through one_hot, under inference_mode).

Random 3x32x32 images and 2-class masks stand in for the Carvana data, batches are
dict samples through a DataLoader as in the repository's BasicDataset, the widths are
64..1024 divided by 16 (``C``), and the learning rate is 1e-3 (train.py's 1e-5
barely moves in four steps). Both of train.py's models are trained: ``--bilinear`` and
not."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor, optim
from torch.utils.data import DataLoader

REQUIRES = ("cuda.amp.GradScaler", "autocast", "channels_last", "nn.Upsample", "nn.ConvTranspose2d")

C = 4  # the repository: 64

# In the bilinear model one BatchNorm output lies within 1e-6 of zero (+9e-7 in PyTorch,
# -1e-7 in kernelgrad), so the ReLU after it passes a gradient in one library only; RMSprop's
# first steps, which move every weight by about lr * 10 whatever its gradient's size, carry
# that into the losses at the 1e-3 level.
RTOL = 5e-3


class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    """Downscaling with maxpool then double conv"""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Upscaling then double conv"""

    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()

        # if bilinear, use the normal convolutions to reduce the number of channels
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        # input is CHW
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]

        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(OutConv, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, bilinear=False):
        super(UNet, self).__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear

        self.inc = DoubleConv(n_channels, C)
        self.down1 = Down(C, 2 * C)
        self.down2 = Down(2 * C, 4 * C)
        self.down3 = Down(4 * C, 8 * C)
        factor = 2 if bilinear else 1
        self.down4 = Down(8 * C, 16 * C // factor)
        self.up1 = Up(16 * C, 8 * C // factor, bilinear)
        self.up2 = Up(8 * C, 4 * C // factor, bilinear)
        self.up3 = Up(4 * C, 2 * C // factor, bilinear)
        self.up4 = Up(2 * C, C, bilinear)
        self.outc = OutConv(C, n_classes)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x5 = self.down4(x4)
        x = self.up1(x5, x4)
        x = self.up2(x, x3)
        x = self.up3(x, x2)
        x = self.up4(x, x1)
        logits = self.outc(x)
        return logits


def dice_coeff(
    input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon: float = 1e-6
):
    # Average of Dice coefficient for all batches, or for a single mask
    assert input.size() == target.size()
    assert input.dim() == 3 or not reduce_batch_first

    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)

    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)

    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def multiclass_dice_coeff(
    input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon: float = 1e-6
):
    # Average of Dice coefficient for all classes
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input: Tensor, target: Tensor, multiclass: bool = False):
    # Dice loss (objective to minimize) between 0 and 1
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


@torch.inference_mode()
def evaluate(net, dataloader, device, amp):
    net.eval()
    num_val_batches = len(dataloader)
    dice_score = 0

    # iterate over the validation set
    with torch.autocast(device.type if device.type != "mps" else "cpu", enabled=amp):
        for batch in dataloader:
            image, mask_true = batch["image"], batch["mask"]

            # move images and labels to correct device and type
            image = image.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
            mask_true = mask_true.to(device=device, dtype=torch.long)

            # predict the mask
            mask_pred = net(image)

            assert mask_true.min() >= 0 and mask_true.max() < net.n_classes, (
                "True mask indices should be in [0, n_classes["
            )
            # convert to one-hot format
            mask_true = F.one_hot(mask_true, net.n_classes).permute(0, 3, 1, 2).float()
            mask_pred = (
                F.one_hot(mask_pred.argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()
            )
            # compute the Dice score, ignoring background
            dice_score += multiclass_dice_coeff(
                mask_pred[:, 1:], mask_true[:, 1:], reduce_batch_first=False
            )

    net.train()
    return dice_score / max(num_val_batches, 1)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_models():
    return {
        "model": UNet(n_channels=3, n_classes=2, bilinear=False),
        "model_bilinear": UNet(n_channels=3, n_classes=2, bilinear=True),
    }


def make_data(rng):
    images = rng.random((8, 3, 32, 32)).astype("float32")
    masks = (images.mean(axis=1) > 0.5).astype("int64")
    return [{"image": image, "mask": mask} for image, mask in zip(images, masks)]


def train_model(
    model,
    dataset,
    steps,
    losses,
    batch_size: int = 4,
    learning_rate: float = 1e-3,
    amp: bool = False,
    weight_decay: float = 1e-8,
    momentum: float = 0.999,
    gradient_clipping: float = 1.0,
):
    model = model.to(memory_format=torch.channels_last)
    model.to(device=device)
    loader_args = dict(batch_size=batch_size, num_workers=0, pin_memory=True)
    train_loader = DataLoader(dataset, shuffle=False, **loader_args)
    val_loader = DataLoader(dataset, shuffle=False, drop_last=True, **loader_args)

    # Set up the optimizer, the loss, the learning rate scheduler and the loss scaling for AMP
    optimizer = optim.RMSprop(
        model.parameters(),
        lr=learning_rate,
        weight_decay=weight_decay,
        momentum=momentum,
        foreach=True,
    )
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, "max", patience=5
    )  # goal: maximize Dice score
    grad_scaler = torch.cuda.amp.GradScaler(enabled=amp)
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()
    global_step = 0

    # Begin training
    while global_step < steps:
        model.train()
        for batch in train_loader:
            images, true_masks = batch["image"], batch["mask"]

            assert images.shape[1] == model.n_channels, (
                f"Network has been defined with {model.n_channels} input channels, "
                f"but loaded images have {images.shape[1]} channels. Please check that "
                "the images are loaded correctly."
            )

            images = images.to(
                device=device, dtype=torch.float32, memory_format=torch.channels_last
            )
            true_masks = true_masks.to(device=device, dtype=torch.long)

            with torch.autocast(device.type if device.type != "mps" else "cpu", enabled=amp):
                masks_pred = model(images)
                if model.n_classes == 1:
                    loss = criterion(masks_pred.squeeze(1), true_masks.float())
                    loss += dice_loss(
                        F.sigmoid(masks_pred.squeeze(1)), true_masks.float(), multiclass=False
                    )
                else:
                    loss = criterion(masks_pred, true_masks)
                    loss += dice_loss(
                        F.softmax(masks_pred, dim=1).float(),
                        F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
                        multiclass=True,
                    )

            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
            grad_scaler.step(optimizer)
            grad_scaler.update()

            global_step += 1
            losses.append(loss.item())

            # Evaluation round
            if global_step % 2 == 0:
                val_score = evaluate(model, val_loader, device, amp)
                scheduler.step(val_score)
                assert 0 <= float(val_score) <= 1
            if global_step >= steps:
                break


def train(models, data, steps):
    losses, losses_bilinear = [], []
    train_model(models["model"], data, steps, losses)
    train_model(models["model_bilinear"], data, steps, losses_bilinear)
    return [a + b for a, b in zip(losses, losses_bilinear)]
