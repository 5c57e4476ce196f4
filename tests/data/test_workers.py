"""DataLoader(num_workers=N): worker threads give the batches of num_workers=0, in
order; worker information, init functions, errors, timeouts and early exits."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.data import DataLoader, Dataset, TensorDataset, get_worker_info


class Squares(Dataset):
    """Per-sample __getitem__ returning kernelgrad tensors (no get_batch)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.workers: list = []

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int):
        info = get_worker_info()
        self.workers.append(None if info is None else (info.id, info.num_workers))
        return kg.tensor([float(index)]) ** 2, index


def listed(loader):
    return [(x.tolist(), y.tolist()) for x, y in loader]


@pytest.mark.parametrize("num_workers", [1, 3])
@pytest.mark.parametrize(("shuffle", "drop_last"), [(False, False), (True, True)])
def test_workers_give_the_batches_of_the_main_thread(num_workers, shuffle, drop_last):
    options = {"batch_size": 4, "shuffle": shuffle, "drop_last": drop_last, "seed": 1}
    expected = listed(DataLoader(Squares(23), **options))
    dataset = Squares(23)
    loader = DataLoader(dataset, num_workers=num_workers, prefetch_factor=1, **options)
    assert listed(loader) == expected
    assert {worker for worker in dataset.workers} == {(i, num_workers) for i in range(num_workers)}
    arrays = TensorDataset(np.arange(30, dtype=np.float32), np.arange(30))  # get_batch
    with_workers = DataLoader(arrays, batch_size=7, shuffle=True, seed=0, num_workers=2)
    assert listed(with_workers) == listed(DataLoader(arrays, batch_size=7, shuffle=True, seed=0))


def test_main_thread_has_no_worker_info_and_init_runs_once_per_worker():
    assert get_worker_info() is None
    started = []
    dataset = Squares(8)
    loader = DataLoader(dataset, batch_size=2, num_workers=2, worker_init_fn=started.append)
    listed(loader)
    listed(loader)
    assert sorted(started) == [0, 0, 1, 1]  # new threads every epoch
    started.clear()
    persistent = DataLoader(
        dataset, batch_size=2, num_workers=2, worker_init_fn=started.append, persistent_workers=True
    )
    listed(persistent)
    listed(persistent)
    assert sorted(started) == [0, 1]  # the same threads for both epochs
    persistent._workers.shutdown()


def test_a_worker_error_reaches_the_loop_with_the_worker_and_batch_named():
    class Broken(Squares):
        def __getitem__(self, index):
            if index == 5:
                raise KeyError("no sample 5")
            return super().__getitem__(index)

    loader = DataLoader(Broken(8), batch_size=2, num_workers=2)
    with pytest.raises(KeyError, match="no sample 5") as caught:
        listed(loader)
    assert "DataLoader worker 0 while loading batch 2" in "".join(caught.value.__notes__)


def test_timeout_and_early_exit_leave_no_worker_threads():
    class Slow(Squares):
        def __getitem__(self, index):
            time.sleep(0.3)
            return super().__getitem__(index)

    with pytest.raises(RuntimeError, match=r"timed out after 0\.01 s waiting for batch 0"):
        listed(DataLoader(Slow(4), batch_size=2, num_workers=1, timeout=0.01))
    for _batch in DataLoader(Squares(40), batch_size=2, num_workers=2):
        break
    del _batch
    gc.collect()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = [t.name for t in threading.enumerate() if t.name.startswith("DataLoader")]
        if not alive:
            break
        time.sleep(0.05)
    assert not alive


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"num_workers": -1}, "num_workers must be an integer >= 0"),
        ({"prefetch_factor": 2}, "need worker threads"),
        ({"persistent_workers": True}, "need worker threads"),
        ({"num_workers": 1, "prefetch_factor": 0}, "prefetch_factor must be a positive"),
        ({"timeout": -1}, "timeout must be a number of seconds"),
    ],
)
def test_invalid_worker_options(options, expected):
    with pytest.raises(ValueError, match=expected):
        DataLoader(Squares(2), **options)


def test_pytorch_only_options_are_accepted():
    loader = DataLoader(
        Squares(5),
        batch_size=2,
        shuffle=None,
        num_workers=2,
        pin_memory=True,
        pin_memory_device="",
        multiprocessing_context="fork",
        in_order=True,
    )
    assert listed(loader) == listed(DataLoader(Squares(5), batch_size=2))
