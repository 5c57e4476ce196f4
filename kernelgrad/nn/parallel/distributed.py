"""``DistributedDataParallel``: one model replica per rank, gradients averaged every step.

How it works (PyTorch's DDP, on kernelgrad's autograd hooks):

* **Same start.** The constructor compares a digest of every parameter's and buffer's
  name, shape and dtype across ranks (a mismatch is an error naming the rank and the
  parameter), then broadcasts rank 0's values, so every replica starts equal.
* **Buckets.** Parameters are grouped, in reverse order of definition (the order
  backward finishes them), into flat buffers of at most ``bucket_cap_mb`` megabytes per
  dtype and device; each buffer also holds one flag per parameter ("this rank has a
  gradient for it").
* **Overlap.** A hook (``kg.autograd.register_post_accumulate_grad_hook``) marks each
  parameter ready as soon as backward has finished its gradient. A complete bucket
  copies its gradients in (one kernel on the CPU) and starts a non-blocking all-reduce
  (mean) right away, while backward goes on with earlier layers; buckets start strictly
  in order, so every rank issues the same collectives. When backward ends
  (``kg.autograd.queue_callback``), the remaining buckets start, every reduction is
  waited for, and the averages are copied back into ``.grad``. A parameter without a
  gradient on this rank contributes zeros; it gets the average if any rank had a
  gradient for it, and keeps ``grad=None`` otherwise.
* **Gradient accumulation.** Inside ``with ddp.no_sync():`` backward only accumulates
  local gradients; the first backward outside it averages the accumulated sums.
* ``kg.compile``: the copies are ordinary kernels and the reductions host-side ops, so a
  compiled training step replays them; entering or leaving ``no_sync`` traces again.

On the CPU, MPI advances a reduction only inside MPI calls: the ranks test their
reductions in every hook and whenever a later bucket starts, which is where the
overlap comes from.
"""

from __future__ import annotations

import contextlib
import hashlib
import weakref
from collections.abc import Iterator
from typing import Any

from ... import autograd, tracing
from ...backends.base import ScalarFunction
from .._fused import launch_each
from ..module import Module, Parameter

__all__ = ["DistributedDataParallel"]

DEFAULT_BUCKET_MB = 25.0


def _copy(value):
    return value


_COPY = ScalarFunction.from_python(_copy)


class _Bucket:
    """A flat buffer holding the gradients of some parameters, then a flag per parameter.

    Gradients are copied in when the bucket is complete and out after the reduction,
    each way in one ``launch_each`` (one kernel for all of them on the CPU)."""

    def __init__(self, parameters: list[Parameter]) -> None:
        from ...ops.creation import zeros

        self.parameters = parameters
        self.offsets: list[int] = []
        total = 0
        for parameter in parameters:
            self.offsets.append(total)
            total += parameter.numel()
        self.size = total
        first = parameters[0]
        self.dtype = first.dtype
        self.buffer = zeros(total + len(parameters), dtype=first.dtype, device=first.device)
        self.flags = self.buffer[total:]
        # views made once: slicing a tensor costs more than the copy of a small gradient
        self.segments = [
            self.buffer[start : start + p.numel()] for start, p in zip(self.offsets, parameters)
        ]
        self.shaped = [segment.view(p.shape) for segment, p in zip(self.segments, parameters)]
        self.ready: set[int] = set()
        self.work: Any = None

    @property
    def full(self) -> bool:
        return len(self.ready) == len(self.parameters)

    def copy_in(self) -> None:
        """This rank's gradients (zeros where it has none) and their flags."""
        present = [k for k, p in enumerate(self.parameters) if p.grad is not None]
        launch_each(
            _COPY, [([self.shaped[k]], [self.parameters[k].grad]) for k in present], self.dtype
        )
        self.flags.fill_(1)
        if len(present) < len(self.parameters):
            for position, parameter in enumerate(self.parameters):
                if parameter.grad is None:
                    self.segments[position].zero_()
                    self.flags[position].fill_(0)

    def write_back(self) -> None:
        """Put the averaged gradients into ``.grad``."""
        present = [(k, p) for k, p in enumerate(self.parameters) if p.grad is not None]
        launch_each(_COPY, [([p.grad], [self.shaped[k]]) for k, p in present], self.dtype)
        for position, parameter in enumerate(self.parameters):
            # a gradient this rank lacks: the average if another rank had one
            if parameter.grad is None and self.flags[position].item() > 0:
                parameter.grad = self.shaped[position].clone()


