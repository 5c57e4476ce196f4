"""One layer and direction of a recurrent network (RNN, LSTM, GRU) as one autograd node.

``RNNBase`` calls :func:`run_layer` once per layer and direction. Its forward pass:

* the input projection of every time step is one matrix product
  ((steps * batch, input) x (input, gates * hidden), the biases folded in where the cell
  allows);
* each time step is one matrix product of the previous hidden state with ``weight_hh``,
  written into a preallocated buffer, and one fused elementwise kernel for the cell,
  which writes the step's ``h`` (and ``c``) into buffers of shape (steps + 1, batch,
  features) and the gate activations over the step's input projection (kept for the
  backward pass). The extra slot of the state buffers holds the initial state: slot 0
  for the forward direction (step t reads slot t and writes slot t + 1), slot ``steps``
  for the reverse one (step t reads slot t + 1 and writes slot t).

The backward pass runs the steps in the opposite order, again one kernel and one matrix
product per step, and stores the gradients of every step's gates, so that the gradients
of ``weight_ih``, ``weight_hh``, the biases and the input are each one matrix product
(or sum) over all steps at the end. The steps issue backend primitives (``matmul``,
``elementwise``) on views of those buffers directly, without a Tensor operation per
step: a step costs two launches, not the dozen small operations (and autograd records)
of a cell written in Tensor ops.

Sequences of different lengths (a ``PackedSequence``) run on the padded layout, sorted
by decreasing length: step t runs the first ``sizes[t]`` rows only (the sequences still
running). The other rows of every buffer stay zero (or hold an initial state, for the
reverse direction, where a sequence starts at its own last step), so the matrix products
over all steps still give the right weight gradients. A sequence's final state is read
at its own last step; its final state's gradient enters the backward pass there, because
the rows of a finished sequence are not touched by the steps after it.

The backward pass is not differentiable again (``create_graph=True`` raises), as
PyTorch's fused recurrent kernels are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import kernelgrad as kg

from ..autograd_function import Function, once_differentiable
from ..backends.base import View
from ..debug import debug_level
from ..ops.creation import empty, zeros
from ..ops.movement import cat
from ..tensor import Tensor
from . import functional as F

__all__ = ["Steps", "run_layer"]


# --- the cells' kernels: one forward kernel and one backward kernel per time step ----------
@kg.elementwise
def _lstm_step(x_i, x_f, x_g, x_o, h_i, h_f, h_g, h_o, c):
    """Input and hidden parts of the four gates, the previous cell state:
    (h, c, and the activations i, f, g, o kept for the backward pass)."""
    i = kg.sigmoid(x_i + h_i)
    f = kg.sigmoid(x_f + h_f)
    g = kg.tanh(x_g + h_g)
    o = kg.sigmoid(x_o + h_o)
    c_next = f * c + i * g
    return o * kg.tanh(c_next), c_next, i, f, g, o


@kg.elementwise
def _lstm_step_backward(dh_output, dh_next, dc_next, i, f, g, o, c_previous, c):
    """The gradients of the four gates' pre-activations and of the previous cell state,
    from the gradient of the step's h (two parts: the output's and the next step's) and
    of its c."""
    dh = dh_output + dh_next
    tanh_c = kg.tanh(c)
    dc = dc_next + dh * o * (1.0 - tanh_c * tanh_c)
    d_i = dc * g * i * (1.0 - i)
    d_f = dc * c_previous * f * (1.0 - f)
    d_g = dc * i * (1.0 - g * g)
    d_o = dh * tanh_c * o * (1.0 - o)
    return d_i, d_f, d_g, d_o, dc * f


@kg.elementwise
def _gru_step(x_r, x_z, x_n, h_r, h_z, h_n, bias_n, h):
    """PyTorch's GRU: the input parts hold both biases of r and z and the input bias of
    n; the hidden bias of n sits inside the reset gate's product. Returns (h, and r, z,
    n and n's hidden part kept for the backward pass)."""
    r = kg.sigmoid(x_r + h_r)
    z = kg.sigmoid(x_z + h_z)
    hidden_n = h_n + bias_n
    n = kg.tanh(x_n + r * hidden_n)
    return (1.0 - z) * n + z * h, r, z, n, hidden_n


