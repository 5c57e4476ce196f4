"""The CUDA compile check: every kernel a representative workload launches, compiled
for the real target without a GPU.

Numba's CUDA simulator runs kernels as Python: it never types them, so a kernel that
numba-cuda cannot compile, or that computes a float32 result in float64, passes every
simulated test. This check closes that gap in two processes::

    python -m kernelgrad.cuda_compile_check [--cc 9.0] [--jobs 2] [--verbose]

1. **Record** (``NUMBA_ENABLE_CUDASIM=1``): :func:`workload` runs on the simulated CUDA
   device with a real GPU's launch policy (so generated kernels have a GPU's block
   sizes): every elementwise op for the dtype patterns programs use, reductions in each
   mode, matmul, indexing, random numbers, nn layers and losses with their backward
   passes, SGD/Adam/AdamW steps, ``kg.compile`` plans (fused elementwise kernels and
   reductions), ``@kg.elementwise`` functions, ``@kg.kernel`` kernels (workgroups,
   shared and private memory, helpers, ``kg.nn.device_function`` in both weight
   modes), and the ``@kg.kernel`` examples of README.md and docs/*.md. Those run on the
   CPU at their documented sizes, which the simulator could not run in time; their
   launches are recorded with the argument types they would have on CUDA (same dtypes,
   ranks and layouts). ``backends/cuda/recording.py`` keeps each distinct (kernel,
   argument types) pair.
2. **Compile** (no simulator): ``backends/cuda/compilecheck.py`` compiles each pair with
   NVVM for ``sm_90`` and assembles it with nvJitLink to read registers and spills. It
   fails on a compile error, float64 arithmetic in a float32 kernel, a register spill,
   or 64-bit integer division in an elementwise kernel, and prints as its last line
   ``N kernels compiled for sm_90, F failed, D with float64 arithmetic in float32
   kernels, S spilling``.

Exit status: 0 all checks passed, 1 some failed, 77 no compiler here (``pip install
"numba-cuda[cu13]"``). It verifies what compilers can tell; not timing, real memory
behaviour or stream ordering (docs/cuda.md).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import runpy
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import kernelgrad as kg

ROOT = Path(__file__).resolve().parents[1]
DEVICE_LINE = 'device = "cuda" if kg.cuda.is_available() else "cpu"'
# The GPU whose launch policy the recording uses: an H100/H200 (132 multiprocessors).
TARGET_MULTIPROCESSORS = 132


# --- the workload -------------------------------------------------------------------------
def _tensor(values: Any, dtype: Any, device: str, requires_grad: bool = False) -> Any:
    return kg.tensor(np.asarray(values), dtype=dtype, device=device, requires_grad=requires_grad)


def _operands(dtype: Any, device: str) -> dict[str, Any]:
    """Operands of one dtype: a contiguous (5, 7) tensor, a transposed view of the same
    shape, a row to broadcast, and a Python number."""
    rng = np.random.default_rng(0)
    if dtype is kg.bool:
        base = rng.random((5, 7)) > 0.5
        other = rng.random((7, 5)) > 0.5
        number: Any = True
    elif dtype.is_floating_point:
        base = rng.uniform(0.25, 2.0, (5, 7))
        other = rng.uniform(0.25, 2.0, (7, 5))
        number = 1.5
    else:
        base = rng.integers(1, 9, (5, 7))
        other = rng.integers(1, 9, (7, 5))
        number = 3
    return {
        "contiguous": _tensor(base, dtype, device),
        "transposed": _tensor(other, dtype, device).T,
        "row": _tensor(base[0], dtype, device),
        "number": number,
    }


# What PyTorch defines for bool tensors (bool subtraction, say, is an error there).
_BOOL_OPS = {
    "add", "mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
    "logical_or", "logical_xor", "logical_not", "where", "identity",
}  # fmt: skip


def elementwise_ops(device: str) -> None:
    """Every elementwise primitive on every dtype its rule accepts, in the operand
    patterns programs use: all contiguous and with a Python number as the second
    operand, and for floating point also strided (a transposed operand) and broadcast
    (a row)."""
    from .errors import KernelError
    from .ops.elementwise import OPS, apply

    samples = {d: _operands(d, device) for d in (kg.float32, kg.int64, kg.bool)}
    samples[kg.int32] = _operands(kg.int32, device)
    condition = samples[kg.bool]["contiguous"]
    for name, op in sorted(OPS.items()):
        nin = op.scalar.nin
        for dtype, operands in samples.items():
            if dtype is kg.int32 and name not in ("add", "mul", "identity", "lt"):
                continue  # int32 appears in index arithmetic, not in models
            if dtype is kg.bool and name not in _BOOL_OPS:
                continue
            x, t, row, number = (operands[k] for k in ("contiguous", "transposed", "row", "number"))
            patterns = [[x] * nin]
            if nin > 1:
                patterns.append([x, number] + [x] * (nin - 2))
            if dtype.is_floating_point:  # the strided index code; once per op is enough
                patterns += [[t] + [x] * (nin - 1), [x, row] + [x] * (nin - 2)][:nin]
            for inputs in patterns:
                if name == "where":
                    inputs = [condition, *inputs[1:]]
                try:
                    apply(op, *inputs)
                except KernelError:
                    raise
                except (TypeError, ValueError):
                    continue  # a dtype the op's rule refuses (bool arithmetic, ...)
    x = samples[kg.float32]["contiguous"]
    for target in (kg.float64, kg.int64, kg.int32, kg.bool):
        x.to(target).to(kg.float32)
    x64 = x.to(kg.float64)
    ((x64 * 2.5).exp() + x64.T.T).sqrt().sum()


def reductions(device: str) -> None:
    """Every reduction kind over short rows, long rows (block mode), strided dims and
    everything, for float32, int64 and bool inputs."""
    rng = np.random.default_rng(1)
    short = _tensor(rng.standard_normal((5, 7)), kg.float32, device)
    long = _tensor(rng.standard_normal((2, 600)), kg.float32, device)
    longest = _tensor(rng.standard_normal(4200), kg.float32, device)
    longest.sum(), longest.argmax(), (longest > 0).sum()  # split rows: two passes
    wide = _tensor(rng.standard_normal((3, 40, 6)), kg.float32, device)
    for x in (short, long, wide, short.to(kg.int64), short > 0):
        for dims in ((-1,), (0,), None):
            x.sum(dim=dims) if dims else x.sum()
            x.amax(dim=dims) if dims else x.amax()
            x.amin(dim=dims) if dims else x.amin()
            x.argmax(dim=dims[0] if dims else None)
            x.argmin(dim=dims[0] if dims else None)
    wide.sum(dim=(0, 2))
    for x in (short, long):
        x.mean(1), x.var(1), x.std(0), x.logsumexp(1), x.softmax(1), x.log_softmax(1)
        (x > 0).any(), (x > 0).all(1)


def movement_and_indexing(device: str) -> None:
    """Copies of views, matmul, gather/scatter, random numbers."""
    rng = np.random.default_rng(2)
    a = _tensor(rng.standard_normal((5, 7)), kg.float32, device, requires_grad=True)
    b = _tensor(rng.standard_normal((7, 3)), kg.float32, device, requires_grad=True)
    batch = _tensor(rng.standard_normal((2, 5, 7)), kg.float32, device)
    (a @ b).sum().backward()
    batch @ b, a.T.contiguous() @ a, batch.transpose(1, 2) @ batch
    (a.to(kg.float64) @ b.to(kg.float64)).sum()
    index = _tensor([4, 0, 2, 2], kg.int64, device)
    picked = a[index]
    picked.sum().backward()
    a[kg.arange(5, device=device), index.repeat(2)[:5]]
    kg.cat([a, a.detach() * 2], 0), kg.stack([a, a], 1), a.flip(0), a.unfold(1, 3, 2)
    kg.nn.functional.pad(a, (1, 2)), a.T.reshape(-1), a[1:, ::2].contiguous()
    kg.rand(5, 7, device=device), kg.randn(5, 7, device=device)
    kg.randint(0, 10, (5, 7), device=device), kg.rand(4, dtype=kg.float64, device=device)
    kg.where(a > 0, a, 0.0), a.clamp(-1, 1), kg.zeros(3, device=device), kg.arange(9.0)


def nn_layers(device: str) -> None:
    """Layers and losses, forward and backward, in training and evaluation mode."""
    nn, functional = kg.nn, kg.nn.functional
    kg.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(3, 2, 2, stride=2), nn.GELU(), nn.Flatten(), nn.LayerNorm(2), nn.SiLU(),
        nn.Dropout(0.25), nn.Linear(2, 5), nn.BatchNorm1d(5), nn.Tanh(), nn.Softplus(),
        nn.LeakyReLU(0.1), nn.Sigmoid(),
    ).to(device)  # fmt: skip
    images = kg.randn(2, 1, 4, 4, device=device)
    labels = _tensor([1, 4], kg.int64, device)
    logits = model(images)
    weight = kg.rand(5, device=device)
    soft = functional.softmax(logits.detach(), 1)
    half = logits.detach() * 0.5
    positive = (logits.detach() > 0).float()
    losses = [
        functional.cross_entropy(logits, labels),
        functional.cross_entropy(logits, labels, weight=weight, label_smoothing=0.1),
        functional.cross_entropy(logits, _tensor([1, -100], kg.int64, device), reduction="sum"),
        functional.cross_entropy(logits, labels, reduction="none").mean(),
        functional.nll_loss(functional.log_softmax(logits, 1), labels),
        functional.cross_entropy(logits, soft),
        functional.mse_loss(logits, half),
        functional.l1_loss(logits, half),
        functional.binary_cross_entropy(logits.sigmoid(), positive),
        functional.binary_cross_entropy_with_logits(logits, positive),
    ]
    sum(losses[1:], losses[0]).backward()
    model.eval()
    with kg.no_grad():
        model(images)
    sequence = kg.randn(1, 2, 6, device=device, requires_grad=True)
    conv1d = nn.Conv1d(2, 2, 3, stride=2, padding=1).to(device)
    features = conv1d(sequence)
    (nn.MaxPool1d(2)(features) + nn.AvgPool1d(2)(features)).sum().backward()
    pooled = nn.AdaptiveAvgPool2d(2)(kg.randn(1, 2, 3, 3, device=device, requires_grad=True))
    pooled.sum().backward()
    embedding = nn.Embedding(10, 4).to(device)
    embedding(_tensor([[1, 2], [9, 1]], kg.int64, device)).sum().backward()
    functional.max_pool2d(images, 3, stride=2, padding=1).sum()
    functional.one_hot(labels, 5)
    # attention with its options, 3-d convolution (transposed and not), bicubic and area
    # resampling
    attention = nn.MultiheadAttention(4, 2, add_bias_kv=True, add_zero_attn=True, kdim=3).to(device)
    query = kg.randn(2, 1, 4, device=device, requires_grad=True)
    padding = _tensor([[False, False, True]], kg.bool, device)
    source = kg.randn(3, 1, 3, device=device)
    attention(query, source, query[:1].expand(3, 1, 4), key_padding_mask=padding)[
        0
    ].sum().backward()
    volume = kg.randn(1, 2, 2, 2, 2, device=device, requires_grad=True)
    upsampled = nn.ConvTranspose3d(2, 2, 2, stride=2, groups=2).to(device)(volume)
    resized = functional.interpolate(upsampled[:, :, 0], size=3, mode="bicubic")
    conv3d = nn.Conv3d(2, 3, (3, 2, 2), stride=(2, 1, 2), padding=(1, 1, 0)).to(device)
    encoded = conv3d(upsampled).sum()
    area = functional.interpolate(volume, size=(1, 3, 1), mode="area").sum()
    (resized.sum() + area + encoded).backward()
    # recurrent layers over a packed batch: each cell's step kernels, forward and
    # backward, with and without biases and an LSTM projection
    steps = kg.randn(3, 2, 2, device=device, requires_grad=True)
    recurrent = [
        nn.LSTM(2, 3, proj_size=2, bidirectional=True), nn.LSTM(2, 3, bias=False),
        nn.GRU(2, 3, bidirectional=True), nn.GRU(2, 3, bias=False),
        nn.RNN(2, 3), nn.RNN(2, 3, nonlinearity="relu"),
    ]  # fmt: skip
    for layer in recurrent:
        output, state = layer.to(device)(nn.utils.rnn.pack_padded_sequence(steps, [3, 2]))
        h_n = state[0] if isinstance(state, tuple) else state
        (output.data.sum() + h_n.sum()).backward()


def more_layers(device: str) -> None:
    """The layers, losses and functions PyTorch programs asked for (normalisations,
    padding layers and padding modes, pixel shuffle, 3-d, adaptive and power-average
    pooling, fold/unfold, antialiased resampling, bilinear, the margin, distance and
    likelihood losses, torch-level functions), forward and backward."""
    nn, functional = kg.nn, kg.nn.functional
    kg.manual_seed(2)
    x = kg.randn(2, 4, 4, 4, device=device, requires_grad=True)
    volume = x.unsqueeze(0)
    layers = [
        nn.GroupNorm(2, 4), nn.InstanceNorm2d(4, affine=True), nn.LocalResponseNorm(2),
        nn.ReflectionPad2d(1), nn.ReplicationPad2d(1), nn.CircularPad2d(1), nn.ZeroPad2d(1),
        nn.PixelShuffle(2), nn.PixelUnshuffle(2), nn.AdaptiveMaxPool2d(3), nn.LPPool2d(2, 2),
        nn.Conv2d(4, 2, 3, padding=1, padding_mode="reflect"), nn.AlphaDropout(0.5),
    ]  # fmt: skip
    outputs = [layer.to(device)(x) for layer in layers]
    outputs += [
        nn.RMSNorm(4).to(device)(x.transpose(1, 3)),
        nn.MaxPool3d(2)(volume), nn.AvgPool3d(2)(volume), nn.Dropout3d(0.5)(volume),
        nn.AdaptiveAvgPool1d(3)(x.flatten(2)),
        functional.interpolate(x, size=(2, 3), mode="bilinear", antialias=True),
        functional.fold(functional.unfold(x, 2), (4, 4), 2),
        functional.gumbel_softmax(x.flatten(1), tau=0.5),
    ]  # fmt: skip
    a = kg.randn(3, 5, device=device, requires_grad=True)
    b = kg.randn(3, 5, device=device)
    signs = _tensor([1.0, -1.0, 1.0], kg.float32, device)
    classes = _tensor([0, 2, 4], kg.int64, device)
    outputs += [
        functional.kl_div(a.log_softmax(1), b.softmax(1), reduction="batchmean"),
        functional.cosine_embedding_loss(a, b, signs),
        functional.margin_ranking_loss(a[:, 0], b[:, 0], signs),
        functional.hinge_embedding_loss(a, b.sign()),
        functional.triplet_margin_loss(a, b, b.flip(0)),
        functional.soft_margin_loss(a, b.sign()),
        functional.multilabel_soft_margin_loss(a, (b > 0).float()),
        functional.multi_margin_loss(a, classes),
        functional.gaussian_nll_loss(a, b, b.abs() + 0.1),
        functional.poisson_nll_loss(a, b.abs()),
        functional.cosine_similarity(a, b), functional.pairwise_distance(a, b),
        functional.pdist(a), nn.Bilinear(5, 5, 2).to(device)(a, b),
        kg.addcmul(a, a, b), kg.addcdiv(a, a, b.abs() + 1), kg.cdist(a, b), kg.logit(a.sigmoid()),
        kg.diff(a), kg.kron(a[:2, :2], b[:2, :2]), kg.rot90(a), kg.tensordot(a, b.T, 1),
        kg.addmm(a[:, :3], a, b.T), kg.cross(a[:, :3], b[:, :3], dim=1), kg.sinc(a),
    ]  # fmt: skip
    sum(output.sum() for output in outputs).backward()


def surface(device: str) -> None:
    """What PyTorch programs asked for next: index assignment through index tensors and
    masks (one write kernel and its error flag), ``index_put_``/``index_copy_``/
    ``index_fill_``/``masked_scatter_``, in-place activations, max-pool indices and
    unpooling, ``affine_grid``/``grid_sample`` (2-d and 3-d), ``embedding_bag`` and
    embedding's ``max_norm``, and the lazy layers, forward and backward."""
    nn, functional = kg.nn, kg.nn.functional
    kg.manual_seed(3)
    target = kg.zeros(6, 4, device=device)
    rows = _tensor([0, 3, 5], kg.int64, device)
    target[rows] = kg.ones(3, 4, device=device)
    target[target > 0.5] = 2.0
    target[rows, rows.clamp(max=3)] = _tensor([1.0, 2.0, 3.0], kg.float32, device)
    target.index_put_((rows,), kg.ones(3, 4, device=device), accumulate=True)
    target.index_copy_(0, rows, kg.ones(3, 4, device=device))
    target.index_fill_(1, rows[:2], 5.0)
    target.masked_scatter_(target > 4.0, kg.arange(24.0, device=device))
    x = kg.randn(2, 3, 6, 6, device=device, requires_grad=True)
    activated = functional.elu(x * 1.0, inplace=True) + functional.hardtanh(x * 1.0, inplace=True)
    pooled, indices = functional.max_pool2d(x, 2, return_indices=True)
    values_1d, indices_1d = functional.max_pool1d(x.flatten(2), 3, return_indices=True)
    volume = x.unsqueeze(2).expand(2, 3, 2, 6, 6)
    values_3d, indices_3d = functional.max_pool3d(volume, 2, return_indices=True)
    outputs = [
        activated,
        functional.max_unpool2d(pooled, indices, 2),
        functional.max_unpool1d(values_1d, indices_1d, 3),
        functional.max_unpool3d(values_3d, indices_3d, 2),
        functional.adaptive_max_pool2d(x, 3, return_indices=True)[0],
    ]
    theta = kg.tensor([[[1.0, 0.1, 0.0], [0.0, 0.9, 0.1]]] * 2, device=device)
    theta.requires_grad_(True)
    for mode, padding in (("bilinear", "zeros"), ("nearest", "border"), ("bilinear", "reflection")):
        grid = functional.affine_grid(theta, (2, 3, 5, 5), align_corners=False)
        outputs.append(functional.grid_sample(x, grid, mode=mode, padding_mode=padding))
    theta_3d = kg.eye(3, 4, device=device).expand(2, 3, 4).contiguous()
    grid_3d = functional.affine_grid(theta_3d, (2, 3, 2, 4, 4), align_corners=True)
    outputs.append(functional.grid_sample(volume.contiguous(), grid_3d, align_corners=True))
    weight = kg.randn(10, 4, device=device, requires_grad=True)
    words = _tensor([1, 2, 4, 5, 4, 3, 2, 9], kg.int64, device)
    offsets = _tensor([0, 4], kg.int64, device)
    for mode in ("sum", "mean", "max"):
        outputs.append(functional.embedding_bag(words, weight, offsets, mode=mode))
    with kg.no_grad():
        functional.embedding(words, weight.detach().clone(), max_norm=1.0)
    for layer, shape in ((nn.LazyConv2d(2, 3), (2, 3, 6, 6)), (nn.LazyBatchNorm1d(), (4, 5))):
        layer = layer.to(device)
        outputs.append(layer(kg.randn(*shape, device=device)))
    sum(output.float().sum() for output in outputs).backward()


