"""Weight initialisation, with PyTorch's names and formulas.

Every function fills its tensor in place (without recording gradients) and returns it.

>>> import kernelgrad as kg
>>> w = kg.empty(64, 32)
>>> _ = kg.nn.init.kaiming_uniform_(w, nonlinearity="relu")
>>> bound = (6 / 32) ** 0.5
>>> bool(w.abs().max().item() <= bound)
True
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

from .. import autograd
from ..errors import ArgumentError
from ..ops.creation import normal_ as _normal
from ..ops.creation import uniform_ as _uniform
from ..tensor import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "constant_",
    "zeros_",
    "ones_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "trunc_normal_",
    "orthogonal_",
    "eye_",
    "dirac_",
    "sparse_",
    # PyTorch's deprecated names without the underscore (FutureWarning)
    "uniform",
    "normal",
    "constant",
    "eye",
    "dirac",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "sparse",
]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for an activation (``relu``: sqrt(2), ``tanh``: 5/3, ...)."""
    linear_like = (
        "linear",
        "identity",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "sigmoid",
    )
    if nonlinearity in linear_like:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1.0 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4.0
    raise ArgumentError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight: (out, in, *kernel) as for Linear and Conv."""
    if tensor.ndim < 2:
        raise ArgumentError(
            f"fan in and fan out need a tensor with at least 2 dims, got shape {tensor.shape}"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ArgumentError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with samples from U(a, b) (from ``generator``, a ``kg.Generator``, if given)."""
    with autograd.no_grad():
        if generator is None:
            return _uniform(tensor, a, b)
        from ..ops.creation import rand

        samples = rand(*tensor.shape, generator=generator, dtype=tensor.dtype, device=tensor.device)
        return tensor.copy_(samples * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with samples from N(mean, std**2) (from ``generator`` if given)."""
    with autograd.no_grad():
        if generator is None:
            return _normal(tensor, mean, std)
        return tensor.copy_(_normal_samples(tensor, tensor.shape, generator) * std + mean)


def constant_(tensor: Tensor, value: float) -> Tensor:
    with autograd.no_grad():
        return tensor.fill_(value)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def _zero_elements(tensor: Tensor) -> bool:
    """PyTorch's Kaiming initialisers do nothing (with a warning) on a tensor without
    elements, whose fan may be 0: ``Linear(0, n)`` is a valid, empty layer."""
    if 0 not in tensor.shape:
        return False
    warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
    return True


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al.); ``a`` is the leaky ReLU slope.
    A tensor without elements is left alone, with a warning (as in PyTorch)."""
    if _zero_elements(tensor):
        return tensor
    gain = calculate_gain(nonlinearity, a)
    bound = gain * math.sqrt(3.0 / _fan(tensor, mode))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """N(0, std**2) with std = gain / sqrt(fan) (He et al.). A tensor without elements
    is left alone, with a warning (as in PyTorch)."""
    if _zero_elements(tensor):
        return tensor
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(_fan(tensor, mode)), generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Any = None,
) -> Tensor:
    """N(mean, std**2) restricted to [a, b] (resampled on the host, then copied)."""
    import numpy as np

    from ..ops.creation import randint
    from ..ops.creation import tensor as make_tensor

    # Seeded from kernelgrad's generator, so kg.manual_seed makes it reproducible.
    rng = np.random.default_rng(int(randint(0, 2**31 - 1, (1,), generator=generator).item()))
    count = tensor.numel()
    values = np.empty(0)
    while values.size < count:
        draws = rng.normal(mean, std, size=2 * count + 16)
        values = np.concatenate([values, draws[(draws >= a) & (draws <= b)]])
    with autograd.no_grad():
        source = make_tensor(values[:count].reshape(tensor.shape), dtype=tensor.dtype)
        tensor.copy_(source)
    return tensor


