"""The CUDA backend: the same tensor programs on an NVIDIA GPU, with numba-cuda kernels.

* buffers are 1-D numba device arrays from a caching pool (``memory.py``): memory in
  use stays flat across training steps, ``kg.cuda.memory_stats()`` reports it;
* elementwise kernels are generated from the same scalar functions the CPU backend
  compiles, with ``cuda.jit(device=True)`` (``codegen.py``); reductions use shared
  memory and split long rows over blocks; matmul is a tiled shared-memory kernel, or
  cuBLAS through CuPy on a real GPU (``vendor.py``);
* gather uses plain loads, scatter-add uses atomics (``kernels.py``); random numbers
  come from the counter-based Philox generator the CPU shares (``rng.py``); an
  optimizer's update of many tensors is one launch (``foreach.py``);
* every launch, copy and cuBLAS call is queued on the device's one stream
  (``runtime.py``), uses grid-stride loops and passes shapes and strides as scalars
  (``launch.py`` chooses block and grid sizes); failures become ``KernelError``, and
  index errors that kernels report are raised at the next synchronisation
  (``flags.py``).

Without a GPU the whole backend runs in numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported), very slowly, for tests.
See docs/cuda.md.
"""

from __future__ import annotations

from ...device import Device
from ..torch_settings import SDP, CudaMatmul, sdp_kernel

# torch.backends.cuda's switches (kernelgrad/backends/torch_settings.py): kept as set
matmul = CudaMatmul()


def is_built() -> bool:
    """Whether kernelgrad can run CUDA code: numba-cuda installed (the ``cuda`` extra)."""
    import importlib.util

    return importlib.util.find_spec("numba.cuda") is not None


def enable_flash_sdp(enabled: bool) -> None:
    SDP.flash = bool(enabled)


def flash_sdp_enabled() -> bool:
    return SDP.flash


def enable_mem_efficient_sdp(enabled: bool) -> None:
    SDP.mem_efficient = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return SDP.mem_efficient


def enable_math_sdp(enabled: bool) -> None:
    SDP.math = bool(enabled)


def math_sdp_enabled() -> bool:
    return SDP.math


def enable_cudnn_sdp(enabled: bool) -> None:
    SDP.cudnn = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return SDP.cudnn


__all__ = ["create_backend", "is_built", "matmul", "sdp_kernel"]


def create_backend(device: Device):  # -> CUDABackend (imported lazily with numba-cuda)
    from .backend import CUDABackend

    return CUDABackend(device)
