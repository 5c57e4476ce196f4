"""``torch`` as another name for ``kernelgrad``: what ``import kernelgrad.as_torch`` does.

While the alias is installed, ``import torch`` gives ``kernelgrad`` and ``import
torch.X`` (``torch.nn``, ``torch.nn.functional``, ``torch.optim``, ``torch.utils.data``,
...) gives ``kernelgrad.X``; a ``torch`` module kernelgrad does not have raises
``ModuleNotFoundError`` naming it. The modules keep their own names (``torch.nn`` *is*
``kernelgrad.nn``), so isinstance checks, pickling and error messages speak of
kernelgrad.

>>> import kernelgrad
>>> from kernelgrad.torch_alias import aliased
>>> with aliased():
...     import torch
...     import torch.nn.functional as F
>>> torch is kernelgrad, F is kernelgrad.nn.functional
(True, True)
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

__all__ = ["aliased", "install", "uninstall"]


class _ExistingModule(importlib.abc.Loader):
    """Hands the import system a module that already exists (with override off, the
    import system keeps the module's own name, spec and file)."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def create_module(self, spec: Any) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        pass


class TorchAlias(importlib.abc.MetaPathFinder):
    """``torch`` / ``torch.X`` -> ``kernelgrad`` / ``kernelgrad.X``."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not _is_torch(fullname):
            return None
        target_name = "kernelgrad" + fullname[len("torch") :]
        try:
            module = importlib.import_module(target_name)
        except ImportError as error:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: kernelgrad has no {target_name} ({error})",
                name=fullname,
            ) from None
        return importlib.util.spec_from_loader(fullname, _ExistingModule(module))


def _is_torch(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


def _installed() -> TorchAlias | None:
    return next((f for f in sys.meta_path if isinstance(f, TorchAlias)), None)


def install() -> None:
    """Make ``import torch...`` give kernelgrad from now on (refused when PyTorch itself
    is already imported: the program would hold both)."""
    if _installed() is not None:
        return
    real = sorted(name for name in sys.modules if _is_torch(name))
    if real:
        raise ImportError(
            f"PyTorch is already imported ({real[0]!r}); import kernelgrad.as_torch before "
            "anything imports torch, e.g. as the program's first line"
        )
    sys.meta_path.insert(0, TorchAlias())


def uninstall() -> None:
    """Remove the alias and forget the ``torch`` names it gave out."""
    finder = _installed()
    if finder is not None:
        sys.meta_path.remove(finder)
    for name in [name for name in sys.modules if _is_torch(name)]:
        if sys.modules[name].__name__.startswith("kernelgrad"):
            del sys.modules[name]


@contextlib.contextmanager
def aliased() -> Iterator[None]:
    """The alias for the duration of a block; PyTorch modules already imported are set
    aside and put back afterwards (tests run the same program under both)."""
    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if _is_torch(name)}
    finder = TorchAlias()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if _is_torch(name)]:
            del sys.modules[name]
        sys.modules.update(saved)
