"""In-place operations on views of tensors in an autograd graph (PyTorch's CopySlices:
``ops/inplace.py``): ``y[:, 0] += 1``, ``y[0].mul_(3)``, ``F.relu(y[:, :2],
inplace=True)``, ``y.diagonal().add_(1)``, ``buf[0] += w``, ...

Each program runs on kernelgrad and on PyTorch, written once against the names both
share; values and the gradients of every leaf are compared. Refusals (views of leaves,
tensors saved for backward that the write changed, bases that do not fill dense memory)
are checked for their error type and message. A few programs also run on the CUDA
backend (the simulator in CI).
"""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg

X = np.array(
    [[0.3, -0.7, 1.1, 0.45], [-0.2, 0.9, -1.3, 0.6], [0.8, 0.15, -0.55, -0.95]],
    dtype=np.float32,
)
W = np.array([0.5, -1.5, 2.0, 0.25], dtype=np.float32)


def _add_first_column(m, dev, x, w):
    y = x * 2
    y[:, 0] += 1  # Python: t = y[:, 0]; t += 1; y[:, 0] = t
    return (y * y).sum()


def _scale_a_row(m, dev, x, w):
    y = x * 1.5
    y[0].mul_(3)
    return (y * y).sum()


def _relu_on_a_slice(m, dev, x, w):
    y = x - 0.1
    m.nn.functional.relu(y[:, :2], inplace=True)
    return (y * y * w).sum()


def _diagonal(m, dev, x, w):
    y = x * 2
    y.diagonal().add_(w[:3])
    y.diagonal(1).mul_(3)
    return (y * y).sum()


def _transposed_row_times_w(m, dev, x, w):
    y = x + 0
    y.t()[1].mul_(w[:3])  # column 1 of y, through a view of a view with strides
    return (y.exp() * x).sum()


def _step_slice(m, dev, x, w):
    y = x * 1
    y[:, ::2] *= 2
    y[::2, 1::2] -= w[:2] * 3
    return (y * y).sum()


def _chain_of_views(m, dev, x, w):
    y = x * 3
    v = y[1:]
    v[0].mul_(-2)
    v[:, 1:3].exp_()  # last: PyTorch's exp_ saves what it wrote
    return (y * w).sum() + (v * v).sum()


def _buffer_gets_gradient(m, dev, x, w):
    buf = m.zeros(3, 4, device=dev)
    buf[0] += w  # buf required no grad: it does now
    buf[2].copy_(w * w)
    buf[1, 1:3] = w[:2]
    return (buf * x).sum()


def _masks(m, dev, x, w):
    y = x * 2
    y[y > 0.5] += 1
    row = y[1]
    row[row < 0] *= w[0]
    return (y * y).sum()


def _earlier_views_follow_the_base(m, dev, x, w):
    y = x * 2
    a = y[0]
    column = y[:, 1]
    y[0].mul_(w)  # a and column (made before) now read the new values
    b = y[2]
    y.mul_(3)  # the base itself: a, column and b change again
    return (a * a).sum() + (column * w[:3]).sum() + (b * b).sum() + (y * x).sum()


def _fills_and_overwrites(m, dev, x, w):
    y = x * 2
    y[:, 1].zero_()
    y[0].fill_(5.0)
    y[2].copy_(w)
    y[1].masked_fill_(y[1] > 0, 0.25)
    y[1:, 3].sin_()
    return (y * y * x).sum()


def _setitem_on_a_view(m, dev, x, w):
    y = x * 2
    v = y[1]
    v[2] = 7.0
    v[0:2] = w[:2]
    return (y * y).sum()


def _activations_in_place(m, dev, x, w):
    F = m.nn.functional  # each on its own tensor: PyTorch's save the result they write
    y = x * 2
    F.leaky_relu(y[0], 0.2, inplace=True)
    z = y * 1
    F.elu(z[1:, :2], inplace=True)
    u = z * 1
    F.hardtanh(u[:, 3], -0.5, 0.5, inplace=True)
    v = u * 1
    v[2].sigmoid_()
    return (v * v).sum()


PROGRAMS = {
    f.__name__.strip("_"): f
    for f in (
        _add_first_column,
        _scale_a_row,
        _relu_on_a_slice,
        _diagonal,
        _transposed_row_times_w,
        _step_slice,
        _chain_of_views,
        _buffer_gets_gradient,
        _masks,
        _earlier_views_follow_the_base,
        _fills_and_overwrites,
        _setitem_on_a_view,
        _activations_in_place,
    )
}
ON_DEVICE = ("add_first_column", "buffer_gets_gradient", "earlier_views_follow_the_base")


def _run(m, program, dev):
    x = m.tensor(X, device=dev, requires_grad=True)
    w = m.tensor(W, device=dev, requires_grad=True)
    loss = program(m, dev, x, w)
    loss.backward()
    return loss.item(), x.grad, w.grad


