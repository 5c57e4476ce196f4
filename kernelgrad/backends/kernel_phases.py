"""The CPU form of a workgroup: the kernel body cut into phases at each ``kg.barrier()``.

On a GPU the work items of a workgroup run at the same time and wait for each other at
a barrier. On the CPU one thread runs a whole workgroup: each stretch of code between
two barriers (a *phase*) becomes a loop over the group's work items, and the phases run
one after the other, so every item has finished phase ``k`` before any item starts
phase ``k + 1`` -- exactly what the barrier promises.

* The work items of a phase are one loop (nested loops over the local coordinates for a
  group of several dimensions) whose positions LLVM can prove non-negative
  (:func:`_item_loop`), so that loads across the items vectorise.
* A local variable used in more than one phase becomes a per-item array
  (``acc`` -> ``_kg_v_acc[item]``); its element type comes from :mod:`.kernel_typeinfer`.
* A ``for``/``while`` loop or an ``if`` that contains a barrier runs once per group: its
  range or condition must be the same for every work item (as CUDA requires) and is
  evaluated with the values of the group's first work item.
* Not supported on the CPU (an error names the line): a barrier inside any other
  statement, ``return`` in a kernel that has barriers, ``break``/``continue`` that would
  leave a loop containing a barrier, a loop variable of such a loop that is assigned in
  the loop's body, and a per-item variable holding something other than a number.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import kernel_typeinfer as typeinfer
from .kernel_source import PREFIX, KernelInfo, kernel_error, linearize, replace_markers


@dataclass
class Phase:
    statements: list[ast.stmt]
    in_loop: bool
    uniform: set[int] = field(default_factory=set)  # ids of statements run once per group
    uniform_names: set[str] = field(default_factory=set)  # variables equal in all items


@dataclass
class GroupStatement:
    kind: str  # "for", "while" or "if"
    node: ast.stmt
    body: list[Any] = field(default_factory=list)
    orelse: list[Any] = field(default_factory=list)


def _is_barrier(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == PREFIX + "barrier"
    )


def _contains_barrier(stmt: ast.stmt) -> bool:
    return any(isinstance(node, ast.stmt) and _is_barrier(node) for node in ast.walk(stmt))


def _split(info: KernelInfo, statements: list[ast.stmt], in_loop: bool) -> list[Any]:
    program: list[Any] = []
    current: list[ast.stmt] = []

    def flush() -> None:
        if current:
            program.append(Phase(list(current), in_loop))
            current.clear()

    for stmt in statements:
        if _is_barrier(stmt):
            flush()
            continue
        if not _contains_barrier(stmt):
            current.append(stmt)
            continue
        flush()
        if isinstance(stmt, ast.For):
            if stmt.orelse:
                raise kernel_error(info, stmt, "a for-else loop cannot contain kg.barrier()")
            if not isinstance(stmt.target, ast.Name):
                raise kernel_error(
                    info, stmt, "a loop that contains kg.barrier() needs a single loop variable"
                )
            group = GroupStatement("for", stmt, _split(info, stmt.body, True))
        elif isinstance(stmt, ast.While):
            if stmt.orelse:
                raise kernel_error(info, stmt, "a while-else loop cannot contain kg.barrier()")
            group = GroupStatement("while", stmt, _split(info, stmt.body, True))
        elif isinstance(stmt, ast.If):
            group = GroupStatement(
                "if", stmt, _split(info, stmt.body, in_loop), _split(info, stmt.orelse, in_loop)
            )
        else:
            raise kernel_error(
                info,
                stmt,
                f"kg.barrier() inside a {type(stmt).__name__} statement is not supported on "
                "the CPU; barriers may appear at the top level of the kernel body or inside "
                "for/while loops and if statements whose condition is the same for every "
                "work item of a group",
            )
        program.append(group)
    flush()
    return program


def _check_jumps(info: KernelInfo, phase: Phase) -> None:
    """``break``/``continue`` must stay inside a loop of the phase itself."""

    def visit(node: ast.AST, loop_depth: int) -> None:
        if isinstance(node, (ast.Break, ast.Continue)) and loop_depth == 0:
            raise kernel_error(
                info,
                node,
                f"'{type(node).__name__.lower()}' would leave a loop that contains "
                "kg.barrier(); on the CPU such loops run once per workgroup. Use a "
                "condition (a flag variable) instead",
            )
        for child in ast.iter_child_nodes(node):
            inner = loop_depth + (
                1 if isinstance(node, (ast.For, ast.While)) and child in (node.body) else 0
            )
            visit(child, inner)

    for stmt in phase.statements:
        visit(stmt, 0)


def _names(nodes: list[ast.AST]) -> set[str]:
    found = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                found.add(node.id)
    return found


def _first_events(phase: Phase) -> dict[str, str]:
    """For each name in the phase: 'store' if it is first met as a definite assignment,
    else 'load'."""
    events: dict[str, str] = {}

    def note(name: str, event: str) -> None:
        events.setdefault(name, event)

    def loads(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                if isinstance(sub.ctx, ast.Load):
                    note(sub.id, "load")
                else:
                    note(sub.id, "load")  # a store inside a nested statement

    def targets(target: ast.AST) -> None:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                note(sub.id, "store" if isinstance(sub.ctx, ast.Store) else "load")

    for stmt in phase.statements:
        if isinstance(stmt, ast.Assign):
            loads(stmt.value)
            for target in stmt.targets:
                targets(target)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                loads(stmt.value)
            targets(stmt.target)
        else:
            for node in ast.walk(stmt):
                if isinstance(node, ast.For):
                    targets(node.target)
            loads(stmt)
    return events


class _PerItem(ast.NodeTransformer):
    def __init__(self, names: set[str], index: str):
        self.names = names
        self.index = index

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in self.names:
            return ast.Subscript(
                ast.Name(f"{PREFIX}v_{node.id}", ast.Load()),
                ast.Name(self.index, ast.Load()) if self.index != "0" else ast.Constant(0),
                node.ctx,
            )
        return node


def check_structure(info: KernelInfo) -> None:
    """The checks of :func:`split_phases` that need no argument types (run when the
    kernel is decorated, so that errors point at the line early)."""
    body = replace_markers(info.body, f"{PREFIX}barrier()", {d.name: None for d in info.shared})
    _structure(info, body)


@dataclass
class ItemLoop:
    """How a phase visits the work items of a group: the local coordinates ``t`` over
    the group's sizes ``w`` (source names), and the lines that compute the rest of a
    work item's position from them (its global coordinates, linear index, ...)."""

    t: list[str]
    w: list[str]
    setup: list[str]


