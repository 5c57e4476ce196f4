"""The autograd engine: accumulation, broadcasting, graph freeing, deep chains, version
checks, grad mode, higher-order gradients, and the error messages."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import kernelgrad as kg
from tests.helpers import assert_close


def test_gradients_accumulate_across_backward_calls(device):
    x = kg.tensor([1.0, 2.0], requires_grad=True, device=device)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    assert_close(x.grad, [3 + 2, 3 + 4])


def test_later_gradients_are_added_into_grad_in_place(device):
    """As PyTorch's AccumulateGrad: a tensor taken from ``.grad`` after one backward
    sees the sum after the next (``.grad`` stays that tensor); under create_graph the
    sum is a new tensor that carries its history."""
    x = kg.ones(2, device=device, requires_grad=True)
    (x * 2).sum().backward()
    first = x.grad
    (x * 3).sum().backward()
    assert x.grad is first
    assert first.cpu().tolist() == [5.0, 5.0]
    y = kg.ones(2, device=device, requires_grad=True)
    (y * y).sum().backward(create_graph=True)
    before = y.grad
    (y * y).sum().backward(create_graph=True)
    assert y.grad is not before and before.cpu().tolist() == [2.0, 2.0]
    assert y.grad.cpu().tolist() == [4.0, 4.0] and y.grad.requires_grad


def test_a_tensor_used_twice_gets_both_contributions(device):
    x = kg.tensor([2.0], requires_grad=True, device=device)
    y = x * x + x
    y.backward()
    assert_close(x.grad, [5.0])


def test_broadcast_gradients_are_reduced_to_input_shape(device):
    x = kg.ones(3, 1, requires_grad=True, device=device)
    b = kg.ones(4, requires_grad=True, device=device)
    (x + b).sum().backward()
    assert x.grad.shape == (3, 1)
    assert_close(x.grad, [[4.0]] * 3)
    assert_close(b.grad, [3.0] * 4)


def test_non_scalar_backward_needs_a_gradient(device):
    x = kg.ones(2, 2, requires_grad=True, device=device)
    y = x * 2
    with pytest.raises(kg.BackwardError, match=r"needs a `gradient` argument"):
        y.backward()
    y.backward(kg.full((2, 2), 0.5, device=device))
    assert_close(x.grad, np.ones((2, 2)))
    with pytest.raises(kg.BackwardError, match="shape"):
        (x * 2).backward(kg.ones(3, device=device))


def test_backward_on_a_tensor_without_grad_explains(device):
    with pytest.raises(kg.BackwardError, match="requires_grad=True"):
        kg.ones(2, device=device).sum().backward()


def test_graph_is_freed_after_backward(device):
    x = kg.ones(2, requires_grad=True, device=device)
    y = (x.exp() * 2).sum()
    y.backward()
    with pytest.raises(kg.BackwardError, match="retain_graph=True"):
        y.backward()
    z = (x.exp() * 2).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert_close(x.grad, np.full(2, 2 * np.e * 3), rtol=1e-6)


def test_a_node_that_saves_no_tensor_runs_again_after_its_graph_was_freed(device):
    """PyTorch frees saved tensors, not nodes: a cast, a device move, a reshape, an
    expand or a permute saves none, so an input made once from a leaf
    (`torch.tensor(a, requires_grad=True).float().to(device)`, a PINN's collocation
    points) is backpropagated through again at every step."""
    leaf = kg.tensor([1.0, 2.0], dtype=kg.float64, requires_grad=True)
    x = leaf.float().to(device).reshape(2, 1).expand(2, 3).permute(1, 0)
    for _ in range(2):
        (x * x).sum().backward()  # each step: 3 copies of x ** 2
    assert_close(leaf.grad, np.array([12.0, 24.0]), rtol=1e-6)
    assert leaf.grad.dtype == kg.float64
    # slices, cat, add/sub/neg and sum save none either
    a = kg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True, device=device)
    y = kg.cat([a[:, 0:1] + a[:, 1:2], -(a[:, 1] - 1).reshape(2, 1)], 1).sum(1)
    for _ in range(2):
        (y * y).sum().backward()
    # y = a0 + a1 - a1 + 1 = a0 + 1 per row: d/da0 = 2 (a0 + 1), twice
    assert_close(a.grad, np.array([[8.0, 0.0], [16.0, 0.0]]), rtol=1e-6)


_RERUN = {
    "slice": lambda a: a[:, 0:1],
    "select": lambda a: a[:, 0],
    "split": lambda a: a.split(1, dim=1)[1],
    "cat": lambda lib, a: lib.cat([a, a], 1),
    "stack": lambda lib, a: lib.stack([a, a]),
    "add": lambda a: a + a,
    "sub_scalar": lambda a: a - 1,
    "neg": lambda a: -a,
    "sum": lambda a: a.sum(1),
    "squeeze": lambda a: a[:, :1].squeeze(1),
    "exp": lambda a: a.exp(),  # saves its output: the second backward raises in both
    "mul_scalar": lambda a: a * 2,  # PyTorch saves the scalar as a tensor: raises too
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(_RERUN))
def test_running_a_freed_graph_again_matches_pytorch(name):
    """Which ops can be backpropagated through a second time without retain_graph is
    PyTorch's: those that saved no tensor."""
    import torch

    results = []
    for lib in (torch, kg):
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        op = _RERUN[name]
        b = op(lib, a) if op.__code__.co_argcount == 2 else op(a)
        try:
            for _ in range(2):
                (b * b).sum().backward()
        except RuntimeError as error:
            results.append(type(error).__name__ if lib is kg else "raised")
        else:
            results.append(np.asarray(a.grad.tolist()))
    expected, got = results
    if isinstance(expected, str):
        assert got == "BackwardError"
    else:
        np.testing.assert_allclose(got, expected)


