"""Small trained networks as functions that ``@kg.kernel`` code calls per work item.

:func:`device_function` turns a ``Sequential`` of ``Linear`` layers and elementwise
activations into the source of one plain Python function, ``net(x, out)``: it reads one
input vector ``x`` and writes one output vector ``out``. The source is written to a
content-hashed file (:mod:`kernelgrad.codecache`) and imported, so the function has a
real source file; a kernel that calls it copies that source into its own generated
module and compiles it for the kernel's device (``numba.njit`` on the CPU,
``numba.cuda.jit(device=True)`` on CUDA), as it does for any helper function. The
network's evaluation is then ordinary inlined code inside the kernel, and it is cached on
disk with the kernel.

Two ways to hold the weights:

* ``weights="constants"``: every weight is a number literal in straight-line code
  (one statement per unit). Nothing is read from memory but the input; the compiler
  folds the constants into the instructions. Compile time grows with the number of
  weights, and a change of weights is a new function (and a new kernel compile).
* ``weights="arrays"``: loops over a flat weight vector passed to the kernel as an
  argument, ``net(weights, x, out)``; hidden activations live in two ``kg.private``
  arrays. The code depends only on the layer sizes: it compiles once per architecture,
  quickly at any width, and the weights can change between launches
  (:meth:`pack_weights`).

See ``docs/device-functions.md`` for the measured trade-off and the examples.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import codecache
from ..dtypes import DType, float32, float64
from ..errors import ShapeError
from .activation import (
    GELU,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from .container import Sequential
from .dropout import Dropout
from .linear import Flatten, Identity, LazyLinear, Linear
from .module import Module
from .normalization import BatchNorm1d

__all__ = ["SUPPORTED_LAYERS", "UnsupportedLayerError", "device_function"]

WEIGHT_MODES = ("constants", "arrays")

#: What :func:`device_function` understands, for error messages and the documentation.
SUPPORTED_LAYERS = (
    "Linear (with or without bias)",
    "ReLU, Tanh, Sigmoid, GELU (approximate='none' or 'tanh'), SiLU, LeakyReLU, Softplus",
    "Softmax and LogSoftmax over the features (dim=-1 or 1)",
    "BatchNorm1d with running statistics (its inference form: a per-feature scale and shift)",
    "Identity, Dropout (the identity at inference), Flatten() of a vector",
    "nested Sequential containers of these",
)

# Above this many weights, constants mode is refused: straight-line code compiles slowly
# (measured for 1,640 weights: about 7 s on the CPU, 40 s or more for CUDA with NVVM).
MAX_CONSTANT_WEIGHTS = 4096
_TERMS_PER_STATEMENT = 8


class UnsupportedLayerError(TypeError):
    """A model given to :func:`device_function` contains a layer it cannot compile."""


# --- the network as a list of stages -----------------------------------------------------------
@dataclass
class _Affine:
    """``out = weight @ in + bias`` (``Linear``)."""

    name: str
    weight: np.ndarray  # (out, in)
    bias: np.ndarray | None  # (out,)

    uses = "takes"  # what the layer does with its input features, for error messages

    @property
    def sizes(self) -> tuple[int, int]:
        """(input features, output features)."""
        out_size, in_size = self.weight.shape
        return in_size, out_size


@dataclass
class _Scale:
    """``out[j] = in[j] * scale[j] + shift[j]`` (``BatchNorm1d`` at inference)."""

    name: str
    scale: np.ndarray
    shift: np.ndarray

    uses = "normalises"

    @property
    def sizes(self) -> tuple[int, int]:
        return self.scale.shape[0], self.scale.shape[0]


@dataclass
class _Pointwise:
    """An activation: the same scalar function of every feature.

    ``render(v, c)`` returns the expression for one value named ``v``; ``c(number)``
    renders a number literal in the compute dtype."""

    name: str
    render: Callable[[str, Callable[[float], str]], str]
    key: tuple  # what the generated code depends on (hyperparameters)


@dataclass
class _Normalize:
    """Softmax or log-softmax over the whole vector."""

    name: str
    log: bool


@dataclass
class _Network:
    stages: list[Any]
    in_features: int
    out_features: int
    dtype: DType
    description: str
    widths: list[int] = field(default_factory=list)  # width after each stage


def _relu(v: str, c: Callable[[float], str]) -> str:
    return f"({c(0.0)} if {v} <= {c(0.0)} else {v})"


def _tanh(v: str, c: Callable[[float], str]) -> str:
    return f"math.tanh({v})"


def _sigmoid(v: str, c: Callable[[float], str]) -> str:
    return f"{c(1.0)} / ({c(1.0)} + math.exp(-{v}))"


def _silu(v: str, c: Callable[[float], str]) -> str:
    return f"{v} / ({c(1.0)} + math.exp(-{v}))"


def _gelu(v: str, c: Callable[[float], str]) -> str:
    return f"{c(0.5)} * {v} * ({c(1.0)} + math.erf({v} * {c(0.7071067811865476)}))"


def _gelu_tanh(v: str, c: Callable[[float], str]) -> str:
    inner = f"({v} + {v} * {v} * {v} * {c(0.044715)}) * {c(math.sqrt(2.0 / math.pi))}"
    return f"{v} * {c(0.5)} * (math.tanh({inner}) + {c(1.0)})"


def _leaky(slope: float) -> Callable[[str, Callable[[float], str]], str]:
    def render(v: str, c: Callable[[float], str]) -> str:
        return f"({v} if {v} > {c(0.0)} else {v} * {c(slope)})"

    return render


def _softplus(beta: float, threshold: float) -> Callable[[str, Callable[[float], str]], str]:
    # as kg.nn.functional.softplus: linear above the threshold, else a stable log1p(exp)
    def render(v: str, c: Callable[[float], str]) -> str:
        scaled = v if beta == 1.0 else f"({v} * {c(beta)})"
        smooth = (
            f"(math.log1p(math.exp(-abs({scaled}))) "
            f"+ ({c(0.0)} if {scaled} <= {c(0.0)} else {scaled}))"
        )
        if beta != 1.0:
            smooth = f"{smooth} / {c(beta)}"
        return f"({v} if {scaled} > {c(threshold)} else {smooth})"

    return render


def _numpy(tensor: Any) -> np.ndarray:
    host = tensor.detach().cpu()
    return host.numpy().copy()  # a copy taken while ``host`` (maybe a temporary) lives


def _flatten_modules(module: Module, prefix: str) -> list[tuple[str, Module]]:
    if isinstance(module, Sequential):
        found = []
        for name, child in module.named_children():
            found += _flatten_modules(child, f"{prefix}.{name}" if prefix else name)
        return found
    return [(prefix or type(module).__name__, module)]


def _unsupported(name: str, module: Module, why: str) -> UnsupportedLayerError:
    supported = "; ".join(SUPPORTED_LAYERS)
    return UnsupportedLayerError(
        f"device_function: layer {name!r} ({type(module).__name__}) {why}. Supported: "
        f"{supported}. Compute other layers outside the kernel (a batched forward before or "
        "after it), or write the computation as a plain helper function the kernel calls"
    )


def _stage_of(name: str, module: Module) -> Any:
    """The stage for one leaf module; None for layers that are the identity."""
    if isinstance(module, LazyLinear):  # still a placeholder: no weights to bake in
        raise _unsupported(
            name, module, "has not seen an input yet (call it once, or load a state dict)"
        )
    if isinstance(module, Linear):
        bias = None if module.bias is None else _numpy(module.bias)
        return _Affine(name, _numpy(module.weight), bias)
    if isinstance(module, (Identity, Dropout)):
        return None
    if isinstance(module, Flatten):
        if module.start_dim in (1, -1) and module.end_dim == -1:
            return None  # flattening a (batch, features) input does nothing
        raise _unsupported(
            name, module, f"flattens dims {module.start_dim}..{module.end_dim} of its input"
        )
    if isinstance(module, ReLU):
        return _Pointwise(name, _relu, ("relu",))
    if isinstance(module, Tanh):
        return _Pointwise(name, _tanh, ("tanh",))
    if isinstance(module, Sigmoid):
        return _Pointwise(name, _sigmoid, ("sigmoid",))
    if isinstance(module, SiLU):
        return _Pointwise(name, _silu, ("silu",))
    if isinstance(module, GELU):
        if module.approximate == "tanh":
            return _Pointwise(name, _gelu_tanh, ("gelu_tanh",))
        return _Pointwise(name, _gelu, ("gelu",))
    if isinstance(module, LeakyReLU):
        slope = float(module.negative_slope)
        return _Pointwise(name, _leaky(slope), ("leaky_relu", slope))
    if isinstance(module, Softplus):
        beta, threshold = float(module.beta), float(module.threshold)
        return _Pointwise(name, _softplus(beta, threshold), ("softplus", beta, threshold))
    if isinstance(module, (Softmax, LogSoftmax)):
        if module.dim not in (-1, 1):
            raise _unsupported(
                name, module, f"normalises over dim={module.dim}, not over the features"
            )
        return _Normalize(name, isinstance(module, LogSoftmax))
    if isinstance(module, BatchNorm1d):
        if module.running_mean is None or module.running_var is None:
            raise _unsupported(
                name, module, "has no running statistics (track_running_stats=False)"
            )
        mean = _numpy(module.running_mean).astype(np.float64)
        var = _numpy(module.running_var).astype(np.float64)
        scale = 1.0 / np.sqrt(var + module.eps)
        shift = -mean * scale
        if module.weight is not None:
            gamma = _numpy(module.weight).astype(np.float64)
            scale, shift = scale * gamma, shift * gamma
        if module.bias is not None:
            shift = shift + _numpy(module.bias).astype(np.float64)
        return _Scale(name, scale, shift)
    raise _unsupported(name, module, "is not supported inside kernels")


def _analyse(model: Module) -> _Network:
    if not isinstance(model, Module):
        raise TypeError(
            f"device_function expects a kg.nn.Module (a Sequential of Linear layers and "
            f"activations), got {type(model).__name__}"
        )
    stages = []
    for name, module in _flatten_modules(model, ""):
        stage = _stage_of(name, module)
        if stage is not None:
            stages.append(stage)

    dtypes = {p.dtype for p in model.parameters()}
    if not dtypes:
        raise UnsupportedLayerError(
            "device_function: the model has no Linear layer (no parameters): there is "
            "nothing to fix the input and output sizes"
        )
    if len(dtypes) > 1 or next(iter(dtypes)) not in (float32, float64):
        raise TypeError(
            "device_function: all parameters must be float32 or all float64, got "
            f"{sorted(str(d) for d in dtypes)}; convert the model with model.float() or "
            "model.double()"
        )
    dtype = next(iter(dtypes))

    width: int | None = None
    widths = []
    for stage in stages:
        if isinstance(stage, (_Affine, _Scale)):
            in_size, out_size = stage.sizes
            if width is not None and width != in_size:
                raise ShapeError(
                    f"device_function: layer {stage.name!r} {stage.uses} {in_size} features "
                    f"but the layers before it produce {width}"
                )
            if width is None:
                widths = [in_size] * len(widths)
            width = out_size
        widths.append(width)
    if not any(isinstance(s, _Affine) for s in stages):
        raise UnsupportedLayerError(
            "device_function: the model has no Linear layer: there is nothing to fix the "
            "input and output sizes"
        )
    first = next(s for s in stages if isinstance(s, (_Affine, _Scale)))
    in_features = first.sizes[0]
    description = repr(model).replace("\n", "\n    ")
    return _Network(stages, in_features, widths[-1], dtype, description, widths)


# --- source generation --------------------------------------------------------------------------
def _number_renderer(dtype: DType) -> Callable[[float], str]:
    """Number literals in the compute dtype: float32 literals are ``np.float32(...)`` of
    the exact float64 value of the float32 number (so there is no double rounding)."""
    if dtype == float32:

        def render(value: float) -> str:
            return f"np.float32({float(np.float32(value))!r})"

        return render
    return lambda value: repr(float(value))


def _sum_statements(target: str, first: str, terms: list[str], indent: str) -> list[str]:
    """``target = first + t0 + t1 + ...`` split into statements of a few terms each (a
    long expression nests deeply in Python's parser)."""
    lines = []
    chunks = [
        terms[i : i + _TERMS_PER_STATEMENT] for i in range(0, len(terms), _TERMS_PER_STATEMENT)
    ]
    if not chunks:
        return [f"{indent}{target} = {first}"]
    lines.append(f"{indent}{target} = {' + '.join([first] + chunks[0])}")
    for chunk in chunks[1:]:
        lines.append(f"{indent}{target} += {' + '.join(chunk)}")
    return lines


def _docstring(network: _Network, mode: str, signature: str) -> list[str]:
    reads = f"x[0:{network.in_features}]"
    writes = f"out[0:{network.out_features}]"
    where = "as constants" if mode == "constants" else "read from the flat vector `weights`"
    return [
        '    """Generated by kernelgrad.nn.device_function -- do not edit.',
        "",
        f"    {signature}: reads {reads}, writes {writes}, in {network.dtype.name}; weights",
        f"    {where}. The network:",
        "",
        f"    {network.description}",
        '    """',
    ]


def _constants_source(network: _Network, name: str) -> str:
    c = _number_renderer(network.dtype)
    cast = f"np.{network.dtype.name}"
    lines = [f"def {name}(x, out):"]
    lines += _docstring(network, "constants", f"{name}(x, out)")
    current = [f"v{k}" for k in range(network.in_features)]
    for k, variable in enumerate(current):
        lines.append(f"    {variable} = {cast}(x[{k}])")
    for index, stage in enumerate(network.stages):
        lines.append(f"    # {stage.name}: {_stage_label(stage)}")
        if isinstance(stage, _Affine):
            produced = []
            for j in range(stage.weight.shape[0]):
                target = f"h{index}_{j}"
                first = c(stage.bias[j]) if stage.bias is not None else c(0.0)
                terms = [f"{c(w)} * {v}" for w, v in zip(stage.weight[j], current)]
                lines += _sum_statements(target, first, terms, "    ")
                produced.append(target)
        elif isinstance(stage, _Scale):
            produced = [f"h{index}_{j}" for j in range(len(current))]
            for j, (target, v) in enumerate(zip(produced, current)):
                lines.append(f"    {target} = {v} * {c(stage.scale[j])} + {c(stage.shift[j])}")
        elif isinstance(stage, _Pointwise):
            produced = [f"h{index}_{j}" for j in range(len(current))]
            for target, v in zip(produced, current):
                lines.append(f"    {target} = {stage.render(v, c)}")
        else:  # _Normalize
            top, total = f"m{index}", f"s{index}"
            lines.append(f"    {top} = {current[0]}")
            for v in current[1:]:
                lines.append(f"    {top} = {v} if {v} > {top} else {top}")
            exps = [f"math.exp({v} - {top})" for v in current]
            lines += _sum_statements(total, exps[0], exps[1:], "    ")
            produced = [f"h{index}_{j}" for j in range(len(current))]
            for target, v in zip(produced, current):
                if stage.log:
                    lines.append(f"    {target} = {v} - {top} - math.log({total})")
                else:
                    lines.append(f"    {target} = math.exp({v} - {top}) / {total}")
        current = produced
    for j, variable in enumerate(current):
        lines.append(f"    out[{j}] = {variable}")
    return "\n".join(lines) + "\n"


@dataclass
class _Layout:
    """Where each stage's numbers sit in the flat weight vector of the arrays mode."""

    offsets: list[tuple[int, ...]]  # per stage: (weight, bias) / (scale, shift) / ()
    size: int


def _layout(network: _Network) -> _Layout:
    offsets = []
    position = 0
    for stage in network.stages:
        if isinstance(stage, _Affine):
            out_size, in_size = stage.weight.shape
            bias = position + out_size * in_size if stage.bias is not None else -1
            offsets.append((position, bias))
            position += out_size * in_size + (out_size if stage.bias is not None else 0)
        elif isinstance(stage, _Scale):
            size = stage.scale.shape[0]
            offsets.append((position, position + size))
            position += 2 * size
        else:
            offsets.append(())
    return _Layout(offsets, position)


def _flat_weights(network: _Network) -> np.ndarray:
    parts = []
    for stage in network.stages:
        if isinstance(stage, _Affine):
            parts.append(stage.weight.reshape(-1))
            if stage.bias is not None:
                parts.append(stage.bias)
        elif isinstance(stage, _Scale):
            parts += [stage.scale, stage.shift]
    flat = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in parts])
    return flat.astype(network.dtype.numpy)


