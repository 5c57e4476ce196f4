"""Compile every kind of CUDA kernel kernelgrad generates to PTX, without a GPU.

The CUDA simulator runs kernels as Python, so it cannot catch what numba-cuda's type
inference would reject (a scalar function that does not type for some dtype, a cast
CUDA does not support). This module compiles the real thing with NVVM for a chosen
compute capability::

    python -m kernelgrad.backends.cuda.ptxcheck            # cc 9.0, the common cases
    python -m kernelgrad.backends.cuda.ptxcheck --all      # every op and dtype pattern

It needs numba-cuda's compiler libraries (``pip install "numba-cuda[cu13]"``), but no
GPU and no driver. Exit status: 0 all compiled, 1 some failed, 77 no compiler or no
CUDA backend here. Must run without ``NUMBA_ENABLE_CUDASIM``.

``kernelgrad.compile.ptxcheck`` checks user kernels and fused kernels with the same
pieces (types, the compiler probe, the compile loop).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

NO_COMPILER = 77


def _install_fake_device(cc: tuple[int, int]) -> None:
    """Device functions ask the current device for its compute capability when a kernel
    that calls them is compiled; without a GPU, answer with ``cc``."""
    import numba.cuda.dispatcher as dispatcher

    class _Device:
        compute_capability = cc

    dispatcher.get_current_device = lambda: _Device()


def _types() -> Any:
    from numba.cuda import types

    return types


def _array(dtype: Any, ndim: int = 1, layout: str = "C") -> Any:
    return _types().Array(_scalar_type(dtype), ndim, layout)


def _scalar_type(dtype: Any) -> Any:
    types = _types()
    return types.boolean if dtype.is_bool else getattr(types, dtype.name)


def _tuple(n: int) -> Any:
    types = _types()
    return types.UniTuple(types.int64, n)


def elementwise_signature(
    kinds: tuple[str, ...], compute: list[Any], out: list[Any], ndim: int = 0
) -> tuple:
    """The argument types of a generated elementwise kernel (``codegen.elementwise_source``)
    with outputs ``out`` and inputs of ``kinds`` ("array"/"scalar") in ``compute`` dtypes."""
    types = _types()
    n_arrays = len(out) + kinds.count("array")
    signature = [types.int64]
    if ndim:
        signature += [_tuple(ndim), _tuple(n_arrays), _tuple(n_arrays * ndim)]
    else:
        signature.append(_tuple(n_arrays))
    signature += [_array(d) for d in out]
    for kind, dtype in zip(kinds, compute):
        signature.append(_array(dtype) if kind == "array" else _scalar_type(dtype))
    return tuple(signature)


def elementwise_cases(everything: bool) -> Iterator[tuple[str, str, tuple]]:
    """(name, source, signature) for generated elementwise kernels."""
    from ...dtypes import bool_, float32, float64, int32, int64
    from ...ops.elementwise import IDENTITY, OPS
    from . import codegen

    types = _types()
    dtype_sets = [float32, int64, bool_] + ([float64, int32] if everything else [])
    for op_name, op in sorted(OPS.items()):
        for dtype in dtype_sets:
            operands = [_Probe(dtype)] * op.scalar.nin
            try:
                compute, out = op.dtype_rule(operands)
            except Exception:
                continue
            if op.reject_bool and out.is_bool:
                continue
            patterns = [tuple(["array"] * op.scalar.nin)]
            if op.scalar.nin > 1:
                patterns.append(("array",) + ("scalar",) * (op.scalar.nin - 1))
            for kinds in patterns:
                for ndim in (0, 2) if everything else (0,):
                    source = codegen.elementwise_source(
                        op.scalar.name, op.scalar.source, 1, kinds, compute, [out], ndim
                    )
                    yield (
                        f"{op_name}[{dtype.name},{','.join(kinds)},ndim={ndim}]",
                        source,
                        elementwise_signature(kinds, compute, [out], ndim),
                    )
    for target in (float32, float64, int32, int64, bool_):
        for source_dtype in (float32, int64, bool_):
            source = codegen.elementwise_source(
                "identity", IDENTITY.scalar.source, 1, ("array",), [target], [target], 1
            )
            signature = (
                types.int64,
                _tuple(1),
                _tuple(2),
                _tuple(2),
                _array(target),
                _array(source_dtype),
            )
            yield f"cast[{source_dtype.name}->{target.name}]", source, signature


class _Probe:
    """Stands in for a tensor operand when asking an op's dtype rule."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype
        self.ndim = 1
        self.shape = (1,)


