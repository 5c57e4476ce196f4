"""Compile the CUDA code that user kernels, elementwise functions and kg.compile generate
to PTX, without a GPU.

The CUDA simulator runs kernels as Python, so it cannot catch what numba-cuda's type
inference rejects. This check generates the CUDA form of a set of representative
``@kg.kernel`` functions (plain and workgroup forms, shared memory, barriers, helper
functions, private arrays, networks from ``kg.nn.device_function``), ``@kg.elementwise``
functions (typed float32/float64 sources, several outputs, gradients, untraceable
sources) and the fused kernels of ``kg.compile`` traces (traced on the CPU: the composed
sources do not depend on the device), and compiles each with NVVM for a chosen compute
capability::

    python -m kernelgrad.compile.ptxcheck [--cc 9.0] [--verbose]

It needs numba-cuda's compiler libraries (``pip install "numba-cuda[cu13]"``) and the
CUDA backend, but no GPU and no driver. Exit status: 0 all compiled, 1 some failed, 77
no compiler or no CUDA backend here. Must run without ``NUMBA_ENABLE_CUDASIM``.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

import kernelgrad as kg
from kernelgrad.backends.cuda import ptxcheck as base
from kernelgrad.backends.cuda.ptxcheck import _array, _scalar_type, _types

TILE = 16
GROUP = 64


# --- representative user code -----------------------------------------------------------------
@kg.kernel
def clamp_(img):
    i = kg.index()
    v = img[i]
    if v > 1.0:
        img[i] = 1.0
    elif v < 0.0:
        img[i] = 0.0


@kg.kernel
def add_transposed(out, a, b, alpha):
    i, j = kg.index(2)
    out[i, j] = a[i, j] + alpha * b[j, i]


@kg.kernel
def fill_coordinates(out):
    i, j, k = kg.index(3)
    out[i, j, k] = 100 * i + 10 * j + k


def _softplus(v):
    return math.log1p(math.exp(-abs(v))) + max(v, 0.0)


@kg.kernel
def softplus_(x, n):
    i = kg.index()
    if i >= n:
        return
    x[i] = _softplus(x[i]) + kg.exp(0.0)


@kg.kernel
def matmul_tiled(c, a, b):
    i, j = kg.index(2)
    li, lj = kg.local_index(2)
    tile_a = kg.shared((TILE, TILE), kg.float32)
    tile_b = kg.shared((TILE, TILE), kg.float32)
    n = a.shape[0]
    k = a.shape[1]
    m = b.shape[1]
    acc = 0.0
    for t in range((k + TILE - 1) // TILE):
        col = t * TILE + lj
        row = t * TILE + li
        if i < n and col < k:
            tile_a[li, lj] = a[i, col]
        else:
            tile_a[li, lj] = 0.0
        if row < k and j < m:
            tile_b[li, lj] = b[row, j]
        else:
            tile_b[li, lj] = 0.0
        kg.barrier()
        for kk in range(TILE):
            acc += tile_a[li, kk] * tile_b[kk, lj]
        kg.barrier()
    if i < n and j < m:
        c[i, j] = acc


@kg.kernel
def group_sums(out, x, n):
    i = kg.index()
    lane = kg.local_index()
    partial = kg.shared(GROUP, kg.float32)
    if i < n:
        partial[lane] = x[i]
    else:
        partial[lane] = 0.0
    kg.barrier()
    stride = GROUP // 2
    while stride > 0:
        if lane < stride:
            partial[lane] += partial[lane + stride]
        kg.barrier()
        stride //= 2
    if lane == 0:
        out[kg.group_index()] = partial[0]


@kg.kernel
def positions(local_out, group_out, global_out):
    i, j = kg.index(2)
    li, lj = kg.local_index(2)
    gi, gj = kg.group_index(2)
    if i < global_out.shape[0] and j < global_out.shape[1]:
        local_out[i, j] = 10 * li + lj
        group_out[i, j] = 10 * gi + gj
        global_out[i, j] = kg.index()


def _cumulative(x, out, n):
    scratch = kg.private((2, 8), kg.float32)  # a per-thread array in a helper
    total = 0.0
    for k in range(n):
        total += x[k]
        scratch[1, k] = total
    for k in range(n):
        out[k] = scratch[1, k]


@kg.kernel
def row_scan(out, x):
    i = kg.index()
    row = kg.private(8, kg.float32)  # and in the kernel body
    for k in range(8):
        row[k] = x[i, k]
    _cumulative(row, out[i, :], 8)


def _small_network() -> Any:
    kg.manual_seed(0)
    nn = kg.nn
    return nn.Sequential(
        nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 8), nn.Softplus(beta=2.0), nn.SiLU(),
        nn.Linear(8, 4), nn.LeakyReLU(0.1), nn.Linear(4, 2), nn.LogSoftmax(-1),
    )  # fmt: skip


def _network_kernels() -> list[Any]:
    """Kernels that evaluate a network per work item (kg.nn.device_function), in both
    weight modes."""
    model = _small_network()
    constants = kg.nn.device_function(model, weights="constants")
    arrays = kg.nn.device_function(model, weights="arrays")

    def evaluate_network(out, inputs):
        i = kg.index()
        constants(inputs[i, :], out[i, :])

    def evaluate_network_with_weights(out, weights, inputs):
        i = kg.index()
        arrays(weights, inputs[i, :], out[i, :])

    return [kg.kernel(evaluate_network), kg.kernel(evaluate_network_with_weights)]


@kg.elementwise
def soft_clip(x, limit):
    return limit * kg.tanh(x / limit)


@kg.elementwise
def mixture(x, y):
    blend = kg.sigmoid(x - y)
    return kg.where(x > y, blend * kg.exp(-y * y), kg.log1p(x * x) + kg.maximum(x, 0.5 * y))


@kg.elementwise
def polar(x, y):
    radius = kg.sqrt(x * x + y * y)
    return radius, kg.exp(-radius) * x


@kg.elementwise
def inside(x, low, high):
    return (x >= low) & (x <= high)


@kg.elementwise
def twice_plus_one(n):
    return n * 2 + 1


@kg.elementwise
def leaky(x):
    if x > 0:
        return x
    return 0.1 * x


# --- cases ------------------------------------------------------------------------------------
def _tuple(n: int) -> Any:
    """A tuple of ``n`` int64s; the fused kernels' launcher passes an empty one as ``(0,)``."""
    return base._tuple(max(n, 1))