def _groups(stages: list[Any]) -> list[list[int]]:
    """Stage indices grouped into loops: a Linear or a scale-and-shift together with the
    activations that follow it (applied before the store), or a lone stage."""
    groups: list[list[int]] = []
    for index, stage in enumerate(stages):
        if (
            isinstance(stage, _Pointwise)
            and groups
            and isinstance(stages[groups[-1][0]], (_Affine, _Scale, _Pointwise))
        ):
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def _arrays_source(network: _Network, name: str) -> str:
    c = _number_renderer(network.dtype)
    dtype_name = f"np.{network.dtype.name}"
    layout = _layout(network)
    width = max([network.in_features] + network.widths)
    lines = [f"def {name}(weights, x, out):"]
    lines += _docstring(network, "arrays", f"{name}(weights, x, out)")
    lines.append(f"    a = kg.private({width}, {dtype_name})")
    lines.append(f"    b = kg.private({width}, {dtype_name})")
    # ``source`` is where the current vector is: the input, or one of the two buffers
    source, size = "x", network.in_features
    groups = _groups(network.stages)

    def element(vector: str, index: str) -> str:
        return f"{dtype_name}(x[{index}])" if vector == "x" else f"{vector}[{index}]"

    for number, group in enumerate(groups):
        head = network.stages[group[0]]
        activations = [network.stages[i] for i in group[1:]]
        for i in group:
            stage = network.stages[i]
            lines.append(f"    # {stage.name}: {_stage_label(stage)}")
        if number == len(groups) - 1:
            target = "out"
        elif isinstance(head, (_Pointwise, _Scale)) and source != "x":
            target = source  # elementwise work is done in place
        else:
            target = "b" if source == "a" else "a"
        finish = [f"        v = {a.render('v', c)}" for a in activations]
        if isinstance(head, _Affine):
            out_size, in_size = head.weight.shape
            weight_at, bias_at = layout.offsets[group[0]]
            first = f"weights[{bias_at} + j]" if bias_at >= 0 else c(0.0)
            lines += [
                f"    for j in range({out_size}):",
                f"        v = {first}",
                f"        for k in range({in_size}):",
                f"            v += weights[{weight_at} + j * {in_size} + k] * "
                f"{element(source, 'k')}",
                *finish,
                f"        {target}[j] = v",
            ]
            size = out_size
        elif isinstance(head, _Scale):
            scale_at, shift_at = layout.offsets[group[0]]
            lines += [
                f"    for j in range({size}):",
                f"        v = {element(source, 'j')} * weights[{scale_at} + j] "
                f"+ weights[{shift_at} + j]",
                *finish,
                f"        {target}[j] = v",
            ]
        elif isinstance(head, _Pointwise):
            lines += [
                f"    for j in range({size}):",
                f"        v = {element(source, 'j')}",
                f"        v = {head.render('v', c)}",
                *finish,
                f"        {target}[j] = v",
            ]
        else:  # _Normalize
            lines += [
                f"    top = {element(source, '0')}",
                f"    for j in range(1, {size}):",
                f"        v = {element(source, 'j')}",
                "        if v > top:",
                "            top = v",
                f"    total = {c(0.0)}",
                f"    for j in range({size}):",
                f"        total += math.exp({element(source, 'j')} - top)",
            ]
            if head.log:
                lines += [
                    "    shift = top + math.log(total)",
                    f"    for j in range({size}):",
                    f"        {target}[j] = {element(source, 'j')} - shift",
                ]
            else:
                lines += [
                    f"    for j in range({size}):",
                    f"        {target}[j] = math.exp({element(source, 'j')} - top) / total",
                ]
        source = target
    return "\n".join(lines) + "\n"


