"""PyTorch's autograd surface: inference_mode, grad_fn.next_functions and name()."""

from __future__ import annotations

import threading

import pytest

import kernelgrad as kg


def test_inference_mode_records_nothing_and_nests_like_pytorch():
    w = kg.ones(2, requires_grad=True)
    assert not kg.is_inference_mode_enabled()
    with kg.inference_mode():
        assert kg.is_inference_mode_enabled() and not kg.is_grad_enabled()
        assert not (w * 2).requires_grad
        with kg.inference_mode(False):  # as in PyTorch: recording is back on
            assert not kg.is_inference_mode_enabled() and kg.is_grad_enabled()
            assert (w * 2).requires_grad
        assert not (w * 2).requires_grad
    assert kg.is_grad_enabled() and (w * 2).requires_grad


def test_inference_mode_as_a_decorator_with_and_without_parentheses():
    w = kg.ones(2, requires_grad=True)

    @kg.inference_mode()
    def called(x):
        return x * 2, kg.is_inference_mode_enabled()

    @kg.inference_mode
    def bare(x):
        return x * 2, kg.is_inference_mode_enabled()

    for function in (called, bare):
        y, inside = function(w)
        assert inside and not y.requires_grad
    assert bare.__name__ == "bare"
    assert (w * 2).requires_grad


def test_inference_mode_is_per_thread_and_restored_after_an_error():
    seen = []
    with pytest.raises(ValueError), kg.inference_mode():
        thread = threading.Thread(target=lambda: seen.append(kg.is_inference_mode_enabled()))
        thread.start()
        thread.join()
        raise ValueError
    assert seen == [False] and not kg.is_inference_mode_enabled() and kg.is_grad_enabled()


def _tree(node):
    """(name, children) of a grad_fn, with AccumulateGrad and None as leaves."""
    if node is None:
        return None
    return (node.name(), tuple(_tree(child) for child, _ in node.next_functions))


def test_next_functions_follow_the_graph_to_the_leaves():
    x = kg.ones(2, 2)
    w = kg.ones(2, 2, requires_grad=True)
    b = kg.zeros(2, requires_grad=True)
    loss = (x * w + b).relu().sum()
    accumulate = ("torch::autograd::AccumulateGrad", ())
    mul = ("MulBackward0", (None, accumulate))
    assert _tree(loss.grad_fn) == (
        "SumBackward0",
        (("ReluBackward0", (("AddBackward0", (mul, accumulate)),)),),
    )
    add = loss.grad_fn.next_functions[0][0].next_functions[0][0]
    assert add.next_functions[1][0].variable is b
    assert all(index == 0 for _, index in add.next_functions)
    assert str(loss.grad_fn.name) == "sum"  # still the operation name kernelgrad prints


@pytest.mark.torch
def test_next_functions_have_pytorchs_structure_for_elementwise_graphs():
    torch = pytest.importorskip("torch")

    def build(library):
        x = library.ones(2, 2)
        w = library.ones(2, 2, requires_grad=True)
        b = library.zeros(2, requires_grad=True)
        return ((x * w + b).relu().exp() * w).sum()

    assert _tree(build(kg).grad_fn) == _tree(build(torch).grad_fn)
