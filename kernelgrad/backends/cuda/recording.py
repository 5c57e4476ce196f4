"""Recording the CUDA kernels a program launches, with the argument types of each launch.

The compile check (``python -m kernelgrad.cuda_compile_check``, docs/cuda.md) runs a
workload under numba's CUDA simulator with a :class:`Recording` active, then compiles
every recorded (kernel, argument types) pair for the real target in a process without
the simulator (``compilecheck.py``). The simulator runs kernels as Python and never
types them; the recording says exactly which signatures real code asks the compiler
for.

Launch sites call :func:`record`: the backend's :class:`~.launch.Launcher` (every
generated and hand-written kernel of the backend, and kg.compile's fused reductions)
and ``kernel_module.py`` (``@kg.kernel``, through ``backends.record_kernel_launch``).
While no recording is active that costs one test of an empty list.

A recorded kernel is kept as what the compiler needs, not as a simulator object:

* a generated module (``codecache``) by its device source (a module adapted for the
  simulator keeps the original as ``DEVICE_SOURCE``, see ``codegen.for_simulator``),
  its file prefix and the values kernelgrad injected into it;
* a kernel defined in an ordinary module (``kernels.py``) by module and name.

Argument types are numba-cuda's own ``typeof`` of the launch arguments (a fake device
array types like a device array of the same layout), so they are the types the real
dispatcher would compile for. Each kernel also keeps the largest block it was launched
with (threads per block), so that the check can tell whether the registers the compiler
gave it fit a block of that size (``compilecheck.py``).
"""

from __future__ import annotations

import pickle
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_RECORDINGS: list[Recording] = []
_GENERATED = re.compile(r"^kg_(?P<prefix>.+)_[0-9a-f]{20}$")
_INJECTED = re.compile(r"^(\w+) = None  # set by kernelgrad", re.M)
_KIND = re.compile(r"^KIND = '(\w+)'", re.M)


def active() -> bool:
    """Whether a recording is in progress (launch sites skip :func:`record` otherwise)."""
    return bool(_RECORDINGS)


@dataclass
class RecordedKernel:
    """One distinct kernel and signature a program launched."""

    name: str  # the launch's label: an op name, "reduce_sum", "kernel clamp_", ...
    kind: str  # "elementwise", "reduce", "matmul", "fused_reduce", "kernel", "hand-written"
    signature: tuple  # numba types of the arguments
    source: str | None = None  # a generated module's device source
    prefix: str = ""
    attribute: str = "kernel"
    reference: tuple[str, str] | None = None  # (module, name) of a hand-written kernel
    injected: dict[str, Any] = field(default_factory=dict)
    launches: int = 1
    block_threads: int = 0  # the most threads per block of any of its launches (0: unknown)

    @property
    def key(self) -> tuple:
        """What tells two recorded kernels apart (recordings of several processes are
        merged by it)."""
        return (self.source, self.reference, self.attribute, self.signature)

    @property
    def label(self) -> str:
        types = ", ".join(str(t) for t in self.signature)
        return f"{self.name} ({self.kind}) [{types}]"


class Recording:
    """Context manager: while active, every launch adds its kernel and argument types.

    >>> from kernelgrad.backends.cuda.recording import Recording
    >>> with Recording() as recording:
    ...     pass  # run CUDA code here (under the simulator without a GPU)
    >>> len(recording.kernels)
    0
    """

    def __init__(self) -> None:
        self.kernels: dict[tuple, RecordedKernel] = {}
        self.launches = 0

    def __enter__(self) -> Recording:
        _RECORDINGS.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _RECORDINGS.remove(self)

    def add(self, identity: Any, signature: tuple, make: Any, block: Any = None) -> None:
        self.launches += 1
        key = (identity, signature)
        known = self.kernels.get(key)
        if known is None:
            known = self.kernels[key] = make()
        else:
            known.launches += 1
        known.block_threads = max(known.block_threads, block_threads(block))

    def save(self, path: str | Path) -> None:
        with open(path, "wb") as handle:
            pickle.dump(list(self.kernels.values()), handle)

    @staticmethod
    def load(path: str | Path) -> list[RecordedKernel]:
        with open(path, "rb") as handle:
            return pickle.load(handle)


def argument_types(args: Any) -> tuple:
    """The numba types the CUDA dispatcher infers for launch arguments ``args``."""
    try:
        from numba.cuda.typing.typeof import Purpose, typeof
    except ImportError:  # pragma: no cover - older numba-cuda
        from numba import typeof as _typeof

        return tuple(_typeof(a) for a in args)
    return tuple(typeof(a, Purpose.argument) for a in args)


def block_threads(block: Any) -> int:
    """Threads per block of a launch's ``block`` (an int or a tuple; None: unknown, 0)."""
    if block is None:
        return 0
    if isinstance(block, int):
        return block
    threads = 1
    for size in block:
        threads *= int(size)
    return threads


def record(name: str, kernel: Any, args: Any, block: Any = None) -> None:
    """Add one launch of ``kernel`` (a numba-cuda or simulator dispatcher) with
    ``args`` on blocks of ``block`` threads to every active recording."""
    if not _RECORDINGS:
        return
    function = kernel.py_func
    identity = (function.__module__, function.__name__)
    signature = argument_types(args)
    generated = _GENERATED.match(function.__module__)
    module = sys.modules.get(function.__module__)
    if module is None or generated is None:

        def make() -> RecordedKernel:
            return RecordedKernel(name, "hand-written", signature, reference=identity)

    else:

        def make() -> RecordedKernel:
            source = getattr(module, "DEVICE_SOURCE", None)
            if source is None:
                source = Path(module.__file__).read_text()
            injected = {key: getattr(module, key) for key in _INJECTED.findall(source)}
            return _generated(name, source, generated["prefix"], signature, injected, identity[1])

    for recording in _RECORDINGS:
        recording.add(identity, signature, make, block)


def record_source(
    name: str,
    identity: Any,
    source: Any,
    prefix: str,
    signature: tuple,
    injected: dict[str, Any] | None = None,
    block: Any = None,
) -> None:
    """Add a launch of the ``kernel`` of a generated module with arguments of types
    ``signature`` on blocks of ``block`` threads, for launch sites that know the
    module's source (``source()`` gives it, called once per new kernel; ``identity``
    tells kernels apart)."""
    if not _RECORDINGS:
        return
    make = lambda: _generated(name, source(), prefix, signature, injected or {}, "kernel")
    for recording in _RECORDINGS:
        recording.add(identity, signature, make, block)


def _generated(
    name: str, source: str, prefix: str, signature: tuple, injected: dict, attribute: str
) -> RecordedKernel:
    kind = _KIND.search(source)
    return RecordedKernel(
        name,
        kind[1] if kind else "generated",
        signature,
        source=source,
        prefix=prefix,
        attribute=attribute,
        injected={key: _portable(value) for key, value in injected.items()},
    )


@dataclass(frozen=True)
class ImportedValue:
    """A value injected into a generated module, kept as where to import it from (a
    numba function made under the simulator is of no use to the compiler)."""

    module: str
    name: str

    def resolve(self) -> Any:
        import importlib

        value: Any = importlib.import_module(self.module)
        for part in self.name.split("."):
            value = getattr(value, part)
        return value


def _portable(value: Any) -> Any:
    function = getattr(value, "py_func", None)
    if function is not None:
        return ImportedValue(function.__module__, function.__qualname__)
    return value
