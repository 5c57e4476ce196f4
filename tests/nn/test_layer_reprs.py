"""Layer reprs as PyTorch's (``print(model)`` is how users read a model): compared with
the installed PyTorch, and a few pinned without it."""

from __future__ import annotations

import pytest

import kernelgrad as kg

# (layer, positional arguments, keyword arguments)
LAYERS = [
    ("BatchNorm1d", (16,), {}),
    ("BatchNorm2d", (16,), {}),
    ("BatchNorm2d", (16,), {"bias": False}),
    ("BatchNorm3d", (4,), {"affine": False, "momentum": None}),
    ("LayerNorm", ((8,),), {}),
    ("LayerNorm", ((8, 4),), {"elementwise_affine": False}),
    ("LayerNorm", (8,), {"bias": False}),
    ("GroupNorm", (2, 4), {}),
    ("InstanceNorm1d", (4,), {}),
    ("InstanceNorm2d", (4,), {"affine": True}),
    ("InstanceNorm3d", (4,), {"track_running_stats": True}),
    ("RMSNorm", (8,), {}),
    ("LocalResponseNorm", (3,), {}),
    ("Linear", (3, 4), {}),
    ("Linear", (3, 4), {"bias": False}),
    ("Bilinear", (2, 3, 4), {}),
    ("Conv1d", (2, 3, 3), {}),
    ("Conv2d", (2, 3, 3), {}),
    (
        "Conv2d",
        (2, 4, (3, 5)),
        {"stride": 2, "padding": 1, "dilation": 2, "groups": 2, "bias": False},
    ),
    ("Conv2d", (2, 4, 3), {"padding": 1, "padding_mode": "reflect"}),
    ("Conv3d", (2, 3, 3), {"padding": "same"}),
    ("ConvTranspose1d", (2, 3, 3), {}),
    ("ConvTranspose2d", (2, 3, 3), {"stride": 2, "output_padding": 1}),
    ("ConvTranspose3d", (2, 3, 3), {"dilation": 2}),
    ("Dropout", (), {}),
    ("Dropout", (0.3,), {"inplace": True}),
    ("Dropout1d", (), {}),
    ("Dropout2d", (0.2,), {}),
    ("Dropout3d", (), {}),
    ("AlphaDropout", (), {}),
    ("FeatureAlphaDropout", (), {}),
    ("Embedding", (10, 3), {}),
    ("Embedding", (10, 3), {"padding_idx": 0, "max_norm": 1.0, "norm_type": 1.0}),
    ("Embedding", (10, 3), {"scale_grad_by_freq": True}),
    ("EmbeddingBag", (10, 3), {}),
    ("EmbeddingBag", (10, 3), {"mode": "max", "max_norm": 2.0, "padding_idx": 1}),
    ("MaxPool1d", (2,), {}),
    ("MaxPool2d", (2,), {}),
    ("MaxPool2d", (3, 2, 1), {"ceil_mode": True, "return_indices": True}),
    ("MaxPool3d", (2,), {}),
    ("AvgPool1d", (2,), {}),
    ("AvgPool2d", (2,), {}),
    ("AvgPool2d", (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}),
    ("AvgPool3d", (2,), {}),
    ("AdaptiveAvgPool1d", (3,), {}),
    ("AdaptiveAvgPool2d", ((1, 1),), {}),
    ("AdaptiveAvgPool3d", (2,), {}),
    ("AdaptiveMaxPool1d", (2,), {}),
    ("AdaptiveMaxPool2d", (2,), {}),
    ("AdaptiveMaxPool3d", (2,), {}),
    ("LPPool1d", (2, 3), {}),
    ("LPPool2d", (2, 3), {}),
    ("Upsample", (), {"scale_factor": 2}),
    ("Upsample", (), {"size": (4, 4), "mode": "bilinear"}),
    ("Flatten", (), {}),
    ("Unflatten", (1, (2, 3)), {}),
    ("PixelShuffle", (2,), {}),
    ("ZeroPad2d", (1,), {}),
    ("ReflectionPad2d", (1,), {}),
    ("ReLU", (), {}),
    ("ReLU", (True,), {}),
    ("ELU", (0.5, True), {}),
    ("LeakyReLU", (0.2,), {}),
    ("GELU", (), {}),
    ("GELU", ("tanh",), {}),
    ("Softplus", (), {}),
    ("Hardshrink", (), {}),
    ("Softshrink", (0.3,), {}),
    ("SiLU", (True,), {}),
    ("Softmax", (1,), {}),
    ("CosineSimilarity", (), {}),
    ("PairwiseDistance", (), {}),
    ("RNN", (3, 4), {}),
    ("LSTM", (3, 4, 2), {"batch_first": True}),
    ("GRU", (3, 4), {"bidirectional": True}),
]


def _name(case) -> str:
    name, args, kwargs = case
    return f"{name}{args}{kwargs}"


@pytest.mark.torch
@pytest.mark.parametrize("case", LAYERS, ids=_name)
def test_layer_repr_is_pytorchs(case):
    torch = pytest.importorskip("torch")
    name, args, kwargs = case
    assert repr(getattr(kg.nn, name)(*args, **kwargs)) == repr(
        getattr(torch.nn, name)(*args, **kwargs)
    )


def test_a_few_reprs_pinned():
    nn = kg.nn
    assert repr(nn.BatchNorm1d(3, affine=False)) == (
        "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, "
        "track_running_stats=True)"
    )
    assert repr(nn.Conv2d(1, 2, 3, padding="same", padding_mode="circular")) == (
        "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=same, padding_mode=circular)"
    )
    assert repr(nn.ConvTranspose1d(1, 2, 3, stride=2, output_padding=1)) == (
        "ConvTranspose1d(1, 2, kernel_size=(3,), stride=(2,), output_padding=(1,))"
    )
    assert repr(nn.AvgPool1d(2)) == "AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))"
    assert repr(nn.Dropout(0.1)) == "Dropout(p=0.1, inplace=False)"
    assert repr(nn.Hardshrink()) == "Hardshrink(0.5)"


def test_batch_norm_without_bias_learns_a_scale_only(device):
    norm = kg.nn.BatchNorm2d(3, bias=False).to(device)
    assert norm.bias is None
    assert [name for name, _ in norm.named_parameters()] == ["weight"]
    x = kg.randn(4, 3, 2, 2, device=device)
    out = norm(x)
    # per channel: zero mean, whatever the weight
    assert abs(out.mean(dim=(0, 2, 3))).max().item() < 1e-5
