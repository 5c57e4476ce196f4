"""Group, instance, RMS and local response normalisation, the padding layers, pixel
(un)shuffle, Softmax2d, Dropout3d and alpha dropout, Bilinear, LazyLinear and the
parameter containers: against NumPy references (values, and input and parameter
gradients by central differences of the reference) on every backend, and against
PyTorch's layers with the same weights where PyTorch is installed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad import nn
from kernelgrad.errors import ArgumentError, DTypeError, IndexingError, ShapeError
from kernelgrad.torch_alias import aliased
from tests.helpers import LAYOUTS, assert_close, check_grad, tensor_with_layout
from tests.nn.test_layers import copy_parameters, randomise_parameters, run_both, run_numpy

RNG = np.random.default_rng(11)
SELU_ALPHA_SCALE = 1.7580993408473766


# --- NumPy references ---------------------------------------------------------------------
def group_norm_ref(x, groups, weight=None, bias=None, eps=1e-5):
    n, c = x.shape[:2]
    grouped = x.reshape(n, groups, -1)
    mean = grouped.mean(2, keepdims=True)
    var = grouped.var(2, keepdims=True)
    y = ((grouped - mean) / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def instance_norm_ref(x, weight=None, bias=None, eps=1e-5):
    dims = tuple(range(2, x.ndim))
    y = (x - x.mean(dims, keepdims=True)) / np.sqrt(x.var(dims, keepdims=True) + eps)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def rms_norm_ref(x, ndims, weight=None, eps=1e-6):
    dims = tuple(range(x.ndim - ndims, x.ndim))
    y = x / np.sqrt((x * x).mean(dims, keepdims=True) + eps)
    return y * weight if weight is not None else y


def local_response_norm_ref(x, size, alpha=1e-4, beta=0.75, k=1.0):
    """The definition: channel c sees channels c - size // 2 to c + (size - 1) // 2."""
    squares = x * x
    div = np.zeros_like(x)
    for c in range(x.shape[1]):
        low, high = max(c - size // 2, 0), min(c + (size - 1) // 2, x.shape[1] - 1)
        div[:, c] = squares[:, low : high + 1].sum(1)
    return x / (k + alpha / size * div) ** beta


def pad_ref(x, padding, mode, value=0.0):
    pairs = [(0, 0)] * (x.ndim - len(padding) // 2) + [
        (padding[2 * i], padding[2 * i + 1]) for i in reversed(range(len(padding) // 2))
    ]
    numpy_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}
    if mode == "circular":
        return np.pad(x, pairs, mode="wrap")
    if mode == "constant":
        return np.pad(x, pairs, mode="constant", constant_values=value)
    return np.pad(x, pairs, mode=numpy_mode[mode])


def pixel_shuffle_ref(x, r):
    """Output (c, h * r + i, w * r + j) is input channel c * r * r + i * r + j at (h, w)."""
    *lead, channels, height, width = x.shape
    out = np.zeros((*lead, channels // (r * r), height * r, width * r), x.dtype)
    for c in range(channels // (r * r)):
        for i in range(r):
            for j in range(r):
                out[..., c, i::r, j::r] = x[..., c * r * r + i * r + j, :, :]
    return out


def bilinear_ref(x1, x2, weight, bias=None):
    y = np.einsum("...i,oij,...j->...o", x1, weight, x2)
    return y + bias if bias is not None else y


# --- normalisation: values and gradients on every backend ----------------------------------
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_layer_matches_the_numpy_reference(affine, device, simulated):
    shape = (2, 4, 3) if simulated else (3, 6, 2, 3)
    groups = 2 if simulated else 3
    layer = nn.GroupNorm(groups, shape[1], affine=affine).to(device).double()
    assert [name for name, _ in layer.named_parameters()] == (["weight", "bias"] if affine else [])
    if affine:
        randomise_parameters(layer)
    x = RNG.standard_normal(shape) * 2 + 1

    def reference(x, weight=None, bias=None):
        return group_norm_ref(x, groups, weight, bias)

    run_numpy(layer, reference, x, device)


def test_group_norm_functional_gradients_and_a_single_group_is_layer_norm():
    x = RNG.standard_normal((2, 4, 3))
    w, b = RNG.uniform(0.5, 1.5, 4), RNG.standard_normal(4)
    check_grad(lambda a, c, d: F.group_norm(a, 2, c, d), x, w, b)
    # one group normalises each sample over everything: layer_norm of the sample
    one = F.group_norm(kg.tensor(x), 1)
    assert_close(one, F.layer_norm(kg.tensor(x), (4, 3)).numpy(), rtol=1e-9, atol=1e-9)
    # one group per channel is instance normalisation
    each = F.group_norm(kg.tensor(x), 4)
    assert_close(each, instance_norm_ref(x), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_instance_norm_layers_track_running_statistics(spatial, device, simulated):
    size = (3,) * spatial if not simulated else (2,) * spatial
    layer = getattr(nn, f"InstanceNorm{spatial}d")(
        3, momentum=0.2, affine=True, track_running_stats=True
    ).to(device, kg.float64)
    assert [name for name, _ in layer.named_buffers()] == [
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ]
    randomise_parameters(layer)
    batches = [RNG.standard_normal((2, 3, *size)) * 2 + 1 for _ in range(2)]
    mean, var = np.zeros(3), np.ones(3)
    count = int(np.prod(size))
    for batch in batches:
        run_numpy(layer, instance_norm_ref, batch, device)
        dims = tuple(range(2, batch.ndim))
        # PyTorch's rule: the batch mean of each instance's mean and unbiased variance
        mean = 0.8 * mean + 0.2 * batch.mean(dims).mean(0)
        var = 0.8 * var + 0.2 * (batch.var(dims) * count / (count - 1)).mean(0)
    assert_close(layer.running_mean, mean, rtol=1e-9, atol=1e-9)
    assert_close(layer.running_var, var, rtol=1e-9, atol=1e-9)
    assert layer.num_batches_tracked.item() == 0  # as PyTorch: instance norm never counts
    layer.eval()  # the running statistics normalise now
    x = RNG.standard_normal((2, 3, *size))
    shape = (1, 3) + (1,) * spatial

    def with_running(x, weight, bias):
        y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + 1e-5)
        return y * weight.reshape(shape) + bias.reshape(shape)

    run_numpy(layer, with_running, x, device)
    assert_close(layer.running_mean, mean, rtol=1e-9, atol=1e-9)  # not updated in eval


def test_instance_norm_defaults_unbatched_input_and_gradients(device):
    layer = nn.InstanceNorm2d(3).to(device)
    assert layer.weight is None and layer.bias is None and layer.running_mean is None
    assert layer.state_dict() == {}
    assert repr(layer) == (
        "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, "
        "track_running_stats=False)"
    )
    x = RNG.standard_normal((3, 2, 3))
    assert_close(layer(kg.tensor(x, device=device)), instance_norm_ref(x[None])[0], 1e-9, 1e-9)
    layer.eval()  # without running statistics, eval still uses the input's statistics
    assert_close(layer(kg.tensor(x, device=device)), instance_norm_ref(x[None])[0], 1e-9, 1e-9)
    if device == "cpu":
        w, b = RNG.uniform(0.5, 1.5, 3), RNG.standard_normal(3)
        check_grad(lambda a, c, d: F.instance_norm(a, weight=c, bias=d), x[None], w, b)


@pytest.mark.parametrize("normalized_shape", [(4,), (3, 4)])
def test_rms_norm_layer_matches_the_numpy_reference(normalized_shape, device):
    layer = nn.RMSNorm(normalized_shape, eps=1e-6).to(device)
    assert layer.weight.shape == normalized_shape
    randomise_parameters(layer)
    x = RNG.standard_normal((2, 3, 4))

    def reference(x, weight):
        return rms_norm_ref(x, len(normalized_shape), weight)

    run_numpy(layer, reference, x, device)


def test_rms_norm_default_eps_is_the_dtypes_machine_epsilon():
    x = np.array([[1e-4, -2e-4, 3e-4]])
    for dtype, numpy_dtype in ((kg.float32, np.float32), (kg.float64, np.float64)):
        got = F.rms_norm(kg.tensor(x, dtype=dtype), (3,))
        eps = float(np.finfo(numpy_dtype).eps)
        assert_close(got, rms_norm_ref(x, 1, eps=eps).astype(numpy_dtype), rtol=1e-5, atol=0)
    # the difference is visible: a fixed 1e-5 would give a different result here
    assert not np.allclose(rms_norm_ref(x, 1, eps=1e-5), rms_norm_ref(x, 1, eps=2.2e-16))
    layer = nn.RMSNorm(3, elementwise_affine=False)
    assert layer.weight is None and list(layer.parameters()) == []
    assert repr(layer) == "RMSNorm((3,), eps=None, elementwise_affine=False)"


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_local_response_norm_matches_the_numpy_reference(size, device, simulated):
    shape = (2, 4, 3) if simulated else (2, 5, 2, 3)
    layer = nn.LocalResponseNorm(size, alpha=0.5, beta=0.6, k=1.5)
    x = RNG.standard_normal(shape)

    def reference(x):
        return local_response_norm_ref(x, size, 0.5, 0.6, 1.5)

    run_numpy(layer, reference, x, device)
    assert repr(layer) == f"LocalResponseNorm({size}, alpha=0.5, beta=0.6, k=1.5)"


# --- normalisation against PyTorch ---------------------------------------------------------
NORM_LAYERS = [
    ("group", lambda m: m.GroupNorm(3, 6), (2, 6, 4)),
    ("group-no-affine", lambda m: m.GroupNorm(2, 6, affine=False), (2, 6, 2, 3)),
    ("group-no-bias", lambda m: m.GroupNorm(2, 6, bias=False), (2, 6, 3)),
    ("instance1d", lambda m: m.InstanceNorm1d(6, affine=True), (2, 6, 5)),
    ("instance1d-unbatched", lambda m: m.InstanceNorm1d(6, affine=True), (6, 5)),
    ("instance2d-default", lambda m: m.InstanceNorm2d(6), (2, 6, 3, 2)),
    ("instance3d", lambda m: m.InstanceNorm3d(6, affine=True), (1, 6, 2, 2, 3)),
    ("rms", lambda m: m.RMSNorm((3, 4)), (2, 3, 4)),
    ("rms-eps", lambda m: m.RMSNorm(4, eps=1e-3), (2, 5, 4)),
    ("lrn", lambda m: m.LocalResponseNorm(3, alpha=0.3, beta=0.9, k=2.0), (2, 6, 3)),
    ("lrn-4d", lambda m: m.LocalResponseNorm(4), (2, 6, 2, 3)),
]


@pytest.mark.torch
@pytest.mark.parametrize(
    ("make", "shape"), [c[1:] for c in NORM_LAYERS], ids=[c[0] for c in NORM_LAYERS]
)
def test_normalisation_layers_match_pytorch(make, shape):
    torch = pytest.importorskip("torch")
    theirs, mine = make(torch.nn), make(nn)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(0.5, 1.5)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    assert repr(mine) == repr(theirs)
    copy_parameters(theirs, mine)
    run_both(mine, theirs, RNG.standard_normal(shape).astype(np.float32), "cpu")


@pytest.mark.torch
def test_instance_norm_running_statistics_match_pytorch():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.InstanceNorm2d(4, momentum=0.3, affine=True, track_running_stats=True)
    mine = nn.InstanceNorm2d(4, momentum=0.3, affine=True, track_running_stats=True)
    copy_parameters(theirs, mine)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    for _ in range(2):
        run_both(mine, theirs, RNG.standard_normal((3, 4, 2, 3)).astype(np.float32) + 1, "cpu")
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_close(getattr(mine, name), getattr(theirs, name).numpy(), rtol=1e-5)
    mine.eval()
    theirs.eval()
    run_both(mine, theirs, RNG.standard_normal((4, 3, 2)).astype(np.float32), "cpu")
    # momentum=None: PyTorch passes 0.0 (the running statistics stay as they are)
    frozen_t = torch.nn.InstanceNorm1d(2, momentum=None, track_running_stats=True)
    frozen_k = nn.InstanceNorm1d(2, momentum=None, track_running_stats=True)
    x = RNG.standard_normal((2, 2, 4)).astype(np.float32)
    frozen_t(torch.tensor(x))
    frozen_k(kg.tensor(x))
    assert_close(frozen_k.running_var, frozen_t.running_var.numpy())


def test_normalisation_errors():
    x = kg.zeros(2, 4, 3)
    with pytest.raises(ArgumentError, match=r"num_channels \(4\) must be divisible by num_groups"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ShapeError, match=r"has 4 channels .* num_groups=3 must divide"):
        F.group_norm(x, 3)
    with pytest.raises(ShapeError, match="at least 2 dims"):
        F.group_norm(kg.zeros(4), 2)
    with pytest.raises(ShapeError, match=r"weight has shape \(3,\).* must have shape \(4,\)"):
        F.group_norm(x, 2, kg.ones(3))
    with pytest.raises(DTypeError, match="floating point"):
        F.group_norm(kg.zeros(2, 4, dtype=kg.int64), 2)
    with pytest.raises(DTypeError, match=r"the input is kg\.float64 but weight is kg\.float32"):
        nn.GroupNorm(2, 4)(x.double())  # as PyTorch: no mixed dtypes
    with pytest.raises(DTypeError, match=r"but running_mean is kg\.float32"):
        nn.InstanceNorm1d(4, track_running_stats=True)(x.double())
    with pytest.raises(ShapeError, match=r"expected a 3-d \(batched\) or 2-d input"):
        nn.InstanceNorm1d(4)(kg.zeros(4))
    with pytest.raises(ArgumentError, match="at dim=1 to match num_features"):
        nn.InstanceNorm1d(3, affine=True)(x)
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(3)(x)
    with pytest.raises(ArgumentError, match="more than 1 spatial element"):
        F.instance_norm(kg.zeros(2, 3, 1))
    with pytest.raises(ShapeError, match=r"running_mean has shape \(5,\)"):
        F.instance_norm(x, kg.zeros(5), kg.ones(5))
    with pytest.raises(ArgumentError, match="running statistics are needed"):
        F.instance_norm(x, use_input_stats=False)
    with pytest.raises(ShapeError, match=r"normalized_shape \(4,\) must be the last dims"):
        F.rms_norm(x, (4,))
    with pytest.raises(ShapeError, match=r"weight has shape \(2,\)"):
        F.rms_norm(x, (3,), kg.ones(2))
    with pytest.raises(ShapeError, match="at least 3 dims"):
        F.local_response_norm(kg.zeros(2, 3), 2)
    with pytest.raises(ArgumentError, match="size must be positive"):
        F.local_response_norm(x, 0)


@pytest.mark.torch
def test_normalisation_errors_are_pytorchs_exception_types():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    calls = [
        (lambda m: m.GroupNorm(3, 4), None),
        (lambda f, t: f.group_norm(t(np.zeros((2, 4, 3))), 3), "functional"),
        (lambda f, t: f.group_norm(t(np.zeros(4)), 2), "functional"),
        (lambda f, t: f.instance_norm(t(np.zeros((2, 3, 1)))), "functional"),
        (lambda f, t: f.rms_norm(t(np.zeros((2, 3))), (4,)), "functional"),
        (lambda f, t: f.local_response_norm(t(np.zeros((2, 3))), 2), "functional"),
    ]
    for call, kind in calls:
        with pytest.raises(Exception) as theirs:
            call(torch.nn) if kind is None else call(tf, torch.tensor)
        with pytest.raises(type(theirs.value)):
            call(nn) if kind is None else call(F, kg.tensor)
    for module in (torch.nn, nn):
        with pytest.raises(ValueError):  # both: the wrong number of dims, affine mismatch
            module.InstanceNorm1d(3)((torch.zeros if module is torch.nn else kg.zeros)(3))


# --- padding -------------------------------------------------------------------------------
PAD_KINDS = [
    ("ZeroPad", "constant"),
    ("ConstantPad", "constant"),
    ("ReflectionPad", "reflect"),
    ("ReplicationPad", "replicate"),
    ("CircularPad", "circular"),
]


def _pad_layer(module, kind, dims, padding):
    layer = getattr(module, f"{kind}{dims}d")
    return layer(padding, 2.5) if kind == "ConstantPad" else layer(padding)


@pytest.mark.parametrize(("kind", "mode"), PAD_KINDS)
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_padding_layers_match_the_numpy_reference(kind, mode, dims, device, simulated):
    padding = (1, 2, 0, 1, 2, 1)[: 2 * dims]
    layer = _pad_layer(nn, kind, dims, padding)
    assert layer.padding == padding
    value = 2.5 if kind == "ConstantPad" else 0.0
    size = (3, 4, 3)[:dims] if dims < 3 or not simulated else (3, 2, 3)
    for lead in ((2, 2), (2,)):  # batched and unbatched
        x = RNG.standard_normal(lead + size)
        run_numpy(layer, lambda a: pad_ref(a, padding, mode, value), x, device)
    square = _pad_layer(nn, kind, dims, 1)
    assert square.padding == (1,) * (2 * dims)
    x = RNG.standard_normal((2,) + (3,) * dims)
    assert_close(square(kg.tensor(x, device=device)), pad_ref(x, (1,) * (2 * dims), mode, value))


@pytest.mark.torch
@pytest.mark.parametrize(("kind", "mode"), PAD_KINDS)
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_padding_layers_match_pytorch(kind, mode, dims):
    torch = pytest.importorskip("torch")
    for padding in ((2, 1, 1, 0, 0, 2)[: 2 * dims], 1):
        theirs, mine = (
            _pad_layer(torch.nn, kind, dims, padding),
            _pad_layer(nn, kind, dims, padding),
        )
        assert repr(mine) == repr(theirs)
        x = RNG.standard_normal((2, 3) + (3, 4, 3)[:dims]).astype(np.float32)
        run_both(mine, theirs, x, "cpu")


def test_padding_errors():
    with pytest.raises(ArgumentError, match=r"a tuple of 2 to 4 ints"):
        nn.ZeroPad2d((1, 2, 3))
    # a shorter tuple pads the last dims only, as PyTorch's ZeroPad2d((1, 2)) does
    short = nn.ZeroPad2d((1, 2))(kg.ones(1, 1, 2, 2))
    assert short.shape == (1, 1, 2, 5) and short.numpy()[0, 0].tolist() == [[0, 1, 1, 0, 0]] * 2
    with pytest.raises(ArgumentError, match=r"a tuple of 2 ints"):
        nn.ReflectionPad1d((1, 2, 3))
    with pytest.raises(ShapeError, match=r"expected a 4-d \(batched\) or 3-d input"):
        nn.ReflectionPad2d(1)(kg.zeros(3, 3))
    with pytest.raises(ShapeError, match="must be smaller than its size"):
        nn.ReflectionPad1d(3)(kg.zeros(1, 3))
    with pytest.raises(ShapeError, match="must be at most its size"):
        nn.CircularPad1d(4)(kg.zeros(1, 3))
    # constant padding takes any number of leading dims, as PyTorch
    assert nn.ZeroPad1d(1)(kg.zeros(3)).shape == (5,)
    assert nn.ConstantPad2d(1, 1.0)(kg.zeros(2, 2, 2, 2, 2)).shape == (2, 2, 2, 4, 4)


# --- pixel shuffle, Softmax2d ----------------------------------------------------------------
@pytest.mark.parametrize("lead", [(), (2,), (2, 1)])
def test_pixel_shuffle_and_unshuffle(lead, device, simulated):
    r = 2
    x = RNG.standard_normal((*lead, 8, 2, 3))
    shuffled = nn.PixelShuffle(r)(kg.tensor(x, device=device))
    expected = pixel_shuffle_ref(x, r)
    assert_close(shuffled, expected, rtol=0, atol=0)
    back = nn.PixelUnshuffle(r)(shuffled)
    assert_close(back, x, rtol=0, atol=0)
    if not simulated:
        check_grad(lambda a: F.pixel_shuffle(a, r) * F.pixel_shuffle(a, r), x, device=device)
        check_grad(lambda a: F.pixel_unshuffle(a, r) ** 2, expected, device=device)
    assert repr(nn.PixelShuffle(3)) == "PixelShuffle(upscale_factor=3)"
    assert repr(nn.PixelUnshuffle(2)) == "PixelUnshuffle(downscale_factor=2)"


@pytest.mark.torch
def test_pixel_shuffle_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 18, 2, 4)).astype(np.float32)
    run_both(nn.PixelShuffle(3), torch.nn.PixelShuffle(3), x, "cpu")
    run_both(nn.PixelUnshuffle(2), torch.nn.PixelUnshuffle(2), x, "cpu")


def test_pixel_shuffle_errors():
    with pytest.raises(ShapeError, match=r"must be divisible by upscale_factor\*\*2 = 4"):
        F.pixel_shuffle(kg.zeros(1, 6, 2, 2), 2)
    with pytest.raises(ShapeError, match="at least 3 dims"):
        F.pixel_shuffle(kg.zeros(4, 2), 2)
    with pytest.raises(ShapeError, match="must be divisible by downscale_factor = 2"):
        F.pixel_unshuffle(kg.zeros(1, 1, 3, 4), 2)
    with pytest.raises(ArgumentError, match="must be a positive int"):
        F.pixel_unshuffle(kg.zeros(1, 1, 2, 2), 0)


def test_softmax2d(device):
    x = RNG.standard_normal((2, 3, 2, 2))
    expected = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    run_numpy(nn.Softmax2d(), lambda a: np.exp(a) / np.exp(a).sum(-3, keepdims=True), x, device)
    assert_close(nn.Softmax2d()(kg.tensor(x[0], device=device)), expected[0])  # unbatched
    with pytest.raises(ShapeError, match=r"4-d \(N, C, H, W\) or 3-d"):
        nn.Softmax2d()(kg.zeros(2, 3))


# --- dropout -------------------------------------------------------------------------------
def test_dropout3d_zeroes_whole_channels(device):
    kg.manual_seed(0)
    x = kg.tensor(RNG.uniform(1, 2, (4, 5, 2, 2, 2)), device=device, requires_grad=True)
    out = nn.Dropout3d(0.5)(x)
    values, kept = out.detach().cpu().numpy(), x.detach().cpu().numpy() * 2.0
    per_channel = values.reshape(4, 5, -1)
    zero = (per_channel == 0).all(-1)
    scaled = np.isclose(per_channel, kept.reshape(4, 5, -1)).all(-1)
    assert (zero | scaled).all() and zero.any() and scaled.any()
    out.sum().backward()
    assert_close(x.grad, np.where(zero, 0.0, 2.0)[..., None, None, None] * np.ones((2, 2, 2)))
    assert F.dropout3d(kg.ones(3, 2, 2, 2), 0.5).shape == (3, 2, 2, 2)  # unbatched
    assert nn.Dropout3d(0.5).eval()(x) is x
    with pytest.raises(ShapeError, match=r"dropout3d: expected a 5-d \(batched\) or 4-d"):
        F.dropout3d(kg.ones(2, 2, 2))


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_keeps_or_saturates_with_the_affine_correction(feature, device):
    kg.manual_seed(1)
    p = 0.3
    a = 1.0 / np.sqrt((SELU_ALPHA_SCALE**2 * p + 1) * (1 - p))
    x_values = RNG.standard_normal((6, 4, 5))
    x = kg.tensor(x_values, device=device, requires_grad=True)
    layer = nn.FeatureAlphaDropout(p) if feature else nn.AlphaDropout(p)
    out = layer(x)
    got = out.detach().cpu().numpy()
    kept = np.isclose(got, a * x_values + SELU_ALPHA_SCALE * a * p)
    dropped = np.isclose(got, -SELU_ALPHA_SCALE * a * (1 - p))
    assert (kept | dropped).all() and kept.any() and dropped.any()
    if feature:  # one draw per (sample, channel)
        assert (kept.all(-1) | dropped.all(-1)).all()
    out.sum().backward()
    assert_close(x.grad, np.where(kept, a, 0.0))
    layer.eval()
    assert layer(x) is x
    functional = F.feature_alpha_dropout if feature else F.alpha_dropout
    assert functional(x, p) is x  # training=False by default, as PyTorch
    assert_close(functional(x, 1.0, training=True), np.zeros(x.shape))


def test_alpha_dropout_keeps_mean_and_variance():
    kg.manual_seed(2)
    x = kg.randn(200_000, dtype=kg.float64)
    out = F.alpha_dropout(x, 0.2, training=True)
    # standard normal in, standard normal moments out (SELU's fixed point); a plain
    # dropout would give variance 1 / (1 - p) = 1.25
    assert abs(out.mean().item()) < 0.02 and abs(out.var().item() - 1.0) < 0.03
    with pytest.raises(ArgumentError, match="p must be between 0 and 1"):
        nn.AlphaDropout(1.5)
    with pytest.raises(ArgumentError, match="p must be between 0 and 1"):
        F.alpha_dropout(x, -0.1, True)


# --- Bilinear and LazyLinear -----------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear_layer_matches_the_numpy_reference(bias, device):
    layer = nn.Bilinear(3, 4, 2, bias=bias).to(device)
    assert layer.weight.shape == (2, 3, 4)
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"][: 1 + bias]
    x1 = RNG.standard_normal((2, 3, 3)).astype(np.float32)
    x2 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    kx1 = kg.tensor(x1, device=device, requires_grad=True)
    kx2 = kg.tensor(x2, device=device, requires_grad=True)
    weight, b = layer.weight.detach().cpu().numpy(), layer.bias
    b = None if b is None else b.detach().cpu().numpy()
    out = layer(kx1, kx2)
    assert_close(out, bilinear_ref(x1, x2, weight, b), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    assert_close(kx1.grad, np.einsum("oij,...j->...i", weight, x2), rtol=1e-5, atol=1e-5)
    assert_close(kx2.grad, np.einsum("...i,oij->...j", x1, weight), rtol=1e-5, atol=1e-5)
    assert_close(layer.weight.grad, np.einsum("abi,abj->ij", x1, x2)[None].repeat(2, 0), 1e-5, 1e-5)
    if device == "cpu":
        w, c = RNG.standard_normal((2, 3, 4)), RNG.standard_normal(2)
        check_grad(F.bilinear, x1[0], x2[0], w, c)
    bound = 1 / np.sqrt(3)  # PyTorch's initialisation: U(+-1/sqrt(in1_features))
    fresh = nn.Bilinear(3, 40, 50)
    assert bound / 2 < fresh.weight.abs().amax().item() <= bound
    assert fresh.bias.abs().amax().item() <= bound


@pytest.mark.torch
def test_bilinear_matches_pytorch():
    torch = pytest.importorskip("torch")
    theirs, mine = torch.nn.Bilinear(3, 4, 5), nn.Bilinear(3, 4, 5)
    copy_parameters(theirs, mine)
    assert repr(mine) == repr(theirs)
    x1, x2 = (RNG.standard_normal((2, 3, n)).astype(np.float32) for n in (3, 4))
    t1, t2 = (torch.tensor(v, requires_grad=True) for v in (x1, x2))
    k1, k2 = (kg.tensor(v, requires_grad=True) for v in (x1, x2))
    expected, out = theirs(t1, t2), mine(k1, k2)
    assert_close(out, expected.detach().numpy(), rtol=1e-5, atol=1e-5)
    (expected**2).sum().backward()
    (out**2).sum().backward()
    for got, want in ((k1, t1), (k2, t2), (mine.weight, theirs.weight), (mine.bias, theirs.bias)):
        assert_close(got.grad, want.grad.numpy(), rtol=1e-4, atol=1e-4)
    with pytest.raises(Exception) as error:
        torch.nn.functional.bilinear(t1, t2[:1], theirs.weight)
    with pytest.raises(type(error.value), match="must share their leading dims"):
        F.bilinear(k1, k2[:1], mine.weight)


def test_lazy_linear_infers_in_features_and_keeps_its_parameters(device):
    layer = nn.LazyLinear(3).to(device)
    weight, bias = layer.weight, layer.bias
    assert repr(layer) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    optimizer = kg.optim.SGD(layer.parameters(), lr=0.1)  # built before the first call
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    out = layer(kg.tensor(x, device=device))
    assert type(layer) is nn.Linear and layer.in_features == 5
    assert layer.weight is weight and layer.bias is bias and weight.shape == (3, 5)
    assert weight.device.type == kg.tensor(0.0, device=device).device.type
    assert_close(out, x @ weight.detach().cpu().numpy().T + bias.detach().cpu().numpy(), 1e-5, 1e-6)
    assert 0 < weight.abs().amax().item() <= 1 / np.sqrt(5)  # PyTorch's bound
    before = weight.detach().cpu().numpy().copy()
    out.sum().backward()
    optimizer.step()
    assert_close(weight, before - 0.1 * x.sum(0)[None].repeat(3, 0), 1e-5, 1e-6)
    with pytest.raises(nn.UnsupportedLayerError, match="has not seen an input yet"):
        nn.device_function(nn.Sequential(nn.LazyLinear(2), nn.ReLU()))
    no_bias = nn.LazyLinear(2, bias=False)
    assert no_bias(kg.ones(2, 3)).shape == (2, 2) and no_bias.bias is None


@pytest.mark.torch
@pytest.mark.parametrize("called_first", [True, False])
def test_lazy_linear_loads_pytorch_state_dicts(called_first):
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Sequential(torch.nn.LazyLinear(3), torch.nn.Tanh(), torch.nn.LazyLinear(2))
    mine = nn.Sequential(nn.LazyLinear(3), nn.Tanh(), nn.LazyLinear(2))
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    theirs(torch.tensor(x))
    assert repr(nn.LazyLinear(3)) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    if called_first:
        mine(kg.tensor(x))
    weight = mine[0].weight
    copy_parameters(theirs, mine)  # before the first call: the shapes come from the dict
    assert mine[0].weight is weight and type(mine[2]) is nn.Linear
    assert repr(mine) == repr(theirs)
    run_both(mine, theirs, x, "cpu")
    with pytest.raises(ShapeError, match="the module has shape"):  # a wrong out_features
        nn.LazyLinear(5).load_state_dict({"weight": np.zeros((3, 4)), "bias": np.zeros(3)})


@pytest.mark.torch
def test_batch_norm3d_matches_pytorch():
    torch = pytest.importorskip("torch")
    theirs, mine = torch.nn.BatchNorm3d(3, momentum=0.3), nn.BatchNorm3d(3, momentum=0.3)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
        theirs.bias.uniform_(-0.5, 0.5)
    copy_parameters(theirs, mine)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    for _ in range(2):
        run_both(mine, theirs, RNG.standard_normal((2, 3, 2, 3, 2)).astype(np.float32), "cpu")
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert_close(getattr(mine, name), getattr(theirs, name).numpy(), rtol=1e-5)
    mine.eval()
    theirs.eval()
    run_both(mine, theirs, RNG.standard_normal((2, 3, 1, 2, 2)).astype(np.float32), "cpu")
    with pytest.raises(ValueError, match="expects a 5-d input"):
        mine(kg.zeros(2, 3, 4, 4))


@pytest.mark.torch
def test_padding_and_shuffle_errors_are_pytorchs_exception_types():
    torch = pytest.importorskip("torch")
    calls = [
        lambda m, z: m.ReflectionPad1d(3)(z(1, 3)),
        lambda m, z: m.CircularPad1d(4)(z(1, 3)),
        lambda m, z: m.CircularPad2d(1)(z(3, 3)),
        lambda m, z: m.PixelShuffle(2)(z(1, 6, 2, 2)),
        lambda m, z: m.PixelShuffle(2)(z(4, 2)),
        lambda m, z: m.PixelUnshuffle(2)(z(1, 1, 3, 4)),
        lambda m, z: m.Softmax2d()(z(2, 3)),
        lambda m, z: m.Bilinear(2, 3, 4)(z(5, 2), z(5, 2)),
    ]
    for call in calls:
        with pytest.raises(Exception) as theirs:
            call(torch.nn, torch.zeros)
        with pytest.raises(type(theirs.value)):
            call(nn, kg.zeros)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_functions_on_non_contiguous_inputs(layout, device):
    """Permuted, strided and offset views give the values of the contiguous input."""
    x = RNG.standard_normal((2, 4, 2, 3))
    view = tensor_with_layout(x, layout, device)
    cases = [
        (lambda t: F.group_norm(t, 2), group_norm_ref(x, 2)),
        (lambda t: F.instance_norm(t), instance_norm_ref(x)),
        (lambda t: F.rms_norm(t, (2, 3), eps=1e-6), rms_norm_ref(x, 2)),
        (lambda t: F.local_response_norm(t, 3), local_response_norm_ref(x, 3)),
        (lambda t: F.pixel_shuffle(t, 2), pixel_shuffle_ref(x, 2)),
        (lambda t: nn.ReflectionPad2d((1, 0, 1, 1))(t), pad_ref(x, (1, 0, 1, 1), "reflect")),
    ]
    for fn, expected in cases:
        assert_close(fn(view), expected, rtol=1e-9, atol=1e-9)
    if device == "cpu":
        check_grad(lambda t: F.group_norm(t, 2), x, layout=layout)


# --- parameter containers ------------------------------------------------------------------
class _Holder(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.scales = module.ParameterList([module.Parameter(z(3)) for z in (np_zeros, np_ones)])
        self.table = module.ParameterDict({"shift": module.Parameter(np_ones(2))})


def np_zeros(n):
    return np.zeros(n, np.float32)


def np_ones(n):
    return np.ones(n, np.float32)


def test_parameter_list_names_state_and_editing():
    params = nn.ParameterList([kg.zeros(2), nn.Parameter(kg.ones(3))])
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in params)
    params.append(kg.full((4,), 2.0))
    params += [kg.zeros(1)]
    assert len(params) == 4 and [p.shape for p in params] == [(2,), (3,), (4,), (1,)]
    assert [name for name, _ in params.named_parameters()] == ["0", "1", "2", "3"]
    assert params[-1].shape == (1,) and len(params[1:3]) == 2
    params[0] = kg.ones(5)
    assert list(params.state_dict()) == ["0", "1", "2", "3"] and params[0].shape == (5,)
    model = nn.Module()
    model.extra = params
    assert [name for name, _ in model.named_parameters()] == [f"extra.{i}" for i in range(4)]
    assert "(1): Parameter containing: [kg.float32 of size 3]" in repr(params)
    with pytest.raises(IndexingError, match="out of range for 4 values"):
        params[4]
    with pytest.raises(DTypeError, match="iterable"):
        params.extend(kg.zeros(2))


def test_parameter_dict_names_state_and_editing():
    params = nn.ParameterDict({"scale": kg.ones(2), "shift": nn.Parameter(kg.zeros(2))})
    assert params.keys() == ["scale", "shift"] and "scale" in params and len(params) == 2
    assert isinstance(params["scale"], nn.Parameter)
    params["bias"] = kg.zeros(3)
    params.update({"scale": kg.full((2,), 3.0)})
    assert [name for name, _ in params.named_parameters()] == ["scale", "shift", "bias"]
    assert params["scale"].tolist() == [3.0, 3.0]
    assert params.pop("shift").shape == (2,) and "shift" not in params
    assert list(params.state_dict()) == ["scale", "bias"] and params.get("missing") is None
    with pytest.raises(KeyError):
        params["missing"]
    with pytest.raises(ArgumentError, match="names an attribute"):
        params["keys"] = kg.zeros(1)
    params.clear()
    assert len(params) == 0 and list(params.parameters()) == []


def test_parameter_containers_move_with_to_and_train(device):
    model = _Holder(nn).to(device).to(kg.float64)
    params = list(model.parameters())
    assert len(params) == 3 and all(p.dtype == kg.float64 for p in params)
    assert model.scales[0] is params[0] and model.table["shift"] is params[2]
    assert model.scales[1].device.type == kg.tensor(0.0, device=device).device.type
    optimizer = kg.optim.SGD(model.parameters(), lr=0.5)
    loss = (model.scales[0] + model.scales[1]).sum() + (model.table["shift"] ** 2).sum()
    loss.backward()
    optimizer.step()
    assert_close(model.scales[0], np.full(3, -0.5))
    assert_close(model.table["shift"], np.zeros(2))


@pytest.mark.torch
def test_parameter_containers_load_pytorch_state_dicts():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Module()
    theirs.scales = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(3)) for _ in range(2)])
    theirs.table = torch.nn.ParameterDict({"shift": torch.nn.Parameter(torch.randn(2))})
    mine = _Holder(nn)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    copy_parameters(theirs, mine)
    assert_close(mine.scales[1], theirs.scales[1].detach().numpy())
    assert_close(mine.table["shift"], theirs.table["shift"].detach().numpy())


def test_a_training_step_through_the_new_layers_compiles():
    """Composed of tensor operations, the layers trace under kg.compile: three compiled
    SGD steps give the eager steps' loss, parameters and running statistics."""
    import copy

    def make():
        return nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1),
            nn.GroupNorm(2, 4),
            nn.ReflectionPad2d(1),
            nn.PixelShuffle(2),
            nn.InstanceNorm2d(1, affine=True, track_running_stats=True),
            nn.LocalResponseNorm(2),
            nn.Flatten(),
            nn.Linear(144, 3),
            nn.RMSNorm(3),
        )

    kg.manual_seed(3)
    eager = make()
    compiled_model = copy.deepcopy(eager)
    x = kg.tensor(RNG.standard_normal((2, 1, 4, 4)).astype(np.float32))
    losses = []
    for model, wrap in ((eager, lambda f: f), (compiled_model, kg.compile)):
        optimizer = kg.optim.SGD(model.parameters(), lr=0.05)

        def step(x, model=model, optimizer=optimizer):
            optimizer.zero_grad()
            loss = (model(x) ** 2).sum()
            loss.backward()
            optimizer.step()
            return loss

        run = wrap(step)
        losses.append([float(run(x).item()) for _ in range(3)])
    assert len(run.plans) == 1  # the compiled version ran (traced once, then replayed)
    assert losses[0][0] != losses[0][2]  # the steps change the model
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    theirs = eager.state_dict()
    for name, mine in compiled_model.state_dict().items():
        assert_close(mine, theirs[name].numpy(), rtol=1e-5, atol=1e-6)


def test_new_layers_through_the_torch_alias():
    with aliased():
        import torch
        import torch.nn.functional as TF

        assert torch.nn.GroupNorm is nn.GroupNorm and torch.nn.RMSNorm is nn.RMSNorm
        assert torch.nn.ReflectionPad2d is nn.ReflectionPad2d
        assert torch.nn.ParameterList is nn.ParameterList
        assert TF.group_norm is F.group_norm and TF.pixel_shuffle is F.pixel_shuffle
        assert TF.instance_norm is F.instance_norm and TF.bilinear is F.bilinear
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = torch.nn.Sequential(
                torch.nn.Conv2d(1, 4, 3, padding=1),
                torch.nn.GroupNorm(2, 4),
                torch.nn.ReplicationPad2d(1),
                torch.nn.PixelShuffle(2),
            )
            assert model(torch.zeros(2, 1, 3, 3)).shape == (2, 1, 10, 10)
