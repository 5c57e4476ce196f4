"""kg.compile's replay as captured device graphs (``Backend.capture``; CUDA graphs).

A replayed step on a GPU costs a kernel launch from Python (~10 us with numba-cuda), so a
small model's compiled step is launch-bound. A backend with ``capture`` records the work a
run of steps queues once and queues all of it again with one call (a CUDA graph):

* **Which steps.** Runs of consecutive steps that only launch device work (elementwise
  and fused kernels, products, reductions, ``@kg.kernel`` launches: ``Step.device_only``).
  A guard (a host read), a host operation, a random draw (its counter advances on the
  host) and a gather or scatter that reports a bad index end a run; they run as before,
  between the graphs.
* **Buffers that stay put.** A graph holds the addresses it was captured with. Scratch
  buffers, parameters and optimizer state keep theirs from call to call; the arguments
  and the fresh outputs do not. Each of those a run touches gets a static buffer of the
  run's own: before the graph, the part of the argument the run reads is copied in; after
  it, what the run wrote is copied out (to the call's fresh output, or back into an
  argument the function writes). A training step's arguments are its batch: two copies.
* **When.** At the same replay as the CPU's native calls (``KG_NATIVE_REPLAY``, the 8th
  by default; 0 never). The capture queues the run's work once, so that call's results
  come from it; later calls replay the graph.
* **Refusals.** When the backend cannot capture a run (``CaptureUnsupportedError``: a host read
  or a driver refusal; nothing has run), that run replays step by step from then on, and
  ``KG_DEBUG=1`` says why.
"""

from __future__ import annotations

from typing import Any

from ..backends.base import CaptureUnsupportedError, View
from ..debug import debug_level, log
from .plan import step_templates

MIN_STEPS = 2  # a graph of one kernel saves nothing


def graph_runs(plan: Any, backend: Any) -> dict[int, tuple[int, GraphRun]]:
    """first step -> (stop, run) for each run of device-only steps of ``plan`` worth a
    graph (see the module docstring)."""
    runs: dict[int, tuple[int, GraphRun]] = {}
    steps = plan.steps
    position = 0
    while position < len(steps):
        if not getattr(steps[position], "device_only", False):
            position += 1
            continue
        stop = position
        while stop < len(steps) and getattr(steps[stop], "device_only", False):
            stop += 1
        if stop - position >= MIN_STEPS:
            run = GraphRun.build(plan, backend, position, stop)
            if run is not None:
                runs[position] = (stop, run)
        position = stop
    return runs


def _written(step: Any) -> list[Any]:
    """The views a step writes: its outputs; every view of a kernel or a fused reduction
    (which do not say which they write)."""
    outputs = getattr(step, "outputs", None)
    return list(outputs) if outputs is not None else step_templates(step)


def _extent(template: Any) -> tuple[int, int] | None:
    """(first, last + 1) element of the slot's buffer the view reaches, relative to the
    slot's base; None for an empty view."""
    low = high = template.offset
    for size, stride in zip(template.shape, template.strides):
        if size == 0:
            return None
        if stride > 0:
            high += (size - 1) * stride
        else:
            low += (size - 1) * stride
    return low, high + 1


class _Static:
    """A varying slot's stand-in inside one graph: ``count`` elements from ``low`` (relative
    to the slot's base), in a buffer of the run's own."""

    __slots__ = ("buffer", "copy_in", "copy_out", "count", "dtype", "low", "slot")

    def __init__(self, slot: int, low: int, count: int, dtype: Any, buffer: Any) -> None:
        self.slot, self.low, self.count, self.dtype, self.buffer = slot, low, count, dtype, buffer
        self.copy_in = self.copy_out = False


class GraphRun:
    """Steps ``first:stop`` of a plan replayed as one captured graph (see the module
    docstring); called as ``run(table, bases)`` like the CPU's native runs."""

    def __init__(self, plan: Any, backend: Any, first: int, stop: int, statics: list[_Static]):
        self.backend = backend
        self.steps = plan.steps[first:stop]
        self.label = f"steps {first}-{stop - 1}"
        self.statics = statics
        self.table = list(plan.table)
        self.bases = [0] * len(self.table)
        for static in statics:
            self.table[static.slot] = static.buffer
            self.bases[static.slot] = -static.low
        self.replay: Any = None
        self.refused: str | None = None

    @classmethod
    def build(cls, plan: Any, backend: Any, first: int, stop: int) -> GraphRun | None:
        """The run with a static buffer for each argument or fresh output it touches; None
        where a slot is seen with two dtypes (it then replays step by step)."""
        new_outputs = {s for s in plan.output_slots if plan.slots[s].kind == "new"}
        varying = set(plan.arg_slots) | new_outputs
        written_args = set(plan.written_args)
        before: set[int] = set()  # slots touched by the steps before this run
        for step in plan.steps[:first]:
            before.update(t.slot for t in step_templates(step))
        extents: dict[int, list[int]] = {}
        dtypes: dict[int, Any] = {}
        written: set[int] = set()
        for step in plan.steps[first:stop]:
            for template in step_templates(step):
                slot = template.slot
                if slot not in varying:
                    continue
                if dtypes.setdefault(slot, template.dtype) != template.dtype:
                    return None
                reach = _extent(template)
                if reach is None:
                    continue
                low, high = extents.setdefault(slot, [reach[0], reach[1]])
                extents[slot] = [min(low, reach[0]), max(high, reach[1])]
            written.update(t.slot for t in _written(step) if t.slot in varying)
        statics = []
        for slot, (low, high) in sorted(extents.items()):
            static = _Static(slot, low, high - low, dtypes[slot], None)
            static.buffer = backend.empty(static.count, static.dtype)
            is_argument = slot in plan.arg_slots
            # an argument is read; a fresh output only if earlier steps wrote some of it
            static.copy_in = is_argument or slot in before
            static.copy_out = slot in written and (
                not is_argument or plan.arg_slots[slot] in written_args
            )
            statics.append(static)
        return cls(plan, backend, first, stop, statics)

    def __call__(self, table: list[Any], bases: list[int]) -> None:
        if self.refused is not None:
            self._steps(table, bases)
            return
        self._copy(table, bases, inward=True)
        if self.replay is not None:
            self.replay()
        else:
            try:
                self.replay = self.backend.capture(self._run_static)
            except CaptureUnsupportedError as error:
                self.refused = str(error)
                if debug_level() >= 1:
                    log(f"kg.compile: {self.label} replay step by step: {error}")
                self._steps(table, bases)  # nothing of the capture ran
                return
        self._copy(table, bases, inward=False)

    def _run_static(self) -> None:
        self._steps(self.table, self.bases)

    def _steps(self, table: list[Any], bases: list[int]) -> None:
        for step in self.steps:
            step.run(table, bases)

    def _copy(self, table: list[Any], bases: list[int], inward: bool) -> None:
        from ..ops.elementwise import IDENTITY

        for static in self.statics:
            if not (static.copy_in if inward else static.copy_out):
                continue
            count, dtype = static.count, static.dtype
            outside = View(
                table[static.slot], (count,), (1,), bases[static.slot] + static.low, dtype
            )
            inside = View(static.buffer, (count,), (1,), 0, dtype)
            source, target = (outside, inside) if inward else (inside, outside)
            self.backend.elementwise(IDENTITY.scalar, [target], [source], [dtype])
