"""``kg.nn.parallel``: data-parallel training across processes
(``DistributedDataParallel``), and PyTorch's single-process ``DataParallel`` /
``data_parallel`` without CUDA or on one device (kernelgrad/nn/parallel/_data_parallel.py).

>>> import kernelgrad as kg
>>> kg.nn.parallel.DistributedDataParallel.__name__
'DistributedDataParallel'
"""

from ._data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
