"""Primitive operations: one record per primitive, registered in :data:`REGISTRY`.

A record says what kind of primitive it is, whether it is differentiable, and which
public names call it (the ``Tensor`` method and/or the ``kg.`` function). The registry
test checks that every differentiable primitive has a VJP, that every primitive has a
row in the test tables, and that every binding exists.

Modules:

* ``elementwise``: unary/binary/ternary scalar functions (compiled per backend), casts
* ``reduce``:      sum, max, min, argmax, argmin (+ composites mean, var, std, ...)
* ``movement``:    views (reshape, permute, expand, slicing, unfold) and copies (cat, pad)
* ``linalg``:      matmul
* ``indexing``:    take (gather) and index_add (scatter-add); ``__getitem__``/``__setitem__``
* ``creation``:    tensor, zeros, ..., random numbers
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Primitive:
    name: str
    kind: str  # elementwise | reduce | movement | linalg | indexing | creation | random
    differentiable: bool
    bindings: tuple[str, ...]  # "Tensor.exp", "kg.exp", ...
    has_vjp: bool = False


REGISTRY: dict[str, Primitive] = {}


def register(
    name: str, kind: str, bindings: tuple[str, ...], vjp: bool, differentiable: bool | None = None
) -> None:
    if name in REGISTRY:
        raise ValueError(f"primitive {name!r} registered twice")
    REGISTRY[name] = Primitive(
        name, kind, vjp if differentiable is None else differentiable, bindings, vjp
    )


# Importing the Tensor module binds every op module to it (it imports them at its end).
# Doing it here makes the import order robust: whichever of ``kernelgrad.tensor`` and
# ``kernelgrad.ops.<module>`` is imported first, the Tensor class exists before any op
# module needs it.
from .. import tensor as _tensor  # noqa: E402, F401
