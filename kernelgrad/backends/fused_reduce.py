"""A fused reduction as ``kg.compile`` describes it to a backend, device-neutral.

A fused reduction reduces ``prologue(inputs...)`` over some axes of the reduced space for
every output index, converts the result to the reduction's dtype and stores
``epilogue(result, more inputs...)`` (``compile/graph.py`` decides what is fused). The
compile layer builds a :class:`FusedReduction` (the kind, the dtypes, the prologue's and
epilogue's scalar-function sources, the shapes and strides of every view) and asks the
backend for a kernel with ``backend.fused_reduce(reduction)`` (an optional primitive,
``backends/base.py``). Each backend generates its own source from it:
``backends/cpu/fused_reduce.py`` (``njit`` + ``prange``) and
``backends/cuda/fused_reduce.py`` (``cuda.jit``, a shared-memory tree per block).

Array operands reach the returned kernel in the order prologue arrays, epilogue arrays,
outputs, each as a buffer and an element offset (a replay resolves them per call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from ..dtypes import DType
from ..shapes import coalesce
from .scalar_source import narrow_literals


@dataclass
class FusedReduction:
    """What a fused reduction kernel is made of, independent of the device.

    ``prologue``/``epilogue`` are ``(name, source)`` of scalar functions, or None: the
    prologue takes its arrays' (converted) values then its scalars and returns the value
    reduced; the epilogue takes the reduced value, its arrays' values and its scalars and
    returns one value per output. Without a prologue the single prologue array is the
    reduction's input. Strides are in elements: a prologue array's over ``x_shape``, an
    epilogue array's and an output's over ``eshape``.

    >>> from kernelgrad.dtypes import float32
    >>> reduction = FusedReduction(
    ...     "sum", (2, 3), (1,), float32, float32, None, [float32], [(3, 1)], [],
    ...     None, [], [], [], (2,), [float32], [(1,)], "fused_sum")
    >>> reduction.layout()["n_out"], reduction.layout()["n_red"]
    (2, 3)
    """

    kind: str  # "sum", "max" or "min"
    x_shape: tuple[int, ...]  # the reduced space: the reduction's input shape
    axes: tuple[int, ...]  # the reduced axes of x_shape
    x_dtype: DType  # the reduction's input dtype (the prologue's result)
    out_dtype: DType  # the reduction's result dtype (the epilogue's first argument)
    prologue: tuple[str, str] | None
    prologue_arrays: list[DType]  # the compute dtype each prologue array's loads become
    prologue_strides: list[tuple[int, ...]]
    prologue_scalars: list[Any]  # NumPy scalars, passed after the arrays
    epilogue: tuple[str, str] | None
    epilogue_arrays: list[DType]
    epilogue_strides: list[tuple[int, ...]]
    epilogue_scalars: list[Any]
    eshape: tuple[int, ...]  # the output space (at least one dimension)
    out_dtypes: list[DType]
    out_strides: list[tuple[int, ...]]
    label: str  # names the kernel in errors, logs and launch counts

    def source_arguments(self) -> tuple[Any, ...]:
        """The arguments of the backends' ``reduce_source`` after ``kind``."""
        return (
            self.x_dtype,
            self.out_dtype,
            self.prologue,
            self.prologue_arrays,
            len(self.prologue_scalars),
            self.epilogue,
            self.epilogue_arrays,
            len(self.epilogue_scalars),
            self.out_dtypes,
        )

    def operands(self, arrays: Sequence[Any]) -> list[Any]:
        """The generated kernels' operands after their layout arguments: the prologue's
        arrays and scalars, the epilogue's arrays and scalars, the outputs."""
        n_pro, n_epi = len(self.prologue_strides), len(self.epilogue_strides)
        return [
            *arrays[:n_pro],
            *self.prologue_scalars,
            *arrays[n_pro : n_pro + n_epi],
            *self.epilogue_scalars,
            *arrays[n_pro + n_epi :],
        ]

    def offset_groups(self, offsets: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
        """``offsets`` split into the prologue arrays', the epilogue arrays' and the
        outputs'."""
        n_pro, n_epi = len(self.prologue_strides), len(self.epilogue_strides)
        offsets = list(offsets)
        return offsets[:n_pro], offsets[n_pro : n_pro + n_epi], offsets[n_pro + n_epi :]

    def layout(self) -> dict[str, Any]:
        """The kept, reduced and output spaces coalesced (size-1 dimensions dropped,
        neighbours contiguous for every operand merged), with each operand's strides as
        one row per array: ``n_out``, ``n_red``, ``kshape``, ``rshape``, ``eshape``,
        ``pro_kstrides``, ``pro_rstrides``, ``epi_strides``, ``out_strides``, ``dims``."""
        x_shape, axes = self.x_shape, self.axes
        kept = [d for d in range(len(x_shape)) if d not in axes]
        kept_shape = tuple(x_shape[d] for d in kept)
        red_shape = tuple(x_shape[d] for d in axes)
        pro = self.prologue_strides
        kshape, kstrides = coalesce(kept_shape, [tuple(s[d] for d in kept) for s in pro])
        rshape, rstrides = coalesce(red_shape, [tuple(s[d] for d in axes) for s in pro])
        eshape, estrides = coalesce(self.eshape, [*self.epilogue_strides, *self.out_strides])
        n_epi = len(self.epilogue_strides)
        return {
            "n_out": prod(kept_shape),
            "n_red": prod(red_shape),
            "kshape": tuple(kshape),
            "rshape": tuple(rshape),
            "eshape": tuple(eshape),
            "pro_kstrides": list(kstrides),
            "pro_rstrides": list(rstrides),
            "epi_strides": list(estrides[:n_epi]),
            "out_strides": list(estrides[n_epi:]),
            "dims": (len(kshape), len(rshape), len(eshape)),
        }


def numpy_type(dtype: DType) -> str:
    """The generated sources' name of ``dtype``'s NumPy scalar type (``np.float32``)."""
    return "np.bool_" if dtype.name == "bool" else f"np.{dtype.numpy.name}"


def narrowed(source: str, dtypes: list[DType]) -> str:
    """A prologue's or epilogue's source with number literals as float32 when its
    floating-point dtypes are float32, as the backends narrow their own elementwise
    kernels (``backends/scalar_source.py``), so that fused and eager results agree."""
    return narrow_literals(source, dtypes).rstrip("\n")


def operand_names(
    prologue_arrays: int,
    prologue_scalars: int,
    epilogue_arrays: int,
    epilogue_scalars: int,
    outputs: int,
) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
    """The generated kernels' names of their operands: prologue arrays ``P0...``, prologue
    scalars ``S0...``, epilogue arrays ``E0...``, epilogue scalars ``T0...``, outputs
    ``O0...``."""
    return (
        [f"P{k}" for k in range(prologue_arrays)],
        [f"S{k}" for k in range(prologue_scalars)],
        [f"E{k}" for k in range(epilogue_arrays)],
        [f"T{k}" for k in range(epilogue_scalars)],
        [f"O{k}" for k in range(outputs)],
    )
