"""PyTorch's ``torch.backends`` switches, for programs that set or read them.

``kernelgrad.backends`` is where kernelgrad's own device backends live (``cpu``,
``cuda``); with ``import torch`` redirected to kernelgrad, ``torch.backends.cudnn`` and
its siblings are looked up here too. Their settings are the ones PyTorch programs touch
by habit (``torch.backends.cudnn.benchmark = True``, ``torch.backends.mps.is_available()``
in device selection, ``torch.backends.cuda.matmul.allow_tf32``). kernelgrad uses no
cuDNN, MPS, MKL or oneDNN, so:

* the availability questions answer False (or what is true: OpenMP is there);
* the switches are kept as set and read back, and change nothing here: cuDNN's
  ``benchmark`` and ``deterministic`` choose among cuDNN's algorithms, which kernelgrad
  does not call, and the TF32 / reduced-precision switches are permissions to be less
  precise that kernelgrad does not use (float32 stays float32);
* scaled-dot-product-attention switches (``enable_flash_sdp`` ...) are kept as set:
  kernelgrad's attention has one implementation (the math one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["SDP", "CudaMatmul", "cpu_capability", "sdp_kernel"]


class CudaMatmul:
    """``torch.backends.cuda.matmul``: reduced-precision permissions, kept as set."""

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = "ieee"


class SDP:
    """Which scaled-dot-product-attention kernels PyTorch may pick; kernelgrad has one."""

    flash = True
    mem_efficient = True
    math = True
    cudnn = True


@contextlib.contextmanager
def sdp_kernel(
    enable_flash: bool = True,
    enable_math: bool = True,
    enable_mem_efficient: bool = True,
    enable_cudnn: bool = True,
) -> Iterator[None]:
    """PyTorch's (deprecated) context manager choosing attention kernels: kept as set for
    the block, restored after; kernelgrad's attention runs the same computation."""
    previous = (SDP.flash, SDP.math, SDP.mem_efficient, SDP.cudnn)
    SDP.flash, SDP.math, SDP.mem_efficient, SDP.cudnn = (
        enable_flash,
        enable_math,
        enable_mem_efficient,
        enable_cudnn,
    )
    try:
        yield
    finally:
        SDP.flash, SDP.math, SDP.mem_efficient, SDP.cudnn = previous


def cpu_capability() -> str:
    """The widest SIMD the CPU has, in PyTorch's words ("AVX512", "AVX2", "DEFAULT")."""
    flags = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("flags"):
                flags = line
                break
    words = set(flags.split())
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= words:
        return "AVX512"
    if "avx2" in words:
        return "AVX2"
    return "DEFAULT"