def _stage_label(stage: Any) -> str:
    if isinstance(stage, _Affine):
        out_size, in_size = stage.weight.shape
        bias = "" if stage.bias is not None else ", no bias"
        return f"Linear({in_size} -> {out_size}{bias})"
    if isinstance(stage, _Scale):
        return f"per-feature scale and shift ({stage.scale.shape[0]} features)"
    if isinstance(stage, _Pointwise):
        return " ".join(str(part) for part in stage.key)
    return "log_softmax" if stage.log else "softmax"


def _structure(network: _Network) -> tuple:
    """What the arrays-mode code depends on: sizes, biases and activation settings."""
    key: list[Any] = [network.dtype.name, network.in_features]
    for stage in network.stages:
        if isinstance(stage, _Affine):
            key.append(("linear", stage.weight.shape, stage.bias is not None))
        elif isinstance(stage, _Scale):
            key.append(("scale", stage.scale.shape[0]))
        elif isinstance(stage, _Pointwise):
            key.append(stage.key)
        else:
            key.append(("log_softmax" if stage.log else "softmax",))
    return tuple(key)


_MODULE_HEADER = '''"""Generated by kernelgrad.nn.device_function -- do not edit."""
import math

import numpy as np

import kernelgrad as kg


'''


def _check_name(name: str) -> None:
    if not name.isidentifier() or name.startswith("_kg_"):
        raise ValueError(
            f"device_function: name must be a Python identifier not starting with '_kg_', "
            f"got {name!r}"
        )


