"""torch.utils.data's module paths lead to kernelgrad.data's objects."""

from __future__ import annotations

import importlib

import pytest

import kernelgrad as kg


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("kernelgrad.utils.data", ["DataLoader", "Dataset", "TensorDataset", "Subset"]),
        ("kernelgrad.utils.data", ["RandomSampler", "random_split", "get_worker_info"]),
        ("kernelgrad.utils.data.dataloader", ["DataLoader", "default_collate"]),
        ("kernelgrad.utils.data.dataset", ["Dataset", "ConcatDataset", "random_split"]),
        ("kernelgrad.utils.data.sampler", ["Sampler", "SequentialSampler", "BatchSampler"]),
    ],
)
def test_pytorch_paths_hold_the_kernelgrad_data_objects(module, names):
    loaded = importlib.import_module(module)
    for name in names:
        assert getattr(loaded, name) is getattr(kg.data, name), f"{module}.{name}"
        assert name in loaded.__all__


def test_import_kernelgrad_as_torch_reaches_utils_data_by_attribute():
    import kernelgrad as torch

    assert torch.utils.data.DataLoader is kg.data.DataLoader
    assert torch.utils.data.dataloader.DataLoader is kg.data.DataLoader
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = torch.utils.nothing


def test_distributed_sampler_path():
    import kernelgrad.utils.data as package
    import kernelgrad.utils.data.distributed as module

    try:
        from kernelgrad.data.distributed import DistributedSampler
    except ImportError:
        with pytest.raises(ImportError, match=r"kernelgrad\.data\.distributed"):
            _ = module.DistributedSampler
        return
    assert package.DistributedSampler is module.DistributedSampler is DistributedSampler
