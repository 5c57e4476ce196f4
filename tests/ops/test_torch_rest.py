"""More of PyTorch's top level and Tensor methods (kernelgrad/ops/torch_rest.py,
``kg.set_printoptions``): against PyTorch on the CPU, by hand on every backend."""

from __future__ import annotations

import array

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import as_numpy


@pytest.mark.torch
def test_values_and_gradients_match_pytorch():
    import torch

    rng = np.random.default_rng(0)
    y = rng.standard_normal((3, 5))
    xs = np.sort(rng.standard_normal(5))
    cases = {
        "gradient": lambda m, t: m.gradient(t(y), spacing=2.0, dim=1),
        "gradient coords 2": lambda m, t: m.gradient(t(y), spacing=(t(xs),), dim=1, edge_order=2),
        "gradient all dims": lambda m, t: m.gradient(t(y)),
        "cumulative_trapezoid": lambda m, t: m.cumulative_trapezoid(t(y), t(xs)),
        "cumulative_trapezoid dx": lambda m, t: m.cumulative_trapezoid(t(y), dx=0.5, dim=0),
        "combinations": lambda m, t: m.combinations(t(y[0]), 3),
        "combinations rep": lambda m, t: m.combinations(t(y[0, :3]), 2, with_replacement=True),
        "rsub": lambda m, t: m.rsub(t(y), 2.0, alpha=3),
        "row_stack": lambda m, t: m.row_stack([t(y[0]), t(y[1])]),
        "constant_pad_nd": lambda m, t: m.constant_pad_nd(t(y), [1, 2], 0.5),
        "split_with_sizes": lambda m, t: t(y).split_with_sizes([2, 3], dim=1),
        "adjoint": lambda m, t: t(y).adjoint(),
        "H": lambda m, t: t(y).H,
        "narrow_copy": lambda m, t: t(y).narrow_copy(1, 1, 3),
    }
    for name, case in cases.items():
        results = {}
        for lib in (torch, kg):
            x_in = []

            def make(a, lib=lib, x_in=x_in):
                tensor = lib.tensor(np.asarray(a), dtype=lib.float64, requires_grad=True)
                x_in.append(tensor)
                return tensor

            out = case(lib, make)
            outs = out if isinstance(out, tuple) else (out,)
            total = sum((o * (i + 1)).sum() for i, o in enumerate(outs))
            total.backward()
            values = [o.detach().numpy() if lib is torch else as_numpy(o.detach()) for o in outs]
            grads = [
                (t.grad.numpy() if lib is torch else as_numpy(t.grad)) if t.grad is not None else 0
                for t in x_in
            ]
            results[lib] = (values, grads)
        for got, expected in zip(results[kg][0], results[torch][0]):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=name)
        for got, expected in zip(results[kg][1], results[torch][1]):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.torch
def test_questions_and_printing_match_pytorch():
    import torch

    for lib in (torch, kg):
        lib.set_printoptions(precision=2)
    try:
        for values in ([1.23456, 2.0], [[1e-3, 5.5], [3.0, 4.25]]):
            assert repr(kg.tensor(values)) == repr(torch.tensor(values))
        kg.set_printoptions(sci_mode=True)
        torch.set_printoptions(sci_mode=True)
        assert repr(kg.tensor([1.5, 200.0])) == repr(torch.tensor([1.5, 200.0]))
    finally:
        for lib in (torch, kg):
            lib.set_printoptions(profile="default")
            lib.set_printoptions(sci_mode=None)
    assert repr(kg.tensor([1.23456])) == repr(torch.tensor([1.23456]))
    x = np.arange(6.0).reshape(2, 3)
    for name in ("is_signed", "is_complex", "is_nonzero"):
        value = x[:1, :1]
        assert getattr(kg, name)(kg.tensor(value)) == getattr(torch, name)(torch.tensor(value))
    assert (
        kg.unravel_index(kg.tensor([4, 7, -1]), (3, 4))[1].tolist()
        == [t.tolist() for t in torch.unravel_index(torch.tensor([4, 7, -1]), (3, 4))][1]
    )
    assert kg.tensor(x).T.dim_order() == torch.tensor(x).T.dim_order()
    assert kg.typename(kg.tensor(x)) == "kernelgrad.DoubleTensor"
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        kg.is_nonzero(kg.tensor(x))


def test_random_fills_follow_their_distributions(device):
    kg.manual_seed(0)
    n = 4000  # tolerances below are about 5 standard errors
    x = kg.empty(n, dtype=kg.float64, device=device)
    checks = {
        "exponential_": (lambda: x.exponential_(2.0), lambda v: v.mean(), 0.5, 0.04),
        "geometric_": (lambda: x.geometric_(0.25), lambda v: v.mean(), 4.0, 0.3),
        "cauchy_": (lambda: x.cauchy_(1.0, 0.5), lambda v: np.median(v), 1.0, 0.04),
        "log_normal_": (lambda: x.log_normal_(0.5, 0.25), lambda v: np.log(v).mean(), 0.5, 0.02),
    }
    for name, (fill, statistic, expected, tolerance) in checks.items():
        fill()
        assert abs(statistic(as_numpy(x)) - expected) < tolerance, name
    ints = kg.empty(n, dtype=kg.int64, device=device).random_(3, 7)
    assert set(np.unique(as_numpy(ints)).tolist()) == {3, 4, 5, 6}
    assert set(np.unique(as_numpy(x.random_(2))).tolist()) == {0.0, 1.0}
    p = kg.ones(2, requires_grad=True, device=device)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        p.exponential_()


