"""Every primitive has a VJP or is marked non-differentiable, a test row, an order-2
row (tests/test_grad2.py) or the reason it has none, and bindings that exist."""

from __future__ import annotations

import importlib

import kernelgrad as kg
from kernelgrad.ops import REGISTRY

# Test modules that declare COVERED = {primitive names they test}.
TEST_MODULES = [
    "tests.ops.test_elementwise",
    "tests.ops.test_reduce",
    "tests.ops.test_movement",
    "tests.ops.test_indexing",
    "tests.ops.test_linalg",
    "tests.ops.test_creation",
    "tests.ops.test_special",
]


def _resolve(binding: str):
    owner, _, attribute = binding.rpartition(".")
    if owner == "Tensor":
        return getattr(kg.Tensor, attribute)
    module = kg
    for part in owner.split(".")[1:]:
        module = getattr(module, part)
    return getattr(module, attribute)


def test_registry_is_not_empty():
    assert len(REGISTRY) > 40


def test_differentiable_primitives_have_a_vjp():
    missing = [p.name for p in REGISTRY.values() if p.differentiable and not p.has_vjp]
    assert missing == []


def test_every_primitive_has_a_test_row():
    covered = set()
    for name in TEST_MODULES:
        covered |= importlib.import_module(name).COVERED
    untested = sorted(set(REGISTRY) - covered)
    assert untested == [], f"primitives without a test row: {untested}"
    unknown = sorted(covered - set(REGISTRY))
    assert unknown == [], f"test rows for primitives that do not exist: {unknown}"


def test_every_primitive_has_an_order_2_row_or_a_reason():
    from tests.test_grad2 import NOT_DIFFERENTIABLE, ORDER_2

    assert set(ORDER_2).isdisjoint(NOT_DIFFERENTIABLE)
    missing = sorted(set(REGISTRY) - set(ORDER_2) - set(NOT_DIFFERENTIABLE))
    assert missing == [], f"primitives without an order-2 row or a reason: {missing}"
    unknown = sorted((set(ORDER_2) | set(NOT_DIFFERENTIABLE)) - set(REGISTRY))
    assert unknown == [], f"rows for primitives that do not exist: {unknown}"
    for name in NOT_DIFFERENTIABLE:
        assert not REGISTRY[name].differentiable, f"{name} is differentiable: give it a row"
    for name in ORDER_2:
        assert REGISTRY[name].differentiable, f"{name} is registered as not differentiable"


def test_every_binding_exists():
    broken = []
    for primitive in REGISTRY.values():
        assert primitive.bindings, f"{primitive.name} has no public binding"
        for binding in primitive.bindings:
            try:
                _resolve(binding)
            except AttributeError:
                broken.append(f"{primitive.name}: {binding}")
    assert broken == []
