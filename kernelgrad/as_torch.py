"""``import kernelgrad.as_torch``: the one line that ports a PyTorch program.

Put it first; every later ``import torch`` / ``import torch.nn as nn`` /
``from torch.utils.data import DataLoader`` then imports kernelgrad (see
:mod:`kernelgrad.torch_alias`). A program that has already imported PyTorch gets an
``ImportError`` saying to move this line up.

.. code-block:: python

    import kernelgrad.as_torch  # noqa: F401  (the only changed line)
    import torch
    import torch.nn as nn
"""

from __future__ import annotations

from .torch_alias import install

install()