def kernel_cases() -> Iterator[tuple[str, str, dict[str, Any], tuple]]:
    """(name, module source, injected globals, signature) of user kernels' CUDA forms."""
    from ..kernel import transform

    f32, i64 = kg.float32, kg.int64
    types = _types()
    cases = [
        (clamp_, 1, False, [_array(f32, 1, "A")]),
        (add_transposed, 2, False, [_array(f32, 2, "A")] * 3 + [types.float64]),
        (fill_coordinates, 3, False, [_array(i64, 3, "A")]),
        (softplus_, 1, False, [_array(f32, 1, "A"), types.int64]),
        (row_scan, 1, False, [_array(f32, 2, "A")] * 2),
        (matmul_tiled, 2, True, [_array(f32, 2, "A")] * 3),
        (group_sums, 1, True, [_array(f32, 1, "A"), _array(f32, 1, "A"), types.int64]),
        (positions, 2, True, [_array(i64, 2, "A")] * 3),
    ]
    network, network_with_weights = _network_kernels()
    matrix, vector = _array(f32, 2, "A"), _array(f32, 1, "A")
    cases += [
        (network, 1, False, [matrix, matrix]),
        (network_with_weights, 1, False, [matrix, vector, matrix]),
    ]
    for kernel, ndim, workgroup, params in cases:
        source = transform.cuda_source(kernel.info, ndim, workgroup)
        signature = tuple([types.int64] * ndim + params)
        form = "workgroup" if workgroup else "plain"
        yield (
            f"kernel {kernel.info.name} ({form}, {ndim}-d)",
            source,
            kernel.info.injected,
            signature,
        )


def _elementwise_case(
    name: str, fn: Any, nout: int, compute: list[Any], kinds: tuple[str, ...], out: list[Any]
) -> tuple[str, str, dict[str, Any], tuple]:
    from ..backends.cuda import codegen

    source = codegen.elementwise_source(fn.name, fn.source, nout, kinds, compute, out, 0)
    return name, source, {}, base.elementwise_signature(kinds, compute, out)


def elementwise_cases() -> Iterator[tuple[str, str, dict[str, Any], tuple]]:
    """@kg.elementwise functions (typed sources and gradients) in the CUDA backend's
    elementwise kernel."""
    from ..dtypes import bool_, float32, float64, int32

    for dtype in (float32, float64):
        for kinds in (("array", "array"), ("array", "scalar")):
            fn = soft_clip.scalar_for([dtype, dtype])
            yield _elementwise_case(
                f"soft_clip[{dtype.name},{kinds}]", fn, 1, [dtype] * 2, kinds, [dtype]
            )
        fn = mixture.scalar_for([dtype, dtype])
        yield _elementwise_case(
            f"mixture[{dtype.name}]", fn, 1, [dtype] * 2, ("array", "array"), [dtype]
        )
        fn = polar.scalar_for([dtype, dtype])
        yield _elementwise_case(
            f"polar[{dtype.name}]", fn, 2, [dtype] * 2, ("array", "array"), [dtype] * 2
        )
        grad = mixture._grad_function((0, 1), (2, 2))
        fn = grad.scalar_for([dtype] * 3)
        yield _elementwise_case(
            f"mixture_grad[{dtype.name}]",
            fn,
            2,
            [dtype] * 3,
            ("array", "array", "array"),
            [dtype] * 2,
        )
    fn = inside.scalar_for([float32, float32, float32])
    yield _elementwise_case(
        "inside[bool out]", fn, 1, [float32] * 3, ("array", "scalar", "scalar"), [bool_]
    )
    fn = twice_plus_one.scalar_for([int32])
    yield _elementwise_case("twice_plus_one[int32]", fn, 1, [int32], ("array",), [int32])
    yield _elementwise_case("leaky[source path]", leaky.scalar, 1, [float32], ("array",), [float32])


