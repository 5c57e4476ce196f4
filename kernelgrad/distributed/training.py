"""What ``kernelgrad train`` does differently as one rank of a data-parallel job.

The command asks a :class:`TrainingWorld` at a few points; alone (the default) every
answer is "as before". Started by ``kernelgrad train --nproc N`` (or under ``mpiexec``),
the command joins the process group and:

* runs on ``cuda:<local rank>`` when the device is CUDA;
* reads its shard of the training set (:class:`~kernelgrad.data.DistributedSampler`,
  ``--batch-size`` / N samples per step, so a step still sees ``--batch-size`` samples in
  total and N processes follow the one-process run) and of the test set;
* trains a :class:`~kernelgrad.nn.parallel.DistributedDataParallel` model, each rank
  with a random stream of its own (dropout masks), seeded from the run's;
* sums the epoch's training and test figures over the ranks (losses, correct
  predictions, per-class counts) before printing them;
* prints, and writes checkpoints, metrics and plots, on rank 0 only (the other ranks'
  standard output is discarded, and their progress bar is not drawn).

A checkpoint holds the model, the optimizer and the epoch; the shuffling order follows
from the seed and the epoch, so a run resumes with any number of processes.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

__all__ = ["TrainingWorld", "from_environment"]

from .supervise import LAUNCHED_ENV

_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")


class TrainingWorld:
    """One process: every method returns what it is given."""

    rank = 0
    size = 1
    is_main = True

    def device(self, device: Any) -> Any:
        return device

    def loaders(self, train_loader: Any, test_loader: Any) -> tuple[Any, Any]:
        return train_loader, test_loader

    def wrap(self, model: Any) -> Any:
        return model

    def progress(self, progress: Any) -> Any:
        return progress

    def epoch_result(self, result: Any) -> Any:
        return result

    def evaluation(self, evaluation: dict[str, Any], classes: int) -> dict[str, Any]:
        return evaluation

    def info(self) -> dict[str, Any]:
        return {}


def from_environment() -> TrainingWorld:
    """A :class:`DistributedWorld` when this process was started as one rank of a job
    (by ``kernelgrad train --nproc``, or by ``mpiexec`` with more than one process)."""
    launched = os.environ.get(LAUNCHED_ENV) == "1"
    sizes = [os.environ.get(name, "") for name in _SIZE_VARIABLES]
    if launched or any(size.isdigit() and int(size) > 1 for size in sizes):
        return DistributedWorld()
    return TrainingWorld()


class _RankProgress:
    """Rank 0's progress bar counts every rank's samples (shards are equally long);
    the other ranks draw nothing."""

    def __init__(self, progress: Any, size: int, draw: bool) -> None:
        self.progress = progress
        self.size = size
        self.draw = draw

    def update(self, done: int, loss: float | None) -> None:
        if self.draw:
            self.progress.update(min(done * self.size, self.progress.total), loss)

    def close(self) -> None:
        if self.draw:
            self.progress.close()


class DistributedWorld(TrainingWorld):
    """One rank of ``world_size``: shards, DDP, summed figures, rank 0 writes."""

    def __init__(self) -> None:
        from . import get_group, init_process_group, is_initialized

        self.group = get_group() if is_initialized() else init_process_group()
        self.rank = self.group.rank
        self.size = self.group.size
        self.is_main = self.rank == 0
        if not self.is_main:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the process's lifetime)

    def device(self, device: Any) -> Any:
        if device.type != "cuda" or device.index is not None:
            return device
        from .. import cuda
        from ..device import as_device

        count = max(int(cuda.device_count()), 1)
        return as_device(f"cuda:{self.group.local_rank % count}")

    def loaders(self, train_loader: Any, test_loader: Any) -> tuple[Any, Any]:
        from ..data import DataLoader, DistributedSampler, Subset

        batch = train_loader.batch_size
        check_batch_size(batch, self.size)
        dataset = train_loader.dataset
        sampler = DistributedSampler(
            dataset, self.size, self.rank, shuffle=train_loader.shuffle, seed=train_loader.seed
        )
        train = DataLoader(
            dataset, batch_size=batch // self.size, sampler=sampler, device=train_loader.device
        )
        tests = test_loader.dataset
        test = DataLoader(
            Subset(tests, range(self.rank, len(tests), self.size)),
            batch_size=test_loader.batch_size,
            device=test_loader.device,
        )
        return train, test

    def wrap(self, model: Any) -> Any:
        """DDP, and a random stream per rank (dropout masks), drawn from the common one."""
        from ..nn.parallel import DistributedDataParallel
        from ..ops.creation import manual_seed, randint

        wrapped = DistributedDataParallel(model)
        manual_seed(int(randint(0, 2**31 - 1, (1,)).item()) + self.rank)
        return wrapped

    def progress(self, progress: Any) -> Any:
        return _RankProgress(progress, self.size, self.is_main)

    def _sum(self, values: list[float]) -> list[float]:
        from ..dtypes import float64
        from ..ops.creation import tensor
        from . import all_reduce

        total = tensor(values, dtype=float64)
        all_reduce(total)
        return total.tolist()

    def _max(self, value: float) -> float:
        from ..dtypes import float64
        from ..ops.creation import tensor
        from . import all_reduce

        largest = tensor([value], dtype=float64)
        all_reduce(largest, op="max")
        return largest.item()

    def epoch_result(self, result: Any) -> Any:
        """Training loss and accuracy over every rank's samples; the slowest rank's time."""
        samples = result.samples
        local = [_weighted(result.loss, samples), _weighted(result.accuracy, samples), samples]
        loss_sum, correct, total = self._sum(local)
        seconds = self._max(result.seconds)
        nan = float("nan")
        return dataclasses.replace(
            result,
            loss=loss_sum / total if total else nan,
            accuracy=correct / total if total else nan,
            samples=int(total),
            seconds=seconds,
        )

    def evaluation(self, evaluation: dict[str, Any], classes: int) -> dict[str, Any]:
        """Test loss, accuracy and per-class accuracy over every rank's shard."""
        samples = evaluation["samples"]
        counts = [0.0] * (2 * classes)
        for entry in evaluation["per_class"]:
            counts[2 * entry["class"]] = entry["samples"]
            counts[2 * entry["class"] + 1] = _weighted(entry["accuracy"], entry["samples"])
        local = [
            _weighted(evaluation["loss"], samples),
            _weighted(evaluation["accuracy"], samples),
            samples,
        ]
        summed = self._sum(local + counts)
        loss_sum, correct, total = summed[:3]
        per_class = []
        for label in range(classes):
            count = round(summed[3 + 2 * label])
            hits = round(summed[4 + 2 * label])
            per_class.append(
                {"class": label, "samples": count, "accuracy": hits / count if count else None}
            )
        nan = float("nan")
        return {
            "loss": loss_sum / total if total else nan,
            "accuracy": correct / total if total else nan,
            "samples": int(total),
            "per_class": per_class,
        }

    def info(self) -> dict[str, Any]:
        import numba

        return {"processes": self.size, "threads_per_process": numba.get_num_threads()}


def check_batch_size(batch: int, processes: int) -> None:
    """``--batch-size`` is the batch of one step over all processes: it must divide."""
    from ..cli import UserError

    if batch % processes:
        raise UserError(
            f"--batch-size {batch} is the number of samples of one step over all "
            f"{processes} processes, so it must be a multiple of --nproc {processes} "
            f"(e.g. {batch - batch % processes or processes})"
        )


def _weighted(mean: float | None, count: int) -> float:
    """``mean * count``, with 0 for an empty shard (whose mean is NaN or None)."""
    if not count or mean is None:
        return 0.0
    return float(mean) * count
