"""Recurrent layers with PyTorch's parameters and calling conventions: ``RNN``, ``LSTM``,
``GRU`` and the single-step ``RNNCell``, ``LSTMCell``, ``GRUCell``.

Parameters are named and shaped as in PyTorch (``weight_ih_l0`` of shape
(gates * hidden_size, input_size), ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, with
the suffix ``_reverse`` for the second direction; the gates in PyTorch's order: LSTM
i, f, g, o and GRU r, z, n), so a PyTorch ``state_dict`` loads unchanged. An LSTM with
``proj_size`` has ``weight_hr_l0`` (proj_size, hidden_size) too: its h (the output and
h_n) is the cell's h times ``weight_hr_l0.T``, with proj_size features. Every parameter
starts uniform in +-1/sqrt(hidden_size), as in PyTorch.

The input may be a ``PackedSequence`` (``kg.nn.utils.rnn``, sequences of different
lengths): the output is one too, and each sequence's final state is taken at its own
last step, as in PyTorch.

How a layer runs (``nn/_recurrence.py``): each layer and direction is one autograd
node. The input projection of all time steps is one matrix product; each time step is
one matrix product with ``weight_hh`` and one fused elementwise kernel for the cell,
writing into buffers allocated once per call; the backward pass is again one kernel and
one matrix product per step, and the weight gradients one matrix product each over all
steps. Its backward is not differentiable again (``create_graph=True`` raises). The
cells (``LSTMCell``, ...) are Tensor operations with one fused gate kernel, and can be
differentiated twice.

>>> import kernelgrad as kg
>>> lstm = kg.nn.LSTM(input_size=3, hidden_size=4, num_layers=2)
>>> output, (h, c) = lstm(kg.randn(5, 2, 3))  # (seq, batch, features)
>>> output.shape, h.shape, c.shape
(kg.Size([5, 2, 4]), kg.Size([2, 2, 4]), kg.Size([2, 2, 4]))
"""

from __future__ import annotations

import math
from typing import Any

import kernelgrad as kg

from ..errors import ArgumentError, DeviceMismatchError, DTypeError, ShapeError, format_shape
from ..ops.creation import empty, zeros
from ..ops.movement import cat, stack
from ..tensor import Tensor
from . import functional as F
from . import init
from ._recurrence import Steps, run_layer
from .module import Module, Parameter
from .utils.rnn import PackedSequence, packed_to_padded, padded_to_packed

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# --- the cells' fused gate functions (one kernel forward, one derived kernel backward) ---
@kg.elementwise
def _lstm_gates(i, f, g, o, c):
    """PyTorch's LSTM cell on the pre-activations of its four gates: (h', c')."""
    c_next = kg.sigmoid(f) * c + kg.sigmoid(i) * kg.tanh(g)
    return kg.sigmoid(o) * kg.tanh(c_next), c_next


@kg.elementwise
def _gru_gates(x_r, x_z, x_n, h_r, h_z, h_n, h):
    """PyTorch's GRU cell: r and z gate, the candidate n (whose hidden part is scaled by
    r), and h' = (1 - z) * n + z * h."""
    r = kg.sigmoid(x_r + h_r)
    z = kg.sigmoid(x_z + h_z)
    n = kg.tanh(x_n + r * h_n)
    return (1.0 - z) * n + z * h


def _split(t: Tensor, parts: int) -> list[Tensor]:
    size = t.shape[-1] // parts
    return [t.narrow(t.ndim - 1, k * size, size) for k in range(parts)]


