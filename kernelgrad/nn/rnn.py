"""Recurrent layers with PyTorch's parameters and calling conventions: ``RNN``, ``LSTM``,
``GRU`` and the single-step ``RNNCell``, ``LSTMCell``, ``GRUCell``.

Parameters are named and shaped as in PyTorch (``weight_ih_l0`` of shape
(gates * hidden_size, input_size), ``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, with
the suffix ``_reverse`` for the second direction; the gates in PyTorch's order: LSTM
i, f, g, o and GRU r, z, n), so a PyTorch ``state_dict`` loads unchanged. Every parameter
starts uniform in +-1/sqrt(hidden_size), as in PyTorch.

How a layer runs: the input projection of all time steps is one matrix product
((L*N, input) x (input, gates*hidden), both biases folded in where the cell allows),
then each step is one matrix product with ``weight_hh`` and one fused elementwise kernel
for the gates (``@kg.elementwise`` with several outputs: an LSTM step computes the new
``h`` and ``c`` in one kernel, and its backward is one derived kernel too).

>>> import kernelgrad as kg
>>> lstm = kg.nn.LSTM(input_size=3, hidden_size=4, num_layers=2)
>>> output, (h, c) = lstm(kg.randn(5, 2, 3))  # (seq, batch, features)
>>> output.shape, h.shape, c.shape
((5, 2, 4), (2, 2, 4), (2, 2, 4))
"""

from __future__ import annotations

import math
from typing import Any

import kernelgrad as kg

