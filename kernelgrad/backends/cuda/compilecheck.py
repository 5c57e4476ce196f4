"""Compile recorded CUDA kernels for a real target, without a GPU, and read what the
compiler made of them.

Given the kernels a workload launched (``recording.py``), each is compiled with NVVM to
PTX for the target's compute capability (``numba.cuda.compile_ptx``, the same typing
and lowering a GPU launch goes through), then assembled to SASS with nvJitLink
(``-arch=sm_XY -verbose``), whose log gives registers, spills, local and shared memory.
The PTX is scanned for two costly patterns:

* **float64 arithmetic in a float32 kernel** (``add/sub/mul/fma/div/... .f64``): a
  kernel whose floating-point arguments are all float32 that computes in double
  precision (a Python float literal or argument widening the expression). Conversions
  (``cvt``) are not counted: storing into a float64 output is fine. Consumer GPUs run
  float64 at 1/32-1/64 of the float32 rate;
* **64-bit integer division** (``div/rem .s64/.u64``) in elementwise kernels: index
  unravelling with int64 sizes costs dozens of instructions per division on every
  element.

and the registers are held against the largest block the workload launched the kernel
with (``recording.py`` keeps it): the compiler may give a thread up to 255 registers,
and a block whose threads together need more than the 65,536 a block can have fails
to launch on a GPU (``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES``), which neither the simulator
nor the compiler says. Registers are allocated per warp in units of 256, so a block of
up to 256 threads always fits; larger workgroups of ``@kg.kernel`` kernels need not.

It needs numba-cuda's compiler wheels (``numba-cuda[cu13]``: nvidia-nvvm,
nvidia-nvjitlink), no GPU and no driver, and must run without ``NUMBA_ENABLE_CUDASIM``.
``kernelgrad.cuda_compile_check`` runs the workload and then this.
"""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .recording import ImportedValue, RecordedKernel

NO_COMPILER = 77

