"""``kg.nn.utils.rnn`` (PyTorch's ``torch.nn.utils.rnn``): padding and packing sequences
of different lengths give PyTorch's values, batch sizes, permutations and gradients;
mistakes raise kernelgrad's errors, naming the problem and the fix. (The recurrent
layers on packed sequences: tests/nn/test_rnn.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import ArgumentError, ShapeError
from tests.helpers import assert_close


@pytest.mark.torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_packing_and_padding_match_pytorch(batch_first):
    torch = pytest.importorskip("torch")
    from torch.nn.utils import rnn as theirs

    from kernelgrad.nn.utils import rnn as ours

    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((n, 2)).astype(np.float32) for n in (2, 4, 1, 4)]
    seq_t = [torch.tensor(a, requires_grad=True) for a in arrays]
    seq_k = [kg.tensor(a, requires_grad=True) for a in arrays]
    for side in ("right", "left"):
        padded_t = theirs.pad_sequence(seq_t, batch_first, -1.5, side)
        padded_k = ours.pad_sequence(seq_k, batch_first, -1.5, side)
        assert_close(padded_k, padded_t.detach().numpy())
    packed_t = theirs.pack_sequence(seq_t, enforce_sorted=False)
    packed_k = ours.pack_sequence(seq_k, enforce_sorted=False)
    assert isinstance(packed_k, ours.PackedSequence)
    assert_close(packed_k.data, packed_t.data.detach().numpy())
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        assert getattr(packed_k, field).tolist() == getattr(packed_t, field).tolist(), field
    assert packed_k.batch_sizes.dtype == kg.int64
    padded_t, lengths_t = theirs.pad_packed_sequence(packed_t, batch_first, 7.0, total_length=5)
    padded_k, lengths_k = ours.pad_packed_sequence(packed_k, batch_first, 7.0, total_length=5)
    assert_close(padded_k, padded_t.detach().numpy())
    assert lengths_k.tolist() == lengths_t.tolist() == [2, 4, 1, 4]
    weight = rng.standard_normal(tuple(padded_t.shape)).astype(np.float32)
    (padded_t * torch.tensor(weight)).sum().backward()
    (padded_k * kg.tensor(weight)).sum().backward()
    for got, expected in zip(seq_k, seq_t):
        assert_close(got.grad, expected.grad.numpy())
    for got, expected in zip(ours.unpack_sequence(packed_k), arrays):
        assert_close(got, expected)
    padded = ours.pad_sequence(seq_k, batch_first)
    for got, expected in zip(ours.unpad_sequence(padded, [2, 4, 1, 4], batch_first), arrays):
        assert_close(got, expected)
    repacked = ours.pack_padded_sequence(padded_k, lengths_k, batch_first, enforce_sorted=False)
    assert_close(repacked.data, packed_t.data.detach().numpy())


def test_packing_errors_name_the_problem_and_the_fix():
    from kernelgrad.nn.utils.rnn import (
        pack_padded_sequence,
        pack_sequence,
        pad_packed_sequence,
        pad_sequence,
    )

    x = kg.randn(4, 3, 2)
    with pytest.raises(ArgumentError, match="enforce_sorted=False") as raised:
        pack_padded_sequence(x, [2, 3, 1])
    assert isinstance(raised.value, RuntimeError)  # as PyTorch raises
    with pytest.raises(ArgumentError, match="greater than 0"):
        pack_padded_sequence(x, [3, 2, 0])
    with pytest.raises(ShapeError, match="2 lengths for a batch of 3"):
        pack_padded_sequence(x, [3, 2])
    with pytest.raises(ShapeError, match="length 5 does not fit an input of 4 time steps"):
        pack_padded_sequence(x, [5, 2, 1])
    with pytest.raises(ArgumentError, match="total_length=2") as raised:
        pad_packed_sequence(pack_padded_sequence(x, [3, 2, 1]), total_length=2)
    assert isinstance(raised.value, ValueError)
    with pytest.raises(ShapeError, match="sequence 1 has shape"):
        pad_sequence([kg.ones(2, 3), kg.ones(2, 4)])
    with pytest.raises(ArgumentError, match="enforce_sorted=False"):
        pack_sequence([kg.ones(1, 2), kg.ones(2, 2)])


def test_torch_style_imports_reach_the_packing_functions():
    from kernelgrad.torch_alias import aliased

    with aliased():
        import torch.nn.utils.rnn as rnn_utils
        from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

    assert rnn_utils is kg.nn.utils.rnn
    assert pack_padded_sequence is kg.nn.utils.rnn.pack_padded_sequence
    assert PackedSequence is kg.nn.utils.rnn.PackedSequence


def test_packed_sequences_move_and_convert(device):
    from kernelgrad.nn.utils.rnn import pack_sequence

    packed = pack_sequence([kg.ones(2, 1), kg.ones(3, 1)], enforce_sorted=False)
    moved = packed.to(device)
    assert moved.sorted_indices.device == moved.unsorted_indices.device == moved.data.device
    assert str(moved.batch_sizes.device) == "cpu"  # as PyTorch keeps it
    assert moved.is_cuda == (device == "cuda")
    converted = moved.double()
    assert converted.data.dtype == kg.float64
    assert converted.sorted_indices.cpu().tolist() == [1, 0]
    assert moved.cpu().data.tolist() == packed.data.tolist()
    assert packed.to("cpu") is packed