def test_a_chain_of_ten_thousand_ops_does_not_recurse(device, simulated):
    if simulated:
        pytest.skip("10,000 simulated launches take minutes; the engine is device-independent")
    x = kg.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    assert_close(x.grad, [1.0001**10_000], rtol=1e-3)


def test_inplace_change_of_a_saved_tensor_is_caught(device):
    x = kg.ones(3, requires_grad=True, device=device)
    y = x * 2
    z = y * y  # saves y
    y += 1
    with pytest.raises(kg.InplaceError, match="modified in place"):
        z.sum().backward()


def test_a_product_saves_only_what_its_gradients_read(device):
    """``y * 3`` reads nothing of ``y`` for its gradient: writing into ``y`` afterwards
    is allowed, as in PyTorch (``y[1] = y[1] * 3``); ``a * v`` with ``v`` requiring grad
    reads ``a`` for ``v``'s gradient, so writing into ``a`` is still caught."""
    w = kg.ones(3, 4, requires_grad=True, device=device)
    y = w * 2
    y[:, 0] = 5.0
    y[1] = y[1] * 3
    y.sum().backward()
    expected = np.full((3, 4), 2.0)
    expected[:, 0] = 0.0
    expected[1] *= 3
    assert_close(w.grad, expected)
    v = kg.ones(3, requires_grad=True, device=device)
    a = kg.ones(3, requires_grad=True, device=device) * 1
    b = a * v
    a.add_(1)
    with pytest.raises(kg.InplaceError, match="modified in place"):
        b.sum().backward()
    c = kg.ones(3, requires_grad=True, device=device) * 2
    d = c * c  # reads c for either factor
    c.add_(1)
    with pytest.raises(kg.InplaceError, match="modified in place"):
        d.sum().backward()


def test_inplace_on_unsaved_intermediate_is_recorded(device):
    x = kg.tensor([1.0, 2.0], requires_grad=True, device=device)
    y = x * 2
    y += 1  # add saves nothing: allowed, history rebased
    y.mul_(3)  # mul needs the old value: a snapshot is taken
    y.sum().backward()
    assert_close(x.grad, [6.0, 6.0])
    assert_close(y.detach(), [9.0, 15.0])