def split_phases(
    info: KernelInfo,
    body: list[ast.stmt],
    items: ItemLoop,
    arg_types: dict[str, Any],
) -> tuple[list[str], dict[str, str]]:
    """The group-level program (source lines, to run once per workgroup) and the
    per-item arrays it needs (name -> NumPy type name)."""
    program, per_item, remat = _structure(info, body)
    known: dict[str, Any] = dict(info.global_types)
    known.update(arg_types)
    for decl in info.shared:  # `t = tile[lane]` kept across a barrier has tile's type
        known[decl.name] = ("A", np.dtype(decl.dtype).name, len(decl.shape))
    types = typeinfer.infer(body, known)
    dtypes: dict[str, str] = {}
    for name in sorted(per_item):
        numpy_name = typeinfer.numpy_name(types.get(name))
        if numpy_name is None:
            line = next(
                (
                    n
                    for n in ast.walk(ast.Module(body=body, type_ignores=[]))
                    if isinstance(n, ast.Name) and n.id == name
                ),
                None,
            )
            raise kernel_error(
                info,
                line,
                f"the local variable {name!r} lives across kg.barrier(), so on the CPU each "
                "work item keeps its own copy in an array, but its type could not be "
                f"inferred (found {types.get(name)!r}); give it a plain number (e.g. "
                f"`{name} = 0.0`), or recompute it after the barrier",
            )
        dtypes[name] = numpy_name
    remat_lines = [line for stmt in remat for line in ast.unparse(stmt).splitlines()]
    items = ItemLoop(items.t, items.w, items.setup + remat_lines)
    lines = _render(program, set(dtypes), items, "")
    return lines, dtypes