def ctc_and_fractional_pooling(device: str) -> None:
    """The CTC loss's two kernels (float32 and float64; padded and concatenated targets,
    ``zero_infinity``) and fractional max pooling in 2-d and 3-d (the interval rule's
    float ops, the NaN-aware winner, the gather), forward and backward."""
    functional = kg.nn.functional
    kg.manual_seed(5)
    outputs = []
    for dtype in (kg.float32, kg.float64):
        logits = kg.randn(6, 2, 4, dtype=dtype, device=device, requires_grad=True)
        lp = logits.log_softmax(2)
        padded = _tensor([[1, 2, 2], [3, 0, 0]], kg.int64, device)
        outputs.append(functional.ctc_loss(lp, padded, [6, 5], [3, 1]))
        concatenated = _tensor([1, 2, 2, 3], kg.int64, device)
        outputs.append(
            functional.ctc_loss(lp, concatenated, [2, 5], [3, 1], blank=0, zero_infinity=True)
        )
        x = kg.randn(2, 3, 7, 6, dtype=dtype, device=device, requires_grad=True)
        outputs.append(functional.fractional_max_pool2d(x, 2, output_size=(4, 3)))
        volume = kg.randn(1, 2, 5, 6, 5, dtype=dtype, device=device, requires_grad=True)
        outputs.append(functional.fractional_max_pool3d(volume, 2, output_ratio=0.5))
    sum(output.double().sum() for output in outputs).backward()


