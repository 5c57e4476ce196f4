"""``nn.DataParallel`` and ``nn.parallel.data_parallel``: PyTorch's single-process data
parallelism, for the cases kernelgrad runs.

* **No CUDA device**: the wrapper calls the module (as PyTorch does); its state dict
  has the module's keys under ``module.``, so checkpoints load into PyTorch's wrapper.
* **One device** (``device_ids=[i]``, or the only device of the machine): the module is
  moved to ``cuda:i`` when wrapped, and each call moves its tensor arguments there
  (inside tuples, lists and dicts) before calling the module, as PyTorch's scatter does
  for one device.
* **Several devices**: not implemented. Scattering each batch over threads of one
  process would run the replicas one after another here (the backends queue all work of
  a device from the calling thread), so the constructor refuses it and names what
  kernelgrad has for it: ``kg.nn.parallel.DistributedDataParallel``, one process per
  device (``kernelgrad train`` / ``kg.distributed``).

>>> import kernelgrad as kg
>>> wrapped = kg.nn.DataParallel(kg.nn.Linear(3, 2))
>>> sorted(wrapped.state_dict())
['module.bias', 'module.weight']
>>> wrapped(kg.ones(4, 3)).shape == wrapped.module(kg.ones(4, 3)).shape
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...device import Device, as_device
from ...errors import DeviceMismatchError, UnsupportedError
from ...tensor import Tensor
from ..module import Module

__all__ = ["DataParallel", "data_parallel"]


def _cuda_device_count() -> int:
    from ... import cuda

    return cuda.device_count() if cuda.is_available() else 0


def _index(device: Any) -> int:
    if isinstance(device, int):
        return device
    parsed = as_device(device)
    if parsed.type != "cuda":
        raise UnsupportedError(
            f"DataParallel: device_ids name CUDA devices (0, 'cuda:1', ...), got {device!r}"
        )
    return parsed.index or 0


def _device_ids(device_ids: Sequence[Any] | None) -> list[int]:
    if device_ids is None:
        device_ids = list(range(_cuda_device_count()))
    ids = [_index(d) for d in device_ids]
    if len(ids) > 1:
        raise UnsupportedError(
            f"DataParallel over several devices (device_ids={ids}) is not implemented: "
            "kernelgrad runs data-parallel training as one process per device. Wrap the "
            "model in kg.nn.parallel.DistributedDataParallel and start one process per "
            "device (`kernelgrad train`, kg.distributed; docs/distributed.md), or pass "
            f"device_ids=[{ids[0]}] to run the whole batch on one device"
        )
    return ids


def _to_device(value: Any, device: Device) -> Any:
    """``value`` with every tensor inside (tuples, lists, dicts) moved to ``device``."""
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(_to_device(v, device) for v in value))
    if isinstance(value, tuple | list):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return type(value)((k, _to_device(v, device)) for k, v in value.items())
    return value


def _check_placed(module: Module, device: Device) -> None:
    for tensor in (*module.parameters(), *module.buffers()):
        if tensor.device != device:
            raise DeviceMismatchError(
                f"module must have its parameters and buffers on device {device} "
                f"(device_ids[0]) but found one of them on device: {tensor.device}; move "
                f"it with module.to({str(device)!r})"
            )


class DataParallel(Module):
    """PyTorch's ``nn.DataParallel(module, device_ids=None, output_device=None,
    dim=0)`` without CUDA or on one device (see the module docstring); ``.module`` is
    the wrapped module."""

    def __init__(
        self,
        module: Module,
        device_ids: Sequence[Any] | None = None,
        output_device: Any = None,
        dim: int = 0,
    ) -> None:
        super().__init__()
        self.module = module
        self.dim = dim
        self.device_ids = [] if _cuda_device_count() == 0 else _device_ids(device_ids)
        self.output_device = None
        if self.device_ids:
            self.output_device = (
                self.device_ids[0] if output_device is None else _index(output_device)
            )
            self.src_device_obj = Device("cuda", self.device_ids[0])
            self.module.to(self.src_device_obj)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_placed(self.module, self.src_device_obj)
        inputs = _to_device(inputs, self.src_device_obj)
        kwargs = _to_device(kwargs, self.src_device_obj)
        return self.module(*inputs, **kwargs)


def data_parallel(
    module: Module,
    inputs: Any,
    device_ids: Sequence[Any] | None = None,
    output_device: Any = None,
    dim: int = 0,
    module_kwargs: Any = None,
) -> Any:
    """PyTorch's ``nn.parallel.data_parallel``: ``module(*inputs, **module_kwargs)`` on
    ``device_ids[0]`` (the inputs moved there); without CUDA the module is called as it
    is (PyTorch raises there); several devices are refused as by :class:`DataParallel`."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    module_kwargs = module_kwargs or {}
    if _cuda_device_count() == 0:
        return module(*inputs, **module_kwargs)
    ids = _device_ids(device_ids)
    device = Device("cuda", ids[0])
    _check_placed(module, device)
    return module(*_to_device(inputs, device), **_to_device(module_kwargs, device))