def _structure(
    info: KernelInfo, body: list[ast.stmt]
) -> tuple[list[Any], set[str], list[ast.stmt]]:
    """The group-level program, the names of the per-item variables, and the statements
    that recompute the per-item values that need no array."""
    if info.uses_barrier:
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(node, ast.Return):
                raise kernel_error(
                    info,
                    node,
                    "'return' is not supported in a kernel that uses kg.barrier() (every work "
                    "item of a group must reach each barrier); put the work in an if-block",
                )
    program = _split(info, body, False)
    _check_uniform(info, body, program)

    params = set(info.params)
    shared = {d.name for d in info.shared}
    group_vars: set[str] = set()
    places: list[set[str]] = []
    phases: list[Phase] = []

    def collect(items: list[Any]) -> None:
        for item in items:
            if isinstance(item, Phase):
                _check_jumps(info, item)
                phases.append(item)
                places.append(_names(item.statements))
            else:
                node = item.node
                if item.kind == "for":
                    group_vars.add(node.target.id)
                    places.append(_names([node.iter]))
                else:
                    places.append(_names([node.test]))
                collect(item.body)
                collect(item.orelse)

    collect(program)
    assigned = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
    candidates = assigned - params - shared - group_vars
    for phase in phases:
        for node in ast.walk(ast.Module(body=phase.statements, type_ignores=[])):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Store)
                and node.id in group_vars
            ):
                raise kernel_error(
                    info,
                    node,
                    f"{node.id!r} is the variable of a loop that contains kg.barrier(); "
                    "it cannot be assigned inside the loop on the CPU",
                )
    per_item: set[str] = set()
    for name in candidates:
        if sum(1 for place in places if name in place) >= 2:
            per_item.add(name)
    for phase in phases:
        if phase.in_loop:
            for name, event in _first_events(phase).items():
                if name in candidates and event == "load":
                    per_item.add(name)
    for phase in phases:
        for node in ast.walk(ast.Module(body=phase.statements, type_ignores=[])):
            if (
                isinstance(node, ast.For)
                and isinstance(node.target, ast.Name)
                and node.target.id in per_item
            ):
                raise kernel_error(
                    info,
                    node,
                    f"the loop variable {node.target.id!r} is used on both sides of a "
                    "kg.barrier(); copy it into another variable",
                )

    remat = _recomputable(info, phases, per_item, assigned)
    _uniform_variables(info, body, phases, per_item)
    return program, per_item, remat


def _uniform_variables(
    info: KernelInfo, body: list[ast.stmt], phases: list[Phase], per_item: set[str]
) -> None:
    """Mark the per-item variables that hold the same value in every work item of a group
    (``half = GROUP // 2`` ... ``half //= 2`` in a tree reduction): every assignment of
    such a variable is a statement of its own in a phase (not under a branch or loop of
    the work item) computing from constants, scalar arguments, shapes, the group's
    position and other such variables. Those statements then run once per group, and the
    variable is one number instead of an array over the group's work items
    (:func:`_render`); removed from ``per_item``, recorded on each phase."""
    top_level = {id(stmt) for phase in phases for stmt in phase.statements}
    stores: dict[str, list[ast.stmt]] = {}
    for stmt in ast.walk(ast.Module(body=body, type_ignores=[])):
        for node in ast.walk(stmt) if isinstance(stmt, ast.stmt) else ():
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stores.setdefault(node.id, [])
                if stmt not in stores[node.id] and _stores_directly(stmt, node):
                    stores[node.id].append(stmt)
    arrays = {n for n in info.params if _read_as_array(info.body, n)}
    scalars = (set(info.params) - arrays) | set(info.global_types)
    uniform = set(per_item)
    changed = True
    while changed:
        changed = False
        for name in sorted(uniform):
            statements = stores.get(name, [])
            if not statements or not all(
                id(stmt) in top_level and _uniform_statement(stmt, uniform | scalars, arrays)
                for stmt in statements
            ):
                uniform.discard(name)
                changed = True
    per_item.difference_update(uniform)
    for phase in phases:
        phase.uniform_names = uniform | scalars
        phase.uniform = {
            id(stmt)
            for stmt in phase.statements
            if _uniform_statement(stmt, uniform | scalars, arrays) and _target_name(stmt) in uniform
        }