def _programs() -> list[tuple[str, Any, tuple]]:
    from ..ops.elementwise import GELU

    rng = np.random.default_rng(0)
    w1 = kg.tensor(rng.standard_normal((6, 16)), dtype=kg.float32).requires_grad_()
    w2 = kg.tensor(rng.standard_normal((16, 3)), dtype=kg.float32).requires_grad_()

    def train_step(x, target):
        for p in (w1, w2):
            p.grad = None
        logits = (x @ w1).tanh() @ w2
        loss = -(logits.log_softmax(1) * target).sum(1).mean()
        loss.backward()
        with kg.no_grad():
            for p in (w1, w2):
                p.sub_(p.grad * 0.1)
        return loss

    x = kg.randn(8, 6)
    target = kg.tensor(np.eye(3)[np.arange(8) % 3], dtype=kg.float32)
    a, b = kg.randn(4, 7), kg.randn(7)
    ints = kg.tensor(rng.integers(-3, 3, (4, 7)))
    return [
        ("mlp training step", train_step, (x, target)),
        (
            "gelu(x @ w + b)",
            lambda x, w, b: GELU(x @ w + b),
            (kg.randn(8, 5), kg.randn(5, 6), kg.randn(6)),
        ),
        ("mse", lambda a, b: ((a - b) ** 2).mean(), (a, b)),
        (
            "max/min/casts",
            lambda a, n: (
                (a * 2).amax(1)
                + (n.to(kg.float32) - a).amin(0).sum()
                + (a > 0).sum(1).to(kg.float32)
            ),
            (a, ints),
        ),
        ("softmax", lambda a: a.softmax(1) * 3 + a.exp().sum(), (a,)),
    ]


def compile_cases() -> Iterator[tuple[str, str, dict[str, Any], tuple]]:
    """The fused kernels of kg.compile traces, in their CUDA form."""
    from ..backends.cuda import codegen
    from . import plan as plan_module

    types = _types()
    for title, fn, args in _programs():
        compiled = kg.compile(fn)
        compiled(*args)  # the first call runs eagerly
        compiled(*args)  # the second traces
        plan = compiled.last_plan
        assert plan is not None
        analysis = plan.analysis
        for group, step in zip(analysis.groups, plan.steps):
            if group.reduce_op is not None:
                parts = plan_module.reduce_parts(analysis, group)
                layout, _, out_views = parts.cuda_layout()
                pro, _ = plan_module._split_operands(
                    parts.prologue, None if parts.prologue else parts.x_view
                )
                epi, _ = plan_module._split_operands(parts.epilogue, None)
                signature = [
                    types.int64,
                    types.int64,
                    _tuple(len(layout["kshape"])),
                    _tuple(len(layout["rshape"])),
                    _tuple(len(pro)),
                    _tuple(len(layout["pro_kstrides"])),
                    _tuple(len(layout["pro_rstrides"])),
                    _tuple(len(layout["eshape"])),
                    _tuple(len(epi)),
                    _tuple(len(layout["epi_strides"])),
                    _tuple(len(out_views)),
                    _tuple(len(layout["out_strides"])),
                ]
                signature += [_array(v.dtype) for v in pro]
                if parts.prologue:
                    signature += [
                        _scalar_type(d)
                        for x, d in zip(parts.prologue.operands, parts.prologue.dtypes)
                        if not isinstance(x, plan_module.ViewRef)
                    ]
                signature += [_array(v.dtype) for v in epi]
                if parts.epilogue:
                    signature += [
                        _scalar_type(d)
                        for x, d in zip(parts.epilogue.operands, parts.epilogue.dtypes)
                        if not isinstance(x, plan_module.ViewRef)
                    ]
                signature += [_array(v.dtype) for v in out_views]
                yield f"{title}: {parts.label}", parts.cuda_source(), {}, tuple(signature)
            elif isinstance(step, plan_module.ElementwiseStep) and len(group.members) > 1:
                kinds = tuple(
                    "array" if isinstance(x, plan_module._Template) else "scalar"
                    for x in step.inputs
                )
                out = [o.dtype for o in step.outputs]
                source = codegen.elementwise_source(
                    step.fn.name, step.fn.source, step.fn.nout, kinds, step.compute, out, 0
                )
                signature = base.elementwise_signature(kinds, step.compute, out)
                yield f"{title}: {step.fn.name}", source, {}, signature


# --- running ----------------------------------------------------------------------------------
def run(cc: tuple[int, int], verbose: bool) -> int:
    status = base.prepare(cc)
    if status is not None:
        return status
    cases = list(kernel_cases()) + list(elementwise_cases()) + list(compile_cases())
    return base.compile_to_ptx(
        [
            (name, functools.partial(base.load_kernel, source, "ptxcheck_user", injected), sig)
            for name, source, injected, sig in cases
        ],
        cc,
        verbose,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0", help="compute capability, e.g. 8.0 or 9.0")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    major, minor = (int(part) for part in args.cc.split("."))
    return run((major, minor), args.verbose)


if __name__ == "__main__":
    sys.exit(main())
