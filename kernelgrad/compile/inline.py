"""Composing scalar functions: the source of a fused elementwise kernel.

Each elementwise op carries the source of its scalar function (``def relu(x): return 0
if x <= 0 else x``). A chain of ops becomes one function by *inlining* each op's body:
its parameters and locals get a unique prefix, and every ``return value`` becomes an
assignment to the op's result variable. Bodies whose returns all sit in tail position
(the last statement of a branch, or a branch followed by the rest of the function) are
inlined; a loop containing ``return`` is not (that op stays a kernel of its own).

Between two inlined ops the value is converted exactly as the eager path would have
stored and loaded it (``np.float32(...)`` and friends, which Numba compiles to plain
casts), so a fused chain computes the same numbers as the eager ops, in the same
precision.
"""

from __future__ import annotations

import ast
import copy
import functools
from typing import Any

from ..backends.base import ScalarFunction
from ..dtypes import DType


class NotInlinable(Exception):  # noqa: N818 - an internal signal, never shown to users
    pass


@functools.lru_cache(maxsize=4096)
def _parse(source: str, name: str) -> ast.FunctionDef:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise NotInlinable(f"no function {name!r} in the scalar source")


def _contains_return(nodes: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Return) for stmt in nodes for n in ast.walk(stmt))


def _always_returns(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return True
        if isinstance(stmt, ast.If) and _always_returns(stmt.body) and _always_returns(stmt.orelse):
            return True
    return False


def _results_assign(targets: list[str], value: ast.expr) -> list[ast.stmt]:
    if len(targets) == 1:
        return [ast.Assign([ast.Name(targets[0], ast.Store())], value)]
    if isinstance(value, ast.Tuple) and len(value.elts) == len(targets):
        return [ast.Assign([ast.Name(t, ast.Store())], v) for t, v in zip(targets, value.elts)]
    store = ast.Tuple([ast.Name(t, ast.Store()) for t in targets], ast.Store())
    return [ast.Assign([store], value)]


def _block(stmts: list[ast.stmt], targets: list[str]) -> list[ast.stmt]:
    """Rewrite a function body so that it assigns ``targets`` instead of returning."""
    out: list[ast.stmt] = []
    for position, stmt in enumerate(stmts):
        rest = stmts[position + 1 :]
        if isinstance(stmt, ast.Return):
            if stmt.value is None:
                raise NotInlinable("a bare return")
            return out + _results_assign(targets, stmt.value)
        if isinstance(stmt, ast.If) and _contains_return([stmt]):
            then_returns = _always_returns(stmt.body)
            else_returns = _always_returns(stmt.orelse)
            if then_returns and else_returns:
                body, orelse = stmt.body, stmt.orelse
            elif then_returns:
                body, orelse = stmt.body, stmt.orelse + rest
            elif else_returns:
                body, orelse = stmt.body + rest, stmt.orelse
            else:
                raise NotInlinable("a return that is not in tail position")
            node = ast.If(stmt.test, _block(body, targets), _block(orelse, targets) or [])
            return out + [node]
        if _contains_return([stmt]):
            raise NotInlinable(f"a return inside a {type(stmt).__name__}")
        out.append(stmt)
    raise NotInlinable("the function can end without returning")


class _Rename(ast.NodeTransformer):
    def __init__(self, names: set[str], prefix: str) -> None:
        self.names = names
        self.prefix = prefix

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in self.names:
            return ast.Name(self.prefix + node.id, node.ctx)
        return node


def inline(fn: ScalarFunction, arguments: list[str], prefix: str) -> tuple[list[str], list[str]]:
    """Source lines computing ``fn(*arguments)`` and the names holding its results."""
    tree = copy.deepcopy(_parse(fn.source, fn.name))
    params = [a.arg for a in tree.args.args]
    if len(params) != len(arguments):
        raise NotInlinable("argument count")
    local = set(params)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)) and node is not tree:
            raise NotInlinable("a nested function")
        elif isinstance(node, (ast.Global, ast.Nonlocal, ast.Yield)):
            raise NotInlinable(type(node).__name__)
    targets = [f"{prefix}out{k}" for k in range(fn.nout)]
    body = _block(tree.body, targets)
    renamer = _Rename(local, prefix)
    body = [renamer.visit(stmt) for stmt in body]
    lines = [f"{prefix}{p} = {a}" for p, a in zip(params, arguments)]
    for stmt in body:
        lines += ast.unparse(ast.fix_missing_locations(stmt)).splitlines()
    return lines, targets


def inlinable(fn: ScalarFunction) -> bool:
    try:
        inline(fn, [f"a{k}" for k in range(fn.nin)], "_t_")
    except (NotInlinable, SyntaxError):
        return False
    return True


def numpy_type(dtype: DType) -> str:
    return "np.bool_" if dtype.name == "bool" else f"np.{dtype.numpy.name}"


def convert(expression: str, source: DType | None, target: DType) -> str:
    """The expression stored as ``source`` dtype and loaded as ``target`` compute dtype,
    exactly as the eager path converts between two kernels. (The generated modules of
    both backends import NumPy as ``np``; its scalar types are Numba's casts.)"""
    value = expression
    if source is not None:
        value = f"{numpy_type(source)}({value})"
    if source is None or source is not target:
        value = f"{numpy_type(target)}({value})"
    return value
