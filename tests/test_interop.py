"""DLPack and __cuda_array_interface__: zero-copy exchange with NumPy and PyTorch (the
CPU), Numba (CUDA, on a real GPU only: the simulator has no device pointers)."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg


def test_numpy_reads_and_writes_a_tensor_through_dlpack():
    t = kg.arange(6.0).reshape(2, 3)
    shared = np.from_dlpack(t.t())  # a strided view is shared too
    shared[1, 0] = -7.0
    assert t[0, 1].item() == -7.0
    assert shared.shape == (3, 2)


def test_a_numpy_array_becomes_a_tensor_through_dlpack():
    array = np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1::2]
    t = kg.from_dlpack(array)
    array[2, 1] = 99
    assert t.dtype == kg.int32 and t[2, 1].item() == 99
    t[0, 0] = -1
    assert array[0, 0] == -1


@pytest.mark.torch
def test_pytorch_round_trips_share_memory():
    import torch

    t = kg.zeros(2, 3)
    viewed = torch.from_dlpack(t)
    viewed[0, 2] = 4.0
    assert t[0, 2].item() == 4.0
    source = torch.arange(8, dtype=torch.int64).reshape(2, 4).t()
    imported = kg.from_dlpack(source)
    source[3, 1] = 100
    assert imported.dtype == kg.int64 and imported[3, 1].item() == 100
    assert kg.from_dlpack(torch.tensor([True, False])).tolist() == [True, False]


def test_tensors_that_require_grad_are_not_exported():
    with pytest.raises(NotImplementedError, match="detach"):
        np.from_dlpack(kg.ones(2, requires_grad=True))
    assert np.from_dlpack(kg.ones(2, requires_grad=True).detach()).tolist() == [1.0, 1.0]


def test_dlpack_device_and_the_cuda_interface_of_a_cpu_tensor():
    t = kg.ones(2)
    assert t.__dlpack_device__() == (1, 0)
    assert not hasattr(t, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="only on CUDA tensors"):
        t.__cuda_array_interface__  # noqa: B018


def test_cuda_tensors_report_their_dlpack_device(device):
    t = kg.ones(2, device=device)
    assert t.__dlpack_device__() == ((1, 0) if device == "cpu" else (2, 0))


@pytest.mark.gpu
def test_numba_shares_a_cuda_tensor_through_the_cuda_array_interface():
    from numba import cuda

    t = kg.arange(6.0, device="cuda").reshape(2, 3)
    interface = t.t().__cuda_array_interface__
    assert interface["shape"] == (3, 2) and interface["strides"] == (4, 12)
    view = cuda.as_cuda_array(t)
    view[0, 0] = 42.0  # a device-side write through Numba's view
    cuda.synchronize()
    assert t[0, 0].item() == 42.0
    imported = kg.from_dlpack(cuda.to_device(np.arange(4.0)))
    assert imported.device.type == "cuda" and imported.tolist() == [0.0, 1.0, 2.0, 3.0]
