"""``@kg.elementwise``: a function of numbers becomes one fused elementwise operation.

>>> import kernelgrad as kg
>>> @kg.elementwise
... def soft_clip(x, limit):
...     return limit * kg.tanh(x / limit)
>>> y = soft_clip(kg.tensor([0.5, 30.0], requires_grad=True), 2.0)
>>> [round(v, 4) for v in y.tolist()]
[0.4898, 2.0]

The function is traced once with symbolic placeholders (see :mod:`.symbolic`); the
trace becomes the source of a scalar function that every backend compiles into its
elementwise kernel, so the whole expression runs as one kernel on any device,
broadcasting its tensor arguments. Its gradient is derived from the trace and runs as
one fused kernel too.

A function whose Python control flow depends on its arguments (``if x > 0:``) cannot be
traced. It still compiles, from its source as written, but it is not differentiable
unless given a backward with :meth:`ElementwiseFunction.defvjp`.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from .. import autograd
from ..backends.base import ScalarFunction
from ..dtypes import DType, as_dtype, bool_, default_float, int64, promote_types
from ..errors import BackwardError, KernelError
from . import symbolic
from .symbolic import BOOL, FLOAT, INT
from .transform import _KG_MATH

_CATEGORY_NAMES = {BOOL: "bool", INT: "integer", FLOAT: "floating point"}


def _category(value: Any) -> int:
    dtype = getattr(value, "dtype", None)
    if isinstance(dtype, DType):
        return dtype.category
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    return FLOAT


class ElementwiseFunction:
    """A scalar function applied elementwise to broadcast tensors. See the module
    docstring; create one with ``@kg.elementwise``."""

    def __init__(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        dtype: Any = None,
        name: str | None = None,
        graph: symbolic.Graph | None = None,
        outputs: Sequence[int] | None = None,
        nin: int | None = None,
    ) -> None:
        self.fn = fn
        self.dtype = as_dtype(dtype) if dtype is not None else None
        self.trace_error: str | None = None
        self._custom: ElementwiseFunction | None = None
        self._grad_functions: dict[Any, ElementwiseFunction] = {}
        if fn is not None:
            functools.update_wrapper(self, fn)
            self.name = name or fn.__name__
            parameters = inspect.signature(fn).parameters.values()
            if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters):
                raise TypeError(
                    f"elementwise function '{self.name}' must take plain positional arguments"
                )
            self.nin = len(inspect.signature(fn).parameters)
            try:
                self.graph, self.outputs = symbolic.trace(fn, self.nin)
            except symbolic.UntraceableError as error:
                self.graph, self.outputs = None, []
                self.trace_error = f"{error}{_user_line(error, fn)}"
            except Exception as error:  # an error of the user's code on placeholders
                self.graph, self.outputs = None, []
                self.trace_error = f"tracing raised {type(error).__name__}: {error}"
        else:
            assert graph is not None and outputs is not None and nin is not None
            self.name = name or "elementwise"
            self.nin = nin
            self.graph, self.outputs = graph, list(outputs)
        identifier = "".join(c if c.isalnum() else "_" for c in self.name)
        self.function_name = f"ew_{identifier}"
        self._scalars: dict[Any, ScalarFunction] = {}
        if self.graph is not None:
            self.nout = len(self.outputs)
            text = symbolic.source(self.graph, self.outputs, self.nin, self.function_name)
        else:
            text, self.nout = _source_from_python(self, self.function_name)
        # the source as traced (untyped literals); calls use a typed variant
        self.scalar = ScalarFunction(self.function_name, text, self.nin, self.nout)

    def scalar_for(self, compute: Sequence[DType]) -> ScalarFunction:
        """The scalar function for these compute dtypes: floating-point values are kept
        in the inputs' float type (float32 stays float32 throughout)."""
        if self.graph is None:
            return self.scalar
        float_dtypes = [d for d in compute if d.is_floating_point]
        float_type = (
            "float64"
            if any(d.name == "float64" for d in float_dtypes)
            else (default_float().name if not float_dtypes else "float32")
        )
        key = (tuple(d.category for d in compute), float_type)
        scalar = self._scalars.get(key)
        if scalar is None:
            text = symbolic.source(
                self.graph, self.outputs, self.nin, self.function_name, key[0], float_type
            )
            scalar = self._scalars[key] = ScalarFunction(
                self.function_name, text, self.nin, self.nout
            )
        return scalar

    def __repr__(self) -> str:
        traced = "traced" if self.graph is not None else "not traceable"
        return f"<kg.elementwise {self.name}: {self.nin} in, {self.nout} out, {traced}>"

    @property
    def differentiable(self) -> bool:
        return self.graph is not None or self._custom is not None

    def defvjp(self, vjp: Callable[..., Any]) -> Callable[..., Any]:
        """Give the function a backward: ``vjp(*inputs, *grad_outputs)`` returns one
        gradient per input (a number expression, like the function itself); it is
        compiled as an elementwise function too.

        >>> import kernelgrad as kg
        >>> @kg.elementwise
        ... def step(x):
        ...     if x > 0:
        ...         return x
        ...     return 0.1 * x
        >>> @step.defvjp
        ... def step_vjp(x, grad):
        ...     return kg.where(x > 0, grad, 0.1 * grad)
        """
        custom = vjp if isinstance(vjp, ElementwiseFunction) else ElementwiseFunction(vjp)
        if custom.nin != self.nin + self.nout:
            raise TypeError(
                f"the backward of '{self.name}' must take {self.nin} inputs and "
                f"{self.nout} output gradient(s) ({self.nin + self.nout} arguments), "
                f"but it takes {custom.nin}"
            )
        if custom.nout != self.nin:
            raise TypeError(
                f"the backward of '{self.name}' must return one gradient per input "
                f"({self.nin}), but it returns {custom.nout}"
            )
        self._custom = custom
        return vjp

    # --- dtypes -----------------------------------------------------------------------------
    def _dtypes(self, operands: Sequence[Any]) -> tuple[list[DType], list[DType]]:
        widest: dict[int, DType] = {}
        for x in operands:
            dtype = getattr(x, "dtype", None)
            if isinstance(dtype, DType):
                c = dtype.category
                widest[c] = dtype if c not in widest else promote_types(widest[c], dtype)
        defaults = {BOOL: bool_, INT: int64, FLOAT: default_float()}
        compute = []
        for x in operands:
            dtype = getattr(x, "dtype", None)
            if isinstance(dtype, DType):
                compute.append(dtype)
            else:
                c = _category(x)
                compute.append(widest.get(c, defaults[c]))
        if self.dtype is not None:
            return compute, [self.dtype] * self.nout
        if self.graph is None:
            best = max(d.category for d in compute)
            out = widest.get(FLOAT, default_float()) if best <= FLOAT else default_float()
            return compute, [out] * self.nout
        float_dtype = default_float()
        for d in compute:
            if d.is_floating_point:
                float_dtype = promote_types(float_dtype, d) if d is not float_dtype else d
        if FLOAT in widest:
            float_dtype = widest[FLOAT]
        categories = symbolic.categories(self.graph, [d.category for d in compute])
        out = []
        for node in self.outputs:
            c = categories[node]
            if c == FLOAT:
                out.append(float_dtype)
            elif c == INT:
                out.append(widest.get(INT, int64))
            else:
                out.append(bool_)
        return compute, out

    # --- calling ----------------------------------------------------------------------------
    def __call__(self, *operands: Any) -> Any:
        from ..ops.elementwise import _as_operand, _common_device
        from ..shapes import broadcast_shapes
        from ..tensor import Tensor

        if len(operands) != self.nin:
            raise TypeError(
                f"elementwise function '{self.name}' takes {self.nin} arguments, got "
                f"{len(operands)}"
            )
        values = [_as_operand(x, self.name) for x in operands]
        tensors = [x for x in values if isinstance(x, Tensor)]
        if not tensors:
            from ..ops.creation import tensor

            values[0] = tensor(values[0])
            tensors = [values[0]]
        device = _common_device(self.name, tensors)
        shape = broadcast_shapes(*(t.shape for t in tensors), op=self.name)
        compute, out_dtypes = self._dtypes(values)
        results = [Tensor._empty(shape, dtype, device) for dtype in out_dtypes]
        inputs = [x._broadcast_view(shape) if isinstance(x, Tensor) else x for x in values]
        results[0]._backend.elementwise(
            self.scalar_for(compute), [r._view() for r in results], inputs, compute
        )
        if autograd.needs_grad(*tensors):
            self._record(values, tensors, results)
        return results[0] if self.nout == 1 else tuple(results)

    def _record(self, values: list[Any], tensors: list[Any], results: list[Any]) -> None:
        for k, result in enumerate(results):
            if not result.dtype.is_floating_point:
                continue
            if not self.differentiable:
                reason = self.trace_error

                def refuse(grad: Any, reason: Any = reason) -> Any:
                    raise BackwardError(
                        f"elementwise function '{self.name}' is not differentiable: it could "
                        f"not be traced because {reason}. Give it a backward with "
                        f"`@{self.name}.defvjp`, rewrite the branch with kg.where, or call "
                        "it under `with kg.no_grad():`"
                    )

                autograd.record(self.name, values, result, refuse)
                continue

            def backward(grad: Any, k: int = k) -> list[Any]:
                return self._backward(values, k, grad)

            autograd.record(self.name, values, result, backward, tuple(tensors))

    def _backward(self, values: list[Any], k: int, grad: Any) -> list[Any]:
        from ..tensor import Tensor

        grads_out: list[Any] = [0.0] * self.nout
        grads_out[k] = grad
        needed = tuple(
            i
            for i, x in enumerate(values)
            if isinstance(x, Tensor) and x.requires_grad and x.dtype.is_floating_point
        )
        result: list[Any] = [None] * self.nin
        if not needed:
            return result
        if self._custom is not None:
            grads = self._custom(*values, *grads_out)
            grads = grads if isinstance(grads, tuple) else (grads,)
            for i in needed:
                result[i] = grads[i]
            return result
        categories = tuple(_category(x) for x in values)
        if autograd.is_grad_enabled():  # create_graph: one differentiable op per input
            for i in needed:
                result[i] = self._grad_function((i,), categories)(*values, *grads_out)
            return result
        grads = self._grad_function(needed, categories)(*values, *grads_out)
        grads = grads if isinstance(grads, tuple) else (grads,)
        for i, g in zip(needed, grads):
            result[i] = g
        return result

    def _grad_function(self, wrt: tuple[int, ...], categories: tuple[int, ...]) -> Any:
        key = (wrt, categories)
        function = self._grad_functions.get(key)
        if function is None:
            assert self.graph is not None
            graph, outputs = symbolic.gradient(self.graph, self.outputs, self.nin, wrt, categories)
            suffix = "_".join(str(i) for i in wrt)
            function = ElementwiseFunction(
                graph=graph,
                outputs=outputs,
                nin=self.nin + self.nout,
                name=f"{self.name}_grad{suffix}",
            )
            self._grad_functions[key] = function
        return function