@kg.elementwise
def _gru_step_backward(dh_output, dh_next, dh_next_product, r, z, n, hidden_n, h):
    """The gradients of the gates' input parts (r, z, n), of their hidden parts (r, z, and
    n's hidden part), and of the previous h through its direct path (z * h). The step's
    h gradient comes in three parts: the output's, the next step's direct path and the
    next step's matrix product."""
    dh = dh_output + dh_next + dh_next_product
    d_n = dh * (1.0 - z) * (1.0 - n * n)
    d_z = dh * (h - n) * z * (1.0 - z)
    d_r = d_n * hidden_n * r * (1.0 - r)
    return d_r, d_z, d_n, d_r, d_z, d_n * r, dh * z


@kg.elementwise
def _tanh_step(x, h):
    return kg.tanh(x + h)


@kg.elementwise
def _tanh_step_backward(dh_output, dh_next, h):
    return (dh_output + dh_next) * (1.0 - h * h)


@kg.elementwise
def _relu_step(x, h):
    return kg.relu(x + h)


@kg.elementwise
def _relu_step_backward(dh_output, dh_next, h):
    return kg.where(h > 0.0, dh_output + dh_next, 0.0)


@kg.elementwise
def _add(x, y):
    return x + y


# --- time steps and views ---------------------------------------------------------------------
@dataclass(frozen=True)
class Steps:
    """The time steps of one direction: how many rows (sequences) each step runs, and
    which slot of a (steps + 1)-slot state buffer it reads and writes."""

    sizes: tuple[int, ...]  # rows of each step, non-increasing (all equal unless packed)
    reverse: bool
    packed: bool

    @property
    def count(self) -> int:
        return len(self.sizes)

    @property
    def batch(self) -> int:
        return self.sizes[0]

    def order(self) -> range:
        """The steps in the order the forward pass runs them."""
        return range(self.count - 1, -1, -1) if self.reverse else range(self.count)

    def previous_slot(self, step: int) -> int:
        return step + 1 if self.reverse else step

    def output_slot(self, step: int) -> int:
        return step if self.reverse else step + 1

    def _last_steps(self) -> list[tuple[int, int, int]]:
        """(step, first row, end row) for the rows whose sequences end at ``step`` (in
        time order)."""
        found = []
        for step, size in enumerate(self.sizes):
            following = self.sizes[step + 1] if step + 1 < self.count else 0
            if following < size:
                found.append((step, following, size))
        return found

    def initial_slots(self) -> list[tuple[int, int, int]]:
        """(slot, first row, end row) where the initial states go: forward, slot 0 for
        every row; reverse, a sequence starts at its own last time step."""
        if not self.reverse:
            return [(0, 0, self.batch)]
        return [(self.previous_slot(step), low, high) for step, low, high in self._last_steps()]

    def final_slots(self) -> list[tuple[int, int, int]]:
        """(slot, first row, end row) where the final states are read."""
        if self.reverse:
            return [(0, 0, self.batch)]
        return [(self.output_slot(step), low, high) for step, low, high in self._last_steps()]


# The steps build their views as plain View tuples (a step needs a dozen; View(...) is
# several times cheaper than NamedTuple._replace).
def _slots(t: Tensor) -> list[View]:
    """One backend view per index of ``t``'s first dim (a time step or a slot)."""
    buffer, shape, strides, offset, dtype = t._view()
    return [
        View(buffer, shape[1:], strides[1:], offset + k * strides[0], dtype)
        for k in range(shape[0])
    ]


def _rows(view: View, rows: int) -> View:
    """The first ``rows`` rows of a (batch, features) view."""
    if view.shape[0] == rows:
        return view
    return View(view.buffer, (rows, view.shape[1]), view.strides, view.offset, view.dtype)


