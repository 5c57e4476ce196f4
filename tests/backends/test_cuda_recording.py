"""Recording launched CUDA kernels with their argument types (the compile check's first
half, ``backends/cuda/recording.py``): every launch seam reports, sources are the ones a
GPU compiles (not the simulator's adaptation), and types follow the launch arguments.

Runs in the simulated pass (``cuda`` fixture); CPU launches of ``@kg.kernel`` are
recorded in their CUDA form there too.
"""

from __future__ import annotations

import numpy as np

import kernelgrad as kg
from kernelgrad.backends import get_backend
from kernelgrad.backends.cuda.recording import Recording
from kernelgrad.device import as_device


def _types():
    from numba.cuda import types

    return types


@kg.kernel
def scale_rows(out, x, factor):
    i, j = kg.index(2)
    out[i, j] = x[i, j] * factor


def _by_kind(recording: Recording, kind: str) -> list:
    return [k for k in recording.kernels.values() if k.kind == kind]


def test_backend_kernels_are_recorded_with_their_device_source_and_types(cuda, tmp_path):
    x = kg.tensor(np.arange(12.0).reshape(3, 4), dtype=kg.float32, device=cuda)
    with Recording() as recording:
        y = x.T * 2.0  # strided
        y.exp()  # contiguous, launched twice
        y.exp()
        x.sum(1)
        x[kg.tensor([2, 0], device=cuda)]
    types = _types()
    elementwise = _by_kind(recording, "elementwise")
    assert len(elementwise) == 2 and recording.launches >= 5
    exp = next(k for k in elementwise if k.name == "exp")
    assert exp.launches == 2
    assert "simmath" not in exp.source and "import math" in exp.source
    assert exp.signature[-2:] == (types.float32[::1], types.float32[::1])
    mul = next(k for k in elementwise if k.name == "mul")
    assert types.float32 in mul.signature  # the Python number, in the compute dtype
    assert "reduce_sum" in {k.name for k in _by_kind(recording, "reduce")}
    (take,) = [k for k in _by_kind(recording, "hand-written") if k.name == "take"]
    assert take.reference == ("kernelgrad.backends.cuda.kernels", "take_kernel")
    path = tmp_path / "recording.pickle"
    recording.save(path)
    assert {k.key for k in Recording.load(path)} == {k.key for k in recording.kernels.values()}


def test_user_kernels_are_recorded_on_cuda_and_in_cuda_form_from_the_cpu(cuda):
    types = _types()
    for device in (cuda, "cpu"):
        x = kg.randn(3, 4, device=device)
        out = kg.empty(4, 3, device=device)
        with Recording() as recording:
            scale_rows(out.T, x, 0.5, ndrange=(3, 4))
        (kernel,) = recording.kernels.values()
        assert kernel.kind == "kernel" and "cuda.jit" in kernel.source
        assert "simmath" not in kernel.source  # the GPU's module, not the simulator's
        assert kernel.signature[:2] == (types.int64, types.int64)
        assert kernel.signature[2] == types.Array(types.float32, 2, "F")  # a transposed view
        assert kernel.signature[3] == types.Array(types.float32, 2, "C")


def test_fused_reductions_of_compiled_plans_go_through_the_launcher(cuda):
    backend = get_backend(as_device(cuda))
    compiled = kg.compile(lambda a: (a * a).sum())
    a = kg.randn(5, device=cuda)
    compiled(a)
    compiled(a)
    with Recording() as recording:
        result = compiled(a)
    (fused,) = _by_kind(recording, "fused_reduce")
    assert fused.name == backend.launcher.recent[-1].name
    np.testing.assert_allclose(result.item(), float((a * a).sum().item()), rtol=1e-6)


def test_nothing_is_recorded_outside_a_recording(cuda):
    x = kg.ones(4, device=cuda)
    with Recording() as recording:
        pass
    (x + 1).sum()
    assert not recording.kernels and recording.launches == 0