def _compare(name, dev):
    import torch

    value, *grads = _run(kg, PROGRAMS[name], dev)
    expected, *expected_grads = _run(torch, PROGRAMS[name], "cpu")
    assert np.isclose(value, expected, rtol=1e-5, atol=1e-5), (value, expected)
    for mine, theirs, shape in zip(grads, expected_grads, (X.shape, W.shape)):
        mine = np.zeros(shape) if mine is None else mine.detach().cpu().numpy()
        theirs = np.zeros(shape) if theirs is None else theirs.detach().numpy()
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_pytorch(name):
    _compare(name, "cpu")


@pytest.mark.torch
@pytest.mark.parametrize("name", ON_DEVICE)
def test_program_matches_pytorch_on_the_device(name, device):
    _compare(name, device)


@pytest.mark.torch
def test_views_made_before_their_base_required_grad_follow_it():
    """Views of ``buf`` taken before ``buf[0] += w`` made it require grad: written in place
    with values that require grad, they act as views taken afterwards (PyTorch refuses
    the first program, calling the old views leaves, and runs the second)."""
    import torch

    def run(m, early):
        x = m.tensor(X, requires_grad=True)
        w = m.tensor(W, requires_grad=True)
        buf = m.zeros(3, 4)
        if early:
            first, second = buf[0], buf[1]
        buf[0] += w
        if not early:
            first, second = buf[0], buf[1]
        first.mul_(w)  # first reads w now
        second.add_(x[2] * w)
        ((buf * x).sum() + (buf * buf).sum()).backward()
        return buf.detach().numpy(), x.grad.numpy(), w.grad.numpy()

    for mine, theirs in zip(run(kg, True), run(torch, False)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5)


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_second_derivatives_through_a_view_write():
    import torch

    def run(m):
        x = m.tensor(X, requires_grad=True)
        y = x * x
        y[:, 0] *= x[:, 1]
        y[1].mul_(y[2].detach() + x[0])
        loss = (y * y).sum()
        loss.backward(create_graph=True)
        first = x.grad
        x.grad = None
        (first * first).sum().backward()
        return first.detach(), x.grad

    for mine, theirs in zip(run(kg), run(torch)):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.torch
def test_a_dense_base_of_any_layout():
    """A base laid out as a permutation of contiguous strides (shared from a transposed
    NumPy array) takes in-place writes through views like a contiguous one."""
    import torch

    def run(m, share):
        base = share(np.arange(12, dtype=np.float32).reshape(4, 3).copy().T)  # strides (1, 3)
        w = m.tensor(W, requires_grad=True)
        base[1] += w
        base[:, 2].mul_(w[:3])
        (base * base).sum().backward()
        return base.detach().numpy().copy(), w.grad.numpy()

    mine = run(kg, kg.from_numpy)
    theirs = run(torch, torch.from_numpy)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_views_of_leaves_are_refused_as_pytorch_does():
    x = kg.tensor(X, requires_grad=True)
    with pytest.raises(kg.InplaceError, match="view of a leaf tensor that requires grad"):
        x[0] += 1
    with pytest.raises(RuntimeError, match="no_grad"):
        x.t()[1].mul_(2)
    with pytest.raises(kg.InplaceError, match="view of a leaf"):
        kg.nn.functional.relu(x[:, :2], inplace=True)
    with pytest.raises(kg.InplaceError, match="view of a leaf"):
        x.diagonal().zero_()
    with pytest.raises(kg.InplaceError, match="view of a leaf"):
        x[1][x[1] > 0] = 0.0
    np.testing.assert_array_equal(x.detach().numpy(), X)  # nothing was written
    with kg.no_grad():
        x[0] += 1  # an update, as optimizers make
    assert x.is_leaf and x.grad_fn is None
    np.testing.assert_allclose(x.detach().numpy()[0], X[0] + 1)


def test_a_saved_tensor_overwritten_through_a_view_is_caught():
    x = kg.tensor(X, requires_grad=True)
    y = x.exp()  # exp saves its output
    y[0] += 1
    with pytest.raises(kg.InplaceError, match="'exp' saved"):
        y.sum().backward()
    y = x * 2
    z = y * y  # mul saves its inputs
    y[:, 1].relu_()
    with pytest.raises(kg.InplaceError, match="modified in place"):
        z.sum().backward()
    y = x * 2
    z = y[0] * 3  # reads a copy of what it needs: not affected
    y[0].mul_(5)
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[0], [6.0] * 4)


def test_a_view_made_under_no_grad_is_refused_as_pytorch_does():
    x = kg.tensor(X, requires_grad=True)
    y = x * 2
    with kg.no_grad():
        row = y[0]
    w = kg.tensor(W, requires_grad=True)
    with pytest.raises(kg.InplaceError, match="made under `kg\\.no_grad"):
        row += w
    np.testing.assert_allclose(y.detach().numpy(), X * 2)


