"""``kg.nn.parallel``: data-parallel training across processes.

>>> import kernelgrad as kg
>>> kg.nn.parallel.DistributedDataParallel.__name__
'DistributedDataParallel'
"""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