def optimizers(device: str) -> None:
    """Two steps of each optimizer kind (fused and unfused updates) on a matrix, a
    vector and a 0-d parameter (a loss without products: matmul is covered elsewhere),
    and one traced step and a replay of one whose learning rate is fed as a tensor."""
    kg.manual_seed(1)
    x = kg.randn(3, 4, device=device)
    settings: list[tuple[Any, dict[str, Any]]] = [
        (kg.optim.SGD, {"lr": 0.1}),
        (kg.optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4}),
        (kg.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "fused": False}),
        (kg.optim.Adam, {"lr": 1e-2}),
        (kg.optim.Adam, {"lr": 1e-2, "amsgrad": True, "weight_decay": 1e-3}),
        (kg.optim.Adam, {"lr": 1e-2, "fused": False}),
        (kg.optim.AdamW, {"lr": 1e-2}),
        (kg.optim.AdamW, {"lr": 1e-2, "fused": False, "maximize": True}),
        # the scalar-state and update kernels of optim/_fused_optimizer.py
        (kg.optim.Adagrad, {"lr": 1e-2, "lr_decay": 1e-3, "weight_decay": 1e-3}),
        (kg.optim.Adamax, {"lr": 1e-2, "maximize": True}),
        (kg.optim.NAdam, {"lr": 1e-2, "weight_decay": 1e-3, "decoupled_weight_decay": True}),
        (kg.optim.RAdam, {"lr": 1e-2, "betas": (0.9, 0.6), "weight_decay": 1e-3}),
        (kg.optim.ASGD, {"lr": 1e-2, "t0": 1}),
        (kg.optim.Rprop, {"lr": 1e-2}),
    ]
    for optimizer_class, options in settings:
        weight = kg.nn.Parameter(kg.randn(3, 4, device=device))
        bias = kg.nn.Parameter(kg.zeros(4, device=device))
        scale = kg.nn.Parameter(kg.ones((), device=device))
        optimizer = optimizer_class([weight, bias, scale], **options)
        for _ in range(2):
            optimizer.zero_grad()
            ((weight * x + bias) * scale).tanh().square().mean().backward()
            optimizer.step()
    # traced: the scalar-state kernels read the rate fed as a float64 tensor
    for optimizer_class, options in settings[-6:]:
        weight = kg.nn.Parameter(kg.randn(3, 4, device=device))
        optimizer = optimizer_class([weight], **options)

        def train_step(weight=weight, optimizer=optimizer):
            optimizer.zero_grad()
            (weight * x).tanh().square().mean().backward()
            optimizer.step()

        step = kg.compile(train_step)
        for lr in (1e-2, 1e-2, 5e-3):  # eager, traced, replayed at a new rate
            optimizer.param_groups[0]["lr"] = lr
            step()


