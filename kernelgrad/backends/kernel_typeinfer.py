"""A small type inference for the CPU form of workgroup kernels.

Local variables that live across a ``kg.barrier()`` become per-item arrays, and an array
needs an element type before the first value is stored. Numba infers types only after
the code exists, so this module infers them from the kernel's source with NumPy's
promotion rules, given the types of the call's arguments.

Types are strings for numbers (``"b"`` bool, ``"i"`` int64, ``"f32"``, ``"f64"``),
``("A", dtype_name, ndim)`` for arrays and ``("T", (types...))`` for tuples; ``None``
means unknown.
"""

from __future__ import annotations

import ast
from typing import Any

from .kernel_source import PREFIX

_NUMERIC_ORDER = {"b": 0, "i": 1, "f32": 2, "f64": 3}
_NUMPY_NAMES = {"b": "bool_", "i": "int64", "f32": "float32", "f64": "float64"}
_CAST_CALLS = {
    "int": "i",
    "float": "f64",
    "bool": "b",
    "len": "i",
    "round": "i",
}
_NUMPY_CASTS = {
    "float32": "f32",
    "float64": "f64",
    "int32": "i",
    "int64": "i",
    "intp": "i",
    "bool_": "b",
}


def numpy_name(type_code: Any) -> str | None:
    """The NumPy type name for a numeric type code (None for non-numbers)."""
    return _NUMPY_NAMES.get(type_code) if isinstance(type_code, str) else None


def scalar_code(dtype_name: str) -> str:
    if dtype_name == "bool":
        return "b"
    if dtype_name.startswith("int") or dtype_name.startswith("uint"):
        return "i"
    if dtype_name == "float32":
        return "f32"
    return "f64"


def constant_type(value: Any) -> str | None:
    """The type code of a Python number (None for anything else)."""
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f64"
    return None


