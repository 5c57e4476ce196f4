"""Attention and the Transformer layers: scaled_dot_product_attention against a NumPy
reference (masks, causal, scale) on every backend; MultiheadAttention and the
Transformer layers with PyTorch's weights against PyTorch (outputs, attention weights,
gradients)."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ShapeError
from tests.helpers import assert_close, check_grad

RNG = np.random.default_rng(5)


def _attention(q, k, v, mask=None, scale=None):
    scores = q @ np.swapaxes(k, -1, -2) * (scale or 1 / np.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores + mask
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return (weights / weights.sum(-1, keepdims=True)) @ v


def test_scaled_dot_product_attention_matches_numpy(device):
    q, k, v = (RNG.standard_normal((1, 2, s, 4)) for s in (3, 5, 5))
    tq, tk, tv = (kg.tensor(a, dtype=kg.float32, device=device) for a in (q, k, v))
    assert_close(F.scaled_dot_product_attention(tq, tk, tv), _attention(q, k, v), 1e-5, 1e-6)
    assert_close(
        F.scaled_dot_product_attention(tq, tk, tv, scale=0.3), _attention(q, k, v, scale=0.3),
        1e-5, 1e-6,
    )  # fmt: skip
    allowed = RNG.random((3, 5)) > 0.3
    allowed[:, 0] = True
    additive = np.where(allowed, 0.0, -np.inf)
    boolean = F.scaled_dot_product_attention(tq, tk, tv, kg.tensor(allowed, device=device))
    assert_close(boolean, _attention(q, k, v, additive), 1e-5, 1e-6)
    floats = RNG.standard_normal((3, 5))
    masked = F.scaled_dot_product_attention(
        tq, tk, tv, kg.tensor(floats, dtype=kg.float32, device=device)
    )
    assert_close(masked, _attention(q, k, v, floats), 1e-5, 1e-6)
    causal = F.scaled_dot_product_attention(tq, tq, tq, is_causal=True)
    assert_close(causal, _attention(q, q, q, np.triu(np.full((3, 3), -np.inf), 1)), 1e-5, 1e-6)
    check_grad(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
        q[0, 0, :, :2], q[0, 1, :, :2], k[0, 0, :3, :2], device=device,
    )  # fmt: skip
    with pytest.raises(ShapeError, match="scaled_dot_product_attention: query and key"):
        F.scaled_dot_product_attention(tq, tk[..., :3], tv)


def test_multihead_attention_shapes_and_masks(device):
    kg.manual_seed(0)
    attention = kg.nn.MultiheadAttention(8, 2).to(device)
    names = [name for name, _ in attention.named_parameters()]
    assert names == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    x = kg.randn(4, 3, 8, device=device)
    padding = kg.tensor([[False, False, True, True]] * 3, device=device)
    output, weights = attention(x, x, x, key_padding_mask=padding)
    assert output.shape == (4, 3, 8) and weights.shape == (3, 4, 4)
    assert_close(weights[..., 2:], np.zeros((3, 4, 2)))  # padded keys get no weight
    assert_close(weights.sum(-1), np.ones((3, 4)), rtol=1e-5)
    output, per_head = attention(x[:, 0], x[:, 0], x[:, 0], average_attn_weights=False)
    assert output.shape == (4, 8) and per_head.shape == (2, 4, 4)  # unbatched
    with pytest.raises(ShapeError, match=r"attn_mask must have shape \(4, 4\)"):
        attention(x, x, x, attn_mask=kg.zeros(3, 3, device=device))


def _load(torch_module, ours):
    ours.load_state_dict(
        {k: kg.tensor(v.detach().numpy()) for k, v in torch_module.state_dict().items()}
    )


def _compare_gradients(ours, theirs):
    expected = dict(theirs.named_parameters())
    for name, parameter in ours.named_parameters():
        np.testing.assert_allclose(
            parameter.grad.numpy(), expected[name].grad.numpy(), 1e-4, 1e-5, err_msg=name
        )


@pytest.mark.torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_pytorch(batch_first):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ours = kg.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    _load(theirs, ours)
    q = RNG.standard_normal((3, 4, 8)).astype(np.float32)
    kv = RNG.standard_normal((3, 5, 8) if batch_first else (5, 3, 8)).astype(np.float32)
    q = q if batch_first else q.transpose(1, 0, 2).copy()  # (L=4, N=3) or (N=3, L=4)
    mask = RNG.random((4, 5)) > 0.7
    mask[:, 0] = False
    padding = np.zeros((3, 5), dtype=bool)
    padding[1, 3:] = True
    results = []
    for library, module in ((torch, theirs), (kg, ours)):
        query = library.tensor(q, requires_grad=True)
        source = library.tensor(kv)
        output, weights = module(
            query, source, source, attn_mask=library.tensor(mask),
            key_padding_mask=library.tensor(padding),
        )  # fmt: skip
        (output * output).sum().backward()
        results.append((output.detach().numpy(), weights.detach().numpy(), query.grad.numpy()))
    for got, expected in zip(results[1], results[0]):
        np.testing.assert_allclose(got, expected, 1e-5, 1e-6)
    _compare_gradients(ours, theirs)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("norm_first, activation", [(False, "relu"), (True, "gelu")])
def test_transformer_layers_match_pytorch(norm_first, activation):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    options = {"dim_feedforward": 16, "dropout": 0.0, "activation": activation}
    options["norm_first"] = norm_first
    theirs = torch.nn.Transformer(8, 2, 2, 1, **options)
    ours = kg.nn.Transformer(8, 2, 2, 1, **options)
    _load(theirs, ours)
    src = RNG.standard_normal((5, 2, 8)).astype(np.float32)
    tgt = RNG.standard_normal((4, 2, 8)).astype(np.float32)
    results = []
    for library, module in ((torch, theirs), (kg, ours)):
        mask = library.nn.Transformer.generate_square_subsequent_mask(4)
        output = module(library.tensor(src), library.tensor(tgt), tgt_mask=mask)
        (output * output).sum().backward()
        results.append(output.detach().numpy())
    np.testing.assert_allclose(results[1], results[0], 1e-4, 1e-5)
    _compare_gradients(ours, theirs)
