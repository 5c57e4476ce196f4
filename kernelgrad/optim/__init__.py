"""``kg.optim``: optimizers and learning-rate schedulers.

>>> import kernelgrad as kg
>>> model = kg.nn.Linear(3, 1)
>>> opt = kg.optim.Adam(model.parameters(), lr=1e-3)
>>> loss = model(kg.ones(4, 3)).pow(2).mean()
>>> opt.zero_grad(); loss.backward(); opt.step()
"""

from . import lr_scheduler, swa_utils
from .adafactor import Adafactor
from .adagrad import Adagrad, Adamax
from .adam import Adam, AdamW
from .adaptive import Adadelta, RMSprop
from .asgd import ASGD, Rprop
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam, RAdam
from .optimizer import Optimizer
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = [
    "Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adadelta", "LBFGS", "lr_scheduler",
    "Adagrad", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop", "SparseAdam",
    "Adafactor", "Muon", "swa_utils",
]  # fmt: skip
