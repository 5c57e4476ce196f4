"""Symbolic scalar expressions: trace a Python function of numbers into a small graph,
generate scalar source from it, and differentiate it.

``@kg.elementwise`` calls the user's function once with :class:`Var` placeholders. Every
arithmetic operator, comparison and ``kg.exp``/``math.exp``-style call on a placeholder
adds a node to a :class:`Graph` instead of computing a number. Python control flow on a
placeholder (``if x > 0:``) cannot be traced: converting a placeholder to ``bool`` raises
:class:`UntraceableError`, and the caller falls back to compiling the source as written.

From a graph we generate the source of a scalar function (one assignment per node, so
shared subexpressions are computed once) and its reverse-mode derivative: another graph
whose outputs are the input gradients, given the output gradients as extra inputs.
"""

from __future__ import annotations

import builtins
import math
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Type categories of values in a graph: 0 bool, 1 integer, 2 floating point.
BOOL, INT, FLOAT = 0, 1, 2


class UntraceableError(Exception):
    """The function did something with a placeholder that cannot be recorded."""


@dataclass(frozen=True)
class Node:
    op: str
    args: tuple[int, ...] = ()
    value: Any = None  # the constant of a "const" node, the position of an "input" node


class Graph:
    """An append-only list of nodes; equal nodes are shared (hash-consing)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._index: dict[Node, int] = {}

    def add(self, op: str, *args: int, value: Any = None) -> int:
        node = Node(op, tuple(args), value)
        found = self._index.get(node)
        if found is not None:
            return found
        self.nodes.append(node)
        self._index[node] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def const(self, value: Any) -> int:
        if isinstance(value, bool):
            return self.add("const", value=bool(value))
        if isinstance(value, int):
            return self.add("const", value=int(value))
        return self.add("const", value=float(value))

    def input(self, position: int) -> int:
        return self.add("input", value=position)


# --- placeholders ----------------------------------------------------------------------------
_BINARY = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "pow": "**",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
}
_COMPARISONS = {"lt", "le", "gt", "ge", "eq", "ne"}


class Var:
    """A placeholder for a number inside a traced scalar function."""

    __slots__ = ("graph", "node")
    __array_priority__ = 10000

    def __init__(self, graph: Graph, node: int) -> None:
        self.graph = graph
        self.node = node

    def _binary(self, op: str, other: Any, reverse: bool = False) -> Var:
        other_node = _node_of(self.graph, other)
        if reverse:
            return Var(self.graph, self.graph.add(op, other_node, self.node))
        return Var(self.graph, self.graph.add(op, self.node, other_node))

    def __add__(self, o: Any) -> Var:
        return self._binary("add", o)

    def __radd__(self, o: Any) -> Var:
        return self._binary("add", o, True)

    def __sub__(self, o: Any) -> Var:
        return self._binary("sub", o)

    def __rsub__(self, o: Any) -> Var:
        return self._binary("sub", o, True)

    def __mul__(self, o: Any) -> Var:
        return self._binary("mul", o)

    def __rmul__(self, o: Any) -> Var:
        return self._binary("mul", o, True)

    def __truediv__(self, o: Any) -> Var:
        return self._binary("div", o)

    def __rtruediv__(self, o: Any) -> Var:
        return self._binary("div", o, True)

    def __floordiv__(self, o: Any) -> Var:
        return self._binary("floordiv", o)

    def __rfloordiv__(self, o: Any) -> Var:
        return self._binary("floordiv", o, True)

    def __mod__(self, o: Any) -> Var:
        return self._binary("mod", o)

    def __rmod__(self, o: Any) -> Var:
        return self._binary("mod", o, True)

    def __pow__(self, o: Any) -> Var:
        return self._binary("pow", o)

    def __rpow__(self, o: Any) -> Var:
        return self._binary("pow", o, True)

    def __lt__(self, o: Any) -> Var:
        return self._binary("lt", o)

    def __le__(self, o: Any) -> Var:
        return self._binary("le", o)

    def __gt__(self, o: Any) -> Var:
        return self._binary("gt", o)

    def __ge__(self, o: Any) -> Var:
        return self._binary("ge", o)

    def __eq__(self, o: Any) -> Var:  # type: ignore[override]
        return self._binary("eq", o)

    def __ne__(self, o: Any) -> Var:  # type: ignore[override]
        return self._binary("ne", o)

    def __and__(self, o: Any) -> Var:
        return self._binary("and", o)

    __rand__ = __and__

    def __or__(self, o: Any) -> Var:
        return self._binary("or", o)

    __ror__ = __or__

    def __xor__(self, o: Any) -> Var:
        return self._binary("xor", o)

    __rxor__ = __xor__

    def __invert__(self) -> Var:
        return Var(self.graph, self.graph.add("not", self.node))

    def __neg__(self) -> Var:
        return Var(self.graph, self.graph.add("neg", self.node))

    def __pos__(self) -> Var:
        return self

    def __abs__(self) -> Var:
        return Var(self.graph, self.graph.add("abs", self.node))

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise UntraceableError(
            "its result depends on a Python `if`, `while`, `and`/`or` or comparison chain "
            "over an argument (use kg.where(condition, a, b) for a traceable choice)"
        )

    def _number(self, *args: Any) -> Any:
        raise UntraceableError(
            "it converts an argument to a Python number (float(), int(), or a math/numpy "
            "function that kernelgrad does not know)"
        )

    __float__ = __int__ = __index__ = __complex__ = _number


def _node_of(graph: Graph, value: Any) -> int:
    if isinstance(value, Var):
        if value.graph is not graph:
            raise UntraceableError("it mixes values from two different traces")
        return value.node
    if isinstance(value, (bool, int, float)):
        return graph.const(value)
    import numpy as np

    if isinstance(value, np.generic):
        return graph.const(value.item())
    raise UntraceableError(f"it uses a value of type {type(value).__name__}")


# --- symbolic functions ----------------------------------------------------------------------
_UNARY_MATH = {
    "exp": math.exp,
    "log": math.log,
    "log1p": math.log1p,
    "expm1": math.expm1,
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "tanh": math.tanh,
    "erf": math.erf,
    "floor": math.floor,
    "ceil": math.ceil,
    "fabs": abs,
    "abs": abs,
}


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _unary(op: str, numeric: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        if isinstance(x, Var):
            return Var(x.graph, x.graph.add(op, x.node))
        return numeric(x)

    fn.__name__ = op
    return fn


def _first_var(*values: Any) -> Var | None:
    for v in values:
        if isinstance(v, Var):
            return v
    return None


def where(condition: Any, x: Any, y: Any) -> Any:
    var = _first_var(condition, x, y)
    if var is None:
        return x if condition else y
    g = var.graph
    return Var(g, g.add("where", _node_of(g, condition), _node_of(g, x), _node_of(g, y)))


def maximum(x: Any, y: Any) -> Any:
    var = _first_var(x, y)
    if var is None:
        return x if (x > y or x != x) else y
    g = var.graph
    return Var(g, g.add("max", _node_of(g, x), _node_of(g, y)))


def minimum(x: Any, y: Any) -> Any:
    var = _first_var(x, y)
    if var is None:
        return x if (x < y or x != x) else y
    g = var.graph
    return Var(g, g.add("min", _node_of(g, x), _node_of(g, y)))


def _fold(pick: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def fn(*values: Any, **kwargs: Any) -> Any:
        if kwargs or len(values) < 2:
            items = list(values[0]) if len(values) == 1 else list(values)
            if kwargs or not items:
                raise UntraceableError("min()/max() with keyword arguments or an iterable")
        else:
            items = list(values)
        result = items[0]
        for item in items[1:]:
            result = pick(result, item)
        return result

    return fn


def _pow(x: Any, y: Any) -> Any:
    if isinstance(x, Var) or isinstance(y, Var):
        var = _first_var(x, y)
        g = var.graph
        return Var(g, g.add("pow", _node_of(g, x), _node_of(g, y)))
    return math.pow(x, y)


SYMBOLIC: dict[str, Callable[..., Any]] = {
    name: _unary(name if name != "fabs" else "abs", fn) for name, fn in _UNARY_MATH.items()
}
SYMBOLIC.update(
    {
        "sigmoid": _unary("sigmoid", _sigmoid),
        "relu": _unary("relu", lambda x: 0 if x <= 0 else x),
        "where": where,
        "maximum": maximum,
        "minimum": minimum,
        "pow": _pow,
    }
)


class _Namespace(types.SimpleNamespace):
    """A stand-in for ``kernelgrad`` or ``math`` during tracing: symbolic versions of
    the functions it knows, the real module's attributes otherwise."""

    def __init__(self, real: types.ModuleType, table: dict[str, Callable[..., Any]]):
        super().__init__()
        self._real = real
        self._table = table

    def __getattr__(self, name: str) -> Any:
        table = object.__getattribute__(self, "_table")
        if name in table:
            return table[name]
        real = object.__getattribute__(self, "_real")
        value = getattr(real, name)
        if callable(value) and not isinstance(value, type) and real is math:
            return _untraceable_call(f"math.{name}")
        if (
            callable(value)
            and getattr(real, "__name__", "") == "kernelgrad"
            and not isinstance(value, (type, types.ModuleType))
        ):
            return _untraceable_call(f"kg.{name}")
        return value


