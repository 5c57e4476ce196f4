"""kg.random (torch.random): seeding, the CPU state, fork_rng putting the state back."""

from __future__ import annotations

import pytest

import kernelgrad as kg


def test_manual_seed_initial_seed_and_state_round_trip():
    kg.random.manual_seed(11)
    assert kg.random.initial_seed() == kg.initial_seed() == 11
    state = kg.random.get_rng_state()
    first = kg.rand(4).tolist()
    kg.random.set_rng_state(state)
    assert kg.rand(4).tolist() == first
    value = kg.random.seed()
    assert kg.random.initial_seed() == value and 0 <= value < 2**63


def test_fork_rng_puts_the_state_back_even_after_an_error(device):
    kg.manual_seed(5)
    kg.rand(2, device=device)  # the device's generator is in use
    expected = [kg.rand(3).tolist(), kg.rand(3, device=device).cpu().tolist()]
    kg.manual_seed(5)
    kg.rand(2, device=device)
    with pytest.raises(ZeroDivisionError), kg.random.fork_rng():
        kg.rand(7), kg.rand(7, device=device)
        raise ZeroDivisionError
    assert [kg.rand(3).tolist(), kg.rand(3, device=device).cpu().tolist()] == expected
    kg.manual_seed(5)
    kg.rand(2, device=device)
    with kg.random.fork_rng(enabled=False):
        kg.rand(7)
    assert kg.rand(3).tolist() != expected[0]  # disabled: nothing put back


@pytest.mark.torch
def test_torch_random_names_exist_in_kg_random():
    import torch

    for name in ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"):
        assert callable(getattr(torch.random, name)) and callable(getattr(kg.random, name))
    import inspect

    assert list(inspect.signature(torch.random.fork_rng).parameters) == list(
        inspect.signature(kg.random.fork_rng).parameters
    )