def device_function(
    model: Module,
    *,
    weights: str = "constants",
    name: str = "network",
) -> Any:
    """Compile a small trained network into a function callable inside ``@kg.kernel``.

    ``model`` is a ``kg.nn.Sequential`` (or a single layer) of ``Linear`` layers and
    elementwise activations; :data:`SUPPORTED_LAYERS` lists what is understood, and any
    other layer raises :class:`UnsupportedLayerError` naming it. The network is always
    evaluated as at inference (dropout off, batch norm with its running statistics),
    in the dtype of its parameters (float32 or float64).

    ``weights="constants"`` (default) returns ``net(x, out)`` with the weights written
    into the code as constants; ``weights="arrays"`` returns ``net(weights, x, out)``,
    a loop over a flat weight vector that the kernel receives as an argument
    (``net.weights``, or ``net.pack_weights(model)`` after more training). In both, ``x``
    is one input vector (``x[0:in_features]`` is read, any float dtype) and ``out`` one
    output vector (``out[0:out_features]`` is written): rows of tensors (``inputs[i, :]``)
    or ``kg.private`` arrays.

    >>> import kernelgrad as kg
    >>> model = kg.nn.Sequential(kg.nn.Linear(3, 8), kg.nn.Tanh(), kg.nn.Linear(8, 2))
    >>> net = kg.nn.device_function(model)
    >>> @kg.kernel
    ... def evaluate(out, inputs):
    ...     i = kg.index()
    ...     net(inputs[i, :], out[i, :])
    >>> inputs = kg.randn(5, 3)
    >>> out = kg.zeros(5, 2)
    >>> evaluate(out, inputs, ndrange=5)
    >>> bool((out - model(inputs)).abs().max() < 1e-5)
    True

    The returned object is a plain function (its source is in ``net.source``) with
    these attributes: ``in_features``, ``out_features``, ``dtype``, ``weights_mode``,
    ``num_weights``, and in arrays mode ``weights`` (a 1-D tensor on the model's device)
    and ``pack_weights(model)``. Define it before the kernels that call it: a kernel
    reads the functions it calls when it is decorated.
    """
    if weights not in WEIGHT_MODES:
        raise ValueError(
            f"device_function: weights must be 'constants' or 'arrays', got {weights!r}"
        )
    _check_name(name)
    network = _analyse(model)
    count = sum(
        s.weight.size + (0 if s.bias is None else s.bias.size)
        for s in network.stages
        if isinstance(s, _Affine)
    )
    if weights == "constants" and count > MAX_CONSTANT_WEIGHTS:
        raise ValueError(
            f"device_function: the model has {count} weights; as constants (one literal "
            f"each, more than MAX_CONSTANT_WEIGHTS = {MAX_CONSTANT_WEIGHTS}) the code would "
            "take minutes to compile (1,640 weights: about 7 s on the CPU, 40 s for CUDA). "
            "Use weights='arrays' (loops over a weight vector: compiled in about a second at "
            "any width), or raise kernelgrad.nn.device_functions.MAX_CONSTANT_WEIGHTS"
        )
    if weights == "constants":
        body = _constants_source(network, name)
    else:
        body = _arrays_source(network, name)
    source = _MODULE_HEADER + body
    module = codecache.load_module(source, f"devfn_{name}")
    generated = getattr(module, name)
    # A fresh function object per call: two models with the same architecture share
    # the arrays-mode module, but each result keeps its own attributes (weights).
    fn = types.FunctionType(generated.__code__, generated.__globals__, name, generated.__defaults__)
    fn.__doc__ = generated.__doc__
    fn.__qualname__ = name
    fn.__module__ = generated.__module__
    fn.source = body
    fn.in_features = network.in_features
    fn.out_features = network.out_features
    fn.dtype = network.dtype
    fn.weights_mode = weights
    fn.num_weights = count
    fn.layers = tuple(f"{s.name}: {_stage_label(s)}" for s in network.stages)
    fn.weights = None
    if weights == "arrays":
        structure = _structure(network)
        device = next(iter(model.parameters())).device

        def pack_weights(trained: Module, device: Any = device) -> Any:
            """The flat weight vector of ``trained`` (same architecture) as a 1-D tensor
            on ``device`` (the model's device by default), to pass to the kernel."""
            other = _analyse(trained)
            if _structure(other) != structure:
                raise ShapeError(
                    f"pack_weights: the model's architecture differs from the one this "
                    f"device function was generated for ({', '.join(fn.layers)}); generate "
                    "a new one with kg.nn.device_function"
                )
            from ..ops.creation import tensor

            return tensor(_flat_weights(other), dtype=network.dtype, device=device)

        fn.pack_weights = pack_weights
        fn.weights = pack_weights(model)
    return fn
