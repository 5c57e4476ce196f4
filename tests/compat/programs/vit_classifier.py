"""A small Vision Transformer (Dosovitskiy et al., 2020) trained from scratch, as the
"ViT from scratch" tutorials and timm's VisionTransformer write it with PyTorch's own
layers: a patch embedding by nn.Conv2d with stride = kernel = patch size, flatten(2)
and transpose, a class token ``nn.Parameter(torch.zeros(1, 1, d))`` expanded over the
batch and joined with torch.cat, a learned positional embedding, trunc_normal_ init
through ``self.apply``, a pre-norm nn.TransformerEncoder (batch_first, GELU), LayerNorm
and a linear head on the class token. Training: AdamW with weight decay off for biases,
norms and the embeddings (two parameter groups), a linear warmup and cosine decay with
LambdaLR stepped every batch, CrossEntropyLoss(label_smoothing=0.1), clip_grad_norm_.

Changes: 3x16x16 random images and 10 classes instead of CIFAR-10, a width of 32, two
layers."""

import math

import torch
import torch.nn as nn

REQUIRES = (
    "nn.TransformerEncoder",
    "nn.TransformerEncoderLayer",
    "nn.init.trunc_normal_",
    "optim.AdamW",
    "optim.lr_scheduler.LambdaLR",
    "nn.utils.clip_grad_norm_",
)

image_size, patch_size, in_chans, num_classes = 16, 4, 3, 10
embed_dim, depth, num_heads, mlp_ratio, dropout = 32, 2, 4, 2.0, 0.1
batch_size, lr, weight_decay, warmup_steps, total_steps = 8, 1e-3, 0.05, 2, 8


class PatchEmbed(nn.Module):
    """Image to patch embedding."""

    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=768):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        x = self.proj(x)  # (B, E, H/P, W/P)
        x = x.flatten(2)  # (B, E, N)
        x = x.transpose(1, 2)  # (B, N, E)
        return x


class VisionTransformer(nn.Module):
    def __init__(
        self,
        img_size=224,
        patch_size=16,
        in_chans=3,
        num_classes=1000,
        embed_dim=768,
        depth=12,
        num_heads=12,
        mlp_ratio=4.0,
        dropout=0.1,
    ):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + num_patches, embed_dim))
        self.pos_drop = nn.Dropout(p=dropout)
        encoder_layer = nn.TransformerEncoderLayer(
            d_model=embed_dim,
            nhead=num_heads,
            dim_feedforward=int(embed_dim * mlp_ratio),
            dropout=dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(encoder_layer, num_layers=depth)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)

        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, x):
        B = x.shape[0]
        x = self.patch_embed(x)
        cls_tokens = self.cls_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        x = x + self.pos_embed
        x = self.pos_drop(x)
        x = self.encoder(x)
        x = self.norm(x)
        return self.head(x[:, 0])


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in ("cls_token", "pos_embed"):
            no_decay.append(param)
        else:
            decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def cosine_with_warmup(warmup_steps, total_steps):
    def lr_lambda(step):
        if step < warmup_steps:
            return float(step + 1) / float(max(1, warmup_steps))
        progress = float(step - warmup_steps) / float(max(1, total_steps - warmup_steps))
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return lr_lambda


def make_models():
    model = VisionTransformer(
        image_size,
        patch_size,
        in_chans,
        num_classes,
        embed_dim,
        depth,
        num_heads,
        mlp_ratio,
        dropout,
    )
    return {"model": model}


def make_data(rng):
    images = rng.standard_normal((4, batch_size, in_chans, image_size, image_size))
    labels = rng.integers(0, num_classes, (4, batch_size))
    return images.astype("float32"), labels


def train(models, data, steps):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = models["model"].to(device)
    optimizer = torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=(0.9, 0.999))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, cosine_with_warmup(warmup_steps, total_steps)
    )
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    images, labels = data
    losses = []
    model.train()
    for step in range(steps):
        inputs = torch.from_numpy(images[step % len(images)]).to(device)
        targets = torch.from_numpy(labels[step % len(labels)]).to(device)
        optimizer.zero_grad(set_to_none=True)
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        scheduler.step()
        with torch.no_grad():
            accuracy = (outputs.argmax(dim=1) == targets).float().mean().item()
        assert 0.0 <= accuracy <= 1.0
        losses.append(loss.item())
    return losses
