"""``DataLoader(num_workers=N)``: batches prepared ahead by N worker threads.

PyTorch's workers are processes. kernelgrad's are threads of the training process, for
two reasons: a process forked after Numba's OpenMP pool has started aborts as soon as
it runs a parallel kernel (so forked workers could not use kernelgrad), and spawned
workers would need a picklable dataset and an ``if __name__ == "__main__":`` guard that
ported Linux programs do not have. So, with threads:

* the batches and their order are those of ``num_workers=0`` (batch ``k`` is loaded by
  worker ``k % N``, and batches are handed out in order);
* dataset code needs no pickling and no main guard, and may hold kernelgrad tensors;
* work that releases the interpreter lock (NumPy gathers, file reads, image decoding)
  overlaps with training; pure-Python per-sample work does not run in parallel;
* randomness in dataset code (augmentations) draws from generators shared with the
  training loop, in an order that depends on thread timing: for reproducible random
  augmentation use ``num_workers=0``.

``get_worker_info()`` tells dataset code which worker runs it, as in PyTorch.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerInfo", "WorkerPool", "get_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


class _Current(threading.local):
    def __init__(self) -> None:
        self.info: WorkerInfo | None = None


_current = _Current()


def get_worker_info() -> WorkerInfo | None:
    """The :class:`WorkerInfo` of the DataLoader worker running this code, or None in
    the main thread (``num_workers=0``).

    >>> from kernelgrad.data import get_worker_info
    >>> get_worker_info() is None
    True
    """
    return _current.info


class WorkerPool:
    """``num_workers`` threads that run ``load(indices)`` for batches of indices, at most
    ``num_workers * prefetch_factor`` batches ahead, yielding results in order."""

    def __init__(
        self,
        num_workers: int,
        prefetch_factor: int,
        dataset: Any,
        seed: int,
        worker_init_fn: Callable[[int], Any] | None,
        timeout: float,
    ) -> None:
        self.num_workers = num_workers
        self.window = num_workers * prefetch_factor
        self.timeout = timeout or None
        self._dataset = dataset
        self._seed = seed
        self._worker_init_fn = worker_init_fn
        self._executors = [
            concurrent.futures.ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix=f"DataLoader-worker-{worker}",
                initializer=self._start_worker,
                initargs=(worker,),
            )
            for worker in range(num_workers)
        ]

    def _start_worker(self, worker: int) -> None:
        _current.info = WorkerInfo(worker, self.num_workers, self._seed + worker, self._dataset)
        if self._worker_init_fn is not None:
            self._worker_init_fn(worker)

    def run(self, load: Callable[[Any], Any], batches: Iterable[Any]) -> Iterator[Any]:
        """``load(batch)`` for every batch, computed ahead by the workers, in order."""
        pending: collections.deque[tuple[int, concurrent.futures.Future]] = collections.deque()
        numbered = enumerate(batches)
        try:
            for number, batch in itertools.islice(numbered, self.window):
                pending.append((number, self._submit(number, load, batch)))
            while pending:
                number, future = pending.popleft()
                try:
                    result = future.result(timeout=self.timeout)
                except concurrent.futures.TimeoutError:
                    raise RuntimeError(
                        f"DataLoader timed out after {self.timeout} s waiting for batch "
                        f"{number} from worker {number % self.num_workers} (timeout=)"
                    ) from None
                except BaseException as error:
                    error.add_note(
                        f"(raised in DataLoader worker {number % self.num_workers} while "
                        f"loading batch {number})"
                    )
                    raise
                for next_number, batch in itertools.islice(numbered, 1):
                    pending.append((next_number, self._submit(next_number, load, batch)))
                yield result
        finally:
            for _, future in pending:
                future.cancel()

    def run_streams(self, make: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        """An IterableDataset's batches: each worker runs its own ``make()`` iterator (made
        in its thread, where ``get_worker_info()`` names it), one batch ahead; the
        batches come from the workers in turn, skipping those that are done (PyTorch's
        order)."""
        done = object()
        streams: dict[int, Iterator[Any]] = {}  # each touched only by its worker's thread

        def step(worker: int) -> Any:
            stream = streams.get(worker)
            if stream is None:
                stream = streams[worker] = make()
            return next(stream, done)

        live = list(range(self.num_workers))
        futures = {worker: self._executors[worker].submit(step, worker) for worker in live}
        try:
            while live:
                for worker in list(live):
                    try:
                        result = futures[worker].result(timeout=self.timeout)
                    except concurrent.futures.TimeoutError:
                        raise RuntimeError(
                            f"DataLoader timed out after {self.timeout} s waiting for a batch "
                            f"from worker {worker} (timeout=)"
                        ) from None
                    except BaseException as error:
                        error.add_note(f"(raised in DataLoader worker {worker})")
                        raise
                    if result is done:
                        live.remove(worker)
                        continue
                    futures[worker] = self._executors[worker].submit(step, worker)
                    yield result
        finally:
            for future in futures.values():
                future.cancel()

    def _submit(self, number: int, load: Callable[[Any], Any], batch: Any) -> Any:
        return self._executors[number % self.num_workers].submit(load, batch)

    def shutdown(self) -> None:
        for executor in self._executors:
            executor.shutdown(wait=True, cancel_futures=True)