def test_deterministic_algorithms_refuse_cuda_atomics(device):
    target = kg.zeros(4, device=device)
    index = kg.tensor([0, 1, 1, 3], device=device)
    source = kg.ones(4, device=device)
    try:
        kg.use_deterministic_algorithms(True)
        assert kg.are_deterministic_algorithms_enabled()
        if device == "cuda":
            with pytest.raises(RuntimeError, match="does not have a deterministic implementation"):
                target.index_add(0, index, source)
            kg.use_deterministic_algorithms(True, warn_only=True)
            with pytest.warns(UserWarning, match="deterministic"):
                result = target.index_add(0, index, source)
        else:  # the CPU's scatter-add is deterministic
            result = target.index_add(0, index, source)
        assert as_numpy(result).tolist() == [1.0, 2.0, 0.0, 1.0]
    finally:
        kg.use_deterministic_algorithms(False)


def test_settings_and_memory():
    assert kg.get_float32_matmul_precision() == "highest"
    kg.set_float32_matmul_precision("high")
    assert kg.get_float32_matmul_precision() == "high"
    kg.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError, match="highest"):
        kg.set_float32_matmul_precision("fast")
    assert kg.set_flush_denormal(True) is False
    try:
        kg.set_default_tensor_type(kg.DoubleTensor)
        assert kg.ones(1).dtype == kg.float64
    finally:
        kg.set_default_tensor_type("torch.FloatTensor")
    assert kg.ones(1).dtype == kg.float32
    data = array.array("f", [1.0, 2.0, 3.0])
    t = kg.frombuffer(data, dtype=kg.float32)
    t.mul_(2)
    assert list(data) == [2.0, 4.0, 6.0]  # shares the buffer's memory
    assert isinstance(t.dtype, kg.dtype) and t.layout is kg.strided
    t.apply_(lambda v: v + 1)
    t.map_(kg.tensor([1.0, 0.0, 2.0]), lambda a, b: a * b)
    assert t.tolist() == [3.0, 0.0, 14.0]
    assert t.is_set_to(t) and not t.is_set_to(t.clone())


@pytest.mark.torch
def test_assigning_data_and_seeding_init_with_a_generator():
    import torch

    results = []
    for lib in (torch, kg):
        p = lib.nn.Parameter(lib.ones(3))
        optimizer = lib.optim.SGD([p], lr=0.1)
        p.data = lib.tensor([1.0, 2.0, 3.0]) * 2  # the idiom: replace a parameter's values
        (p * p).sum().backward()
        optimizer.step()
        shared, source = lib.zeros(2), lib.ones(2)
        shared.data = source
        source.add_(1)  # the memory is shared
        results.append((p.tolist(), p.requires_grad, shared.tolist()))
    assert results[0] == results[1]
    with pytest.raises(TypeError, match="must be a Tensor"):
        kg.ones(2).data = [1.0, 2.0]
    draws = []
    for _ in range(2):
        weight = kg.empty(4, 5)
        kg.nn.init.kaiming_uniform_(weight, a=5**0.5, generator=kg.Generator().manual_seed(7))
        draws.append(weight.tolist())
    assert draws[0] == draws[1]


# --- random fills under no_grad keep the gradient flag and history -----------------------------
_FILLS = {
    "uniform_": lambda lib, t: t.uniform_(),
    "normal_": lambda lib, t: t.normal_(),
    "random_": lambda lib, t: t.random_(0, 5),
    "exponential_": lambda lib, t: t.exponential_(),
    "bernoulli_": lambda lib, t: t.bernoulli_(0.5),
    "fill_": lambda lib, t: t.fill_(1.0),
    "zero_": lambda lib, t: t.zero_(),
    "init.uniform_": lambda lib, t: lib.nn.init.uniform_(t),
    "init.normal_": lambda lib, t: lib.nn.init.normal_(t),
    "init.constant_": lambda lib, t: lib.nn.init.constant_(t, 2.0),
    "init.kaiming_uniform_": lambda lib, t: lib.nn.init.kaiming_uniform_(t),
}
_OWNERS = {
    "leaf": lambda lib: lib.ones(2, 3, requires_grad=True),
    "non-leaf": lambda lib: lib.ones(2, 3, requires_grad=True) * 2,
    "view of a leaf": lambda lib: lib.ones(3, 2, 3, requires_grad=True)[0],
}


def _flags_after_no_grad_fill(lib, owner, fill):
    t = _OWNERS[owner](lib)
    with lib.no_grad():
        _FILLS[fill](lib, t)
    return t.requires_grad, t.is_leaf, t.grad_fn is not None


@pytest.mark.parametrize("owner", list(_OWNERS))
@pytest.mark.parametrize("fill", list(_FILLS))
def test_fills_under_no_grad_keep_requires_grad(owner, fill):
    flags = _flags_after_no_grad_fill(kg, owner, fill)
    assert flags[0]  # requires_grad is kept, for leaves and non-leaves
    assert flags == ((True, True, False) if owner == "leaf" else (True, False, True))


@pytest.mark.torch
@pytest.mark.parametrize("owner", list(_OWNERS))
@pytest.mark.parametrize("fill", list(_FILLS))
def test_fills_under_no_grad_match_pytorch(owner, fill):
    import torch

    assert _flags_after_no_grad_fill(kg, owner, fill) == _flags_after_no_grad_fill(
        torch, owner, fill
    )


def test_gradient_flows_through_the_kept_history_of_a_no_grad_fill():
    x = kg.ones(3, requires_grad=True)
    y = x * 2
    with kg.no_grad():
        y.uniform_()
    (y * 3).sum().backward()  # as PyTorch: the history of y before the fill
    assert x.grad.tolist() == [6.0, 6.0, 6.0]
