"""IterableDataset, ChainDataset, StackDataset, default_convert and ``batch_size=None``
(``kg.utils.data``): the batches and their order equal PyTorch's, with and without
workers."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg


def _stream_class(data_module):
    class Stream(data_module.IterableDataset):
        """Samples 0..n-1; each worker takes every num_workers-th (PyTorch's recipe)."""

        def __init__(self, n):
            self.n = n

        def __iter__(self):
            info = data_module.get_worker_info()
            start, step = (0, 1) if info is None else (info.id, info.num_workers)
            for i in range(start, self.n, step):
                yield np.float32(i), i * 2

        def __len__(self):
            return self.n

    return Stream


def _batches(loader):
    return [[v.tolist() if hasattr(v, "tolist") else v for v in batch] for batch in loader]


@pytest.mark.torch
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("batch_size, drop_last", [(3, False), (3, True), (None, False)])
def test_stream_batches_match_pytorch(workers, batch_size, drop_last):
    import torch

    results = []
    for lib in (torch, kg):
        data = lib.utils.data
        loader = data.DataLoader(
            _stream_class(data)(10),
            batch_size=batch_size,
            num_workers=workers,
            drop_last=drop_last,
        )
        results.append(_batches(loader))
        if workers == 0:
            results.append(len(loader))
    assert results[: len(results) // 2] == results[len(results) // 2 :]


def test_streams_refuse_orders_and_chain():
    data = kg.utils.data
    stream = _stream_class(data)(4)
    for option in ({"shuffle": True}, {"sampler": [0, 1]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError, match="IterableDataset: expected unspecified"):
            data.DataLoader(stream, **option)
    with pytest.raises(TypeError, match="iterate over it"):
        stream[0]
    chained = stream + _stream_class(data)(2)
    assert isinstance(chained, data.ChainDataset)
    assert [int(x) for x, _ in chained] == [0, 1, 2, 3, 0, 1]
    assert len(chained) == 6


def test_stack_dataset_default_convert_and_unbatched_loading():
    data = kg.utils.data
    images = data.TensorDataset(kg.arange(6.0).reshape(3, 2))
    labels = [7, 8, 9]
    stacked = data.StackDataset(image=images, label=labels)
    assert stacked[1]["label"] == 8 and stacked[1]["image"][0].tolist() == [2.0, 3.0]
    assert len(data.StackDataset(images, labels)) == 3
    with pytest.raises(ValueError, match="Size mismatch"):
        data.StackDataset(images, [1, 2])
    converted = data.default_convert({"x": np.ones(2, np.float32), "n": 3, "t": (np.int64(4),)})
    assert isinstance(converted["x"], kg.Tensor) and converted["n"] == 3
    assert isinstance(converted["t"][0], kg.Tensor)
    loader = data.DataLoader(data.TensorDataset(kg.arange(3)), batch_size=None)
    assert len(loader) == 3
    assert [sample[0].item() for sample in loader] == [0, 1, 2]
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        data.DataLoader(images, batch_size=None, drop_last=True)
