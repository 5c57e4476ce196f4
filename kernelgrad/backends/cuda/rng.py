"""The CUDA backend's random-number kernels: the Philox4x32-10 functions of
``backends/philox.py`` as device functions, in grid-stride kernels.

The same functions run in the CPU backend's loops; element ``j`` of a fill is a function
of (seed, counter + j) only, so both devices (and the simulator) give the same bits for
one seed. Products use ``libdevice.dmul_rn``, which the compiler never contracts into a
fused multiply-add (see the docstring of ``philox.py``); under the simulator, a Python
product is the same correctly rounded operation.
"""

from __future__ import annotations

from typing import Any

from .. import philox
from . import runtime

_KERNELS = """

@cuda.jit(cache=True)
def uniform_kernel(n, out, out_offset, low, high, seed_low, seed_high, counter, wide):
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[out_offset + j] = uniform_value(seed_low, seed_high, counter + j, low, high, wide)


@cuda.jit(cache=True)
def normal_kernel(n, out, out_offset, mean, std, seed_low, seed_high, counter):
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[out_offset + j] = normal_value(seed_low, seed_high, counter + j, mean, std)


@cuda.jit(cache=True)
def integers_kernel(n, out, out_offset, low, span, seed_low, seed_high, counter):
    for j in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[out_offset + j] = integer_value(seed_low, seed_high, counter + j, low, span)
"""

_module: Any = None


def source(simulated: bool) -> str:
    """The generated module: device functions and the three kernels."""
    header = "from numba import cuda\nfrom numba.cuda import libdevice\n"
    device = header + philox.device_source("@cuda.jit(device=True)", "libdevice.dmul_rn(a, b)")
    device += _KERNELS
    if not simulated:
        return device
    from .codegen import for_simulator

    # The simulator has no libdevice; a Python product is the same correctly rounded
    # operation. The module keeps the device source for the compile check's recordings.
    text = header + philox.device_source("@cuda.jit(device=True)", "a * b") + _KERNELS
    return for_simulator(text).replace(f"DEVICE_SOURCE = {text!r}", f"DEVICE_SOURCE = {device!r}")


def kernels() -> Any:
    """The loaded module (``uniform_kernel``, ``normal_kernel``, ``integers_kernel``)."""
    global _module
    if _module is None:
        from ...codecache import load_module

        _module = load_module(source(runtime.simulated()), "cuda_philox")
    return _module
