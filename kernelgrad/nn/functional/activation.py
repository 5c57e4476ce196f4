"""Activation functions and softmax."""

from __future__ import annotations

import math

from ... import autograd
from ...errors import ArgumentError, DimensionError, ShapeError, format_shape
from ...ops import elementwise as _ew
from ...ops.elementwise import where
from ...ops.inplace import _check_autograd
from ...tensor import Tensor
from ._inplace import write_into
from ._layout import _apply_in_layout, _dense


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0), elementwise.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.relu(kg.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    if inplace:
        return input.relu_()
    if input.is_contiguous() or not _dense(input):
        return input.relu()
    # A permuted layout (a convolution's output, stored batch innermost) is kept: the
    # result, and the gradient, are stored like the input and computed in memory order.
    with autograd.no_grad():
        result = _apply_in_layout(_ew.RELU, input)
    if autograd.needs_grad(input):
        saved = autograd.SavedOutput(result)

        def backward(grad: Tensor) -> tuple[Tensor]:
            output = saved.get()
            if autograd.is_grad_enabled():  # create_graph: the differentiable record
                return (_ew.RELU_GRAD(grad, output),)
            return (_apply_in_layout(_ew.RELU_GRAD, grad, output, layout=output),)

        autograd.record("relu", (input,), result, backward, (saved.data,))
        saved.bind(result._node)
    return result


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit ``x * Phi(x)``; ``approximate="tanh"`` uses the tanh
    formula of the original paper.

    >>> import kernelgrad as kg
    >>> round(kg.nn.functional.gelu(kg.tensor([1.0])).item(), 4)
    0.8413
    """
    if approximate == "none":
        return _ew.GELU(input)
    if approximate == "tanh":
        inner = (input + input * input * input * 0.044715) * math.sqrt(2.0 / math.pi)
        return input * 0.5 * (inner.tanh() + 1.0)
    raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), elementwise."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return input.tanh()


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (also called swish); ``inplace`` writes it into the input."""
    if inplace:
        return write_into(input, "silu_", silu)
    return input * input.sigmoid()


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``negative_slope * x``; ``inplace`` writes it into the input
    (as ``leaky_relu_``)."""
    if inplace:
        return leaky_relu_(input, negative_slope)
    return where(input > 0, input, input * negative_slope)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta, linear above ``threshold`` (as PyTorch)."""
    scaled = input * beta
    smooth = (-scaled.abs()).exp().log1p() / beta + scaled.relu() / beta
    return where(scaled > threshold, input, smooth)


def softmax(input: Tensor, dim: int) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim`` (stable: the maximum is subtracted first)."""
    return input.softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably as x - logsumexp(x)."""
    return input.log_softmax(dim)


# --- the other activations of torch.nn.functional, in tensor ops ------------------------
# Each branch that `where` leaves unused is fed a clamped input, so that it stays finite
# and its gradient (multiplied by zero) cannot turn into NaN. ``inplace=True`` writes the
# result into the input and returns the input, as PyTorch does (``_inplace.write_into``).

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``alpha * (exp(x) - 1)``.

    >>> import kernelgrad as kg
    >>> [round(v, 4) for v in kg.nn.functional.elu(kg.tensor([-1.0, 2.0])).tolist()]
    [-0.6321, 2.0]
    """
    if inplace:
        return elu_(input, alpha)
    return where(input > 0, input, input.clamp(max=0.0).expm1() * alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalising constants (alpha = 1.6733,
    scale = 1.0507)."""
    if inplace:
        return selu_(input)
    return elu(input, _SELU_ALPHA) * _SELU_SCALE


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else ``alpha * (exp(x / alpha) - 1)``."""
    if alpha == 0:
        raise ArgumentError("celu: alpha must not be 0 (it divides the input)")
    if inplace:
        return celu_(input, alpha)
    return where(input > 0, input, (input.clamp(max=0.0) / alpha).expm1() * alpha)


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """x clamped to [min_val, max_val]."""
    if min_val > max_val:
        raise ArgumentError(f"hardtanh: min_val {min_val} is larger than max_val {max_val}")
    if inplace:
        return hardtanh_(input, min_val, max_val)
    return input.clamp(min_val, max_val)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """0 below -3, 1 above 3, ``x / 6 + 1/2`` between."""
    if inplace:
        return write_into(input, "hardsigmoid_", hardsigmoid)
    return (input / 6.0 + 0.5).clamp(0.0, 1.0)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * hardsigmoid(x)``."""
    if inplace:
        return write_into(input, "hardswish_", hardswish)
    return input * hardsigmoid(input)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)), computed stably as ``min(x, 0) - log(1 + exp(-|x|))``."""
    return input.clamp(max=0.0) - (-input.abs()).exp().log1p()


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    if inplace:
        return write_into(input, "mish_", mish)
    return input * softplus(input).tanh()


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - input.tanh()


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else ``value``."""
    if inplace:
        return threshold_(input, threshold, value)
    return where(input > threshold, input, value)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    return where(input.abs() > lambd, input, 0.0)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, else 0."""
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, 0.0))


def softmin(input: Tensor, dim: int | None = None) -> Tensor:
    """``softmax(-x)`` along ``dim`` (PyTorch's implicit choice when None: dim 0 for 0-,
    1- and 3-d inputs, else dim 1)."""
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return (-input).softmax(dim)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: the input split in halves a, b along ``dim``, ``a * sigmoid(b)``.

    >>> import kernelgrad as kg
    >>> kg.nn.functional.glu(kg.tensor([[2.0, 0.0]])).tolist()
    [[1.0]]
    """
    if input.ndim == 0:
        raise ShapeError("glu: the input must have at least one dimension")
    d = dim % input.ndim if -input.ndim <= dim < input.ndim else dim
    if not 0 <= d < input.ndim:
        raise DimensionError(f"glu: dim {dim} is out of range for {input.ndim} dims")
    size = input.shape[d]
    if size % 2:
        raise ShapeError(
            f"glu: dim {dim} of the input of shape {format_shape(input.shape)} has size {size}; "
            "it must be even (the input is halved along it)"
        )
    first = input.narrow(d, 0, size // 2)
    second = input.narrow(d, size // 2, size // 2)
    return first * second.sigmoid()


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else ``weight * x``; ``weight`` has one slope (shape (1,)) or one per
    channel (dim 1 of the input)."""
    if weight.numel() == 1:
        slope = weight.reshape(())
    else:
        channels = input.shape[1] if input.ndim >= 2 else (input.shape[0] if input.ndim else 1)
        if weight.numel() != channels:
            raise ShapeError(
                f"prelu: weight has {weight.numel()} slopes but the input of shape "
                f"{format_shape(input.shape)} has {channels} channels; give 1 or {channels}"
            )
        shape = (channels,) + (1,) * (input.ndim - 2) if input.ndim >= 2 else (channels,)
        slope = weight.reshape(shape)
    return where(input > 0, input, input * slope)


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8.0,
    upper: float = 1.0 / 3.0,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """Randomised leaky ReLU: in training each negative element gets a slope drawn
    uniformly from [lower, upper]; in evaluation the slope is ``(lower + upper) / 2``."""
    if inplace:
        return rrelu_(input, lower, upper, training)
    if not training:
        return where(input >= 0, input, input * ((lower + upper) / 2.0))
    from ...ops.creation import rand

    slopes = rand(input.shape, dtype=input.dtype, device=input.device) * (upper - lower) + lower
    return where(input >= 0, input, input * slopes)


# --- in-place variants: the result written into the input -------------------------------------
# The input itself is returned, changed, as PyTorch's ``F.relu_`` and friends do; autograd
# records the in-place write (a leaf that requires grad is refused, as in PyTorch).


def relu_(input: Tensor) -> Tensor:
    """``relu`` written into ``input``.

    >>> import kernelgrad as kg
    >>> x = kg.tensor([-1.0, 2.0])
    >>> _ = kg.nn.functional.relu_(x)
    >>> x.tolist()
    [0.0, 2.0]
    """
    return input.relu_()


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``elu`` written into ``input``."""
    return write_into(input, "elu_", lambda x: elu(x, alpha))


def selu_(input: Tensor) -> Tensor:
    """``selu`` written into ``input``."""
    return write_into(input, "selu_", selu)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """``celu`` written into ``input``."""
    return write_into(input, "celu_", lambda x: celu(x, alpha))


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``leaky_relu`` written into ``input``."""
    return write_into(input, "leaky_relu_", lambda x: leaky_relu(x, negative_slope))


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """``hardtanh`` (a clamp to [min_val, max_val]) written into ``input``."""
    if min_val > max_val:
        raise ArgumentError(f"hardtanh_: min_val {min_val} is larger than max_val {max_val}")
    _check_autograd(input, (), "hardtanh_")  # the refusal of a leaf, named after this op
    return input.clamp_(min_val, max_val)  # clamp's own in-place kernel


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """``threshold`` written into ``input``: elements not above ``threshold`` become
    ``value``."""
    return write_into(input, "threshold_", lambda x: where(x > threshold, x, value))


def rrelu_(
    input: Tensor, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0, training: bool = False
) -> Tensor:
    """``rrelu`` written into ``input``."""
    return write_into(input, "rrelu_", lambda x: rrelu(x, lower, upper, training))


# --- Gumbel-softmax ----------------------------------------------------------------------------


def gumbel_softmax(
    logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """A differentiable sample from the categorical distribution of ``logits``:
    ``softmax((logits + g) / tau)`` along ``dim``, with ``g`` standard Gumbel noise. With
    ``hard`` the result is the one-hot vector of its largest entry, whose gradient is that
    of the soft sample (the straight-through estimator). ``eps`` is unused, as in PyTorch.

    >>> import kernelgrad as kg
    >>> y = kg.nn.functional.gumbel_softmax(kg.zeros(2, 5), hard=True)
    >>> y.sum(1).tolist()
    [1.0, 1.0]
    """
    if tau <= 0:
        raise ArgumentError(f"gumbel_softmax: tau must be positive, got {tau}")
    if logits.ndim == 0:
        raise ShapeError("gumbel_softmax: the logits need at least one dimension")
    from ...ops.creation import arange, rand

    uniform = rand(logits.shape, dtype=logits.dtype, device=logits.device)
    # -log(Exp(1)) with Exp(1) = -log(1 - U), kept above 0 so the noise stays finite
    exponential = (1.0 - uniform).log().neg().clamp(min=1e-30)
    y_soft = ((logits - exponential.log()) / tau).softmax(dim)
    if not hard:
        return y_soft
    d = dim % logits.ndim if -logits.ndim <= dim < logits.ndim else dim
    if not 0 <= d < logits.ndim:
        raise DimensionError(f"gumbel_softmax: dim {dim} is out of range for {logits.ndim} dims")
    index = y_soft.detach().argmax(d, keepdim=True)
    shape = [1] * logits.ndim
    shape[d] = logits.shape[d]
    positions = arange(logits.shape[d], device=logits.device).reshape(tuple(shape))
    y_hard = (positions == index).to(logits.dtype)
    return y_hard - y_soft.detach() + y_soft