def _untraceable_call(name: str) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise UntraceableError(f"it calls {name}, which is not available in elementwise functions")

    return fn


def _symbolic_globals(fn: types.FunctionType, seen: dict[int, Any]) -> dict[str, Any]:
    import kernelgrad

    names = dict(fn.__globals__)
    symbolic_kg = _Namespace(kernelgrad, SYMBOLIC)
    symbolic_math = _Namespace(math, SYMBOLIC)
    by_identity = {}
    for name in SYMBOLIC:
        value = getattr(kernelgrad, name, None)
        if value is not None:
            by_identity[id(value)] = SYMBOLIC[name]
        value = getattr(math, name, None)
        if value is not None:
            by_identity[id(value)] = SYMBOLIC[name]
    for name in fn.__code__.co_names:
        value = names.get(name, getattr(builtins, name, None))
        if value is kernelgrad:
            names[name] = symbolic_kg
        elif value is math:
            names[name] = symbolic_math
        elif id(value) in by_identity:
            names[name] = by_identity[id(value)]
        elif value is builtins.min:
            names[name] = _fold(minimum)
        elif value is builtins.max:
            names[name] = _fold(maximum)
        elif value is builtins.pow:
            names[name] = _pow
        elif isinstance(value, types.FunctionType) and value.__module__ != "kernelgrad":
            names[name] = _retarget(value, seen)
    return names


