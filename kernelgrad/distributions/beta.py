"""torch.distributions.beta (defined in ``gamma.py``)."""

from .gamma import Beta

__all__ = ["Beta"]
