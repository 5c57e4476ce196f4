"""Running PyTorch programs with only the import changed.

Each program in ``tests/compat/programs/`` is PyTorch code (``import torch``, ``import
torch.nn as nn``, ``from torch.utils.data import DataLoader``, ...). :func:`load_program`
executes it either as it is (real PyTorch) or under ``kernelgrad.torch_alias.aliased()``
(what ``import kernelgrad.as_torch`` installs for good), which makes every ``torch`` /
``torch.X`` import give ``kernelgrad`` / ``kernelgrad.X`` while the program is imported:
nothing in the program changes.

A program defines:

* ``REQUIRES``: names (relative to ``torch``) the program uses that kernelgrad may not
  have yet (``"nn.LSTM"``, ``"Tensor.masked_fill"``); a missing one skips the
  program's kernelgrad runs with its name;
* ``make_models()`` -> dict of modules, ``make_data(rng)`` -> NumPy data (no torch), and
  ``train(models, data, steps)`` -> the list of per-step losses (floats);
* optionally ``check(losses)``: what a working run shows (a falling loss), and ``RTOL``
  for the comparison with PyTorch.

For the comparison, PyTorch builds the models, their ``state_dict`` goes through
``torch.save`` into ``kernelgrad.load`` (so identical initial weights), dropout is set to
0 in both, and the random draws a training step makes (``randn``, ``rand``,
``randn_like``, ``rand_like``, ``randint``, ``randperm``, ``multinomial``) come from one
NumPy stream in both runs; functional dropout (``F.dropout(x, training=...)``) is off
too; then the losses of ``steps`` steps are compared.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import itertools
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from kernelgrad.torch_alias import aliased

PROGRAMS = Path(__file__).parent / "programs"
_counter = itertools.count()


def program_names() -> list[str]:
    names = (path.stem for path in PROGRAMS.glob("*.py"))
    return sorted(name for name in names if not name.startswith("_") and name != "conftest")


def load_program(name: str, library: str) -> ModuleType:
    """A fresh module of program ``name`` with ``torch`` meaning ``library``."""
    spec = importlib.util.spec_from_file_location(
        f"compat_{name}_{library}_{next(_counter)}", PROGRAMS / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    if library == "kernelgrad":
        with aliased():
            spec.loader.exec_module(module)
    else:
        spec.loader.exec_module(module)
    return module


def requirements(name: str) -> tuple[str, ...]:
    """Program ``name``'s ``REQUIRES``, read from its source without running it (a
    program may use a missing name at import time, e.g. as a base class)."""
    tree = ast.parse((PROGRAMS / f"{name}.py").read_text())
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "REQUIRES" for target in statement.targets
        ):
            return tuple(ast.literal_eval(statement.value))
    return ()


def missing_requirements(name: str) -> list[str]:
    """The names in program ``name``'s ``REQUIRES`` that kernelgrad does not have."""
    import kernelgrad

    missing = []
    for dotted in requirements(name):
        owner: Any = kernelgrad
        for part in dotted.split("."):
            try:
                owner = getattr(owner, part, None)
            except ImportError:  # kg.utils.tensorboard without the tensorboard package
                owner = None
            if owner is None:
                missing.append(dotted)
                break
    return missing


def copy_weights(source: dict[str, Any], target: dict[str, Any]) -> None:
    """PyTorch models' weights into kernelgrad's, through torch.save and kernelgrad.load."""
    import torch

    import kernelgrad

    for key, model in source.items():
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        buffer.seek(0)
        target[key].load_state_dict(kernelgrad.load(buffer))


def no_dropout(models: dict[str, Any]) -> None:
    """Dropout off: Dropout modules get p = 0, and layers with a ``dropout`` probability
    of their own (LSTM between layers, MultiheadAttention) get 0."""
    for model in models.values():
        for module in model.modules():
            if type(module).__name__.startswith("Dropout"):
                module.p = 0.0
            if isinstance(getattr(module, "dropout", None), float):
                module.dropout = 0.0


def _randint(rng: np.random.Generator, args: tuple, size: Any) -> np.ndarray:
    """``randint(high, size)`` or ``randint(low, high, size)``, as torch reads them."""
    if size is None:
        *args, size = args
    low, high = (0, args[0]) if len(args) == 1 else args
    return rng.integers(low, high, tuple(size))


def _multinomial(
    rng: np.random.Generator, weights: np.ndarray, n: int, replacement: bool
) -> np.ndarray:
    """``multinomial(weights, n, replacement)`` of a 1-d or 2-d tensor's weights."""
    rows = np.atleast_2d(weights.astype("f8"))
    draws = [rng.choice(len(row), n, replace=replacement, p=row / row.sum()) for row in rows]
    return np.stack(draws) if weights.ndim == 2 else draws[0]


_RANDOM = ("randn", "rand", "randn_like", "rand_like", "randint", "randperm", "multinomial")


@contextlib.contextmanager
def shared_random_stream(library: ModuleType, seed: int = 0) -> Iterator[None]:
    """Make ``library.randn`` and friends draw from ``numpy.random.default_rng(seed)``,
    so two libraries see the same random numbers."""
    rng = np.random.default_rng(seed)

    def shape_of(size: tuple) -> tuple:
        return tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else size

    def make(array: np.ndarray, like: Any = None, **options: Any) -> Any:
        dtype = options.get("dtype") or (like.dtype if like is not None else None)
        result = library.tensor(array, dtype=dtype) if dtype is not None else library.tensor(array)
        if options.get("requires_grad"):
            result.requires_grad_(True)
        return result

    replacements = {
        "randn": lambda *size, **o: make(rng.standard_normal(shape_of(size)).astype("f4"), **o),
        "rand": lambda *size, **o: make(rng.random(shape_of(size)).astype("f4"), **o),
        "randn_like": lambda t, **o: make(rng.standard_normal(tuple(t.shape)).astype("f4"), t, **o),
        "rand_like": lambda t, **o: make(rng.random(tuple(t.shape)).astype("f4"), t, **o),
        "randint": lambda *args, **o: make(_randint(rng, args, o.pop("size", None)), **o),
        "randperm": lambda n, **o: make(rng.permutation(n), **o),
        "multinomial": lambda t, num_samples, replacement=False, **o: make(
            _multinomial(rng, t.detach().cpu().numpy(), num_samples, replacement), **o
        ),
    }
    saved = {name: getattr(library, name) for name in _RANDOM if hasattr(library, name)}
    try:
        for name, function in replacements.items():
            setattr(library, name, function)
        yield
    finally:
        for name in _RANDOM:
            if name in saved:
                setattr(library, name, saved[name])
            else:
                delattr(library, name)


@contextlib.contextmanager
def functional_dropout_off(library: ModuleType) -> Iterator[None]:
    """Make ``library.nn.functional.dropout`` (which :func:`no_dropout` cannot reach: a
    program calls it with ``training=self.training``) drop nothing."""
    functional = library.nn.functional
    dropout = functional.dropout

    def no_drop(x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        return dropout(x, 0.0, training, inplace)

    functional.dropout = no_drop
    try:
        yield
    finally:
        functional.dropout = dropout
