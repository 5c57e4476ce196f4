"""Bounds guards of a ``@kg.kernel`` body as loop bounds, for the CPU's inline loops.

Kernels over an index range usually start with a guard::

    i, j = kg.index(2)
    if i == 0 or j == 0 or i >= h - 1 or j >= w - 1:
        return

or put the rest of the body under its opposite (``if i < h and j < w:``, an ``and`` of
single comparisons), which is read as the same guard.

Run as written inside the inner loop over ``j``, the guard is a branch per element that
stops LLVM from vectorising the loop. :func:`hoist_guard` turns the terms of such a
guard into what a programmer writes by hand: terms on the last index dimension narrow
the inner loop's range (``j == 0`` and ``j < e`` raise its start, ``j >= e`` lowers its
stop), terms on the other dimensions skip a whole row before the inner loop. Terms it
cannot read that way stay in the body as a guard of their own.

Only a guard right after the index assignments is hoisted, and only when every term
reads nothing but index names, integer parameters, integer module constants, array
shapes and integer arithmetic (loop-invariant, no side effects, integer-valued).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any

from ..kernel_source import PREFIX, KernelInfo

_FLIPPED = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq}
_INTEGER_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


@dataclass
class Hoisted:
    """A guard read as loop bounds (source text of integer expressions)."""

    body: list[ast.stmt]  # the body without the hoisted terms
    starts: list[str] = field(default_factory=list)  # the inner loop starts at their max
    stops: list[str] = field(default_factory=list)  # and stops at their min
    row_skips: list[str] = field(default_factory=list)  # skip the row when one holds


def _aliases(body: list[ast.stmt], ndim: int) -> tuple[dict[str, int], int]:
    """Names bound to index coordinates by the leading statements (name -> dimension),
    and how many leading statements do only that."""
    coordinate = {f"{PREFIX}g{d}": d for d in range(ndim)}
    if ndim == 1:
        coordinate[PREFIX + "lin"] = 0
    aliases: dict[str, int] = {}
    count = 0
    for stmt in body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            break
        target, value = stmt.targets[0], stmt.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            if len(target.elts) != len(value.elts):
                break
            pairs = list(zip(target.elts, value.elts))
        if not all(
            isinstance(t, ast.Name) and isinstance(v, ast.Name) and v.id in coordinate
            for t, v in pairs
        ):
            break
        for t, v in pairs:
            aliases[t.id] = coordinate[v.id]
        count += 1
    return aliases, count


class _Reader:
    """Which index dimensions an expression reads, or None when it is not a loop-invariant
    integer expression of index names, integer parameters and constants, and shapes."""

    def __init__(self, info: KernelInfo, aliases: dict[str, int], types: dict[str, Any]):
        self.aliases = aliases
        self.integers = {n for n, t in types.items() if t == "i"}
        self.integers |= {n for n, t in info.global_types.items() if t == "i"}
        self.arrays = {n for n, t in types.items() if isinstance(t, tuple)}

    def dims(self, node: ast.AST) -> set[int] | None:
        if isinstance(node, ast.Constant):
            ok = isinstance(node.value, int) and not isinstance(node.value, bool)
            return set() if ok else None
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return {self.aliases[node.id]}
            return set() if node.id in self.integers else None
        if isinstance(node, ast.Subscript):  # x.shape[k]
            shape = node.value
            if (
                isinstance(shape, ast.Attribute)
                and shape.attr == "shape"
                and isinstance(shape.value, ast.Name)
                and shape.value.id in self.arrays
                and isinstance(node.slice, ast.Constant)
                and type(node.slice.value) is int
            ):
                return set()
            return None
        if isinstance(node, ast.Attribute):  # x.size, x.ndim
            if node.attr in ("size", "ndim") and isinstance(node.value, ast.Name):
                return set() if node.value.id in self.arrays else None
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, _INTEGER_OPERATORS):
            left, right = self.dims(node.left), self.dims(node.right)
            return None if left is None or right is None else left | right
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.dims(node.operand)
        return None


def _bound(term: ast.expr, last: int, reader: _Reader) -> tuple[str, str] | None:
    """``("start", e)`` or ``("stop", e)`` for a term that excludes the last dimension's
    index below ``e`` or from ``e`` on; None for any other term."""
    if not (isinstance(term, ast.Compare) and len(term.ops) == 1):
        return None
    left, op, right = term.left, type(term.ops[0]), term.comparators[0]
    if reader.dims(right) == {last} and isinstance(right, ast.Name):
        left, right, op = right, left, _FLIPPED.get(op)
    if not (isinstance(left, ast.Name) and reader.dims(left) == {last}):
        return None
    if reader.dims(right) != set():
        return None
    other = ast.unparse(right)
    if op is ast.Lt:
        return "start", other
    if op is ast.LtE:
        return "start", f"({other}) + 1"
    if op is ast.GtE:
        return "stop", other
    if op is ast.Gt:
        return "stop", f"({other}) + 1"
    if op is ast.Eq and isinstance(right, ast.Constant) and right.value == 0:
        return "start", "1"  # indices are never negative
    return None


def hoist_guard(info: KernelInfo, body: list[ast.stmt], ndim: int, types: dict) -> Hoisted:
    """Read the guard after the index assignments of ``body`` as loop bounds (see the
    module docstring); ``types`` maps parameters to type codes (``"i"``, arrays as
    ``("A", dtype, ndim)``)."""
    nothing = Hoisted(body)
    aliases, count = _aliases(body, ndim)
    if count >= len(body):
        return nothing
    guard = body[count]
    if not (isinstance(guard, ast.If) and not guard.orelse):
        return nothing
    wrapped = False
    if len(guard.body) == 1 and isinstance(guard.body[0], ast.Return):
        test, rest = guard.test, body[count + 1 :]
        terms = _operands(test, ast.Or)
        originals = terms
    elif count + 1 == len(body):  # `if i < n and j < m:` around the rest of the body
        originals = _operands(guard.test, ast.And)
        terms = [_negated(term) for term in originals]
        if any(term is None for term in terms):
            return nothing
        rest, wrapped = guard.body, True
    else:
        return nothing
    reader = _Reader(info, aliases, types)
    last = ndim - 1
    hoisted = Hoisted(body)
    kept: list[ast.expr] = []
    for term, original in zip(copy.deepcopy(terms), originals):
        bound = _bound(term, last, reader)
        # A 1-D range is the prange, whose index must stay the loop's own (an offset
        # added to it measured 6-10x slower): only its stop moves.
        if bound is not None and not (ndim == 1 and bound[0] == "start"):
            (hoisted.starts if bound[0] == "start" else hoisted.stops).append(bound[1])
            continue
        dims = _comparison_dims(term, reader)
        if dims is not None and last not in dims and ndim > 1:
            hoisted.row_skips.append(ast.unparse(_Coordinates(aliases).visit(term)))
        else:
            kept.append(original)
    if len(kept) == len(terms):
        return nothing
    if kept and wrapped:  # the remaining conditions, as written (NaN compares false)
        test = kept[0] if len(kept) == 1 else ast.BoolOp(ast.And(), kept)
        rest = [ast.fix_missing_locations(ast.If(test, rest, []))]
    elif kept:
        test = kept[0] if len(kept) == 1 else ast.BoolOp(ast.Or(), kept)
        rest = [ast.fix_missing_locations(ast.If(test, guard.body, []))] + rest
    hoisted.body = body[:count] + rest
    return hoisted


_NEGATED = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq}  # fmt: skip


def _operands(test: ast.expr, kind: type) -> list[ast.expr]:
    """The operands of an ``or``/``and`` (``kind``), or ``[test]``."""
    return test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, kind) else [test]


def _negated(term: ast.expr) -> ast.expr | None:
    """``not term`` for a single comparison (exact for the integer terms that become
    bounds; other terms are kept as written), else None."""
    if not (isinstance(term, ast.Compare) and len(term.ops) == 1):
        return None
    op = _NEGATED.get(type(term.ops[0]))
    return None if op is None else ast.Compare(term.left, [op()], term.comparators)


class _Coordinates(ast.NodeTransformer):
    """Index names as the loops' coordinates (``i`` -> ``_kg_g0``), for a term tested
    before the body binds them (binding them twice would overwrite Numba's parallel loop
    index)."""

    def __init__(self, aliases: dict[str, int]):
        self.aliases = aliases

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.aliases:
            return ast.copy_location(ast.Name(f"{PREFIX}g{self.aliases[node.id]}", node.ctx), node)
        return node


def _comparison_dims(term: ast.expr, reader: _Reader) -> set[int] | None:
    """The dimensions a comparison of invariant integer expressions reads (None: not one)."""
    if not isinstance(term, ast.Compare):
        return None
    found: set[int] = set()
    for operand in [term.left, *term.comparators]:
        dims = reader.dims(operand)
        if dims is None:
            return None
        found |= dims
    return found
