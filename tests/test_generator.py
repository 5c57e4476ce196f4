"""``kg.Generator``: a random stream of its own, drawn from by the functions that take
``generator=``, leaving the device's default stream (``kg.manual_seed``) where it was."""

from __future__ import annotations

import pytest

import kernelgrad as kg
from kernelgrad.data import random_split


def test_a_generator_is_its_own_stream(device):
    kg.manual_seed(0)
    expected = kg.rand(4, device=device).cpu().tolist()
    kg.manual_seed(0)
    g = kg.Generator(device).manual_seed(7)
    first = kg.rand(3, generator=g, device=device).cpu().tolist()
    second = kg.rand(3, generator=g, device=device).cpu().tolist()
    assert first != second  # the generator advances
    assert kg.rand(4, device=device).cpu().tolist() == expected  # the default stream did not
    kg.manual_seed(7)
    assert kg.rand(3, device=device).cpu().tolist() == first  # the Philox stream of its seed
    assert g.initial_seed() == 7


def test_every_drawing_function_takes_it(device):
    def draws(g: kg.Generator) -> list:
        return [
            kg.rand(2, generator=g, device=device).cpu().tolist(),
            kg.randn(2, generator=g, device=device).cpu().tolist(),
            kg.randint(0, 100, (3,), generator=g, device=device).cpu().tolist(),
            kg.randperm(5, generator=g, device=device).cpu().tolist(),
            kg.normal(0.0, 2.0, (2,), generator=g, device=device).cpu().tolist(),
            kg.bernoulli(kg.full((4,), 0.5, device=device), generator=g).cpu().tolist(),
            kg.multinomial(kg.tensor([0.2, 0.8], device=device), 4, replacement=True, generator=g)
            .cpu()
            .tolist(),
        ]

    assert draws(kg.Generator(device).manual_seed(3)) == draws(kg.Generator(device).manual_seed(3))
    assert draws(kg.Generator(device).manual_seed(3)) != draws(kg.Generator(device).manual_seed(4))


def test_state_round_trip_and_errors():
    g = kg.Generator().manual_seed(5)
    kg.rand(2, generator=g)
    state = g.get_state()
    after = kg.randn(4, generator=g).cpu().tolist()
    g.set_state(state)
    assert kg.randn(4, generator=g).cpu().tolist() == after
    fresh = kg.Generator().manual_seed(9)
    at_start = fresh.get_state()
    values = kg.rand(2, generator=fresh).cpu().tolist()
    fresh.set_state(at_start)
    assert kg.rand(2, generator=fresh).cpu().tolist() == values
    with pytest.raises(kg.errors.DeviceMismatchError, match=r"kg\.Generator\('cpu'\)"):
        kg.rand(2, generator=kg.Generator("cuda"))
    with pytest.raises(kg.errors.ArgumentError, match=r"kg\.Generator"):
        kg.rand(2, generator=42)
    assert "initial seed 5" in repr(g)


def test_random_split_with_a_generator_is_reproducible():
    data = list(range(10))
    first = [list(s) for s in random_split(data, [7, 3], generator=kg.Generator().manual_seed(42))]
    again = [list(s) for s in random_split(data, [7, 3], generator=kg.Generator().manual_seed(42))]
    assert first == again and sorted(first[0] + first[1]) == data