def _retarget(fn: types.FunctionType, seen: dict[int, Any]) -> types.FunctionType:
    """``fn`` with its globals swapped for symbolic stand-ins (helpers too)."""
    found = seen.get(id(fn))
    if found is not None:
        return found
    copy = types.FunctionType(fn.__code__, {}, fn.__name__, fn.__defaults__, fn.__closure__)
    seen[id(fn)] = copy
    copy.__globals__.update(_symbolic_globals(fn, seen))
    return copy


def trace(fn: Callable[..., Any], nin: int) -> tuple[Graph, list[int]]:
    """Run ``fn`` on placeholders; return the graph and its output nodes."""
    if not isinstance(fn, types.FunctionType):
        raise UntraceableError(f"{fn!r} is not a plain Python function")
    graph = Graph()
    inputs = [Var(graph, graph.input(k)) for k in range(nin)]
    traced = _retarget(fn, {})
    result = traced(*inputs)
    items = result if isinstance(result, tuple) else (result,)
    if not items:
        raise UntraceableError("it returns an empty tuple")
    return graph, [_node_of(graph, item) for item in items]


# --- types -----------------------------------------------------------------------------------
_FLOAT_RESULT = {
    "div",
    "exp",
    "log",
    "log1p",
    "expm1",
    "sqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "erf",
    "sigmoid",
    "float",
}
_BOOL_RESULT = _COMPARISONS | {"and", "or", "xor", "not"}


def categories(graph: Graph, input_categories: Sequence[int]) -> list[int]:
    """The type category of every node, given those of the inputs."""
    result: list[int] = []
    for node in graph.nodes:
        args = [result[a] for a in node.args]
        if node.op == "input":
            cat = input_categories[node.value]
        elif node.op == "const":
            v = node.value
            cat = BOOL if isinstance(v, bool) else INT if isinstance(v, int) else FLOAT
        elif node.op in _FLOAT_RESULT:
            cat = FLOAT
        elif node.op in _BOOL_RESULT:
            cat = BOOL
        elif node.op in ("floor", "ceil"):
            cat = INT if max(args) <= INT else FLOAT
        elif node.op == "where":
            cat = max(args[1], args[2])
        elif node.op in ("neg", "abs", "relu"):
            cat = max(args[0], INT)
        else:  # add sub mul floordiv mod pow max min
            cat = max(max(args), INT) if node.op not in ("max", "min") else max(args)
        result.append(cat)
    return result


# --- source generation -----------------------------------------------------------------------
def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if value >= 0 else f"({value!r})"
    if math.isnan(value):
        return "math.nan"
    if math.isinf(value):
        return "math.inf" if value > 0 else "(-math.inf)"
    return repr(float(value)) if value >= 0 else f"({float(value)!r})"


