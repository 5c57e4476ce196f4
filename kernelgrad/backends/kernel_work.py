"""How much work one item of a ``@kg.kernel`` does, estimated at launch from its loops.

A backend that runs small launches on the calling thread (the CPU: waking worker
threads costs more than a little work) counts work, not work items: a kernel with one
item per row and a loop over the row's 1,024 columns does 1,024 times the work of an
elementwise kernel with as many items. The estimate multiplies the trip counts of
nested ``for ... in range(...)`` loops, with the bounds evaluated from the launch's
arguments where they are made of integer arguments, array shapes (``x.shape[1]``,
``len(x)``), integer constants and ``+ - * // % min max``; a bound it cannot evaluate
(a local variable, a ``while`` loop) counts ``UNKNOWN_TRIPS``. A body without loops is
one unit of work, so elementwise kernels keep the item count as their work.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Sequence
from typing import Any

UNKNOWN_TRIPS = 16

_OPERATORS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


class _UnknownError(Exception):
    pass


def work_per_item(info: Any, values: Sequence[Any]) -> int:
    """:func:`item_work` of a kernel's ``KernelInfo``: 1 at once for a body without
    loops (an elementwise kernel: most launches), found once and kept on the info."""
    if info.has_loops is None:
        info.has_loops = any(
            isinstance(node, (ast.For, ast.While))
            for statement in info.body
            for node in ast.walk(statement)
        )
    if not info.has_loops:
        return 1
    return item_work(info.params, info.body, values)


def item_work(params: Sequence[str], body: list[ast.stmt], values: Sequence[Any]) -> int:
    """Estimated units of work of one item of a kernel whose parameters ``params`` take
    ``values`` (the launch's argument values: arrays and numbers), at least 1."""
    return max(1, _cost(body, dict(zip(params, values))))


def _cost(statements: list[ast.stmt], env: dict[str, Any]) -> int:
    total = 0
    for statement in statements:
        if isinstance(statement, ast.For):
            total += _trips(statement.iter, env) * max(1, _cost(statement.body, env))
            total += _cost(statement.orelse, env)
        elif isinstance(statement, ast.While):
            total += UNKNOWN_TRIPS * max(1, _cost(statement.body, env))
        elif isinstance(statement, ast.If):
            total += max(_cost(statement.body, env), _cost(statement.orelse, env))
        elif isinstance(statement, ast.With):
            total += _cost(statement.body, env)
    return total


def _trips(iterable: ast.expr, env: dict[str, Any]) -> int:
    if not (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id in ("range", "prange")
        and 1 <= len(iterable.args) <= 3
    ):
        return UNKNOWN_TRIPS
    try:
        bounds = [_value(arg, env) for arg in iterable.args]
    except (_UnknownError, IndexError, TypeError, ZeroDivisionError):
        return UNKNOWN_TRIPS
    return len(range(*bounds))


def _value(node: ast.expr, env: dict[str, Any]) -> int:
    """The integer value of ``node`` for these arguments, or :class:`_UnknownError`."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        value = env.get(node.id)
        if value is None or isinstance(value, bool) or not hasattr(value, "__index__"):
            raise _UnknownError
        return int(value.__index__())
    if (  # x.shape[k]
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "shape"
        and isinstance(node.value.value, ast.Name)
    ):
        return int(_shape(node.value.value.id, env)[_value(node.slice, env)])
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left, env), _value(node.right, env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id == "len" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            return int(_shape(node.args[0].id, env)[0])
        if node.func.id in ("min", "max") and node.args:
            values = [_value(arg, env) for arg in node.args]
            return min(values) if node.func.id == "min" else max(values)
    raise _UnknownError


def _shape(name: str, env: dict[str, Any]) -> tuple[int, ...]:
    shape = getattr(env.get(name), "shape", None)
    if shape is None:
        raise _UnknownError
    return shape
