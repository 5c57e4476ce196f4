"""Samplers, DataLoader(sampler=, batch_sampler=), random_split and ConcatDataset."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    random_split,
)


def batches(loader, epochs=1):
    return [[batch.tolist() for (batch,) in loader] for _ in range(epochs)]


DATA = TensorDataset(kg.arange(10))


def test_a_random_sampler_visits_the_order_of_the_loaders_own_shuffling():
    with_sampler = DataLoader(DATA, batch_size=3, sampler=RandomSampler(DATA, seed=7))
    shuffled = DataLoader(DATA, batch_size=3, shuffle=True, seed=7)
    first = batches(with_sampler, epochs=3)
    assert first == batches(shuffled, epochs=3)
    assert first[0] != first[1]  # a new order every epoch


def test_a_resumed_loader_continues_the_samplers_order():
    loader = DataLoader(DATA, batch_size=4, sampler=RandomSampler(DATA, seed=3))
    batches(loader, epochs=2)
    state = loader.state_dict()
    third = batches(loader)
    resumed = DataLoader(DATA, batch_size=4, sampler=RandomSampler(DATA, seed=99))
    resumed.load_state_dict(state)
    assert batches(resumed) == third


def test_random_sampler_on_its_own():
    sampler = RandomSampler(range(6), seed=1)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(6)) and first != second
    sampler.set_epoch(0)
    assert list(sampler) == first
    with_replacement = RandomSampler(range(3), replacement=True, num_samples=50, seed=0)
    drawn = list(with_replacement)
    assert len(drawn) == len(with_replacement) == 50 and set(drawn) == {0, 1, 2}
    longer = list(RandomSampler(range(4), num_samples=10, seed=0))
    assert len(longer) == 10 and sorted(collections.Counter(longer).values()) == [2, 2, 3, 3]
    with pytest.raises(ValueError, match="num_samples must be a positive integer"):
        RandomSampler(range(3), num_samples=0)


def test_the_seed_comes_from_seed_generator_or_manual_seed():
    class TorchStyleGenerator:
        def initial_seed(self):
            return 11

    assert RandomSampler(range(3), generator=TorchStyleGenerator()).seed == 11
    numpy_seeded = RandomSampler(range(3), generator=np.random.default_rng(0)).seed
    assert numpy_seeded == RandomSampler(range(3), generator=np.random.default_rng(0)).seed
    kg.manual_seed(5)
    assert RandomSampler(range(3)).seed == 5 == DataLoader(DATA).seed


@pytest.mark.torch
def test_a_torch_generator_seeds_like_its_initial_seed():
    torch = pytest.importorskip("torch")
    generator = torch.Generator().manual_seed(42)
    assert RandomSampler(range(3), generator=generator).seed == 42
    first, _ = random_split(range(10), [5, 5], generator=torch.Generator().manual_seed(42))
    second, _ = random_split(range(10), [5, 5], generator=torch.Generator().manual_seed(42))
    assert first.indices.tolist() == second.indices.tolist()


def test_sequential_subset_and_weighted_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    subset = SubsetRandomSampler([10, 20, 30, 40], seed=0)
    assert sorted(subset) == [10, 20, 30, 40] and len(subset) == 4
    weighted = WeightedRandomSampler([0.0, 1.0, 3.0], num_samples=4000, seed=0)
    counts = collections.Counter(weighted)
    assert counts[0] == 0 and 2.7 < counts[2] / counts[1] < 3.3
    unique = list(WeightedRandomSampler(kg.tensor([1.0, 1.0, 0.0]), 2, replacement=False))
    assert sorted(unique) == [0, 1]
    with pytest.raises(ValueError, match="without replacement from 2 samples"):
        WeightedRandomSampler([1.0, 1.0, 0.0], 3, replacement=False)
    with pytest.raises(ValueError, match="non-negative and not all zero"):
        WeightedRandomSampler([0.0, 0.0], 3)


def test_batch_sampler_gives_the_loader_whole_batches():
    batch_sampler = BatchSampler(RandomSampler(DATA, seed=2), batch_size=4, drop_last=True)
    loader = DataLoader(DATA, batch_sampler=batch_sampler)
    shuffled = DataLoader(DATA, batch_size=4, shuffle=True, seed=2, drop_last=True)
    assert len(loader) == len(shuffled) == 2
    assert batches(loader, epochs=2) == batches(shuffled, epochs=2)
    assert list(BatchSampler(range(5), 2, drop_last=False)) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="batch_sampler gives whole batches"):
        DataLoader(DATA, batch_size=4, batch_sampler=batch_sampler)


def test_a_sampler_without_len_and_the_sampler_shuffle_conflict():
    def evens():
        yield from range(0, 10, 2)

    class Evens:
        def __iter__(self):
            return evens()

    loader = DataLoader(DATA, batch_size=2, sampler=Evens())
    assert batches(loader) == [[[0, 2], [4, 6], [8]]]
    with pytest.raises(ValueError, match="shuffle=True and a sampler exclude each other"):
        DataLoader(DATA, shuffle=True, sampler=RandomSampler(DATA))


def test_random_split_by_lengths_and_fractions():
    first, second = random_split(range(10), [7, 3], seed=0)
    assert len(first) == 7 and len(second) == 3
    assert sorted([*first.indices, *second.indices]) == list(range(10))
    again, _ = random_split(range(10), [7, 3], seed=0)
    assert again.indices.tolist() == first.indices.tolist()
    # PyTorch's rule: floor of each fraction, then the remainder one by one from the start
    assert [len(part) for part in random_split(range(11), [0.3, 0.3, 0.4], seed=0)] == [4, 3, 4]
    with pytest.raises(ValueError, match="summing to the dataset's 10 samples"):
        random_split(range(10), [5, 4])


@pytest.mark.torch
def test_random_split_fractions_give_pytorchs_sizes():
    torch = pytest.importorskip("torch")
    for count, fractions in [(11, [0.3, 0.3, 0.4]), (7, [0.5, 0.5]), (10, [0.1, 0.2, 0.7])]:
        theirs = [len(p) for p in torch.utils.data.random_split(range(count), fractions)]
        assert [len(p) for p in random_split(range(count), fractions, seed=0)] == theirs


def test_concat_dataset():
    both = ConcatDataset([TensorDataset(kg.arange(3)), TensorDataset(kg.arange(10, 12))])
    assert len(both) == 5
    assert [both[i][0].item() for i in range(-5, 5)] == [0, 1, 2, 10, 11] * 2
    with pytest.raises(IndexError, match="index 5 is out of range"):
        both[5]
    assert [b.tolist() for (b,) in DataLoader(both, batch_size=5)] == [[0, 1, 2, 10, 11]]
