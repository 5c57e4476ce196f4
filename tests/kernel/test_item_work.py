"""The work estimate behind the CPU's choice between a kernel's parallel and serial
forms (``backends/kernel_work.py``): a kernel whose items loop over a row counts the
row's length, so a launch with few items and long loops runs on every core."""

from __future__ import annotations

import numpy as np

import kernelgrad as kg
from kernelgrad.backends.kernel_work import UNKNOWN_TRIPS, item_work


@kg.kernel
def _row_norms(out, x):
    i = kg.index()
    s = 0.0
    for j in range(x.shape[1]):
        s += x[i, j] * x[i, j]
    out[i] = s


@kg.kernel
def _windows(out, x, width, step):
    i = kg.index()
    best = x[i]
    for k in range(1, min(width, len(x) - i) // step):
        for m in range(3):
            best = max(best, x[i + k * step] + m)
    out[i] = best


@kg.kernel
def _branches(out, x, n):
    i = kg.index()
    if n > 4:
        for j in range(n):
            out[i] += x[j]
    else:
        k = 0
        while k < n:
            out[i] += x[k]
            k += 1


@kg.kernel
def _plain(out, x):
    i = kg.index()
    out[i] = x[i] * 2.0


def _work(kernel, *values):
    return item_work(kernel.info.params, kernel.info.body, values)


def test_loop_bounds_are_evaluated_from_the_arguments():
    x = np.zeros((8, 300), np.float32)
    assert _work(_row_norms, np.zeros(8), x) == 300
    # range(1, min(10, 50 - i) // 2): i is unknown, so min(...) is too
    assert _work(_windows, np.zeros(50), np.zeros(50), 10, 2) == UNKNOWN_TRIPS * 3
    assert _work(_plain, np.zeros(4), np.zeros(4)) == 1


def test_branches_take_the_larger_side_and_while_loops_count_as_unknown():
    assert _work(_branches, np.zeros(4), np.zeros(100), 100) == 100
    assert _work(_branches, np.zeros(4), np.zeros(100), 2) == UNKNOWN_TRIPS


def test_few_items_with_long_loops_run_the_parallel_form(monkeypatch):
    from kernelgrad.backends.cpu import kernel_module

    chosen = []
    real = kernel_module._launcher_and_prefix

    def spy(program, launch):
        launcher, prefix = real(program, launch)
        parallel, _ = kernel_module._launchers(program, launch)
        chosen.append("parallel" if launcher is parallel else "serial")
        return launcher, prefix

    monkeypatch.setattr(kernel_module, "_launcher_and_prefix", spy)
    rng = np.random.default_rng(0)
    wide = rng.standard_normal((64, 4096)).astype(np.float32)  # 64 items x 4096 trips
    out = kg.zeros(64)
    _row_norms(out, kg.tensor(wide), ndrange=64)
    np.testing.assert_allclose(out.numpy(), (wide * wide).sum(1), rtol=1e-4)
    made = len(chosen)  # (the launch, and the launch remembered for the next ones)
    narrow = rng.standard_normal((64, 4)).astype(np.float32)  # 64 items x 4 trips
    _row_norms(out, kg.tensor(narrow), ndrange=64)
    np.testing.assert_allclose(out.numpy(), (narrow * narrow).sum(1), rtol=1e-5)
    assert set(chosen[:made]) == {"parallel"}
    assert set(chosen[made:]) == {"serial"}
