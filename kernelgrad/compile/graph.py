"""The traced graph: which buffers live on, which ops are dead, and which ops fuse.

The recorded ops form a graph through the buffers (slots) they write and read. The
rules, after tinygrad's:

* **Dead code.** An op whose results nothing reads, that writes no argument, captured
  tensor or buffer Python still holds, is dropped (not a random draw: it advances the
  random stream that later draws continue).
* **Inline producers into their consumers.** An elementwise op whose fresh output buffer
  is read only by ops of one kernel (usually a single consumer), and not kept by Python,
  is computed inside that kernel instead of being stored: the kernel loads the
  producer's inputs and runs its scalar function once per element. A consumer may read
  it broadcast (the producer is then recomputed per broadcast element).
* **Reduction prologues and epilogues**: an elementwise chain feeding a sum/max/min
  is computed inside the reduction's loop; an elementwise chain that reads the reduced
  value element for element (``mean``'s division) runs after it in the same kernel. A
  reduction whose result is broadcast back (softmax's ``x - max``) ends the kernel.
* **Never fused:** matmul, gather/scatter, random numbers, buffers with several writers
  (``cat``, slices written in place), and any move that would make an op read a buffer
  after a later op wrote it in place (optimizer updates keep their order).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from ..shapes import broadcast_strides, contiguous_strides
from .inline import inlinable
from .trace import Op, Slot, ViewRef

FUSABLE_REDUCTIONS = ("sum", "max", "min")
_ALWAYS_KEPT = ("guard", "external", "random", "rng_get", "rng_set", "generator_seed")


@dataclass
class Group:
    """Ops that run as one kernel. ``members`` are op indices in order; the root is the
    last. ``fused`` maps each buffer the kernel no longer stores to the member that
    computes it; ``consumer`` maps such a member to one member that reads it."""

    root: int
    members: list[int]
    reduce_op: int | None = None
    fused: dict[int, int] = field(default_factory=dict)
    consumer: dict[int, int] = field(default_factory=dict)


def lift(view: ViewRef, shape: tuple[int, ...]) -> ViewRef:
    """The view broadcast to ``shape`` (stride 0 along new or expanded dims)."""
    if view.shape == shape:
        return view
    strides = broadcast_strides(view.shape, view.strides, shape)
    return ViewRef(view.slot, shape, strides, view.offset, view.dtype)


def _lifts_to(view: ViewRef, shape: tuple[int, ...]) -> bool:
    """Whether :func:`lift` can broadcast ``view`` to ``shape`` (a reader may see the
    buffer with another rank, e.g. through a reshape, which no broadcast gives)."""
    pad = len(shape) - len(view.shape)
    return pad >= 0 and all(size in (1, target) for size, target in zip(view.shape, shape[pad:]))


def _covers(view: ViewRef, slot: Slot) -> bool:
    return (
        view.offset == 0
        and prod(view.shape) == slot.numel
        and _contiguous(view.shape, view.strides)
    )


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    expected = contiguous_strides(shape)
    return all(s == e or n == 1 for n, s, e in zip(shape, strides, expected))


def _same_view(a: ViewRef, b: ViewRef) -> bool:
    if a.slot != b.slot or a.shape != b.shape or a.offset != b.offset:
        return False
    return all(x == y or n == 1 for n, x, y in zip(a.shape, a.strides, b.strides))


class Analysis:
    """Readers, writers, liveness and fusion groups of a recorded trace."""

    def __init__(
        self,
        ops: list[Op],
        slots: list[Slot],
        live_out: set[int],
        fuse: bool = True,
    ) -> None:
        self.ops = ops
        self.slots = slots
        self.live_out = live_out
        self.fuse = fuse
        self.writers: dict[int, list[int]] = {}
        self.readers: dict[int, list[int]] = {}
        for index, op in enumerate(ops):
            for view in op.outputs:
                self.writers.setdefault(view.slot, []).append(index)
            for view in op.input_views():
                readers = self.readers.setdefault(view.slot, [])
                if not readers or readers[-1] != index:
                    readers.append(index)
        self.needed = self._needed()
        self._inlinable: dict[int, bool] = {}
        self.groups = self._fuse()

    # --- dead code ----------------------------------------------------------------------------
    def _needed(self) -> list[bool]:
        wanted = set(self.live_out)
        needed = [False] * len(self.ops)
        for index in range(len(self.ops) - 1, -1, -1):
            op = self.ops[index]
            # guards and host-side ops (collectives: other processes wait for them) stay,
            # and so do random draws and changes of a random state, whatever reads their
            # results: each moves a stream on the host that later draws (and later calls)
            # continue from
            if op.kind in _ALWAYS_KEPT or any(v.slot in wanted for v in op.outputs):
                needed[index] = True
                for view in op.input_views():
                    wanted.add(view.slot)
        return needed

    # --- fusion -------------------------------------------------------------------------------
    def _is_inlinable(self, index: int) -> bool:
        found = self._inlinable.get(index)
        if found is None:
            op = self.ops[index]
            found = op.kind == "elementwise" and inlinable(op.attrs["fn"])
            self._inlinable[index] = found
        return found

    def _fusable_reduce(self, index: int) -> bool:
        op = self.ops[index]
        return (
            self.fuse
            and op.kind == "reduce"
            and op.attrs["kind"] in FUSABLE_REDUCTIONS
            and bool(op.attrs["axes"])
            # an optional primitive: without it the reduction runs unfused
            and callable(getattr(op.attrs["backend"], "fused_reduce", None))
        )

    def _producer(self, slot: int, group: Group) -> int | None:
        """The op whose output ``group`` may compute itself instead of loading, or None:
        a fresh buffer nobody keeps, written once, read only by members of ``group``."""
        info = self.slots[slot]
        if info.kind != "new" or slot in self.live_out or slot in group.fused:
            return None
        writers = self.writers.get(slot, [])
        if len(writers) != 1 or writers[0] in group.members:
            return None
        readers = self.readers.get(slot, [])
        if not readers or any(r not in group.members for r in readers):
            return None
        producer = writers[0]
        if producer > min(readers):
            return None
        op = self.ops[producer]
        if not self.needed[producer] or len(op.outputs) != 1:
            return None
        if not _covers(op.outputs[0], info):
            return None
        if op.kind == "elementwise" and self._is_inlinable(producer):
            return producer
        if self._fusable_reduce(producer):
            return producer
        return None

    def _fuse(self) -> list[Group]:
        group_of: dict[int, Group] = {}
        groups: list[Group] = []
        for index, op in enumerate(self.ops):
            if not self.needed[index]:
                continue
            group = Group(root=index, members=[index])
            if op.kind == "reduce" and self._fusable_reduce(index):
                group.reduce_op = index
            consumer_fusable = self.fuse and (
                (op.kind == "elementwise" and self._is_inlinable(index))
                or group.reduce_op is not None
            )
            merged = consumer_fusable
            while merged:
                merged = False
                slots = dict.fromkeys(
                    v.slot for m in group.members for v in self.ops[m].input_views()
                )
                for slot in slots:
                    producer = self._producer(slot, group)
                    if producer is None:
                        continue
                    candidate = group_of[producer]
                    if candidate.root != producer:
                        continue
                    if self._compatible(candidate, group, slot) and self._no_hazards(
                        candidate, group
                    ):
                        self._merge(candidate, group, producer, slot, groups)
                        merged = True
                        break
            groups.append(group)
            for member in group.members:
                group_of[member] = group
        return groups

    def _merge(
        self, producer_group: Group, group: Group, producer: int, slot: int, groups: list[Group]
    ) -> None:
        group.members = sorted(producer_group.members + group.members)
        group.fused.update(producer_group.fused)
        group.consumer.update(producer_group.consumer)
        group.fused[slot] = producer
        group.consumer[producer] = self.readers[slot][0]
        if producer_group.reduce_op is not None:
            group.reduce_op = producer_group.reduce_op
        groups.remove(producer_group)

    def _compatible(self, producer_group: Group, group: Group, slot: int) -> bool:
        producer = self.ops[producer_group.root]
        produced = producer.outputs[0]
        readers = self.readers[slot]
        with_reduction = producer_group.reduce_op is not None or group.reduce_op is not None
        if producer_group.reduce_op is not None and group.reduce_op is not None:
            return False
        if len(readers) > 1 and any(
            self.ops[r].kind == "reduce"
            or (group.reduce_op is not None and self.is_prologue(group, r))
            for r in readers
        ):
            return False  # computed once, it must live in one loop space
        for reader in readers:
            op = self.ops[reader]
            reads = [v for v in op.input_views() if v.slot == slot]
            if op.kind == "reduce":
                # a prologue: the reduction reads exactly what the producer wrote
                if producer.kind != "elementwise" or producer_group.reduce_op is not None:
                    return False
                if not all(_same_view(v, produced) for v in reads):
                    return False
                continue
            shape = op.outputs[0].shape
            if with_reduction:
                # inside a reduction's epilogue: element for element only
                if producer.kind == "reduce":
                    ok = all(
                        v.offset == 0
                        and prod(v.shape) == prod(produced.shape)
                        and _contiguous(v.shape, v.strides)
                        and v.shape == shape
                        for v in reads
                    )
                else:
                    ok = all(_same_view(v, produced) and v.shape == shape for v in reads)
                if not ok:
                    return False
            elif not _lifts_to(produced, shape) or not all(
                _same_view(v, lift(produced, shape)) for v in reads
            ):
                return False
        # the producers' inputs must not alias what the kernel writes
        root = self.ops[group.root]
        written = {v.slot: v for v in root.outputs}
        for member in producer_group.members:
            for view in self.ops[member].input_views():
                if view.slot not in written:
                    continue
                target = written[view.slot]
                if root.kind == "reduce" or with_reduction:
                    return False
                if not _lifts_to(view, target.shape) or not _same_view(
                    lift(view, target.shape), target
                ):
                    return False
        return True

    def _no_hazards(self, producer_group: Group, group: Group) -> bool:
        """Computing the producers at the kernel's position must not read a buffer that
        an op in between has overwritten."""
        end = group.root
        internal = set(producer_group.fused)
        for member in producer_group.members:
            for view in self.ops[member].input_views():
                if view.slot in internal:
                    continue
                for writer in self.writers.get(view.slot, []):
                    if member < writer < end:
                        return False
        return True

    # --- spaces -------------------------------------------------------------------------------
    def is_prologue(self, group: Group, member: int) -> bool:
        """True when ``member`` feeds the group's reduction (directly or not)."""
        current = member
        while current in group.consumer:
            current = group.consumer[current]
            if current == group.reduce_op:
                return True
        return False

    def space(self, group: Group, member: int) -> tuple[int, ...]:
        """The loop shape a member's loads are expressed in: the reduction's input for
        a prologue member, the kernel's output otherwise. Views are broadcast to it
        (broadcasting composes, so the path through the group does not matter)."""
        if group.reduce_op is not None and self.is_prologue(group, member):
            return self.ops[group.reduce_op].inputs[0].shape
        return self.ops[group.root].outputs[0].shape

    def kernel_count(self) -> int:
        return len(self.groups)

    def describe(self) -> list[str]:
        lines = []
        for group in self.groups:
            names = []
            for member in group.members:
                op = self.ops[member]
                if op.kind == "elementwise":
                    names.append(op.attrs["fn"].name)
                elif op.kind == "reduce":
                    names.append(f"reduce_{op.attrs['kind']}")
                else:
                    names.append(op.kind)
            lines.append(" + ".join(names))
        return lines
