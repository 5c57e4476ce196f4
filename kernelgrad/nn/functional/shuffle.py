"""``pixel_shuffle`` and ``pixel_unshuffle``: moving values between the channel dim and
the two trailing spatial dims, by a reshape, a permutation and a reshape."""

from __future__ import annotations

from ...errors import ArgumentError, ShapeError, format_shape
from ...tensor import Tensor


def _check(input: Tensor, factor: int, op: str, name: str) -> None:
    if input.ndim < 3:
        raise ShapeError(
            f"{op}: expected an input of shape (*, C, H, W) with at least 3 dims, got "
            f"{format_shape(input.shape)}"
        )
    if not isinstance(factor, int) or factor <= 0:
        raise ArgumentError(f"{op}: {name} must be a positive int, got {factor!r}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """Rearrange (*, C * r * r, H, W) into (*, C, H * r, W * r), r = ``upscale_factor``:
    the r * r channels of each output channel become an r x r block of pixels.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.pixel_shuffle(kg.arange(4.0).reshape(1, 4, 1, 1), 2).tolist()
    [[[[0.0, 1.0], [2.0, 3.0]]]]
    """
    _check(input, upscale_factor, "pixel_shuffle", "upscale_factor")
    r = upscale_factor
    *lead, channels, height, width = input.shape
    if channels % (r * r):
        raise ShapeError(
            f"pixel_shuffle: the channel dim (size {channels}) of the input of shape "
            f"{format_shape(input.shape)} must be divisible by upscale_factor**2 = {r * r}"
        )
    n = len(lead)
    split = input.reshape(*lead, channels // (r * r), r, r, height, width)
    order = list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2]
    return split.permute(*order).reshape(*lead, channels // (r * r), height * r, width * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """The inverse of ``pixel_shuffle``: (*, C, H * r, W * r) into (*, C * r * r, H, W).

    >>> import kernelgrad as kg
    >>> x = kg.arange(4.0).reshape(1, 1, 2, 2)
    >>> kg.nn.functional.pixel_unshuffle(x, 2).reshape(-1).tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    _check(input, downscale_factor, "pixel_unshuffle", "downscale_factor")
    r = downscale_factor
    *lead, channels, height, width = input.shape
    if height % r or width % r:
        raise ShapeError(
            f"pixel_unshuffle: the spatial dims ({height}, {width}) of the input of shape "
            f"{format_shape(input.shape)} must be divisible by downscale_factor = {r}"
        )
    n = len(lead)
    split = input.reshape(*lead, channels, height // r, r, width // r, r)
    order = list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3]
    return split.permute(*order).reshape(*lead, channels * r * r, height // r, width // r)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Split the C channels of an (N, C, *) input (at least 3 dims) into ``groups``
    groups and interleave them: (N, g, C / g, *) read as (N, C / g, g, *) (ShuffleNet).

    >>> import kernelgrad as kg
    >>> x = kg.arange(6.0).reshape(1, 6, 1)
    >>> kg.nn.functional.channel_shuffle(x, 3).reshape(-1).tolist()
    [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]
    """
    op = "channel_shuffle"
    if input.ndim <= 2:
        raise ShapeError(
            f"{op}: expected an input of shape (N, C, *) with more than 2 dims, got "
            f"{format_shape(input.shape)}"
        )
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
        raise ArgumentError(f"{op}: groups must be a positive int, got {groups!r}")
    batch, channels, *rest = input.shape
    if channels % groups:
        raise ShapeError(
            f"{op}: the number of channels ({channels}) of the input of shape "
            f"{format_shape(input.shape)} must be divisible by groups = {groups}"
        )
    split = input.reshape(batch, groups, channels // groups, *rest)
    return split.transpose(1, 2).reshape(batch, channels, *rest)
