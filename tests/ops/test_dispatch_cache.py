"""The eager dispatch caches (elementwise ``apply``'s decisions, the CPU backend's flat
kernels): a repeated op reuses its decisions only when nothing they depend on changed.
Each test first runs an op once so that its decisions are cached, then changes one
thing (strides, dtype, device, grad mode, a version counter, the default dtype, a scalar's
type or value) and checks the result against NumPy or the expected error."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends import get_backend
from kernelgrad.errors import ArgumentError, DeviceMismatchError, DTypeError, ShapeError
from kernelgrad.ops import elementwise, reduce
from kernelgrad.tensor import Storage, Tensor


@pytest.fixture(autouse=True)
def _fresh_plans() -> None:
    elementwise.clear_plans()
    reduce.clear_plans()


def _values(shape: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_changed_strides_are_not_read_as_the_cached_layout(device: str) -> None:
    a_values, b_values = _values((3, 3)), _values((3, 3), seed=1)
    a, b = kg.tensor(a_values, device=device), kg.tensor(b_values, device=device)
    np.testing.assert_allclose((a + b).cpu().numpy(), a_values + b_values)
    transposed = b.t()  # same shape, dtype and device: only the strides differ
    np.testing.assert_allclose((a + transposed).cpu().numpy(), a_values + b_values.T)
    sliced = kg.tensor(_values((3, 6), seed=2), device=device)[:, ::2]
    np.testing.assert_allclose((a + sliced).cpu().numpy(), a_values + sliced.cpu().numpy())
    np.testing.assert_allclose((a + b).cpu().numpy(), a_values + b_values)  # and back


def test_changed_dtype_changes_the_result_dtype(device: str) -> None:
    a = kg.tensor(_values((4,)), device=device)
    assert (a * a).dtype == kg.float32
    doubled = a.to(kg.float64)
    product = doubled * doubled
    assert product.dtype == kg.float64
    np.testing.assert_allclose(product.cpu().numpy(), doubled.cpu().numpy() ** 2)
    integers = kg.tensor([1, 2, 3], device=device)
    assert (integers * integers).dtype == kg.int64
    assert (integers / integers).dtype == kg.float32  # integer true division: the float rule


def test_scalar_type_and_default_dtype_are_part_of_the_decision(
    device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    integers = kg.tensor([1, 2, 3], device=device)
    assert (integers + 1).dtype == kg.int64
    assert (integers + 1.5).dtype == kg.float32
    np.testing.assert_allclose((integers + 1.5).cpu().numpy(), [2.5, 3.5, 4.5])
    assert (integers + True).dtype == kg.int64
    # the float dtype integers promote to is read from kernelgrad.dtypes on every call
    monkeypatch.setattr(kg.dtypes, "_default_float", kg.float64)
    assert (integers + 1.5).dtype == kg.float64
    monkeypatch.undo()
    assert (integers + 1.5).dtype == kg.float32


def test_scalar_values_are_checked_on_every_call() -> None:
    small = kg.tensor([1, 2], dtype=kg.int32)
    assert (small + 5).cpu().tolist() == [6, 7]
    with pytest.raises(ArgumentError, match="without overflow"):
        small + 2**40
    with pytest.raises(ArgumentError, match="without overflow"):  # the same key: checked again
        small + 2**40
    assert (small + 5).cpu().tolist() == [6, 7]


def test_a_changed_shape_is_broadcast_again_or_refused(device: str) -> None:
    a = kg.tensor(_values((2, 3)), device=device)
    row = kg.tensor(_values((3,), seed=1), device=device)
    np.testing.assert_allclose((a * row).cpu().numpy(), a.cpu().numpy() * row.cpu().numpy())
    column = kg.tensor(_values((2, 1), seed=2), device=device)
    np.testing.assert_allclose((a * column).cpu().numpy(), a.cpu().numpy() * column.cpu().numpy())
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4,\)|\(4,\).*\(2, 3\)"):
        a * kg.tensor(_values((4,)), device=device)


def test_grad_mode_and_requires_grad_are_read_on_every_call(device: str) -> None:
    leaf = kg.tensor(_values((3,)), device=device, requires_grad=True)
    other = kg.tensor(_values((3,), seed=1), device=device)
    with kg.no_grad():
        assert not (leaf * other).requires_grad
    product = leaf * other
    assert product.requires_grad and product.grad_fn is not None
    product.sum().backward()
    np.testing.assert_allclose(leaf.grad.cpu().numpy(), other.cpu().numpy())
    leaf.requires_grad_(False)
    assert not (leaf * other).requires_grad
    other.requires_grad_(True)
    assert (leaf * other).requires_grad


def test_in_place_writes_are_still_caught_by_the_version_check(device: str) -> None:
    leaf = kg.tensor(_values((3,)), device=device, requires_grad=True)

    def build() -> tuple[kg.Tensor, kg.Tensor]:
        doubled = leaf * 2
        return doubled, doubled * doubled  # the product saves ``doubled``

    doubled, square = build()  # caches the decisions of both products
    square.sum().backward()
    leaf.grad = None
    doubled, square = build()
    version = doubled._storage.version
    doubled.add_(1)
    assert doubled._storage.version == version + 1
    with pytest.raises(RuntimeError, match="modified in place afterwards"):
        square.sum().backward()


def test_in_place_add_through_the_cache_writes_every_time(device: str) -> None:
    target = kg.zeros(4, device=device)
    step = kg.ones(4, device=device)
    for expected in range(1, 4):
        target.add_(step)
        np.testing.assert_allclose(target.cpu().numpy(), np.full(4, expected, np.float32))


def test_a_different_backend_object_gets_its_own_decisions() -> None:
    """The decisions are keyed by each operand's backend (one per device): tensors of the
    same dtype, shape and strides on another backend get results on that backend."""
    cpu = kg.device("cpu")
    other_backend = type(get_backend(cpu))(cpu)

    def on_other(values: np.ndarray) -> Tensor:
        buffer = other_backend.from_numpy(values)
        return Tensor._from_buffer(buffer, values.shape, kg.float32, cpu)

    a_values, b_values = _values((2, 2)), _values((2, 2), seed=1)
    plain = kg.tensor(a_values) + kg.tensor(b_values)
    assert plain._storage.backend is get_backend(cpu)
    a, b = on_other(a_values), on_other(b_values)
    a._storage = Storage(a._storage.buffer, cpu, other_backend)
    b._storage = Storage(b._storage.buffer, cpu, other_backend)
    result = a + b
    assert result._storage.backend is other_backend
    np.testing.assert_allclose(result.cpu().numpy(), plain.cpu().numpy())
    # A tensor labelled with another device (its memory is host memory here, so that the
    # test runs without a GPU) next to a CPU tensor of the same dtype, shape and strides:
    # the cached CPU decision must not serve it; the device check refuses the pair.
    elsewhere = on_other(b_values)
    elsewhere._storage = Storage(elsewhere._storage.buffer, kg.device("cuda"), other_backend)
    with pytest.raises(DeviceMismatchError, match="cuda"):
        kg.tensor(a_values) + elsewhere


def test_moving_between_devices_is_not_served_from_the_cache(device: str) -> None:
    if device == "cpu":
        pytest.skip("needs a second device (the CUDA backend)")
    values = _values((3,))
    on_cpu = kg.tensor(values)
    on_device = kg.tensor(values, device=device)
    assert (on_cpu + on_cpu).device == kg.device("cpu")
    assert (on_device + on_device).device == kg.device(device)
    assert (on_cpu + on_cpu).device == kg.device("cpu")
    with pytest.raises(DeviceMismatchError):
        on_cpu + on_device


def test_reductions_follow_the_input_layout(device: str) -> None:
    values = _values((3, 4))
    x = kg.tensor(values, device=device)
    np.testing.assert_allclose(x.sum(1).cpu().numpy(), values.sum(1), rtol=1e-6)
    # same shape (4, 3) twice: contiguous, then a transposed view with other strides
    wide = kg.tensor(values.T.copy(), device=device)
    np.testing.assert_allclose(wide.sum(1).cpu().numpy(), values.T.sum(1), rtol=1e-6)
    np.testing.assert_allclose(x.t().sum(1).cpu().numpy(), values.T.sum(1), rtol=1e-6)
    np.testing.assert_allclose(x.t().amax(1).cpu().numpy(), values.T.max(1))  # another kind


def test_strided_elementwise_layouts_follow_the_strides(device: str) -> None:
    values, row_values = _values((3, 3)), _values((3,), seed=1)
    x, row = kg.tensor(values, device=device), kg.tensor(row_values, device=device)
    np.testing.assert_allclose((x * row).cpu().numpy(), values * row_values)
    np.testing.assert_allclose((x.t() * row).cpu().numpy(), values.T * row_values)
    offset = kg.tensor(_values((4, 3), seed=2), device=device)[1:]  # same strides, offset 3
    np.testing.assert_allclose((offset * row).cpu().numpy(), offset.cpu().numpy() * row_values)


def test_in_place_checks_follow_shape_and_dtype(device: str) -> None:
    target = kg.zeros((2, 3), device=device)
    target.add_(kg.ones(3, device=device))  # checked once, then cached for this key
    target.add_(kg.ones(3, device=device))
    np.testing.assert_allclose(target.cpu().numpy(), np.full((2, 3), 2, np.float32))
    with pytest.raises(ShapeError, match=r"broadcast to \(2, 2, 3\)"):
        target.add_(kg.ones((2, 2, 3), device=device))
    counts = kg.zeros(3, dtype=kg.int64, device=device)
    counts.add_(1)
    with pytest.raises(DTypeError, match="cannot be stored in place"):
        counts.add_(0.5)
    with pytest.raises(DTypeError, match="cannot be stored in place"):
        counts.add_(kg.ones(3, device=device))
    assert counts.cpu().tolist() == [1, 1, 1]
    shared = kg.arange(4.0, device=device)
    shared.add_(shared.flip(0))  # overlapping operand: checked on every call
    assert shared.cpu().tolist() == [3.0, 3.0, 3.0, 3.0]


# --- the CPU's direct launcher (``prepare_flat_elementwise``) -----------------------------------
def _counting_elementwise(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count calls of the CPU backend's general ``elementwise`` (patched on the class, so
    the direct launcher stays allowed: only a wrapper on the instance turns it off)."""
    calls: list[str] = []
    backend_class = type(kg.zeros(1)._backend)
    original = backend_class.elementwise

    def counted(self, fn, outputs, inputs, compute_dtypes):
        calls.append(fn.name)
        return original(self, fn, outputs, inputs, compute_dtypes)

    monkeypatch.setattr(backend_class, "elementwise", counted)
    return calls


