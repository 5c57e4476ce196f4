"""Fills that write the same values on every call run once, when the plan is built
(``Plan._hoist_constant_fills``): the backward pass's seed of a traced training step, a
constant matrix made inside the function. A fill whose buffer is written again, or
returned, stays in the replay."""

from __future__ import annotations

import numpy as np

import kernelgrad as kg


def _inputs(device, calls=3):
    rng = np.random.default_rng(0)
    return [
        kg.tensor(rng.standard_normal((3, 4)).astype(np.float32), device=device)
        for _ in range(calls)
    ]


def test_a_constant_read_by_later_steps_is_filled_once(device):
    def f(x):
        return x @ kg.ones(4, 2, device=x.device)

    compiled = kg.compile(f)
    for x in _inputs(device):
        np.testing.assert_allclose(compiled(x).cpu().numpy(), f(x).cpu().numpy(), rtol=1e-6)
    assert compiled.last_plan.kernel_count == 1  # the product; the fill ran once


def test_a_fill_written_again_stays_in_the_replay(device):
    def f(x):
        total = kg.zeros(3, 4, device=x.device)
        total += x  # the filled buffer is written again: a fresh fill on every call
        return total @ kg.ones(4, 2, device=x.device)

    compiled = kg.compile(f)
    for x in _inputs(device):  # a hoisted zero fill would accumulate across calls
        np.testing.assert_allclose(compiled(x).cpu().numpy(), f(x).cpu().numpy(), rtol=1e-6)


def test_a_returned_fill_is_a_new_tensor_on_every_call(device):
    def f(x):
        return kg.ones(3, 4, device=x.device), x * 2

    compiled = kg.compile(f)
    first = compiled(_inputs(device)[0])[0]
    first.add_(1.0)  # the caller owns it: the next call's fill is another buffer
    second = compiled(_inputs(device)[1])[0]
    np.testing.assert_array_equal(second.cpu().numpy(), np.ones((3, 4), np.float32))


def test_the_traced_training_steps_seed_is_filled_once(device):
    model = kg.nn.Linear(4, 3).to(device)
    eager_model = kg.nn.Linear(4, 3).to(device)
    eager_model.load_state_dict(model.state_dict())
    targets = kg.tensor([0, 2, 1], device=device)

    def step(net, x):
        loss = kg.nn.functional.cross_entropy(net(x), targets)
        loss.backward()
        return loss

    compiled = kg.compile(lambda x: step(model, x))
    for x in _inputs(device):
        np.testing.assert_allclose(compiled(x).item(), step(eager_model, x).item(), rtol=1e-6)
        np.testing.assert_allclose(
            model.weight.grad.cpu().numpy(),
            eager_model.weight.grad.cpu().numpy(),
            rtol=1e-5,
            atol=1e-6,
        )
    labels = [line.split()[0] for line in compiled.last_plan.describe().splitlines()[1:]]
    assert "identity" not in labels  # ones_like(loss): filled once