def _stores_directly(stmt: ast.stmt, name: ast.Name) -> bool:
    """Whether ``name`` (a store) is the target of ``stmt`` itself (not of a statement
    nested in it)."""
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return any(name is t or name in ast.walk(t) for t in targets)
    if isinstance(stmt, ast.For):
        return name in ast.walk(stmt.target)
    return False


def _read_as_array(body: list[ast.stmt], name: str) -> bool:
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, (ast.Subscript, ast.Attribute)):
            base = node.value
            if isinstance(base, ast.Name) and base.id == name:
                return True
    return False


def _target_name(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AugAssign):
        target = stmt.target
    else:
        return None
    return target.id if isinstance(target, ast.Name) else None


_GROUP_NAMES = ("b", "w", "ng", "n")


def _uniform_statement(stmt: ast.stmt, uniform: set[str], arrays: set[str]) -> bool:
    """``name = expr`` or ``name op= expr`` whose value (and target) read only names in
    ``uniform``, the group's position and sizes, constants and array shapes."""
    if _target_name(stmt) is None:
        return False
    value = stmt.value
    reads = [value] + ([stmt.target] if isinstance(stmt, ast.AugAssign) else [])
    for root in reads:
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                rest = node.id[len(PREFIX) :] if node.id.startswith(PREFIX) else None
                group = rest is not None and (
                    rest in ("glin", "G") or rest.rstrip("0123456789") in _GROUP_NAMES
                )
                # arrays: only their shapes can be read (the checks below)
                allowed = group or node.id in uniform or node.id in arrays
                if not (allowed or node.id in ("np", "math")):
                    return False
            elif isinstance(node, ast.Attribute):
                array = isinstance(node.value, ast.Name) and node.value.id in arrays
                if array and node.attr not in ("shape", "size", "ndim"):
                    return False
            elif not _pure_operation(node):
                return False
    return True


_NUMPY_SCALARS = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                  "bool_"}  # fmt: skip


def _pure_operation(node: ast.AST) -> bool:
    """For a subscript or a call: whether it reads an array's shape, or calls a pure
    builtin, a ``math`` function or a NumPy scalar cast (other nodes: True)."""
    if isinstance(node, ast.Subscript):
        base = node.value
        return isinstance(base, ast.Attribute) and base.attr == "shape"
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in _PURE_BUILTINS
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module, name = func.value.id, func.attr
            return module == "math" or (module == "np" and name in _NUMPY_SCALARS)
        return False
    return True


_ITEM_NAMES = ("g", "t", "lin", "llin")


def _is_item_name(name: str) -> bool:
    if not name.startswith(PREFIX):
        return False
    rest = name[len(PREFIX) :]
    return rest in ("lin", "llin") or (rest[:1] in ("g", "t") and rest[1:].isdigit())


def _check_uniform(info: KernelInfo, body: list[ast.stmt], program: list[Any]) -> None:
    """A loop or branch that contains a barrier must take the same path in every work
    item of a group (otherwise some items never reach the barrier: undefined behaviour
    on a GPU, and impossible to run in phases on the CPU). Reject conditions that depend
    on the work item's own index, directly or through variables computed from it."""
    tainted: set[str] = set()

    def depends(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.Name) and (_is_item_name(n.id) or n.id in tainted)
            for n in ast.walk(node)
        )

    module = ast.Module(body=body, type_ignores=[])
    for _ in range(20):
        before = len(tainted)
        for node in ast.walk(module):
            targets: list[ast.AST] = []
            source: ast.AST | None = None
            if isinstance(node, ast.Assign):
                targets, source = node.targets, node.value
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                targets, source = [node.target], node.value
            elif isinstance(node, ast.For):
                targets, source = [node.target], node.iter
            if source is not None and depends(source):
                for target in targets:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            tainted.add(n.id)
        if len(tainted) == before:
            break

    def visit(items: list[Any]) -> None:
        for item in items:
            if isinstance(item, Phase):
                continue
            node = item.node
            header = node.iter if item.kind == "for" else node.test
            if depends(header):
                what = {
                    "for": "the range of a for loop",
                    "while": "the condition of a while loop",
                    "if": "the condition of an if statement",
                }[item.kind]
                raise kernel_error(
                    info,
                    node,
                    f"kg.barrier() is inside {what} that depends on the work item's index "
                    f"(`{_readable(ast.unparse(header))}`), so some work items of a group "
                    "would not reach the barrier (undefined behaviour on a GPU). Keep barriers "
                    "where every work item of the group gets to: move the condition inside, "
                    "around the work only",
                )
            visit(item.body)
            visit(item.orelse)

    visit(program)


