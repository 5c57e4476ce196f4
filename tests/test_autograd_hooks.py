"""Hooks on leaves (``register_post_accumulate_grad_hook``) and on the end of a backward
pass (``queue_callback``): what data-parallel training starts its reductions from."""

from __future__ import annotations

import gc

import pytest

import kernelgrad as kg
from kernelgrad import autograd
from kernelgrad.errors import BackwardError


def test_hook_fires_once_with_every_contribution_added():
    w = kg.ones(3, requires_grad=True)
    seen = []
    autograd.register_post_accumulate_grad_hook(w, lambda t: seen.append(t.grad.tolist()))
    # w is read by three operations: its gradient arrives in three parts
    loss = (w * 2).sum() + (w * w).sum() + w.mean() * 3
    loss.backward()
    assert seen == [[5.0, 5.0, 5.0]]
    loss = (w * 2).sum()
    loss.backward()  # the gradient accumulates across passes; the hook sees the total
    assert seen[-1] == [7.0, 7.0, 7.0]
    assert len(seen) == 2


def test_hooks_run_while_backward_continues():
    """The last layer's weight is finished before the first layer's gradient exists."""
    kg.manual_seed(0)
    first = kg.nn.Linear(4, 5)
    last = kg.nn.Linear(5, 2)
    states = []
    autograd.register_post_accumulate_grad_hook(
        last.weight, lambda t: states.append(("last", first.weight.grad is None))
    )
    autograd.register_post_accumulate_grad_hook(
        first.weight, lambda t: states.append(("first", last.weight.grad is None))
    )
    last(first(kg.randn(3, 4)).relu()).sum().backward()
    assert states == [("last", True), ("first", False)]


def test_no_call_for_a_leaf_without_a_gradient_in_this_pass():
    a = kg.ones(2, requires_grad=True)
    b = kg.ones(2, requires_grad=True)
    calls = []
    autograd.register_post_accumulate_grad_hook(b, lambda t: calls.append("b"))
    (a * 2).sum().backward()
    assert calls == []


def test_queue_callback_runs_after_all_gradients():
    a = kg.ones(2, requires_grad=True)
    b = kg.ones(2, requires_grad=True)
    seen = []

    def hook(tensor):
        autograd.queue_callback(lambda: seen.append((a.grad.tolist(), b.grad.tolist())))

    autograd.register_post_accumulate_grad_hook(b, hook)
    ((a * 3) * b).sum().backward()
    assert seen == [([3.0, 3.0], [3.0, 3.0])]


def test_queue_callback_outside_backward_is_an_error():
    with pytest.raises(BackwardError, match="outside a backward pass"):
        autograd.queue_callback(lambda: None)


def test_remove_and_collection():
    w = kg.ones(2, requires_grad=True)
    calls = []
    handle = autograd.register_post_accumulate_grad_hook(w, lambda t: calls.append(1))
    handle.remove()
    (w * 2).sum().backward()
    assert calls == []
    before = len(autograd._grad_hooks)
    temporary = kg.ones(2, requires_grad=True)
    autograd.register_post_accumulate_grad_hook(temporary, lambda t: None)
    assert len(autograd._grad_hooks) == before + 1
    del temporary
    gc.collect()
    assert len(autograd._grad_hooks) == before


def test_only_leaves_that_require_grad():
    w = kg.ones(2, requires_grad=True)
    with pytest.raises(BackwardError, match="leaf tensor that requires grad"):
        autograd.register_post_accumulate_grad_hook(w * 2, lambda t: None)
    with pytest.raises(BackwardError, match="does not require grad"):
        autograd.register_post_accumulate_grad_hook(kg.ones(2), lambda t: None)


def test_backward_of_a_leaf_itself():
    w = kg.ones(1, requires_grad=True)
    calls = []
    autograd.register_post_accumulate_grad_hook(w, lambda t: calls.append(t.grad.tolist()))
    w.backward(kg.ones(1))
    assert calls == [[1.0]]
