"""One seed, the same numbers on every device: the CPU backend and the CUDA backend (here
under the simulator; on a GPU with ``KG_TEST_REAL_GPU=1``) both run Philox4x32-10 with
the same transforms, so their fills are equal bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg

DRAWS = {
    "rand float32": lambda device: kg.rand(37, device=device),
    "rand float64": lambda device: kg.rand(3, 5, dtype=kg.float64, device=device),
    "randn float32": lambda device: kg.randn(37, device=device),
    "randn float64": lambda device: kg.randn(21, dtype=kg.float64, device=device),
    "randint int64": lambda device: kg.randint(-3, 1000, (29,), device=device),
    "uniform_ of a view": lambda device: kg.nn.init.uniform_(
        kg.zeros(4, 9, device=device)[:, 2:7], -0.5, 0.25
    ),
}


@pytest.mark.parametrize("draw", list(DRAWS))
def test_one_seed_draws_the_same_numbers_on_the_cpu_and_on_cuda(cuda, draw):
    make = DRAWS[draw]
    kg.manual_seed(2024)
    make("cpu")  # not the first numbers of the stream: the counters must agree too
    on_cpu = make("cpu").numpy()
    kg.manual_seed(2024)
    make(cuda)
    on_cuda = make(cuda).cpu().numpy()
    assert on_cuda.dtype == on_cpu.dtype
    np.testing.assert_array_equal(on_cuda, on_cpu)


def test_a_model_built_after_one_seed_holds_the_same_weights_on_both_devices(cuda):
    def build():
        return kg.nn.Sequential(
            kg.nn.Conv2d(1, 2, 3), kg.nn.ReLU(), kg.nn.Flatten(), kg.nn.Linear(8, 3)
        )

    kg.manual_seed(0)
    on_cpu = build()
    kg.manual_seed(0)
    with kg.device(cuda):
        on_cuda = build()
    cpu_state, cuda_state = on_cpu.state_dict(), on_cuda.state_dict()
    assert list(cpu_state) == list(cuda_state)
    for name, value in cpu_state.items():
        assert cuda_state[name].device.type == "cuda"
        np.testing.assert_array_equal(cuda_state[name].cpu().numpy(), value.numpy(), name)


def test_generator_states_move_between_devices(cuda):
    kg.manual_seed(5)
    kg.rand(10, device=cuda)
    state = kg.get_rng_state(cuda)
    assert state == {"seed": 5, "counter": 10}
    kg.set_rng_state(state, "cpu")
    np.testing.assert_array_equal(kg.rand(6).numpy(), kg.rand(6, device=cuda).cpu().numpy())
