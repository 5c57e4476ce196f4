"""Exception types. Each subclasses the builtin a PyTorch user would catch.

Where PyTorch raises ``RuntimeError`` for a mistake (mismatched shapes, a bad argument
value, a dtype an operation does not support) and NumPy or plain Python would raise
``ValueError`` or ``TypeError``, the class subclasses both, so ``except RuntimeError``
in a ported program and ``except ValueError`` in NumPy-minded code both catch it.

Messages follow one rule: say what is wrong (with the shapes, dtypes or devices
involved), name the operation, and say what to do instead.
"""

from __future__ import annotations


class ShapeError(ValueError, RuntimeError):
    """Shapes that cannot be combined: broadcasting, matmul, reshape, bad dims (PyTorch
    raises ``RuntimeError`` for these)."""


class DimensionError(ShapeError, IndexError):
    """A dim out of range for the tensor (PyTorch raises ``IndexError`` here, so this is
    one too) or named twice."""


class DeviceMismatchError(RuntimeError):
    """An operation received tensors that live on different devices."""


class ScalarAccessError(RuntimeError):
    """Element-by-element access to accelerator memory (a device round trip per element)."""


class IndexingError(IndexError):
    """An index that does not fit the tensor: out of bounds, a boolean mask whose shape
    differs from the dimensions it indexes, too many indices."""


class DTypeError(TypeError, RuntimeError):
    """A dtype (or an operand's type) that the operation does not accept (PyTorch raises
    ``RuntimeError`` for an unsupported dtype and ``TypeError`` for a wrong Python type)."""


class ArgumentError(ValueError, RuntimeError):
    """An argument value the operation cannot use (a zero step, a bad reduction name;
    PyTorch raises ``RuntimeError``)."""


class DivisionByZeroError(ZeroDivisionError, RuntimeError):
    """Integer division or remainder by zero. PyTorch raises ``RuntimeError`` on the CPU;
    this is also a ``ZeroDivisionError``, as Python's own ``5 // 0``."""


class UnsupportedError(NotImplementedError):
    """An operation kernelgrad does not implement (yet) for these inputs or this device."""


class InplaceError(RuntimeError):
    """An in-place change that would make a gradient wrong, that autograd cannot record,
    or that would write one memory location through several elements (an expanded view)."""


class BackwardError(RuntimeError):
    """``backward()`` cannot run: nothing requires grad, the graph was freed, or a bad
    ``gradient`` argument."""


class KernelError(RuntimeError):
    """A compiled kernel failed; the message names the kernel, the shapes and the launch."""


def format_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
