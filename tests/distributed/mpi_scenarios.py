"""Scenarios run by ``mpiexec -n 2 python mpi_scenarios.py OUT`` (see
test_collectives_mpi.py): collectives, collectives inside kg.compile, and
DistributedDataParallel training. Each rank saves its results in OUT/rank-R.npz (and
messages in OUT/rank-R.json); the tests compare them with NumPy and with one-process
training computed by the same helpers below."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import kernelgrad as kg
import kernelgrad.nn.functional as F

FLOAT_TYPES = ("float32", "float64")
INT_TYPES = ("int32", "int64")
BATCH = 4  # samples per rank and step
STEPS = 3


def values(rank: int, shape: tuple[int, ...], dtype: str, salt: int) -> np.ndarray:
    """The input of ``rank`` in a collective: small integers (exact in every dtype and
    under products), different per rank and per scenario."""
    rng = np.random.default_rng([salt, rank])
    return rng.integers(-3, 4, shape).astype(dtype)


def mlp(seed: int) -> kg.nn.Module:
    kg.manual_seed(seed)
    return kg.nn.Sequential(kg.nn.Linear(6, 16), kg.nn.ReLU(), kg.nn.Linear(16, 3))


def training_data(world: int) -> tuple[np.ndarray, np.ndarray]:
    """STEPS batches of BATCH * world samples: one process reads all of a batch, rank r
    of ``world`` the rows r, r + world, ..."""
    rng = np.random.default_rng(7)
    features = rng.standard_normal((STEPS, BATCH * world, 6)).astype(np.float32)
    labels = rng.integers(0, 3, (STEPS, BATCH * world))
    return features, labels


def make_optimizer(kind: str, model: kg.nn.Module) -> kg.optim.Optimizer:
    if kind == "adam":
        return kg.optim.Adam(model.parameters(), lr=0.01)
    return kg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def train(model, optimizer, batches, wrapper=None, compiled=False, accumulate=False):
    """Train on ``batches`` [(features, labels)]; returns the final parameters. With
    ``accumulate`` each batch is two micro-batches, the first under ``no_sync``."""
    forward = wrapper if wrapper is not None else model

    def step(x, y):
        optimizer.zero_grad()
        if accumulate:
            half = x.shape[0] // 2
            context = wrapper.no_sync() if wrapper is not None else _nothing()
            with context:
                F.cross_entropy(forward(x[:half]), y[:half]).backward()
            F.cross_entropy(forward(x[half:]), y[half:]).backward()
        else:
            F.cross_entropy(forward(x), y).backward()
        optimizer.step()
        return kg.zeros(1)

    run = kg.compile(step) if compiled else step
    for features, labels in batches:
        run(kg.tensor(features), kg.tensor(labels))
    return [p.detach().numpy().copy() for p in model.parameters()]


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *args):
        return False


def shard(features: np.ndarray, labels: np.ndarray, rank: int, world: int, accumulate=False):
    """This rank's rows of each step; with ``accumulate`` each micro-batch is sharded so
    that the two micro-batches of all ranks are those of one process."""
    batches = []
    for x, y in zip(features, labels):
        if accumulate:
            half = len(x) // 2
            parts = [
                (x[:half][rank::world], y[:half][rank::world]),
                (x[half:][rank::world], y[half:][rank::world]),
            ]
            batches.append(
                (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
            )
        else:
            batches.append((x[rank::world], y[rank::world]))
    return batches


# --- the scenarios ------------------------------------------------------------------------------
def collectives(rank: int, world: int, out: dict) -> None:
    dist = kg.distributed
    salt = 0
    for dtype in FLOAT_TYPES + INT_TYPES:
        for op in ("sum", "max", "min", "product") + (("mean",) if dtype in FLOAT_TYPES else ()):
            salt += 1
            t = kg.tensor(values(rank, (3, 4), dtype, salt))
            dist.all_reduce(t, op=op)
            out[f"all_reduce/{dtype}/{op}/{salt}"] = t.numpy()
    # a strided view: only its elements change
    base = kg.tensor(values(rank, (4, 3), "float32", 100))
    dist.all_reduce(base[:, 1], op="sum")
    out["all_reduce/strided/100"] = base.numpy()
    flags = kg.tensor(values(rank, (5,), "int64", 101) > 0)
    dist.all_reduce(flags, op="max")
    out["all_reduce/bool-max/101"] = flags.numpy()
    flags = kg.tensor(values(rank, (5,), "int64", 102) > 0)
    dist.all_reduce(flags, op="min")
    out["all_reduce/bool-min/102"] = flags.numpy()
    work = dist.all_reduce(t := kg.tensor(values(rank, (7,), "float64", 103)), async_op=True)
    out["async-before-wait/103"] = np.array(work.is_completed())
    work.wait()
    out["all_reduce/async/103"] = t.numpy()
    for dtype, salt in (("int64", 110), ("float32", 111)):
        t = kg.tensor(values(rank, (2, 3), dtype, salt))
        dist.broadcast(t, src=world - 1)
        out[f"broadcast/{dtype}/{salt}"] = t.numpy()
    base = kg.tensor(values(rank, (3, 4), "float64", 112))
    dist.broadcast(base[1:, ::2], src=world - 1)
    out["broadcast/strided/112"] = base.numpy()
    parts = [kg.zeros(2, 2) for _ in range(world)]
    dist.all_gather(parts, kg.tensor(values(rank, (2, 2), "float32", 120)))
    out["all_gather/list/120"] = np.stack([p.numpy() for p in parts])
    gathered = kg.zeros(world * 3, dtype=kg.int64)
    dist.all_gather_into_tensor(gathered, kg.tensor(values(rank, (3,), "int64", 121)))
    out["all_gather/tensor/121"] = gathered.numpy()
    result = kg.zeros(3)
    dist.reduce_scatter(
        result, [kg.tensor(values(rank, (3,), "float32", 130 + k)) for k in range(world)]
    )
    out["reduce_scatter/list/130"] = result.numpy()
    result = kg.zeros(2, dtype=kg.float64)
    dist.reduce_scatter_tensor(
        result, kg.tensor(values(rank, (world * 2,), "float64", 140)), op="mean"
    )
    out["reduce_scatter/mean/140"] = result.numpy()
    dist.barrier()


def compiled_collective(rank: int, world: int, out: dict) -> None:
    @kg.compile
    def step(x):
        y = x * 2
        kg.distributed.all_reduce(y, op="mean")
        return y + 1

    for call in range(4):
        out[f"compiled/{call}"] = step(kg.tensor(values(rank, (5,), "float32", 200 + call))).numpy()
    out["compiled/plans"] = np.array(len(step.plans))


def data_parallel(rank: int, world: int, out: dict) -> None:
    from kernelgrad.nn.parallel import DistributedDataParallel

    features, labels = training_data(world)
    for name, optimizer_kind, compiled, accumulate in (
        ("eager-adam", "adam", False, False),
        ("compiled-sgd", "sgd", True, False),
        ("no-sync-adam", "adam", False, True),
    ):
        model = mlp(seed=100 + rank)  # different on each rank: DDP copies rank 0's
        wrapper = DistributedDataParallel(model, bucket_cap_mb=200 / 2**20)  # several buckets
        out[f"ddp/{name}/buckets"] = np.array(len(wrapper._buckets))
        optimizer = make_optimizer(optimizer_kind, model)
        batches = shard(features, labels, rank, world, accumulate)
        final = train(model, optimizer, batches, wrapper, compiled, accumulate)
        for index, value in enumerate(final):
            out[f"ddp/{name}/{index}"] = value


class TwoHeads(kg.nn.Module):
    """``head_b`` is used by rank 0 only; ``unused`` by no rank."""

    def __init__(self) -> None:
        super().__init__()
        kg.manual_seed(5)
        self.body = kg.nn.Linear(4, 4)
        self.head_a = kg.nn.Linear(4, 2)
        self.head_b = kg.nn.Linear(4, 2)
        self.unused = kg.nn.Linear(4, 2)

    def forward(self, x, use_b):
        h = self.body(x).relu()
        return self.head_a(h).sum() + (self.head_b(h).sum() if use_b else 0)


def unused_parameters(rank: int, world: int, out: dict) -> None:
    from kernelgrad.nn.parallel import DistributedDataParallel

    model = TwoHeads()
    wrapper = DistributedDataParallel(model)
    x = kg.tensor(values(rank, (3, 4), "float32", 300))
    wrapper(x, rank == 0).backward()
    out["unused/head_b"] = model.head_b.weight.grad.numpy()
    out["unused/unused-is-none"] = np.array(model.unused.weight.grad is None)


def mismatched_model(rank: int, world: int, messages: dict) -> None:
    from kernelgrad.nn.parallel import DistributedDataParallel

    model = kg.nn.Sequential(kg.nn.Linear(4, 8 + rank), kg.nn.ReLU())
    try:
        DistributedDataParallel(model)
    except kg.distributed.DistributedError as error:
        messages["mismatch"] = str(error)


def sync_batch_norm_data(world: int):
    """Two training batches of (8, 3, 2) float64 samples, output gradients of their shape,
    an affine start, and where each rank's (uneven) shard of a batch starts and ends."""
    rng = np.random.default_rng(11)
    batches = rng.standard_normal((2, 8, 3, 2)) * 2 + 1
    upstream = rng.standard_normal((2, 8, 3, 2))
    weight, bias = rng.standard_normal(3), rng.standard_normal(3)
    edges = [0, 3, 8] if world == 2 else [8 * r // world for r in range(world + 1)]
    return batches, upstream, weight, bias, edges


def sync_batch_norm(rank: int, world: int, out: dict) -> None:
    """SyncBatchNorm on uneven shards (3 and 5 samples of 8): two training steps, then an
    eval forward; the test compares with BatchNorm1d on the whole batches."""
    batches, upstream, weight, bias, edges = sync_batch_norm_data(world)
    start, stop = edges[rank], edges[rank + 1]
    model = kg.nn.SyncBatchNorm.convert_sync_batchnorm(
        kg.nn.Sequential(kg.nn.BatchNorm1d(3, momentum=None, dtype=kg.float64))
    )
    layer = model[0]
    with kg.no_grad():
        layer.weight.copy_(kg.tensor(weight))
        layer.bias.copy_(kg.tensor(bias))
    for step in range(2):
        layer.zero_grad()
        x = kg.tensor(batches[step, start:stop], requires_grad=True)
        y = model(x)
        (y * kg.tensor(upstream[step, start:stop])).sum().backward()
        out[f"syncbn/{step}/output"] = y.detach().numpy()
        out[f"syncbn/{step}/input_grad"] = x.grad.numpy()
        out[f"syncbn/{step}/weight_grad"] = layer.weight.grad.numpy()
        out[f"syncbn/{step}/bias_grad"] = layer.bias.grad.numpy()
    out["syncbn/running_mean"] = layer.running_mean.numpy()
    out["syncbn/running_var"] = layer.running_var.numpy()
    model.eval()
    out["syncbn/eval"] = model(kg.tensor(batches[0, start:stop])).numpy()


def main() -> None:
    folder = Path(sys.argv[1])
    dist = kg.distributed
    dist.init_process_group("mpi", timeout=120)
    rank, world = dist.get_rank(), dist.get_world_size()
    out: dict = {}
    messages: dict = {}
    collectives(rank, world, out)
    compiled_collective(rank, world, out)
    data_parallel(rank, world, out)
    unused_parameters(rank, world, out)
    mismatched_model(rank, world, messages)
    sync_batch_norm(rank, world, out)
    np.savez(folder / f"rank-{rank}.npz", **out)
    (folder / f"rank-{rank}.json").write_text(json.dumps(messages))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