def _readable(text: str) -> str:
    """Generated names back to what the user wrote (for error messages)."""
    import re

    text = re.sub(rf"{PREFIX}lin\b", "kg.index()", text)
    text = re.sub(rf"{PREFIX}llin\b", "kg.local_index()", text)
    text = re.sub(rf"{PREFIX}g(\d)", r"kg.index(n)[\1]", text)
    return re.sub(rf"{PREFIX}t(\d)", r"kg.local_index(n)[\1]", text)


_PURE_BUILTINS = {"len", "min", "max", "abs", "int", "float", "bool", "range"}


def _recomputable(
    info: KernelInfo, phases: list[Phase], per_item: set[str], assigned: set[str]
) -> list[ast.stmt]:
    """Per-item variables defined once from the work item's position, the arguments'
    shapes and constants (``i, j = kg.index(2)``, ``n = a.shape[0]``) are recomputed in
    every phase instead of being kept in per-item arrays. They are removed from
    ``per_item``; the defining statements are returned in order."""
    stores: dict[str, int] = {}
    for node in ast.walk(ast.Module(body=info.body, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stores[node.id] = stores.get(node.id, 0) + 1
    params = set(info.params)
    chosen: list[ast.stmt] = []
    known: set[str] = set()

    def pure(expr: ast.AST) -> bool:
        for node in ast.walk(expr):
            if isinstance(node, ast.Name):
                name = node.id
                if not (
                    name.startswith(PREFIX)
                    or name in params
                    or name in known
                    or name not in assigned
                ):
                    return False
            elif not _pure_operation(node):
                return False
        return True

    for phase in phases:
        for stmt in phase.statements:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                names = [target.id]
            elif isinstance(target, ast.Tuple) and all(
                isinstance(e, ast.Name) for e in target.elts
            ):
                names = [e.id for e in target.elts]
            else:
                continue
            if all(n in per_item and stores.get(n) == 1 for n in names) and pure(stmt.value):
                chosen.append(stmt)
                known.update(names)
    per_item.difference_update(known)
    return chosen


def _narrowed(
    statements: list[ast.stmt], uniform: set[str], items: ItemLoop
) -> tuple[str, list[ast.stmt]] | None:
    """The range of the group's work items a phase loop visits (``range``'s arguments)
    and its statements, when the phase is one ``if local < e:`` (``<=``, ``==``;
    ``local`` the work item's position in a one-dimensional group, ``e`` the same in every
    work item, as in the halving steps of a tree reduction): a loop over just those
    items, without the test. None for any other phase (a loop over all the items)."""
    if not (
        len(items.t) == 1
        and len(statements) == 1
        and isinstance(statements[0], ast.If)
        and not statements[0].orelse
        and isinstance(statements[0].test, ast.Compare)
        and len(statements[0].test.ops) == 1
    ):
        return None
    sources = (f" = {PREFIX}llin", f" = {items.t[0]}")
    positions = {PREFIX + "llin", items.t[0]} | {
        line.split(" = ")[0] for line in items.setup if line.endswith(sources)
    }
    test = statements[0].test
    left, op, right = test.left, type(test.ops[0]), test.comparators[0]
    if isinstance(right, ast.Name) and right.id in positions:
        left, right, op = right, left, {ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq}.get(op)
    if not (isinstance(left, ast.Name) and left.id in positions):
        return None
    if op not in (ast.Lt, ast.LtE, ast.Eq):
        return None
    for node in ast.walk(right):
        if isinstance(node, ast.Name) and node.id not in uniform:
            return None
        if isinstance(node, (ast.Subscript, ast.Call, ast.Attribute)):
            return None
    bound = ast.unparse(right)
    if op is ast.Eq:  # one work item (a short loop: its start costs nothing)
        return f"max(0, {bound}), min({PREFIX}G, ({bound}) + 1)", statements[0].body
    bound += " + 1" if op is ast.LtE else ""
    return f"min({PREFIX}G, {bound})", statements[0].body


def _item_loop(items: ItemLoop, count: str | None, indent: str) -> tuple[list[str], str]:
    """The loop over a group's work items that a phase runs in (``count``: ``range``'s
    arguments for a one-dimensional group, None for all the items) and the indent of its
    body. A group of several dimensions is nested loops over its local coordinates (no
    division per work item to split the linear local index).

    A position is an ``int64`` that Numba's indexing would wrap when negative (``x[i]``
    reads ``x[i + len(x)]`` for ``i < 0``). Every one here is a loop counter from 0 plus
    an offset clamped at 0 (never negative in practice: a product of sizes), so that
    LLVM knows it cannot be negative, drops that test and vectorises a phase that reads
    ``x[i]`` over the items as contiguous loads (without it: gathers, 3-4x slower)."""
    t, w = items.t, items.w
    if len(t) == 1:
        lines = [
            f"{indent}for {PREFIX}llin in range({count or PREFIX + 'G'}):",
            f"{indent}    {t[0]} = {PREFIX}llin",
        ]
        inner = indent + "    "
    else:
        lines = []
        inner = indent
        for d in range(len(t)):
            if d == len(t) - 1:
                rows = f"({linearize(t[:-1], w[:-1])}) * {w[-1]}"
                lines.append(f"{inner}{PREFIX}lrow = max(0, {rows})")
            lines.append(f"{inner}for {t[d]} in range({w[d]}):")
            inner += "    "
        lines.append(f"{inner}{PREFIX}llin = {PREFIX}lrow + {t[-1]}")
    return lines + [inner + line for line in items.setup], inner


def _render(items: list[Any], per_item: set[str], loop: ItemLoop, indent: str) -> list[str]:
    lines: list[str] = []
    item_zero = [f"{indent}{PREFIX}llin = 0"] + [f"{indent}{t} = 0" for t in loop.t]
    item_zero += [indent + s for s in loop.setup]
    for item in items:
        if isinstance(item, Phase):
            # runs of statements: those of uniform variables once per group, the others
            # in a loop over the group's work items (reordering across work items within
            # a phase is what a barrier allows)
            runs: list[tuple[bool, list[ast.stmt]]] = []
            for stmt in item.statements:
                once = id(stmt) in item.uniform
                if runs and runs[-1][0] == once:
                    runs[-1][1].append(stmt)
                else:
                    runs.append((once, [stmt]))
            for once, statements in runs:
                if once:
                    lines += [
                        indent + s for stmt in statements for s in ast.unparse(stmt).splitlines()
                    ]
                    continue
                narrowed = _narrowed(statements, item.uniform_names, loop)
                count = None
                if narrowed is not None:
                    count, statements = narrowed
                header, inner = _item_loop(loop, count, indent)
                lines += header
                rewriter = _PerItem(per_item, PREFIX + "llin")
                for stmt in statements:
                    new = ast.fix_missing_locations(rewriter.visit(copy.deepcopy(stmt)))
                    lines += [inner + s for s in ast.unparse(new).splitlines()]
            continue
        rewriter = _PerItem(per_item, "0")
        node = item.node
        if item.kind == "for":
            lines += item_zero
            header = ast.unparse(rewriter.visit(copy.deepcopy(node.iter)))
            lines.append(f"{indent}for {node.target.id} in {header}:")
            inner = _render(item.body, per_item, loop, indent + "    ")
            lines += inner or [indent + "    pass"]
        elif item.kind == "while":
            test = ast.unparse(rewriter.visit(copy.deepcopy(node.test)))
            lines.append(f"{indent}while True:")
            lines += ["    " + s for s in item_zero]
            lines.append(f"{indent}    if not ({test}):")
            lines.append(f"{indent}        break")
            lines += _render(item.body, per_item, loop, indent + "    ")
        else:
            lines += item_zero
            test = ast.unparse(rewriter.visit(copy.deepcopy(node.test)))
            lines.append(f"{indent}if {test}:")
            inner = _render(item.body, per_item, loop, indent + "    ")
            lines += inner or [indent + "    pass"]
            if item.orelse:
                lines.append(f"{indent}else:")
                lines += _render(item.orelse, per_item, loop, indent + "    ")
    return lines
