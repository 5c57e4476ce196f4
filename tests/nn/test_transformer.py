"""Attention and the Transformer layers: scaled_dot_product_attention against a NumPy
reference (masks, causal, scale) on every backend; MultiheadAttention and the
Transformer layers with PyTorch's weights against PyTorch (outputs, attention weights,
gradients)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import DTypeAssertionError, ShapeAssertionError, ShapeError
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


def _mha_numpy(query, key, value, p, heads, mask=None, padding=None, zero_attn=False):
    """NumPy multi-head attention on (L, N, E) inputs with the parameters of ``p`` (by
    PyTorch's names); boolean masks are True where attending is NOT allowed."""
    e = query.shape[-1]
    if "in_proj_weight" in p:
        wq, wk, wv = np.split(p["in_proj_weight"], 3)
    else:
        wq, wk, wv = p["q_proj_weight"], p["k_proj_weight"], p["v_proj_weight"]
    bq, bk, bv = np.split(p["in_proj_bias"], 3)
    q, k, v = query @ wq.T + bq, key @ wk.T + bk, value @ wv.T + bv
    n, s = query.shape[1], key.shape[0]
    additive = np.zeros((n, heads, query.shape[0], s))
    if mask is not None:
        blocked = np.where(mask, -np.inf, 0.0)
        additive = additive + (blocked if mask.ndim == 2 else blocked.reshape(additive.shape))
    if padding is not None:
        additive = additive + np.where(padding, -np.inf, 0.0)[:, None, None, :]
    if "bias_k" in p:
        k = np.concatenate([k, np.broadcast_to(p["bias_k"], (1, n, e))])
        v = np.concatenate([v, np.broadcast_to(p["bias_v"], (1, n, e))])
    if zero_attn:
        k = np.concatenate([k, np.zeros((1, n, e))])
        v = np.concatenate([v, np.zeros((1, n, e))])
    extra = k.shape[0] - s
    additive = np.concatenate([additive, np.zeros(additive.shape[:3] + (extra,))], -1)

    def split(x):  # (T, N, E) -> (N, heads, T, E / heads)
        return x.reshape(x.shape[0], n, heads, e // heads).transpose(1, 2, 0, 3)

    scores = split(q) @ np.swapaxes(split(k), -1, -2) / np.sqrt(e // heads) + additive
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights = weights / weights.sum(-1, keepdims=True)
    output = (weights @ split(v)).transpose(2, 0, 1, 3).reshape(query.shape[0], n, e)
    return output @ p["out_proj.weight"].T + p["out_proj.bias"], weights


def test_multihead_attention_options_match_numpy(device, simulated):
    """add_bias_kv, add_zero_attn and kdim/vdim with both masks, against NumPy."""
    kg.manual_seed(1)
    attention = kg.nn.MultiheadAttention(
        4, 2, add_bias_kv=True, add_zero_attn=True, kdim=3, vdim=5, dtype=kg.float64
    ).to(device)
    assert [name for name, _ in attention.named_parameters()] == [
        "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias", "bias_k", "bias_v",
        "out_proj.weight", "out_proj.bias",
    ]  # fmt: skip
    assert attention.in_proj_weight is None and attention.bias_k.shape == (1, 1, 4)
    with kg.no_grad():
        attention.in_proj_bias.copy_(kg.tensor(RNG.standard_normal(12), device=device))
    params = {name: p.detach().cpu().numpy() for name, p in attention.named_parameters()}
    query, key, value = (RNG.standard_normal(shape) for shape in ((2, 2, 4), (3, 2, 3), (3, 2, 5)))
    mask = np.array([[False, True, False], [False, False, True]])
    padding = np.array([[False, False, True], [False, False, False]])
    masks = {
        "attn_mask": kg.tensor(mask, device=device),
        "key_padding_mask": kg.tensor(padding, device=device),
    }
    q, v = kg.tensor(query, device=device), kg.tensor(value, device=device)
    got, weights = attention(
        q, kg.tensor(key, device=device), v, **masks, average_attn_weights=False
    )
    expected, expected_weights = _mha_numpy(query, key, value, params, 2, mask, padding, True)
    assert weights.shape == (2, 2, 2, 5)  # two appended keys: bias_k and the zero key
    assert_close(got, expected, 1e-9, 1e-9)
    assert_close(weights, expected_weights, 1e-9, 1e-9)
    if not simulated:
        check_grad(lambda k: attention(q, k, v, **masks)[0], key, device=device)
        return
    # Central differences take minutes in the simulator: compare this backend's gradients
    # with the CPU's, which the CPU pass checks against them.
    gradients = []
    for where, module in ((device, attention), ("cpu", copy.deepcopy(attention).to("cpu"))):
        k = kg.tensor(key, device=where, requires_grad=True)
        inputs = {name: mask.to(where) for name, mask in masks.items()}
        output = module(q.to(where), k, v.to(where), **inputs)[0]
        (output * output).sum().backward()
        gradients.append(
            [k.grad.cpu().numpy()] + [p.grad.cpu().numpy() for p in module.parameters()]
        )
    for got, expected in zip(*gradients):
        assert_close(got, expected, 1e-9, 1e-9)


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


MHA_CASES = [
    # (module options, unbatched, forward options; masks: "bool2", "float3", "causal", ...)
    ({"add_bias_kv": True, "add_zero_attn": True}, False, {"attn_mask": "bool2", "kpm": "bool"}),
    (
        {"kdim": 3, "vdim": 5, "batch_first": True},
        False,
        {"attn_mask": "float3", "kpm": "float", "average_attn_weights": False},
    ),
    (
        {"add_zero_attn": True, "bias": False, "kdim": 6},
        True,
        {"attn_mask": "bool3", "kpm": "bool", "need_weights": False},
    ),
    ({"add_bias_kv": True}, False, {"attn_mask": "causal", "is_causal": True}),
]


def _mha_inputs(library, options, unbatched, forward, heads=2):
    """Inputs and masks for the PyTorch comparison, drawn from one seed per case."""
    rng = np.random.default_rng(11)
    batch_first = options.get("batch_first", False)
    length, source, batch = (4, 4, 3) if forward.get("is_causal") else (4, 5, 3)
    kdim, vdim = options.get("kdim", 8), options.get("vdim", 8)
    shapes = [(length, batch, 8), (source, batch, kdim), (source, batch, vdim)]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if unbatched:
        arrays = [a[:, 0] for a in arrays]
    elif batch_first:
        arrays = [a.transpose(1, 0, 2).copy() for a in arrays]
    tensors = [library.tensor(a, requires_grad=True) for a in arrays]
    n = 1 if unbatched else batch
    kwargs = {k: v for k, v in forward.items() if k not in ("attn_mask", "kpm")}
    kind = forward.get("attn_mask")
    blocked = rng.random((n * heads, length, source)) > 0.7
    blocked[..., 0] = False
    if kind == "bool2":
        kwargs["attn_mask"] = library.tensor(blocked[0])
    elif kind == "bool3":
        kwargs["attn_mask"] = library.tensor(blocked)
    elif kind == "float3":
        kwargs["attn_mask"] = library.tensor(rng.standard_normal(blocked.shape).astype(np.float32))
    elif kind == "causal":
        kwargs["attn_mask"] = library.tensor(np.triu(np.ones((length, source), bool), 1))
    padding = np.zeros((n, source), dtype=bool)
    padding[-1, 3:] = True
    if forward.get("kpm") == "bool":
        kwargs["key_padding_mask"] = library.tensor(padding[0] if unbatched else padding)
    elif forward.get("kpm") == "float":
        kwargs["key_padding_mask"] = library.tensor(
            np.where(padding, -1.5, 0.25).astype(np.float32)
        )
    return tensors, kwargs


@pytest.mark.torch
@pytest.mark.parametrize("options, unbatched, forward", MHA_CASES)
def test_multihead_attention_options_match_pytorch(options, unbatched, forward):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, **options)
    ours = kg.nn.MultiheadAttention(8, 2, **options)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    with torch.no_grad():  # non-zero biases, so that every bias gradient is compared
        for name, parameter in theirs.named_parameters():
            if "bias" in name:
                parameter.normal_()
    _load(theirs, ours)
    results = []
    for library, module in ((torch, theirs), (kg, ours)):
        tensors, kwargs = _mha_inputs(library, options, unbatched, forward)
        output, weights = module(*tensors, **kwargs)
        (output * output).sum().backward()
        results.append(
            [output.detach().numpy()]
            + ([] if weights is None else [weights.detach().numpy()])
            + [t.grad.numpy() for t in tensors]
        )
    assert len(results[1]) == len(results[0])
    for got, expected in zip(results[1], results[0]):
        np.testing.assert_allclose(got, expected, 1e-4, 1e-5)
    _compare_gradients(ours, theirs)


@pytest.mark.torch
def test_multi_head_attention_forward_static_kv_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    arrays = {
        "query": (4, 2, 8), "key": (5, 2, 8), "value": (5, 2, 8), "in_proj_weight": (24, 8),
        "in_proj_bias": (24,), "out_proj_weight": (8, 8), "out_proj_bias": (8,),
        "static_k": (4, 6, 4), "static_v": (4, 6, 4),
    }  # fmt: skip
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in arrays.items()}
    padding = np.zeros((2, 6), dtype=bool)
    padding[0, 4:] = True
    results = []
    for library in (torch, kg):
        t = {k: library.tensor(a, requires_grad=True) for k, a in arrays.items()}
        output, weights = library.nn.functional.multi_head_attention_forward(
            t["query"], t["key"], t["value"], 8, 2, t["in_proj_weight"], t["in_proj_bias"],
            None, None, True, 0.0, t["out_proj_weight"], t["out_proj_bias"],
            key_padding_mask=library.tensor(padding), static_k=t["static_k"],
            static_v=t["static_v"],
        )  # fmt: skip
        (output * output).sum().backward()
        results.append(
            [output.detach().numpy(), weights.detach().numpy()]
            + [t[k].grad.numpy() for k in ("query", "in_proj_weight", "static_k", "static_v")]
        )
    for got, expected in zip(results[1], results[0]):
        np.testing.assert_allclose(got, expected, 1e-4, 1e-5)


def test_multihead_attention_refuses_what_pytorch_refuses():
    attention = kg.nn.MultiheadAttention(4, 2, kdim=3)
    q, k, v = kg.zeros(2, 1, 4), kg.zeros(3, 1, 3), kg.zeros(3, 1, 4)
    with pytest.raises(AssertionError, match="key has 4 features"):
        attention(q, q, q)  # the key must have kdim features
    with pytest.raises(ShapeAssertionError, match="for a 3-d query the key"):
        attention(q, k[:, 0], v)
    with pytest.raises(AssertionError, match=r"key_padding_mask must have shape \(1, 3\)"):
        attention(q, k, v, key_padding_mask=kg.zeros(1, 4, dtype=kg.bool))
    with pytest.raises(DTypeAssertionError, match="attn_mask must be boolean"):
        attention(q, k, v, attn_mask=kg.zeros(2, 3, dtype=kg.int64))
    with pytest.raises(RuntimeError, match=r"3-d attn_mask must have shape \(2, 2, 3\)"):
        attention(q, k, v, attn_mask=kg.zeros(1, 2, 3))
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        kg.nn.MultiheadAttention(5, 2)
    with pytest.raises(ValueError, match="must be positive"):
        kg.nn.MultiheadAttention(4, 0)