def _cell_step(
    mode: str, x_projected: Tensor, h: Tensor, c: Tensor | None, w_hh: Tensor, b_hh: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    """One step of a cell. ``x_projected`` is ``x @ w_ih.T + b_ih`` (plus ``b_hh`` for
    every cell but GRU, whose hidden bias sits inside the reset gate's product)."""
    if mode == "GRU":
        h_projected = h @ w_hh.T
        if b_hh is not None:
            h_projected = h_projected + b_hh
        return _gru_gates(*_split(x_projected, 3), *_split(h_projected, 3), h), None
    gates = x_projected + h @ w_hh.T
    if mode == "LSTM":
        return _lstm_gates(*_split(gates, 4), c)
    return (gates.tanh() if mode == "RNN_TANH" else gates.relu()), None


class RNNBase(Module):
    """The multi-layer, optionally bidirectional recurrence shared by RNN, LSTM and GRU."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if not 0.0 <= dropout <= 1.0:
            raise ArgumentError(f"{name}: dropout must be between 0 and 1, got {dropout}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ArgumentError(
                f"{name}: hidden_size and num_layers must be positive, got {hidden_size} and "
                f"{num_layers}"
            )
        _check_proj_size(name, mode, proj_size, hidden_size)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        output_size = proj_size or hidden_size  # the features of h
        self._names: list[list[str]] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else output_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                # PyTorch's order (state_dict and parameters() follow it)
                shapes = {
                    "weight_ih": (gate_size, layer_input),
                    "weight_hh": (gate_size, output_size),
                }
                if bias:
                    shapes["bias_ih"] = shapes["bias_hh"] = (gate_size,)
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                names = []
                for kind, shape in shapes.items():
                    setattr(
                        self, kind + suffix, Parameter(empty(shape, device=device, dtype=dtype))
                    )
                    names.append(kind + suffix)
                self._names.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for parameter in self.parameters():
            init.uniform_(parameter, -bound, bound)

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters of each layer and direction, in PyTorch's order."""
        return [[getattr(self, name) for name in names] for names in self._names]

    def flatten_parameters(self) -> None:
        """Nothing to do: PyTorch packs the weights into one buffer for cuDNN here."""

    def _weights(self, layer: int, direction: int) -> tuple[Tensor | None, ...]:
        """(weight_ih, weight_hh, bias_ih, bias_hh, weight_hr), None where absent."""
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return tuple(
            getattr(self, kind + suffix, None)
            for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
        )

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        for option, default in (("bias", True), ("batch_first", False), ("dropout", 0.0)):
            if getattr(self, option) != default:
                text += f", {option}={getattr(self, option)}"
        return text + (", bidirectional=True" if self.bidirectional else "")

    def _check_features(self, x: Tensor) -> None:
        name = type(self).__name__
        if x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: the input has {x.shape[-1]} features (shape "
                f"{format_shape(x.shape)}) but the layer has input_size={self.input_size}"
            )
        weight = self.weight_ih_l0
        if x.dtype != weight.dtype:
            raise DTypeError(
                f"{name}: the input is {x.dtype} but the weights are {weight.dtype}; "
                f"convert the input (`x.to({weight.dtype})`) or the layer"
            )

    def _check_input(self, input: Tensor) -> tuple[Tensor, bool]:
        """The input as (seq, batch, features), and whether it came unbatched."""
        if not isinstance(input, Tensor) or input.ndim not in (2, 3):
            layout = "batch, seq" if self.batch_first else "seq, batch"
            got = format_shape(input.shape) if isinstance(input, Tensor) else type(input).__name__
            raise ShapeError(
                f"{type(self).__name__}: expected an input of 3 dims ({layout}, features), 2 "
                f"(seq, features) or a PackedSequence, got {got}"
            )
        self._check_features(input)
        steps = input.shape[1 if self.batch_first and input.ndim == 3 else 0]
        if steps == 0:
            raise ShapeError(
                f"{type(self).__name__}: expected a sequence length larger than 0, got an "
                f"input of shape {format_shape(input.shape)}"
            )
        unbatched = input.ndim == 2
        if unbatched:
            return input.unsqueeze(1), True
        return (input.transpose(0, 1) if self.batch_first else input), False

    def _initial_state(
        self, given: Tensor | None, batch: int, unbatched: bool, like: Tensor, what: str
    ) -> Tensor:
        states = self.num_layers * (2 if self.bidirectional else 1)
        features, feature_name = self.hidden_size, "hidden_size"
        if self.proj_size and what != "c_0":
            features, feature_name = self.proj_size, "proj_size"
        expected = (states, batch, features)
        if given is None:
            return zeros(expected, dtype=like.dtype, device=like.device)
        if unbatched:
            given = given.unsqueeze(1)
        name = type(self).__name__
        if given.device != like.device:
            raise DeviceMismatchError(
                f"{name}: {what} is on {given.device} but the input is on {like.device}; move "
                f"it (`{what}.to({str(like.device)!r})`)"
            )
        if given.dtype != like.dtype:
            raise DTypeError(
                f"{name}: {what} is {given.dtype} but the input is {like.dtype}; convert it "
                f"(`{what}.to({like.dtype})`)"
            )
        if given.shape != expected:
            shown = expected[:1] + expected[2:] if unbatched else expected
            raise ShapeError(
                f"{name}: {what} must have shape {format_shape(shown)} "
                f"(num_layers * num_directions, {'' if unbatched else 'batch, '}"
                f"{feature_name}), got "
                f"{format_shape(given.shape if not unbatched else given.squeeze(1).shape)}"
            )
        return given

    def _forward(
        self, input: Any, hx: Tensor | None, cx: Tensor | None
    ) -> tuple[Any, Tensor, Tensor | None]:
        """(output, h_n, c_n) for a tensor or a PackedSequence (c_n for LSTM only)."""
        lstm = self.mode == "LSTM"
        h_name = "h_0" if lstm else "hx"
        if isinstance(input, PackedSequence):
            data, batch_sizes, sorted_indices, unsorted_indices = input
            if data.ndim != 2:
                raise ShapeError(
                    f"{type(self).__name__}: a PackedSequence's data must have shape (total "
                    f"steps, features), got {format_shape(data.shape)}"
                )
            self._check_features(data)
            sizes = tuple(int(n) for n in batch_sizes.cpu().tolist())
            x = packed_to_padded(data, sizes)
            h0 = self._initial_state(hx, sizes[0], False, x, h_name)
            c0 = self._initial_state(cx, sizes[0], False, x, "c_0") if lstm else None
            if sorted_indices is not None:  # the states follow the batch's sorted order
                h0 = h0.index_select(1, sorted_indices) if hx is not None else h0
                c0 = c0.index_select(1, sorted_indices) if cx is not None else c0
            output, h_n, c_n = self._run(x, h0, c0, sizes, packed=True)
            output = PackedSequence(
                padded_to_packed(output, sizes), batch_sizes, sorted_indices, unsorted_indices
            )
            if unsorted_indices is not None:
                h_n = h_n.index_select(1, unsorted_indices)
                c_n = c_n.index_select(1, unsorted_indices) if c_n is not None else None
            return output, h_n, c_n
        x, unbatched = self._check_input(input)
        h0 = self._initial_state(hx, x.shape[1], unbatched, x, h_name)
        c0 = self._initial_state(cx, x.shape[1], unbatched, x, "c_0") if lstm else None
        output, h_n, c_n = self._run(x, h0, c0, (x.shape[1],) * x.shape[0], packed=False)
        if unbatched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            c_n = c_n.squeeze(1) if c_n is not None else None
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, h_n, c_n

    def _run(
        self, x: Tensor, h0: Tensor, c0: Tensor | None, sizes: tuple[int, ...], packed: bool
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """The layers over a (seq, batch, features) input whose step t runs the first
        ``sizes[t]`` sequences: (output, h_n, c_n)."""
        directions = 2 if self.bidirectional else 1
        steps = [Steps(sizes, reverse=direction == 1, packed=packed) for direction in range(2)]
        layer_input = x
        last_h, last_c = [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                output, h, c = run_layer(
                    self.mode,
                    steps[direction],
                    layer_input,
                    h0[index],
                    c0[index] if c0 is not None else None,
                    self._weights(layer, direction),
                )
                outputs.append(output)
                last_h.append(h)
                last_c.append(c)
            layer_input = outputs[0] if directions == 1 else cat(outputs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        h_n = stack(last_h, 0)
        c_n = stack(last_c, 0) if c0 is not None else None
        return layer_input, h_n, c_n


def _check_proj_size(name: str, mode: str, proj_size: int, hidden_size: int) -> None:
    if proj_size < 0:
        raise ArgumentError(
            f"{name}: proj_size should be a positive integer or zero to disable projections, "
            f"got {proj_size}"
        )
    if proj_size and mode != "LSTM":
        raise ArgumentError(
            f"{name}: proj_size argument is only supported for LSTM, not RNN or GRU (got "
            f"proj_size={proj_size}); add a Linear layer after the {name} instead"
        )
    if proj_size and proj_size >= hidden_size:
        raise ArgumentError(
            f"{name}: proj_size has to be smaller than hidden_size, got proj_size="
            f"{proj_size} and hidden_size={hidden_size}"
        )


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu with
    ``nonlinearity="relu"``). ``forward(input, hx=None) -> (output, h_n)``; ``input`` may
    be a PackedSequence (the output is one too).

    >>> import kernelgrad as kg
    >>> output, h_n = kg.nn.RNN(3, 4, batch_first=True)(kg.randn(2, 5, 3))
    >>> output.shape, h_n.shape
    (kg.Size([2, 5, 4]), kg.Size([1, 2, 4]))
    """

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
        **options: Any,
    ) -> None:  # fmt: skip
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(mode, input_size, hidden_size, num_layers, **options)

    def forward(self, input: Any, hx: Tensor | None = None) -> tuple[Any, Tensor]:
        output, h_n, _ = self._forward(input, hx, None)
        return output, h_n


class GRU(RNNBase):
    """Gated recurrent unit (PyTorch's equations, gates r, z, n).
    ``forward(input, hx=None) -> (output, h_n)``; ``input`` may be a PackedSequence."""

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, **options: Any
    ) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, **options)

    forward = RNN.forward


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o), optionally with projections
    (``proj_size``: h = the cell's h @ weight_hr.T, with proj_size features).
    ``forward(input, hx=None) -> (output, (h_n, c_n))`` with ``hx = (h_0, c_0)``;
    ``input`` may be a PackedSequence."""

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, **options: Any
    ) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, **options)

    def forward(
        self, input: Any, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Any, tuple[Tensor, Tensor]]:
        if hx is not None and (not isinstance(hx, tuple | list) or len(hx) != 2):
            raise ArgumentError("LSTM: hx must be a pair (h_0, c_0) of tensors, or None")
        h0, c0 = (None, None) if hx is None else hx
        output, h_n, c_n = self._forward(input, h0, c0)
        return output, (h_n, c_n)


# --- single steps ------------------------------------------------------------------------
class RNNCellBase(Module):
    """One step of a recurrent cell, with parameters ``weight_ih``, ``weight_hh``,
    ``bias_ih``, ``bias_hh`` as in PyTorch."""

    def __init__(
        self, mode: str, input_size: int, hidden_size: int, bias: bool = True,
        device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate_size = _GATES[mode] * hidden_size
        self.weight_ih = Parameter(empty((gate_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(empty((gate_size, hidden_size), device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty((gate_size,), device=device, dtype=dtype))
            self.bias_hh = Parameter(empty((gate_size,), device=device, dtype=dtype))
        else:
            self.bias_ih = self.bias_hh = None
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")

    def _step(self, input: Tensor, h: Tensor | None, c: Tensor | None) -> tuple[Tensor, Any]:
        name = type(self).__name__
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: expected an input of shape (batch, {self.input_size}) or "
                f"({self.input_size},), got {format_shape(input.shape)}"
            )
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        states = []
        for state in (h, c):
            if state is None:
                state = zeros((x.shape[0], self.hidden_size), dtype=x.dtype, device=x.device)
            elif unbatched:
                state = state.unsqueeze(0)
            if state.shape != (x.shape[0], self.hidden_size):
                expected = format_shape((x.shape[0], self.hidden_size))
                raise ShapeError(
                    f"{name}: the hidden state must have shape {expected}, got "
                    f"{format_shape(state.shape)}"
                )
            states.append(state)
        bias = self.bias_ih
        if bias is not None and self.mode != "GRU":
            bias = self.bias_ih + self.bias_hh
        projected = F.linear(x, self.weight_ih, bias)
        h_next, c_next = _cell_step(
            self.mode, projected, states[0], states[1], self.weight_hh, self.bias_hh
        )
        if unbatched:
            h_next = h_next.squeeze(0)
            c_next = c_next.squeeze(0) if c_next is not None else None
        return h_next, c_next


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
        device: Any = None, dtype: Any = None,
    ) -> None:  # fmt: skip
        if nonlinearity not in ("tanh", "relu"):
            raise ArgumentError(
                f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}"
            )
        self.nonlinearity = nonlinearity
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(mode, input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step(input, hx, None)[0]


class GRUCell(RNNCellBase):
    """One GRU step: ``forward(input, hx=None) -> h'``."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
        dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)

    forward = RNNCell.forward


class LSTMCell(RNNCellBase):
    """One LSTM step: ``forward(input, hx=None) -> (h', c')`` with ``hx = (h, c)``.

    >>> import kernelgrad as kg
    >>> h, c = kg.nn.LSTMCell(3, 4)(kg.randn(2, 3))
    >>> h.shape, c.shape
    (kg.Size([2, 4]), kg.Size([2, 4]))
    """

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
        dtype: Any = None,
    ) -> None:  # fmt: skip
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)

    def forward(
        self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        h, c = (None, None) if hx is None else hx
        return self._step(input, h, c)
