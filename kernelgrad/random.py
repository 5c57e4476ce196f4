"""``kg.random``: PyTorch's ``torch.random`` over kernelgrad's generators.

Each backend draws from its own Philox stream (``backends/philox.py``), whose state is a
dict ``{"seed": ..., "counter": ...}`` (PyTorch's is a ByteTensor): ``get_rng_state``
returns that dict and ``set_rng_state`` takes it back. As in PyTorch, ``get_rng_state`` /
``set_rng_state`` here are the CPU generator's (``kg.get_rng_state(device)`` and
``kg.cuda``'s seed functions reach the others), and ``manual_seed`` / ``seed`` seed every
device.

>>> import kernelgrad as kg
>>> kg.random.manual_seed(3)
>>> with kg.random.fork_rng():
...     inside = kg.rand(2).tolist()
>>> kg.rand(2).tolist() == inside   # the stream was put back where it was
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from .device import as_device
from .ops.creation import get_rng_state as _device_rng_state
from .ops.creation import manual_seed
from .ops.creation import set_rng_state as _set_device_rng_state
from .ops.torch_math import initial_seed, seed

__all__ = ["fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]


def get_rng_state() -> dict[str, int]:
    """The CPU generator's state (``torch.random.get_rng_state``), for :func:`set_rng_state`."""
    return _device_rng_state("cpu")


def set_rng_state(new_state: Any) -> None:
    """Restore a state that :func:`get_rng_state` returned (``torch.random.set_rng_state``)."""
    _set_device_rng_state(new_state, "cpu")


@contextlib.contextmanager
def fork_rng(
    devices: Iterable[Any] | None = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: str | None = None,
) -> Iterator[None]:
    """Within the block, draw random numbers freely: the CPU generator and those of
    ``devices`` (indices or devices of ``device_type``, ``"cuda"`` by default; None: every
    device of that type kernelgrad has used so far) are put back as they were when the
    block ends, whatever happens in it. ``enabled=False`` makes it a no-op."""
    if not enabled or device_type == "meta":
        yield
        return
    kind = device_type or "cuda"
    if devices is None:
        from .backends import loaded_backends

        targets = [d for d in loaded_backends() if d.type == kind]
    else:
        targets = [
            as_device(d) if not isinstance(d, int) else as_device(f"{kind}:{d}") for d in devices
        ]
    cpu = as_device("cpu")
    targets = [cpu, *(d for d in targets if d != cpu)]
    saved = [(device, _device_rng_state(device)) for device in targets]
    try:
        yield
    finally:
        for device, state in saved:
            _set_device_rng_state(state, device)
