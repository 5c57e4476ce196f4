"""torch.distributions.relaxed_categorical (defined in ``transformed_distribution.py``)."""

from .transformed_distribution import ExpRelaxedCategorical, RelaxedOneHotCategorical

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]