def compiled_functions(device: str) -> None:
    """kg.compile plans: a training step, fused elementwise chains and reductions
    (prologues, epilogues, to a scalar and over dims), a kernel inside a trace."""
    nn, functional = kg.nn, kg.nn.functional
    kg.manual_seed(2)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to(device)
    optimizer = kg.optim.Adam(model.parameters(), lr=1e-2)
    x = kg.randn(8, 6, device=device)
    labels = _tensor(np.arange(8) % 3, kg.int64, device)

    def train_step(x, labels):
        optimizer.zero_grad()
        loss = functional.cross_entropy(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss

    a = kg.randn(4, 7, device=device)
    b = kg.randn(7, device=device)
    long = kg.randn(3, 700, device=device)
    ints = _tensor(np.arange(28).reshape(4, 7) % 5 - 2, kg.int64, device)
    programs: list[tuple[Callable[..., Any], tuple]] = [
        (train_step, (x, labels)),
        (lambda a, b: ((a - b) ** 2).mean(), (a, b)),
        (lambda a, b: (a * b).sum() + (a.exp() * 2).sum(1).amax(), (a, b)),
        (lambda a: a.softmax(1) * 3 + a.exp().sum(), (a,)),
        (lambda a: (a.sigmoid() * a).sum(0) / 4, (a,)),
        (lambda a: ((a * 0.5).tanh().amax(1), (a + 1).amin(0)), (a,)),
        (lambda a, n: (n.to(kg.float32) - a).amin(0).sum() + (a > 0).sum(1).float(), (a, ints)),
        (lambda long: (long * long).sum(1).sqrt() + (long * 2).sum(), (long,)),
        (lambda long: long.abs().sum(), (long,)),
    ]
    for fn, args in programs:
        compiled = kg.compile(fn)
        for _ in range(3):  # eager warm-up, trace, replay
            compiled(*args)
    # the training step replayed as CUDA graphs (captured at the second replay): the
    # copies of its arguments and outputs into and out of the graphs' static buffers
    previous = os.environ.get("KG_NATIVE_REPLAY")
    os.environ["KG_NATIVE_REPLAY"] = "2"
    try:
        compiled = kg.compile(train_step)
        for _ in range(4):
            compiled(x, labels)
    finally:
        if previous is None:
            del os.environ["KG_NATIVE_REPLAY"]
        else:
            os.environ["KG_NATIVE_REPLAY"] = previous


def elementwise_functions(device: str) -> None:
    """@kg.elementwise functions: traced, typed for float32 and float64, several
    outputs, integers, untraceable sources with a given backward; and gradients."""

    @kg.elementwise
    def soft_clip(x, limit):
        return limit * kg.tanh(x / limit)

    @kg.elementwise
    def mixture(x, y):
        blend = kg.sigmoid(x - y)
        return kg.where(x > y, blend * kg.exp(-y * y), kg.log1p(x * x) + kg.maximum(x, 0.5 * y))

    @kg.elementwise
    def polar(x, y):
        radius = kg.sqrt(x * x + y * y)
        return radius, kg.exp(-radius) * x

    @kg.elementwise
    def inside(x, low, high):
        return (x >= low) & (x <= high)

    @kg.elementwise
    def twice_plus_one(n):
        return n * 2 + 1

    @kg.elementwise
    def leaky(x):
        if x > 0:
            return x
        return 0.1 * x

    @leaky.defvjp
    def leaky_vjp(x, grad):
        return kg.where(x > 0, grad, 0.1 * grad)

    @kg.elementwise
    def steps(x):  # floor/ceil of floats stay floats (huge, infinite, NaN pass through)
        return math.floor(x) + math.ceil(x * 0.5)

    for dtype in (kg.float32, kg.float64):
        steps(kg.randn(4, 5, dtype=dtype, device=device) * 1e30)
        x = kg.randn(4, 5, dtype=dtype, device=device, requires_grad=True)
        y = kg.randn(4, 5, dtype=dtype, device=device, requires_grad=True)
        radius, damped = polar(x, y)
        total = soft_clip(x, 2.0).sum() + soft_clip(x, y.detach().abs() + 1).sum()
        total = total + mixture(x, y).sum() + radius.sum() + damped.sum() + leaky(x).sum()
        total.backward()
        inside(x.detach(), -0.5, 0.5)
    twice_plus_one(_tensor([[1, 2, 3]], kg.int32, device))


# Representative @kg.kernel kernels: the forms the code generator has that the documented
# examples (documented_kernels, e.g. docs/kernels.md's tiled matmul) leave out.
GROUP = 64


def _softplus(v):
    return math.log1p(math.exp(-abs(v))) + max(v, 0.0)


def _cumulative(x, out, n):
    scratch = kg.private((2, 8), kg.float32)
    total = 0.0
    for k in range(n):
        total += x[k]
        scratch[1, k] = total
    for k in range(n):
        out[k] = scratch[1, k]


def _kernels() -> dict[str, Any]:

    @kg.kernel
    def fill_coordinates(out):
        i, j, k = kg.index(3)
        out[i, j, k] = 100 * i + 10 * j + k

    @kg.kernel
    def softplus_(x, n):
        i = kg.index()
        if i >= n:
            return
        x[i] = _softplus(x[i]) + kg.exp(0.0)

    @kg.kernel
    def group_sums(out, x, n):
        i = kg.index()
        lane = kg.local_index()
        partial = kg.shared(GROUP, kg.float32)
        if i < n:
            partial[lane] = x[i]
        else:
            partial[lane] = 0.0
        kg.barrier()
        stride = GROUP // 2
        while stride > 0:
            if lane < stride:
                partial[lane] += partial[lane + stride]
            kg.barrier()
            stride //= 2
        if lane == 0:
            out[kg.group_index()] = partial[0]

    @kg.kernel
    def positions(local_out, group_out, global_out):
        i, j = kg.index(2)
        li, lj = kg.local_index(2)
        gi, gj = kg.group_index(2)
        if i < global_out.shape[0] and j < global_out.shape[1]:
            local_out[i, j] = 10 * li + lj
            group_out[i, j] = 10 * gi + gj
            global_out[i, j] = kg.index()

    @kg.kernel
    def bucket_counts(counts, x, width):
        # math.floor/ceil/trunc are int64 on CUDA as on the CPU (codegen.integer_rounding)
        i = kg.index()
        low = math.floor(x[i] / width)
        counts[i, 0] = low
        counts[i, 1] = math.ceil(x[i] / width) - low
        counts[i, 2] = math.trunc(x[i]) & 7

    @kg.kernel
    def row_scan(out, x):
        i = kg.index()
        row = kg.private(8, kg.float32)
        for k in range(8):
            row[k] = x[i, k]
        _cumulative(row, out[i, :], 8)

    return dict(locals())


def user_kernels(device: str) -> None:
    """The representative kernels above, and kg.nn.device_function networks in both
    weight modes, on tiny ranges."""
    k = _kernels()
    k["fill_coordinates"](kg.zeros(2, 3, 4, dtype=kg.int64, device=device), ndrange=(2, 3, 4))
    k["softplus_"](kg.randn(6, device=device), 6, ndrange=6)
    k["group_sums"](kg.zeros(1, device=device), kg.randn(40, device=device), 40, ndrange=64,
                    workgroup=64)  # fmt: skip
    outs = [kg.zeros(3, 3, dtype=kg.int64, device=device) for _ in range(3)]
    k["positions"](*outs, ndrange=(4, 4), workgroup=(2, 2))
    k["row_scan"](kg.zeros(3, 8, device=device), kg.rand(3, 8, device=device), ndrange=3)
    for dtype in (kg.float32, kg.float64):
        x = kg.tensor([-2.5, -0.5, 0.5, 3.7], dtype=dtype, device=device)
        k["bucket_counts"](kg.zeros(4, 3, dtype=kg.int64, device=device), x, 0.5, ndrange=4)

    kg.manual_seed(0)
    nn = kg.nn
    model = nn.Sequential(
        nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 8), nn.Softplus(beta=2.0), nn.SiLU(),
        nn.Linear(8, 4), nn.LeakyReLU(0.1), nn.Linear(4, 2), nn.LogSoftmax(-1),
    )  # fmt: skip
    constants = kg.nn.device_function(model, weights="constants")
    arrays = kg.nn.device_function(model, weights="arrays")

    @kg.kernel
    def evaluate_network(out, inputs):
        i = kg.index()
        constants(inputs[i, :], out[i, :])

    @kg.kernel
    def evaluate_network_with_weights(out, weights, inputs):
        i = kg.index()
        arrays(weights, inputs[i, :], out[i, :])

    inputs = kg.randn(4, 3, device=device)
    evaluate_network(kg.empty(4, 2, device=device), inputs, ndrange=4)
    weights = arrays.weights.to(device)
    evaluate_network_with_weights(kg.empty(4, 2, device=device), weights, inputs, ndrange=4)


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def documented_kernels(device: str) -> None:
    """The @kg.kernel examples of README.md and docs/*.md, run as documented on the
    CPU; their launches are recorded with the argument types they would have on CUDA.
    docs/kernels.md's blocks form one program; the others stand alone."""
    del device  # at their documented sizes they would take minutes in the simulator
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    programs: list[str] = []
    for path in documents:
        if not path.exists():
            continue
        blocks = _python_blocks(path)
        if path.name == "kernels.md":
            programs.append("\n\n".join(blocks).replace(DEVICE_LINE, 'device = "cpu"'))
        else:
            programs += [b for b in blocks if "@kg.kernel" in b and 'device="cuda"' not in b]
    with tempfile.TemporaryDirectory() as folder:
        for number, program in enumerate(programs):
            # Kernels need their source in a real file, so each program runs from one.
            script = Path(folder) / f"documented_example_{number}.py"
            script.write_text(program)
            cwd = os.getcwd()
            os.chdir(folder)  # examples may write files
            try:
                runpy.run_path(str(script), run_name="documented_example")
            finally:
                os.chdir(cwd)