from ..errors import ArgumentError, ShapeError, UnsupportedError, format_shape
from ..ops.creation import empty, zeros
from ..ops.movement import cat, stack
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module, Parameter

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# --- the fused gate functions (one kernel forward, one derived kernel backward) ---------
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
        if proj_size:
            raise UnsupportedError(
                f"{name}: proj_size={proj_size} (an LSTM with projections) is not supported; "
                "add a Linear layer after the LSTM instead"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ArgumentError(f"{name}: dropout must be between 0 and 1, got {dropout}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ArgumentError(
                f"{name}: hidden_size and num_layers must be positive, got {hidden_size} and "
                f"{num_layers}"
            )
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = 0
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        self._names: list[list[str]] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [(gate_size, layer_input), (gate_size, hidden_size)]
                kinds = ["weight_ih", "weight_hh"]
                if bias:
                    shapes += [(gate_size,), (gate_size,)]
                    kinds += ["bias_ih", "bias_hh"]
                names = []
                for kind, shape in zip(kinds, shapes):
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

    def _weights(self, layer: int, direction: int) -> list[Tensor | None]:
        names = self._names[layer * (2 if self.bidirectional else 1) + direction]
        weights = [getattr(self, n) for n in names]
        return weights if self.bias else weights + [None, None]

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        for option, default in (("bias", True), ("batch_first", False), ("dropout", 0.0)):
            if getattr(self, option) != default:
                text += f", {option}={getattr(self, option)}"
        return text + (", bidirectional=True" if self.bidirectional else "")

    def _check_input(self, input: Tensor) -> tuple[Tensor, bool]:
        name = type(self).__name__
        if input.ndim not in (2, 3):
            layout = "batch, seq" if self.batch_first else "seq, batch"
            raise ShapeError(
                f"{name}: expected an input of 3 dims ({layout}, features) or 2 (seq, "
                f"features), got shape {format_shape(input.shape)}"
            )
        if input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}: the input has {input.shape[-1]} features (shape "
                f"{format_shape(input.shape)}) but the layer has input_size={self.input_size}"
            )
        weight = self.weight_ih_l0
        if input.dtype != weight.dtype:
            from ..errors import DTypeError

            raise DTypeError(
                f"{name}: the input is {input.dtype} but the weights are {weight.dtype}; "
                f"convert the input (`x.to({weight.dtype})`) or the layer"
            )
        unbatched = input.ndim == 2
        if unbatched:
            return input.unsqueeze(1), True
        return (input.transpose(0, 1) if self.batch_first else input), False

    def _initial_state(
        self, given: Tensor | None, batch: int, unbatched: bool, like: Tensor, what: str
    ) -> Tensor:
        states = self.num_layers * (2 if self.bidirectional else 1)
        expected = (states, batch, self.hidden_size)
        if given is None:
            return zeros(expected, dtype=like.dtype, device=like.device)
        if unbatched:
            given = given.unsqueeze(1)
        if given.shape != expected:
            shown = expected[:1] + expected[2:] if unbatched else expected
            raise ShapeError(
                f"{type(self).__name__}: {what} must have shape {format_shape(shown)} "
                f"(num_layers * num_directions, {'' if unbatched else 'batch, '}hidden_size), "
                f"got {format_shape(given.shape if not unbatched else given.squeeze(1).shape)}"
            )
        return given

    def _run(
        self, input: Tensor, h0: Tensor, c0: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """The layers over a (seq, batch, features) input: (output, h_n, c_n)."""
        directions = 2 if self.bidirectional else 1
        steps, batch = input.shape[0], input.shape[1]
        layer_input = input
        last_h, last_c = [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
                bias = b_ih
                if b_ih is not None and self.mode != "GRU":
                    bias = b_ih + b_hh
                flat = layer_input.reshape(steps * batch, layer_input.shape[-1])
                projected = F.linear(flat, w_ih, bias).reshape(steps, batch, w_ih.shape[0])
                h = h0[index]
                c = c0[index] if c0 is not None else None
                per_step: list[Tensor] = [None] * steps  # type: ignore[list-item]
                order = range(steps - 1, -1, -1) if direction else range(steps)
                for t in order:
                    h, c = _cell_step(self.mode, projected[t], h, c, w_hh, b_hh)
                    per_step[t] = h
                outputs.append(stack(per_step, 0))
                last_h.append(h)
                last_c.append(c)
            layer_input = outputs[0] if directions == 1 else cat(outputs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        h_n = stack(last_h, 0)
        c_n = stack(last_c, 0) if c0 is not None else None
        return layer_input, h_n, c_n

    def _finish(self, output: Tensor, unbatched: bool) -> Tensor:
        if unbatched:
            return output.squeeze(1)
        return output.transpose(0, 1) if self.batch_first else output


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu with
    ``nonlinearity="relu"``). ``forward(input, hx=None) -> (output, h_n)``.

    >>> import kernelgrad as kg
    >>> output, h_n = kg.nn.RNN(3, 4, batch_first=True)(kg.randn(2, 5, 3))
    >>> output.shape, h_n.shape
    ((2, 5, 4), (1, 2, 4))
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

    def forward(self, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
        x, unbatched = self._check_input(input)
        h0 = self._initial_state(hx, x.shape[1], unbatched, x, "hx")
        output, h_n, _ = self._run(x, h0, None)
        return self._finish(output, unbatched), h_n.squeeze(1) if unbatched else h_n


class GRU(RNNBase):
    """Gated recurrent unit (PyTorch's equations, gates r, z, n).
    ``forward(input, hx=None) -> (output, h_n)``."""

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, **options: Any
    ) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, **options)

    forward = RNN.forward


class LSTM(RNNBase):
    """Long short-term memory (gates i, f, g, o).
    ``forward(input, hx=None) -> (output, (h_n, c_n))`` with ``hx = (h_0, c_0)``."""

    def __init__(
        self, input_size: int, hidden_size: int, num_layers: int = 1, **options: Any
    ) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, **options)

    def forward(
        self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        x, unbatched = self._check_input(input)
        if hx is not None and (not isinstance(hx, tuple | list) or len(hx) != 2):
            raise ArgumentError("LSTM: hx must be a pair (h_0, c_0) of tensors, or None")
        h0 = self._initial_state(None if hx is None else hx[0], x.shape[1], unbatched, x, "h_0")
        c0 = self._initial_state(None if hx is None else hx[1], x.shape[1], unbatched, x, "c_0")
        output, h_n, c_n = self._run(x, h0, c0)
        if unbatched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish(output, unbatched), (h_n, c_n)


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
    ((2, 4), (2, 4))
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