def _normal_samples(tensor: Tensor, shape: tuple, generator: Any) -> Tensor:
    from ..ops.creation import randn

    return randn(*shape, generator=generator, dtype=tensor.dtype, device=tensor.device)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix (Saxe et al.), PyTorch's algorithm: the Q of
    the QR decomposition of a normal (rows, numel // rows) matrix (transposed when it is
    wide), its columns' signs set by R's diagonal, times ``gain``. The samples come from
    kernelgrad's generator on the tensor's device; the QR runs on the host (NumPy)."""
    import numpy as np

    from ..ops.creation import tensor as make_tensor

    if tensor.ndim < 2:
        raise ArgumentError(
            f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape "
            f"{tensor.shape}"
        )
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with autograd.no_grad():
        flat = _normal_samples(tensor, (rows, cols), generator).cpu().numpy().astype(np.float64)
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        source = make_tensor(q.reshape(tensor.shape) * gain, dtype=tensor.dtype)
        tensor.copy_(source.to(tensor.device))
    return tensor


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-d tensor with the identity matrix (ones on the diagonal of a rectangular
    one), keeping the identity of the inputs in ``Linear`` layers."""
    from ..ops.creation import eye as make_eye

    if tensor.ndim != 2:
        raise ArgumentError(
            f"eye_: only tensors with 2 dimensions are supported, got shape {tensor.shape}"
        )
    with autograd.no_grad():
        tensor.copy_(make_eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))
    return tensor


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-d convolution weight with the Dirac delta: each of the first
    min(out_channels // groups, in_channels) output channels of every group copies its
    input channel at the kernel's centre (the convolution is the identity there)."""
    import numpy as np

    from ..ops.creation import tensor as make_tensor

    if tensor.ndim not in (3, 4, 5):
        raise ArgumentError(
            f"dirac_: only tensors with 3, 4, or 5 dimensions are supported, got shape "
            f"{tensor.shape}"
        )
    if tensor.shape[0] % groups != 0:
        raise ArgumentError(
            f"dirac_: dim 0 must be divisible by groups, got {tensor.shape[0]} channels "
            f"and groups={groups}"
        )
    per_group = tensor.shape[0] // groups
    values = np.zeros(tensor.shape)
    centre = tuple(size // 2 for size in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, tensor.shape[1])):
            values[(g * per_group + d, d, *centre)] = 1.0
    with autograd.no_grad():
        tensor.copy_(make_tensor(values, dtype=tensor.dtype).to(tensor.device))
    return tensor


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """Fill a 2-d tensor with N(0, std**2) samples, then set ceil(sparsity * rows)
    randomly chosen entries of every column to zero (Martens, 2010), as PyTorch does."""
    import numpy as np

    from ..ops.composite import randperm
    from ..ops.creation import tensor as make_tensor

    if tensor.ndim != 2:
        raise ArgumentError(
            f"sparse_: only tensors with 2 dimensions are supported, got shape {tensor.shape}"
        )
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    keep = np.ones((rows, cols))
    for col in range(cols):
        zero_rows = randperm(rows, generator=generator).numpy()[:num_zeros]
        keep[zero_rows, col] = 0.0
    with autograd.no_grad():
        samples = _normal_samples(tensor, (rows, cols), generator) * std
        mask = make_tensor(keep, dtype=tensor.dtype).to(tensor.device)
        tensor.copy_(samples * mask)
    return tensor


def _deprecated(function: Callable[..., Tensor]) -> Callable[..., Tensor]:
    new_name = function.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(
            f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
            FutureWarning,
            stacklevel=2,
        )
        return function(*args, **kwargs)

    deprecated_init.__doc__ = f"Deprecated: :func:`{new_name}` (with PyTorch's FutureWarning)."
    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)


def default_linear_init_(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default for Linear and Conv: kaiming_uniform_(a=sqrt(5)) for the weight,
    i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the bias."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _fans(weight)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        uniform_(bias, -bound, bound)
