"""torch.distributions: probability distributions with PyTorch's API (``sample``,
reparameterised ``rsample``, ``log_prob``, ``entropy``, ``kl_divergence``, constraints),
written in differentiable Tensor ops and drawing from kernelgrad's random generator
(``kg.manual_seed``): samples differ from PyTorch's, the values of ``log_prob``,
``entropy``, ``cdf``, ``mean``, ... agree with them.

>>> import kernelgrad as kg
>>> from kernelgrad.distributions import Normal, kl_divergence
>>> p = Normal(kg.tensor([0.0]), kg.tensor([1.0]))
>>> round(p.log_prob(kg.tensor([0.0])).item(), 4)
-0.9189
>>> kl_divergence(p, Normal(0.0, 2.0)).shape
kg.Size([1])
"""

from __future__ import annotations

from . import constraints, transforms
from .bernoulli import Bernoulli
from .categorical import Categorical
from .discrete import Binomial, Geometric, Poisson
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import Beta, Dirichlet, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace_exponential import Exponential, Laplace
from .mixture_same_family import MixtureSameFamily
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .transformed_distribution import (
    ExpRelaxedCategorical,
    Gumbel,
    LogNormal,
    RelaxedOneHotCategorical,
    TransformedDistribution,
)
from .transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    SigmoidTransform,
    TanhTransform,
    Transform,
)
from .uniform import Uniform

__all__ = [
    "AffineTransform",
    "ComposeTransform",
    "ExpRelaxedCategorical",
    "ExpTransform",
    "Gumbel",
    "LogNormal",
    "MixtureSameFamily",
    "RelaxedOneHotCategorical",
    "SigmoidTransform",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "transforms",
    "Bernoulli",
    "Beta",
    "Binomial",
    "Dirichlet",
    "Exponential",
    "Gamma",
    "Geometric",
    "Laplace",
    "Poisson",
    "Categorical",
    "Distribution",
    "ExponentialFamily",
    "Independent",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
]
