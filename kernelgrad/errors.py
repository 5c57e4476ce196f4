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


class ShapeAssertionError(ShapeError, AssertionError):
    """Shapes PyTorch refuses with ``AssertionError`` instead of ``RuntimeError`` (the
    inputs and masks of ``MultiheadAttention``): ``except AssertionError`` in a ported
    program catches it, and so does ``except RuntimeError``."""


class DeviceMismatchError(RuntimeError):
    """An operation received tensors that live on different devices."""


class ParameterDeviceError(DeviceMismatchError, TypeError):
    """Parameters on several devices given where one device is needed
    (``nn.utils.parameters_to_vector``; PyTorch raises ``TypeError`` there)."""


class ScalarAccessError(RuntimeError):
    """Element-by-element access to accelerator memory (a device round trip per element)."""


class PerformanceWarning(UserWarning):
    """Code that works but runs far slower than it could, with the faster way named (a
    Python loop reading accelerator values one at a time)."""


class IndexingError(IndexError):
    """An index that does not fit the tensor: out of bounds, a boolean mask whose shape
    differs from the dimensions it indexes, too many indices."""


class IndexValueError(IndexingError, RuntimeError):
    """An index tensor holding a position outside what it indexes, where PyTorch raises
    ``RuntimeError`` (``max_unpool``'s "invalid max index", ``embedding_bag``'s offsets):
    catchable as either."""


class DTypeError(TypeError, RuntimeError):
    """A dtype (or an operand's type) that the operation does not accept (PyTorch raises
    ``RuntimeError`` for an unsupported dtype and ``TypeError`` for a wrong Python type)."""


class DTypeAssertionError(DTypeError, AssertionError):
    """A dtype PyTorch refuses with ``AssertionError`` (an integer attention mask)."""


class ArgumentError(ValueError, RuntimeError):
    """An argument value the operation cannot use (a zero step, a bad reduction name;
    PyTorch raises ``RuntimeError``)."""


class ArgumentAssertionError(ArgumentError, AssertionError):
    """Arguments PyTorch refuses with ``AssertionError`` (``AveragedModel`` given both
    ``avg_fn`` and ``multi_avg_fn``)."""


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


class LinAlgError(RuntimeError):
    """A matrix a linear-algebra function cannot factor: singular (``linalg.inv``,
    ``linalg.solve``) or not positive-definite (``linalg.cholesky``). PyTorch raises
    ``torch.linalg.LinAlgError``, a ``RuntimeError``; ``kg.linalg.LinAlgError`` is this."""


def format_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


# PyTorch names kernelgrad does not have, and what to use instead. ``kernelgrad`` and
# ``Tensor`` raise AttributeError with this advice instead of Python's spelling guess
# (``'mm'. Did you mean: 'mT'?``).
MODULE_ADVICE = {
    "half": "kernelgrad has float32 and float64 only: use kg.float32",
    "float16": "kernelgrad has float32 and float64 only: use kg.float32",
    "bfloat16": "kernelgrad has float32 and float64 only: use kg.float32",
    "complex64": "kernelgrad has no complex dtypes",
    "vmap": "kernelgrad has no vmap: write the batch dimension explicitly, or a @kg.kernel",
    "fft": "kernelgrad has no FFTs",
    "sparse": "kernelgrad has no sparse tensors",
    "set_printoptions": "kernelgrad prints tensors with NumPy's options: numpy.set_printoptions",
    "save_file": "kg.serialization.save_file writes a safetensors file (kg.save saves "
    "nested structures)",
    "Function": "kernelgrad's custom backward passes are kg.custom_vjp",
}
TENSOR_ADVICE = {
    "half": "kernelgrad has float32 and float64 only: use .float()",
    "bfloat16": "kernelgrad has float32 and float64 only: use .float()",
    "byte": "kernelgrad has no uint8 dtype (it has float32, float64, int32, int64, bool): "
    "use .int() or .long()",
    "char": "kernelgrad has no int8 dtype: use .int() or .long()",
    "short": "kernelgrad has no int16 dtype: use .int() or .long()",
    "pin_memory": "kernelgrad has no pinned host memory: remove the call (copies to the GPU "
    "are synchronous)",
    "share_memory_": "kernelgrad tensors are not shared between processes: use kg.distributed",
    "storage": "kernelgrad has no storage objects: x.numpy() shares a CPU tensor's memory",
    "untyped_storage": "kernelgrad has no storage objects: x.numpy() shares a CPU tensor's memory",
    "to_sparse": "kernelgrad has no sparse tensors",
    "backward_hook": "use kg.autograd's hooks (docs/autograd.md)",
    "apply_": "kernelgrad does not run Python per element: write a @kg.elementwise function",
    "map_": "kernelgrad does not run Python per element: write a @kg.elementwise function",
    "cfloat": "kernelgrad has no complex dtypes",
    "__cuda_array_interface__": "it exists only on CUDA tensors on a GPU (not on the CPU, "
    "nor under Numba's CUDA simulator, which has no device pointers); on the CPU, "
    "t.numpy() and __dlpack__ share the memory",
}


def missing_attribute(owner: str, name: str) -> AttributeError:
    """The AttributeError for a name that ``kernelgrad`` (``owner="module"``) or a
    ``Tensor`` does not have, with the kernelgrad equivalent where there is one."""
    table = MODULE_ADVICE if owner == "module" else TENSOR_ADVICE
    what = "module 'kernelgrad'" if owner == "module" else "'Tensor' object"
    advice = table.get(name)
    if advice is None and name.startswith("__") and name.endswith("__"):
        return AttributeError(f"{what} has no attribute {name!r}")
    if advice is None:
        where = "torch" if owner == "module" else "torch.Tensor"
        advice = (
            f"kernelgrad does not implement PyTorch's {where}.{name} (if PyTorch has it; "
            "docs/pytorch-compat.md lists what is covered)"
        )
    return AttributeError(f"{what} has no attribute {name!r}: {advice}")
