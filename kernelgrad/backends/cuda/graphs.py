"""CUDA graphs for kg.compile's replay (``Backend.capture``, see ``compile/captured.py``).

``capture(backend, run)`` opens a capture on the backend's stream
(``cuStreamBeginCapture``, relaxed mode), calls ``run()`` (the replay's steps: every
kernel launch and cuBLAS call they make is recorded, not run), closes it, instantiates
the graph and launches it once. The returned :class:`DeviceGraph` launches it again
(``cuGraphLaunch``): one call instead of a Python launch per kernel.

What a capture must not do, and what is done about it:

* **Read the device from the host or wait for it** (``.item()``, a copy to the host, a
  synchronisation): the values do not exist yet. The backend raises
  :class:`CaptureUnsupportedError` at such a call while a capture is open (``capturing``),
  and the capture is abandoned: nothing of it has run, and the replay runs those steps
  one by one.
* **Draw random numbers or take an error flag**: the Philox counter advances on the host
  and a flag's slot is registered on the host, so a graph would repeat the same numbers
  or lose the errors. Refused the same way.
* **Let go of memory it uses.** A kernel inside the graph may write a temporary that the
  pool hands out during the capture; the graph keeps using that address on every launch.
  The pool records every buffer it hands out during a capture (``CachingPool.pinned``)
  and the graph keeps them for as long as it lives. CuPy (cuBLAS) may not allocate at
  all while capturing (``CupyGemm.allocations_refused``): its temporaries would go back
  to its own pool.

Under the CUDA simulator there are no graphs: the same rules are enforced while ``run()``
executes once (a refusal there means a step was classed as device-only by mistake, and is
raised as an error, since part of the run has executed), and the returned graph calls
``run()`` again. The driver calls themselves run only on a GPU (``benchmarks/gpu_report.py``
checks a captured step against the step-by-step replay).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ...errors import KernelError
from ..base import CaptureUnsupportedError


class DeviceGraph:
    """A captured run: calling it queues the recorded work again on the backend's stream.
    ``buffers`` are the pool's buffers handed out during the capture (kept alive)."""

    def __init__(self, launch: Callable[[], None], buffers: list[Any], graph: Any = None) -> None:
        self._launch = launch
        self.buffers = buffers
        self.graph = graph  # the driver's graph and executable graph, kept alive

    def __call__(self) -> None:
        self._launch()

    def __del__(self) -> None:
        if self.graph is None:
            return
        try:
            from cuda.bindings import driver

            graph, executable = self.graph
            driver.cuGraphExecDestroy(executable)
            driver.cuGraphDestroy(graph)
        except Exception:  # interpreter shutdown: the driver may be gone
            pass


def refuse_while_capturing(backend: Any, what: str) -> None:
    """Raise :class:`CaptureUnsupportedError` if ``backend`` is capturing (``what`` is the call
    that cannot be recorded)."""
    if backend.capturing:
        raise CaptureUnsupportedError(
            f"{what} cannot be recorded into a CUDA graph (the device work is not run "
            "while a graph is captured)"
        )


def capture(backend: Any, run: Callable[[], None]) -> DeviceGraph:
    """Record ``run()``'s work on ``backend``'s stream, queue it once, return it as a
    :class:`DeviceGraph` (see the module docstring)."""
    if backend.capturing:
        raise CaptureUnsupportedError("a capture is already open on this device")
    pinned: list[Any] = []
    backend.pool.pinned = pinned
    backend.capturing = True
    try:
        if backend.simulated:
            return _simulated(run, pinned)
        return _on_device(backend, run, pinned)
    finally:
        backend.capturing = False
        backend.pool.pinned = None


def _simulated(run: Callable[[], None], pinned: list[Any]) -> DeviceGraph:
    try:
        run()
    except CaptureUnsupportedError as error:
        raise RuntimeError(
            f"kg.compile: a step classed as device-only did host work while captured: {error}"
        ) from error
    return DeviceGraph(run, pinned)


def _on_device(backend: Any, run: Callable[[], None], pinned: list[Any]) -> DeviceGraph:
    from cuda.bindings import driver

    stream = backend.stream.handle
    mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    gemm = getattr(backend, "_gemm", None)
    vendor = gemm.allocations_refused() if gemm is not None else contextlib.nullcontext()
    with backend.memory.context(), vendor:
        _check(driver.cuStreamBeginCapture(stream, mode), "cuStreamBeginCapture")
        try:
            run()
        except BaseException as error:
            driver.cuStreamEndCapture(stream)  # abandon: nothing recorded has run
            if isinstance(error, CaptureUnsupportedError):
                raise
            raise CaptureUnsupportedError(f"{type(error).__name__}: {error}") from error
        (graph,) = _check(driver.cuStreamEndCapture(stream), "cuStreamEndCapture")
        (executable,) = _check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def launch() -> None:
        with backend.memory.context():
            (status,) = driver.cuGraphLaunch(executable, stream)
        if int(status) != 0:
            raise KernelError(
                f"launching a CUDA graph of kg.compile's replay on {backend.device} failed: "
                f"{status!r}; KG_NATIVE_REPLAY=0 replays step by step instead"
            )

    launch()
    return DeviceGraph(launch, pinned, (graph, executable))


def _check(result: tuple, call: str) -> tuple:
    """The driver call's results after its status; CaptureUnsupportedError naming the call and
    the status where it failed."""
    status, *values = result
    if int(status) != 0:
        raise CaptureUnsupportedError(f"{call} failed: {status!r}")
    return tuple(values)
