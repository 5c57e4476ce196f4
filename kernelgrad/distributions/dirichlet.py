"""torch.distributions.dirichlet (defined in ``gamma.py``)."""

from .gamma import Dirichlet

__all__ = ["Dirichlet"]
