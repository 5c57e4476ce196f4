"""Static arguments of a ``@kg.kernel``: ``@kg.kernel(static=("kw", "pairs"))`` compiles
one form of the kernel per combination of those arguments' values, with each value
written into the body as a constant and every ``if`` (or ``a if c else b``) whose test
becomes a constant reduced to the branch it takes. A kernel with fast paths for a few
shapes then compiles only the path a launch runs (the convolution kernels: 5x5, 3x3 and
general filters, pairs of channels or not), which is what costs compile time; the
generated loops are the same."""

from __future__ import annotations

import ast
import copy
import dataclasses
import operator
from typing import Any

from ..backends.kernel_source import KernelInfo, kernel_error

_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_UNKNOWN = object()


def check_static(info: KernelInfo, names: tuple[str, ...]) -> None:
    """Static names must be parameters the body never assigns."""
    for name in names:
        if name not in info.params:
            raise kernel_error(
                info, None, f"static={names!r} names {name!r}, which is not a parameter"
            )
    for node in ast.walk(ast.Module(body=info.body, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in names:
            raise kernel_error(
                info, node, f"the body assigns to {node.id!r}, a static argument; use a new name"
            )


def static_value(kernel_name: str, name: str, value: Any) -> int | bool:
    """A static argument's value: a Python or NumPy int or bool."""
    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    raise TypeError(
        f"kernel '{kernel_name}': static argument '{name}' must be an int or a bool (its "
        f"value is compiled into the kernel), got a {type(value).__name__}"
    )


def specialize(info: KernelInfo, values: dict[str, int | bool]) -> KernelInfo:
    """``info`` with the static ``values`` substituted and constant branches folded."""
    tree = ast.Module(body=copy.deepcopy(info.body), type_ignores=[])
    tree = ast.fix_missing_locations(_Fold(values).visit(tree))
    return dataclasses.replace(info, body=tree.body)


class _Fold(ast.NodeTransformer):
    def __init__(self, values: dict[str, int | bool]) -> None:
        self.values = values

    def generic_visit(self, node: ast.AST) -> ast.AST:
        # A statement visitor that returns a list (a folded `if`) is spliced into its
        # block by NodeTransformer; a block left empty by a branch folded away gets a
        # `pass`.
        node = super().generic_visit(node)
        if isinstance(getattr(node, "body", None), list) and not node.body:
            node.body = [ast.Pass()]
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return ast.copy_location(ast.Constant(self.values[node.id]), node)
        return node

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        test = _constant(node.test)
        if test is _UNKNOWN:
            return node
        return node.body if test else node.orelse

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        test = _constant(node.test)
        if test is _UNKNOWN:
            return node
        return node.body if test else node.orelse

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        """``x and True`` -> ``x``, ``x and False`` -> ``False`` (``or`` alike), so that a
        test mixing static and run-time values still loses its static part."""
        self.generic_visit(node)
        absorbing = isinstance(node.op, ast.Or)  # True absorbs `or`, False absorbs `and`
        kept = []
        for value in node.values:
            constant = _constant(value)
            if constant is _UNKNOWN:
                kept.append(value)
            elif bool(constant) == absorbing:
                return ast.copy_location(ast.Constant(absorbing), node)
        if not kept:
            return ast.copy_location(ast.Constant(not absorbing), node)
        if len(kept) == 1:
            return kept[0]
        node.values = kept
        return node


def _constant(node: ast.AST) -> Any:
    """The value of an expression made of constants (comparisons, ``not``, ``and``/``or``
    already folded), else ``_UNKNOWN``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _constant(node.operand)
        return _UNKNOWN if value is _UNKNOWN else not value
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        left, right = _constant(node.left), _constant(node.comparators[0])
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        return _COMPARE[type(node.ops[0])](left, right)
    return _UNKNOWN
