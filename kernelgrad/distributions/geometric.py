"""torch.distributions.geometric (defined in ``discrete.py``)."""

from .discrete import Geometric

__all__ = ["Geometric"]