def _user_line(error: BaseException, fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if code is not None and frame.filename == code.co_filename:
            return f" (line {frame.lineno}: `{(frame.line or '').strip()}`)"
    return ""


# --- the source path (functions that cannot be traced) ------------------------------------
class _SourceRewriter(ast.NodeTransformer):
    def __init__(self, owner: ElementwiseFunction, namespace: dict, local_names: set) -> None:
        import kernelgrad

        self.owner = owner
        self.namespace = namespace
        self.local_names = local_names
        self.by_identity = {
            id(getattr(kernelgrad, n)): n for n in _KG_MATH if hasattr(kernelgrad, n)
        }
        self.by_identity.update(
            {id(getattr(kernelgrad, n)): n for n in ("sigmoid", "relu", "where")}
        )

    def _kg_name(self, func: ast.AST) -> str | None:
        from .transform import _UNRESOLVED, _resolve

        target = _resolve(func, self.namespace, self.local_names)
        if target is _UNRESOLVED:
            return None
        return self.by_identity.get(id(target))

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        name = self._kg_name(node.func)
        if name is None:
            return node
        args = node.args
        if name in ("maximum", "minimum") and len(args) == 2 and not node.keywords:
            # inline (the source is one function): the arguments are numbers without side
            # effects, so evaluating one twice only costs what LLVM does not share
            text = symbolic._TEMPLATES[name[:3]].format(*(f"({ast.unparse(a)})" for a in args))
            return ast.parse(text, mode="eval").body
        if name in _KG_MATH:
            node.func = ast.parse(_KG_MATH[name], mode="eval").body
            return node
        if name == "where" and len(args) == 3:
            return ast.IfExp(test=args[0], body=args[1], orelse=args[2])
        if name == "sigmoid" and len(args) == 1:
            text = f"1.0 / (1.0 + math.exp(-({ast.unparse(args[0])})))"
            return ast.parse(text, mode="eval").body
        if name == "relu" and len(args) == 1:
            return ast.parse(f"max({ast.unparse(args[0])}, 0)", mode="eval").body
        raise KernelError(f"elementwise function '{self.owner.name}': bad call of kg.{name}")

    def visit_Name(self, node: ast.Name) -> Any:
        if not isinstance(node.ctx, ast.Load) or node.id in self.local_names:
            return node
        value = self.namespace.get(node.id)
        if isinstance(value, (bool, int, float)):
            return ast.parse(symbolic._literal(value), mode="eval").body
        return node


def _source_from_python(owner: ElementwiseFunction, function_name: str) -> tuple[str, int]:
    """Scalar source from the function as written (kg functions -> math)."""
    from .transform import _assigned_names, _namespace

    fn = owner.fn
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as error:
        raise KernelError(
            f"elementwise function '{owner.name}' could not be traced ({owner.trace_error}) "
            f"and its source cannot be read ({error})"
        ) from None
    tree = ast.parse(text).body[0]
    assert isinstance(tree, ast.FunctionDef)
    tree.decorator_list = []
    tree.name = function_name
    namespace = _namespace(fn)
    local_names = _assigned_names(tree.body) | {a.arg for a in tree.args.args}
    rewriter = _SourceRewriter(owner, namespace, local_names)
    tree.body = [rewriter.visit(stmt) for stmt in tree.body]
    ast.fix_missing_locations(tree)
    nouts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Return):
            value = node.value
            nouts.add(len(value.elts) if isinstance(value, ast.Tuple) else 1)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in local_names or node.id == "math" or hasattr(builtins, node.id):
                continue
            value = namespace.get(node.id)
            raise KernelError(
                f"elementwise function '{owner.name}' uses {node.id!r} "
                f"({type(value).__name__}); only numbers, math functions and kg math "
                "functions can be used in an elementwise function"
            )
    if len(nouts) != 1:
        raise KernelError(
            f"elementwise function '{owner.name}' must return the same number of values "
            "on every path"
        )
    return ast.unparse(tree) + "\n", nouts.pop()


def elementwise(fn: Callable[..., Any] | None = None, *, dtype: Any = None) -> Any:
    """Make a function of numbers into one fused, broadcasting, differentiable op.

    The function may use arithmetic, comparisons, ``kg.exp/log/log1p/expm1/sqrt/sin/
    cos/tan/tanh/sigmoid/relu/erf/abs/maximum/minimum/where`` (or the ``math`` versions)
    and return one value or a tuple. ``dtype`` fixes the result dtype (otherwise it is
    inferred: floating point when the function computes with floats).

    >>> import kernelgrad as kg
    >>> @kg.elementwise
    ... def gelu_tanh(x):
    ...     return 0.5 * x * (1 + kg.tanh(0.7978845608 * (x + 0.044715 * x**3)))
    >>> gelu_tanh(kg.tensor([0.0, 1.0])).tolist()[0]
    0.0
    """
    if fn is None:
        return lambda f: ElementwiseFunction(f, dtype=dtype)
    return ElementwiseFunction(fn, dtype=dtype)
