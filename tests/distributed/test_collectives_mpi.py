"""Collectives, collectives inside kg.compile, and DistributedDataParallel on 2 real MPI
processes (one job for the whole module: tests/distributed/mpi_scenarios.py), checked
against NumPy and against one-process training."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from . import mpi_scenarios as scenarios
from .jobs import ROOT, run

WORLD = 2


@pytest.fixture(scope="module")
def results(mpiexec, tmp_path_factory):
    folder = tmp_path_factory.mktemp("mpi-scenarios")
    script = ROOT / "tests" / "distributed" / "mpi_scenarios.py"
    job = run([mpiexec, "-n", str(WORLD), sys.executable, str(script), str(folder)])
    assert job.returncode == 0, job.stdout + job.stderr
    arrays = [dict(np.load(folder / f"rank-{rank}.npz")) for rank in range(WORLD)]
    messages = [json.loads((folder / f"rank-{rank}.json").read_text()) for rank in range(WORLD)]
    return arrays, messages


def inputs(shape, dtype, salt):
    return [scenarios.values(rank, shape, dtype, salt) for rank in range(WORLD)]


REDUCTIONS = {
    "sum": lambda xs: np.sum(xs, axis=0),
    "max": lambda xs: np.max(xs, axis=0),
    "min": lambda xs: np.min(xs, axis=0),
    "product": lambda xs: np.prod(xs, axis=0),
    "mean": lambda xs: np.mean(xs, axis=0),
}


def test_all_reduce_every_dtype_and_op(results):
    arrays, _ = results
    keys = [key for key in arrays[0] if key.count("/") == 3 and key.startswith("all_reduce/")]
    assert len(keys) == 18  # 4 dtypes x 4 ops + mean for the 2 float dtypes
    for key in keys:
        _, dtype, op, salt = key.split("/")
        expected = REDUCTIONS[op](np.stack(inputs((3, 4), dtype, int(salt)))).astype(dtype)
        for rank in range(WORLD):
            got = arrays[rank][key]
            assert got.dtype == np.dtype(dtype), key
            np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=key)


def test_all_reduce_of_a_strided_view_changes_only_the_view(results):
    arrays, _ = results
    bases = inputs((4, 3), "float32", 100)
    for rank in range(WORLD):
        expected = bases[rank].copy()
        expected[:, 1] = bases[0][:, 1] + bases[1][:, 1]
        np.testing.assert_array_equal(arrays[rank]["all_reduce/strided/100"], expected)


def test_boolean_and_async_all_reduce(results):
    arrays, _ = results
    any_positive = np.any([x > 0 for x in inputs((5,), "int64", 101)], axis=0)
    all_positive = np.all([x > 0 for x in inputs((5,), "int64", 102)], axis=0)
    summed = np.sum(inputs((7,), "float64", 103), axis=0)
    for rank in range(WORLD):
        np.testing.assert_array_equal(arrays[rank]["all_reduce/bool-max/101"], any_positive)
        np.testing.assert_array_equal(arrays[rank]["all_reduce/bool-min/102"], all_positive)
        np.testing.assert_array_equal(arrays[rank]["all_reduce/async/103"], summed)
        assert not arrays[rank]["async-before-wait/103"]


def test_broadcast_from_the_last_rank(results):
    arrays, _ = results
    source = WORLD - 1
    for dtype, salt in (("int64", 110), ("float32", 111)):
        for rank in range(WORLD):
            np.testing.assert_array_equal(
                arrays[rank][f"broadcast/{dtype}/{salt}"], inputs((2, 3), dtype, salt)[source]
            )
    bases = inputs((3, 4), "float64", 112)
    for rank in range(WORLD):
        expected = bases[rank].copy()
        expected[1:, ::2] = bases[source][1:, ::2]
        np.testing.assert_array_equal(arrays[rank]["broadcast/strided/112"], expected)


def test_all_gather_and_reduce_scatter(results):
    arrays, _ = results
    gathered = np.stack(inputs((2, 2), "float32", 120))
    gathered_ints = np.concatenate(inputs((3,), "int64", 121))
    for rank in range(WORLD):
        np.testing.assert_array_equal(arrays[rank]["all_gather/list/120"], gathered)
        np.testing.assert_array_equal(arrays[rank]["all_gather/tensor/121"], gathered_ints)
        # reduce_scatter: rank r gets the sum over ranks of their r-th input
        pieces = [scenarios.values(q, (3,), "float32", 130 + rank) for q in range(WORLD)]
        np.testing.assert_array_equal(arrays[rank]["reduce_scatter/list/130"], np.sum(pieces, 0))
        means = np.mean(inputs((WORLD * 2,), "float64", 140), axis=0)
        np.testing.assert_allclose(
            arrays[rank]["reduce_scatter/mean/140"], means[2 * rank : 2 * rank + 2]
        )


def test_all_reduce_inside_a_compiled_step_is_replayed(results):
    arrays, _ = results
    for call in range(4):
        expected = np.mean([2 * x for x in inputs((5,), "float32", 200 + call)], axis=0) + 1
        for rank in range(WORLD):
            np.testing.assert_allclose(arrays[rank][f"compiled/{call}"], expected, rtol=1e-6)
    assert int(arrays[0]["compiled/plans"]) == 1  # calls 3 and 4 were replays


@pytest.mark.parametrize(
    "name,optimizer,compiled,accumulate",
    [
        ("eager-adam", "adam", False, False),
        ("compiled-sgd", "sgd", True, False),
        ("no-sync-adam", "adam", False, True),
    ],
)
def test_ddp_equals_one_process_with_the_whole_batch(
    results, name, optimizer, compiled, accumulate
):
    """2 processes x batch B == 1 process x batch 2B (gradients are means): the same
    parameters up to float rounding, from different initial weights on rank 1."""
    arrays, _ = results
    features, labels = scenarios.training_data(WORLD)
    model = scenarios.mlp(seed=100)  # rank 0's initialisation, which DDP broadcasts
    reference = scenarios.train(
        model,
        scenarios.make_optimizer(optimizer, model),
        list(zip(features, labels)),
        compiled=compiled,
        accumulate=accumulate,
    )
    assert int(arrays[0][f"ddp/{name}/buckets"]) == 4  # 200-byte buckets: one per parameter
    for rank in range(WORLD):
        for index, expected in enumerate(reference):
            np.testing.assert_allclose(
                arrays[rank][f"ddp/{name}/{index}"], expected, rtol=2e-5, atol=2e-6
            )
    initial = [p.detach().numpy() for p in scenarios.mlp(seed=100).parameters()]
    assert not np.allclose(reference[0], initial[0])  # the steps did change the weights


def test_a_parameter_used_by_some_ranks_gets_their_mean(results):
    import kernelgrad as kg

    arrays, _ = results
    model = scenarios.TwoHeads()
    x = kg.tensor(scenarios.values(0, (3, 4), "float32", 300))
    model(x, True).backward()
    expected = model.head_b.weight.grad.numpy() / WORLD  # rank 1 contributes nothing
    for rank in range(WORLD):
        np.testing.assert_allclose(arrays[rank]["unused/head_b"], expected, rtol=1e-6)
        assert bool(arrays[rank]["unused/unused-is-none"])


def test_mismatched_models_are_refused_at_start(results):
    _, messages = results
    for rank in range(WORLD):
        message = messages[rank]["mismatch"]
        assert "the model differs across ranks" in message
        assert "rank 1 has parameter 0.weight (9, 4) float32" in message
        assert "rank 0 has parameter 0.weight (8, 4) float32" in message


def test_sync_batch_norm_on_uneven_shards_is_batch_norm_on_the_whole_batch(results):
    """SyncBatchNorm on 2 ranks holding 3 and 5 of 8 samples: each rank's outputs and
    input gradients are those rows of one BatchNorm1d on all 8 (training, momentum=None,
    two steps), the parameter gradients sum to the whole batch's, the running statistics
    are the whole batch's, and eval mode uses them."""
    arrays, _ = results
    batches, upstream, weight, bias, edges = scenarios.sync_batch_norm_data(WORLD)
    import kernelgrad as kg

    layer = kg.nn.BatchNorm1d(3, momentum=None, dtype=kg.float64)
    with kg.no_grad():
        layer.weight.copy_(kg.tensor(weight))
        layer.bias.copy_(kg.tensor(bias))
    for step in range(2):
        layer.zero_grad()
        x = kg.tensor(batches[step], requires_grad=True)
        y = layer(x)
        (y * kg.tensor(upstream[step])).sum().backward()
        for name, whole in (("output", y.detach().numpy()), ("input_grad", x.grad.numpy())):
            for rank in range(WORLD):
                got = arrays[rank][f"syncbn/{step}/{name}"]
                np.testing.assert_allclose(got, whole[edges[rank] : edges[rank + 1]], atol=1e-12)
        for name, parameter in (("weight_grad", layer.weight), ("bias_grad", layer.bias)):
            summed = sum(arrays[rank][f"syncbn/{step}/{name}"] for rank in range(WORLD))
            np.testing.assert_allclose(summed, parameter.grad.numpy(), atol=1e-12)
    layer.eval()
    whole_eval = layer(kg.tensor(batches[0])).numpy()
    for rank in range(WORLD):
        np.testing.assert_allclose(arrays[rank]["syncbn/running_mean"], layer.running_mean.numpy())
        np.testing.assert_allclose(arrays[rank]["syncbn/running_var"], layer.running_var.numpy())
        rows = slice(edges[rank], edges[rank + 1])
        np.testing.assert_allclose(arrays[rank]["syncbn/eval"], whole_eval[rows], atol=1e-12)