def test_repeated_contiguous_ops_take_the_direct_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting_elementwise(monkeypatch)
    values = _values((40,))
    a, b = kg.tensor(values[:20]), kg.tensor(values[20:])
    window = kg.tensor(values)[5:25]  # contiguous, at an offset into a longer buffer
    for _ in range(2):
        np.testing.assert_array_equal((a + b).numpy(), values[:20] + values[20:])
        np.testing.assert_array_equal((a * window).numpy(), values[:20] * values[5:25])
        np.testing.assert_array_equal(kg.relu(window).numpy(), np.maximum(values[5:25], 0))
        np.testing.assert_allclose((a * 2.5 - 1).numpy(), values[:20] * 2.5 - 1, rtol=1e-6)
    assert calls[:5] == ["add", "mul", "relu", "mul", "sub"]  # the first calls decide
    assert len(calls) == 5  # the repeats never reach the general path
    assert len(elementwise._PLANS) == 5
    assert all(plan.flat is not None for plan in elementwise._PLANS.values())


def test_repeated_broadcast_and_strided_ops_take_the_strided_launcher(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``prepare_strided_elementwise``: a row or a column broadcast, a transposed
    input, a 0-d tensor (a one-element "splat"), inputs at offsets into longer buffers
    (the layout's offsets made again), and the parallel form: NumPy's values, and after
    the first call of each pattern never the general path."""
    from kernelgrad.backends.cpu import PARALLEL_THRESHOLD

    calls = _counting_elementwise(monkeypatch)
    values = _values((6, 8))
    a = kg.tensor(values)
    row, column = kg.tensor(values[0]), kg.tensor(values[:, :1].copy())
    transposed = kg.tensor(values.T.copy()).T  # strides (1, 6)
    scale = kg.tensor(np.float32(1.5))  # 0-d: broadcast everywhere
    longer = kg.tensor(_values((70,)))
    big = kg.tensor(_values((PARALLEL_THRESHOLD // 16 + 1, 16)))
    big_row = kg.tensor(_values((16,)))
    for start in (0, 3, 0, 5):  # offsets of the row: cached (0) and made again
        offset_row = longer[start : start + 8]
        np.testing.assert_array_equal((a * row).numpy(), values * values[0])
        np.testing.assert_array_equal((a - column).numpy(), values - values[:, :1])
        np.testing.assert_array_equal((a + transposed).numpy(), values + values)
        np.testing.assert_array_equal((a * scale).numpy(), values * np.float32(1.5))
        np.testing.assert_array_equal(
            (a + offset_row).numpy(), values + longer.numpy()[start : start + 8]
        )
        np.testing.assert_array_equal((big * big_row).numpy(), big.numpy() * big_row.numpy())
    assert len(calls) == 6  # one general call per pattern, the first
    assert all(plan.flat is not None for plan in elementwise._PLANS.values())


def test_repeated_in_place_ops_take_the_direct_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """``a.add_(b)`` and friends write through the launcher on repeats: into a tensor at
    an offset in a longer buffer, with a scalar, and reading the target itself; a strided
    target, or one whose dtype differs from the result's, stays on the general path."""
    calls = _counting_elementwise(monkeypatch)
    values = _values((30,))
    step = _values((10,), seed=1)
    buffer = kg.tensor(values)
    window = buffer[10:20]  # contiguous, at an offset
    target = kg.tensor(values[:10])
    expected_window, expected_target = values[10:20].copy(), values[:10].copy()
    for _ in range(3):
        window.add_(kg.tensor(step))
        expected_window += step
        target.mul_(1.5)
        expected_target *= np.float32(1.5)
        target.sub_(target)
        expected_target -= expected_target
        np.testing.assert_array_equal(window.numpy(), expected_window)
        np.testing.assert_array_equal(target.numpy(), expected_target)
    np.testing.assert_array_equal(buffer.numpy()[:10], values[:10])  # nothing else written
    np.testing.assert_array_equal(buffer.numpy()[20:], values[20:])
    assert calls == ["add", "mul", "sub"]  # the first calls decide, the repeats launch
    strided = kg.tensor(values)[::3]  # 10 elements, stride 3
    grid = kg.tensor(values.reshape(3, 10).T.copy())
    halves = kg.zeros(10, dtype=kg.float32)
    wide_step = kg.tensor(step.astype(np.float64))
    del calls[:]
    for _ in range(2):
        strided.add_(1.0)
        grid.T.add_(1.0)  # a transposed view: strided
        halves.add_(wide_step)  # a float64 result into float32
    one = np.float32(1)
    np.testing.assert_array_equal(strided.numpy(), values[::3] + one + one)
    np.testing.assert_array_equal(grid.numpy(), values.reshape(3, 10).T + one + one)
    np.testing.assert_allclose(halves.numpy(), 2 * step, rtol=1e-6)
    assert calls == ["add", "add", "add"] * 2  # never a launcher for those


def test_the_direct_launcher_converts_scalars_and_mixed_dtypes() -> None:
    integers = kg.tensor(np.arange(6, dtype=np.int32))
    floats = kg.tensor(_values((6,)))
    for _ in range(2):
        assert (integers + floats).dtype == kg.float32
        np.testing.assert_allclose((integers + floats).numpy(), np.arange(6) + floats.numpy())
        shifted = integers + 7
        assert shifted.dtype == kg.int32
        np.testing.assert_array_equal(shifted.numpy(), np.arange(6) + 7)
        # the scalar's value is read on every call, and still checked against the dtype
    np.testing.assert_array_equal((integers + 9).numpy(), np.arange(6) + 9)
    with pytest.raises(ArgumentError, match=r"cannot be converted to kg\.int32"):
        integers + 2**40


def test_the_direct_launcher_runs_the_parallel_form_and_records_gradients() -> None:
    from kernelgrad.backends.cpu import PARALLEL_THRESHOLD

    n = PARALLEL_THRESHOLD + 3
    values = _values((n,))
    x = kg.tensor(values, requires_grad=True)
    for _ in range(2):
        y = (x * x).sum()
        np.testing.assert_allclose(
            y.item(), float((values.astype(np.float64) ** 2).sum()), rtol=1e-4
        )
        x.grad = None
        y.backward()
        np.testing.assert_allclose(x.grad.numpy(), 2 * values, rtol=1e-6)
    with kg.no_grad():
        assert not (x * x).requires_grad


def test_watchers_of_the_backend_still_see_every_launch() -> None:
    a, b = kg.ones(8), kg.ones(8)
    _ = a + b  # decided, with a direct launcher
    with kg.compile.count_launches() as counter:
        _ = a + b
        _ = a + b
    assert counter.count == 2 and counter.names == ["add", "add"]

    @kg.compile
    def twice(x, y):
        return (x + y) * 2

    np.testing.assert_array_equal(twice(a, b).numpy(), np.full(8, 4.0))
    np.testing.assert_array_equal(twice(a, b * 3).numpy(), np.full(8, 8.0))


def test_the_direct_launcher_logs_launches_at_debug_level_2(
    capfd: pytest.CaptureFixture[str],
) -> None:
    from kernelgrad.debug import set_debug_level

    a, b = kg.ones(8), kg.ones(8)
    _ = a - b
    set_debug_level(2)
    try:
        _ = a - b
    finally:
        set_debug_level(0)
    assert "cpu sub" in capfd.readouterr().err


# --- the CPU's reduction launcher (``prepare_reduce``) ------------------------------------------
def test_repeated_reductions_take_the_cached_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sum``/``mean``/``amax``/``amin`` repeated on one layout skip the general path
    (counted on the backend class): rows, columns, a transposed input, an input at an
    offset, keepdim, negative and tuple dims, the split of a long reduction; NumPy's values
    and the gradients every time; a watcher (``count_launches``) still sees each launch."""
    from kernelgrad.backends.cpu import PARALLEL_THRESHOLD

    calls: list[str] = []
    prepared: list[str] = []
    backend_class = type(kg.zeros(1)._backend)
    original, original_prepare = backend_class.reduce, backend_class.prepare_reduce

    def counted(self, kind, out, x, axes):
        calls.append(kind)
        return original(self, kind, out, x, axes)

    def counted_prepare(self, kind, *rest):
        prepared.append(kind)
        return original_prepare(self, kind, *rest)

    monkeypatch.setattr(backend_class, "reduce", counted)
    monkeypatch.setattr(backend_class, "prepare_reduce", counted_prepare)
    values = _values((5, 7))
    longer = _values((2 * PARALLEL_THRESHOLD,))
    x = kg.tensor(values, requires_grad=True)
    long_row = kg.tensor(longer)[None]  # one long row: split across threads
    for start in (1, 2, 1):
        window = kg.tensor(_values((40,)))[start : start + 35].reshape(5, 7)
        np.testing.assert_allclose(x.sum(1).detach().numpy(), values.sum(1), rtol=1e-6)
        np.testing.assert_allclose(x.T.sum(-1).detach().numpy(), values.sum(0), rtol=1e-6)
        kept = x.mean((0, 1), keepdim=True)
        assert kept.shape == (1, 1)
        np.testing.assert_allclose(kept.item(), values.mean(), rtol=1e-5)
        np.testing.assert_array_equal(x.amax(0).detach().numpy(), values.max(0))
        np.testing.assert_array_equal(
            x.amin(1, keepdim=True).detach().numpy(), values.min(1, keepdims=True)
        )
        np.testing.assert_allclose(
            window.sum(0).numpy(), window.numpy().sum(0), rtol=1e-6
        )  # the offset is read on every call
        np.testing.assert_allclose(
            long_row.sum(1).numpy(), longer.astype(np.float64).sum(keepdims=True), rtol=1e-4
        )
        x.grad = None
        (x.sum(1) * kg.arange(5.0)).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.repeat(np.arange(5.0), 7).reshape(5, 7))
    # one launcher per pattern (sum(1), T.sum(-1), mean, amax, amin, the window's sum(0),
    # the long row, the weighted sum), made at its first call; never the general path
    assert prepared == ["sum", "sum", "sum", "max", "min", "sum", "sum", "sum"]
    assert calls == []
    with kg.compile.count_launches() as counter:
        _ = x.sum(1)
    assert counter.names == ["reduce"] and calls == ["sum"]
    with pytest.raises(kg.errors.DimensionError):
        x.sum(2)
    with pytest.raises(ShapeError, match="empty dimension"):
        kg.zeros((0, 3)).amax(0)
    assert kg.zeros((0, 3)).sum(0).tolist() == [0.0, 0.0, 0.0]
