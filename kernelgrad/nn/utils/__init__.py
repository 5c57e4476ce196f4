"""``kg.nn.utils``: PyTorch's ``torch.nn.utils``: gradient clipping, packed sequences
(``kg.nn.utils.rnn`` is ``torch.nn.utils.rnn``), parameters as one vector, Conv/Linear +
BatchNorm fusion, ``skip_init``, weight and spectral normalisation (the hook forms here,
the parametrization forms in ``kg.nn.utils.parametrizations``) and ``parametrize``.

>>> import kernelgrad as kg
>>> layer = kg.nn.Linear(2, 1)
>>> layer(kg.ones(1, 2) * 100).sum().backward()
>>> total = kg.nn.utils.clip_grad_norm_(layer.parameters(), max_norm=1.0)
>>> total.item() > 1.0
True
"""

from . import parametrizations, parametrize, rnn, stateless
from .clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from .init import skip_init
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "rnn"]
__all__ += [
    "clip_grad_norm",
    "clip_grads_with_norm_",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    "parameters_to_vector",
    "parametrizations",
    "parametrize",
    "remove_spectral_norm",
    "remove_weight_norm",
    "skip_init",
    "spectral_norm",
    "stateless",
    "vector_to_parameters",
    "weight_norm",
]
