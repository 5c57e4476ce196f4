"""``@kg.kernel(static=...)``: a form of the kernel per combination of static values,
with branches on them decided (``kernel/specialize.py``). Run on every device."""

from __future__ import annotations

import ast

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import KernelError
from tests.helpers import assert_close


def _taps(out, x, width, wide, scale):
    i = kg.index()
    s = 0.0
    if width == 3 and wide:
        s = x[i] + x[i + 1] + x[i + 2]
    elif width == 2:
        s = x[i] + x[i + 1]
    else:
        for j in range(width):
            s += x[i + j]
    out[i] = s * (2.0 if not wide else 1.0) * scale


static_taps = kg.kernel(static=("width", "wide"))(_taps)
plain_taps = kg.kernel(_taps)


def _expected(x: np.ndarray, width: int, wide: bool, scale: float) -> np.ndarray:
    n = len(x) - width + 1
    sums = np.array([x[i : i + width].sum() for i in range(n)], dtype=np.float32)
    return sums * (1.0 if wide else 2.0) * scale


@pytest.mark.parametrize("width, wide", [(3, True), (3, False), (2, True), (4, False)])
def test_static_forms_compute_what_the_plain_kernel_computes(device, width, wide):
    x_np = np.arange(12, dtype=np.float32)
    n = len(x_np) - width + 1
    x = kg.tensor(x_np, device=device)
    for kernel in (static_taps, plain_taps):
        out = kg.zeros(n, device=device)
        kernel(out, x, width, wide, 0.5, ndrange=n)
        assert_close(out, _expected(x_np, width, wide, 0.5))


def test_each_combination_compiles_only_the_branch_it_takes():
    taps = kg.kernel(static=("width", "wide"))(_taps)
    out, x = kg.zeros(4), kg.ones(6)
    taps(out, x, 3, True, 1.0, ndrange=4)
    taps(out, x, 2, np.bool_(False), 1.0, ndrange=4)
    taps(out, x, np.int64(3), True, 1.0, ndrange=4)  # the first form again
    forms = {tuple(value for _, value in key): form for key, form in taps._forms.items()}
    assert set(forms) == {(3, True), (2, False)}
    first = ast.unparse(ast.Module(body=forms[3, True].info.body, type_ignores=[]))
    assert "x[i + 2]" in first and "range" not in first and "2.0" not in first
    second = ast.unparse(ast.Module(body=forms[2, False].info.body, type_ignores=[]))
    assert "x[i + 1]" in second and "x[i + 2]" not in second and "range" not in second
    assert "2.0" in second  # `2.0 if not wide else 1.0` decided
    assert "width" not in first + second and "wide" not in first + second


def test_true_and_one_are_different_forms():
    out, x = kg.zeros(4), kg.ones(6)
    static_taps(out, x, 2, True, 1.0, ndrange=4)
    static_taps(out, x, 2, 1, 1.0, ndrange=4)
    keys = {key for key in static_taps._forms if key[0] == (int, 2)}
    assert ((int, 2), (bool, True)) in keys and ((int, 2), (int, 1)) in keys


def test_a_static_argument_must_be_an_int_or_a_bool():
    with pytest.raises(TypeError, match="static argument 'width' must be an int or a bool"):
        static_taps(kg.zeros(4), kg.ones(6), 2.0, True, 1.0, ndrange=4)


def test_static_names_are_checked_when_the_kernel_is_made():
    with pytest.raises(KernelError, match="'depth', which is not a parameter"):
        kg.kernel(static=("depth",))(_taps)

    def rebinds(out, k):
        i = kg.index()
        k = k + 1
        out[i] = k

    with pytest.raises(KernelError, match="assigns to 'k', a static argument"):
        kg.kernel(static="k")(rebinds)
