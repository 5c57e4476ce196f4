"""The gradient rules of ``@kg.elementwise`` (kernel/symbolic.py), one row per operation a
traced function may contain: the derived first and second derivatives against central
differences.

The rules are checked where they live, on the traced graph: the forward graph, its
gradient graph (``symbolic.gradient``) and the gradient of that (what
``backward(create_graph=True)`` differentiates) are turned into Python source by
``symbolic.source`` and run as plain Python on float64 numbers, so no kernel is
compiled. tests/kernel/test_elementwise.py runs compiled composites on a device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.kernel import symbolic
from tests.helpers import numerical_grad


def _float_node(x: Any, y: Any) -> Any:
    """A "float" node: no traced Python expression produces one (``float(placeholder)``
    refuses), so the row builds it directly."""
    graph = x.graph
    return symbolic.Var(graph, graph.add("float", x.node)) * y


# op -> (a function of two float arguments whose trace contains that op, two sample points
# (x, y) away from the op's kinks and jumps)
ROWS: dict[str, tuple[Callable[[Any, Any], Any], tuple[float, float]]] = {
    "add": (lambda x, y: x + y * y, (0.3, -1.2)),
    "sub": (lambda x, y: x * x - y, (0.3, -1.2)),
    "mul": (lambda x, y: x * y, (0.7, -1.3)),
    "div": (lambda x, y: x / y, (0.7, -1.3)),
    "floordiv": (lambda x, y: (x // y) * x + y, (2.7, 1.3)),
    "mod": (lambda x, y: x % y, (2.7, 1.3)),
    "pow": (lambda x, y: x**y, (1.7, -0.6)),  # both arguments variable
    "lt": (lambda x, y: (x < y) * x + y, (0.3, 0.9)),
    "le": (lambda x, y: (x <= y) * x + y, (0.3, 0.9)),
    "gt": (lambda x, y: (x > y) * x + y, (0.3, 0.9)),
    "ge": (lambda x, y: (x >= y) * x + y, (1.3, 0.9)),
    "eq": (lambda x, y: (x == y) * x + y * x, (0.3, 0.9)),
    "ne": (lambda x, y: (x != y) * x * y, (0.3, 0.9)),
    "neg": (lambda x, y: -(x * y), (0.3, 0.9)),
    "not": (lambda x, y: (~(x > y)) * x * y, (0.3, 0.9)),
    "and": (lambda x, y: ((x > 0) & (y > 0)) * x * y, (0.3, 0.9)),
    "or": (lambda x, y: ((x > 1) | (y > 0)) * x * y, (0.3, 0.9)),
    "xor": (lambda x, y: ((x > 1) ^ (y > 0)) * x * y, (0.3, 0.9)),
    "abs": (lambda x, y: abs(x) * y, (-0.7, 0.9)),
    "exp": (lambda x, y: kg.exp(x * y), (0.3, 0.9)),
    "expm1": (lambda x, y: kg.expm1(x * y), (0.3, -0.9)),
    "log": (lambda x, y: kg.log(x * y), (0.3, 0.9)),
    "log1p": (lambda x, y: kg.log1p(x * y), (0.3, -0.9)),
    "sqrt": (lambda x, y: kg.sqrt(x * y), (0.3, 0.9)),
    "sin": (lambda x, y: kg.sin(x * y), (0.3, 0.9)),
    "cos": (lambda x, y: kg.cos(x * y), (0.3, 0.9)),
    "tan": (lambda x, y: math.tan(x * y), (0.3, 0.9)),
    "tanh": (lambda x, y: kg.tanh(x * y), (0.3, 0.9)),
    "erf": (lambda x, y: kg.erf(x * y), (0.3, 0.9)),
    "sigmoid": (lambda x, y: kg.sigmoid(x * y), (0.3, -0.9)),
    "relu": (lambda x, y: kg.relu(x) * y + kg.relu(y) * x, (0.3, -0.9)),
    "floor": (lambda x, y: math.floor(x) * y + x, (1.3, -0.9)),
    "ceil": (lambda x, y: math.ceil(x) * y + x, (1.3, -0.9)),
    "max": (lambda x, y: kg.maximum(x, y) * x, (0.3, -0.9)),
    "min": (lambda x, y: kg.minimum(x, y) * x, (0.3, -0.9)),
    "where": (lambda x, y: kg.where(x > y, x * y, x - y) + kg.where(x < y, x, y * y), (0.3, 0.9)),
    "float": (_float_node, (0.3, 0.9)),
}


def test_every_operation_of_a_trace_has_a_row():
    known = set(symbolic._BINARY) | set(symbolic._TEMPLATES)
    assert sorted(known - set(ROWS)) == [], "operations without a gradient row"
    assert sorted(set(ROWS) - known) == [], "rows for operations symbolic.py does not know"


def _python(graph: symbolic.Graph, outputs: list[int], nin: int) -> Callable[..., Any]:
    """The graph as a Python function (the source every backend compiles)."""
    namespace = {"math": math, "np": np}
    exec(symbolic.source(graph, outputs, nin, "f"), namespace)
    function = namespace["f"]

    def call(*values: float) -> list[float]:
        result = function(*values)
        return [float(v) for v in (result if isinstance(result, tuple) else (result,))]

    return call


def _gradient(graph, outputs, nin) -> tuple[symbolic.Graph, list[int]]:
    categories = [symbolic.FLOAT] * nin
    return symbolic.gradient(graph, outputs, nin, list(range(nin)), categories)


def _check_against_central_differences(
    value: Callable[..., list[float]],
    derivative: Callable[..., list[float]],
    point: list[float],
    weights: list[float],
) -> None:
    """``derivative(*point, *weights)`` is the gradient of ``weights . value(*point)``."""
    expected = numerical_grad(
        lambda *xs: float(np.dot(weights, value(*[float(x) for x in xs]))),
        [np.array(v) for v in point],
    )
    got = derivative(*point, *weights)
    np.testing.assert_allclose(got, [float(e) for e in expected], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op", sorted(ROWS))
def test_gradient_rule_matches_central_differences(op):
    fn, point = ROWS[op]
    graph, outputs = symbolic.trace(fn, 2)
    assert op in {node.op for node in graph.nodes}, f"the row's function has no {op!r} node"
    forward = _python(graph, outputs, 2)
    first_graph, first_outputs = _gradient(graph, outputs, 2)
    first = _python(first_graph, first_outputs, 3)
    _check_against_central_differences(forward, first, list(point), [1.0])
    # order 2: the gradient graph differentiated again, with respect to the point and to
    # the incoming gradient
    second_graph, second_outputs = _gradient(first_graph, first_outputs, 3)
    second = _python(second_graph, second_outputs, 5)
    _check_against_central_differences(first, second, [*point, 0.7], [0.6, -1.1])
