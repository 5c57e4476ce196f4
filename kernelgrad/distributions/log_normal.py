"""torch.distributions.log_normal (defined in ``transformed_distribution.py``)."""

from .transformed_distribution import LogNormal

__all__ = ["LogNormal"]
