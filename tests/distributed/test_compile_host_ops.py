"""Host-side operations (collectives) inside kg.compile: recorded, kept and replayed in
order, with kernels ordered around them by the buffers they read and write."""

from __future__ import annotations

import numpy as np

import kernelgrad as kg
from kernelgrad.compile.external import run_host_op


def test_replayed_in_order_on_every_call():
    log = []

    def note(tensors):
        log.append(("note", tensors[0].tolist()))

    def scale(tensors):
        log.append("scale")
        tensors[0].mul_(3)

    @kg.compile
    def step(x):
        y = x * 2
        run_host_op("note", note, [y])
        run_host_op("scale", scale, [y], written=[0])
        return (y + 1).sum()

    results = [step(kg.tensor([1.0, 2.0])).item() for _ in range(4)]
    assert results == [20.0] * 4  # (2*3 + 1) + (4*3 + 1)
    assert log == [("note", [2.0, 4.0]), "scale"] * 4
    assert step.last_plan is not None
    labels = [s.label for s in step.last_plan.steps]
    assert labels.count("host note") == 1 and labels.count("host scale") == 1


def test_an_op_nothing_reads_still_runs():
    """A barrier has no result, and its input is otherwise dead: it must stay."""
    calls = []

    @kg.compile
    def step(x):
        unused = x + 5
        run_host_op("barrier", lambda tensors: calls.append(1), [unused])
        return x * 2

    for _ in range(3):
        assert step(kg.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert len(calls) == 3


def test_kernels_are_not_moved_across_a_write():
    """`a = x + 1` is read after the host op overwrote the buffer it reads: fusing the
    addition into the later kernel would read the new values."""

    def overwrite(tensors):
        tensors[0].fill_(100.0)

    @kg.compile
    def step(x):
        base = x * 1
        a = base + 1
        run_host_op("overwrite", overwrite, [base], written=[0])
        return a * 2, base * 1

    for _ in range(3):
        doubled, base = step(kg.tensor([1.0, 2.0]))
        assert doubled.tolist() == [4.0, 6.0]
        assert base.tolist() == [100.0, 100.0]


def test_written_argument_gets_a_new_version():
    def negate(tensors):
        tensors[0].mul_(-1)

    @kg.compile
    def step(x):
        run_host_op("negate", negate, [x], written=[0])
        return x + 0

    x = kg.tensor([1.0, -2.0])
    for expected in ([-1.0, 2.0], [1.0, -2.0], [-1.0, 2.0]):
        version = x._storage.version
        assert step(x).tolist() == expected
        assert x._storage.version > version
    np.testing.assert_array_equal(x.numpy(), [-1.0, 2.0])
