"""``kg.jit``: PyTorch's ``torch.jit`` names, for programs that script or trace a model.

kernelgrad has no TorchScript. ``script`` and ``trace`` return the function or module
they are given, unchanged: it runs eagerly and gives the same results as before (a
TorchScript program gives PyTorch's eager results too). Nothing is compiled; for speed,
``kg.compile`` traces and fuses a function (a whole training step, or an inference
function under ``kg.no_grad()``). ``trace`` does not return ``kg.compile(fn)`` because
kg.compile refuses outputs that carry an autograd graph, replays only on repeated
signatures and freezes Python numbers computed inside: a traced function used in
training would raise where PyTorch's works.

A TorchScript archive cannot be written or read: ``kg.jit.save`` and ``kg.jit.load``
raise :class:`~kernelgrad.errors.UnsupportedError` naming ``kg.save`` of the
``state_dict()`` (and ``kg.load`` to read it back into the module's class).

>>> import kernelgrad as kg
>>> model = kg.nn.Linear(2, 1)
>>> kg.jit.script(model) is model, kg.jit.is_scripting()
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .errors import UnsupportedError

__all__ = [
    "Final",
    "annotate",
    "export",
    "ignore",
    "is_scripting",
    "is_tracing",
    "load",
    "save",
    "script",
    "trace",
    "trace_module",
    "unused",
]

T = TypeVar("T")

Final = Any  # torch.jit.Final[int] in class annotations


def script(
    obj: T,
    optimize: Any = None,
    _frames_up: int = 0,
    _rcb: Any = None,
    example_inputs: Any = None,
) -> T:
    """``obj`` itself (a function, module or class): kernelgrad runs it eagerly."""
    return obj


def trace(func: T, example_inputs: Any = None, *args: Any, **kwargs: Any) -> T:
    """``func`` itself (a function or module), run eagerly; ``example_inputs`` and the
    checking options of ``torch.jit.trace`` are accepted and not used."""
    return func


def trace_module(mod: T, inputs: Any = None, *args: Any, **kwargs: Any) -> T:
    """``mod`` itself (see :func:`trace`)."""
    return mod


def _decorator(fn: Any = None, **_options: Any) -> Any:
    """``@ignore``, ``@ignore(drop=True)``, ``@unused``, ``@export``: the function as is."""
    if fn is None or not callable(fn):
        return lambda f: f
    return fn


ignore = unused = export = _decorator


def is_scripting() -> bool:
    """False: kernelgrad code always runs eagerly."""
    return False


def is_tracing() -> bool:
    """False: ``kg.jit.trace`` does not trace."""
    return False


def annotate(the_type: Any, the_value: T) -> T:
    return the_value


def _refuse(what: str) -> UnsupportedError:
    return UnsupportedError(
        f"kg.jit.{what}: kernelgrad has no TorchScript, so it cannot {what} a TorchScript "
        "archive (kg.jit.script and kg.jit.trace return the module unchanged). Save the "
        "weights with kg.save(model.state_dict(), path) and load them into the model's class "
        "with model.load_state_dict(kg.load(path))"
    )


def save(m: Any, f: Any, _extra_files: Any = None) -> None:
    raise _refuse("save")


def load(f: Any, map_location: Any = None, _extra_files: Any = None, **kwargs: Any) -> Any:
    raise _refuse("load")


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("__"):
        raise AttributeError(f"module 'kernelgrad.jit' has no attribute {name!r}")
    raise AttributeError(
        f"module 'kernelgrad.jit' has no attribute {name!r}: kernelgrad has no TorchScript "
        "(kg.jit.script and kg.jit.trace return what they are given; kg.compile traces "
        "and fuses a function)"
    )
