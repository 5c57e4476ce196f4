"""torch.distributions.gumbel (defined in ``transformed_distribution.py``)."""

from .transformed_distribution import Gumbel

__all__ = ["Gumbel"]
