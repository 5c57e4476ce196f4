"""The rest of ``torch.nn.utils``: parameters as a vector, ``clip_grads_with_norm_``,
the deprecated ``clip_grad_norm``, ``skip_init``, Conv/Linear + BatchNorm fusion, weight
and spectral normalisation (hook API and parametrizations), ``parametrize`` and
``parametrizations.orthogonal``. Compared with PyTorch from identical weights (and, for
the spectral norm, identical initial u and v copied from PyTorch's buffers) on the CPU;
the tests taking ``device`` also run on the CUDA simulator, against NumPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ArgumentError, ShapeError
from kernelgrad.nn.utils import parametrizations as KP
from kernelgrad.nn.utils import parametrize as KPZ

RNG = np.random.default_rng(0)


def _kg(array, device="cpu"):
    return kg.tensor(np.asarray(array)).to(device)


def _copy_state(torch_module, kg_module, device="cpu"):
    kg_module.load_state_dict(
        {k: _kg(v.detach().cpu().numpy(), device) for k, v in torch_module.state_dict().items()}
    )


# --- parameters_to_vector / vector_to_parameters ---------------------------------------------
def test_parameters_to_vector_round_trip(device):
    layer = kg.nn.Linear(3, 2).to(device)
    vec = kg.nn.utils.parameters_to_vector(layer.parameters())
    expected = np.concatenate([layer.weight.cpu().numpy().ravel(), layer.bias.cpu().numpy()])
    np.testing.assert_array_equal(vec.cpu().numpy(), expected)
    # differentiable: the gradient of sum(vec * c) is c, reshaped onto each parameter
    c = np.arange(8.0, dtype="f4")
    (vec * _kg(c, device)).sum().backward()
    np.testing.assert_array_equal(layer.weight.grad.cpu().numpy(), c[:6].reshape(2, 3))
    new = _kg(np.arange(8.0, dtype="f4") + 1, device)
    weight = layer.weight
    kg.nn.utils.vector_to_parameters(new, layer.parameters())
    assert layer.weight is weight  # same parameter object, new values
    np.testing.assert_array_equal(layer.weight.cpu().numpy(), c[:6].reshape(2, 3) + 1)
    np.testing.assert_array_equal(layer.bias.cpu().numpy(), [7.0, 8.0])


@pytest.mark.torch
def test_vector_to_parameters_shares_memory_and_errors_as_pytorch():
    import torch

    for lib, tensor in ((torch, torch.tensor), (kg, kg.tensor)):
        layer = lib.nn.Linear(2, 1)
        vec = tensor([1.0, 2.0, 3.0])
        lib.nn.utils.vector_to_parameters(vec, layer.parameters())
        with lib.no_grad():
            vec.mul_(10)
        assert layer.weight.tolist() == [[10.0, 20.0]] and layer.bias.tolist() == [30.0]
        with pytest.raises(TypeError):
            lib.nn.utils.vector_to_parameters([1.0, 2.0, 3.0], layer.parameters())
    with pytest.raises(ShapeError, match="too few"):
        kg.nn.utils.vector_to_parameters(kg.zeros(2), kg.nn.Linear(2, 1).parameters())


# --- clipping ----------------------------------------------------------------------------------
@pytest.mark.torch
def test_clip_grads_with_norm_and_deprecated_clip_grad_norm_match_pytorch():
    import torch

    grads = [RNG.normal(size=(3, 2)).astype("f4"), RNG.normal(size=4).astype("f4")]
    results = {}
    for lib in (torch, kg):
        params = [lib.nn.Parameter(lib.tensor(np.zeros_like(g))) for g in grads]
        for p, g in zip(params, grads, strict=True):
            p.grad = lib.tensor(g.copy())
        total = lib.nn.utils.get_total_norm([p.grad for p in params], 3.0)
        lib.nn.utils.clip_grads_with_norm_(params, 0.5, total)
        with pytest.warns(FutureWarning, match="clip_grad_norm_"):
            again = lib.nn.utils.clip_grad_norm(params, 0.1)
        results[lib] = (float(total), float(again), [p.grad.cpu().numpy().copy() for p in params])
    t, k = results[torch], results[kg]
    np.testing.assert_allclose(k[0], t[0], rtol=1e-6)
    np.testing.assert_allclose(k[1], t[1], rtol=1e-6)
    for a, b in zip(k[2], t[2], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_clip_grad_norm_warns_on_an_empty_generator():
    with pytest.warns(UserWarning, match="empty generator"):
        total = kg.nn.utils.clip_grad_norm_((p for p in []), 1.0)
    assert float(total) == 0.0


# --- skip_init ---------------------------------------------------------------------------------
def test_skip_init():
    layer = kg.nn.utils.skip_init(kg.nn.Linear, 5, out_features=2)
    assert isinstance(layer, kg.nn.Linear) and layer.weight.shape == (2, 5)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        kg.nn.utils.skip_init(int, 3)

    class NoDevice(kg.nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="'device' arg"):
        kg.nn.utils.skip_init(NoDevice, 3)


# --- fusion ------------------------------------------------------------------------------------
def _trained_bn(bn, channels):
    with kg.no_grad():
        bn.running_mean.copy_(kg.tensor(RNG.normal(size=channels).astype("f4")))
        bn.running_var.copy_(kg.tensor(RNG.uniform(0.5, 2.0, size=channels).astype("f4")))
        bn.weight.copy_(kg.tensor(RNG.normal(size=channels).astype("f4")))
        bn.bias.copy_(kg.tensor(RNG.normal(size=channels).astype("f4")))
    return bn.eval()


@pytest.mark.parametrize(
    ("conv", "bn", "transpose", "shape"),
    [
        (
            lambda: kg.nn.Conv2d(2, 3, 3, padding=1),
            lambda: kg.nn.BatchNorm2d(3),
            False,
            (2, 2, 5, 5),
        ),
        (lambda: kg.nn.Conv1d(2, 4, 3, bias=False), lambda: kg.nn.BatchNorm1d(4), False, (2, 2, 7)),
        (lambda: kg.nn.ConvTranspose2d(2, 3, 3), lambda: kg.nn.BatchNorm2d(3), True, (1, 2, 4, 4)),
    ],
)
def test_fuse_conv_bn_eval_equals_the_unfused_pair(conv, bn, transpose, shape):
    conv = conv().eval()
    bn = _trained_bn(bn(), conv.out_channels)
    fused = kg.nn.utils.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    x = kg.tensor(RNG.normal(size=shape).astype("f4"))
    np.testing.assert_allclose(
        fused(x).cpu().numpy(), bn(conv(x)).cpu().numpy(), rtol=1e-4, atol=1e-5
    )
    assert fused is not conv and isinstance(fused.weight, kg.nn.Parameter)
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        kg.nn.utils.fuse_conv_bn_eval(conv.train(), bn)


def test_fuse_linear_bn_eval_equals_the_unfused_pair():
    linear, bn = kg.nn.Linear(4, 3).eval(), _trained_bn(kg.nn.BatchNorm1d(3), 3)
    fused = kg.nn.utils.fuse_linear_bn_eval(linear, bn)
    x = kg.tensor(RNG.normal(size=(5, 4)).astype("f4"))
    np.testing.assert_allclose(
        fused(x).cpu().numpy(), bn(linear(x)).cpu().numpy(), rtol=1e-4, atol=1e-5
    )
    with pytest.raises(AssertionError, match="num_features"):
        kg.nn.utils.fuse_linear_bn_eval(linear, kg.nn.BatchNorm1d(2).eval())


@pytest.mark.torch
def test_fuse_weights_match_pytorch():
    import torch

    w, b = RNG.normal(size=(3, 2, 3, 3)), RNG.normal(size=3)
    rm, rv = RNG.normal(size=3), RNG.uniform(0.5, 2, size=3)
    bw, bb = RNG.normal(size=3), RNG.normal(size=3)
    args = (w, b, rm, rv)
    tw, tb = torch.nn.utils.fuse_conv_bn_weights(
        *map(torch.tensor, args), 1e-3, torch.tensor(bw), torch.tensor(bb)
    )
    kw, kb = kg.nn.utils.fuse_conv_bn_weights(
        *map(kg.tensor, args), 1e-3, kg.tensor(bw), kg.tensor(bb)
    )
    np.testing.assert_allclose(kw.cpu().numpy(), tw.detach().cpu().numpy(), rtol=1e-12)
    np.testing.assert_allclose(kb.cpu().numpy(), tb.detach().cpu().numpy(), rtol=1e-12)
    lw = RNG.normal(size=(3, 5))
    tw, tb = torch.nn.utils.fuse_linear_bn_weights(
        torch.tensor(lw),
        None,
        *map(torch.tensor, (rm, rv)),
        1e-5,
        torch.tensor(bw),
        torch.tensor(bb),
    )
    kw, kb = kg.nn.utils.fuse_linear_bn_weights(
        kg.tensor(lw), None, *map(kg.tensor, (rm, rv)), 1e-5, kg.tensor(bw), kg.tensor(bb)
    )
    np.testing.assert_allclose(kw.cpu().numpy(), tw.detach().cpu().numpy(), rtol=1e-12)
    np.testing.assert_allclose(kb.cpu().numpy(), tb.detach().cpu().numpy(), rtol=1e-12)


# --- weight_norm (hook API) --------------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_hook_api_matches_pytorch(dim):
    import torch

    layers = {}
    for lib in (torch, kg):
        layer = lib.nn.Conv1d(3, 4, 2).double()
        with pytest.warns(FutureWarning, match="parametrizations.weight_norm"):
            lib.nn.utils.weight_norm(layer, dim=dim)
        layers[lib] = layer
    t, k = layers[torch], layers[kg]
    assert list(k.state_dict()) == list(t.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert k.weight_g.shape == tuple(t.weight_g.shape)
    _copy_state(t, k)
    x = RNG.normal(size=(2, 3, 5))
    yt, yk = t(torch.tensor(x)), k(kg.tensor(x))
    np.testing.assert_allclose(yk.cpu().numpy(), yt.detach().cpu().numpy(), rtol=1e-10)
    yt.square().sum().backward()
    yk.square().sum().backward()
    for name in ("weight_g", "weight_v", "bias"):
        np.testing.assert_allclose(
            getattr(k, name).grad.cpu().numpy(),
            getattr(t, name).grad.cpu().numpy(),
            rtol=1e-9,
            atol=1e-12,
        )
    with pytest.raises(RuntimeError, match="two weight_norm hooks"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kg.nn.utils.weight_norm(k, dim=dim)
    kg.nn.utils.remove_weight_norm(k)
    torch.nn.utils.remove_weight_norm(t)
    assert list(k.state_dict()) == ["bias", "weight"] and isinstance(k.weight, kg.nn.Parameter)
    np.testing.assert_allclose(k.weight.cpu().numpy(), t.weight.detach().cpu().numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="not found"):
        kg.nn.utils.remove_weight_norm(k)


# --- spectral_norm (hook API): a discriminator trained as in PyTorch ---------------------------
def _discriminator(lib):
    nn = lib.nn
    sn = nn.utils.spectral_norm
    return nn.Sequential(
        sn(nn.Conv2d(1, 4, 3, stride=2)),
        nn.LeakyReLU(0.2),
        nn.Flatten(),
        sn(nn.Linear(16, 1), n_power_iterations=2),
    ).double()


@pytest.mark.torch
def test_spectral_norm_discriminator_trains_as_in_pytorch():
    import torch

    torch.manual_seed(0)
    t, k = _discriminator(torch), _discriminator(kg)
    keys = ["0.bias", "0.weight_orig", "0.weight_u", "0.weight_v"]
    keys += ["3.bias", "3.weight_orig", "3.weight_u", "3.weight_v"]
    assert list(k.state_dict()) == list(t.state_dict()) == keys
    _copy_state(t, k)  # weights and the initial u, v
    opt_t = torch.optim.SGD(t.parameters(), lr=0.1)
    opt_k = kg.optim.SGD(k.parameters(), lr=0.1)
    for _ in range(3):
        real, fake = RNG.normal(size=(2, 1, 6, 6)), RNG.normal(size=(2, 1, 6, 6))
        # two forwards before one backward (loss = D(real) - D(fake)), as GANs do
        lt = t(torch.tensor(real)).mean() - t(torch.tensor(fake)).mean()
        lk = k(kg.tensor(real)).mean() - k(kg.tensor(fake)).mean()
        np.testing.assert_allclose(lk.item(), lt.item(), rtol=1e-9)
        opt_t.zero_grad()
        opt_k.zero_grad()
        lt.backward()
        lk.backward()
        for (name, pt), pk in zip(t.named_parameters(), k.parameters(), strict=True):
            np.testing.assert_allclose(
                pk.grad.cpu().numpy(), pt.grad.cpu().numpy(), rtol=1e-8, err_msg=name
            )
        opt_t.step()
        opt_k.step()
    for name, value in t.state_dict().items():
        np.testing.assert_allclose(
            k.state_dict()[name].cpu().numpy(), value.cpu().numpy(), rtol=1e-8
        )
    # eval mode: the stored u, v (no iteration)
    t.eval(), k.eval()
    x = RNG.normal(size=(2, 1, 6, 6))
    before = k.state_dict()["0.weight_u"].cpu().numpy().copy()
    np.testing.assert_allclose(
        k(kg.tensor(x)).cpu().numpy(), t(torch.tensor(x)).detach().cpu().numpy(), rtol=1e-9
    )
    np.testing.assert_array_equal(k.state_dict()["0.weight_u"].cpu().numpy(), before)
    # removing it leaves weight_orig / sigma as a parameter
    torch.nn.utils.remove_spectral_norm(t[0])
    kg.nn.utils.remove_spectral_norm(k[0])
    assert list(k[0].state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(
        k[0].weight.cpu().numpy(), t[0].weight.detach().cpu().numpy(), rtol=1e-9
    )
    with pytest.raises(ValueError, match="not found"):
        kg.nn.utils.remove_spectral_norm(k[0])


def test_spectral_norm_on_device_against_numpy(device):
    layer = kg.nn.utils.spectral_norm(kg.nn.Linear(3, 2).to(device))
    w = layer.weight_orig.cpu().numpy().astype(np.float64)
    u0 = layer.weight_u.cpu().numpy().astype(np.float64)
    x = RNG.normal(size=(2, 3)).astype("f4")
    y = layer(_kg(x, device))
    v = w.T @ u0
    v /= np.linalg.norm(v)
    u = w @ v
    u /= np.linalg.norm(u)
    sigma = u @ w @ v
    np.testing.assert_allclose(
        y.cpu().numpy(), x @ (w / sigma).T + layer.bias.cpu().numpy(), rtol=1e-4
    )
    np.testing.assert_allclose(layer.weight_u.cpu().numpy(), u, rtol=1e-5, atol=1e-6)
    assert not np.allclose(u, u0)


# --- parametrize -------------------------------------------------------------------------------
class Symmetric(kg.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).mT

    def right_inverse(self, a):
        return a.triu()


def test_register_and_remove_parametrization():
    layer = kg.nn.Linear(3, 3)
    bias = layer.bias
    KPZ.register_parametrization(layer, "weight", Symmetric())
    assert type(layer).__name__ == "ParametrizedLinear" and isinstance(layer, kg.nn.Linear)
    assert KPZ.is_parametrized(layer) and KPZ.is_parametrized(layer, "weight")
    assert not KPZ.is_parametrized(layer, "bias")
    assert KPZ.type_before_parametrizations(layer) is kg.nn.Linear
    assert list(layer.state_dict()) == ["bias", "parametrizations.weight.original"]
    w = layer.weight.cpu().numpy()
    np.testing.assert_array_equal(w, w.T)
    # assigning goes through right_inverse into the same original parameter
    original = layer.parametrizations.weight.original
    a = RNG.normal(size=(3, 3)).astype("f4")
    layer.weight = kg.tensor(a + a.T)
    assert layer.parametrizations.weight.original is original
    np.testing.assert_allclose(layer.weight.cpu().numpy(), a + a.T, rtol=1e-6)
    # the gradient reaches the original through the parametrization
    layer(kg.ones(1, 3)).sum().backward()
    grad = original.grad.cpu().numpy()
    np.testing.assert_allclose(np.tril(grad, -1), 0.0)
    # cached(): one computation per block
    calls = []
    layer.parametrizations.weight[0].register_forward_hook(lambda *args: calls.append(1))
    with KPZ.cached():
        assert layer.weight is layer.weight
    assert len(calls) == 1
    # removing: the current value stays in the same parameter object
    KPZ.remove_parametrizations(layer, "weight")
    assert type(layer) is kg.nn.Linear and not hasattr(layer, "parametrizations")
    assert layer.weight is original and layer.bias is bias
    np.testing.assert_allclose(layer.weight.cpu().numpy(), a + a.T, rtol=1e-6)
    with pytest.raises(ValueError, match="does not have a parametrization"):
        KPZ.remove_parametrizations(layer, "weight")


def test_parametrization_errors():
    class Shrink(kg.nn.Module):
        def forward(self, x):
            return x[:1]

    with pytest.raises(ValueError, match="may not change the shape"):
        KPZ.register_parametrization(kg.nn.Linear(2, 3), "weight", Shrink())
    with pytest.raises(ValueError, match="does not have a parameter"):
        KPZ.register_parametrization(kg.nn.Linear(2, 3), "nothing", Symmetric())
    layer = KPZ.register_parametrization(kg.nn.Linear(2, 2), "weight", Shrink(), unsafe=True)
    assert layer.weight.shape == (1, 2)
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        layer.weight = kg.zeros(1, 2)


@pytest.mark.torch
def test_parametrize_chain_and_leave_unparametrized_match_pytorch():
    import torch

    class TSymmetric(torch.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).mT

        def right_inverse(self, a):
            return a.triu()

    class Double(kg.nn.Module):
        def forward(self, x):
            return 2 * x

    class TDouble(torch.nn.Module):
        def forward(self, x):
            return 2 * x

    t, k = torch.nn.Linear(3, 3).double(), kg.nn.Linear(3, 3).double()
    _copy_state(t, k)
    torch.nn.utils.parametrize.register_parametrization(t, "weight", TSymmetric())
    torch.nn.utils.parametrize.register_parametrization(t, "weight", TDouble())
    KPZ.register_parametrization(k, "weight", Symmetric())
    KPZ.register_parametrization(k, "weight", Double())
    assert list(k.state_dict()) == list(t.state_dict())
    np.testing.assert_allclose(k.weight.cpu().numpy(), t.weight.detach().cpu().numpy(), rtol=1e-12)
    torch.nn.utils.parametrize.remove_parametrizations(t, "weight", leave_parametrized=False)
    KPZ.remove_parametrizations(k, "weight", leave_parametrized=False)
    np.testing.assert_allclose(k.weight.cpu().numpy(), t.weight.detach().cpu().numpy(), rtol=1e-12)


# --- parametrizations --------------------------------------------------------------------------
@pytest.mark.torch
def test_parametrizations_weight_norm_matches_pytorch_and_loads_old_keys():
    import torch

    t = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(3, 4).double())
    k = KP.weight_norm(kg.nn.Linear(3, 4).double())
    assert list(k.state_dict()) == list(t.state_dict())
    _copy_state(t, k)
    x = RNG.normal(size=(2, 3))
    yt, yk = t(torch.tensor(x)), k(kg.tensor(x))
    np.testing.assert_allclose(yk.cpu().numpy(), yt.detach().cpu().numpy(), rtol=1e-12)
    yt.square().sum().backward()
    yk.square().sum().backward()
    for name in ("original0", "original1"):
        np.testing.assert_allclose(
            getattr(k.parametrizations.weight, name).grad.cpu().numpy(),
            getattr(t.parametrizations.weight, name).grad.cpu().numpy(),
            rtol=1e-10,
        )
    # a state dict saved with the hook API (weight_g / weight_v) loads
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = torch.nn.utils.weight_norm(torch.nn.Linear(3, 4).double())
    _copy_state(old, k)
    np.testing.assert_allclose(
        k.weight.cpu().numpy(), old.weight.detach().cpu().numpy(), rtol=1e-12
    )


@pytest.mark.torch
def test_parametrizations_spectral_norm_trains_as_in_pytorch():
    import torch

    torch.manual_seed(1)
    t = torch.nn.utils.parametrizations.spectral_norm(torch.nn.Conv2d(2, 3, 2).double())
    k = KP.spectral_norm(kg.nn.Conv2d(2, 3, 2).double())
    keys = ["bias", "parametrizations.weight.original"]
    keys += ["parametrizations.weight.0._u", "parametrizations.weight.0._v"]
    assert list(k.state_dict()) == list(t.state_dict()) == keys
    _copy_state(t, k)
    opt_t = torch.optim.SGD(t.parameters(), lr=0.05)
    opt_k = kg.optim.SGD(k.parameters(), lr=0.05)
    for _ in range(3):
        x = RNG.normal(size=(2, 2, 3, 3))
        lt, lk = t(torch.tensor(x)).square().mean(), k(kg.tensor(x)).square().mean()
        np.testing.assert_allclose(lk.item(), lt.item(), rtol=1e-9)
        opt_t.zero_grad()
        opt_k.zero_grad()
        lt.backward()
        lk.backward()
        opt_t.step()
        opt_k.step()
    for name, value in t.state_dict().items():
        np.testing.assert_allclose(
            k.state_dict()[name].cpu().numpy(), value.cpu().numpy(), rtol=1e-8
        )


@pytest.mark.torch
@pytest.mark.parametrize(
    ("shape", "orthogonal_map", "trivialization"),
    [
        ((4, 4), None, True),
        ((4, 4), "cayley", True),
        ((5, 3), None, True),
        ((3, 5), None, False),
        ((3, 5), "matrix_exp", True),
        ((5, 3), "cayley", False),
    ],
)
def test_orthogonal_matches_pytorch(shape, orthogonal_map, trivialization):
    import torch

    torch.manual_seed(2)
    t = torch.nn.Linear(shape[1], shape[0]).double()
    k = kg.nn.Linear(shape[1], shape[0]).double()
    _copy_state(t, k)
    for lib, layer in ((torch, t), (kg, k)):
        lib.nn.utils.parametrizations.orthogonal(
            layer, orthogonal_map=orthogonal_map, use_trivialization=trivialization
        )
    assert list(k.state_dict()) == list(t.state_dict())
    # the random completion of a rectangular base comes from each library's generator
    _copy_state(t, k)
    step = RNG.normal(size=shape) * 0.3
    # householder reads the original's diagonal as signs (its .int()): leave it at -1
    np.fill_diagonal(step, 0.0)
    with torch.no_grad():
        t.parametrizations.weight.original.add_(torch.tensor(step))
    with kg.no_grad():
        k.parametrizations.weight.original.add_(kg.tensor(step))
    w = k.weight.cpu().numpy()
    small = min(shape)
    gram = w @ w.T if shape[0] < shape[1] else w.T @ w
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)
    np.testing.assert_allclose(w, t.weight.detach().cpu().numpy(), atol=1e-12)
    x = RNG.normal(size=(2, shape[1]))
    (t(torch.tensor(x)) ** 3).sum().backward()
    (k(kg.tensor(x)) ** 3).sum().backward()
    np.testing.assert_allclose(
        k.parametrizations.weight.original.grad.cpu().numpy(),
        t.parametrizations.weight.original.grad.cpu().numpy(),
        atol=1e-10,
    )


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "householder"])
def test_orthogonal_on_device(device, orthogonal_map):
    layer = KP.orthogonal(kg.nn.Linear(2, 3).to(device), orthogonal_map=orthogonal_map)
    with kg.no_grad():
        step = RNG.normal(size=(3, 2)).astype("f4") * 0.5
        np.fill_diagonal(step, 0.0)  # householder's signs
        layer.parametrizations.weight.original.add_(_kg(step, device))
    w = layer.weight.cpu().numpy()
    np.testing.assert_allclose(w.T @ w, np.eye(2), atol=1e-5)
    layer(_kg(np.ones((1, 2), "f4"), device)).sum().backward()
    assert layer.parametrizations.weight.original.grad.shape == (3, 2)


def test_orthogonal_errors():
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        KP.orthogonal(kg.nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match="matrix or batch of matrices"):
        KP.orthogonal(kg.nn.Linear(2, 2), "bias")
    layer = KP.orthogonal(kg.nn.Linear(2, 2), orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        layer.weight = kg.eye(2)
    with pytest.raises(ArgumentError, match="n_power_iterations to be positive"):
        KP.spectral_norm(kg.nn.Linear(2, 2), n_power_iterations=0)