# The source of every node kind other than the binary operators of _BINARY, as a template
# of its arguments' names. Together with _BINARY this is the set of operations a traced
# function may contain (tests/kernel/test_symbolic_rules.py has one row per entry).
_TEMPLATES = {
    "neg": "-{0}",
    "not": "not {0}",
    "and": "({0} != 0) and ({1} != 0)",
    "or": "({0} != 0) or ({1} != 0)",
    "xor": "({0} != 0) != ({1} != 0)",
    "abs": "abs({0})",
    "exp": "math.exp({0})",
    "expm1": "math.expm1({0})",
    "sin": "math.sin({0})",
    "cos": "math.cos({0})",
    "tan": "math.tan({0})",
    "tanh": "math.tanh({0})",
    "erf": "math.erf({0})",
    "floor": "math.floor({0})",
    "ceil": "math.ceil({0})",
    "log": "math.log({0}) if {0} > 0 else (-math.inf if {0} == 0 else math.nan)",
    "log1p": "math.log1p({0}) if {0} > -1 else (-math.inf if {0} == -1 else math.nan)",
    "sqrt": "math.sqrt({0}) if {0} >= 0 else math.nan",
    "sigmoid": (
        "1.0 / (1.0 + math.exp(-{0})) if {0} >= 0 else math.exp({0}) / (1.0 + math.exp({0}))"
    ),
    "relu": "0 if {0} <= 0 else {0}",
    "max": "{0} if ({0} > {1} or {0} != {0}) else {1}",
    "min": "{0} if ({0} < {1} or {0} != {0}) else {1}",
    "where": "{1} if {0} else {2}",
    "float": "float({0})",
}


def _expression(node: Node, a: list[str]) -> str:
    op = node.op
    if op in _BINARY:
        return f"{a[0]} {_BINARY[op]} {a[1]}"
    return _TEMPLATES[op].format(*a)


def live_nodes(graph: Graph, outputs: Sequence[int]) -> list[int]:
    live = set()
    stack = list(outputs)
    while stack:
        k = stack.pop()
        if k in live:
            continue
        live.add(k)
        stack.extend(graph.nodes[k].args)
    return sorted(live)


def source(
    graph: Graph,
    outputs: Sequence[int],
    nin: int,
    name: str,
    input_categories: Sequence[int] | None = None,
    float_type: str | None = None,
) -> str:
    """Source of ``def name(x0, ..., x{nin-1})`` computing the output nodes.

    With ``float_type`` (``"float32"`` or ``"float64"``) and the inputs' categories,
    every floating-point value is kept in that type (``np.float32(...)``), as the eager
    ops would store it: a Python literal such as ``1.5`` would otherwise turn float32
    arithmetic into float64 arithmetic."""
    names: dict[int, str] = {}
    live = live_nodes(graph, outputs)
    cast = f"np.{float_type}" if float_type else None
    cats = categories(graph, input_categories) if cast and input_categories is not None else None
    float_context: set[int] = set()
    if cats is not None:
        for k in live:
            node = graph.nodes[k]
            if cats[k] == FLOAT:
                float_context.update(node.args)
    lines = [f"def {name}({', '.join(f'x{k}' for k in range(nin))}):"]
    for k in live:
        node = graph.nodes[k]
        if node.op == "input":
            names[k] = f"x{node.value}"
        elif node.op == "const":
            literal = _literal(node.value)
            if (
                cats is not None
                and not isinstance(node.value, bool)
                and (cats[k] == FLOAT or k in float_context)
            ):
                literal = f"{cast}({literal})"
            names[k] = literal
        else:
            names[k] = f"v{k}"
            expression = _expression(node, [names[a] for a in node.args])
            if cats is not None and cats[k] == FLOAT:
                expression = f"{cast}({expression})"
                if node.op in ("floor", "ceil"):
                    # math.floor/ceil give an int64 in compiled code: a float stays a
                    # float (PyTorch's floor(inf) is inf, floor(1e30) 1e30); magnitudes
                    # of 2**52 and more, infinities and NaN are integral or not numbers
                    x = names[node.args[0]]
                    expression += f" if abs({x}) < {cast}({float(2**52)!r}) else {x}"
            lines.append(f"    v{k} = {expression}")
    result = ", ".join(names[o] for o in outputs)
    lines.append(f"    return {result}" if len(outputs) == 1 else f"    return ({result},)")
    return "\n".join(lines) + "\n"