def random_numbers(device: str) -> None:
    """Every distribution of the Philox kernels in every dtype a fill asks for."""
    for dtype in (kg.float32, kg.float64):
        kg.rand(5, dtype=dtype, device=device)
        kg.randn(5, dtype=dtype, device=device)
    for dtype in (kg.int32, kg.int64, kg.float32):
        kg.randint(0, 7, (5,), dtype=dtype, device=device)


def special_math(device: str) -> None:
    """The primitives of ops/special.py (special functions and their gradients, bit
    operations, gcd, frexp, nextafter) in float32 and float64 and both integer dtypes, and
    the composites of ops/torch_math.py that launch other kernels (scatter_reduce,
    quantile, windows)."""
    for dtype in (kg.float32, kg.float64):
        x = kg.tensor([0.3, 1.5, 4.0], dtype=dtype, device=device, requires_grad=True)
        u = kg.tensor([-0.5, 0.1, 0.7], dtype=dtype, device=device, requires_grad=True)
        a = kg.tensor([0.5, 2.0, 5.0], dtype=dtype, device=device)
        outputs = [
            kg.lgamma(x),
            kg.digamma(x),
            kg.polygamma(2, x),
            kg.erfc(u),
            kg.erfinv(u),
            kg.i0(u),
            kg.special.i1(u),
            kg.igamma(a, x),
            kg.igammac(a, x),
            kg.frexp(x).mantissa,
            kg.nextafter(x, u),
        ]
        sum(o.sum() for o in outputs).backward()
        kg.frexp(x.detach()).exponent.sum()
    for dtype in (kg.int32, kg.int64):
        i = kg.tensor([5, -3, 12], dtype=dtype, device=device)
        j = kg.tensor([3, 2, 40], dtype=dtype, device=device)
        (i & j) | (i ^ j)
        kg.bitwise_not(i)
        (i << j) + (i >> j)
        kg.gcd(i, j)
        kg.lcm(i, j)
    values = kg.randn(3, 4, device=device, requires_grad=True)
    index = kg.tensor([[0, 1, 0, 2], [2, 2, 1, 0], [0, 0, 0, 1]], device=device)
    reduced = [values.scatter_reduce(0, index, values, r) for r in ("prod", "mean", "amax")]
    sum(r.sum() for r in reduced).backward()
    kg.quantile(values.detach(), 0.3, dim=1)
    kg.kaiser_window(6, device=device) + kg.hann_window(6, device=device)


