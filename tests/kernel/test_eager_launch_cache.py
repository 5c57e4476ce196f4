"""A ``@kg.kernel`` launch like an earlier one reuses its checks and conversions
(``Kernel.launch``, on a backend with ``prepare_kernel``): only the tensors' arrays are
made again. The results must be those of a full launch."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.errors import InplaceError, KernelError


@kg.kernel
def _scaled_sums(out, x, n, scale):
    i = kg.index()
    s = 0.0
    for j in range(n):
        s += x[i * n + j]
    out[i] = s * scale


@kg.kernel
def _double_(x):
    i = kg.index()
    x[i] = 2.0 * x[i]


def test_repeated_launches_follow_new_buffers_offsets_and_numbers():
    rng = np.random.default_rng(0)
    big = rng.standard_normal(100).astype(np.float32)
    source = kg.tensor(big)
    for step, (n, scale) in enumerate([(3, 0.5), (3, 0.25), (4, 0.25), (3, 2.0)]):
        out = kg.zeros(5)
        x = source[step : step + 5 * n]  # a new offset into the same buffer each time
        _scaled_sums(out, x, n, scale, ndrange=5)
        expected = big[step : step + 5 * n].reshape(5, n).sum(1) * np.float32(scale)
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
    if kg.zeros(1)._backend.__class__.__name__ == "CPUBackend":
        keys = list(_scaled_sums._eager)
        assert len(keys) == 2  # n=3 and n=4 (the floats and offsets share an entry)


def test_a_remembered_launch_still_bumps_the_version_of_what_it_writes():
    x = kg.ones(4)
    for _ in range(3):
        before = x._storage.version
        _double_(x, ndrange=4)
        assert x._storage.version == before + 1
    np.testing.assert_array_equal(x.numpy(), np.full(4, 8.0, np.float32))


def test_checks_are_not_skipped_for_launches_that_failed_them():
    leaf = kg.ones(4, requires_grad=True)
    for _ in range(2):
        with pytest.raises(InplaceError):
            _double_(leaf, ndrange=4)
    expanded = kg.ones(1).expand(4)
    for _ in range(2):
        with pytest.raises(KernelError, match="expanded"):
            _double_(expanded, ndrange=4)
    with kg.no_grad():
        _double_(leaf, ndrange=4)  # allowed without gradient recording
    np.testing.assert_array_equal(leaf.detach().numpy(), np.full(4, 2.0, np.float32))


def test_repeated_launches_on_each_device(device):
    """On a backend without ``prepare_kernel`` (CUDA) a launch is remembered as one
    that cannot be prepared, and every launch takes the full path."""
    x = kg.ones(8, device=device)
    for _ in range(3):
        _double_(x, ndrange=8)
    np.testing.assert_array_equal(x.cpu().numpy(), np.full(8, 8.0, np.float32))
    entry = _double_._eager[_double_._eager_key((x,), 8, None, None)]
    if hasattr(x._backend, "prepare_kernel"):
        assert entry is not None  # remembered: the later launches reused it
    else:
        assert entry is None
