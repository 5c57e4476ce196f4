"""``kg.compile``: fused replays equal eager results; fewer kernels; caching; errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernelgrad as kg
from kernelgrad.compile import TraceError, count_launches
from kernelgrad.compile.plan import GuardError
from kernelgrad.debug import debug_level, set_debug_level
from kernelgrad.ops.elementwise import GELU
from tests.helpers import as_numpy, assert_close

# --- random programs ----------------------------------------------------------------------------
SHAPES = [(3, 4), (3, 1), (1, 4), (4,), ()]
UNARY = {
    "exp": lambda x: (x * 0.5).exp(),
    "tanh": lambda x: x.tanh(),
    "relu": lambda x: x.relu(),
    "sigmoid": lambda x: x.sigmoid(),
    "neg": lambda x: -x,
    "abs": lambda x: x.abs(),
    "square": lambda x: x * x,
    "sqrt": lambda x: (x.abs() + 0.5).sqrt(),
    "cast": lambda x: (x * 3).to(kg.int32).to(kg.float32),
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 1.0),
    "maximum": lambda a, b: kg.maximum(a, b),
    "where": lambda a, b: kg.where(a > b, a, b * 0.5),
    "scaled": lambda a, b: a * 0.25 + b,
}


def _broadcast(a, b):
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        return None


@st.composite
def programs(draw):
    """A list of instructions over values 0..2 (the inputs: shapes (3, 4), (4,), (3, 1))."""
    shapes = [(3, 4), (4,), (3, 1)]
    steps = []
    for _ in range(draw(st.integers(3, 8))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce", "matmul", "view"]))
        if kind == "unary":
            i = draw(st.integers(0, len(shapes) - 1))
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY))), i))
            shapes.append(shapes[i])
        elif kind == "binary":
            i = draw(st.integers(0, len(shapes) - 1))
            partners = [j for j in range(len(shapes)) if _broadcast(shapes[i], shapes[j])]
            j = draw(st.sampled_from(partners))
            steps.append(("binary", draw(st.sampled_from(sorted(BINARY))), i, j))
            shapes.append(_broadcast(shapes[i], shapes[j]))
        elif kind == "reduce":
            candidates = [k for k, s in enumerate(shapes) if len(s) == 2]
            i = draw(st.sampled_from(candidates))
            dim = draw(st.sampled_from([0, 1, None]))
            keep = draw(st.booleans()) and dim is not None
            how = draw(st.sampled_from(["sum", "mean", "amax"]))
            steps.append(("reduce", how, i, dim, keep))
            if dim is None:
                shapes.append(())
            else:
                shape = list(shapes[i])
                if keep:
                    shape[dim] = 1
                else:
                    del shape[dim]
                shapes.append(tuple(shape))
        elif kind == "matmul":
            candidates = [k for k, s in enumerate(shapes) if s == (3, 4)]
            i = draw(st.sampled_from(candidates))
            steps.append(("matmul", i))
            shapes.append((3, 3))
        else:
            candidates = [k for k, s in enumerate(shapes) if s == (3, 4)]
            i = draw(st.sampled_from(candidates))
            how = draw(st.sampled_from(["transpose_back", "slice"]))
            steps.append(("view", how, i))
            shapes.append((3, 4) if how == "transpose_back" else (3, 2))
    outputs = draw(st.lists(st.integers(3, len(shapes) - 1), min_size=1, max_size=2, unique=True))
    return steps, outputs


def run_program(program, x, y, z):
    steps, outputs = program
    values = [x, y, z]
    for step in steps:
        if step[0] == "unary":
            values.append(UNARY[step[1]](values[step[2]]))
        elif step[0] == "binary":
            values.append(BINARY[step[1]](values[step[2]], values[step[3]]))
        elif step[0] == "reduce":
            _, how, i, dim, keep = step
            source = values[i]
            if how == "amax":
                values.append(source.amax(dim, keep) if dim is not None else source.amax())
            else:
                values.append(getattr(source, how)(dim, keep))
        elif step[0] == "matmul":
            a = values[step[1]]
            values.append(a @ a.T)
        else:
            a = values[step[2]]
            values.append((a.T * 1.0).T if step[1] == "transpose_back" else a[:, 1:3])
    return tuple(values[k] for k in outputs)


def _inputs(device, seed):
    rng = np.random.default_rng(seed)
    return [
        kg.tensor(rng.uniform(-2, 2, shape).astype(np.float32), device=device)
        for shape in [(3, 4), (4,), (3, 1)]
    ]


@settings(max_examples=12)
@given(program=programs())
def test_fused_equals_eager_on_random_programs(device, program):
    compiled = kg.compile(lambda x, y, z: run_program(program, x, y, z))
    for seed in (1, 2, 3):  # trace, then two replays with new values
        inputs = _inputs(device, seed)
        expected = run_program(program, *inputs)
        got = compiled(*inputs)
        for a, b in zip(got, expected):
            assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert len(compiled.plans) == 1


# --- kernel counts on known graphs --------------------------------------------------------------
def gelu_affine(x, w, b):
    return GELU(x @ w + b)


def test_gelu_of_affine_is_at_most_two_kernels(device):
    x, w, b = (
        kg.randn(8, 5, device=device),
        kg.randn(5, 6, device=device),
        kg.randn(6, device=device),
    )
    compiled = kg.compile(gelu_affine)
    compiled(x, w, b)  # runs eagerly
    compiled(x, w, b)  # traced
    with count_launches() as counter:
        result = compiled(x, w, b)  # replayed
    assert counter.count <= 2, counter.names
    with count_launches() as eager_counter:
        expected = gelu_affine(x, w, b)
    assert eager_counter.count == 3
    assert_close(result, expected, rtol=1e-6, atol=1e-6)


def test_reduction_prologue_and_epilogue_fuse_on_the_cpu():
    def mse(x, y):
        return ((x - y) ** 2).mean()

    x, y = kg.randn(4, 6), kg.randn(6)
    compiled = kg.compile(mse)
    compiled(x, y)
    compiled(x, y)
    with count_launches() as counter:
        result = compiled(x, y)
    assert counter.count == 1, counter.names
    assert_close(result, mse(x, y), rtol=1e-6, atol=1e-7)


class MLP:
    """A 2-layer perceptron in plain tensor ops, trained by hand-written SGD."""

    def __init__(self, device, seed=0):
        rng = np.random.default_rng(seed)
        self.params = [
            kg.tensor(rng.standard_normal((6, 16)) * 0.3, dtype=kg.float32, device=device),
            kg.zeros(16, device=device),
            kg.tensor(rng.standard_normal((16, 3)) * 0.3, dtype=kg.float32, device=device),
            kg.zeros(3, device=device),
        ]
        for p in self.params:
            p.requires_grad_()

    def step(self, x, target, lr):
        w1, b1, w2, b2 = self.params
        for p in self.params:
            p.grad = None
        hidden = (x @ w1 + b1).tanh()
        logits = hidden @ w2 + b2
        loss = -(logits.log_softmax(1) * target).sum(1).mean()
        loss.backward()
        with kg.no_grad():
            for p in self.params:
                p.sub_(p.grad * lr)
        return loss


def _batch(device, seed):
    rng = np.random.default_rng(seed)
    x = kg.tensor(rng.standard_normal((8, 6)), dtype=kg.float32, device=device)
    labels = rng.integers(0, 3, 8)
    target = kg.tensor(np.eye(3)[labels], dtype=kg.float32, device=device)
    return x, target


def test_training_step_matches_eager_in_far_fewer_kernels(device):
    eager, fused = MLP(device), MLP(device)
    compiled = kg.compile(fused.step)
    for seed in range(4):
        x, target = _batch(device, seed)
        with count_launches() as eager_counter:
            expected = eager.step(x, target, 0.5)
        with count_launches() as fused_counter:
            loss = compiled(x, target, 0.5)
        assert_close(loss, expected, rtol=1e-5, atol=1e-6)
        for p, q in zip(fused.params, eager.params):
            assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
        assert fused.params[0].grad is not None
    assert len(compiled.plans) == 1
    assert fused_counter.count <= 0.6 * eager_counter.count, (
        fused_counter.count,
        eager_counter.count,
    )


def test_learning_rate_argument_selects_a_version(device):
    model = MLP(device)
    compiled = kg.compile(model.step)
    x, target = _batch(device, 0)
    compiled(x, target, 0.1)  # eager
    compiled(x, target, 0.1)  # traced
    compiled(x, target, 0.2)  # a new value: eager
    assert len(compiled.plans) == 1
    compiled(x, target, 0.2)  # traced
    compiled(x, target, 0.1)  # replayed
    assert len(compiled.plans) == 2


def test_a_new_shape_recompiles_and_both_replay(device):
    compiled = kg.compile(lambda a: (a * 2 + 1).exp().sum(0))
    for shape in [(2, 3), (4, 3), (2, 3), (4, 3)]:
        a = kg.randn(*shape, device=device)
        assert_close(compiled(a), (a * 2 + 1).exp().sum(0), rtol=1e-5, atol=1e-6)
    assert len(compiled.plans) == 2


@pytest.mark.parametrize("fast", [True, False])  # arguments only, or also a keyword
def test_equal_numbers_of_other_types_select_their_own_version(device, fast):
    """2, 2.0 and True are equal and hash alike, but x * 2 of an integer tensor is an
    integer tensor and x * 2.0 a float one: each type is a version of its own (the
    integer version once replayed for 2.0), and so is the sign of a float zero."""
    compiled = kg.compile(lambda x, n, bias=0: x * n + bias)
    x = kg.tensor([1, 2, 3], device=device)
    keywords = {} if fast else {"bias": 0}
    for n, dtype, values in [
        (2, kg.int64, [2, 4, 6]),
        (2.0, kg.float32, [2.0, 4.0, 6.0]),
        (True, kg.int64, [1, 2, 3]),
        (2, kg.int64, [2, 4, 6]),
    ]:
        for _ in range(3):  # eager, traced, replayed
            result = compiled(x, n, **keywords)
            assert result.dtype == dtype, (n, result.dtype)
            np.testing.assert_array_equal(result.cpu().numpy(), values)
    zero = kg.compile(lambda x, z: x * z)
    y = kg.tensor([1.0, 2.0], device=device)
    for z in (0.0, -0.0, 0.0):
        for _ in range(3):
            result = zero(y, z).cpu().numpy()
            assert list(np.signbit(result)) == [z != 0 or str(z) == "-0.0"] * 2, z
    assert len(zero.plans) == 2


def test_the_default_float_dtype_selects_a_version(device, monkeypatch):
    """Integers promote to the default float dtype, read on every eager call: a compiled
    function reads it too (a version per default), never a stale dtype."""
    scale = kg.compile(lambda x: x * 1.5)
    x = kg.tensor([1, 2, 3], device=device)
    for _ in range(3):  # eager, traced, replayed
        assert scale(x).dtype == kg.float32
    monkeypatch.setattr(kg.dtypes, "_default_float", kg.float64)
    for _ in range(3):
        result = scale(x)
        assert result.dtype == kg.float64
        np.testing.assert_array_equal(result.cpu().numpy(), [1.5, 3.0, 4.5])
    monkeypatch.setattr(kg.dtypes, "_default_float", kg.float32)
    assert scale(x).dtype == kg.float32


def test_views_and_aliased_arguments(device):
    def f(a, b):
        return a * 2 + b, (a - b).sum(1)

    compiled = kg.compile(f)
    for seed in range(3):
        base = kg.tensor(
            np.random.default_rng(seed).standard_normal((4, 4)), dtype=kg.float32, device=device
        )
        got = compiled(base.T, base)
        expected = f(base.T, base)
        for g, e in zip(got, expected):
            assert_close(g, e, rtol=1e-6, atol=1e-6)
    assert len(compiled.plans) == 1


def test_a_result_read_through_a_reshape_is_not_fused_into_its_reader(device):
    # the reader's loop has another rank than the producer's: no broadcast relates them
    def f(x):
        return (x * 2).reshape(-1) + 1

    compiled = kg.compile(f)
    x = kg.tensor(np.arange(24.0).reshape(2, 3, 4), dtype=kg.float32, device=device)
    for _ in range(3):
        assert_close(compiled(x), f(x))


def test_in_place_updates_of_arguments_are_replayed(device):
    def accumulate(total, x):
        total.add_(x * x)
        return total.sum()

    compiled = kg.compile(accumulate)
    total = kg.zeros(3, device=device)
    x = kg.tensor([1.0, 2.0, 3.0], device=device)
    version = total._storage.version
    results = [compiled(total, x).item() for _ in range(3)]
    assert results == [14.0, 28.0, 42.0]
    assert_close(total, [3.0, 12.0, 27.0])
    assert total._storage.version == version + 3


def test_random_numbers_are_drawn_again_on_replay(device):
    def noisy(x):
        return x + kg.rand(*x.shape, device=x.device)

    compiled = kg.compile(noisy)
    x = kg.zeros(5, device=device)
    kg.manual_seed(7)
    first = as_numpy(compiled(x)).tolist()
    second = as_numpy(compiled(x)).tolist()
    kg.manual_seed(7)
    assert as_numpy(noisy(x)).tolist() == first
    assert as_numpy(noisy(x)).tolist() == second
    assert first != second


def test_returned_tensors_are_new_on_every_call(device):
    compiled = kg.compile(lambda a: a + 1)
    a = kg.zeros(2, device=device)
    first = compiled(a)
    second = compiled(a)
    third = compiled(a)
    assert second._storage is not third._storage
    assert as_numpy(first).tolist() == as_numpy(second).tolist() == [1.0, 1.0]
    assert not first.requires_grad


def test_constants_and_non_tensor_outputs(device):
    def f(a, scale):
        bias = kg.tensor([1.0, -1.0], device=a.device)
        return {"value": a * scale + bias, "scale": scale}

    compiled = kg.compile(f)
    a = kg.tensor([2.0, 3.0], device=device)
    for _ in range(2):
        out = compiled(a, 3.0)
        assert out["scale"] == 3.0
        assert_close(out["value"], [7.0, 8.0])


# --- errors and debugging -----------------------------------------------------------------------
def test_small_host_reads_become_guards(device):
    def f(a):
        if (a.sum() > 0).item():
            return a * 2
        return -a

    compiled = kg.compile(f)
    positive = kg.tensor([1.0, 2.0], device=device)
    assert_close(compiled(positive), [2.0, 4.0])
    assert_close(compiled(positive * 3), [6.0, 12.0])  # same path: replayed
    with pytest.raises(GuardError, match=r"read a tensor value on the host.*test_compile.py"):
        compiled(-positive)  # the Python code would take the other branch


def test_gather_with_its_bounds_check_compiles(device):
    def pick(x, labels):
        return x.gather(1, labels.unsqueeze(1)).squeeze(1) * 2

    compiled = kg.compile(pick)
    x = kg.tensor(np.arange(12.0).reshape(4, 3), dtype=kg.float32, device=device)
    for labels in ([0, 1, 2, 0], [2, 2, 1, 0]):
        index = kg.tensor(labels, device=device)
        assert_close(compiled(x, index), pick(x, index))
    assert len(compiled.plans) == 1
    with pytest.raises(GuardError, match=r"indexing\.py"):
        compiled(x, kg.tensor([0, 5, 1, 1], device=device))


def test_a_kernels_error_flag_raises_its_own_error_in_a_replay(device):
    """A cross-entropy target out of range, found by the kernel while replaying: the replay
    raises the eager call's error (not a guard's), on CUDA at the next read, and the
    next call with good targets replays normally."""
    loss = kg.compile(lambda x, y: kg.nn.functional.cross_entropy(x, y))
    x = kg.tensor(np.arange(8.0).reshape(4, 2) / 4, dtype=kg.float32, device=device)
    good = kg.tensor([0, 1, 1, 0], device=device)
    expected = kg.nn.functional.cross_entropy(x, good).item()
    for _ in range(3):
        assert loss(x, good).item() == pytest.approx(expected, rel=1e-6)
    with pytest.raises(IndexError, match="target class index 7 is out of range"):
        loss(x, kg.tensor([0, 7, 1, 0], device=device)).item()
    assert loss(x, good).item() == pytest.approx(expected, rel=1e-6)
    assert len(loss.plans) == 1


def test_large_host_reads_are_a_trace_error(device):
    def f(a):
        print(a)  # formats all 100 values
        return a * 2

    compiled = kg.compile(f)
    compiled(kg.ones(100, device=device))  # the first call runs eagerly
    with pytest.raises(TraceError, match=r"reads tensor values on the host"):
        compiled(kg.ones(100, device=device))


def test_outputs_with_a_live_graph_are_refused():
    w = kg.ones(3, requires_grad=True)
    with pytest.raises(TraceError, match="autograd graph"):
        kg.compile(lambda x: x * w)(kg.ones(3))
    with kg.no_grad():
        assert kg.compile(lambda x: x * w)(kg.ones(3)).tolist() == [1.0, 1.0, 1.0]


def test_unhashable_arguments_are_refused():
    with pytest.raises(TypeError, match="not hashable"):
        kg.compile(lambda x, table: x)(kg.ones(1), np.zeros(2))


def test_debug_level_two_prints_one_line_per_kernel(device, capfd):
    compiled = kg.compile(gelu_affine)
    x, w, b = (
        kg.randn(4, 5, device=device),
        kg.randn(5, 6, device=device),
        kg.randn(6, device=device),
    )
    compiled(x, w, b)
    compiled(x, w, b)
    previous = debug_level()
    set_debug_level(2)
    try:
        capfd.readouterr()
        compiled(x, w, b)
    finally:
        set_debug_level(previous)
    lines = [line for line in capfd.readouterr().err.splitlines() if "compiled" in line]
    assert len(lines) == 2
    assert all(" us" in line for line in lines)


def test_unfused_mode_replays_every_primitive(device):
    compiled = kg.compile(gelu_affine, fuse=False)
    x, w, b = (
        kg.randn(4, 5, device=device),
        kg.randn(5, 6, device=device),
        kg.randn(6, device=device),
    )
    compiled(x, w, b)
    with count_launches() as counter:
        compiled(x, w, b)
    assert counter.count == 3


@kg.kernel
def leaky_kernel(out, x, slope):
    i = kg.index()
    v = x[i]
    out[i] = v if v > 0 else slope * v


def test_user_kernels_inside_a_compiled_function(device):
    def f(x):
        y = x * 2 + 1
        out = kg.empty_like(y)
        leaky_kernel(out, y, 0.1, ndrange=y.numel())
        return out.exp().sum(), out

    compiled = kg.compile(f)
    for seed in range(3):
        x = kg.tensor(
            np.random.default_rng(seed).standard_normal((2, 3)), dtype=kg.float32, device=device
        )
        got = compiled(x)
        expected = f(x)
        for g, e in zip(got, expected):
            assert_close(g, e, rtol=1e-5, atol=1e-6)
    with count_launches() as counter:
        compiled(x)
    assert "kernel leaky_kernel" in counter.names
    # fused x * 2 + 1, the kernel, exp + sum as one fused reduction
    assert counter.count <= 3


def test_count_launches_counts_a_device_first_used_inside_the_block():
    """In a fresh process the CPU backend is created by the first op inside the block;
    its launches are counted (they were not: only backends that existed were watched)."""
    import subprocess
    import sys

    code = (
        "import kernelgrad as kg\n"
        "with kg.compile.count_launches() as counter:\n"
        "    _ = kg.ones(3) * 2\n"
        "print(counter.count)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.split()[-1] == "2"
