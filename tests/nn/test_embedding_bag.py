"""``F.embedding_bag`` / ``nn.EmbeddingBag`` and ``embedding``'s ``max_norm``,
``scale_grad_by_freq`` and ``from_pretrained``: values against NumPy loops, gradients
against central differences, and both against PyTorch where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from tests.helpers import as_numpy, assert_close, check_grad

RNG = np.random.default_rng(5)
WEIGHT = RNG.standard_normal((6, 3))
# bags [1, 2], [] (empty), [4, 5, 4, 3], [2, 0]
FLAT = np.array([1, 2, 4, 5, 4, 3, 2, 0])
OFFSETS = np.array([0, 2, 2, 6])
PSW = RNG.standard_normal(FLAT.shape)


def _reference(weight, flat, offsets, mode, psw=None, padding_idx=None):
    """The bags one by one, in NumPy."""
    ends = list(offsets[1:]) + [len(flat)]
    out = []
    for start, end in zip(offsets, ends):
        picked = [i for i in range(start, end) if flat[i] != padding_idx]
        rows = weight[flat[picked]]
        if psw is not None:
            rows = rows * psw[picked][:, None]
        if not picked:
            out.append(np.zeros(weight.shape[1]))
        elif mode == "sum":
            out.append(rows.sum(0))
        elif mode == "mean":
            out.append(rows.mean(0))
        else:
            out.append(rows.max(0))
    return np.array(out)


CASES = {
    "sum": {"mode": "sum"},
    "mean": {"mode": "mean"},
    "max": {"mode": "max"},
    "sum_weighted": {"mode": "sum", "psw": True},
    "mean_padding": {"mode": "mean", "padding_idx": 4},
    "max_padding": {"mode": "max", "padding_idx": 2},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_embedding_bag_with_offsets_matches_numpy_and_central_differences(name, device):
    case = CASES[name]
    psw = PSW if case.get("psw") else None
    mode, padding_idx = case["mode"], case.get("padding_idx")
    flat = kg.tensor(FLAT, device=device)
    offsets = kg.tensor(OFFSETS, device=device)

    def call(weight, *weights):
        return F.embedding_bag(
            flat,
            weight,
            offsets,
            mode=mode,
            per_sample_weights=weights[0] if weights else None,
            padding_idx=padding_idx,
        )

    expected = _reference(WEIGHT, FLAT, OFFSETS, mode, psw, padding_idx)
    arrays = (WEIGHT,) if psw is None else (WEIGHT, psw)
    got = call(*(kg.tensor(a, device=device) for a in arrays))
    assert got.shape == (4, 3)
    assert_close(got, expected)
    check_grad(call, *arrays, device=device)


def test_embedding_bag_of_a_2d_input_and_include_last_offset(device):
    weight = kg.tensor(WEIGHT, device=device)
    rows = np.array([[1, 2, 3], [0, 0, 5]])
    got = F.embedding_bag(kg.tensor(rows, device=device), weight, mode="sum")
    assert_close(got, WEIGHT[rows].sum(1))
    last = np.array([0, 2, 2, 6, 8])
    got = F.embedding_bag(
        kg.tensor(FLAT, device=device),
        weight,
        kg.tensor(last, device=device),
        mode="mean",
        include_last_offset=True,
    )
    assert_close(got, _reference(WEIGHT, FLAT, OFFSETS, "mean"))


def test_embedding_bag_module(device):
    kg.manual_seed(0)
    bags = kg.nn.EmbeddingBag(6, 3, mode="max").to(device)
    assert bags.weight.shape == (6, 3)
    out = bags(kg.tensor(FLAT, device=device), kg.tensor(OFFSETS, device=device))
    assert_close(out, _reference(as_numpy(bags.weight), FLAT, OFFSETS, "max"))
    out.sum().backward()
    assert bags.weight.grad.shape == (6, 3)
    frozen = kg.nn.EmbeddingBag.from_pretrained(kg.tensor(WEIGHT), mode="sum")
    assert not frozen.weight.requires_grad
    weighted = frozen(kg.tensor(FLAT), kg.tensor(OFFSETS), kg.tensor(PSW))
    assert_close(weighted, _reference(WEIGHT, FLAT, OFFSETS, "sum", PSW))


def test_embedding_bag_refuses_what_pytorch_refuses():
    weight = kg.tensor(WEIGHT)
    flat, offsets = kg.tensor(FLAT), kg.tensor(OFFSETS)
    with pytest.raises(ValueError, match="needs offsets"):
        F.embedding_bag(flat, weight)
    with pytest.raises(ValueError, match="offsets must be None for a 2-d input"):
        F.embedding_bag(flat.reshape(2, 4), weight, offsets)
    with pytest.raises(ValueError, match=r"offsets\[0\] must be 0"):
        F.embedding_bag(flat, weight, kg.tensor([1, 3]))
    with pytest.raises(ValueError, match="non-decreasing"):
        F.embedding_bag(flat, weight, kg.tensor([0, 4, 2]))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(flat, weight, offsets, mode="mean", per_sample_weights=kg.tensor(PSW))
    with pytest.raises(ValueError, match="mode must be"):
        F.embedding_bag(flat, weight, offsets, mode="median")
    with pytest.raises(IndexError, match="outside the table of 6 rows"):
        F.embedding_bag(kg.tensor([0, 6]), weight, kg.tensor([0]))
    with pytest.raises(NotImplementedError, match="sparse=True"):
        kg.nn.EmbeddingBag(6, 3, sparse=True)


def test_embedding_max_norm_renormalises_the_rows_read_in_place(device):
    table = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    weight = kg.tensor(table, device=device)
    out = F.embedding(kg.tensor([0, 1, 0], device=device), weight, max_norm=1.0)
    scaled = table[0] / (5.0 + 1e-7)
    assert_close(out, np.array([scaled, table[1], scaled]))
    assert_close(weight, np.array([scaled, table[1], table[2]]))  # row 2 not read: kept


def test_embedding_scale_grad_by_freq_divides_by_the_count(device):
    weight = kg.tensor(WEIGHT, device=device, requires_grad=True)
    index = np.array([[1, 1, 2], [1, 3, 3]])
    out = F.embedding(kg.tensor(index, device=device), weight, scale_grad_by_freq=True)
    assert_close(out, WEIGHT[index])
    out.sum().backward()
    expected = np.zeros_like(WEIGHT)
    expected[[1, 2, 3]] = 1.0  # three 1s at 1/3 each, one 2, two 3s at 1/2 each
    assert_close(weight.grad, expected)


def test_embedding_bag_scale_grad_by_freq_divides_by_the_count(device):
    """Documented semantics: each row's gradient divided by its index's count in the
    batch. (PyTorch 2.13's CPU embedding_bag gives other factors here, e.g. 0.5 to a row
    read once; its embedding gives these.)"""
    weight = kg.tensor(WEIGHT, device=device, requires_grad=True)
    out = F.embedding_bag(
        kg.tensor(FLAT, device=device),
        weight,
        kg.tensor(OFFSETS, device=device),
        mode="sum",
        scale_grad_by_freq=True,
    )
    assert_close(out, _reference(WEIGHT, FLAT, OFFSETS, "sum"))
    out.sum().backward()
    assert_close(weight.grad, np.ones_like(WEIGHT))  # each row read: count * (1 / count)


def test_embedding_from_pretrained_and_frozen_tables():
    table = kg.nn.Embedding.from_pretrained(kg.tensor(WEIGHT), padding_idx=0)
    assert not table.weight.requires_grad and table.padding_idx == 0
    assert_close(table(kg.tensor([2])), WEIGHT[[2]])
    trainable = kg.nn.Embedding.from_pretrained(kg.tensor(WEIGHT), freeze=False)
    assert trainable.weight.requires_grad
    with pytest.raises(ValueError, match="must be 2-d"):
        kg.nn.Embedding.from_pretrained(kg.tensor([1.0, 2.0]))
    with pytest.raises(NotImplementedError, match="sparse=True"):
        kg.nn.Embedding(4, 2, sparse=True)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_embedding_bag_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    case = CASES[name]
    psw = PSW if case.get("psw") else None
    kwargs = {"mode": case["mode"], "padding_idx": case.get("padding_idx")}
    ours_w, theirs_w = (
        kg.tensor(WEIGHT, requires_grad=True),
        torch.tensor(WEIGHT, requires_grad=True),
    )
    ours_p = None if psw is None else kg.tensor(psw, requires_grad=True)
    theirs_p = None if psw is None else torch.tensor(psw, requires_grad=True)
    ours = F.embedding_bag(
        kg.tensor(FLAT), ours_w, kg.tensor(OFFSETS), per_sample_weights=ours_p, **kwargs
    )
    theirs = torch.nn.functional.embedding_bag(
        torch.tensor(FLAT), theirs_w, torch.tensor(OFFSETS), per_sample_weights=theirs_p, **kwargs
    )
    np.testing.assert_allclose(as_numpy(ours), theirs.detach().numpy(), 1e-12, 1e-12)
    projection = RNG.standard_normal(theirs.shape)
    (ours * kg.tensor(projection)).sum().backward()
    (theirs * torch.tensor(projection)).sum().backward()
    np.testing.assert_allclose(as_numpy(ours_w.grad), theirs_w.grad.numpy(), 1e-12, 1e-12)
    if psw is not None:
        np.testing.assert_allclose(as_numpy(ours_p.grad), theirs_p.grad.numpy(), 1e-12, 1e-12)


@pytest.mark.torch
def test_embedding_max_norm_and_frequency_scaling_match_pytorch():
    torch = pytest.importorskip("torch")
    index = np.array([[1, 1, 2], [4, 3, 3]])
    for kwargs in ({"max_norm": 0.8}, {"max_norm": 1.5, "norm_type": 1.0}):
        ours, theirs = kg.tensor(WEIGHT), torch.tensor(WEIGHT)
        out = F.embedding(kg.tensor(index), ours, **kwargs)
        expected = torch.nn.functional.embedding(torch.tensor(index), theirs, **kwargs)
        np.testing.assert_allclose(as_numpy(out), expected.numpy(), 1e-12, 1e-12)
        np.testing.assert_allclose(as_numpy(ours), theirs.numpy(), 1e-12, 1e-12)
    ours, theirs = kg.tensor(WEIGHT, requires_grad=True), torch.tensor(WEIGHT, requires_grad=True)
    F.embedding(kg.tensor(index), ours, padding_idx=2, scale_grad_by_freq=True).sum().backward()
    torch.nn.functional.embedding(
        torch.tensor(index), theirs, padding_idx=2, scale_grad_by_freq=True
    ).sum().backward()
    np.testing.assert_allclose(as_numpy(ours.grad), theirs.grad.numpy(), 1e-12, 1e-12)
