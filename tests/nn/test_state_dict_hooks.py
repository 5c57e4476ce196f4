"""State-dict hooks (``register_state_dict_pre_hook``, ``register_state_dict_post_hook``,
``register_load_state_dict_pre_hook``, ``register_load_state_dict_post_hook``) with
PyTorch's signatures and call order: the same program under PyTorch makes the same
calls, sees the same keys and loads the same values."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg

VALUES = {
    "0.weight": np.arange(6, dtype="f4").reshape(3, 2) / 4,
    "0.bias": np.array([0.5, -1.0, 2.0], dtype="f4"),
    "2.0.weight": np.array([[1.0, -2.0, 0.25]], dtype="f4"),
    "2.0.bias": np.array([3.0], dtype="f4"),
}


def _model(lib, device):
    nn = lib.nn
    return nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 1))).to(device)


def _program(lib, device):
    log = []
    model = _model(lib, device)

    # state_dict: pre-hooks before a module's entries, post-hooks after its children's
    def pre(module, prefix, keep_vars):
        log.append(("pre", type(module).__name__, prefix, keep_vars))

    def post(module, state, prefix, metadata):
        log.append(("post", type(module).__name__, prefix, sorted(state), sorted(metadata)))
        state[prefix + "extra"] = lib.zeros(1)

    model.register_state_dict_pre_hook(pre)
    model[2].register_state_dict_pre_hook(pre)
    model[2].register_state_dict_post_hook(post)
    model[0].register_state_dict_post_hook(lambda m, s, prefix, meta: log.append(("post0", prefix)))
    keys = list(model.state_dict(keep_vars=True))
    bad = model.register_state_dict_post_hook(lambda m, s, prefix, meta: {})
    with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
        model.state_dict()
    bad.remove()

    # load_state_dict: a pre-hook renames an old key; post-hooks see the loaded values
    def load_pre(module, state, prefix, metadata, strict, missing, unexpected, errors):
        log.append(
            ("load pre", type(module).__name__, prefix, sorted(state), strict, list(unexpected))
        )
        if prefix + "old_weight" in state:
            state[prefix + "weight"] = state.pop(prefix + "old_weight")

    def load_post(module, incompatible):
        first = module.weight if isinstance(module, lib.nn.Linear) else None
        log.append(
            (
                "load post",
                type(module).__name__,
                list(incompatible.missing_keys),
                list(incompatible.unexpected_keys),
                None if first is None else first.detach().cpu().numpy().sum().item(),
            )
        )

    for module in (model, model[0], model[2], model[2][0]):
        module.register_load_state_dict_pre_hook(load_pre)
        module.register_load_state_dict_post_hook(load_post)
    state = {k: lib.tensor(v) for k, v in VALUES.items()}
    state["0.old_weight"] = state.pop("0.weight")
    state["junk"] = lib.ones(1)
    result = model.load_state_dict(state, strict=False)
    loaded = {
        k: v.detach().cpu().numpy() for k, v in model.state_dict().items() if "extra" not in k
    }

    # a post-hook forgiving the unexpected key lets strict=True pass
    def forgive(module, incompatible):
        if "junk" in incompatible.unexpected_keys:
            incompatible.unexpected_keys.remove("junk")

    handle = model.register_load_state_dict_post_hook(forgive)
    strict_result = model.load_state_dict(state)
    handle.remove()
    with pytest.raises(RuntimeError, match="junk"):
        model.load_state_dict(state)
    returns = lib.nn.Linear(2, 2)
    returns.register_load_state_dict_post_hook(lambda m, incompatible: 1)
    with pytest.raises(AssertionError, match="not expected to return new values"):
        returns.load_state_dict(returns.state_dict())
    return (
        log,
        keys,
        (list(result.missing_keys), list(result.unexpected_keys)),
        (list(strict_result.missing_keys), list(strict_result.unexpected_keys)),
        loaded,
    )


def test_state_dict_hooks_run_as_in_pytorch(device):
    ours = _program(kg, device)
    log, keys, result, strict_result, loaded = ours
    assert keys == ["0.weight", "0.bias", "2.0.weight", "2.0.bias", "2.extra"]
    assert [entry[:3] for entry in log[:4]] == [
        ("pre", "Sequential", ""),
        ("post0", "0."),
        ("pre", "Sequential", "2."),
        ("post", "Sequential", "2."),
    ]
    # a module's load post-hooks run after its children's, a parent's pre-hook first
    assert [entry[:3] for entry in log if entry[0].startswith("load")][:3] == [
        ("load pre", "Sequential", ""),
        ("load pre", "Linear", "0."),
        ("load post", "Linear", []),
    ]
    assert result == ([], ["junk"]) and strict_result == ([], [])
    for key, value in VALUES.items():
        np.testing.assert_array_equal(loaded[key], value)
    torch = pytest.importorskip("torch")
    theirs = _program(torch, "cpu")
    assert ours[:4] == theirs[:4]
    assert loaded.keys() == theirs[4].keys()


def test_private_hook_forms_used_by_libraries():
    model = kg.nn.Linear(2, 1)
    model._register_state_dict_hook(lambda m, state, prefix, meta: {"only": state["weight"]})
    assert list(model.state_dict()) == ["only"]
    seen = []
    model._register_load_state_dict_pre_hook(lambda state, prefix, *rest: seen.append(prefix))
    model._register_load_state_dict_pre_hook(
        lambda module, state, prefix, *rest: seen.append(type(module).__name__), with_module=True
    )
    model.load_state_dict({"weight": kg.ones(1, 2), "bias": kg.zeros(1)})
    assert seen == ["", "Linear"]


def test_a_pre_hook_error_refuses_the_load_before_copying():
    model = kg.nn.Linear(2, 1)
    before = model.weight.detach().clone()
    model.register_load_state_dict_pre_hook(
        lambda module, state, prefix, meta, strict, missing, unexpected, errors: errors.append(
            "wrong checkpoint version"
        )
    )
    with pytest.raises(RuntimeError, match="wrong checkpoint version"):
        model.load_state_dict({"weight": kg.ones(1, 2), "bias": kg.zeros(1)})
    assert model.weight.tolist() == before.tolist()
