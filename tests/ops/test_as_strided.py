"""``as_strided``: views of a tensor's memory with given sizes, strides and offset, with
gradients that add up where the view reads an element more than once (values and
gradients against NumPy, and against PyTorch when it is installed)."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close

try:
    import torch
except ImportError:  # the NumPy references still run
    torch = None

# (memory, the tensor taken from it, size, stride, storage_offset)
CASES = [
    ("sliding windows", lambda m: m, (4, 3), (1, 1), None),
    ("a repeated row (stride 0)", lambda m: m, (3, 4), (0, 1), 2),
    ("a transposed grid", lambda m: m, (3, 4), (1, 3), None),
    ("from a view at an offset", lambda m: m[2:9], (2, 3), (3, 1), None),
    ("an explicit offset", lambda m: m[1:], (2, 2), (2, 1), 5),
]


def _reference(memory: np.ndarray, size, stride, offset) -> np.ndarray:
    out = np.empty(size)
    for index in np.ndindex(*size):
        out[index] = memory[offset + sum(i * s for i, s in zip(index, stride))]
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients(case, device):
    _, take, size, stride, storage_offset = case
    memory = np.arange(12.0)
    x = take(kg.tensor(memory, device=device))
    offset = x._offset if storage_offset is None else storage_offset
    view = x.as_strided(size, stride, storage_offset)
    assert view.shape == size
    assert_close(view, _reference(memory, size, stride, offset))
    assert view._storage is x._storage  # a view: the memory is shared

    leaf = kg.tensor(memory, device=device, requires_grad=True)
    source = take(leaf)
    weights = np.arange(1.0, 1.0 + np.prod(size)).reshape(size)
    (
        source.as_strided(size, stride, storage_offset) * kg.tensor(weights, device=device)
    ).sum().backward()
    expected = np.zeros(12)
    for index in np.ndindex(*size):
        expected[offset + sum(i * s for i, s in zip(index, stride))] += weights[index]
    own = np.zeros(12, dtype=bool)
    own[source._offset + np.arange(source.numel())] = True
    expected[~own] = 0.0  # elements outside the tensor given get no gradient through it
    assert_close(leaf.grad, expected)

    if torch is not None:
        t_leaf = torch.tensor(memory, requires_grad=True)
        t_source = take(t_leaf)
        t_view = t_source.as_strided(size, stride, storage_offset)
        np.testing.assert_allclose(view.cpu().numpy(), t_view.detach().numpy())
        (t_view * torch.tensor(weights)).sum().backward()
        np.testing.assert_allclose(leaf.grad.cpu().numpy(), t_leaf.grad.numpy())


def test_writes_through_the_view_reach_the_tensor():
    x = kg.zeros(6)
    x.as_strided((2,), (3,)).fill_(1.0)
    assert x.tolist() == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert kg.as_strided(x, (2, 2), (1, 1), 2).tolist() == [[0.0, 1.0], [1.0, 0.0]]


def test_errors_name_the_problem():
    x = kg.arange(6.0)
    with pytest.raises(kg.errors.ShapeError, match="outside the memory"):
        x.as_strided((3, 3), (2, 1))
    with pytest.raises(kg.errors.ShapeError, match="one stride per dimension"):
        x.as_strided((2, 2), (1,))
    with pytest.raises(kg.errors.ArgumentError, match="negative"):
        x.as_strided((2,), (-1,), 4)
    with pytest.raises(kg.errors.ShapeError, match="outside the memory"):
        x.as_strided((2,), (1,), -1)
