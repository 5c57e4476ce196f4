"""``kg.nn.utils``: gradient clipping and packed sequences (PyTorch's ``torch.nn.utils``;
``kg.nn.utils.rnn`` is ``torch.nn.utils.rnn``).

>>> import kernelgrad as kg
>>> layer = kg.nn.Linear(2, 1)
>>> layer(kg.ones(1, 2) * 100).sum().backward()
>>> total = kg.nn.utils.clip_grad_norm_(layer.parameters(), max_norm=1.0)
>>> total.item() > 1.0
True
"""

from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "rnn"]
