"""Launch configurations, and turning CUDA failures into Python exceptions.

**Launch policy.** Every kernel of the backend uses grid-stride loops, so any problem
size runs with any grid; the policy only decides how much of the device to occupy:

* elementwise, gather, scatter and random kernels use blocks of ``threads`` (256 on a
  GPU: 8 resident blocks fill an SM's 2048 threads) and at most ``max_blocks`` blocks
  (``8 x`` the number of SMs); a larger problem loops;
* reductions use ``reduce_threads`` per block for long rows (a shared-memory tree) and
  aim at ``reduce_blocks`` busy blocks, splitting rows when there are few of them;
  short contiguous rows get up to ``row_threads`` threads each (a warp);
* the tiled matmul uses ``tile x tile`` threads per block, each computing
  ``work_per_thread**2`` outputs.

Under the simulator every thread is a Python thread (~0.1-0.4 ms each, and much more
around ``syncthreads``), so the policy shrinks to blocks of 32 threads and grids of 2
blocks, matmul to 4x4 threads computing 16x16 output tiles, and short rows to one
thread each (tests that install a policy with ``row_threads`` > 1 cover groups). Tests
still cross block and tile edges because the shapes they use (33, 100, ...) exceed one
block, and grid-stride loops make several passes.

**Errors.** A launch that fails (a kernel that does not compile for the given dtypes, an
out-of-bounds access caught by the simulator, a CUDA launch error) raises
:class:`~kernelgrad.errors.KernelError` naming the kernel, the operand shapes and the
launch configuration. CUDA reports faults inside a kernel (an illegal address)
asynchronously, at the next synchronising call; set ``KG_CUDA_LAUNCH_BLOCKING=1`` (or
``CUDA_LAUNCH_BLOCKING=1``) to synchronise after every launch and name the failing one.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Any

from ... import debug
from ...debug import compile_action, compile_counts, log
from ...errors import KernelError
from . import recording
from .runtime import DeviceProperties


@dataclass(frozen=True)
class LaunchPolicy:
    threads: int
    max_blocks: int
    warp: int
    reduce_threads: int
    reduce_blocks: int
    reduce_min_per_thread: int
    serial_min_per_thread: int
    tile: int
    work_per_thread: int
    max_matmul_blocks: int
    # threads that share a short contiguous row of a reduction (at most a warp); the
    # simulator uses 1 (one thread per row: each simulated thread is a Python thread)
    row_threads: int = 32

    @classmethod
    def for_device(cls, properties: DeviceProperties) -> LaunchPolicy:
        if properties.simulated:
            return cls(
                threads=32,
                max_blocks=2,
                warp=1,
                reduce_threads=32,
                reduce_blocks=2,
                reduce_min_per_thread=1,
                serial_min_per_thread=2,
                tile=4,
                work_per_thread=4,
                max_matmul_blocks=2,
                row_threads=1,
            )
        sms = max(properties.multiprocessors, 1)
        return cls(
            threads=256,
            max_blocks=8 * sms,
            warp=32,
            reduce_threads=256,
            reduce_blocks=4 * sms,
            reduce_min_per_thread=8,
            serial_min_per_thread=64,
            tile=16,
            work_per_thread=4,
            max_matmul_blocks=2**31 - 1,
        )

    def grid_for(self, n: int) -> tuple[int, int]:
        """(blocks, threads per block) for a grid-stride loop over ``n`` items."""
        if n <= 0:
            return 1, self.warp
        threads = min(self.threads, -(-n // self.warp) * self.warp)
        blocks = min(-(-n // threads), self.max_blocks)
        return blocks, threads


@contextlib.contextmanager
def _ignore_runtime_warnings() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


class LaunchRecord:
    __slots__ = ("block", "grid", "name", "operands")

    def __init__(self, name: str, grid: Any, block: Any, operands: Any) -> None:
        self.name = name
        self.grid = grid
        self.block = block
        self.operands = operands  # formatted only when needed

    def __str__(self) -> str:
        return f"{self.name} grid={self.grid} block={self.block} operands: {self.operands}"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0")


class _SimulatedLaunch:
    """A configured launch under the simulator, where ``kernel[grid, block]`` configures
    the kernel object itself (so a configuration cannot be kept): configures, then runs
    with NumPy's floating-point warnings silenced. The simulator computes with NumPy
    scalars, which warn where a GPU silently gives inf or nan (1 / 0, overflow)."""

    __slots__ = ("block", "grid", "kernel", "stream")

    def __init__(self, kernel: Any, grid: Any, block: Any, stream: Any) -> None:
        self.kernel, self.grid, self.block, self.stream = kernel, grid, block, stream

    def __call__(self, *args: Any) -> None:
        with _ignore_runtime_warnings():
            self.kernel[self.grid, self.block, self.stream](*args)


class Launcher:
    """Launches kernels on one device's stream, records the last few launches, wraps
    failures."""

    def __init__(
        self, device_name: str, cuda: Any, simulated: bool, context: Any, stream: Any = 0
    ) -> None:
        self.device_name = device_name
        self._cuda = cuda
        self._context = context
        # With one device the context switch is a no-op: launches skip entering it.
        self._switches = not isinstance(context(), contextlib.nullcontext)
        self._simulated = simulated
        self.stream = stream
        # (name, grid, block, operands) of the last launches, for error messages about
        # asynchronous failures; ``recent`` gives them as LaunchRecords
        self._recent: deque[tuple] = deque(maxlen=8)
        self.blocking = _env_flag("KG_CUDA_LAUNCH_BLOCKING") or _env_flag("CUDA_LAUNCH_BLOCKING")
        self._configured: dict[tuple, Any] = {}

    @property
    def recent(self) -> list[LaunchRecord]:
        """The last eight launches, oldest first."""
        return [LaunchRecord(*launch) for launch in self._recent]

    def configured(self, kernel: Any, grid: Any, block: Any) -> Any:
        """``kernel[grid, block, stream]``, made once per configuration: numba builds a
        launch-configuration object (with checks and a low-occupancy warning) on every
        subscript."""
        key = (kernel, grid, block)
        launch = self._configured.get(key)
        if launch is None:
            if len(self._configured) >= 4096:
                self._configured.clear()
            if self._simulated:
                launch = _SimulatedLaunch(kernel, grid, block, self.stream)
            else:
                launch = kernel[grid, block, self.stream]
            self._configured[key] = launch
        return launch

    def launch(
        self, name: str, kernel: Any, grid: Any, block: Any, operands: Any, args: tuple
    ) -> None:
        """Launch ``kernel`` on ``grid`` x ``block`` threads with ``args``; ``operands``
        describes them (formatted only for an error message or a KG_DEBUG line)."""
        self._recent.append((name, grid, block, operands))
        if recording._RECORDINGS:  # the compile check's workload (recording.py)
            recording.record(name, kernel, args, block)
        level = debug._level
        if level >= 1:  # KG_DEBUG: say what the launch compiled, time it at level 2
            counts_before = compile_counts(kernel)
            start = time.perf_counter()
        wait = self.blocking or level >= 2
        try:
            launch = self._configured.get((kernel, grid, block))
            if launch is None:
                launch = self.configured(kernel, grid, block)
            if self._switches:
                with self._context():
                    launch(*args)
                    if wait:
                        self._cuda.synchronize()
            else:
                launch(*args)
                if wait:
                    self._cuda.synchronize()
        except KernelError:
            raise
        except Exception as error:
            record = LaunchRecord(name, grid, block, operands)
            raise KernelError(self._describe_failure(record, error)) from error
        if level >= 1:
            elapsed = time.perf_counter() - start
            action = compile_action(kernel, counts_before)
            if action is not None:  # "compiled" or "loaded from the disk cache"
                log(f"cuda kernel {name} {action} in {elapsed:.2f} s ({operands})")
            elif level >= 2:
                log(
                    f"{self.device_name} {name:<24} grid={grid!s:<10} block={block!s:<10} "
                    f"{elapsed * 1e6:9.1f} us  {operands}"
                )

    def _describe_failure(self, record: LaunchRecord, error: Exception) -> str:
        kind = type(error).__name__
        text = str(error).strip().splitlines()
        summary = text[0] if text else ""
        message = (
            f"CUDA kernel '{record.name}' failed on {self.device_name}: {kind}: {summary}. "
            f"Launch configuration: grid={record.grid}, block={record.block}; operands: "
            f"{record.operands}."
        )
        if "Typing" in kind or "Lowering" in kind or "Unsupported" in kind:
            message += (
                " numba-cuda could not compile the kernel for these dtypes: the scalar "
                "function may use something CUDA does not support (only `math`, arithmetic "
                "and comparisons are allowed)."
            )
        elif self._simulated and isinstance(error, IndexError):
            message += (
                " The CUDA simulator caught an out-of-bounds memory access: on a GPU this "
                "would be an illegal address error. This is a bug in the kernel."
            )
        elif not self.blocking:
            message += (
                " CUDA reports faults asynchronously, so an earlier launch may be the "
                "culprit; set KG_CUDA_LAUNCH_BLOCKING=1 to stop at the failing launch."
            )
        return message

    def synchronize(self) -> None:
        try:
            with self._context():
                self._cuda.synchronize()
        except Exception as error:
            recent = "; ".join(str(r) for r in self.recent) or "none recorded"
            raise KernelError(
                f"a CUDA kernel launched earlier on {self.device_name} failed: "
                f"{type(error).__name__}: {error}. Most recent launches: {recent}. Set "
                "KG_CUDA_LAUNCH_BLOCKING=1 to stop at the failing launch. After an illegal "
                "address the CUDA context is unusable: restart the process."
            ) from error
