"""Second derivatives of every primitive, against central differences of the first.

docs/architecture.md promises that every VJP is written in differentiable Tensor ops, so
``backward(create_graph=True)`` can be differentiated again. This file checks it per
primitive of the op registry, as JAX's autodiff tests give each op an order: one row per
primitive, either an order-2 case or the reason it has none (not differentiable at all;
tests/test_registry.py checks that every primitive has one or the other).

The check differentiates the whole VJP, including with respect to the incoming gradient
(the cotangent): for ``f`` with inputs ``x``, a cotangent ``c`` and fixed random weights
``q``, let ``S(x, c) = sum_i q_i . (J_f(x)^T c)_i``; its gradient by autograd
(``backward(create_graph=True)``, then ``S.backward()``) must equal the central
differences of ``S``, whose values come from first-order backward passes only. For a
linear op (reshape, add, ...) the part with respect to ``x`` is zero and the part with
respect to ``c`` is ``J_f q``: that is how a VJP that silently detached its result would
show. Inputs are float64, tiny, and drawn away from every kink (|x| > 0.2 for abs and
relu, distinct values for max, remainder away from its jumps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad.device import as_device
from kernelgrad.ops import movement
from kernelgrad.ops.elementwise import OPS
from tests.helpers import numerical_grad

RNG = np.random.default_rng(2024)


def uniform(low: float, high: float, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    return RNG.uniform(low, high, shape)


def away_from_zero(shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    """Magnitudes in [0.2, 1.5] with random signs."""
    return uniform(0.2, 1.5, shape) * RNG.choice([-1.0, 1.0], shape)


@dataclass
class Case:
    """``fn`` of float64 tensors made from ``arrays`` (each one differentiated)."""

    fn: Callable[..., kg.Tensor]
    arrays: list[np.ndarray]


def _elementwise(name: str, *arrays: np.ndarray) -> Case:
    return Case(OPS[name], list(arrays))


def _where_case() -> Case:
    condition = kg.tensor(np.array([[True, False, True], [False, False, True]]))
    return Case(lambda x, y: OPS["where"](condition, x, y), [uniform(-1, 1), uniform(-1, 1)])


def _clamp_case() -> Case:
    # bounds in [-0.5, 0.5] per element; x at least 0.15 from either bound
    low = uniform(-0.5, -0.3)
    high = uniform(0.3, 0.5)
    x = np.array([[-1.0, -0.1, 0.1], [0.8, 0.0, -0.9]])
    return Case(OPS["clamp"], [x, low, high])


def _remainder_case() -> Case:
    y = uniform(1.0, 2.0)
    # x = y * (k + f) with a fractional part f in [0.2, 0.8]: away from the jumps
    x = y * (RNG.integers(-2, 3, y.shape) + uniform(0.2, 0.8))
    return Case(OPS["remainder"], [x, y])


def _between_integers() -> np.ndarray:
    """Values whose fractional part is in [0.1, 0.4] or [0.6, 0.9]: no jump of floor,
    ceil, trunc or round within reach of a finite difference."""
    fraction = uniform(0.1, 0.4) + RNG.choice([0.0, 0.5], (2, 3))
    return RNG.integers(-2, 3, (2, 3)) + fraction


def _distinct(shape: tuple[int, ...]) -> np.ndarray:
    """Values at least 0.1 apart, in random order: no ties for max and min."""
    return RNG.permutation(np.arange(np.prod(shape)) * 0.1 - 0.5).reshape(shape)


def _maximum_case(name: str) -> Case:
    x = uniform(-1, 1)
    return Case(OPS[name], [x, x + away_from_zero() * 0.5])


INDEX = kg.tensor([2, 0, 2, 1])

# One row per differentiable primitive: a function of float64 tensors and its inputs.
ORDER_2: dict[str, Callable[[], Case]] = {
    "neg": lambda: _elementwise("neg", uniform(-1, 1)),
    "exp": lambda: _elementwise("exp", uniform(-1, 1)),
    "log": lambda: _elementwise("log", uniform(0.5, 2)),
    "log1p": lambda: _elementwise("log1p", uniform(-0.5, 1.5)),
    "expm1": lambda: _elementwise("expm1", uniform(-1, 1)),
    "sqrt": lambda: _elementwise("sqrt", uniform(0.5, 2)),
    "sin": lambda: _elementwise("sin", uniform(-2, 2)),
    "cos": lambda: _elementwise("cos", uniform(-2, 2)),
    # (away from zero: a sum of two random signs could land near 0, where 1/x^3 explodes;
    # the module's RNG is shared, so which draws a row gets depends on the rows before it)
    "reciprocal": lambda: _elementwise("reciprocal", away_from_zero() * uniform(1.0, 2.0)),
    "erf": lambda: _elementwise("erf", uniform(-1.5, 1.5)),
    "abs": lambda: _elementwise("abs", away_from_zero()),
    "identity": lambda: _elementwise("identity", uniform(-1, 1)),
    "relu_grad": lambda: _elementwise("relu_grad", uniform(-1, 1), away_from_zero()),
    "sigmoid_grad": lambda: _elementwise("sigmoid_grad", uniform(-1, 1), uniform(0.1, 0.9)),
    "tanh_grad": lambda: _elementwise("tanh_grad", uniform(-1, 1), uniform(-0.9, 0.9)),
    "gelu_grad": lambda: _elementwise("gelu_grad", uniform(-1, 1), uniform(-2, 2)),
    "relu": lambda: _elementwise("relu", away_from_zero()),
    "sigmoid": lambda: _elementwise("sigmoid", uniform(-2, 2)),
    "tanh": lambda: _elementwise("tanh", uniform(-2, 2)),
    "gelu": lambda: _elementwise("gelu", uniform(-2, 2)),
    "tan": lambda: _elementwise("tan", uniform(-1, 1)),
    "asin": lambda: _elementwise("asin", uniform(-0.8, 0.8)),
    "acos": lambda: _elementwise("acos", uniform(-0.8, 0.8)),
    "atan": lambda: _elementwise("atan", uniform(-2, 2)),
    "sinh": lambda: _elementwise("sinh", uniform(-2, 2)),
    "cosh": lambda: _elementwise("cosh", uniform(-2, 2)),
    "asinh": lambda: _elementwise("asinh", uniform(-2, 2)),
    "acosh": lambda: _elementwise("acosh", uniform(1.2, 3)),
    "atanh": lambda: _elementwise("atanh", uniform(-0.8, 0.8)),
    # piecewise constant (zero derivatives), sampled away from the jumps and the halves
    "sign": lambda: _elementwise("sign", away_from_zero()),
    "floor": lambda: _elementwise("floor", _between_integers()),
    "ceil": lambda: _elementwise("ceil", _between_integers()),
    "trunc": lambda: _elementwise("trunc", _between_integers()),
    "round": lambda: _elementwise("round", _between_integers()),
    "add": lambda: _elementwise("add", uniform(-1, 1), uniform(-1, 1, (3,))),  # broadcast
    "sub": lambda: _elementwise("sub", uniform(-1, 1), uniform(-1, 1)),
    "mul": lambda: _elementwise("mul", uniform(-1, 1), uniform(-1, 1, (2, 1))),
    "div": lambda: _elementwise("div", uniform(-1, 1), uniform(0.5, 2) * RNG.choice([-1, 1])),
    "pow": lambda: _elementwise("pow", uniform(0.5, 2), uniform(-1.5, 1.5)),
    "maximum": lambda: _maximum_case("maximum"),
    "minimum": lambda: _maximum_case("minimum"),
    "remainder": _remainder_case,
    "log2": lambda: _elementwise("log2", uniform(0.5, 2)),
    "log10": lambda: _elementwise("log10", uniform(0.5, 2)),
    "exp2": lambda: _elementwise("exp2", uniform(-1, 1)),
    "fmod": lambda: _elementwise("fmod", *_remainder_case().arrays),
    "copysign": lambda: _elementwise("copysign", away_from_zero(), away_from_zero()),
    "atan2": lambda: _elementwise("atan2", uniform(-1, 1), away_from_zero()),
    "hypot": lambda: _elementwise("hypot", away_from_zero(), away_from_zero()),
    "where": _where_case,
    "clamp": _clamp_case,
    "reshape": lambda: Case(lambda x: x.reshape(3, 2), [uniform(-1, 1)]),
    "permute": lambda: Case(lambda x: x.permute(2, 0, 1), [uniform(-1, 1, (2, 3, 2))]),
    "expand": lambda: Case(lambda x: x.expand(2, 3, 4), [uniform(-1, 1, (3, 1))]),
    "slice": lambda: Case(lambda x: x[1:, ::-2], [uniform(-1, 1, (3, 4))]),
    "unfold": lambda: Case(lambda x: x.unfold(1, 2, 1), [uniform(-1, 1, (2, 4))]),
    "transfer": lambda: Case(lambda x: movement.transfer(x, as_device("cpu")), [uniform(-1, 1)]),
    "pad": lambda: Case(lambda x: movement.pad(x, (1, 2), value=0.5), [uniform(-1, 1)]),
    "cat": lambda: Case(lambda x, y: kg.cat([x, y], 1), [uniform(-1, 1), uniform(-1, 1, (2, 1))]),
    "take": lambda: Case(lambda x: kg.take(x, 0, INDEX), [uniform(-1, 1, (3, 2))]),
    "index_add": lambda: Case(
        lambda target, source: kg.index_add(target, 0, INDEX, source),
        [uniform(-1, 1, (3, 2)), uniform(-1, 1, (4, 2))],
    ),
    "matmul": lambda: Case(lambda x, y: x @ y, [uniform(-1, 1, (2, 3)), uniform(-1, 1, (3, 2))]),
    "sum": lambda: Case(lambda x: x.sum(1), [uniform(-1, 1)]),
    "max": lambda: Case(lambda x: x.amax(1), [_distinct((2, 3))]),
    "min": lambda: Case(lambda x: x.amin(0), [_distinct((2, 3))]),
    # ops/special.py
    "lgamma": lambda: _elementwise("lgamma", uniform(0.5, 3)),
    "digamma": lambda: _elementwise("digamma", uniform(0.5, 3)),
    "polygamma": lambda: Case(lambda x: OPS["polygamma"](1, x), [uniform(0.5, 3)]),
    "erfc": lambda: _elementwise("erfc", uniform(-1.5, 1.5)),
    "erfinv": lambda: _elementwise("erfinv", uniform(-0.8, 0.8)),
    "i0": lambda: _elementwise("i0", uniform(-2, 2)),
    "i1": lambda: _elementwise("i1", away_from_zero()),
    "igamma": lambda: Case(
        lambda x: OPS["igamma"](kg.tensor([1.5, 2.5, 0.7], dtype=kg.float64), x, False),
        [uniform(0.5, 2)],
    ),
    "frexp_mantissa": lambda: _elementwise("frexp_mantissa", uniform(1.1, 1.9)),
    "erfcx": lambda: _elementwise("erfcx", uniform(-1.5, 4)),
    "i0e": lambda: _elementwise("i0e", away_from_zero()),
    "i1e": lambda: _elementwise("i1e", away_from_zero()),
    "ndtri": lambda: _elementwise("ndtri", uniform(0.1, 0.9)),
    "nextafter": lambda: Case(
        lambda x, y: OPS["nextafter"](x, y, 53, 2.0**-1074), [uniform(-1, 1), uniform(-1, 1)]
    ),
}

# The primitives without a derivative at all, and why.
NOT_DIFFERENTIABLE = {
    "floor_divide": "piecewise constant: its derivative is zero wherever it exists",
    "int_pow": "integer power of integer tensors (pow's integer variant): no gradient",
    "isnan": "boolean result",
    "logical_not": "boolean result",
    "eq": "boolean result",
    "ne": "boolean result",
    "lt": "boolean result",
    "le": "boolean result",
    "gt": "boolean result",
    "ge": "boolean result",
    "logical_and": "boolean result",
    "logical_or": "boolean result",
    "logical_xor": "boolean result",
    "argmax": "integer result",
    "argmin": "integer result",
    "full": "creates a tensor from constants: no tensor input",
    "from_data": "creates a tensor from data: no tensor input",
    "random": "random numbers: no tensor input",
    "frexp_exponent": "integer result",
    "bitwise_and": "integer or boolean result",
    "bitwise_or": "integer or boolean result",
    "bitwise_xor": "integer or boolean result",
    "bitwise_not": "integer result",
    "bitwise_left_shift": "integer result",
    "bitwise_right_shift": "integer result",
    "gcd": "integer result",
}


def _first_derivatives(fn, values, cotangent) -> list[np.ndarray]:
    """The input gradients of ``fn`` for ``cotangent``, by one first-order backward."""
    leaves = [kg.tensor(v, requires_grad=True) for v in values]
    fn(*leaves).backward(kg.tensor(cotangent))
    grads = []
    for value, leaf in zip(values, leaves, strict=True):
        grads.append(np.zeros_like(value) if leaf.grad is None else leaf.grad.numpy())
    return grads


def check_second_derivatives(case: Case, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    arrays = [np.array(a, dtype=np.float64) for a in case.arrays]
    with kg.no_grad():
        shape = case.fn(*[kg.tensor(a) for a in arrays]).shape
    cotangent = rng.standard_normal(shape)
    weights = [rng.standard_normal(a.shape) for a in arrays]

    def weighted_first_derivatives(*values: np.ndarray) -> float:
        *inputs, upstream = values
        grads = _first_derivatives(case.fn, inputs, upstream)
        return float(sum((w * g).sum() for w, g in zip(weights, grads, strict=True)))

    expected = numerical_grad(weighted_first_derivatives, [*arrays, cotangent], eps=1e-5)

    leaves = [kg.tensor(a, requires_grad=True) for a in arrays]
    upstream = kg.tensor(cotangent, requires_grad=True)
    case.fn(*leaves).backward(upstream, create_graph=True)
    firsts = [leaf.grad for leaf in leaves]
    for leaf in leaves:
        leaf.grad = None
    total = None
    for first, w in zip(firsts, weights, strict=True):
        if first is not None:
            term = (first * kg.tensor(w)).sum()
            total = term if total is None else total + term
    assert total is not None, "no input got a first derivative"
    assert total.requires_grad, "the first derivatives do not depend on anything: detached"
    total.backward()
    got = [leaf.grad for leaf in (*leaves, upstream)]
    names = [f"input {k}" for k in range(len(leaves))] + ["the cotangent"]
    for name, grad, want in zip(names, got, expected, strict=True):
        actual = np.zeros_like(want) if grad is None else grad.numpy()
        np.testing.assert_allclose(
            actual, want, rtol=1e-6, atol=1e-7, err_msg=f"second derivative, {name}"
        )


@pytest.mark.parametrize("name", sorted(ORDER_2))
def test_second_derivatives_match_central_differences(name):
    check_second_derivatives(ORDER_2[name]())
