"""The convolution kernels (kernelgrad/nn/_conv_kernels.py), the batch-innermost layout
that convolution, pooling and ReLU share, and the direct-convolution path of conv2d."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.nn import _conv_kernels as kernels
from kernelgrad.nn.functional import convolution
from tests.helpers import as_numpy, assert_close, check_grad
from tests.nn import reference as ref
from tests.nn.reference import compare

RNG = np.random.default_rng(77)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def reference_conv(x, weight, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """The definition of a grouped, dilated cross-correlation, in float64."""
    return ref.conv2d(x.astype(np.float64), weight, None, stride, pads, dilation, groups)


def chwn(array):
    """(N, C, H, W) values -> flat (C, H, W, N) memory."""
    return np.ascontiguousarray(array.transpose(1, 2, 3, 0)).ravel()


# --- the kernels, launched directly (on every backend; tiny shapes for the simulator) -----
# (N, C, H, W, O, kh, kw, pads, dilation, groups)
DIRECT_CASES = [
    (2, 1, 5, 6, 2, 5, 5, (2, 2, 2, 2), (1, 1), 1),  # 5-wide rows, unrolled
    (2, 2, 4, 5, 4, 3, 3, (1, 1, 1, 1), (1, 1), 2),  # 3-wide rows, unrolled; groups
    (1, 2, 6, 5, 3, 2, 4, (0, 1, 2, 0), (2, 1), 1),  # general rows; dilation in h
    (2, 1, 4, 7, 3, 3, 3, (0, 0, 0, 0), (1, 2), 1),  # 3-wide rows with dilation in w; O odd
]


@pytest.mark.parametrize("case", DIRECT_CASES)
def test_direct_kernels_match_loops(case, device):
    n, c, h, w, out_channels, kh, kw, pads, dilation, groups = case
    x = randn(n, c, h, w)
    weight = randn(out_channels, c // groups, kh, kw)
    bias = randn(out_channels)
    top, bottom, left, right = pads
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    hp, wp = xp.shape[2:]
    expected = reference_conv(x, weight, pads=pads, dilation=dilation, groups=groups)
    expected += bias[None, :, None, None]
    oh, ow = expected.shape[2:]
    geometry = (
        c // groups, out_channels // groups, kh, kw, hp, wp, dilation[0], dilation[1], oh, n,
        ow * n,
    )  # fmt: skip
    with kg.no_grad():
        # one output row per work item, and (with an even count per group) two
        for pairs in [False] + [True] * ((out_channels // groups) % 2 == 0):
            out = kg.zeros(out_channels * oh * ow * n, device=device)
            kernels.conv_forward_direct(
                out, kg.tensor(chwn(xp), device=device), kg.tensor(weight.ravel(), device=device),
                kg.tensor(bias, device=device), *geometry, pairs,
                ndrange=(out_channels // 2 if pairs else out_channels) * oh,
            )  # fmt: skip
            got = as_numpy(out).reshape(out_channels, oh, ow, n).transpose(3, 0, 1, 2)
            assert_close(got, expected, rtol=1e-4, atol=1e-4)

        grad_out = randn(n, out_channels, oh, ow)
        weight_grads = []
        for pairs in [False] + [True] * ((out_channels // groups) % 2 == 0):
            grad_weight = kg.zeros(weight.size, device=device)
            grad_bias = kg.zeros(out_channels, device=device)
            kernels.conv_weight_grad_direct(
                grad_weight, grad_bias, kg.tensor(chwn(grad_out), device=device),
                kg.tensor(chwn(xp), device=device), np.float32(0), *geometry, pairs,
                ndrange=(out_channels // 2 if pairs else out_channels) * (c // groups) * kh,
            )  # fmt: skip
            weight_grads.append((grad_weight, grad_bias))
        grad_x = kg.zeros(c * hp * wp * n, device=device)
        kernels.conv_input_grad_direct(
            grad_x, kg.tensor(chwn(grad_out), device=device),
            kg.tensor(weight.ravel(), device=device), *geometry, ndrange=c * hp,
        )  # fmt: skip
    # Gradients of sum(out * grad_out) by the definition, through the float64 reference.
    expected_bias = grad_out.sum(axis=(0, 2, 3))
    expected_weight = np.zeros(weight.shape)
    for index in np.ndindex(weight.shape):
        basis = np.zeros(weight.shape)
        basis[index] = 1.0
        conv = reference_conv(x, basis, pads=pads, dilation=dilation, groups=groups)
        expected_weight[index] = (conv * grad_out).sum()
    for grad_weight, grad_bias in weight_grads:
        got = as_numpy(grad_weight).reshape(weight.shape)
        assert_close(got, expected_weight, rtol=1e-4, atol=1e-4)
        assert_close(grad_bias, expected_bias, rtol=1e-4, atol=1e-4)
    expected_x = np.zeros(xp.shape)
    for index in np.ndindex(xp.shape):
        basis = np.zeros(xp.shape)
        basis[index] = 1.0
        conv = reference_conv(basis, weight, dilation=dilation, groups=groups)
        expected_x[index] = (conv * grad_out).sum()
    got_x = as_numpy(grad_x).reshape(c, hp, wp, n).transpose(3, 0, 1, 2)
    assert_close(got_x, expected_x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride, dilation", [((1, 1), (1, 1)), ((2, 1), (1, 2)), ((1, 3), (2, 1))])
def test_col2im_gathers_every_tap(stride, dilation, device):
    n, c, hp, wp, kh, kw = 2, 2, 7, 8, 3, 2
    oh = (hp - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wp - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    grad_cols = randn(c, kh, kw, oh, ow, n)
    expected = np.zeros((c, hp, wp, n))
    for ci, i, j, y, x in np.ndindex(c, kh, kw, oh, ow):
        expected[ci, y * stride[0] + i * dilation[0], x * stride[1] + j * dilation[1]] += grad_cols[
            ci, i, j, y, x
        ]
    grad_x = kg.zeros(expected.size, device=device)
    kernels.col2im(
        grad_x, kg.tensor(grad_cols.ravel(), device=device), kh, kw, hp, wp, *stride, *dilation,
        oh, ow, n, ndrange=c * hp,
    )  # fmt: skip
    assert_close(as_numpy(grad_x).reshape(expected.shape), expected, rtol=1e-5, atol=1e-5)


# --- conv2d's direct path ------------------------------------------------------------------
@pytest.fixture
def direct_everywhere(monkeypatch):
    """Take the direct path for every stride-1 convolution on the CPU."""
    monkeypatch.setattr(convolution, "DIRECT_MAX_TAPS", 10**9)


@pytest.mark.parametrize(
    "kernel, padding, dilation, groups",
    [(5, 2, 1, 1), (3, 1, (2, 1), 2), (3, (0, 1), (1, 2), 1), ((2, 4), 1, 1, 1)],
)
def test_direct_convolution_gradients_by_central_differences(
    kernel, padding, dilation, groups, direct_everywhere
):
    # The direct path runs on the CPU only (elsewhere conv2d uses the patch matrix).
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    check_grad(
        lambda x, w, b: F.conv2d(x, w, b, padding=padding, dilation=dilation, groups=groups),
        randn(2, 2, 6, 7, dtype=np.float64),
        randn(4, 2 // groups, kh, kw, dtype=np.float64),
        randn(4, dtype=np.float64),
    )


def test_direct_and_patch_matrix_paths_agree(monkeypatch):
    x = kg.tensor(randn(5, 3, 12, 11), requires_grad=True)
    weight = kg.tensor(randn(6, 3, 3, 3), requires_grad=True)
    bias = kg.tensor(randn(6), requires_grad=True)
    seed = None
    results = []
    for limit in (10**9, 0):  # direct, then patch matrix
        monkeypatch.setattr(convolution, "DIRECT_MAX_TAPS", limit)
        for t in (x, weight, bias):
            t.grad = None
        out = F.conv2d(x, weight, bias, padding=1)
        if seed is None:
            seed = kg.tensor(randn(*out.shape))
        (out * seed).sum().backward()
        results.append([as_numpy(t) for t in (out, x.grad, weight.grad, bias.grad)])
    for direct, patches in zip(*results, strict=True):
        assert_close(direct, patches, rtol=1e-4, atol=1e-4)


def test_convolution_output_is_stored_batch_innermost(device):
    out = F.conv2d(kg.randn(3, 2, 6, 5, device=device), kg.randn(4, 2, 3, 3, device=device))
    n, _, h, w = out.shape
    assert out._strides == (1, h * w * n, w * n, n)


def test_convolution_reads_a_batch_innermost_input_without_a_copy(direct_everywhere):
    x = kg.tensor(randn(4, 3, 7, 6)).permute(1, 2, 3, 0).contiguous().permute(3, 0, 1, 2)
    weight = kg.tensor(randn(2, 3, 3, 3), requires_grad=True)
    out = F.conv2d(x, weight)
    assert_close(out, reference_conv(as_numpy(x), as_numpy(weight)), rtol=1e-4, atol=1e-4)
    out.sum().backward()
    # the input is saved (not a copy of it): writing into it makes backward refuse
    x2 = x.detach().clone().permute(1, 2, 3, 0).contiguous().permute(3, 0, 1, 2)
    out2 = F.conv2d(x2, weight)
    with kg.no_grad():
        x2.add_(1.0)
    with pytest.raises(Exception, match=r"modified|version|in-place|in place"):
        out2.sum().backward()


# --- the layout carried through pooling and ReLU -------------------------------------------
@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("kernel, stride, padding", [(2, 2, 0), (3, 2, 1), (3, 1, 0)])
def test_pooling_a_batch_innermost_tensor_matches_references(
    pool, kernel, stride, padding, device, reference
):
    def mine(stored):
        x = stored.permute(3, 0, 1, 2)  # (N, C, H, W) with the batch innermost
        out = getattr(F, f"{pool}_pool2d")(x, kernel, stride, padding)
        assert out._strides[0] == 1  # the result keeps the batch innermost
        return out

    compare(
        reference,
        mine,
        lambda stored: getattr(ref, f"{pool}_pool2d")(
            stored.transpose(3, 0, 1, 2), kernel, stride, padding
        ),
        lambda torch, stored: getattr(torch.nn.functional, f"{pool}_pool2d")(
            stored.permute(3, 0, 1, 2), kernel, stride, padding
        ),
        [randn(4, 7, 8, 3)],  # (C, H, W, N) in memory
        device,
        rtol=1e-5,
        atol=1e-6,
    )


def test_relu_keeps_a_permuted_layout_and_its_gradients(device):
    values = randn(3, 2, 4, 5)
    stored = kg.tensor(values.transpose(1, 2, 3, 0).copy(), device=device, requires_grad=True)
    x = stored.permute(3, 0, 1, 2)
    out = F.relu(x)
    assert out._strides == x._strides
    assert_close(out, np.maximum(values, 0))
    seed = randn(*values.shape)
    out.backward(kg.tensor(seed, device=device))
    assert_close(stored.grad.permute(3, 0, 1, 2), seed * (values > 0))
    assert kg.nn.ReLU()(x)._strides == x._strides


def test_relu_of_a_permuted_layout_has_second_derivatives(device):
    values = randn(2, 3, 4)
    leaf = kg.tensor(values.transpose(2, 0, 1).copy(), device=device, requires_grad=True)
    x = leaf.permute(1, 2, 0)  # (2, 3, 4) stored as (4, 2, 3)
    (F.relu(x) ** 2).sum().backward(create_graph=True)
    first = leaf.grad
    assert_close(first.permute(1, 2, 0), 2 * np.maximum(values, 0), rtol=1e-5, atol=1e-6)
    assert first.requires_grad
    leaf.grad = None
    first.sum().backward()
    assert_close(leaf.grad.permute(1, 2, 0), 2.0 * (values > 0))
