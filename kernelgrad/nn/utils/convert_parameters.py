"""``parameters_to_vector`` / ``vector_to_parameters`` (PyTorch's
``torch.nn.utils.convert_parameters``): a model's parameters as one flat vector and back.

>>> import kernelgrad as kg
>>> layer = kg.nn.Linear(2, 1)
>>> vec = kg.nn.utils.parameters_to_vector(layer.parameters())
>>> vec.shape
kg.Size([3])
>>> kg.nn.utils.vector_to_parameters(kg.arange(3.0), layer.parameters())
>>> layer.weight.tolist(), layer.bias.tolist()
([[0.0, 1.0]], [2.0])
"""

from __future__ import annotations

from collections.abc import Iterable

from ...device import Device
from ...errors import DTypeError, ParameterDeviceError, ShapeError
from ...ops.movement import cat
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_device(param: Tensor, first: Device | None, name: str) -> Device:
    if first is None:
        return param.device
    if param.device != first:
        raise ParameterDeviceError(
            f"{name}: found two parameters on different devices ({first} and "
            f"{param.device}), this is currently not supported; move the model to one "
            "device first (model.to(device))"
        )
    return first


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated into one 1-d tensor (differentiable: a
    gradient through it reaches the parameters). All must be on one device."""
    device = None
    pieces = []
    for param in parameters:
        device = _check_device(param, device, "parameters_to_vector")
        pieces.append(param.reshape(-1))
    return cat(pieces)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Make each parameter, in order, the next ``numel()`` elements of ``vec`` (as
    PyTorch's ``param.data = vec[i:j].view_as(param).data``: the parameters then share
    ``vec``'s memory and take its dtype; no gradient is recorded)."""
    from ..module import _swap_memory

    if not isinstance(vec, Tensor):
        raise DTypeError(
            f"vector_to_parameters: expected a kernelgrad Tensor, but got: {type(vec).__name__}"
        )
    device = None
    pointer = 0
    data = vec.detach()
    if data.ndim != 1:
        raise ShapeError(
            f"vector_to_parameters: vec must be a 1-d tensor, got shape {vec.shape}; "
            "flatten it first (vec.reshape(-1))"
        )
    for param in parameters:
        device = _check_device(param, device, "vector_to_parameters")
        count = param.numel()
        if pointer + count > data.shape[0]:
            raise ShapeError(
                f"vector_to_parameters: vec has {data.shape[0]} elements, too few for the "
                f"parameters (the one of shape {param.shape} needs elements "
                f"{pointer}..{pointer + count - 1}); pass parameters_to_vector(...) of "
                "the same parameters"
            )
        _swap_memory(param, data[pointer : pointer + count].view(param.shape))
        pointer += count
