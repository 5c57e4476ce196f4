"""Source-text helpers shared by the backends' code generators: :func:`cast`, and
transforms of scalar-function source.

Numba types Python number literals as float64/int64, and NumPy's promotion rules then
widen float32 arithmetic: ``0.5 * x`` with a float32 ``x`` is float64, as is ``x * 2``
and ``x if x > 0 else 0``. The result is correct after the cast on store, but the kernel
computes in double precision: half the SIMD width on the CPU, and the slow double-
precision units on most GPUs. When a kernel's floating-point compute type is float32,
:func:`narrow_literals` wraps every number literal and ``math`` constant (``math.inf``,
``math.pi``, ...) in ``np.float32(...)`` and turns ``float(...)`` into ``np.float32(...)``, so
the whole expression stays in float32, as it would in PyTorch.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from ..dtypes import DType


def cast(expr: str, dtype: DType) -> str:
    """Source text converting ``expr`` to ``dtype`` (``np.float32(expr)``, ...)."""
    return "np.bool_(" + expr + ")" if dtype.is_bool else f"np.{dtype.numpy.name}({expr})"


class _WrapLiterals(ast.NodeTransformer):
    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return node
        return self._wrap(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        # math.inf, math.nan, math.pi, math.e, math.tau: float64 constants
        if (
            isinstance(node.value, ast.Name)
            and node.value.id == "math"
            and node.attr in _MATH_CONSTANTS
            and isinstance(node.ctx, ast.Load)
        ):
            return self._wrap(node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "float"
            and len(node.args) == 1
            and not node.keywords
        ):
            # float(x) is a float64 in compiled code
            node.func = ast.Attribute(
                value=ast.Name(id="np", ctx=ast.Load()), attr=self.type_name, ctx=ast.Load()
            )
        return node

    def _wrap(self, node: ast.expr) -> ast.AST:
        call = ast.Call(
            func=ast.Attribute(value=ast.Name(id="np", ctx=ast.Load()), attr=self.type_name),
            args=[node],
            keywords=[],
        )
        return ast.copy_location(call, node)


_MATH_CONSTANTS = frozenset({"inf", "nan", "pi", "e", "tau"})


def narrow_literals(source: str, compute_dtypes: Sequence[DType]) -> str:
    """``source`` with number literals cast to float32 when that is the widest floating
    compute dtype; unchanged otherwise (float64, or integer-only kernels)."""
    floats = [d for d in compute_dtypes if d.is_floating_point]
    if not floats or max(d.itemsize for d in floats) != 4:
        return source
    tree = _WrapLiterals("float32").visit(ast.parse(source))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
