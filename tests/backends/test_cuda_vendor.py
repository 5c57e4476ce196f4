"""Vendor libraries (cuBLAS through CuPy): what the [cuda] extra installs, how their state
is reported, and how the backend treats their failures (a stand-in library under the
simulator; the real one is checked by the `gpu` tests and benchmarks/gpu_report.py)."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.backends import get_backend
from kernelgrad.backends.cuda import vendor
from kernelgrad.device import as_device
from kernelgrad.errors import KernelError
from tests.helpers import assert_close

ROOT = Path(__file__).resolve().parents[2]


def test_the_cuda_extras_install_cublas_next_to_cupy():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    for extra, major in (("cuda", "13"), ("cuda12", "12")):
        requirements = " ".join(extras[extra])
        assert f"cupy-cuda{major}x" in requirements
        assert f"numba-cuda[cu{major}]" in requirements
        # CuPy's wheel has no CUDA libraries; without this, matmul falls back to the
        # tiled kernel on every GPU
        assert "cuda-toolkit[cublas," in requirements and f"=={major}.*" in requirements


def test_library_status_says_what_loads_and_how_to_fix_it():
    status = kg.cuda.vendor_libraries()
    if vendor.cupy_package() is None:
        assert status["cupy"].startswith("not installed") and "kernelgrad[cuda]" in status["cupy"]
    else:
        assert status["cublas"] == "loaded" or "pip install" in status["cublas"]


def test_cublas_loads_where_cupy_is_installed():
    pytest.importorskip("cupy")
    assert vendor.cublas_error() is None, vendor.library_status()["cublas"]


@pytest.fixture
def backend(cuda: str):
    return get_backend(as_device(cuda))


class StandIn:
    """A vendor GEMM that fails as told, then multiplies with the backend's own kernel."""

    def __init__(self, backend, failures):
        self.backend, self.failures, self.calls, self.freed = backend, list(failures), 0, 0

    def supports(self, dtype_name):
        return True

    def matmul(self, out, a, b):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        self.backend.matmul_kernel(out, a, b)

    def is_out_of_memory(self, error):
        return isinstance(error, MemoryError)

    def free_cached(self):
        self.freed += 1

    def pool_stats(self):
        return {"vendor_pool_used_bytes": 512, "vendor_pool_reserved_bytes": 2048}


@pytest.fixture
def stand_in(backend, monkeypatch):
    def install(*failures):
        gemm = StandIn(backend, failures)
        monkeypatch.setattr(backend, "_gemm", gemm)
        monkeypatch.setattr(backend, "matmul_impl", "cublas")
        monkeypatch.setattr(backend.pool, "release_hooks", [gemm.free_cached])
        return gemm

    return install


def operands(device):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    return a, b, kg.tensor(a, device=device), kg.tensor(b, device=device)


def test_out_of_memory_in_the_vendor_library_frees_both_pools_and_retries(backend, stand_in):
    gemm = stand_in(MemoryError("cudaErrorMemoryAllocation"))
    a, b, x, y = operands("cuda")
    kg.ones(1000, device="cuda")  # a cached block to hand back
    raw_frees = backend.pool.stats()["num_raw_frees"]
    assert backend.pool.stats()["cached_blocks"] > 0
    assert_close(x @ y, a @ b, rtol=1e-5)
    assert gemm.calls == 2 and gemm.freed >= 1
    assert backend.pool.stats()["num_raw_frees"] > raw_frees
    assert backend.matmul_impl == "cublas"  # still the vendor library afterwards


def test_out_of_memory_twice_is_kernelgrads_error_naming_both_pools(backend, stand_in):
    stand_in(MemoryError("first"), MemoryError("second"))
    _, _, x, y = operands("cuda")
    with pytest.raises(kg.cuda.OutOfMemoryError, match="kernelgrad's and CuPy's pools"):
        x @ y


def test_another_vendor_failure_is_a_kernel_error_and_no_permanent_switch(backend, stand_in):
    gemm = stand_in(RuntimeError("CUBLAS_STATUS_EXECUTION_FAILED"))
    a, b, x, y = operands("cuda")
    with pytest.raises(KernelError, match=r"EXECUTION_FAILED.*KG_CUDA_MATMUL=kernel"):
        x @ y
    assert backend.matmul_impl == "cublas"
    assert_close(x @ y, a @ b, rtol=1e-5)
    assert gemm.calls == 2


def test_memory_stats_count_the_vendor_pool(backend, stand_in):
    stand_in()
    stats = kg.cuda.memory_stats()
    assert stats["vendor_pool_used_bytes"] == 512
    assert stats["vendor_pool_reserved_bytes"] == 2048


def test_cublas_that_cannot_load_is_reported_once_with_the_fix(backend, monkeypatch):
    from kernelgrad.backends.cuda import backend as module

    monkeypatch.setattr(module, "load_cupy", lambda: SimpleNamespace())
    monkeypatch.setattr(module, "cublas_error", lambda: "RuntimeError: libcublasLt.so.13")
    monkeypatch.setattr(vendor, "cupy_package", lambda: ("cupy-cuda13x", "14.2.0"))
    monkeypatch.setattr(vendor, "_warned", set())
    real_gpu = SimpleNamespace(simulated=False, device=backend.device)
    with pytest.warns(RuntimeWarning, match=r"libcublasLt.*cuda-toolkit\[cublas"):
        assert module.CUDABackend._choose_matmul(real_gpu) == "kernel"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert module.CUDABackend._choose_matmul(real_gpu) == "kernel"  # said once
    monkeypatch.setenv("KG_CUDA_MATMUL", "cublas")
    with pytest.raises(RuntimeError, match="KG_CUDA_MATMUL=cublas, but cuBLAS"):
        module.CUDABackend._choose_matmul(real_gpu)