def test_bases_that_do_not_fill_dense_memory_are_refused():
    base = kg.from_numpy(np.zeros((3, 8), dtype=np.float32)[:, ::2])  # strides (8, 2)
    w = kg.tensor(W, requires_grad=True)
    with pytest.raises(kg.InplaceError, match=r"dense block of memory.*contiguous"):
        base[0] += w
    np.testing.assert_array_equal(base.numpy(), 0)
    with kg.no_grad():
        base[0] += w  # outside autograd: a plain write
    np.testing.assert_allclose(base.numpy()[0], W)
    base += w  # the base itself: rebased as any tensor
    row = base[1]
    base.mul_(2)  # row's history is out of date and cannot be rebuilt from this base
    with pytest.raises(kg.InplaceError, match="Take the view again after the in-place"):
        row.sum()
    assert base[1].sum().requires_grad  # a view taken afterwards works


def test_views_of_detached_views_are_refused_not_silently_cut():
    x = kg.tensor(X, requires_grad=True)
    y = x * 2
    detached = y[0].detach()
    w = kg.tensor(W, requires_grad=True)
    with pytest.raises(kg.InplaceError, match="view of a detached tensor"):
        detached[1:] += w[1:]
    detached += w  # the detached tensor itself is a tensor of its own, as in PyTorch
    assert detached.requires_grad and y.grad_fn.name() == "MulBackward0"


def test_the_view_and_the_base_histories():
    x = kg.tensor(X, requires_grad=True)
    y = x * 2
    row = y[0]
    row.add_(1)
    assert y.grad_fn.name() == "CopySlicesBackward0"
    assert row.grad_fn.name() == "AsStridedBackward0"
    assert row.grad_fn.next_functions[0][0] is y.grad_fn
    other = y[1]
    y[2].mul_(2)
    assert other.grad_fn.next_functions[0][0] is y.grad_fn  # regenerated when read
    y[:, 0] += 1  # the write back of `+=` records nothing more than the in-place add
    assert y.grad_fn.name() == "CopySlicesBackward0"
    assert y.grad_fn.next_functions[1][0].name() == "AddBackward0"


def test_without_autograd_views_write_as_before(device):
    y = kg.tensor(X, device=device) * 2
    y[:, 0] += 1
    y.diagonal().mul_(10)
    expected = X * 2
    expected[:, 0] += 1
    expected[[0, 1, 2], [0, 1, 2]] *= 10
    np.testing.assert_allclose(y.cpu().numpy(), expected, rtol=1e-6)
    assert not y.requires_grad


def _retained_after_writes(lib, dev, case):
    """``retain_grad`` / ``register_hook`` before an in-place write to the tensor, to the
    base of the view it is, or to another view of that base."""
    x = lib.tensor([1.0, 2.0, 3.0, 4.0], device=dev, requires_grad=True)
    y = x * 1
    kept = y if case.startswith("tensor") else y[:2]
    seen = []
    kept.retain_grad()
    if case.endswith("hook"):
        kept.register_hook(lambda grad: seen.append(grad.cpu().numpy().copy()))
    if case.startswith("tensor"):
        y.mul_(2)
        loss = (y * lib.tensor([1.0, 10.0, 100.0, 1000.0], device=dev)).sum()
    else:
        {"base": lambda: y.mul_(2), "other": lambda: y[2:].add_(1), "view": lambda: kept.mul_(5)}[
            case.split()[1]
        ]()
        loss = (kept * lib.tensor([1.0, 10.0], device=dev)).sum() + y.sum() * 100
    retains = kept.retains_grad
    loss.backward()
    grads = [kept.grad.cpu().numpy(), x.grad.cpu().numpy()]
    return retains, grads, seen


RETAIN_CASES = ["tensor", "tensor hook", "view base", "view base hook", "view other", "view view"]


def test_retain_grad_follows_the_tensor_through_in_place_writes(device):
    """PyTorch moves a tensor's retains_grad to its new grad_fn after an in-place write
    (to it, to its base, or through another view): ``.grad`` is the gradient of its value
    when backward runs. A ``register_hook`` hook stays with the old history."""
    ours = {case: _retained_after_writes(kg, device, case) for case in RETAIN_CASES}
    np.testing.assert_allclose(ours["tensor"][1][0], [1.0, 10.0, 100.0, 1000.0])
    np.testing.assert_allclose(ours["view base"][1][0], [1.0, 10.0])
    np.testing.assert_allclose(ours["tensor hook"][2][0], [2.0, 20.0, 200.0, 2000.0])
    assert ours["view base hook"][2] == []  # the view's old node is not in the graph
    torch = pytest.importorskip("torch")
    for case, (retains, grads, seen) in ours.items():
        their_retains, their_grads, their_seen = _retained_after_writes(torch, "cpu", case)
        assert retains == their_retains is True, case
        for mine, theirs in zip(grads, their_grads):
            np.testing.assert_allclose(mine, theirs, rtol=1e-6, err_msg=case)
        assert len(seen) == len(their_seen), case
        for mine, theirs in zip(seen, their_seen):
            np.testing.assert_allclose(mine, theirs, rtol=1e-6, err_msg=case)
