"""torch.distributions.exponential (defined in ``laplace_exponential.py``)."""

from .laplace_exponential import Exponential

__all__ = ["Exponential"]