def _gates(view: View, parts: int) -> list[View]:
    """A (rows, parts * hidden) view split into the ``parts`` gates' (rows, hidden) views."""
    buffer, (rows, width), strides, offset, dtype = view
    size = width // parts
    return [
        View(buffer, (rows, size), strides, offset + k * size * strides[1], dtype)
        for k in range(parts)
    ]


def _state_buffer(steps: Steps, initial: Tensor) -> Tensor:
    """A (steps + 1, batch, features) buffer with the initial states in their slots (zero
    elsewhere when packed: the weight gradients' products read every row)."""
    make = zeros if steps.packed else empty
    buffer = make((steps.count + 1, *initial.shape), dtype=initial.dtype, device=initial.device)
    for slot, low, high in steps.initial_slots():
        buffer[slot, low:high] = initial[low:high]
    return buffer


def _final_state(steps: Steps, buffer: Tensor) -> Tensor:
    """Each sequence's state after its last step (a new tensor)."""
    slots = steps.final_slots()
    if len(slots) == 1:
        return buffer[slots[0][0]].clone()
    final = empty(buffer.shape[1:], dtype=buffer.dtype, device=buffer.device)
    for slot, low, high in slots:
        final[low:high] = buffer[slot, low:high]
    return final


def _outputs(steps: Steps, buffer: Tensor) -> Tensor:
    """The h of every step, (steps, batch, features), as a new tensor (the buffer is kept
    for the backward pass; an in-place change of the output must not reach it)."""
    return (buffer[:-1] if steps.reverse else buffer[1:]).clone()


def _previous_states(steps: Steps, buffer: Tensor) -> Tensor:
    """The state each step started from, (steps, batch, features)."""
    return buffer[1:] if steps.reverse else buffer[:-1]


def _new(steps: Steps, shape: tuple[int, ...], like: Tensor) -> Tensor:
    """A work buffer: zero when packed (rows past a sequence's end must hold zeros for the
    products over all steps), uninitialised otherwise."""
    make = zeros if steps.packed else empty
    return make(shape, dtype=like.dtype, device=like.device)


def _projection(x: Tensor, w_ih: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor]:
    """(x as (steps * batch, input), x @ w_ih.T + bias as (steps, batch, gates))."""
    steps, batch = x.shape[0], x.shape[1]
    flat = x.reshape(steps * batch, x.shape[2])
    projected = F.linear(flat, w_ih, bias).reshape(steps, batch, w_ih.shape[0])
    return flat, projected


def _flat(t: Tensor) -> Tensor:
    return t.reshape(t.shape[0] * t.shape[1], t.shape[2])


def _input_gradients(
    d_gates: Tensor, x_flat: Tensor, w_ih: Tensor, x_shape: tuple[int, ...], needs: tuple
) -> tuple[Tensor | None, Tensor | None]:
    """The gradients of the input and of ``weight_ih`` (where ``needs`` says so) from
    every step's gate gradients, one matrix product each."""
    flat = _flat(d_gates)
    dx = (flat @ w_ih).reshape(x_shape) if needs[0] else None
    d_w_ih = flat.mT @ x_flat if needs[1] else None
    return dx, d_w_ih


# --- running a time loop ------------------------------------------------------------------------
# A layer's time loop is a fixed list of launches for a given shape: the backend's
# ``matmul`` and ``elementwise`` on views of a few buffers (made anew on each call, at the
# same offsets). Where the backend can join launches into native calls
# (``Backend.join_launches``: the CPU runs them from generated code, with no Python
# between kernels, docs/kernels.md), the loop's launches are prepared and joined once a
# shape has been run JOIN_AFTER times, and later calls of that shape run the joined calls
# over their own buffers instead of building and launching each step from Python.
JOIN_AFTER = 3
_JOINED: dict[tuple, Any] = {}  # loop key -> calls counted so far, or the joined runs


