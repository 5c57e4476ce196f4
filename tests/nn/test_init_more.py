"""``nn.init.orthogonal_``, ``eye_``, ``dirac_``, ``sparse_`` and the deprecated names
without the underscore: the defining properties on the device (CPU and the CUDA
simulator), PyTorch's errors and warnings."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg

init = kg.nn.init


@pytest.mark.parametrize("shape", [(3, 5), (6, 2, 2)])
def test_orthogonal_(device, shape):
    w = init.orthogonal_(kg.empty(*shape, device=device), gain=2.0)
    flat = w.cpu().numpy().reshape(shape[0], -1).astype(np.float64)
    gram = flat @ flat.T if flat.shape[0] < flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(flat.shape)), atol=1e-5)
    assert w.device.type == device


def test_orthogonal_details():
    kg.manual_seed(3)
    a = init.orthogonal_(kg.empty(4, 4)).cpu().numpy()
    kg.manual_seed(3)
    b = init.orthogonal_(kg.empty(4, 4)).cpu().numpy()
    np.testing.assert_array_equal(a, b)  # seeded by kernelgrad's generator
    c = init.orthogonal_(kg.empty(4, 4)).cpu().numpy()
    assert not np.allclose(a, c)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(kg.empty(3))
    assert init.orthogonal_(kg.empty(0, 3)).shape == (0, 3)


def test_eye_and_dirac_(device):
    np.testing.assert_array_equal(
        init.eye_(kg.empty(2, 3, device=device)).cpu().numpy(), np.eye(2, 3)
    )
    w = init.dirac_(kg.empty(4, 2, 3, device=device), groups=2).cpu().numpy()
    expected = np.zeros((4, 2, 3))
    for g in range(2):
        for d in range(2):
            expected[g * 2 + d, d, 1] = 1.0
    np.testing.assert_array_equal(w, expected)


def test_dirac_is_the_identity_convolution():
    conv = kg.nn.Conv2d(3, 5, 3, padding=1, bias=False)
    init.dirac_(conv.weight)
    x = kg.randn(2, 3, 4, 4)
    y = conv(x).cpu().numpy()
    np.testing.assert_allclose(y[:, :3], x.cpu().numpy(), rtol=1e-6)
    np.testing.assert_array_equal(y[:, 3:], 0.0)
    with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
        init.dirac_(kg.empty(2, 2))
    with pytest.raises(ValueError, match="divisible by groups"):
        init.dirac_(kg.empty(3, 2, 3), groups=2)
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(kg.empty(2, 2, 2))


def test_sparse_(device):
    w = init.sparse_(kg.empty(10, 6, device=device), sparsity=0.25, std=0.5).cpu().numpy()
    zeros_per_column = (w == 0).sum(axis=0)
    np.testing.assert_array_equal(zeros_per_column, [math.ceil(0.25 * 10)] * 6)
    nonzero = w[w != 0]
    assert nonzero.size == 60 - 18 and 0.2 < nonzero.std() < 1.0
    with pytest.raises(ValueError, match="2 dimensions"):
        init.sparse_(kg.empty(3), 0.5)


def test_sparse_std_is_the_requested_one():
    w = init.sparse_(kg.empty(400, 50), sparsity=0.1, std=0.02).cpu().numpy()
    np.testing.assert_allclose(w[w != 0].std(), 0.02, rtol=0.05)
    assert ((w == 0).sum(axis=0) == 40).all()


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("uniform", ()),
        ("normal", ()),
        ("constant", (0.5,)),
        ("xavier_uniform", ()),
        ("xavier_normal", ()),
        ("kaiming_uniform", ()),
        ("kaiming_normal", ()),
        ("orthogonal", ()),
        ("eye", ()),
        ("sparse", (0.5,)),
    ],
)
def test_deprecated_names_warn_and_fill(name, args):
    w = kg.zeros(4, 4)
    message = f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`."
    with pytest.warns(FutureWarning, match=message.replace("(", r"\(").replace(".", r"\.")):
        out = getattr(init, name)(w, *args)
    assert out is w and getattr(init, name).__name__ == name
    assert (w.cpu().numpy() != 0).any()


def test_deprecated_dirac_warns():
    with pytest.warns(FutureWarning, match="nn.init.dirac_"):
        init.dirac(kg.zeros(2, 2, 3))


@pytest.mark.torch
def test_same_names_and_messages_as_pytorch():
    import torch

    for name in ("orthogonal_", "eye_", "dirac_", "sparse_", "orthogonal", "sparse", "dirac"):
        assert hasattr(torch.nn.init, name) and hasattr(init, name)
    with pytest.warns(FutureWarning) as torch_warning:
        torch.nn.init.orthogonal(torch.zeros(3, 3))
    with pytest.warns(FutureWarning) as kg_warning:
        init.orthogonal(kg.zeros(3, 3))
    assert str(kg_warning[0].message) == str(torch_warning[0].message)
