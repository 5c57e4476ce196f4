"""``kg.private(shape, dtype)`` on the CPU: a small array on the stack of the work item.

The CUDA form of a kernel turns ``kg.private`` into ``cuda.local.array`` (registers, or
the thread's local memory). The CPU form calls :func:`private_array`, a Numba intrinsic
that reserves the array in the calling function's stack frame (an LLVM ``alloca`` in
its entry block): no heap allocation, no reference counting, and LLVM may keep the
elements in registers, as the GPU compiler does. Like ``cuda.local.array`` the contents
start undefined, and the array lives until the function that created it returns: never
return it from a helper function.

Generated CPU kernel modules that use it import it by name and carry :data:`SOURCE_DIGEST`
in their text, so a change to this file gives them new content-hashed names (Numba's
on-disk cache does not track dependencies between modules).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["SOURCE_DIGEST", "private_array"]

SOURCE_DIGEST = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def _literal_sizes(shape: types.Type) -> tuple[int, ...] | None:
    if isinstance(shape, types.IntegerLiteral):
        return (shape.literal_value,)
    if isinstance(shape, types.BaseTuple) and all(
        isinstance(size, types.IntegerLiteral) for size in shape.types
    ):
        return tuple(size.literal_value for size in shape.types)
    return None


@intrinsic(prefer_literal=True)
def private_array(typingctx, shape, dtype):
    """``private_array(shape, dtype)``: a C-contiguous array of the constant ``shape``
    (an int or a tuple of ints) and NumPy scalar type ``dtype`` in the caller's stack
    frame. Only callable from Numba-compiled code."""
    sizes = _literal_sizes(shape)
    if sizes is None or not isinstance(dtype, types.NumberClass):
        return None
    element = dtype.instance_type
    array_type = types.Array(element, len(sizes), "C")
    count = 1
    for size in sizes:
        count *= size

    def codegen(context, builder, signature, args):
        data_type = context.get_data_type(element)
        itemsize = context.get_abi_sizeof(data_type)
        data = cgutils.alloca_once(builder, data_type, size=max(count, 1))
        strides = []
        stride = itemsize
        for size in reversed(sizes):
            strides.append(stride)
            stride *= size
        array = context.make_array(array_type)(context, builder)
        context.populate_array(
            array,
            data=data,
            shape=[context.get_constant(types.intp, s) for s in sizes],
            strides=[context.get_constant(types.intp, s) for s in reversed(strides)],
            itemsize=context.get_constant(types.intp, itemsize),
            meminfo=None,
        )
        return array._getvalue()

    return array_type(shape, dtype), codegen