class _Recorder:
    """Stands in for the backend while a loop body runs: keeps its launches."""

    def __init__(self) -> None:
        self.launches: list[tuple[str, tuple]] = []

    def matmul(self, out: View, a: View, b: View) -> None:
        self.launches.append(("matmul", (out, a, b)))

    def elementwise(self, fn: Any, outputs: list, inputs: list, compute: list) -> None:
        self.launches.append(("elementwise", (fn, outputs, inputs, compute)))


def _time_loop(backend: Any, key: tuple, tensors: list[Tensor], body: Any) -> None:
    """Run ``body(launcher)``, a time loop that calls ``launcher.matmul`` and
    ``launcher.elementwise`` on views of ``tensors``' buffers only, as native calls the
    backend joined where it can (see above), else through the backend itself. ``key``
    names everything the views depend on but the buffers (the loop, the steps, the
    tensors' shapes, strides and dtypes)."""
    join = getattr(backend, "join_launches", None)
    if join is None or "elementwise" in vars(backend) or "matmul" in vars(backend):
        body(backend)  # no joining here, or launches being traced or counted
        return
    key = (id(backend), *key, *[(t.shape, t._strides, t.dtype.name) for t in tensors])
    entry = _JOINED.get(key, 0)
    if isinstance(entry, list):
        _run_joined(entry, tensors)
        return
    if entry is None or entry + 1 < JOIN_AFTER or debug_level() > 0:
        body(backend)  # never joinable, not yet worth joining, or launches being logged
        if entry is not None and debug_level() == 0:
            _remember(key, entry + 1)
        return
    recorder = _Recorder()
    body(recorder)
    runs = _joined(backend, join, recorder.launches, tensors)
    if not isinstance(runs, list):
        for kind, arguments in recorder.launches:
            getattr(backend, kind)(*arguments)
        _remember(key, runs)  # None: never; 0: ask again after JOIN_AFTER more calls
        return
    _remember(key, runs)
    _run_joined(runs, tensors)


def _table(tensors: list[Tensor]) -> tuple[list[Any], list[int]]:
    """The slot table a joined loop reads: each tensor's buffer, and its offset."""
    return [t._storage.buffer for t in tensors], [t._offset for t in tensors]


def _run_joined(runs: list, tensors: list[Tensor]) -> None:
    table, bases = _table(tensors)
    for _, _, run in runs:
        run(table, bases)


def _remember(key: tuple, value: Any) -> None:
    if len(_JOINED) >= 256:
        _JOINED.clear()
    _JOINED[key] = value


def _joined(backend: Any, join: Any, launches: list, tensors: list[Tensor]) -> Any:
    """The joined runs of these launches if they cover all of them; None where they
    cannot (a view of a buffer outside ``tensors``, a launch the backend cannot prepare
    or join); 0 where the backend answers "not yet"."""
    slot_of = {id(t._storage.buffer): slot for slot, t in enumerate(tensors)}
    if len(slot_of) != len(tensors):
        return None  # two of the tensors share a buffer
    prepared = []
    for kind, arguments in launches:
        views = [v for v in _views(arguments) if isinstance(v, View)]
        if any(id(v.buffer) not in slot_of for v in views):
            return None
        prepare = getattr(backend, f"prepare_{kind}", None)
        launch = prepare(*arguments) if prepare is not None else None
        if launch is None:
            return None
        prepared.append((launch, sorted({slot_of[id(v.buffer)] for v in views})))
    table, bases = _table(tensors)
    runs = join(prepared, table, bases, set(range(len(tensors))))
    if runs is None:
        return 0
    if sum(stop - first for first, stop, _ in runs) != len(prepared):
        return None
    return runs


def _views(arguments: tuple) -> list[Any]:
    found = []
    for argument in arguments:
        if isinstance(argument, list):
            found.extend(argument)
        else:
            found.append(argument)
    return found


