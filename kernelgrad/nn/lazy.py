"""Lazy layers: ``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``,
``LazyBatchNorm1d/2d/3d`` and ``LazyInstanceNorm1d/2d/3d`` (``LazyLinear`` is in
``linear.py``), and the placeholders they hold until their first input,
``UninitializedParameter`` and ``UninitializedBuffer``.

A lazy layer takes its input size (``in_channels``, ``num_features``) from its first
input, then becomes the plain layer (``type(layer)`` changes, as in PyTorch), with its
parameters and buffers made on the input's device and, for floating point input, in the
input's dtype, and initialised as the plain layer initialises them. The placeholders keep
their identity when they are filled, so an optimizer may be built before the first call.
Before it, ``state_dict()`` lists the placeholders under the layer's names, as
PyTorch's does, and ``load_state_dict`` takes the sizes from the loaded tensors.
"""

from __future__ import annotations

from typing import Any

from .. import autograd
from ..errors import ArgumentError, ShapeError, format_shape
from ..ops.creation import empty
from ..tensor import Tensor
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .module import Parameter, _swap_memory
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)

__all__ = [
    "UninitializedParameter",
    "UninitializedBuffer",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (a lazy layer's, before its first
    input): an empty tensor that ``materialize(shape)`` fills in place, turning it into a
    plain ``Parameter`` (the same object). Its shape reads ``(0,)`` until then
    (PyTorch raises on it); ``state_dict`` and ``detach`` give the placeholder itself.

    >>> import kernelgrad as kg
    >>> p = kg.nn.UninitializedParameter()
    >>> p
    <UninitializedParameter>
    >>> p.materialize((2, 3))
    >>> type(p).__name__, p.shape
    ('Parameter', kg.Size([2, 3]))
    """

    __slots__ = ()
    cls_to_become: type = Parameter

    def __new__(
        cls, requires_grad: bool = True, device: Any = None, dtype: Any = None
    ) -> UninitializedParameter:
        return super().__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None) -> None:
        pass

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    def detach(self) -> UninitializedParameter:
        return self

    def __deepcopy__(self, memo: dict) -> UninitializedParameter:
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Give the placeholder ``shape`` (contents uninitialised) on ``device`` in
        ``dtype`` (its own unless given) and make it a ``Parameter``."""
        _materialize(self, shape, device, dtype)


class UninitializedBuffer(Tensor):
    """A buffer whose shape is not known yet (a lazy normalisation layer's running
    statistics before its first input); ``materialize(shape)`` turns it into a plain
    tensor in place.

    >>> import kernelgrad as kg
    >>> kg.nn.UninitializedBuffer()
    <UninitializedBuffer>
    """

    __slots__ = ()
    cls_to_become: type = Tensor

    def __new__(
        cls, requires_grad: bool = False, device: Any = None, dtype: Any = None
    ) -> UninitializedBuffer:
        data = empty(0, device=device, dtype=dtype)
        return cls._make(data._storage, data._shape, data._strides, data._offset, data.dtype)

    def __init__(self, requires_grad: bool = False, device: Any = None, dtype: Any = None) -> None:
        pass

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"

    def detach(self) -> UninitializedBuffer:
        return self

    def __deepcopy__(self, memo: dict) -> UninitializedBuffer:
        if id(self) not in memo:
            memo[id(self)] = type(self)(False, self.device, self.dtype)
        return memo[id(self)]

    def to(self, *args: Any, **kwargs: Any) -> UninitializedBuffer:
        """Still a placeholder, on the new device or in the new dtype (``Module.to``)."""
        moved = Tensor.to(self, *args, **kwargs)
        return self if moved is self else type(self)(False, moved.device, moved.dtype)

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Give the placeholder ``shape`` (contents uninitialised) and make it a tensor."""
        _materialize(self, shape, device, dtype)


def _materialize(placeholder: Any, shape: Any, device: Any, dtype: Any) -> None:
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)
    with autograd.no_grad():
        memory = empty(
            shape,
            device=placeholder.device if device is None else device,
            dtype=placeholder.dtype if dtype is None else dtype,
        )
    object.__setattr__(placeholder, "__class__", placeholder.cls_to_become)
    _swap_memory(placeholder, memory)


def _is_uninitialized(value: Any) -> bool:
    return isinstance(value, (UninitializedParameter, UninitializedBuffer))


class _LazyMixin:
    """What the lazy layers share: the first input (or a loaded state dict) gives the
    sizes; the layer then becomes ``cls_to_become`` and initialises itself."""

    cls_to_become: type

    def has_uninitialized_params(self) -> bool:
        """True until the first input (or a loaded state dict) gave the sizes."""
        return any(_is_uninitialized(p) for p in self._placeholders())

    def _placeholders(self) -> list[Any]:
        names = ("weight", "bias", "running_mean", "running_var")
        return [getattr(self, name, None) for name in names]

    def _become(self, size: int, input: Tensor | None) -> None:
        """Set the input size, fill the placeholders (on the input's device, in its
        floating point dtype) and become the plain layer, initialised."""
        device = dtype = None
        if input is not None:
            device = input.device
            if input.dtype.is_floating_point:
                dtype = input.dtype
        self._set_size(size)
        for placeholder, shape in zip(self._placeholders(), self._shapes()):
            if _is_uninitialized(placeholder):
                placeholder.materialize(shape, device, dtype)
        if device is not None:  # num_batches_tracked follows the input too
            tracked = getattr(self, "num_batches_tracked", None)
            if tracked is not None and tracked.device != device:
                object.__setattr__(self, "num_batches_tracked", tracked.to(device))
        initialise = self._initialise  # bound now: the mixin leaves the class next
        object.__setattr__(self, "__class__", self.cls_to_become)
        initialise()

    def _materialise_from_state_dict(self, state_dict: Any, prefix: str) -> None:
        """Called by ``load_state_dict``: take the size from a saved tensor."""
        if not self.has_uninitialized_params():
            return
        for name in ("weight", "running_mean"):
            saved = state_dict.get(prefix + name)
            if saved is not None and len(getattr(saved, "shape", ())) >= 1:
                self._become(self._size_from_saved(name, tuple(saved.shape)), None)
                return

    # Each family defines these.
    def _set_size(self, size: int) -> None:
        raise NotImplementedError

    def _shapes(self) -> list[tuple[int, ...]]:
        raise NotImplementedError

    def _initialise(self) -> None:
        raise NotImplementedError

    def _size_from_saved(self, name: str, shape: tuple[int, ...]) -> int:
        raise NotImplementedError


# --- convolutions ---------------------------------------------------------------------------------
class _LazyConvMixin(_LazyMixin):
    def _lazy_init(self, bias: bool, device: Any, dtype: Any) -> None:
        self.in_channels = 0
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.bias = UninitializedParameter(device=device, dtype=dtype) if bias else None

    def reset_parameters(self) -> None:
        """Nothing to initialise yet (the plain layer's runs once the sizes are known;
        skipping it here draws no random numbers, as PyTorch's lazy layers draw none)."""

    def _set_size(self, size: int) -> None:
        if size % self.groups:
            raise ArgumentError(
                f"{type(self).__name__}: the input has {size} channels, which groups="
                f"{self.groups} does not divide"
            )
        self.in_channels = size

    def _shapes(self) -> list[tuple[int, ...]]:
        if self._transposed:
            weight = (self.in_channels, self.out_channels // self.groups)
        else:
            weight = (self.out_channels, self.in_channels // self.groups)
        return [weight + self.kernel_size, (self.out_channels,)]

    def _initialise(self) -> None:
        self.reset_parameters()

    def _size_from_saved(self, name: str, shape: tuple[int, ...]) -> int:
        return shape[0] if self._transposed else shape[1] * self.groups

    def forward(self, input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        dims = self._dims
        if input.ndim not in (dims + 1, dims + 2):
            raise ShapeError(
                f"{type(self).__name__}: expected a {dims + 2}-d (batched) or {dims + 1}-d "
                f"input, got shape {format_shape(input.shape)}"
            )
        self._become(input.shape[input.ndim - dims - 1], input)
        return self.forward(input, *args, **kwargs)


def _lazy_conv(plain: type, transposed: bool) -> type:
    def __init__(  # noqa: N807
        self: Any,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        *args: Any,
        device: Any = None,
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        if transposed:  # (output_padding, groups, bias, dilation, padding_mode)
            names = ("output_padding", "groups", "bias", "dilation", "padding_mode")
        else:  # (dilation, groups, bias, padding_mode)
            names = ("dilation", "groups", "bias", "padding_mode")
        options = dict(zip(names, args))
        options.update(kwargs)
        groups = options.get("groups", 1)
        # in_channels=groups passes the plain layer's checks; it is 0 until the first input
        plain.__init__(
            self, groups, out_channels, kernel_size, stride, padding, device=device,
            dtype=dtype, **options,
        )  # fmt: skip
        self._lazy_init(options.get("bias", True), device, dtype)

    name = "Lazy" + plain.__name__
    doc = (
        f"A ``{plain.__name__}`` whose ``in_channels`` is the channel count of its first "
        f"input (the arguments are ``{plain.__name__}``'s without ``in_channels``); it then "
        f"becomes a ``{plain.__name__}``, initialised as PyTorch initialises one."
    )
    return type(
        name,
        (_LazyConvMixin, plain),
        {"__init__": __init__, "__doc__": doc, "cls_to_become": plain, "__module__": __name__},
    )


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


# --- normalisation --------------------------------------------------------------------------------
class _LazyNormMixin(_LazyMixin):
    _instance = False

    def _lazy_init(self, device: Any, dtype: Any) -> None:
        self.num_features = 0
        if self.affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if self.bias is not None:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if self.track_running_stats:
            self.register_buffer("running_mean", UninitializedBuffer(device=device, dtype=dtype))
            self.register_buffer("running_var", UninitializedBuffer(device=device, dtype=dtype))

    def _set_size(self, size: int) -> None:
        self.num_features = size

    def _shapes(self) -> list[tuple[int, ...]]:
        return [(self.num_features,)] * 4

    def _initialise(self) -> None:
        with autograd.no_grad():
            if self.weight is not None:
                self.weight.fill_(1.0)
            if self.bias is not None:
                self.bias.zero_()
        self.reset_running_stats()

    def _size_from_saved(self, name: str, shape: tuple[int, ...]) -> int:
        return shape[0]

    def forward(self, input: Tensor) -> Tensor:
        if self._instance:
            unbatched = self._spatial_dims + 1
            if input.ndim not in (unbatched, unbatched + 1):
                raise ShapeError(
                    f"{type(self).__name__}: expected a {unbatched + 1}-d (batched) or "
                    f"{unbatched}-d input, got shape {format_shape(input.shape)}"
                )
            size = input.shape[input.ndim - unbatched]
        else:
            if input.ndim not in self._input_dims:
                raise ShapeError(
                    f"{type(self).__name__} expects a "
                    f"{' or '.join(map(str, self._input_dims))}-d input, got shape "
                    f"{format_shape(input.shape)}"
                )
            size = input.shape[1]
        self._become(size, input)
        return self.forward(input)


def _lazy_norm(plain: type, instance: bool) -> type:
    def __init__(  # noqa: N807
        self: Any,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        bias: bool = True,
    ) -> None:
        plain.__init__(
            self, 0, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )
        self._lazy_init(device, dtype)

    name = "Lazy" + plain.__name__
    doc = (
        f"A ``{plain.__name__}`` whose ``num_features`` is the channel count of its first "
        f"input (the arguments are ``{plain.__name__}``'s without ``num_features``; as in "
        "PyTorch, ``affine`` and ``track_running_stats`` default to True); it then becomes a "
        f"``{plain.__name__}``."
    )
    return type(
        name,
        (_LazyNormMixin, plain),
        {
            "__init__": __init__,
            "__doc__": doc,
            "cls_to_become": plain,
            "_instance": instance,
            "__module__": __name__,
        },
    )


LazyBatchNorm1d = _lazy_norm(BatchNorm1d, False)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d, False)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d, False)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d, True)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d, True)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d, True)
