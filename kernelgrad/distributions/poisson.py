"""torch.distributions.poisson (defined in ``discrete.py``)."""

from .discrete import Poisson

__all__ = ["Poisson"]