# --- LSTM ---------------------------------------------------------------------------------------
class _LSTMLayer(Function):
    """forward(steps, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr) -> (output, h_n, c_n);
    ``w_hr`` (proj_size) and the biases may be None."""

    @staticmethod
    def forward(ctx, steps, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr):
        hidden = w_hh.shape[0] // 4
        bias = b_ih + b_hh if b_ih is not None else None
        x_flat, gates = _projection(x, w_ih, bias)  # becomes the gate activations
        hs = _state_buffer(steps, h0)
        cs = _state_buffer(steps, c0)
        unprojected = None  # with a projection: the cell's h before it, for w_hr's gradient
        if w_hr is not None:
            unprojected = _new(steps, (steps.count, steps.batch, hidden), x)
        hidden_part = empty((steps.batch, 4 * hidden), dtype=x.dtype, device=x.device)
        w_hh_t = w_hh.t().contiguous()
        w_hr_t = w_hr.t().contiguous() if w_hr is not None else None
        compute = [x.dtype] * _lstm_step.nin
        kernel = _lstm_step.scalar_for(compute)

        def body(launch: Any) -> None:
            h_slots, c_slots, gate_steps = _slots(hs), _slots(cs), _slots(gates)
            r_steps = _slots(unprojected) if unprojected is not None else None
            products, w_hh_view = hidden_part._view(), w_hh_t._view()
            for step in steps.order():
                rows = steps.sizes[step]
                previous, output = steps.previous_slot(step), steps.output_slot(step)
                product = _rows(products, rows)
                launch.matmul(product, _rows(h_slots[previous], rows), w_hh_view)
                four = _gates(_rows(gate_steps[step], rows), 4)
                h = _rows(r_steps[step] if r_steps is not None else h_slots[output], rows)
                launch.elementwise(
                    kernel,
                    [h, _rows(c_slots[output], rows), *four],
                    [*four, *_gates(product, 4), _rows(c_slots[previous], rows)],
                    compute,
                )
                if w_hr_t is not None:
                    launch.matmul(_rows(h_slots[output], rows), h, w_hr_t._view())

        tensors = [gates, hs, cs, hidden_part, w_hh_t]
        tensors += [unprojected, w_hr_t] if w_hr_t is not None else []
        _time_loop(x._backend, ("lstm", steps), tensors, body)
        ctx.steps = steps
        ctx.x_shape = x.shape
        ctx.save_for_backward(x_flat, gates, hs, cs, unprojected, w_ih, w_hh, w_hr)
        return _outputs(steps, hs), _final_state(steps, hs), _final_state(steps, cs)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_output, d_h_n, d_c_n):
        steps = ctx.steps
        x_flat, gates, hs, cs, unprojected, w_ih, w_hh, w_hr = ctx.saved_tensors
        d_gates = _new(steps, gates.shape, gates)
        # the gradients reaching the state a step starts from (a finished sequence's rows
        # keep its final state's gradient until the backward pass reaches its last step)
        d_h = d_h_n.clone()
        d_c = d_c_n.clone()
        d_h_total = d_unprojected = None  # with a projection: the gradients of h and the cell's h
        if w_hr is not None:
            d_h_total = _new(steps, d_output.shape, hs)
            d_unprojected = empty((steps.batch, w_hr.shape[1]), dtype=hs.dtype, device=hs.device)
        compute = [hs.dtype] * _lstm_step_backward.nin
        kernel = _lstm_step_backward.scalar_for(compute)
        add = _add.scalar_for([hs.dtype] * 2)

        def body(launch: Any) -> None:
            c_slots, gate_steps, d_gate_steps = _slots(cs), _slots(gates), _slots(d_gates)
            output_steps = _slots(d_output)
            total_steps = _slots(d_h_total) if d_h_total is not None else None
            d_h_view, d_c_view = d_h._view(), d_c._view()
            w_hh_view = w_hh._view()
            w_hr_view = w_hr._view() if w_hr is not None else None
            d_unprojected_view = d_unprojected._view() if d_unprojected is not None else None
            for step in reversed(steps.order()):
                rows = steps.sizes[step]
                previous, output = steps.previous_slot(step), steps.output_slot(step)
                d_h_rows = _rows(d_h_view, rows)
                if total_steps is not None:
                    # h = (the cell's h) @ w_hr.T: its gradient, then the cell's h's
                    total = _rows(total_steps[step], rows)
                    launch.elementwise(
                        add, [total], [_rows(output_steps[step], rows), d_h_rows], [hs.dtype] * 2
                    )
                    cell_h = _rows(d_unprojected_view, rows)
                    launch.matmul(cell_h, total, w_hr_view)
                    d_h_parts = [cell_h, 0.0]
                else:
                    d_h_parts = [_rows(output_steps[step], rows), d_h_rows]
                d_four = _rows(d_gate_steps[step], rows)
                d_c_rows = _rows(d_c_view, rows)
                launch.elementwise(
                    kernel,
                    [*_gates(d_four, 4), d_c_rows],
                    [
                        *d_h_parts,
                        d_c_rows,
                        *_gates(_rows(gate_steps[step], rows), 4),
                        _rows(c_slots[previous], rows),
                        _rows(c_slots[output], rows),
                    ],
                    compute,
                )
                launch.matmul(d_h_rows, d_four, w_hh_view)

        tensors = [cs, gates, d_gates, d_output, d_h, d_c, w_hh]
        tensors += [d_h_total, w_hr, d_unprojected] if w_hr is not None else []
        _time_loop(hs._backend, ("lstm backward", steps), tensors, body)
        needs = ctx.needs_input_grad
        dx, d_w_ih = _input_gradients(d_gates, x_flat, w_ih, ctx.x_shape, (needs[1], needs[4]))
        flat = _flat(d_gates)
        d_w_hh = flat.mT @ _flat(_previous_states(steps, hs)) if needs[5] else None
        d_bias = flat.sum(0) if needs[6] or needs[7] else None
        d_w_hr = _flat(d_h_total).mT @ _flat(unprojected) if needs[8] else None
        return None, dx, d_h, d_c, d_w_ih, d_w_hh, d_bias, d_bias, d_w_hr


