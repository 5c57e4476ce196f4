"""torch.distributions.binomial (defined in ``discrete.py``)."""

from .discrete import Binomial

__all__ = ["Binomial"]