def nn_rest(device: str) -> None:
    """The rest of torch.nn and torch's top-level nn operations, forward and backward:
    multilabel_margin_loss (its target range check), triplet_margin_with_distance_loss,
    linear_cross_entropy, AdaptiveLogSoftmaxWithLoss, channel_shuffle, CrossMapLRN2d,
    SyncBatchNorm alone, upsample_nearest/bilinear, feature_dropout and embedding_bag's
    outputs in max mode."""
    import warnings

    nn, functional = kg.nn, kg.nn.functional
    kg.manual_seed(14)
    scores = kg.randn(3, 4, device=device, requires_grad=True)
    labels = _tensor([[3, 0, -1, 1], [1, 2, 3, -1], [0, 0, -1, 2]], kg.int64, device)
    functional.multilabel_margin_loss(scores, labels).backward()
    a, p, n = (kg.randn(4, 3, device=device, requires_grad=True) for _ in range(3))
    functional.triplet_margin_with_distance_loss(a, p, n, swap=True).backward()
    linear_ce = nn.LinearCrossEntropyLoss(5, 3, out_features=(2,), bias=True).to(device)
    linear_ce(kg.randn(4, 5, device=device), _tensor([[0, 1]] * 4, kg.int64, device)).backward()
    asm = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0).to(device)
    x = kg.randn(5, 8, device=device, requires_grad=True)
    asm(x, _tensor([0, 9, 4, 2, 6], kg.int64, device)).loss.backward()
    asm.predict(x.detach())
    images = kg.randn(2, 6, 3, 3, device=device, requires_grad=True)
    nn.CrossMapLRN2d(3, 0.5, 0.75, 1.0)(functional.channel_shuffle(images, 3)).sum().backward()
    nn.SyncBatchNorm(6).to(device)(images).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        functional.upsample_nearest(images, scale_factor=2).sum().backward()
        functional.upsample_bilinear(images, size=(4, 5)).sum().backward()
    kg.feature_dropout(images, 0.5, True).sum().backward()
    kg.embedding_bag(
        kg.randn(5, 3, device=device), _tensor([0, 2, 1, 4], kg.int64, device),
        _tensor([0, 2, 2], kg.int64, device), False, 2,
    )  # fmt: skip