# --- GRU ----------------------------------------------------------------------------------------
class _GRULayer(Function):
    """forward(steps, x, h0, w_ih, w_hh, b_ih, b_hh) -> (output, h_n)."""

    @staticmethod
    def forward(ctx, steps, x, h0, w_ih, w_hh, b_ih, b_hh):
        hidden = w_hh.shape[1]
        bias = None
        # n's hidden bias for a step of each size: a (rows, hidden) broadcast view, or 0
        bias_n: dict[int, Any] = dict.fromkeys(steps.sizes, 0.0)
        if b_ih is not None:
            # r's and z's hidden biases are plain sums: fold them into the projection
            no_bias = zeros((hidden,), dtype=x.dtype, device=x.device)
            bias = b_ih + cat([b_hh[: 2 * hidden], no_bias])
            for rows in bias_n:
                bias_n[rows] = b_hh[2 * hidden :]._broadcast_view((rows, hidden))
        x_flat, gates = _projection(x, w_ih, bias)  # becomes r, z, n
        hs = _state_buffer(steps, h0)
        hidden_n = empty((steps.count, steps.batch, hidden), dtype=x.dtype, device=x.device)
        hidden_part = empty((steps.batch, 3 * hidden), dtype=x.dtype, device=x.device)
        w_hh_t = w_hh.t().contiguous()
        compute = [x.dtype] * _gru_step.nin
        kernel = _gru_step.scalar_for(compute)

        def body(launch: Any) -> None:
            h_slots, gate_steps, n_steps = _slots(hs), _slots(gates), _slots(hidden_n)
            products, w_hh_view = hidden_part._view(), w_hh_t._view()
            for step in steps.order():
                rows = steps.sizes[step]
                previous, output = steps.previous_slot(step), steps.output_slot(step)
                product = _rows(products, rows)
                h_previous = _rows(h_slots[previous], rows)
                launch.matmul(product, h_previous, w_hh_view)
                three = _gates(_rows(gate_steps[step], rows), 3)
                launch.elementwise(
                    kernel,
                    [_rows(h_slots[output], rows), *three, _rows(n_steps[step], rows)],
                    [*three, *_gates(product, 3), bias_n[rows], h_previous],
                    compute,
                )

        tensors = [gates, hs, hidden_n, hidden_part, w_hh_t]
        tensors += [b_hh] if b_ih is not None else []
        _time_loop(x._backend, ("gru", steps, b_ih is not None), tensors, body)
        ctx.steps = steps
        ctx.x_shape = x.shape
        ctx.save_for_backward(x_flat, gates, hs, hidden_n, w_ih, w_hh)
        return _outputs(steps, hs), _final_state(steps, hs)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_output, d_h_n):
        steps = ctx.steps
        x_flat, gates, hs, hidden_n, w_ih, w_hh = ctx.saved_tensors
        d_inputs = _new(steps, gates.shape, gates)  # of the gates' input parts
        d_hidden = _new(steps, gates.shape, gates)  # of the gates' hidden parts
        d_h = d_h_n.clone()  # through the direct path (z * h)
        d_h_product = zeros(d_h.shape, dtype=hs.dtype, device=hs.device)  # through w_hh
        compute = [hs.dtype] * _gru_step_backward.nin
        kernel = _gru_step_backward.scalar_for(compute)

        def body(launch: Any) -> None:
            h_slots, gate_steps, n_steps = _slots(hs), _slots(gates), _slots(hidden_n)
            d_input_steps, d_hidden_steps = _slots(d_inputs), _slots(d_hidden)
            output_steps = _slots(d_output)
            d_h_view, product_view = d_h._view(), d_h_product._view()
            w_hh_view = w_hh._view()
            for step in reversed(steps.order()):
                rows = steps.sizes[step]
                d_h_rows, product = _rows(d_h_view, rows), _rows(product_view, rows)
                d_three = _rows(d_hidden_steps[step], rows)
                launch.elementwise(
                    kernel,
                    [*_gates(_rows(d_input_steps[step], rows), 3), *_gates(d_three, 3), d_h_rows],
                    [
                        _rows(output_steps[step], rows),
                        d_h_rows,
                        product,
                        *_gates(_rows(gate_steps[step], rows), 3),
                        _rows(n_steps[step], rows),
                        _rows(h_slots[steps.previous_slot(step)], rows),
                    ],
                    compute,
                )
                launch.matmul(product, d_three, w_hh_view)

        tensors = [hs, gates, hidden_n, d_inputs, d_hidden, d_output, d_h, d_h_product, w_hh]
        _time_loop(hs._backend, ("gru backward", steps), tensors, body)
        needs = ctx.needs_input_grad
        dx, d_w_ih = _input_gradients(d_inputs, x_flat, w_ih, ctx.x_shape, (needs[1], needs[3]))
        d_h0 = d_h + d_h_product if needs[2] else None
        flat = _flat(d_hidden)
        d_w_hh = flat.mT @ _flat(_previous_states(steps, hs)) if needs[4] else None
        d_b_ih = _flat(d_inputs).sum(0) if needs[5] else None
        d_b_hh = flat.sum(0) if needs[6] else None
        return None, dx, d_h0, d_w_ih, d_w_hh, d_b_ih, d_b_hh


