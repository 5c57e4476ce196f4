"""``torch.nn.utils.stateless.functional_call`` / ``torch.func.functional_call``: call a
module with some of its parameters and buffers replaced by given tensors, for one call.

MAML's inner loop written the modern way: ``fast = {n: p - lr * g for ...}``, then
``functional_call(model, fast, (x,))`` runs the model's own ``forward`` with the adapted
weights, and gradients flow back through them to the originals. The module is left as
it was afterwards (even when the call raises). This module's ``functional_call`` warns
that it is deprecated, as PyTorch's does; ``kg.func.functional_call`` is the same call."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ArgumentError, UnsupportedError
from ...tensor import Tensor
from ..module import Module

__all__ = ["functional_call"]

_ABSENT = object()


def functional_call(
    module: Module,
    parameter_and_buffer_dicts: Mapping[str, Tensor] | Sequence[Mapping[str, Tensor]],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """``torch.nn.utils.stateless.functional_call``: :func:`call_with`, with PyTorch's
    deprecation warning (``torch.func.functional_call`` is ``kg.func.functional_call``)."""
    warnings.warn(
        "`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will "
        "be removed in a future version of PyTorch. Please use `torch.func.functional_call` "
        "instead which is a drop-in replacement.",
        FutureWarning,
        stacklevel=2,
    )
    return call_with(
        module, parameter_and_buffer_dicts, args, kwargs, tie_weights=tie_weights, strict=strict
    )


def call_with(
    module: Module,
    parameter_and_buffer_dicts: Mapping[str, Tensor] | Sequence[Mapping[str, Tensor]],
    args: Any = None,
    kwargs: dict[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """``module(*args, **kwargs)`` with the parameters and buffers named in
    ``parameter_and_buffer_dicts`` (a dict, or several with distinct keys; dotted names
    as ``named_parameters()`` gives them) replaced by the given tensors for this call.

    Names not given keep the module's own tensors (``strict=True``: every parameter and
    buffer must be given, and no other name). With ``tie_weights`` a tensor given for one
    of several names of a shared parameter is used for all of them, as in PyTorch.

    >>> import kernelgrad as kg
    >>> layer = kg.nn.Linear(2, 1)
    >>> weights = {"weight": kg.ones(1, 2), "bias": kg.zeros(1)}
    >>> kg.func.functional_call(layer, weights, (kg.tensor([[1.0, 2.0]]),)).tolist()
    [[3.0]]
    """
    if isinstance(parameter_and_buffer_dicts, Mapping):
        given = dict(parameter_and_buffer_dicts)
    else:
        given = {}
        for mapping in parameter_and_buffer_dicts:
            repeated = sorted(set(given) & set(mapping))
            if repeated:
                raise ValueError(
                    f"{repeated} appeared in multiple dictionaries; behavior of functional "
                    "call is ambiguous"
                )
            given.update(mapping)
    own = _named_tensors(module)
    if tie_weights:
        given = _tied(own, given)
    if strict:
        missing = [name for name in own if name not in given]
        unexpected = [name for name in given if name not in own]
        if missing or unexpected:
            lines = []
            if unexpected:
                lines.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
            if missing:
                lines.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
            raise RuntimeError(
                f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(lines)
            )
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    saved = []
    try:
        for name, value in given.items():
            owner, attribute = _owner(module, name)
            saved.append((owner, attribute, owner.__dict__.get(attribute, _ABSENT)))
            object.__setattr__(owner, attribute, value)
        return module(*args, **(kwargs or {}))
    finally:
        for owner, attribute, original in reversed(saved):
            if original is _ABSENT:
                owner.__dict__.pop(attribute, None)
            else:
                object.__setattr__(owner, attribute, original)


def _named_tensors(module: Module) -> dict[str, Tensor]:
    """Every parameter and buffer under every name it has (a shared one more than once)."""
    named: dict[str, Tensor] = {}

    def walk(prefix: str, current: Module, path: set[int]) -> None:
        for name, parameter in current._own_parameters():
            named[prefix + name] = parameter
        for name, buffer in current._own_buffers():
            named[prefix + name] = buffer
        for name, child in current.__dict__.items():
            if isinstance(child, Module) and id(child) not in path:
                walk(f"{prefix}{name}.", child, path | {id(child)})

    walk("", module, {id(module)})
    return named


def _tied(own: dict[str, Tensor], given: dict[str, Tensor]) -> dict[str, Tensor]:
    """``given`` with the other names of each shared tensor it names."""
    names_of: dict[int, list[str]] = {}
    for name, tensor in own.items():
        names_of.setdefault(id(tensor), []).append(name)
    result = dict(given)
    for name, value in given.items():
        if name not in own:
            continue
        for other in names_of[id(own[name])]:
            if other in given and given[other] is not value:
                raise ValueError(
                    f"functional_call got values for tied weights {name!r} and {other!r}; "
                    "give one of them, or pass tie_weights=False"
                )
            result[other] = value
    return result


def _owner(module: Module, name: str) -> tuple[Module, str]:
    """The sub-module holding dotted ``name`` and the attribute's own name."""
    *path, attribute = name.split(".")
    owner = module
    for part in path:
        child = owner.__dict__.get(part)
        if not isinstance(child, Module):
            raise ArgumentError(
                f"functional_call: {name!r} names no sub-module {part!r} of "
                f"{type(owner).__name__} (names are those of named_parameters() and "
                "named_buffers())"
            )
        owner = child
    if isinstance(getattr(type(owner), attribute, None), property):
        raise UnsupportedError(
            f"functional_call: {name!r} is computed by a property of {type(owner).__name__} "
            "(a parametrization); give the tensors it is computed from instead (the "
            "names named_parameters() lists)"
        )
    return owner, attribute
