"""The CPU form of kernels without workgroups: the body inline in nested loops, bounds
guards read as loop bounds (``backends/cpu/kernel_guards.py``), and the cases that keep
a per-item function. Each kernel is checked against NumPy on every device."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends.cpu.kernel_module import kernel_source
from tests.helpers import assert_close

SIZE = 3  # a module constant in a guard


@kg.kernel
def box_blur(out, img):
    i, j = kg.index(2)
    if i == 0 or j == 0 or i >= img.shape[0] - 1 or j >= img.shape[1] - 1:
        return
    s = 0.0
    for di in range(-1, 2):
        for dj in range(-1, 2):
            s += img[i + di, j + dj]
    out[i, j] = s / 9.0


def _blur(img: np.ndarray) -> np.ndarray:
    out = np.zeros_like(img)
    rows, cols = img.shape
    for i in range(1, rows - 1):
        for j in range(1, cols - 1):
            out[i, j] = img[i - 1 : i + 2, j - 1 : j + 2].sum() / 9.0
    return out


@kg.kernel
def mark_window(out, low, high):
    # every kind of bound, comparisons both ways round, and a term the loops cannot
    # read as a bound (kept as a guard in the body)
    i, j, k = kg.index(3)
    if low > k or k > high or SIZE <= j or i == 0 or (i + j) % 2 == 1 or k * 2 == 6:  # noqa: SIM300
        return
    out[i, j, k] = 1


def _window(shape, low: int, high: int) -> np.ndarray:
    i, j, k = np.indices(shape)
    skip = (low > k) | (k > high) | (j >= SIZE) | (i == 0) | ((i + j) % 2 == 1) | (k * 2 == 6)
    return np.where(skip, 0, 1)


@kg.kernel
def head(out, x, n):
    i = kg.index()
    if i >= n or i < 2:  # a 1-D range moves its stop; the start stays a guard
        return
    out[i] = x[i] + 1.0


@kg.kernel
def positive_part(out, x, h, w):
    # the body under the opposite of a guard; `x[i, j] > 0.0` stays as written (false
    # for NaN, where its negation `<=` would be false too)
    i, j = kg.index(2)
    if i < h and j >= 1 and j < w and x[i, j] > 0.0:
        out[i, j] = x[i, j]


@kg.kernel
def rebinds_a_parameter(out, scale):
    i = kg.index()
    scale = scale * 2.0  # the item's own copy: not carried into the next item
    out[i] = scale


@kg.kernel
def returns_from_a_loop(out, x):
    i = kg.index()
    for j in range(x.shape[0]):
        if x[j] > i:
            out[i] = j
            return
    out[i] = -1


def test_a_guarded_box_blur_matches_numpy(device):
    img = np.random.default_rng(0).standard_normal((9, 13)).astype(np.float32)
    out = kg.zeros(9, 13, device=device)
    box_blur(out, kg.tensor(img, device=device), ndrange=img.shape)
    assert_close(out, _blur(img), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("low", "high"), [(1, 4), (0, 7), (5, 2), (-3, 99)])
def test_guards_read_as_loop_bounds_keep_their_meaning(device, low, high):
    shape = (3, 5, 7)
    out = kg.zeros(*shape, dtype=kg.int64, device=device)
    mark_window(out, low, high, ndrange=shape)
    np.testing.assert_array_equal(out.cpu().numpy(), _window(shape, low, high))


@pytest.mark.parametrize("n", [0, 3, 6, 50])
def test_a_one_dimensional_guard(device, n):
    x = kg.arange(6, dtype=kg.float32, device=device)
    out = kg.zeros(6, device=device)
    head(out, x, n, ndrange=6)
    expected = [v + 1.0 if 2 <= v < n else 0.0 for v in range(6)]
    assert_close(out, expected)


def test_a_body_under_the_opposite_of_a_guard(device):
    x = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    x[1, 2] = np.nan
    out = kg.zeros(5, 6, device=device)
    positive_part(out, kg.tensor(x, device=device), 4, 5, ndrange=x.shape)
    expected = np.zeros_like(x)
    expected[:4, 1:5] = np.where(x[:4, 1:5] > 0, x[:4, 1:5], 0)
    assert_close(out, expected)


def test_bodies_that_cannot_run_inline_keep_per_item_functions(device):
    out = kg.zeros(4, device=device)
    rebinds_a_parameter(out, 1.5, ndrange=4)
    assert_close(out, [3.0] * 4)
    found = kg.zeros(4, dtype=kg.int64, device=device)
    returns_from_a_loop(found, kg.tensor([0.5, 1.5, 2.5], device=device), ndrange=4)
    assert found.cpu().tolist() == [0, 1, 2, -1]


def _cpu_source(kernel, ndim: int, types: dict) -> str:
    return kernel_source(kernel.info, ndim, False, types, narrow=True)


def test_the_cpu_form_is_nested_loops_with_the_guard_as_bounds():
    """What makes the inner loop vectorise: no function call per item, no division per
    item, no guard inside the inner loop, float32 literals."""
    image = ("A", "float32", 2)
    source = _cpu_source(box_blur, 2, {"out": image, "img": image})
    kernel = source[source.index("def kernel(") : source.index("def kernel_serial(")]
    assert "_kg_item" not in source and "//" not in kernel
    assert "for _kg_row in prange(_kg_n0):" in kernel
    assert "_kg_start = max(0, 1)" in kernel
    assert "for _kg_k in range(min(_kg_n1, img.shape[1] - 1) - _kg_start):" in kernel
    inner = kernel[kernel.index("for _kg_k") :]
    assert " if " not in inner and "return" not in inner
    assert "s = np.float32(0.0)" in inner
    # the other kernels of this file: a kept guard becomes `continue`; fallbacks call
    # an item function
    window = _cpu_source(mark_window, 3, {"out": ("A", "int64", 3), "low": "i", "high": "i"})
    window = window[: window.index("def kernel_serial(")]
    row_skip = "if SIZE <= _kg_g1 or _kg_g0 == 0 or (_kg_g0 + _kg_g1) % 2 == 1:"
    assert row_skip in window
    assert "_kg_start = max(0, low)" in window and "min(_kg_n2, (high) + 1)" in window
    assert "if k * 2 == 6:" in window[window.index("for _kg_k") :]
    assert "_kg_item" not in window
    assert "_kg_item" in _cpu_source(rebinds_a_parameter, 1, {"out": image, "scale": "f32"})
    types = {"out": image, "x": image, "h": "i", "w": "i"}
    wrapped = _cpu_source(positive_part, 2, types)
    wrapped = wrapped[: wrapped.index("def kernel_serial(")]
    assert "if _kg_g0 >= h:" in wrapped
    assert "_kg_start = max(0, 1)" in wrapped and "range(min(_kg_n1, w) - _kg_start)" in wrapped
    assert "if x[i, j] > np.float32(0.0):" in wrapped