def test_inplace_on_a_leaf_requiring_grad_is_refused(device):
    w = kg.ones(2, requires_grad=True, device=device)
    with pytest.raises(kg.InplaceError, match="no_grad"):
        w.add_(1)
    with kg.no_grad():
        w.sub_(0.5)
    assert_close(w.detach(), [0.5, 0.5])
    assert w.requires_grad and w.is_leaf


def test_no_grad_and_enable_grad(device):
    x = kg.ones(2, requires_grad=True, device=device)
    with kg.no_grad():
        y = x * 2
        with kg.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad
    assert kg.is_grad_enabled()

    @kg.no_grad()
    def infer(t):
        return t * 3

    assert not infer(x).requires_grad
    with kg.set_grad_enabled(False):
        assert not (x + 1).requires_grad


def test_detach_shares_memory_and_cuts_the_graph(device):
    x = kg.ones(2, requires_grad=True, device=device)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d._storage is y._storage
    (y + d).sum().backward()
    assert_close(x.grad, [2.0, 2.0])


def test_retain_grad_for_intermediates(device):
    x = kg.tensor([1.0, 2.0], requires_grad=True, device=device)
    y = x * 3
    y.retain_grad()
    (y * y).sum().backward()
    assert_close(y.grad, [6.0, 12.0])
    assert_close(x.grad, [18.0, 36.0])


def test_requires_grad_only_for_floats(device):
    with pytest.raises(TypeError, match="floating point"):
        kg.tensor([1, 2], requires_grad=True, device=device)
    t = kg.tensor([1.0], device=device).requires_grad_()
    assert t.requires_grad


def test_second_derivative(device):
    x = kg.tensor([1.5, -0.5], dtype=kg.float64, requires_grad=True, device=device)
    y = (x**3).sum()
    y.backward(create_graph=True)
    first = x.grad
    assert_close(first, 3 * np.array([1.5, -0.5]) ** 2)
    x.grad = None
    first.sum().backward()
    assert_close(x.grad, 6 * np.array([1.5, -0.5]))


def test_leaf_gradient_is_its_own_memory(device):
    a = kg.ones(3, requires_grad=True, device=device)
    b = kg.ones(3, requires_grad=True, device=device)
    (a + b).sum().backward()
    assert a.grad._storage is not b.grad._storage
    a.grad.zero_()
    assert_close(b.grad, [1.0, 1.0, 1.0])
    c = kg.ones(1, requires_grad=True, device=device)
    c.expand(4).sum().backward()
    assert c.grad.is_contiguous() and c.grad.shape == (1,)


def test_the_graph_does_not_keep_intermediates_alive(device):
    x = kg.ones(8, requires_grad=True, device=device)
    hidden = x * 2
    watcher = weakref.ref(hidden)
    out = hidden.sum()  # sum's backward needs only shapes
    del hidden
    gc.collect()
    assert watcher() is None
    out.backward()
    assert_close(x.grad, np.full(8, 2.0))


def test_saved_outputs_do_not_form_reference_cycles(device):
    x = kg.ones(4, requires_grad=True, device=device)
    y = x.exp()  # exp saves its output for backward
    watcher = weakref.ref(y)
    gc.disable()
    try:
        del y
        assert watcher() is None  # freed by reference counting alone
    finally:
        gc.enable()


@pytest.mark.parametrize("layout", ["permuted", "strided", "offset"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x * x.exp()).sum(1),
        lambda x: x.softmax(0)[:, 1:],
        lambda x: (x @ x.T).tanh(),
        lambda x: x.reshape(-1)[kg.tensor([0, 5, 5, 2], device=x.device)],
        lambda x: kg.where(x > 0, x.sigmoid(), x * x).amax(1),
    ],
)
def test_gradients_through_non_contiguous_inputs(fn, layout, device):
    from tests.helpers import check_grad

    values = np.random.default_rng(11).standard_normal((3, 4))
    check_grad(fn, values, device=device, layout=layout)
