"""``kg.optim``: optimizers and learning-rate schedulers.

>>> import kernelgrad as kg
>>> model = kg.nn.Linear(3, 1)
>>> opt = kg.optim.Adam(model.parameters(), lr=1e-3)
>>> loss = model(kg.ones(4, 3)).pow(2).mean()
>>> opt.zero_grad(); loss.backward(); opt.step()
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .adaptive import Adadelta, RMSprop
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adadelta", "LBFGS", "lr_scheduler"]