def views_written_in_place(device: str) -> None:
    """In-place ops on views under autograd (ops/inplace.py's copy_slices and as_strided
    nodes: boolean region masks, strided copies into a base's layout), with a second
    derivative through them."""
    x = kg.randn(3, 4, device=device, requires_grad=True)
    w = kg.randn(4, device=device, requires_grad=True)
    y = x * x
    y[:, 0] += 1
    y.t()[1].mul_(x[:, 2])
    y.diagonal().relu_()
    early = y[2]
    y[0].copy_(w)
    buf = kg.zeros(3, 4, device=device)
    buf[1] += w
    loss = (y * y).sum() + (early * buf[1]).sum()
    loss.backward(create_graph=True)
    (x.grad * x.grad).sum().backward()


def more_optimizers(device: str) -> None:
    """Adafactor (factored 2-d and 3-d moments, a vector) and Muon (its Newton-Schulz
    kernels, one step of the iteration: the others launch the same): an eager step, a
    traced one and a replay at a new fed rate each; swa_utils' averages and update_bn."""
    kg.manual_seed(2)
    x = kg.randn(3, 4, device=device)
    adafactor = {"lr": 1e-2, "weight_decay": 1e-3, "maximize": True}
    for optimizer_class, options, shapes in [
        (kg.optim.Adafactor, adafactor, [(3, 4), (2, 3, 4), (4,)]),
        (kg.optim.Muon, {"lr": 2e-2, "ns_steps": 1}, [(3, 4), (4, 3)]),
    ]:
        params = [kg.nn.Parameter(kg.randn(*shape, device=device)) for shape in shapes]
        optimizer = optimizer_class(params, **options)

        def train_step(params=params, optimizer=optimizer):
            optimizer.zero_grad()
            loss = sum((p.reshape(-1)[:4] * x[0]).tanh().square().sum() for p in params)
            loss.backward()
            optimizer.step()

        step = kg.compile(train_step)
        for lr in (1e-2, 1e-2, 5e-3):  # eager, traced, replayed at a new rate
            optimizer.param_groups[0]["lr"] = lr
            step()
    model = kg.nn.Sequential(kg.nn.Linear(4, 3), kg.nn.BatchNorm1d(3)).to(device)
    for average in (
        kg.optim.swa_utils.AveragedModel(model),
        kg.optim.swa_utils.AveragedModel(
            model, multi_avg_fn=kg.optim.swa_utils.get_ema_multi_avg_fn(0.9), use_buffers=True
        ),
    ):
        for _ in range(2):
            average.update_parameters(model)
    kg.optim.swa_utils.update_bn([x, x * 2], model)


