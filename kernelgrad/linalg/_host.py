"""What ``kg.linalg``'s factorizations share: the host round trip, argument checks, and
the errors PyTorch raises for singular and not positive-definite matrices.

The factorizations run on the host with NumPy's LAPACK (``np.linalg``, batched over the
leading dims), for every device: a CUDA tensor's values come to the host in one copy and
the result goes back in one (``to_host`` / ``to_device``). Their gradients are
computed with kernelgrad tensor ops on the tensor's own device.

Where a factorization fails, the failing batch element and the position LAPACK reports
(the zero pivot of an LU factorization, the order of the leading minor that is not
positive-definite) are found again by a factorization written with NumPy array
operations, one step per row or column (``lu_zero_pivots``, ``cholesky_failures``).
That runs only for the error message and the ``info`` of the ``*_ex`` functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import autograd
from ..errors import DTypeError, LinAlgError, ShapeError, format_shape
from ..tensor import Tensor


def to_host(x: Tensor) -> np.ndarray:
    """``x``'s values as a NumPy array (one copy from the device for a CUDA tensor)."""
    return x.detach().cpu().numpy()


def to_device(values: Any, like: Tensor, dtype: Any = None) -> Tensor:
    """``values`` as a new tensor on ``like``'s device (one copy to it), in ``like``'s dtype
    unless ``dtype`` is given."""
    from ..ops.creation import tensor

    values = np.asarray(values)
    if not values.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
        values = values.copy()
    return tensor(values, dtype=like.dtype if dtype is None else dtype, device=like.device)


def operand(x: Tensor) -> Tensor:
    """An input as a backward formula should read it: attached to its graph while the
    backward is being recorded (``create_graph``), detached otherwise."""
    return x if autograd.is_grad_enabled() else x.detach()


def check_float(x: Any, name: str, what: str = "input") -> None:
    if not isinstance(x, Tensor):
        raise DTypeError(f"{name}: expected a tensor as {what}, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"{name}: Expected a floating point tensor as {what}. Got {x.dtype}; convert it "
            "with .double() or .float()"
        )


def check_matrix(x: Any, name: str, square: bool = False, what: str = "A") -> None:
    check_float(x, name)
    if x.ndim < 2:
        raise ShapeError(
            f"{name}: {what} must have at least 2 dimensions (a matrix or a batch of them), "
            f"got shape {format_shape(x.shape)}"
        )
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(
            f"{name}: {what} must be batches of square matrices, but they are "
            f"{x.shape[-2]} by {x.shape[-1]} matrices"
        )


def check_same_dtype(a: Tensor, b: Tensor, name: str) -> None:
    if a.dtype is not b.dtype:
        raise DTypeError(
            f"{name}: Expected A and B to have the same dtype, but found A of type {a.dtype} "
            f"and B of type {b.dtype} instead; convert one with .to(other.dtype)"
        )


def lu_zero_pivots(a: np.ndarray) -> np.ndarray:
    """For each matrix of ``a`` (``(..., n, n)``), LAPACK getrf's ``info``: the 1-based
    index of the first exactly zero pivot of the LU factorization with partial pivoting,
    0 when there is none."""
    n = a.shape[-1]
    work = np.array(a.reshape(-1, n, n), copy=True)
    count = work.shape[0]
    info = np.zeros(count, dtype=np.int32)
    rows = np.arange(count)
    for k in range(n):
        pivot_rows = np.argmax(np.abs(work[:, k:, k]), axis=1) + k
        top = work[rows, k].copy()
        work[rows, k] = work[rows, pivot_rows]
        work[rows, pivot_rows] = top
        pivot = work[:, k, k]
        zero = pivot == 0
        info[(info == 0) & zero] = k + 1
        factors = work[:, k + 1 :, k] / np.where(zero, 1, pivot)[:, None]
        factors[zero] = 0
        work[:, k + 1 :, k:] -= factors[:, :, None] * work[:, None, k, k:]
    return info.reshape(a.shape[:-2])


def cholesky_failures(a: np.ndarray) -> np.ndarray:
    """For each symmetric matrix of ``a`` (``(..., n, n)``, lower triangle read), LAPACK
    potrf's ``info``: the order of the first leading minor that is not positive-definite,
    0 when the matrix is."""
    n = a.shape[-1]
    work = a.reshape(-1, n, n)
    count = work.shape[0]
    factor = np.zeros_like(work)
    info = np.zeros(count, dtype=np.int32)
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(n):
            d = work[:, j, j] - np.einsum("bk,bk->b", factor[:, j, :j], factor[:, j, :j])
            bad = ~(d > 0)
            info[(info == 0) & bad] = j + 1
            root = np.sqrt(np.where(bad, 1, d))
            factor[:, j, j] = root
            below = work[:, j + 1 :, j] - np.einsum(
                "bik,bk->bi", factor[:, j + 1 :, :j], factor[:, j, :j]
            )
            factor[:, j + 1 :, j] = below / root[:, None]
    return info.reshape(a.shape[:-2])


def batch_prefix(batch_shape: tuple[int, ...], flat_index: int) -> str:
    return f"(Batch element {flat_index}): " if batch_shape else ""


_SINGULAR_ADVICE = (
    " Check the matrix for linearly dependent rows or columns; linalg.pinv and linalg.lstsq "
    "accept singular matrices, and the *_ex functions return the info instead of raising."
)


def raise_singular(name: str, values: np.ndarray, inverse: bool) -> None:
    """Raise PyTorch's LinAlgError for the first singular matrix of ``values``."""
    info = lu_zero_pivots(values).reshape(-1)
    failing = np.flatnonzero(info)
    batch = values.shape[:-2]
    if failing.size == 0:  # singular for LAPACK, not for the NumPy LU that looks again
        raise LinAlgError(f"{name}: the input matrix is singular." + _SINGULAR_ADVICE)
    index = int(failing[0])
    prefix = batch_prefix(batch, index)
    if inverse:
        raise LinAlgError(
            f"{name}: {prefix}The diagonal element {info[index]} is zero, the inversion could "
            "not be completed because the input matrix is singular." + _SINGULAR_ADVICE
        )
    raise LinAlgError(
        f"{name}: {prefix}The solver failed because the input matrix is singular."
        + _SINGULAR_ADVICE
    )


def raise_not_positive_definite(name: str, values: np.ndarray) -> None:
    info = cholesky_failures(values).reshape(-1)
    failing = np.flatnonzero(info)
    index = int(failing[0]) if failing.size else 0
    order = (
        f" (the leading minor of order {info[index]} is not positive-definite)"
        if failing.size
        else ""
    )
    raise LinAlgError(
        f"{name}: {batch_prefix(values.shape[:-2], index)}The factorization could not be "
        f"completed because the input is not positive-definite{order}. A covariance-like "
        "matrix can be made positive-definite by adding a small multiple of the identity "
        "(A + eps * I); linalg.cholesky_ex returns the info instead of raising."
    )
