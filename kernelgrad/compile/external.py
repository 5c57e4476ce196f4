"""Host-side operations inside ``kg.compile``: collective communication.

Some operations of a training step are not kernels: an MPI all-reduce of CPU buffers, an
NCCL call on a CUDA stream. They must still run, in order, on every replay of a compiled
step, because every process of a data-parallel job replays the same sequence of
collectives. :func:`run_host_op` is the one entry point:

* outside a trace it calls ``fn(tensors)`` at once;
* during a trace it calls ``fn(tensors)`` too (the trace runs the function eagerly) and
  records an ``external`` op: the tensors' views, which of them ``fn`` writes, and ``fn``
  itself. The graph keeps external ops whatever reads their results (another process
  waits for them), never fuses them, and orders kernels around them by the buffers they
  read and write; the replay (:class:`ExternalStep`) rebuilds the tensors over the
  replay's buffers and calls ``fn`` again.

``fn`` must do everything through the tensors it is given, and must not launch kernels
that the replay would need to see: backend calls made inside it are part of the op (they
are not recorded separately, as for a ``@kg.kernel`` launch).

>>> import kernelgrad as kg
>>> from kernelgrad.compile.external import run_host_op
>>> def double(tensors):
...     tensors[0].mul_(2)  # stands for an MPI call on the tensor's memory
>>> @kg.compile
... def step(x):
...     y = x + 1
...     run_host_op("double", double, [y], written=[0])
...     return y * 10
>>> [step(kg.ones(2)).tolist() for _ in range(3)]
[[40.0, 40.0], [40.0, 40.0], [40.0, 40.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .trace import Op, active_recorder

__all__ = ["run_host_op", "ExternalStep"]

HostFunction = Callable[[list[Any]], Any]


def run_host_op(
    label: str, fn: HostFunction, tensors: Sequence[Any], written: Sequence[int] = ()
) -> Any:
    """Run ``fn(list(tensors))`` now, and on every replay when a trace is recording.

    ``written`` lists the positions of the tensors ``fn`` writes (in place); the others
    are only read. Returns what ``fn`` returns (replays ignore it)."""
    tensors = list(tensors)
    recorder = active_recorder()
    if recorder is None:
        return fn(tensors)
    specs = []
    refs = []
    for tensor in tensors:
        ref = recorder.ref(tensor._view(), tensor._storage.backend)
        specs.append((ref, tensor._storage.device, tensor._storage.backend))
        refs.append(ref)
    op = Op(
        "external",
        [refs[position] for position in written],
        refs,
        {"fn": fn, "label": label, "specs": specs, "backend": None},
    )
    from ..autograd import no_grad

    # Backend calls inside fn belong to this op, as those of a @kg.kernel launch do.
    recorder._depth += 1
    try:
        with no_grad():
            result = fn(tensors)
    finally:
        recorder._depth -= 1
    recorder.ops.append(op)
    return result


class ExternalStep:
    """The replay of an external op: ``fn`` called on tensors over the replay's buffers."""

    def __init__(self, op: Op) -> None:
        from .plan import _Template

        self.fn = op.attrs["fn"]
        self.label = f"host {op.attrs['label']}"
        self.specs = [
            (_Template(ref), device, backend) for ref, device, backend in op.attrs["specs"]
        ]
        self.inputs = [template for template, _, _ in self.specs]
        self.outputs = [_Template(ref) for ref in op.outputs]
        self.shape = self.inputs[0].shape if self.inputs else ()

    def run(self, table: list[Any], bases: list[int]) -> None:
        from ..autograd import no_grad
        from ..tensor import Storage, Tensor

        tensors = [
            Tensor._make(
                Storage(table[template.slot], device, backend),
                template.shape,
                template.strides,
                template.offset + bases[template.slot],
                template.dtype,
            )
            for template, device, backend in self.specs
        ]
        with no_grad():
            self.fn(tensors)
