"""``F.linear`` runs its products straight to the backend for 2-D operands of one
dtype and device (``nn/functional/linear.py``): the same results, bit for bit, as the
general ``matmul`` path, and the general path for everything else."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F

linear_module = importlib.import_module("kernelgrad.nn.functional.linear")

RNG = np.random.default_rng(0)


def _tensor(shape, device, transposed=False):
    values = RNG.standard_normal(shape[::-1] if transposed else shape).astype(np.float32)
    t = kg.tensor(values, device=device)
    return (t.T if transposed else t).detach().requires_grad_()


def _general(x, w, b):
    """``linear`` written with the general ops: matmul, transpose, add."""
    out = x @ w.T
    return out + b if b is not None else out


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_transposed, w_transposed", [(False, False), (True, True)])
def test_direct_products_equal_the_general_path_bit_for_bit(
    bias, x_transposed, w_transposed, device
):
    runs = []
    for direct in (True, False):
        x = _tensor((6, 5), device, x_transposed)
        w = _tensor((4, 5), device, w_transposed)
        b = _tensor((4,), device) if bias else None
        out = F.linear(x, w, b) if direct else _general(x, w, b)
        upstream = kg.tensor(RNG.standard_normal((6, 4)).astype(np.float32), device=device)
        out.backward(upstream)
        runs.append([out, x.grad, w.grad] + ([b.grad] if bias else []))
        RNG.bit_generator.state = np.random.default_rng(0).bit_generator.state
    for got, expected in zip(*runs, strict=True):
        np.testing.assert_array_equal(got.cpu().numpy(), expected.cpu().numpy())


def test_the_direct_path_is_taken_for_plain_operands_only(device):
    x, w = _tensor((3, 2), device), _tensor((4, 2), device)
    assert linear_module._direct(x, w, _tensor((4,), device))
    assert linear_module._direct(x, w, None)
    assert not linear_module._direct(x, w, _tensor((1, 4), device))  # broadcast bias
    empty_x, empty_w = kg.ones(3, 0, device=device), kg.ones(4, 0, device=device)
    assert not linear_module._direct(empty_x, empty_w, None)


def test_an_empty_batch_gives_zero_weight_gradients(device):
    layer = kg.nn.Linear(3, 4).to(device)
    # fill the allocator's recycled memory with non-zeros first
    for _ in range(3):
        (kg.ones(4, 3, device=device) * 7.0).sum()
    out = layer(kg.ones(0, 3, device=device, requires_grad=True))
    out.sum().backward()
    assert out.shape == (0, 4)
    assert (layer.weight.grad.cpu().numpy() == 0).all()
    assert (layer.bias.grad.cpu().numpy() == 0).all()


def test_a_three_dimensional_input(device):
    """(Second derivatives, through the create_graph form: test_functional.py.)"""
    x = _tensor((2, 3, 5), device)
    w, b = _tensor((4, 5), device), _tensor((4,), device)
    out = F.linear(x, w, b)
    xs, ws, bs = (t.detach().cpu().numpy() for t in (x, w, b))
    expected = np.einsum("abi,oi->abo", xs, ws) + bs
    np.testing.assert_allclose(out.detach().cpu().numpy(), expected, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), np.broadcast_to(ws.sum(0), x.shape), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "rows, features, outputs",
    [(6, 5, 4), (64, 160, 130)],  # one gemm call; above KG_BLAS_SMALL, split in blocks
)
@pytest.mark.parametrize("bias_layout", ["contiguous", "strided", "expanded"])
def test_a_bias_added_in_the_product_has_the_bits_of_a_separate_addition(
    dtype, rows, features, outputs, bias_layout
):
    """On the CPU the bias is added by the product's blocks (``matmul_bias``): the same
    bits as the product followed by the addition, for every bias layout, eager and
    compiled."""
    rng = np.random.default_rng(rows)
    x = kg.tensor(rng.standard_normal((rows, features)).astype(dtype))
    w = kg.tensor(rng.standard_normal((outputs, features)).astype(dtype))
    values = kg.tensor(rng.standard_normal(2 * outputs).astype(dtype))
    b = {
        "contiguous": values[:outputs],
        "strided": values[::2],
        "expanded": values[:1].expand(outputs),
    }[bias_layout]
    expected = (F.linear(x, w) + b).numpy()
    np.testing.assert_array_equal(F.linear(x, w, b).numpy(), expected)
    step = kg.compile(lambda x: F.linear(x, w, b))
    for _ in range(3):  # trace, then replays
        np.testing.assert_array_equal(step(x).numpy(), expected)


def test_matmul_bias_is_one_launch_and_numpys_library_adds_the_bias_too(monkeypatch):
    """Where the backend has ``matmul_bias`` a biased product is one launch, also in a
    compiled step; with NumPy's BLAS (``KG_BLAS_OWN=0``) the bias is added after it."""
    from kernelgrad.backends.cpu import blas

    x, w, b = kg.randn(64, 160), kg.randn(130, 160), kg.randn(130)
    with kg.compile.count_launches() as counter:
        eager = F.linear(x, w, b)
    assert counter.names == ["matmul_bias"]
    step = kg.compile(lambda x: F.linear(x, w, b))
    step(x)
    with kg.compile.count_launches() as counter:
        step(x)
    assert counter.count == 1
    blas.single_thread_available()
    monkeypatch.setattr(blas._Blas, "own", False)
    for small in (1 << 30, 0):  # on one BLAS thread; prepared (split or NumPy's own)
        monkeypatch.setattr(blas._Blas, "small", small)
        np.testing.assert_allclose(F.linear(x, w, b).numpy(), eager.numpy(), rtol=1e-5, atol=1e-4)
