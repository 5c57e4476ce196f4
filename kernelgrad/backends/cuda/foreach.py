"""One kernel launch for an elementwise function over many tensors: the CUDA backend's
``elementwise_foreach`` (an optimizer's update of every parameter of a group).

Each parameter is an *item*: its own outputs and inputs, all contiguous, of its own
size. The kernel takes every item's arrays as tuples (one array per item), their offsets
and sizes as tuples of integers, and runs on a 2-D grid: ``blockIdx.y`` picks the item,
the x dimension is a grid-stride loop over its elements. Everything travels in the
launch's parameter buffer, so nothing is copied to the device per launch.

A launch's parameters are limited (4 KiB on every CUDA version and GPU kernelgrad
supports), and a 1-D array argument takes 56 bytes of them: :func:`items_per_launch`
says how many items fit, and larger groups take several launches (an Adam update, four
arrays per item, fits 14 items; LeNet-5 has 10 parameters). numba-cuda compiles one
version of the kernel per item count.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...dtypes import DType
from ..scalar_source import cast, narrow_literals

PARAMETER_BYTES = 4096
ARRAY_BYTES = 56  # meminfo, parent, size, itemsize, data, shape, strides
WORD_BYTES = 8
RESERVED_BYTES = 512  # uniform scalars and alignment


def items_per_launch(n_arrays: int, n_item_scalars: int, n_scalars: int) -> int:
    """How many items fit in one launch's parameters, with ``n_arrays`` arrays and
    ``n_item_scalars`` per-item scalars each, and ``n_scalars`` scalars shared by all."""
    per_item = n_arrays * (ARRAY_BYTES + WORD_BYTES) + WORD_BYTES * (1 + n_item_scalars)
    budget = PARAMETER_BYTES - RESERVED_BYTES - WORD_BYTES * n_scalars
    return max(1, budget // per_item)


def foreach_source(
    fn_name: str,
    fn_source: str,
    nout: int,
    input_kinds: Sequence[str],
    compute_dtypes: Sequence[DType],
    out_dtypes: Sequence[DType],
    bits: int = 32,
) -> str:
    """A module defining ``kernel(numels, offsets, *operands)``.

    ``numels`` holds each item's size; ``offsets`` each item's array offsets (outputs,
    then array inputs), item after item. Operands: ``out<k>``, a tuple of one array per
    item; then per input of kind ``"array"`` a tuple of arrays (``"splat"``: the same,
    of which the element at the offset is read for every index), ``"scalars"`` a tuple of
    one value per item, ``"scalar"`` one value for all; ``"out<k>"`` reads output ``k``
    (an in-place update) and takes no operand. ``bits`` is the width of the index
    arithmetic (``codegen.index_bits``: 32 unless an item or buffer reaches 2**31)."""
    from .codegen import (
        _HEADER,
        counter_type,
        grid_stride,
        grid_stride_next,
        integer_rounding,
        position_type,
    )

    n_item_arrays = nout + sum(1 for kind in input_kinds if kind in ("array", "splat"))
    params = [f"out{k}" for k in range(nout)]
    counter, position = counter_type(bits), position_type(bits)
    body = [
        "item = cuda.blockIdx.y",
        f"n = {counter}(numels[item])",
        f"base = item * {n_item_arrays}",
    ]
    body += [f"o{k} = out{k}[item]" for k in range(nout)]
    body += [f"p{k} = {position}(offsets[base + {k}])" for k in range(nout)]
    arguments = []
    array = nout
    for i, kind in enumerate(input_kinds):
        if kind == "array":
            params.append(f"in{i}")
            body += [f"a{i} = in{i}[item]", f"q{i} = {position}(offsets[base + {array}])"]
            array += 1
            arguments.append(cast(f"a{i}[q{i} + j]", compute_dtypes[i]))
        elif kind == "splat":  # one element read for every index (a traced step size)
            params.append(f"in{i}")
            body += [f"a{i} = in{i}[item]", f"q{i} = {position}(offsets[base + {array}])"]
            array += 1
            body.append(f"s{i} = {cast(f'a{i}[q{i}]', compute_dtypes[i])}")
            arguments.append(f"s{i}")
        elif kind.startswith("out"):
            k = int(kind[3:])
            arguments.append(cast(f"o{k}[p{k} + j]", compute_dtypes[i]))
        elif kind == "scalars":
            params.append(f"scalar{i}")
            body.append(f"s{i} = scalar{i}[item]")
            arguments.append(f"s{i}")
        else:
            params.append(f"scalar{i}")
            arguments.append(f"scalar{i}")
    body.append(f"step = {counter}(cuda.gridDim.x * cuda.blockDim.x)")
    body += grid_stride("j", "cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x", "n", bits)
    call = f"_scalar_fn({', '.join(arguments)})"
    if nout == 1:
        body.append(f"    o0[p0 + j] = {cast(call, out_dtypes[0])}")
    else:
        body.append(f"    result = {call}")
        body += [f"    o{k}[p{k} + j] = {cast(f'result[{k}]', out_dtypes[k])}" for k in range(nout)]
    body.append("    " + grid_stride_next("j", "step", bits))
    lines = [
        _HEADER.format(kind="foreach"),
        "",
        narrow_literals(fn_source, compute_dtypes).rstrip(),
    ]
    lines += ["", ""]
    lines.append(f"_scalar_fn = cuda.jit(device=True)({fn_name})")
    lines += ["", "", "@cuda.jit(cache=True)", f"def kernel(numels, offsets, {', '.join(params)}):"]
    lines += ["    " + line for line in body]
    lines.append("")
    return integer_rounding("\n".join(lines))