def join(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if a == b:
        return a
    if isinstance(a, str) and isinstance(b, str):
        pair = {a, b}
        if pair == {"b", "i"}:
            return "i"
        if "b" in pair:
            return (pair - {"b"}).pop()
        return "f64"
    return None


def _arith(left: Any, right: Any, op: ast.operator) -> Any:
    if not (isinstance(left, str) and isinstance(right, str)):
        return None
    if isinstance(op, ast.Div):
        if left in ("b", "i") and right in ("b", "i"):
            return "f64"
        return join(left, right)
    result = join(left, right)
    return (
        "i" if result == "b" and not isinstance(op, (ast.BitAnd, ast.BitOr, ast.BitXor)) else result
    )


class TypeEnv:
    def __init__(self, known: dict[str, Any]):
        self.types: dict[str, Any] = dict(known)

    def expr(self, node: ast.AST) -> Any:
        method = getattr(self, "_" + type(node).__name__, None)
        return method(node) if method is not None else None

    def _Constant(self, node: ast.Constant) -> Any:
        return constant_type(node.value)

    def _Name(self, node: ast.Name) -> Any:
        if node.id.startswith("_kg_"):
            return "i"
        return self.types.get(node.id)

    def _Subscript(self, node: ast.Subscript) -> Any:
        base = self.expr(node.value)
        if isinstance(base, tuple) and base[0] == "A":
            arity = len(node.slice.elts) if isinstance(node.slice, ast.Tuple) else 1
            has_slice = isinstance(node.slice, ast.Slice) or (
                isinstance(node.slice, ast.Tuple)
                and any(isinstance(e, ast.Slice) for e in node.slice.elts)
            )
            if arity == base[2] and not has_slice:
                return scalar_code(base[1])
            return None
        if isinstance(base, tuple) and base[0] == "T":
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                items = base[1]
                if -len(items) <= node.slice.value < len(items):
                    return items[node.slice.value]
            elements = base[1]
            if elements and all(e == elements[0] for e in elements):
                return elements[0]
        return None

    def _Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        if isinstance(base, tuple) and base[0] == "A":
            if node.attr in ("shape", "strides"):
                return ("T", ("i",) * base[2])
            if node.attr in ("size", "ndim"):
                return "i"
        return None

    def _BinOp(self, node: ast.BinOp) -> Any:
        return _arith(self.expr(node.left), self.expr(node.right), node.op)

    def _UnaryOp(self, node: ast.UnaryOp) -> Any:
        if isinstance(node.op, ast.Not):
            return "b"
        operand = self.expr(node.operand)
        return "i" if operand == "b" and isinstance(node.op, (ast.USub, ast.UAdd)) else operand

    def _Compare(self, node: ast.Compare) -> Any:
        return "b"

    def _BoolOp(self, node: ast.BoolOp) -> Any:
        result = None
        for value in node.values:
            result = join(result, self.expr(value))
        return result

    def _IfExp(self, node: ast.IfExp) -> Any:
        return join(self.expr(node.body), self.expr(node.orelse))

    def _Tuple(self, node: ast.Tuple) -> Any:
        return ("T", tuple(self.expr(e) for e in node.elts))

    def _Call(self, node: ast.Call) -> Any:
        func = node.func
        args = [self.expr(a) for a in node.args]
        if isinstance(func, ast.Name):
            if func.id in _CAST_CALLS:
                if func.id == "round" and len(node.args) == 2:
                    return args[0]
                return _CAST_CALLS[func.id]
            if func.id == "abs" and args:
                return "i" if args[0] == "b" else args[0]
            if func.id in ("min", "max", f"{PREFIX}maximum", f"{PREFIX}minimum"):
                result = None
                for a in args:
                    result = join(result, a)
                return result
            return None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "math":
                if func.attr in ("floor", "ceil", "trunc"):
                    return "i"
                if func.attr in ("isnan", "isinf", "isfinite"):
                    return "b"
                if args and all(a == "f32" for a in args):
                    return "f32"
                return "f64"
            if func.value.id in ("np", "numpy") and func.attr in _NUMPY_CASTS:
                return _NUMPY_CASTS[func.attr]
        return None


def _assign(env: TypeEnv, target: ast.AST, value_type: Any, value_node: ast.AST | None) -> bool:
    changed = False
    if isinstance(target, ast.Name):
        new = join(env.types.get(target.id), value_type) if target.id in env.types else value_type
        if target.id in env.types and env.types[target.id] is not None and new is None:
            new = env.types[target.id]
        if env.types.get(target.id, "<missing>") != new:
            env.types[target.id] = new
            changed = True
    elif isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value_node, (ast.Tuple, ast.List)) and len(value_node.elts) == len(
            target.elts
        ):
            for t, v in zip(target.elts, value_node.elts):
                changed |= _assign(env, t, env.expr(v), v)
        elif isinstance(value_type, tuple) and value_type[0] == "T":
            for k, t in enumerate(target.elts):
                item = value_type[1][k] if k < len(value_type[1]) else None
                changed |= _assign(env, t, item, None)
    return changed


def infer(body: list[ast.stmt], known: dict[str, Any]) -> dict[str, Any]:
    """Types of the local variables of ``body`` (a fixed point over its assignments)."""
    env = TypeEnv(known)
    module = ast.Module(body=body, type_ignores=[])
    for _ in range(20):
        changed = False
        for node in ast.walk(module):
            if isinstance(node, ast.Assign):
                value_type = env.expr(node.value)
                for target in node.targets:
                    changed |= _assign(env, target, value_type, node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                changed |= _assign(env, node.target, env.expr(node.value), node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                current = env.types.get(node.target.id)
                value_type = _arith(current, env.expr(node.value), node.op)
                changed |= _assign(env, node.target, value_type, None)
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                iterator = node.iter
                if (
                    isinstance(iterator, ast.Call)
                    and isinstance(iterator.func, ast.Name)
                    and iterator.func.id in ("range", "prange")
                ):
                    changed |= _assign(env, node.target, "i", None)
        if not changed:
            break
    return env.types