class _GradientHook:
    """Calls the DDP wrapper without keeping it alive (the registry holds the hook)."""

    def __init__(self, owner: DistributedDataParallel) -> None:
        self.owner = weakref.ref(owner)

    def __call__(self, parameter: Parameter) -> None:
        owner = self.owner()
        if owner is not None:
            owner._gradient_ready(parameter)


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training: call it like the module; after each
    ``backward()`` every rank's ``.grad`` holds the mean of all ranks' gradients.

    Args:
        module: the model, already on its device (``module.to(device)`` first).
        bucket_cap_mb: the size of the gradient buckets reduced together; smaller
            buckets start reducing earlier in backward, larger ones make fewer calls.
        broadcast_buffers: copy rank 0's buffers (BatchNorm statistics) to every rank
            before each forward.
        group: the process group (default: the one ``init_process_group`` made).

    The wrapper's ``state_dict`` names start with ``module.`` (as in PyTorch); save
    ``ddp.module`` to get a checkpoint that loads into the plain model.

    >>> import kernelgrad as kg
    >>> _ = kg.distributed.init_process_group("mpi")
    >>> model = kg.nn.parallel.DistributedDataParallel(kg.nn.Linear(3, 1))
    >>> model(kg.ones(4, 3)).sum().backward()       # gradients averaged over ranks
    >>> model.module.weight.grad.shape
    kg.Size([1, 3])
    >>> kg.distributed.destroy_process_group()
    """

    def __init__(
        self,
        module: Module,
        *,
        bucket_cap_mb: float = DEFAULT_BUCKET_MB,
        broadcast_buffers: bool = True,
        group: Any = None,
    ) -> None:
        super().__init__()
        from ...distributed import get_group

        if not isinstance(module, Module):
            raise TypeError(
                f"DistributedDataParallel wraps a kg.nn.Module, got {type(module).__name__}"
            )
        if not bucket_cap_mb > 0:
            raise ValueError(f"bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        self.process_group = group if group is not None else get_group()
        self.broadcast_buffers = broadcast_buffers
        self.require_backward_grad_sync = True
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        devices = {str(p.device) for _, p in named}
        if len(devices) > 1:
            raise ValueError(
                "DistributedDataParallel needs the module on one device; its parameters are "
                f"on {', '.join(sorted(devices))}"
            )
        self._check_same_model(module)
        self._broadcast_from_rank_0(module)
        self._buckets = _make_buckets([p for _, p in named], bucket_cap_mb * 2**20)
        self._position: dict[int, tuple[int, int]] = {
            id(parameter): (index, position)
            for index, bucket in enumerate(self._buckets)
            for position, parameter in enumerate(bucket.parameters)
        }
        self._in_backward = False
        self._next_bucket = 0
        self._watched: set[int] = set()
        hook = _GradientHook(self)
        handles = [autograd.register_post_accumulate_grad_hook(p, hook) for _, p in named]
        weakref.finalize(self, _remove_hooks, handles)

    # --- start: the same model everywhere -----------------------------------------------------
    def _describe(self, module: Module) -> list[str]:
        entries = [
            f"parameter {name} {tuple(p.shape)} {p.dtype.name}"
            for name, p in module.named_parameters()
        ]
        entries += [
            f"buffer {name} {tuple(b.shape)} {b.dtype.name}" for name, b in module.named_buffers()
        ]
        return entries

    def _check_same_model(self, module: Module) -> None:
        from ...distributed import DistributedError, all_gather_into_tensor
        from ...dtypes import int64
        from ...ops.creation import empty, tensor

        group = self.process_group
        if group.size == 1:
            return
        mine = self._describe(module)
        digest = hashlib.sha256("\n".join(mine).encode()).digest()
        words = [int.from_bytes(digest[i : i + 7], "little") for i in range(0, 28, 7)]
        gathered = empty(group.size, len(words), dtype=int64)
        all_gather_into_tensor(gathered, tensor(words, dtype=int64))
        rows = [tuple(row) for row in gathered.tolist()]
        if len(set(rows)) == 1:
            return
        # Every rank is alive (the exchange above completed): gather the descriptions.
        everyone = group.comm.allgather(mine)
        raise DistributedError(
            "DistributedDataParallel: the model differs across ranks, so their gradients "
            "cannot be averaged:\n" + _differences(everyone) + "\nBuild the same model on "
            "every rank (same constructor arguments; load checkpoints before wrapping)."
        )

    def _broadcast_from_rank_0(self, module: Module) -> None:
        from ...distributed import broadcast

        for _, value in list(module.named_parameters()) + list(module.named_buffers()):
            broadcast(value.detach(), src=0)

    # --- backward ------------------------------------------------------------------------------
    def _gradient_ready(self, parameter: Parameter) -> None:
        recorder = tracing.active_recorder()
        if recorder is not None and id(recorder) not in self._watched:
            self._watched.add(id(recorder))
            recorder.watch(
                "DistributedDataParallel's gradient synchronisation (no_sync)",
                lambda: self.require_backward_grad_sync,
            )
        if not self.require_backward_grad_sync:
            return
        if not self._in_backward:
            self._in_backward = True
            self._next_bucket = 0
            for bucket in self._buckets:
                bucket.ready.clear()
            autograd.queue_callback(self._finish_backward)
        index, position = self._position[id(parameter)]
        self._buckets[index].ready.add(position)
        self._launch_full_buckets()
        self.process_group.progress()

    def _launch_full_buckets(self, everything: bool = False) -> None:
        from ...distributed import all_reduce

        while self._next_bucket < len(self._buckets):
            bucket = self._buckets[self._next_bucket]
            if not bucket.full and not everything:
                return
            with autograd.no_grad():
                bucket.copy_in()
            bucket.work = all_reduce(bucket.buffer, op="mean", async_op=True)
            self._next_bucket += 1

    def _finish_backward(self) -> None:
        self._in_backward = False
        self._launch_full_buckets(everything=True)
        with autograd.no_grad():
            for bucket in self._buckets:
                bucket.work.wait()
                bucket.work = None
            for bucket in self._buckets:
                bucket.write_back()

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside only accumulate local gradients (no communication);
        the next backward outside averages the accumulated sums.

        >>> import kernelgrad as kg
        >>> _ = kg.distributed.init_process_group("mpi")
        >>> ddp = kg.nn.parallel.DistributedDataParallel(kg.nn.Linear(2, 1))
        >>> with ddp.no_sync():
        ...     ddp(kg.ones(1, 2)).sum().backward()   # local only
        >>> ddp(kg.ones(1, 2)).sum().backward()       # averaged: both micro-batches
        >>> ddp.module.weight.grad.tolist()
        [[2.0, 2.0]]
        >>> kg.distributed.destroy_process_group()
        """
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    # --- forward -------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers and self.process_group.size > 1:
            from ...distributed import broadcast

            for buffer in self.module.buffers():
                broadcast(buffer, src=0)
        return self.module(*args, **kwargs)

    def extra_repr(self) -> str:
        sizes = ", ".join(str(bucket.size) for bucket in self._buckets)
        return f"world_size={self.process_group.size}, buckets=[{sizes}] elements"


