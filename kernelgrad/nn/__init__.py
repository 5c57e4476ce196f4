"""``kg.nn``: modules, layers, losses, initialisation and the functional interface.

>>> import kernelgrad as kg
>>> model = kg.nn.Sequential(
...     kg.nn.Conv2d(1, 4, 3, padding=1), kg.nn.ReLU(), kg.nn.MaxPool2d(2),
...     kg.nn.Flatten(), kg.nn.Linear(4 * 14 * 14, 10),
... )
>>> model(kg.zeros(2, 1, 28, 28)).shape
(2, 10)
"""

from . import functional, init, parallel, utils
from .activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from .container import ModuleDict, ModuleList, Sequential
from .conv import Conv1d, Conv2d
from .device_functions import UnsupportedLayerError, device_function
from .dropout import Dropout, Dropout1d, Dropout2d
from .embedding import Embedding
from .linear import Flatten, Identity, Linear, Unflatten
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import IncompatibleKeys, Module, Parameter, StateDictError
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .pooling import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase

__all__ = [
    "functional",
    "init",
    "parallel",
    "utils",
    "Module",
    "Parameter",
    "IncompatibleKeys",
    "StateDictError",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "Identity",
    "Linear",
    "Flatten",
    "Unflatten",
    "Conv1d",
    "Conv2d",
    "MaxPool1d",
    "MaxPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "AdaptiveAvgPool2d",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "LayerNorm",
    "Embedding",
    "RNNBase",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCellBase",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "ReLU",
    "GELU",
    "Sigmoid",
    "Tanh",
    "SiLU",
    "LeakyReLU",
    "Softplus",
    "Softmax",
    "LogSoftmax",
    "ELU",
    "CELU",
    "SELU",
    "Hardtanh",
    "ReLU6",
    "Hardsigmoid",
    "Hardswish",
    "LogSigmoid",
    "Mish",
    "Softsign",
    "Tanhshrink",
    "Threshold",
    "Hardshrink",
    "Softshrink",
    "Softmin",
    "GLU",
    "RReLU",
    "PReLU",
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "BCELoss",
    "BCEWithLogitsLoss",
    "SmoothL1Loss",
    "HuberLoss",
    "device_function",
    "UnsupportedLayerError",
]
