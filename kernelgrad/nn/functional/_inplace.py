"""PyTorch's ``inplace=True`` for the activations and dropouts written as compositions of
tensor ops: the result is written into the input, which is returned.

The write goes through ``Tensor.copy_`` (``ops/inplace``), so autograd treats it as every
other in-place op does: a leaf that requires grad is refused while gradients are being
recorded (as PyTorch refuses it), and an intermediate result is rebased onto the
recorded computation. The computation reads a copy of the input when autograd records,
since the out-of-place ops may save their operand for backward and the write would then
change it.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import autograd
from ...ops.inplace import _check_autograd
from ...tensor import Tensor


def write_into(input: Tensor, name: str, compute: Callable[[Tensor], Tensor]) -> Tensor:
    """``compute(input)`` written into ``input``; ``name`` (e.g. ``"elu_"``) names the op
    in the error raised for a leaf that requires grad."""
    _check_autograd(input, (), name)  # the refusal, named after this op, before any work
    source = input.clone() if autograd.needs_grad(input) else input
    return input.copy_(compute(source))