def _make_buckets(parameters: list[Parameter], cap_bytes: float) -> list[_Bucket]:
    """Parameters in reverse order, split into buckets of at most ``cap_bytes`` per
    (device, dtype); a parameter larger than the cap gets a bucket of its own."""
    groups: dict[tuple[str, str], list[list[Parameter]]] = {}
    order: list[tuple[str, str]] = []
    for parameter in reversed(parameters):
        key = (str(parameter.device), parameter.dtype.name)
        if key not in groups:
            groups[key] = [[]]
            order.append(key)
        current = groups[key][-1]
        used = sum(p.numel() for p in current) * parameter.dtype.itemsize
        if current and used + parameter.numel() * parameter.dtype.itemsize > cap_bytes:
            current = []
            groups[key].append(current)
        current.append(parameter)
    buckets = [_Bucket(members) for key in order for members in groups[key] if members]
    # launch order: by the position of each bucket's first parameter in backward
    position = {id(p): k for k, p in enumerate(reversed(parameters))}
    return sorted(buckets, key=lambda bucket: position[id(bucket.parameters[0])])


def _remove_hooks(handles: list[Any]) -> None:
    for handle in handles:
        handle.remove()


def _differences(descriptions: list[list[str]]) -> str:
    """What differs between rank 0's model and each other rank's."""
    lines = []
    reference = descriptions[0]
    for rank, entries in enumerate(descriptions[1:], start=1):
        if entries == reference:
            continue
        for position in range(max(len(entries), len(reference))):
            ours = reference[position] if position < len(reference) else "nothing"
            theirs = entries[position] if position < len(entries) else "nothing"
            if ours != theirs:
                lines.append(f"  rank {rank} has {theirs} where rank 0 has {ours}")
                break
        extra = len(entries) - len(reference)
        if extra:
            lines.append(
                f"  rank {rank} has {len(entries)} parameters and buffers, rank 0 has "
                f"{len(reference)}"
            )
    return "\n".join(lines)
