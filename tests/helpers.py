"""Test helpers: NumPy comparisons, central-difference gradient checks, and Hypothesis
strategies that produce tensors with unusual layouts (permuted, strided, offset).

The layout idea comes from MiniTorch: build the storage for a permuted shape and
permute it back, so that most generated tensors are not contiguous.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kernelgrad as kg

LAYOUTS = ("contiguous", "permuted", "strided", "offset")
ROOT = Path(__file__).resolve().parents[1]


def cache_hits_in_two_processes(command: Sequence[str], cache_dir: Path) -> list[int]:
    """Run ``python *command`` twice, each in a fresh process on the CPU backend (no CUDA
    simulator) with ``KERNELGRAD_CACHE_DIR=cache_dir``, and return the number each run
    printed last after the word ``hits`` (its kernel disk-cache hits)."""
    env = dict(os.environ, KERNELGRAD_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    hits = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, *command],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        hits.append(int(done.stdout.split("hits")[-1].split()[0]))
    return hits


def as_numpy(t: Any) -> np.ndarray:
    if isinstance(t, kg.Tensor):
        return t.cpu().numpy()
    return np.asarray(t)


def assert_close(actual: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    got = as_numpy(actual)
    want = np.asarray(expected)
    assert got.shape == want.shape, f"shape {got.shape} != expected {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def tensor_with_layout(
    values: np.ndarray, layout: str, device: str, perm: Sequence[int] = ()
) -> kg.Tensor:
    """A tensor equal to ``values`` whose memory layout is ``layout``."""
    ndim = values.ndim
    if layout == "permuted" and ndim >= 2:
        order = list(perm) if perm else list(reversed(range(ndim)))
        inverse = np.argsort(order)
        base = kg.tensor(np.ascontiguousarray(values.transpose(order)), device=device)
        return base.permute(*inverse.tolist())
    if layout == "strided" and ndim >= 1:
        big = np.zeros(tuple(2 * s + 1 for s in values.shape), dtype=values.dtype)
        key = tuple(slice(1, 1 + 2 * s, 2) for s in values.shape)
        big[key] = values
        return kg.tensor(big, device=device)[key]
    if layout == "offset":
        flat = np.concatenate([np.zeros(3, dtype=values.dtype), values.reshape(-1)])
        return kg.tensor(flat, device=device)[3:].reshape(values.shape)
    return kg.tensor(values, device=device)


@st.composite
def layouts(draw: Any, ndim: int) -> tuple[str, list[int]]:
    layout = draw(st.sampled_from(LAYOUTS))
    perm = draw(st.permutations(list(range(ndim)))) if ndim else []
    return layout, perm


def float_arrays(shape: Any, dtype: Any = np.float32, low: float = -3.0, high: float = 3.0) -> Any:
    if dtype == np.float32:
        # Hypothesis needs bounds that float32 represents exactly: round them inwards.
        low32, high32 = np.float32(low), np.float32(high)
        if low32 < low:
            low32 = np.nextafter(low32, np.float32(np.inf))
        if high32 > high:
            high32 = np.nextafter(high32, np.float32(-np.inf))
        low, high = float(low32), float(high32)
    elements = st.floats(low, high, width=32 if dtype == np.float32 else 64, allow_nan=False)
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def tensors(
    draw: Any,
    device: str,
    shape: Any = None,
    dtype: Any = np.float32,
    low: float = -3.0,
    high: float = 3.0,
    max_dims: int = 4,
    max_side: int = 5,
) -> tuple[np.ndarray, kg.Tensor]:
    """(reference NumPy array, equal tensor with a random layout)."""
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=1, max_side=max_side))
    if np.issubdtype(dtype, np.integer):
        values = draw(hnp.arrays(dtype, shape, elements=st.integers(int(low), int(high))))
    elif dtype == np.bool_:
        values = draw(hnp.arrays(dtype, shape))
    else:
        values = draw(float_arrays(shape, dtype, low, high))
    layout, perm = draw(layouts(len(shape)))
    return values, tensor_with_layout(values, layout, device, perm)


def numerical_grad(
    fn: Callable[..., float], arrays: list[np.ndarray], eps: float = 1e-6
) -> list[np.ndarray]:
    """Central differences of a scalar function of float64 arrays."""
    grads = []
    for i, array in enumerate(arrays):
        grad = np.zeros_like(array)
        flat = array.reshape(-1)
        for j in range(flat.size):
            saved = flat[j]
            flat[j] = saved + eps
            plus = fn(*arrays)
            flat[j] = saved - eps
            minus = fn(*arrays)
            flat[j] = saved
            grad.reshape(-1)[j] = (plus - minus) / (2 * eps)
        grads.append(grad)
        del i
    return grads


def check_grad(
    fn: Callable[..., kg.Tensor],
    *arrays: np.ndarray,
    device: str = "cpu",
    rtol: float = 1e-4,
    atol: float = 1e-5,
    layout: str = "contiguous",
    seed: int = 0,
) -> None:
    """Compare autograd gradients of ``fn`` with central differences, in float64.

    The output is projected on a fixed random vector so that every output element's
    gradient is checked (not only that of its sum)."""
    inputs = [np.array(a, dtype=np.float64) for a in arrays]
    with kg.no_grad():
        out_shape = fn(*[kg.tensor(a, device=device) for a in inputs]).shape
    projection = np.random.default_rng(seed).standard_normal(out_shape)

    def loss_value(*values: np.ndarray) -> float:
        with kg.no_grad():
            out = fn(*[kg.tensor(v, device=device) for v in values])
        return float((as_numpy(out).astype(np.float64) * projection).sum())

    tensors_ = [tensor_with_layout(a, layout, device).detach().requires_grad_() for a in inputs]
    # ``tensor_with_layout`` can return views: take leaves so .grad is kept.
    leaves = []
    for t in tensors_:
        leaf = t.detach()
        leaf.requires_grad_()
        leaves.append(leaf)
    out = fn(*leaves)
    (out * kg.tensor(projection, device=device)).sum().backward()
    expected = numerical_grad(loss_value, inputs)
    for k, (leaf, want) in enumerate(zip(leaves, expected)):
        assert leaf.grad is not None, f"input {k} got no gradient"
        np.testing.assert_allclose(
            as_numpy(leaf.grad), want, rtol=rtol, atol=atol, err_msg=f"gradient of input {k}"
        )