def reduce_cases(everything: bool) -> Iterator[tuple[str, str, tuple]]:
    from ...dtypes import bool_, float32, float64, int32, int64
    from . import codegen

    types = _types()
    dtypes = [float32, float64, int32, int64, bool_] if everything else [float32, int64, bool_]
    for kind in ("sum", "max", "min", "argmax", "argmin"):
        for x in dtypes:
            if kind == "sum":
                acc = float64 if x.is_floating_point else int64
                out = x if x.is_floating_point else int64
            else:
                acc = int32 if x.is_bool else x
                out = int64 if kind.startswith("arg") else x
            for mode in ("block", "thread"):
                for index_input in (False, True):
                    source_dtype = acc if index_input else x
                    source = codegen.reduce_source(
                        kind, source_dtype, acc, out, mode, 1, 2, index_input, 256
                    )
                    signature = (
                        types.int64,
                        types.int64,
                        types.int64,
                        types.int64,
                        _tuple(1),
                        _tuple(1),
                        _tuple(2),
                        _tuple(2),
                        _array(source_dtype),
                        types.int64,
                        _array(int64),
                        _array(out),
                        types.int64,
                        _array(acc),
                        _array(int64),
                        types.boolean,
                    )
                    name = f"reduce_{kind}[{x.name},{mode},index_input={index_input}]"
                    yield name, source, signature


def matmul_cases(everything: bool) -> Iterator[tuple[str, str, tuple]]:
    from ...dtypes import bool_, float32, float64, int32, int64
    from . import codegen

    types = _types()
    dtypes = [float32, float64, int32, int64, bool_] if everything else [float32, float64]
    for dtype in dtypes:
        acc = dtype if dtype.is_floating_point else int64
        for batch in (0, 2):
            source = codegen.matmul_source(dtype, acc, batch, 16, 4)
            i64 = types.int64
            slots = max(batch, 1)  # without batch dims the backend passes (1,) and (0, 0, 0)
            signature = (i64, i64, i64, i64, _tuple(slots), _tuple(3 * slots))
            for _operand in range(3):
                signature += (_array(dtype), i64, i64, i64)
            yield f"matmul[{dtype.name},batch_ndim={batch}]", source, signature


def foreach_cases() -> Iterator[tuple[str, str, tuple]]:
    """(name, source, signature) for the foreach kernels the optimizers launch, with as
    many items as one launch takes (``foreach.items_per_launch``)."""
    from ...dtypes import float32, float64
    from ...optim.adam import ADAM_UPDATE, SET_COUNT
    from . import foreach

    types = _types()
    for dtype in (float32, float64):
        kinds = ["out0", "array", "out1", "out2"] + ["scalar"] * 9
        count = foreach.items_per_launch(4, 0, 9)
        source = foreach.foreach_source(
            ADAM_UPDATE.name, ADAM_UPDATE.source, 3, kinds, [dtype] * 13, [dtype] * 3
        )
        arrays = types.UniTuple(_array(dtype), count)
        signature = (types.UniTuple(types.int64, count), types.UniTuple(types.int64, 4 * count))
        signature += (arrays,) * 4 + (_scalar_type(dtype),) * 9
        yield f"foreach adam_update[{dtype.name}, {count} items]", source, signature
        count = foreach.items_per_launch(1, 0, 1)
        source = foreach.foreach_source(
            SET_COUNT.name, SET_COUNT.source, 1, ["scalar"], [dtype], [dtype]
        )
        signature = (types.UniTuple(types.int64, count), types.UniTuple(types.int64, count))
        signature += (types.UniTuple(_array(dtype), count), _scalar_type(dtype))
        yield f"foreach set_count[{dtype.name}, {count} items]", source, signature


def static_cases() -> Iterator[tuple[str, Any, tuple]]:
    """(name, python function, signature) for the hand-written kernels."""
    from ...dtypes import float32, float64, int32, int64
    from . import kernels

    i64 = _types().int64
    for dtype in (float32, float64, int32, int64):
        take = (i64, i64, i64, i64, _array(dtype), i64, i64, i64, i64, i64, _array(int64))
        take += (i64, i64, _array(dtype), i64, _array(int64))
        yield f"take[{dtype.name}]", kernels.take_kernel.py_func, take
        scatter = (i64, i64, i64, i64, _array(dtype), i64, i64, i64, i64, i64, _array(int64))
        scatter += (i64, i64, _array(dtype), i64, _array(int64))
        yield f"index_add[{dtype.name}]", kernels.index_add_kernel.py_func, scatter


def random_cases() -> Iterator[tuple[str, Any, tuple]]:
    """(name, python function, signature) for the Philox kernels (``rng.py``)."""
    from ...dtypes import float32, float64, int32, int64
    from . import rng

    types = _types()
    i64, u64 = types.int64, types.uint64
    kernels = rng.kernels()
    for dtype in (float32, float64):
        real = (i64, _array(dtype), i64, types.float64, types.float64, u64, u64, i64)
        uniform = kernels.uniform_kernel.py_func
        yield f"uniform[{dtype.name}]", uniform, real + (types.boolean,)
        yield f"normal[{dtype.name}]", kernels.normal_kernel.py_func, real
    for dtype in (int32, int64, float32):
        integers = (i64, _array(dtype), i64, i64, u64, u64, u64, i64)
        yield f"integers[{dtype.name}]", kernels.integers_kernel.py_func, integers


