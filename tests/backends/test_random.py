"""The Philox4x32-10 generator every backend shares (kernelgrad/backends/philox.py): known
answers, the CPU loops against the plain-Python reference, the accuracy of its own
logarithm and cosine, the generator state, and (with numba-cuda's compiler) that the CUDA
kernels round every product as the CPU does."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends import philox
from kernelgrad.backends.cpu import rng as cpu_rng

# Random123's known-answer vectors for philox4x32_10: counter, key -> output
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (
        (0xFFFFFFFF,) * 4,
        (0xFFFFFFFF,) * 2,
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS)
def test_philox_matches_the_random123_known_answers(counter, key, expected):
    words = philox.philox4x32(*(np.uint64(w) for w in counter + key))
    assert tuple(int(w) for w in words) == expected


def reference(distribution, seed, first, count, dtype, low, high):
    """The plain-Python functions for elements first .. first + count - 1."""
    seed_low, seed_high = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    values = []
    for j in range(first, first + count):
        if distribution == "uniform":
            wide = dtype == np.float64
            values.append(philox.uniform_value(seed_low, seed_high, j, low, high, wide))
        elif distribution == "normal":
            values.append(philox.normal_value(seed_low, seed_high, j, low, high))
        else:
            span = np.uint64(high - low)
            values.append(philox.integer_value(seed_low, seed_high, j, low, span))
    return np.array(values).astype(dtype)


@pytest.mark.parametrize(
    "distribution, dtype, low, high, parallel",
    [
        ("uniform", np.float32, -2.0, 3.0, False),
        ("uniform", np.float32, -2.0, 3.0, True),
        ("uniform", np.float64, 0.0, 1.0, False),
        ("normal", np.float32, 1.0, 2.0, False),
        ("normal", np.float64, 0.0, 1.0, False),
        ("normal", np.float64, 0.0, 1.0, True),
        ("integers", np.int64, -5, 1000, False),
        ("integers", np.int32, 0, 10, False),
    ],
)
def test_cpu_loops_equal_the_python_reference_bit_for_bit(distribution, dtype, low, high, parallel):
    stream = philox.Stream()
    stream.manual_seed(2**40 + 12345)  # both key words in use
    stream.counter = 2**33 - 3  # the counter's high word changes inside the fill
    target = np.empty(9, dtype=dtype)
    cpu_rng.fill(target, distribution, low, high, stream, parallel)
    expected = reference(distribution, 2**40 + 12345, 2**33 - 3, 9, dtype, low, high)
    np.testing.assert_array_equal(target, expected)
    assert stream.counter == 2**33 + 6


def test_the_logarithm_is_within_one_unit_in_the_last_place():
    # ln(k / 2**53) against a float128-free reference: k = m * 2**e exactly, so
    # ln = e ln 2 + ln(m) with both parts computed by math.log on exact arguments.
    rng = np.random.default_rng(3)
    ks = np.concatenate(
        [rng.integers(1, 2**53, 300, dtype=np.uint64), 2**53 - np.arange(1, 50, dtype=np.uint64)]
    )
    for k in [*ks, np.uint64(1), np.uint64(2**53)]:
        mine = philox.log_fraction(np.uint64(k))
        expected = (
            math.log(int(k) / 2**53) if int(k) < 2**52 else math.log1p(-(2**53 - int(k)) / 2**53)
        )
        assert abs(mine - expected) <= 2 * math.ulp(expected) + 1e-300, (int(k), mine, expected)


def test_the_cosine_of_a_turn_is_accurate_and_exact_at_quarters():
    assert [philox.cos_turn(np.float64(t)) for t in (0.0, 0.5)] == [1.0, -1.0]
    # (math.cos itself is off by up to ~5e-16 here: 2 pi t is rounded before it)
    for t in np.random.default_rng(4).random(400):
        assert abs(philox.cos_turn(np.float64(t)) - math.cos(2 * math.pi * t)) < 1e-15


def test_normal_samples_have_the_right_moments_and_tails():
    values = kg.randn(200_000, dtype=kg.float64).numpy()
    assert abs(values.mean()) < 0.01 and abs(values.std() - 1) < 0.01
    # Box-Muller reaches sqrt(-2 ln 2**-53) = 8.57 at most; 200k samples see beyond 4
    assert 4 < np.abs(values).max() < 8.6
    assert abs((np.abs(values) > 1.96).mean() - 0.05) < 0.004


def test_generator_state_round_trips_and_an_old_pcg64_state_still_loads():
    kg.manual_seed(11)
    state = kg.get_rng_state("cpu")
    assert state == {"seed": 11, "counter": 0}
    first = kg.rand(5).numpy()
    kg.set_rng_state(state, "cpu")
    np.testing.assert_array_equal(kg.rand(5).numpy(), first)
    old = np.random.default_rng(7).bit_generator.state  # what checkpoints used to hold
    with pytest.warns(RuntimeWarning, match="PCG64"):
        kg.set_rng_state(old, "cpu")
    again = kg.rand(3).numpy()
    with pytest.warns(RuntimeWarning):
        kg.set_rng_state(old, "cpu")
    np.testing.assert_array_equal(kg.rand(3).numpy(), again)
