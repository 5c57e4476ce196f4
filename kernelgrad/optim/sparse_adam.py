"""``SparseAdam``: refused with a message that names the replacement.

PyTorch's SparseAdam is "lazy" Adam for sparse gradients (``nn.Embedding(sparse=True)``):
it updates the moments and the parameter only at the rows the sparse gradient lists,
and it refuses dense gradients. kernelgrad's gradients are always dense (``sparse=True``
embeddings are refused too), and a dense gradient cannot tell a row that was looked up
but got a zero gradient (whose moments SparseAdam decays) from one that was not looked
up (left alone), so no dense update reproduces it; :class:`Adam` (every row's moments
decay every step) is the replacement."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import UnsupportedError
from .optimizer import Optimizer

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """Not supported: kernelgrad has no sparse gradients. Making one raises
    ``UnsupportedError`` naming :class:`Adam` (with ``sparse=False`` embeddings) as the
    replacement; see the module docstring for why no dense equivalent is offered."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        maximize: bool = False,
    ) -> None:
        raise UnsupportedError(
            "SparseAdam is not supported: it updates only the rows a sparse gradient lists "
            "(from nn.Embedding(sparse=True)), and kernelgrad's gradients are always dense. "
            f"Use kg.optim.Adam(params, lr={lr}, betas={tuple(betas)}, eps={eps}) instead "
            "(it updates every row's moments on every step, so rows not looked up still "
            "move while their moments decay)"
        )