# --- differentiation -------------------------------------------------------------------------
def gradient(
    graph: Graph,
    outputs: Sequence[int],
    nin: int,
    wrt: Sequence[int],
    input_categories: Sequence[int],
) -> tuple[Graph, list[int]]:
    """A graph with inputs ``x0..x{nin-1}, g0..g{nout-1}`` whose outputs are the
    gradients with respect to the inputs ``wrt`` (reverse mode)."""
    g = Graph()
    # copy the forward graph (same node numbering: a fresh graph adds them in order)
    for node in graph.nodes:
        g.add(node.op, *node.args, value=node.value)
    cats = categories(graph, input_categories)
    seeds = [g.input(nin + k) for k in range(len(outputs))]
    adjoint: dict[int, int] = {}

    def accumulate(k: int, value: int | None) -> None:
        if value is None or (cats[k] != FLOAT and graph.nodes[k].op != "input"):
            return
        adjoint[k] = value if k not in adjoint else g.add("add", adjoint[k], value)

    for output, seed in zip(outputs, seeds):
        accumulate(output, seed)

    zero = g.const(0.0)
    one = g.const(1.0)

    def mul(a: int, b: int) -> int:
        return g.add("mul", a, b)

    def div(a: int, b: int) -> int:
        return g.add("div", a, b)

    def neg(a: int) -> int:
        return g.add("neg", a)

    for k in reversed(range(len(graph.nodes))):
        a = adjoint.get(k)
        if a is None:
            continue
        node = graph.nodes[k]
        op, args = node.op, node.args
        if op in ("input", "const"):
            continue
        x = args[0] if args else None
        y = args[1] if len(args) > 1 else None
        if op == "add":
            accumulate(x, a)
            accumulate(y, a)
        elif op == "sub":
            accumulate(x, a)
            accumulate(y, neg(a))
        elif op == "mul":
            accumulate(x, mul(a, y))
            accumulate(y, mul(a, x))
        elif op == "div":
            accumulate(x, div(a, y))
            accumulate(y, neg(div(mul(a, x), mul(y, y))))
        elif op == "pow":
            y_minus_one = g.add("sub", y, one)
            accumulate(x, mul(a, mul(y, g.add("pow", x, y_minus_one))))
            if cats[y] == FLOAT and graph.nodes[y].op != "const":
                safe_log = g.add("where", g.add("gt", x, zero), g.add("log", x), zero)
                accumulate(y, mul(a, mul(k, safe_log)))
        elif op == "neg":
            accumulate(x, neg(a))
        elif op == "exp":
            accumulate(x, mul(a, k))
        elif op == "log":
            accumulate(x, div(a, x))
        elif op == "log1p":
            accumulate(x, div(a, g.add("add", x, one)))
        elif op == "expm1":
            accumulate(x, mul(a, g.add("add", k, one)))
        elif op == "sqrt":
            accumulate(x, div(a, mul(g.const(2.0), k)))
        elif op == "sin":
            accumulate(x, mul(a, g.add("cos", x)))
        elif op == "cos":
            accumulate(x, neg(mul(a, g.add("sin", x))))
        elif op == "tan":
            accumulate(x, mul(a, g.add("add", one, mul(k, k))))
        elif op == "tanh":
            accumulate(x, mul(a, g.add("sub", one, mul(k, k))))
        elif op == "sigmoid":
            accumulate(x, mul(a, mul(k, g.add("sub", one, k))))
        elif op == "erf":
            scale = g.const(2.0 / math.sqrt(math.pi))
            accumulate(x, mul(a, mul(scale, g.add("exp", neg(mul(x, x))))))
        elif op == "relu":
            accumulate(x, g.add("where", g.add("gt", x, zero), a, zero))
        elif op == "abs":
            negative = g.add("where", g.add("lt", x, zero), neg(a), zero)
            accumulate(x, g.add("where", g.add("gt", x, zero), a, negative))
        elif op in ("max", "min"):
            wins = g.add("gt" if op == "max" else "lt", x, y)
            half = mul(a, g.const(0.5))
            tie = g.add("eq", x, y)
            accumulate(x, g.add("where", wins, a, g.add("where", tie, half, zero)))
            loses = g.add("lt" if op == "max" else "gt", x, y)
            accumulate(y, g.add("where", loses, a, g.add("where", tie, half, zero)))
        elif op == "where":
            accumulate(args[1], g.add("where", x, a, zero))
            accumulate(args[2], g.add("where", x, zero, a))
        elif op == "mod":
            accumulate(x, a)
            accumulate(y, neg(mul(a, g.add("floor", div(x, y)))))
        elif op == "float":
            accumulate(x, a)
        # comparisons, logical ops, floor, ceil, floordiv: zero gradient
    results = []
    for position in wrt:
        node = g.input(position)
        results.append(adjoint.get(node, zero))
    return g, results
