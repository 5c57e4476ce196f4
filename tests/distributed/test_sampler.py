"""DistributedSampler and the DataLoader's ``sampler=``: disjoint, equally long shards that
together are exactly the one-process batches."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.data import DataLoader, DistributedSampler, TensorDataset


def shards(count: int, replicas: int, **options) -> list[list[int]]:
    return [
        list(DistributedSampler(range(count), num_replicas=replicas, rank=rank, **options))
        for rank in range(replicas)
    ]


@pytest.mark.parametrize("count", [1, 7, 10, 12, 13])
@pytest.mark.parametrize("replicas", [1, 2, 3, 5])
def test_shards_cover_every_sample_with_equal_lengths(count, replicas):
    parts = shards(count, replicas, seed=3)
    lengths = {len(part) for part in parts}
    assert lengths == {-(-count // replicas)}
    everything = [index for part in parts for index in part]
    assert set(everything) == set(range(count))
    # only padding repeats samples, and no more than needed
    assert len(everything) == -(-count // replicas) * replicas


@pytest.mark.parametrize("count,replicas", [(10, 3), (13, 4), (12, 2)])
def test_drop_last_gives_disjoint_shards(count, replicas):
    parts = shards(count, replicas, drop_last=True, seed=1)
    everything = [index for part in parts for index in part]
    assert len(everything) == len(set(everything)) == (count // replicas) * replicas
    assert {len(part) for part in parts} == {count // replicas}


def test_set_epoch_reshuffles_and_the_seed_decides():
    sampler = DistributedSampler(range(50), num_replicas=2, rank=0, seed=7)
    first = list(sampler)
    assert list(sampler) == first  # same epoch, same order
    sampler.set_epoch(1)
    second = list(sampler)
    assert second != first
    sampler.set_epoch(0)
    assert list(sampler) == first
    other_seed = DistributedSampler(range(50), num_replicas=2, rank=0, seed=8)
    assert list(other_seed) != first


def test_batches_of_all_ranks_are_the_one_process_batch():
    """Batch k of N ranks with batch B == batch k of one loader with batch N*B."""
    count, replicas, batch = 48, 3, 4
    features = np.arange(count, dtype=np.float32)
    dataset = TensorDataset(features)
    single = DataLoader(dataset, batch_size=replicas * batch, shuffle=True, seed=5)
    single.set_epoch(2)
    expected = [sorted(b.tolist()) for (b,) in single]
    loaders = [
        DataLoader(
            dataset,
            batch_size=batch,
            sampler=DistributedSampler(dataset, num_replicas=replicas, rank=rank, seed=5),
        )
        for rank in range(replicas)
    ]
    for loader in loaders:
        loader.set_epoch(2)
    per_rank = [[b.tolist() for (b,) in loader] for loader in loaders]
    combined = [sorted(index for part in parts for index in part) for parts in zip(*per_rank)]
    assert combined == expected


def test_loader_drives_the_sampler_epoch_and_resumes():
    dataset = TensorDataset(np.arange(20, dtype=np.float32))
    sampler = DistributedSampler(dataset, num_replicas=2, rank=1, seed=0)
    loader = DataLoader(dataset, batch_size=5, sampler=sampler)
    epochs = [[b.tolist() for (b,) in loader] for _ in range(3)]
    assert epochs[0] != epochs[1] != epochs[2]
    assert loader.epoch == 3 and sampler.epoch == 2
    # a new loader restored from the state visits epoch 3, like the uninterrupted one
    following = [b.tolist() for (b,) in loader]
    resumed_sampler = DistributedSampler(dataset, num_replicas=2, rank=1, seed=99)
    resumed = DataLoader(dataset, batch_size=5, sampler=resumed_sampler)
    resumed.load_state_dict({"seed": 0, "epoch": 3})
    assert [b.tolist() for (b,) in resumed] == following
    assert loader.state_dict() == {"seed": 0, "epoch": 4}


def test_pytorch_style_set_epoch_on_the_sampler_wins():
    dataset = TensorDataset(np.arange(20, dtype=np.float32))
    reference = DistributedSampler(dataset, num_replicas=2, rank=0, seed=0)
    reference.set_epoch(4)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=0, seed=0)
    loader = DataLoader(dataset, batch_size=10, sampler=sampler)
    sampler.set_epoch(4)
    (first_batch,) = next(iter(loader))
    assert first_batch.tolist() == list(reference)
    assert loader.epoch == 5


def test_len_and_errors():
    dataset = TensorDataset(np.arange(10, dtype=np.float32))
    sampler = DistributedSampler(dataset, num_replicas=3, rank=2)
    assert len(sampler) == 4 and len(DataLoader(dataset, batch_size=3, sampler=sampler)) == 2
    with pytest.raises(ValueError, match="exclude each other"):
        DataLoader(dataset, shuffle=True, sampler=sampler)
    with pytest.raises(ValueError, match=r"rank must be in 0 \.\. 1"):
        DistributedSampler(dataset, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="leaves no samples"):
        DistributedSampler(range(2), num_replicas=3, rank=0, drop_last=True)


def test_default_replicas_come_from_the_group():
    with pytest.raises(kg.distributed.DistributedError, match="init_process_group"):
        DistributedSampler(range(4))
