"""Module backward hooks (``register_full_backward_hook``, ``register_full_backward_pre_hook``,
the legacy ``register_backward_hook``) and the global module hooks
(``kg.nn.modules.module.register_module_*``), as PyTorch 2.13 runs them: the same programs,
from the same weights, record the same ``grad_input`` / ``grad_output`` and give the same
gradients under PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelgrad as kg

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((4, 3)).astype("f4")
B1 = RNG.standard_normal(4).astype("f4")
W2 = RNG.standard_normal((2, 4)).astype("f4")
B2 = RNG.standard_normal(2).astype("f4")
X = np.array([[1.0, -2.0, 0.5], [-1.0, 2.0, 1.5]], dtype="f4")


def _np(tensor):
    return None if tensor is None else tensor.detach().cpu().numpy().copy()


def _record(log, tag):
    """A full backward hook that records what it sees."""

    def hook(module, grad_input, grad_output):
        log.append((tag, tuple(map(_np, grad_input)), tuple(map(_np, grad_output))))

    return hook


def _mlp(lib, device):
    nn = lib.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    state = {"0.weight": W1, "0.bias": B1, "2.weight": W2, "2.bias": B2}
    model.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
    return model.to(device)


class _TwoInTwoOut:
    """forward(a, b, k=3) -> (a * b, a + 2 * b, k): two tensor inputs, a tuple output
    with a non-tensor in it."""

    @staticmethod
    def make(lib):
        class TwoInTwoOut(lib.nn.Module):
            def forward(self, a, b, k=3):
                return a * b, a + 2 * b, k

        return TwoInTwoOut()


def _program(lib, device):
    """Every case of the hook surface in one program; returns what the hooks saw and
    the gradients."""
    log = []
    out = {}
    x = lib.tensor(X, device=device, requires_grad=True)

    # Linear and a Sequential: full hooks, pre-hooks, order across nested modules
    model = _mlp(lib, device)
    handles = [
        model.register_full_backward_hook(_record(log, "seq")),
        model[0].register_full_backward_hook(_record(log, "fc1")),
        model[2].register_full_backward_hook(_record(log, "fc2")),
        model[1].register_full_backward_hook(_record(log, "relu")),
        model[2].register_full_backward_pre_hook(
            lambda m, go: log.append(("fc2 pre", tuple(map(_np, go)), ()))
        ),
        model[2].register_full_backward_hook(_record(log, "fc2 first"), prepend=True),
    ]
    model(x).sum().backward()
    out["x.grad"] = _np(x.grad)
    out["fc1.weight.grad"] = _np(model[0].weight.grad)
    for handle in handles:
        handle.remove()

    # a hook that scales grad_input and a pre-hook that replaces grad_output
    model.zero_grad()
    x.grad = None
    scale = model[0].register_full_backward_hook(lambda m, gi, go: (gi[0] * 10,))
    double = model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
    (model(x) * lib.tensor([[1.0, -1.0]], device=device)).sum().backward()
    out["scaled x.grad"] = _np(x.grad)
    out["doubled fc1.weight.grad"] = _np(model[0].weight.grad)
    # removed: the plain gradients again
    scale.remove()
    double.remove()
    model.zero_grad()
    x.grad = None
    (model(x) * lib.tensor([[1.0, -1.0]], device=device)).sum().backward()
    out["removed x.grad"] = _np(x.grad)

    # forward hooks with backward hooks: grad_output is that of the replaced output
    linear = _mlp(lib, device)[0]
    linear.register_forward_hook(lambda m, args, output: output * 3)
    linear.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
    linear.register_full_backward_hook(_record(log, "forward-hooked"))
    x.grad = None
    (linear(x) ** 2).sum().backward()
    out["forward-hooked x.grad"] = _np(x.grad)

    # two inputs, a tuple output with a non-tensor; b does not require grad, and only
    # the first output reaches the loss
    two = _TwoInTwoOut.make(lib)
    two.register_full_backward_hook(_record(log, "two"))
    two.register_full_backward_pre_hook(
        lambda m, go: log.append(("two pre", tuple(map(_np, go)), ()))
    )
    a = lib.tensor([1.0, 2.0], device=device, requires_grad=True)
    b = lib.tensor([3.0, -1.0], device=device)
    first, second, k = two(a, b)
    assert k == 3 and second.requires_grad
    (first * lib.tensor([1.0, 5.0], device=device)).sum().backward()
    out["two a.grad"] = _np(a.grad)
    # both require grad, only the second output is used
    b.requires_grad_()
    (two(a, b)[1] * 5).sum().backward()
    out["two b.grad"] = _np(b.grad)

    # a module whose input does not require grad: the hook runs with grad_input (None,)
    head = _mlp(lib, device)[2]
    head.register_full_backward_hook(_record(log, "no input grad"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        head(lib.tensor(W2, device=device)).sum().backward()
    out["warned"] = any("no inputs require gradients" in str(w.message) for w in caught)
    out["head.weight.grad"] = _np(head.weight.grad)

    # the module called twice in one graph: its hooks run once per call
    twice = _mlp(lib, device)[0]
    twice.register_full_backward_hook(_record(log, "twice"))
    x.grad = None
    (twice(x).sum() + 3 * twice(x * 2).sum()).backward()
    out["twice x.grad"] = _np(x.grad)
    return log, out


def _compare(ours, theirs):
    (log, out), (their_log, their_out) = ours, theirs
    assert [entry[0] for entry in log] == [entry[0] for entry in their_log]
    for (tag, gi, go), (_, their_gi, their_go) in zip(log, their_log):
        for mine, theirs_ in zip((gi, go), (their_gi, their_go)):
            assert len(mine) == len(theirs_), tag
            for a, b in zip(mine, theirs_):
                assert (a is None) == (b is None), tag
                if a is not None:
                    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=tag)
    assert out.keys() == their_out.keys()
    for key in out:
        if isinstance(out[key], bool):
            assert out[key] == their_out[key], key
        else:
            np.testing.assert_allclose(out[key], their_out[key], rtol=1e-5, atol=1e-6, err_msg=key)


def test_backward_hooks_run_as_in_pytorch(device):
    ours = _program(kg, device)
    log, out = ours
    tags = [entry[0] for entry in log]
    # outputs' pre-hooks before the module's hooks; inner modules before the outer one
    assert tags[:6] == ["fc2 pre", "fc2 first", "fc2", "relu", "fc1", "seq"]
    assert out["warned"]
    # hand-checked values: the scaled input gradient is ten times the removed one...
    np.testing.assert_allclose(out["scaled x.grad"], 2 * 10 * out["removed x.grad"], rtol=1e-5)
    # ...and b (no requires_grad) gets zeros, the unused output None
    two = next(entry for entry in log if entry[0] == "two")
    np.testing.assert_allclose(two[1][1], [0.0, 0.0])
    assert two[2][1] is None and two[2][2] is None
    np.testing.assert_allclose(out["two a.grad"], [3.0, -5.0])
    torch = pytest.importorskip("torch")
    _compare(ours, _program(torch, "cpu"))


def _global_program(lib, module_hooks):
    seen = []
    model = _mlp(lib, "cpu")
    handles = [
        module_hooks.register_module_forward_pre_hook(
            lambda m, args: seen.append(("pre", type(m).__name__))
        ),
        module_hooks.register_module_forward_hook(
            lambda m, args, out: seen.append(("fwd", type(m).__name__))
        ),
        module_hooks.register_module_full_backward_pre_hook(
            lambda m, go: seen.append(("bwd pre", type(m).__name__))
        ),
        module_hooks.register_module_full_backward_hook(
            lambda m, gi, go: seen.append(("bwd", type(m).__name__))
        ),
    ]
    model[0].register_forward_hook(lambda m, args, out: seen.append(("own fwd", "Linear")))
    model[0].register_full_backward_hook(lambda m, gi, go: seen.append(("own bwd", "Linear")))
    scale = module_hooks.register_module_full_backward_hook(
        lambda m, gi, go: (gi[0] * 2,) if isinstance(m, lib.nn.ReLU) else None
    )
    x = lib.tensor(X, requires_grad=True)
    try:
        model(x).sum().backward()
    finally:
        for handle in (*handles, scale):
            handle.remove()
    grad = _np(x.grad)
    seen_after = len(seen)
    model(x).sum().backward()  # removed: nothing more is recorded but the own hooks
    return seen, grad, seen[seen_after:]


def test_global_module_hooks_run_for_every_module_before_its_own():
    from kernelgrad.nn.modules.module import register_module_forward_hook

    assert register_module_forward_hook is kg.nn.modules.module.register_module_forward_hook
    seen, grad, after = _global_program(kg, kg.nn.modules.module)
    from kernelgrad.nn import _module_hooks

    assert not _module_hooks.GLOBAL_HOOKS[0]  # all removed: modules take the plain call
    assert seen[:4] == [
        ("pre", "Sequential"),
        ("pre", "Linear"),
        ("fwd", "Linear"),
        ("own fwd", "Linear"),
    ]
    assert after == [("own fwd", "Linear"), ("own bwd", "Linear")]
    torch = pytest.importorskip("torch")
    import torch.nn.modules.module as torch_module_hooks

    their_seen, their_grad, their_after = _global_program(torch, torch_module_hooks)
    assert seen == their_seen and after == their_after
    np.testing.assert_allclose(grad, their_grad, rtol=1e-5, atol=1e-6)


def _legacy_program(lib):
    seen = []
    relu = lib.nn.ReLU()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        relu.register_backward_hook(_record(seen, "legacy"))
        x = lib.tensor(X, requires_grad=True)
        (relu(x) * 3).sum().backward()
    return seen


def test_legacy_backward_hook_is_the_full_hook_with_a_warning():
    with pytest.warns(FutureWarning, match="register_full_backward_hook"):
        kg.nn.ReLU().register_backward_hook(lambda m, gi, go: None)
    ours = _legacy_program(kg)
    torch = pytest.importorskip("torch")
    _compare((ours, {}), (_legacy_program(torch), {}))  # same for a one-operation module


def test_hook_errors_name_the_problem():
    linear = kg.nn.Linear(3, 2)
    linear.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        linear(kg.tensor(X, requires_grad=True)).sum().backward()
    other = kg.nn.Linear(3, 2)
    other.register_full_backward_pre_hook(lambda m, go: go[0] * 2)
    with pytest.raises(RuntimeError, match="tuple with one entry"):
        other(kg.tensor(X, requires_grad=True)).sum().backward()
    with pytest.raises(RuntimeError, match="both regular backward hooks and full backward"):
        linear.register_backward_hook(lambda m, gi, go: None)
    with pytest.raises(TypeError, match="callable"):
        linear.register_full_backward_hook(None)
    # no grad: the hooks are not attached; a plain module is called without the hook path
    with kg.no_grad():
        assert linear(kg.tensor(X, requires_grad=True)).grad_fn is None
    assert "_call_hooks" not in kg.nn.Linear(3, 2).__dict__
