"""torch.distributions.laplace (defined in ``laplace_exponential.py``)."""

from .laplace_exponential import Laplace

__all__ = ["Laplace"]