def unfused_products(ptx: str) -> str | None:
    """Why ``ptx`` may round differently from the CPU, or None: a fused multiply-add, or
    a product without an explicit rounding mode (which ptxas may still fuse). The random
    kernels must have neither (see ``backends/philox.py``)."""
    for line in ptx.splitlines():
        parts = line.split()
        instruction = parts[0] if parts else ""
        if instruction.startswith("fma.") and instruction.endswith(("f64", "f32")):
            return f"a fused multiply-add: {line.strip()}"
        if instruction in ("mul.f64", "mul.f32"):
            return f"a product ptxas may fuse: {line.strip()}"
    return None


def compiler_available(cc: tuple[int, int]) -> str | None:
    """None if the CUDA backend exists and a trivial kernel compiles, else why not."""
    try:
        from . import codegen  # noqa: F401
    except ImportError as error:
        return f"the CUDA backend is not available ({error})"
    from numba import cuda

    def probe(out):  # pragma: no cover - compiled
        out[0] = 1.0

    try:
        cuda.compile_ptx(probe, (_array(_float32()),), cc=cc)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def _float32() -> Any:
    from ...dtypes import float32

    return float32


def prepare(cc: tuple[int, int]) -> int | None:
    """The exit status when the check cannot run here (under the simulator, without a
    compiler or the CUDA backend); else None, with device queries answered with ``cc``."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        print("ptxcheck must run without NUMBA_ENABLE_CUDASIM=1", file=sys.stderr)
        return 2
    reason = compiler_available(cc)
    if reason is not None:
        print(f"no CUDA compiler available: {reason}", file=sys.stderr)
        return NO_COMPILER
    _install_fake_device(cc)
    return None


def load_kernel(source: str, prefix: str, injected: dict[str, Any] | None = None) -> Any:
    """The Python function of ``kernel`` in the generated module ``source``, with the
    ``injected`` globals set on the module."""
    from ...codecache import load_module

    module = load_module(source, prefix)
    for key, value in (injected or {}).items():
        setattr(module, key, value)
    return module.kernel.py_func


def compile_to_ptx(
    cases: list[tuple[str, Callable[[], Any], tuple]],
    cc: tuple[int, int],
    verbose: bool,
    check: Callable[[str], str | None] | None = None,
) -> int:
    """Compile the function each case's ``load()`` gives for its signature (a module that
    fails to load is a failure like one that fails to compile), and apply ``check`` to
    the PTX (a reason it is wrong, or None); print failures, with ``verbose`` successes
    and tracebacks, and a summary. 1 if any failed, else 0."""
    from numba import cuda

    failures = []
    start = time.perf_counter()
    for name, load, signature in cases:
        try:
            ptx, _ = cuda.compile_ptx(load(), signature, cc=cc)
            assert ".entry" in ptx
            problem = check(ptx) if check is not None else None
            if problem is not None:
                raise AssertionError(problem)
            if verbose:
                print(f"ok   {name}")
        except Exception as error:
            failures.append((name, error))
            print(f"FAIL {name}: {type(error).__name__}: {str(error).splitlines()[0]}")
            if verbose:
                traceback.print_exception(error)
    elapsed = time.perf_counter() - start
    print(
        f"compiled {len(cases) - len(failures)} of {len(cases)} kernels to PTX for "
        f"compute capability {cc[0]}.{cc[1]} in {elapsed:.1f} s"
    )
    return 1 if failures else 0


def run(cc: tuple[int, int], everything: bool, verbose: bool) -> int:
    status = prepare(cc)
    if status is not None:
        return status
    generated = (
        list(elementwise_cases(everything))
        + list(reduce_cases(everything))
        + list(matmul_cases(everything))
        + list(foreach_cases())
    )
    cases: list[tuple[str, Callable[[], Any], tuple]] = [
        (name, functools.partial(load_kernel, source, "ptxcheck"), signature)
        for name, source, signature in generated
    ]
    cases += [
        (name, functools.partial(_same, function), signature)
        for name, function, signature in static_cases()
    ]
    status = compile_to_ptx(cases, cc, verbose)
    return max(status, check_random_kernels(cc, verbose))


def check_random_kernels(cc: tuple[int, int], verbose: bool) -> int:
    """Compile the Philox kernels and check that they round every product as the CPU
    does (:func:`unfused_products`). Call :func:`prepare` first."""
    cases = [
        (name, functools.partial(_same, function), signature)
        for name, function, signature in random_cases()
    ]
    return compile_to_ptx(cases, cc, verbose, check=unfused_products)


def _same(value: Any) -> Any:
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0", help="compute capability, e.g. 8.0 or 9.0")
    parser.add_argument("--all", action="store_true", help="every op, dtype and rank")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    major, minor = (int(part) for part in args.cc.split("."))
    return run((major, minor), args.all, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
