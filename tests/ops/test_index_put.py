"""Advanced-index assignment on every device (``t[index] = v``, ``t[mask] = v``,
``index_put_`` with ``accumulate``, ``index_copy_``, ``index_fill_``, ``masked_scatter_``),
values and gradients compared with PyTorch. Shapes stay tiny: these run under the CUDA
simulator too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close

torch = pytest.importorskip("torch")


def _kg(a: np.ndarray, device: str, grad: bool = False) -> kg.Tensor:
    return kg.tensor(a, device=device, requires_grad=grad)


def _torch(a: np.ndarray, grad: bool = False) -> Any:
    return torch.tensor(a, requires_grad=grad)


def _compare(
    fn: Callable[..., Any], arrays: list[np.ndarray], device: str, grads: tuple[int, ...] = ()
) -> None:
    """``fn(lib, *tensors)`` on kernelgrad (``device``) and PyTorch: equal results, and
    equal gradients of ``(result * weights).sum()`` for the inputs listed in ``grads``."""
    ours = [_kg(a, device, k in grads) for k, a in enumerate(arrays)]
    theirs = [_torch(a, k in grads) for k, a in enumerate(arrays)]
    with kg.device(device):  # `lib.tensor(...)` inside `fn` lands on the device
        got = fn(kg, *ours)
    want = fn(torch, *theirs)
    assert_close(got.detach(), want.detach().numpy())
    if grads:
        weights = np.arange(1.0, 1.0 + want.numel()).reshape(tuple(want.shape)) / 7.0
        (got * kg.tensor(weights, dtype=got.dtype, device=device)).sum().backward()
        (want * torch.tensor(weights, dtype=want.dtype)).sum().backward()
        for k in grads:
            if theirs[k].grad is None:  # not reached by the result
                assert ours[k].grad is None or not ours[k].grad.abs().sum().item()
            else:
                assert_close(ours[k].grad, theirs[k].grad.numpy())


def _grid(*shape: int) -> np.ndarray:
    return np.arange(float(np.prod(shape))).reshape(shape) - 3.0


# --- assignment through index tensors --------------------------------------------------------
@pytest.mark.parametrize(
    "key",
    [
        lambda lib: (lib.tensor([2, 0]),),
        lambda lib: (lib.tensor([-1, 1]),),
        lambda lib: (slice(None), lib.tensor([[3], [0]])),
        lambda lib: (lib.tensor([0, 2]), lib.tensor([1, 3])),
        lambda lib: (lib.tensor([0, 2]), slice(None), None),
        lambda lib: (lib.tensor([1, 2]), 1),
        lambda lib: (lib.tensor([0, 2]), None, lib.tensor([1, 3])),
        lambda lib: (1, None, lib.tensor([0, 3])),
    ],
    ids=["rows", "negative", "column-2d", "pairs", "none", "int-beside", "apart", "int-apart"],
)
def test_assignment_through_index_tensors_matches_torch(device, key):
    def assign(lib, x, v):
        y = x * 1.0
        selected = y[key(lib)]
        y[key(lib)] = v[: selected.numel()].reshape(selected.shape)
        return y

    _compare(assign, [_grid(3, 4), _grid(12) * 10], device, grads=(0, 1))


@pytest.mark.parametrize("value", [7.5, "row", "zero-d"])
def test_broadcast_values_and_numbers(device, value):
    def assign(lib, x, row):
        y = x * 1.0
        v = {"row": row, "zero-d": row[1]}.get(value, value)
        y[lib.tensor([2, 0, 2])] = v
        return y

    grads = () if value == 7.5 else (0, 1)
    _compare(assign, [_grid(3, 4), _grid(4) * 5], device, grads=grads)


def test_a_non_contiguous_target_is_written_in_place(device):
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = kg.tensor(base, device=device)
    x.T[kg.tensor([1, 3], device=device)] = kg.tensor([[-1.0, -2.0, -3.0]], device=device)
    x[::2, kg.tensor([0], device=device)] = kg.tensor(9.0, device=device)
    expected = base.copy()
    expected.T[[1, 3]] = [[-1.0, -2.0, -3.0]]
    expected[::2, [0]] = 9.0
    assert_close(x, expected)


def test_a_value_that_is_a_view_of_the_target(device):
    x = kg.tensor(np.arange(6.0).reshape(3, 2), device=device)
    x[kg.tensor([1, 2], device=device)] = x[0]
    assert_close(x, [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    y = kg.tensor(np.arange(4.0), device=device)
    y[kg.tensor([0, 1, 2, 3], device=device)] = y.flip(0)
    assert_close(y, [3.0, 2.0, 1.0, 0.0])


def test_integer_and_bool_targets(device):
    x = kg.zeros(4, dtype=kg.int64, device=device)
    x[kg.tensor([1, 3], device=device)] = 2**40
    x[kg.tensor([True, False, False, False], device=device)] = 2.7  # truncated, as PyTorch
    assert x.cpu().tolist() == [2, 2**40, 0, 2**40]
    b = kg.zeros(3, dtype=kg.bool, device=device)
    b[kg.tensor([2], device=device)] = True
    assert b.cpu().tolist() == [False, False, True]


# --- boolean masks ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "case",
    ["scalar", "count", "row", "leading", "after-slice", "2d-count"],
)
def test_mask_assignment_matches_torch(device, case):
    def assign(lib, x, v):
        y = x * 1.0
        if case == "scalar":
            y[y > 1] = -1.0
        elif case == "count":
            mask = y > 1
            y[mask] = v[: int(mask.sum().item())]
        elif case == "row":
            y[lib.tensor([True, False, True])] = v[:4]
        elif case == "leading":
            y[lib.tensor([False, True, True])] = v[:8].reshape(2, 4)
        elif case == "after-slice":
            y[1:, lib.tensor([True, False, False, True])] = v[:1]
        else:
            mask = lib.tensor([[True, False, True, False]] * 3)
            y[mask] = v[:6]
        return y

    _compare(assign, [_grid(3, 4), _grid(12) * 10], device, grads=(0, 1))


def test_mask_assignment_with_a_wrong_value_shape(device):
    x = kg.zeros(3, 4, device=device)
    mask = kg.tensor([True, False, True], device=device)
    with pytest.raises(kg.ShapeError, match=r"\(2, 4\)"):
        x[mask] = kg.ones(3, 4, device=device)
    assert_close(x, np.zeros((3, 4)))


# --- errors ----------------------------------------------------------------------------------
def test_out_of_range_indices_raise_index_error(device):
    x = kg.zeros(3, 2, device=device)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[kg.tensor([0, 3], device=device)] = 1.0
        x.sum().item()  # the CUDA backend reports kernel-found errors at its next read
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0"):
        x[kg.tensor([-4], device=device), kg.tensor([0], device=device)] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        x.index_put_((kg.tensor([5], device=device),), kg.tensor(1.0, device=device), True)
        x.sum().item()
    with pytest.raises(IndexError, match="index_copy_: index 7 is out of bounds"):
        x.index_copy_(1, kg.tensor([7], device=device), kg.zeros(3, 1, device=device))
        x.sum().item()


def test_dtype_and_device_errors_name_the_fix(device):
    x = kg.zeros(3, device=device)
    index = kg.tensor([0, 1], device=device)
    with pytest.raises(kg.errors.DTypeError, match=r"float64.*value\.to\(kg\.float32\)"):
        x[index] = kg.ones(2, dtype=kg.float64, device=device)
    with pytest.raises(kg.errors.DTypeError, match="integer"):
        x[kg.tensor([0.0], device=device)] = 1.0
    with pytest.raises(kg.errors.DTypeError, match=r"source\.to"):
        x.index_copy_(0, index, kg.ones(2, dtype=kg.float64, device=device))
    with pytest.raises(kg.errors.DTypeError, match=r"mask\.bool\(\)"):
        x.masked_scatter_(kg.tensor([1, 0, 1], device=device), kg.ones(3, device=device))
    x[index] = kg.tensor(2, device=device)  # a 0-d value is converted, as in PyTorch
    assert_close(x, [2.0, 2.0, 0.0])
    if device != "cpu":
        x[kg.tensor([0])] = 1.0  # host indices for a device tensor move, as in PyTorch
        x[kg.tensor([False, True, False])] = 3.0  # and so does a host mask
        assert_close(x, [1.0, 3.0, 0.0])
        x[kg.tensor([1])] = kg.tensor([2.0], device=device)
        assert_close(x, [1.0, 2.0, 0.0])
        assert_close(x[kg.tensor([1, 0])], [2.0, 1.0])  # reads too
        assert_close(x[kg.tensor([True, False, True])], [1.0, 0.0])
        x[index] = 2.0
        with pytest.raises(kg.errors.DeviceMismatchError, match=r"\.to\('cuda"):
            x[index] = kg.ones(2)
        x[index] = kg.tensor(5.0)  # a 0-d CPU value may come from the host
        assert_close(x, [5.0, 5.0, 0.0])


# --- index_put_ ------------------------------------------------------------------------------
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_torch(device, accumulate):
    def put(lib, x, v):
        y = x * 1.0
        rows = lib.tensor([2, 0, 2]) if accumulate else lib.tensor([2, 0])
        cols = lib.tensor([1, 3, 1]) if accumulate else lib.tensor([1, 3])
        return y.index_put_((rows, cols), v[: rows.numel()], accumulate=accumulate)

    _compare(put, [_grid(3, 4), _grid(3) * 2], device, grads=(0, 1))


def test_index_put_accumulate_sums_duplicates(device):
    def put(lib, x, v):
        out = lib.index_put(x, (lib.tensor([0, 0, -1, 0]),), v, accumulate=True)
        return out.index_put((lib.tensor([True, False, True]),), v[0], accumulate=True)

    _compare(put, [_grid(3, 2), _grid(4, 2)], device, grads=(0, 1))
    # a transposed (non-contiguous) target takes the general path
    x = kg.zeros(2, 3, device=device)
    x.T.index_put_((kg.tensor([1, 1], device=device),), kg.ones(2, 2, device=device), True)
    assert_close(x, [[0.0, 2.0, 0.0], [0.0, 2.0, 0.0]])
    b = kg.zeros(3, dtype=kg.bool, device=device)
    b.index_put_((kg.tensor([1, 1], device=device),), kg.tensor(True, device=device), True)
    assert b.cpu().tolist() == [False, True, False]


def test_index_put_checks_its_arguments(device):
    x = kg.zeros(3, device=device)
    with pytest.raises(kg.errors.ArgumentError, match=r"tuple of index tensors.*\(index,\)"):
        x.index_put_(kg.tensor([0], device=device), kg.tensor(1.0, device=device))
    with pytest.raises(kg.errors.ArgumentError, match="indices\\[0\\] is a slice"):
        x.index_put_((slice(None),), kg.tensor(1.0, device=device))


# --- index_copy_, index_fill_, masked_scatter_ -----------------------------------------------
def test_index_copy_matches_torch(device):
    def copy(lib, x, source):
        return lib.index_copy(x, 1, lib.tensor([3, 0]), source) + x.index_copy(
            1, lib.tensor([1]), source[:, :1]
        )

    _compare(copy, [_grid(3, 4), _grid(3, 2) * 10], device, grads=(0, 1))
    x = kg.zeros(2, 3, device=device)
    with pytest.raises(kg.ShapeError, match=r"expected \(2, 2\)"):
        x.index_copy_(1, kg.tensor([0, 1], device=device), kg.ones(2, 3, device=device))
    with pytest.raises(IndexError, match="0 or 1 dims"):
        x.index_copy_(1, kg.tensor([[0]], device=device), kg.ones(2, 1, device=device))


def test_index_fill_matches_torch(device):
    def fill(lib, x, value):
        y = x.index_fill(1, lib.tensor([0, 2]), -2.5)
        return y.index_fill(0, lib.tensor(1), value.sum())

    _compare(fill, [_grid(2, 3), _grid(2)], device, grads=(0, 1))
    with pytest.raises(kg.ShapeError, match="0-d tensor"):
        kg.zeros(2, device=device).index_fill_(
            0, kg.tensor([0], device=device), kg.ones(1, device=device)
        )
    ints = kg.zeros(3, dtype=kg.int64, device=device).index_fill_(
        0, kg.tensor([1], device=device), 4
    )
    assert ints.cpu().tolist() == [0, 4, 0]


def test_masked_scatter_matches_torch(device):
    def scatter(lib, x, source):
        mask = lib.tensor([[True, False, True], [False, False, True]])
        row_mask = lib.tensor([False, True, True])  # broadcast over the rows
        return x.masked_scatter(mask, source) * 2 + lib.masked_scatter(x, row_mask, source.T)

    _compare(scatter, [_grid(2, 3), _grid(2, 4) * 10], device, grads=(0, 1))
    x = kg.zeros(3, device=device)
    with pytest.raises(kg.ShapeError, match="selects 2 elements but the source has only 1"):
        x.masked_scatter_(kg.tensor([True, False, True], device=device), kg.ones(1, device=device))


def test_in_place_forms_refuse_leaves_that_need_grad(device):
    w = kg.zeros(3, requires_grad=True, device=device)
    with pytest.raises(kg.InplaceError, match="no_grad"):
        w.index_fill_(0, kg.tensor([0], device=device), 1.0)
    with kg.no_grad():
        w.index_put_((kg.tensor([0, 0], device=device),), kg.ones(2, device=device), True)
    assert_close(w.detach(), [2.0, 0.0, 0.0])