# PTX opcodes that compute (not move, load, store, convert or select).
_ARITHMETIC = {
    "add", "sub", "mul", "mad", "fma", "div", "rcp", "sqrt", "rsqrt", "neg", "abs", "min",
    "max", "setp", "ex2", "lg2", "sin", "cos", "copysign", "testp", "set",
}  # fmt: skip
_INSTRUCTION = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9]*)((?:\.[a-z0-9]+)*)\b", re.M)
_DIVISION_64 = re.compile(r"^\s*(?:@!?%\w+\s+)?(div|rem)(?:\.[a-z]+)*\.([su]64)\b", re.M)
_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\S+?)\(", re.M)
_TRIG_REDUCTION = re.compile(r"^\s*mul\.f64\s+%fd\d+, %fd\d+, 0d3BF921FB54442D19;", re.M)
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PROPERTIES = re.compile(
    r"Function properties for '?([^':\n]+)'?:\s*\n\s*info\s*: used (\d+) registers.*?"
    r"(\d+) bytes smem.*?(\d+) bytes lmem"
)


# Registers a block may use (every compute capability from 5.0 but 5.3 and 6.2, and
# 9.0), and the unit a warp's registers are allocated in (CUDA's occupancy tables).
REGISTERS_PER_BLOCK = 65536
_SMALL_REGISTER_FILE = {(5, 3): 32768, (6, 2): 32768}
REGISTER_UNIT = 256
WARP = 32


def block_registers(registers: int, threads: int) -> int:
    """The registers a block of ``threads`` threads using ``registers`` each takes: per
    warp, ``registers * 32`` rounded up to the allocation unit."""
    per_warp = -(-registers * WARP // REGISTER_UNIT) * REGISTER_UNIT
    return per_warp * -(-threads // WARP)


def registers_per_block(cc: tuple[int, int]) -> int:
    return _SMALL_REGISTER_FILE.get(tuple(cc), REGISTERS_PER_BLOCK)


@dataclass
class KernelReport:
    """What compiling one recorded kernel gave."""

    kernel: RecordedKernel
    error: str | None = None
    registers: int = 0
    shared_bytes: int = 0
    local_bytes: int = 0
    spill_bytes: int = 0
    float32: bool = False
    float64_ops: Counter = field(default_factory=Counter)
    division_64: int = 0
    # the random-number kernels must round every product as the CPU does (no contraction)
    contracted_product: str | None = None
    seconds: float = 0.0
    register_limit: int = REGISTERS_PER_BLOCK  # the target's registers per block

    @property
    def block_threads(self) -> int:
        """The largest block the workload launched the kernel with (0: not known)."""
        return getattr(self.kernel, "block_threads", 0)

    @property
    def over_register_file(self) -> bool:
        """Whether its largest block needs more registers than a block can have (the
        launch would fail with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)."""
        threads = self.block_threads
        if not threads or not self.registers:
            return False
        return block_registers(self.registers, threads) > self.register_limit

    @property
    def float64_in_float32(self) -> bool:
        return self.float32 and sum(self.float64_ops.values()) > 0

    @property
    def index_division(self) -> bool:
        """64-bit division or remainder in an elementwise (or foreach) kernel."""
        return self.kernel.kind in ("elementwise", "foreach") and self.division_64 > 0

    @property
    def failed(self) -> bool:
        return (
            self.error is not None
            or self.index_division
            or bool(self.contracted_product)
            or self.over_register_file
        )

    def problems(self) -> list[str]:
        found = []
        if self.error is not None:
            found.append(f"does not compile: {self.error}")
        if self.float64_in_float32:
            ops = ", ".join(f"{op} x{n}" for op, n in sorted(self.float64_ops.items()))
            found.append(f"float64 arithmetic in a float32 kernel ({ops})")
        if self.spill_bytes:
            found.append(f"spills {self.spill_bytes} bytes of registers to local memory")
        if self.index_division:
            found.append(f"{self.division_64} 64-bit divisions/remainders per element")
        if self.contracted_product:
            found.append(
                f"rounds differently from the CPU's random numbers: {self.contracted_product}"
            )
        if self.over_register_file:
            threads = self.block_threads
            most = self.register_limit // block_registers(self.registers, WARP) * WARP
            found.append(
                f"launched with blocks of {threads} threads, which at {self.registers} "
                f"registers per thread need {block_registers(self.registers, threads):,} "
                f"registers; a block has {self.register_limit:,}, so the launch fails on "
                f"a GPU (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). Launch it with at most "
                f"{most} threads per block, or make its threads use fewer registers"
            )
        return found

    def summary(self) -> str:
        return (
            f"{self.registers} registers (blocks of {self.block_threads or '?'} threads), "
            f"{self.shared_bytes} B shared, "
            f"{self.local_bytes} B local, {self.spill_bytes} B spilled, "
            f"{self.division_64} div/rem.64, {sum(self.float64_ops.values())} f64 ops"
        )


# --- preparing ----------------------------------------------------------------------------
def _install_fake_device(cc: tuple[int, int]) -> None:
    """Device functions ask the current device for its compute capability when a kernel
    that calls them is compiled; without a GPU, answer with ``cc``."""
    import numba.cuda.dispatcher as dispatcher

    class _Device:
        compute_capability = cc

    dispatcher.get_current_device = lambda: _Device()


def compiler_available(cc: tuple[int, int]) -> str | None:
    """None if a trivial kernel compiles to PTX and links for ``cc``, else why not."""
    try:
        from numba import cuda
        from numba.cuda import types

        def probe(out):  # pragma: no cover - compiled
            out[0] = 1.0

        ptx, _ = cuda.compile_ptx(probe, (types.float32[::1],), cc=cc)
        link(ptx, cc)
    except Exception as error:
        return f"{type(error).__name__}: {str(error).strip()[:300]}"
    return None


def prepare(cc: tuple[int, int]) -> int | None:
    """The exit status when the check cannot run here (under the simulator, without a
    compiler); else None, with device queries answered with ``cc``."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        print("the compile check must run without NUMBA_ENABLE_CUDASIM=1", file=sys.stderr)
        return 2
    reason = compiler_available(cc)
    if reason is not None:
        print(
            f"no CUDA compiler available ({reason}); install the compiler wheels: "
            'pip install "numba-cuda[cu13]"',
            file=sys.stderr,
        )
        return NO_COMPILER
    _install_fake_device(cc)
    return None


# --- compiling ----------------------------------------------------------------------------
def load_function(kernel: RecordedKernel) -> tuple[Any, dict[str, Any]]:
    """The Python function of a recorded kernel and its dispatcher's target options."""
    dispatcher = _load_dispatcher(kernel)
    return dispatcher.py_func, dict(getattr(dispatcher, "targetoptions", {}))


def _load_dispatcher(kernel: RecordedKernel) -> Any:
    if kernel.reference is not None:
        return ImportedValue(*kernel.reference).resolve()
    from ...codecache import load_module

    assert kernel.source is not None
    module = load_module(kernel.source, kernel.prefix)
    for name, value in kernel.injected.items():
        setattr(module, name, value.resolve() if isinstance(value, ImportedValue) else value)
    return getattr(module, kernel.attribute)


def _index_divisions(function: Any, signature: tuple, cc: tuple[int, int], options: dict) -> int:
    """The 64-bit divisions of an elementwise kernel outside its scalar function: the
    kernel compiled again with the scalar function (``_scalar_fn``, already compiled
    for its argument types by the first compile) replaced by one that returns zeros of
    the same types. An integer ``//`` or ``%`` op divides by nature; its index
    arithmetic must not."""
    from numba import cuda

    namespace = function.__globals__
    scalar = namespace.get("_scalar_fn")
    if scalar is None or not scalar.overloads:
        return division_64(cuda.compile_ptx(function, signature, cc=cc)[0])
    from numba.cuda import types

    result = next(iter(scalar.overloads.values())).signature.return_type
    if isinstance(result, types.BaseTuple):
        value = "(" + "".join(f"np.{_numpy_name(t)}(0), " for t in result.types) + ")"
    else:
        value = f"np.{_numpy_name(result)}(0)"
    arity = scalar.py_func.__code__.co_argcount
    parameters = ", ".join(f"a{i}" for i in range(arity))
    source = f"def _probe({parameters}):\n    return {value}\n"
    probe_namespace: dict[str, Any] = {"np": __import__("numpy")}
    exec(source, probe_namespace)
    namespace["_scalar_fn"] = cuda.jit(device=True)(probe_namespace["_probe"])
    try:
        ptx, _ = cuda.compile_ptx(
            function, signature, cc=cc, fastmath=bool(options.get("fastmath", False))
        )
    finally:
        namespace["_scalar_fn"] = scalar
    return division_64(ptx)


def _numpy_name(numba_type: Any) -> str:
    name = str(numba_type)
    return "bool_" if name == "bool" else name


def link(ptx: str, cc: tuple[int, int], options: list[str] | None = None) -> str:
    """Assemble ``ptx`` to SASS for ``sm_XY`` with nvJitLink (with extra ``options``);
    its verbose info log."""
    from cuda.bindings import nvjitlink

    options = [f"-arch=sm_{cc[0]}{cc[1]}", "-verbose", *(options or [])]
    handle = nvjitlink.create(len(options), options)
    try:
        data = ptx.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        try:
            nvjitlink.complete(handle)
        except Exception as error:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            raise RuntimeError(f"nvJitLink: {log.decode(errors='replace').strip()}") from error
        size = nvjitlink.get_info_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_info_log(handle, log)
        return log.decode(errors="replace")
    finally:
        nvjitlink.destroy(handle)


def spilled_bytes(log: str) -> int:
    """Bytes of register spill stores and loads in an nvJitLink/ptxas info log."""
    return sum(int(stores) + int(loads) for stores, loads in _SPILLS.findall(log))


def float64_arithmetic(ptx: str) -> Counter:
    """Counts of float64 arithmetic instructions in ``ptx``, by opcode, except the one
    multiplication of libdevice's float32 sin/cos/tan range reduction for huge
    arguments (an int64 converted to float64 and scaled by pi/2 * 2**-64), which every
    CUDA program calling ``sinf`` contains."""
    found: Counter = Counter()
    for opcode, suffixes in _INSTRUCTION.findall(ptx):
        if opcode in _ARITHMETIC and ".f64" in suffixes:
            found[opcode] += 1
    exempt = len(_TRIG_REDUCTION.findall(ptx))
    if exempt:
        found["mul"] -= exempt
        found = +found  # drop counts that reached zero
    return found


def division_64(ptx: str) -> int:
    """The number of 64-bit integer divisions and remainders in ``ptx``."""
    return len(_DIVISION_64.findall(ptx))


def contracted_product(ptx: str) -> str | None:
    """Why ``ptx`` may round a product differently from the CPU, or None: a fused
    multiply-add, or a product without an explicit rounding mode (which ptxas may still
    fuse). The Philox kernels must have neither: one seed gives the same numbers on every
    device only if every product is rounded on its own (see ``backends/philox.py``)."""
    for line in ptx.splitlines():
        parts = line.split()
        instruction = parts[0] if parts else ""
        if instruction.startswith("fma.") and instruction.endswith(("f64", "f32")):
            return f"a fused multiply-add: {line.strip()}"
        if instruction in ("mul.f64", "mul.f32"):
            return f"a product ptxas may fuse: {line.strip()}"
    return None


def is_float32_kernel(signature: tuple) -> bool:
    """Whether the floating-point arguments (arrays and scalars) are all float32."""
    from numba.cuda import types

    floats = []
    for argument in signature:
        dtype = getattr(argument, "dtype", argument)
        if isinstance(argument, types.BaseTuple):
            continue
        if isinstance(dtype, types.Float):
            floats.append(dtype)
    return bool(floats) and all(d == types.float32 for d in floats)


def compile_kernel(kernel: RecordedKernel, cc: tuple[int, int], keep: bool = False) -> Any:
    """Compile, link and scan one recorded kernel; a :class:`KernelReport` (with the PTX
    as ``ptx`` when ``keep``)."""
    from numba import cuda

    report = KernelReport(
        kernel, float32=is_float32_kernel(kernel.signature), register_limit=registers_per_block(cc)
    )
    start = time.perf_counter()
    try:
        function, options = load_function(kernel)
        ptx, _ = cuda.compile_ptx(
            function, kernel.signature, cc=cc, fastmath=bool(options.get("fastmath", False))
        )
        log = link(ptx, cc)
    except Exception as error:
        lines = str(error).strip().splitlines()
        report.error = f"{type(error).__name__}: {lines[0] if lines else ''}"
        if os.environ.get("KG_DEBUG"):
            traceback.print_exception(error)
        report.seconds = time.perf_counter() - start
        return report
    report.float64_ops = float64_arithmetic(ptx)
    report.division_64 = division_64(ptx)
    if kernel.kind in ("elementwise", "foreach") and report.division_64:
        try:
            report.division_64 = _index_divisions(function, kernel.signature, cc, options)
        except Exception as error:  # the kernel compiled; say why the probe did not
            report.error = f"index-division probe: {type(error).__name__}: {error}"
    if kernel.name.startswith("random_"):
        report.contracted_product = contracted_product(ptx)
    report.spill_bytes = spilled_bytes(log)
    entries = set(_ENTRY.findall(ptx))
    for name, registers, shared, local in _PROPERTIES.findall(log):
        if name in entries:
            report.registers = max(report.registers, int(registers))
            report.shared_bytes = max(report.shared_bytes, int(shared))
            report.local_bytes = max(report.local_bytes, int(local))
    report.seconds = time.perf_counter() - start
    if keep:
        report.ptx = ptx  # type: ignore[attr-defined]
    return report


def _compile_slice(arguments: tuple) -> list[KernelReport]:
    kernels, cc = arguments
    _install_fake_device(cc)
    return [compile_kernel(k, cc) for k in kernels]


def compile_all(
    kernels: list[RecordedKernel], cc: tuple[int, int], jobs: int = 1
) -> list[KernelReport]:
    """Reports for ``kernels`` in their order, compiled by ``jobs`` processes."""
    if jobs <= 1 or len(kernels) < 2:
        return [compile_kernel(k, cc) for k in kernels]
    import multiprocessing

    slices = [(kernels[i::jobs], cc) for i in range(jobs)]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        results = pool.map(_compile_slice, slices)
    reports: list[KernelReport | None] = [None] * len(kernels)
    for i, part in enumerate(results):
        for j, report in enumerate(part):
            reports[i + j * jobs] = report
    return [r for r in reports if r is not None]


def report(reports: list[KernelReport], cc: tuple[int, int], verbose: bool = False) -> int:
    """Print problems (and with ``verbose`` every kernel's resources), then the summary
    line; 1 if any kernel failed a check, else 0."""
    for item in reports:
        problems = item.problems()
        if problems:
            print(f"FAIL {item.kernel.label}: {'; '.join(problems)}")
        elif verbose:
            print(f"ok   {item.kernel.label}: {item.summary()}")
    failed = sum(1 for r in reports if r.failed)
    float64 = sum(1 for r in reports if r.float64_in_float32)
    spilling = sum(1 for r in reports if r.spill_bytes)
    compiled = sum(1 for r in reports if r.error is None)
    most = max(reports, key=lambda r: r.registers, default=None)
    if most is not None and most.registers:
        print(f"most registers: {most.registers} ({most.kernel.name})")
    per_block = lambda r: block_registers(r.registers, r.block_threads)
    fullest = max(reports, key=per_block, default=None)
    if fullest is not None and fullest.registers and fullest.block_threads:
        print(
            f"most registers per block: {per_block(fullest):,} of {fullest.register_limit:,} "
            f"({fullest.kernel.name}: {fullest.block_threads} threads x {fullest.registers})"
        )
    print(
        f"{compiled} kernels compiled for sm_{cc[0]}{cc[1]}, {failed} failed, {float64} with "
        f"float64 arithmetic in float32 kernels, {spilling} spilling"
    )
    return 1 if failed or float64 or spilling else 0