PARTS: dict[str, Callable[[str], None]] = {
    "elementwise": elementwise_ops,
    "reductions": reductions,
    "movement": movement_and_indexing,
    "nn": nn_layers,
    "more_nn": more_layers,
    "surface": surface,
    "ctc": ctc_and_fractional_pooling,
    "nnrest": nn_rest,
    "optim": optimizers,
    "compile": compiled_functions,
    "functions": elementwise_functions,
    "kernels": user_kernels,
    "docs": documented_kernels,
    "random": random_numbers,
    "math": special_math,
    "viewinplace": views_written_in_place,
    "optim2": more_optimizers,
}


def use_target_policy() -> None:
    """Give the (simulated) CUDA backend a real GPU's launch policy where it shapes the
    generated code (reduction blocks, matmul tiles, when rows are split), so the
    recorded kernels are the ones a GPU run compiles; elementwise launches keep to one
    block of at most 64 threads, which the simulator runs quickly (their code does not
    depend on the launch configuration)."""
    import dataclasses

    from .backends import get_backend
    from .backends.cuda.launch import LaunchPolicy
    from .backends.cuda.runtime import DeviceProperties
    from .device import as_device

    target = DeviceProperties("compile-check target", TARGET_MULTIPROCESSORS, (9, 0), 1024, False)
    policy = LaunchPolicy.for_device(target)
    policy = dataclasses.replace(policy, threads=64, max_blocks=1, warp=1)
    get_backend(as_device("cuda")).policy = policy


def workload(parts: list[str] | None = None, verbose: bool = False) -> Any:
    """Run the workload's ``parts`` (all by default) on the CUDA device under a
    :class:`~kernelgrad.backends.cuda.recording.Recording`; return the recording."""
    import warnings

    from .backends.cuda.recording import Recording

    use_target_policy()
    with Recording() as recording, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in parts or list(PARTS):
            start, before = time.perf_counter(), len(recording.kernels)
            PARTS[name]("cuda")
            if verbose:
                new = len(recording.kernels) - before
                elapsed = time.perf_counter() - start
                print(f"workload {name}: {new} new kernels in {elapsed:.1f} s", file=sys.stderr)
    return recording


# --- the command --------------------------------------------------------------------------
def _record_in_simulator(folder: Path, parts: list[str], jobs: int, verbose: bool) -> list[Any]:
    """Run the workload's ``parts`` under the simulator in ``jobs`` processes at once
    (each records its share); the recorded kernels, without repeats."""
    from .backends.cuda.recording import Recording

    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    processes = []
    for job in range(min(jobs, len(parts))):
        path = folder / f"recording_{job}.pickle"
        command = [sys.executable, "-m", "kernelgrad.cuda_compile_check", "--record", str(path)]
        command += ["--parts", ",".join(parts[job::jobs])]
        if verbose:
            command.append("--verbose")
        processes.append((path, subprocess.Popen(command, env=environment)))
    kernels: dict[Any, Any] = {}
    for path, process in processes:
        if process.wait() != 0:
            raise RuntimeError(f"the workload failed under the simulator ({process.args})")
        for kernel in Recording.load(path):
            known = kernels.setdefault(kernel.key, kernel)
            if known is not kernel:
                known.launches += kernel.launches
                known.block_threads = max(known.block_threads, kernel.block_threads)
    return list(kernels.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0", help="compute capability, e.g. 8.0 or 9.0")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--parts", help=f"comma-separated subset of: {', '.join(PARTS)}")
    parser.add_argument("--verbose", action="store_true", help="every kernel's resources")
    parser.add_argument("--record", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("--recorded", metavar="FILE", help="compile a saved recording")
    args = parser.parse_args(argv)
    parts = args.parts.split(",") if args.parts else None
    if parts and not set(parts) <= set(PARTS):
        parser.error(f"unknown parts {sorted(set(parts) - set(PARTS))}; known: {list(PARTS)}")
    if args.record:  # the first process, under the simulator
        if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
            parser.error("--record runs under NUMBA_ENABLE_CUDASIM=1")
        recording = workload(parts, args.verbose)
        recording.save(args.record)
        print(
            f"recorded {len(recording.kernels)} distinct kernels in {recording.launches} launches",
            file=sys.stderr,
        )
        return 0

    from .backends.cuda import compilecheck
    from .backends.cuda.recording import Recording

    cc = tuple(int(part) for part in args.cc.split("."))
    assert len(cc) == 2
    status = compilecheck.prepare(cc)  # before the workload: no compiler, no point
    if status is not None:
        return status
    start = time.perf_counter()
    if args.recorded:
        kernels = Recording.load(args.recorded)
    else:
        with tempfile.TemporaryDirectory() as folder:
            kernels = _record_in_simulator(
                Path(folder), parts or list(PARTS), max(args.jobs, 1), args.verbose
            )
    recorded = time.perf_counter()
    reports = compilecheck.compile_all(kernels, cc, max(args.jobs, 1))
    print(
        f"workload {recorded - start:.0f} s, compiling {time.perf_counter() - recorded:.0f} s "
        f"({max(args.jobs, 1)} processes)"
    )
    return compilecheck.report(reports, cc, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