# --- Elman RNN (tanh or relu) -------------------------------------------------------------------
class _ElmanLayer(Function):
    """forward(steps, relu, x, h0, w_ih, w_hh, b_ih, b_hh) -> (output, h_n)."""

    @staticmethod
    def forward(ctx, steps, relu, x, h0, w_ih, w_hh, b_ih, b_hh):
        bias = b_ih + b_hh if b_ih is not None else None
        x_flat, projected = _projection(x, w_ih, bias)
        hs = _state_buffer(steps, h0)
        hidden_part = empty((steps.batch, w_hh.shape[0]), dtype=x.dtype, device=x.device)
        w_hh_t = w_hh.t().contiguous()
        compute = [x.dtype] * 2
        kernel = (_relu_step if relu else _tanh_step).scalar_for(compute)

        def body(launch: Any) -> None:
            h_slots, projected_steps = _slots(hs), _slots(projected)
            products, w_hh_view = hidden_part._view(), w_hh_t._view()
            for step in steps.order():
                rows = steps.sizes[step]
                product = _rows(products, rows)
                previous = _rows(h_slots[steps.previous_slot(step)], rows)
                launch.matmul(product, previous, w_hh_view)
                launch.elementwise(
                    kernel,
                    [_rows(h_slots[steps.output_slot(step)], rows)],
                    [_rows(projected_steps[step], rows), product],
                    compute,
                )

        tensors = [projected, hs, hidden_part, w_hh_t]
        _time_loop(x._backend, ("elman", steps, relu), tensors, body)
        ctx.steps = steps
        ctx.relu = relu
        ctx.x_shape = x.shape
        ctx.save_for_backward(x_flat, hs, w_ih, w_hh)
        return _outputs(steps, hs), _final_state(steps, hs)

    @staticmethod
    @once_differentiable
    def backward(ctx, d_output, d_h_n):
        steps = ctx.steps
        x_flat, hs, w_ih, w_hh = ctx.saved_tensors
        d_gates = _new(steps, (steps.count, steps.batch, w_hh.shape[0]), hs)
        d_h = d_h_n.clone()
        compute = [hs.dtype] * 3
        kernel = (_relu_step_backward if ctx.relu else _tanh_step_backward).scalar_for(compute)

        def body(launch: Any) -> None:
            h_slots, d_gate_steps, output_steps = _slots(hs), _slots(d_gates), _slots(d_output)
            d_h_view, w_hh_view = d_h._view(), w_hh._view()
            for step in reversed(steps.order()):
                rows = steps.sizes[step]
                d_step, d_h_rows = _rows(d_gate_steps[step], rows), _rows(d_h_view, rows)
                launch.elementwise(
                    kernel,
                    [d_step],
                    [
                        _rows(output_steps[step], rows),
                        d_h_rows,
                        _rows(h_slots[steps.output_slot(step)], rows),
                    ],
                    compute,
                )
                launch.matmul(d_h_rows, d_step, w_hh_view)

        tensors = [hs, d_gates, d_output, d_h, w_hh]
        _time_loop(hs._backend, ("elman backward", steps, ctx.relu), tensors, body)
        needs = ctx.needs_input_grad
        dx, d_w_ih = _input_gradients(d_gates, x_flat, w_ih, ctx.x_shape, (needs[2], needs[4]))
        flat = _flat(d_gates)
        d_w_hh = flat.mT @ _flat(_previous_states(steps, hs)) if needs[5] else None
        d_bias = flat.sum(0) if needs[6] or needs[7] else None
        return None, None, dx, d_h if needs[3] else None, d_w_ih, d_w_hh, d_bias, d_bias


def run_layer(
    mode: str,
    steps: Steps,
    x: Tensor,
    h0: Tensor,
    c0: Tensor | None,
    weights: tuple[Tensor | None, ...],
) -> tuple[Tensor, Tensor, Tensor | None]:
    """One layer and direction over ``x`` (steps, batch, input): (output, h_n, c_n), each
    state with the rows of ``h0``. ``weights`` are (w_ih, w_hh, b_ih, b_hh, w_hr), the
    biases and ``w_hr`` None where the layer has none."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    if mode == "LSTM":
        return _LSTMLayer.apply(steps, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
    if mode == "GRU":
        output, h_n = _GRULayer.apply(steps, x, h0, w_ih, w_hh, b_ih, b_hh)
    else:
        relu = mode == "RNN_RELU"
        output, h_n = _ElmanLayer.apply(steps, relu, x, h0, w_ih, w_hh, b_ih, b_hh)
    return output, h_n, None
