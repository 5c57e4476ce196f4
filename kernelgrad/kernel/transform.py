"""From a user's ``@kg.kernel`` function to the device-neutral analysis a backend
generates its module from (:class:`~kernelgrad.backends.kernel_source.KernelInfo`).

The user's function is parsed once (:func:`analyze`). Calls of ``kg.index()`` and the
other markers become plain names (``_kg_lin``, ``_kg_g0``, ...); ``kg.exp`` and
friends become ``math`` functions; kernelgrad dtypes become NumPy types; constants the
function reads from its module are written into the generated source (so that changing
them changes the file's hash); plain Python helper functions it calls are copied into
the generated module and compiled for the same device.

Each backend then defines the marker names in its own form of the kernel
(``backends/<device>/kernel_module.py``, reached through ``Backend.launch_kernel``):
the CPU as ``numba.njit(parallel=True)`` loops over the index range (workgroups as
phases split at barriers), CUDA as a grid of blocks.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import math
import textwrap
import types
from typing import Any

import numpy as np

from ..backends.kernel_source import PREFIX, KernelInfo, SharedDecl, kernel_error
from ..backends.kernel_source import is_call_to as _is_call_to
from ..backends.kernel_typeinfer import constant_type
from ..dtypes import DType, as_dtype
from ..errors import KernelError
from .markers import MARKERS

# kg functions that mean the same thing inside a kernel as a math/builtin function
_KG_MATH = {
    "exp": "math.exp",
    "log": "math.log",
    "log1p": "math.log1p",
    "expm1": "math.expm1",
    "sqrt": "math.sqrt",
    "sin": "math.sin",
    "cos": "math.cos",
    "tan": "math.tan",
    "tanh": "math.tanh",
    "erf": "math.erf",
    "abs": "abs",
    # NaN-propagating, as the primitives (Python's max/min return the first argument
    # when the second is NaN): helpers compiled into the kernel's module, see _nan_helper
    "maximum": PREFIX + "maximum",
    "minimum": PREFIX + "minimum",
}
_META_ATTRIBUTES = {"shape", "size", "ndim", "dtype", "strides"}
_SAFE_CALLS = {"len"}


def nan_propagating_helper(operation: str) -> ast.FunctionDef:
    """The syntax tree of the primitive ``operation``'s scalar function ("maximum" or
    "minimum"): ``x if (x > y or x != x) else y``."""
    from ..ops.elementwise import OPS

    tree = ast.parse(OPS[operation].scalar.source).body[0]
    assert isinstance(tree, ast.FunctionDef)
    return tree


def _function_tree(fn: Any) -> tuple[ast.FunctionDef, str, int]:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        filename = inspect.getsourcefile(fn) or "<unknown>"
        first_line = inspect.getsourcelines(fn)[1]
    except (OSError, TypeError) as error:
        raise KernelError(
            f"cannot read the source of {getattr(fn, '__name__', fn)!r} ({error}); kernels "
            "must be defined in a file (not typed at an interactive prompt or made with exec)"
        ) from None
    tree = ast.parse(source)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise KernelError(f"{fn!r} is not a plain function definition (def ...)")
    node.decorator_list = []
    return node, filename, first_line


def _namespace(fn: Any) -> dict[str, Any]:
    """The names a function can see: its closure, then its module globals."""
    names = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            with contextlib.suppress(ValueError):  # an empty cell
                names[name] = cell.cell_contents
    return names


_UNRESOLVED = object()


def _resolve(node: ast.AST, namespace: dict[str, Any], local_names: set[str]) -> Any:
    if isinstance(node, ast.Name):
        if node.id in local_names:
            return _UNRESOLVED
        if node.id in namespace:
            return namespace[node.id]
        return getattr(builtins, node.id, _UNRESOLVED)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, namespace, local_names)
        if base is _UNRESOLVED or not isinstance(base, types.ModuleType):
            return _UNRESOLVED
        return getattr(base, node.attr, _UNRESOLVED)
    return _UNRESOLVED


def _constant(info: Any, node: ast.AST, namespace: dict[str, Any], what: str) -> Any:
    try:
        return eval(compile(ast.Expression(node), "<kernel>", "eval"), dict(namespace))
    except Exception as error:
        raise kernel_error(
            info, node, f"{what} must be a constant the kernel compiler can evaluate ({error})"
        ) from None


def _assigned_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef)):
            pass
    return names


def _kg_math_table() -> dict[int, str]:
    """id(kg function) -> replacement, computed lazily to avoid an import cycle."""
    import kernelgrad

    table = {}
    for name, target in _KG_MATH.items():
        value = getattr(kernelgrad, name, None)
        if value is not None:
            table[id(value)] = target
    return table


class _Rewriter(ast.NodeTransformer):
    """Replace marker calls, kg math functions and kg dtypes; record what is used."""

    def __init__(self, info: Any, namespace: dict[str, Any], local_names: set[str], helper: bool):
        self.info = info
        self.namespace = namespace
        self.local_names = local_names
        self.helper = helper
        self.math_table = _kg_math_table()

    def _marker_dims(self, node: ast.Call, name: str) -> int:
        if node.keywords or len(node.args) > 1:
            raise kernel_error(self.info, node, f"kg.{name}() takes at most one argument (ndim)")
        if not node.args:
            return 0
        value = _constant(self.info, node.args[0], self.namespace, f"the argument of kg.{name}")
        if not isinstance(value, int) or not 1 <= value <= 8:
            raise kernel_error(
                self.info, node, f"kg.{name}(ndim) needs an integer ndim >= 1, got {value!r}"
            )
        return value

    def visit_Call(self, node: ast.Call) -> Any:
        target = _resolve(node.func, self.namespace, self.local_names)
        marker = MARKERS.get(target) if callable(target) else None
        if marker == "private":
            return self._private(node)
        if marker is not None:
            if self.helper:
                raise kernel_error(
                    self.info,
                    node,
                    f"kg.{marker}() can only be used in the kernel function itself, not in a "
                    "helper function it calls; pass the index to the helper as an argument",
                )
            return self._marker(node, marker)
        replacement = self.math_table.get(id(target)) if target is not _UNRESOLVED else None
        self.generic_visit(node)
        if replacement is not None:
            node.func = ast.parse(replacement, mode="eval").body
            if replacement.startswith(PREFIX):
                self._nan_helper(node, replacement)
        return node

    def _marker(self, node: ast.Call, marker: str) -> ast.AST:
        info = self.info
        if marker in ("index", "local_index", "group_index"):
            ndim = self._marker_dims(node, marker)
            if marker != "index":
                info.uses_workgroup = True
            info.index_dims.add(ndim)
            letter = {"index": "g", "local_index": "t", "group_index": "b"}[marker]
            linear = {"index": "lin", "local_index": "llin", "group_index": "glin"}[marker]
            if ndim == 0:
                return ast.Name(PREFIX + linear, ast.Load())
            if ndim == 1:
                return ast.Name(f"{PREFIX}{letter}0", ast.Load())
            return ast.Tuple(
                [ast.Name(f"{PREFIX}{letter}{d}", ast.Load()) for d in range(ndim)], ast.Load()
            )
        if marker == "barrier":
            info.uses_workgroup = True
            info.uses_barrier = True
            if node.args or node.keywords:
                raise kernel_error(info, node, "kg.barrier() takes no arguments")
            return ast.Call(ast.Name(PREFIX + "barrier", ast.Load()), [], [])
        # shared(shape, dtype): checked and recorded by the statement pass
        info.uses_workgroup = True
        self.generic_visit(node)
        return ast.Call(ast.Name(PREFIX + "shared", ast.Load()), node.args, node.keywords)

    def _nan_helper(self, node: ast.Call, name: str) -> None:
        """Add ``_kg_maximum``/``_kg_minimum`` to the kernel's helpers: the primitive's own
        scalar function (``ops/elementwise.py``), so that NaN and signed zeros come out
        as in ``kg.maximum`` on tensors. A function, not an inline expression, so that
        each argument is evaluated once."""
        operation = name.removeprefix(PREFIX)
        if len(node.args) != 2 or node.keywords:
            raise kernel_error(
                self.info, node, f"kg.{operation}(x, y) takes two numbers inside a kernel"
            )
        if name not in self.info.helpers:
            tree = nan_propagating_helper(operation)
            tree.name = name
            self.info.helpers[name] = tree

    def _private(self, node: ast.Call) -> ast.AST:
        """``kg.private(shape, dtype)`` -> ``_kg_private((sizes...), np.<dtype>)``, with
        both arguments checked constants (each device form names the function)."""
        info = self.info
        shape, dtype_node = _shape_argument(info, node, node, self.namespace, "kg.private")
        if not (
            isinstance(shape, tuple)
            and shape
            and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)
        ):
            raise kernel_error(
                info, node, f"kg.private needs a positive int or tuple of ints, got {shape!r}"
            )
        value = _constant(info, dtype_node, self.namespace, "the dtype of kg.private")
        dtype = _numpy_dtype(info, node, value, "kg.private")
        info.uses_private = True
        return ast.Call(
            ast.Name(PREFIX + "private", ast.Load()),
            [ast.Constant(shape), _dtype_node(as_dtype(dtype))],
            [],
        )

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        value = _resolve(node, self.namespace, self.local_names)
        if isinstance(value, DType):
            return _dtype_node(value)
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id.startswith(PREFIX):
            raise kernel_error(
                self.info, node, f"names starting with {PREFIX!r} are reserved for kernelgrad"
            )
        if isinstance(node.ctx, ast.Load) and node.id not in self.local_names:
            value = self.namespace.get(node.id, _UNRESOLVED)
            if isinstance(value, DType):
                return _dtype_node(value)
        return node


def _dtype_node(dtype: DType) -> ast.AST:
    name = "bool_" if dtype.name == "bool" else dtype.name
    return ast.Attribute(ast.Name("np", ast.Load()), name, ast.Load())


def _numpy_dtype(info: Any, node: ast.AST, value: Any, what: str = "kg.shared") -> np.dtype:
    try:
        return as_dtype(value).numpy
    except TypeError:
        raise kernel_error(
            info, node, f"{what}: unsupported dtype {value!r} (use kg.float32, kg.int32, ...)"
        ) from None


def analyze(fn: Any) -> KernelInfo:
    """Parse and check a kernel function; see the module docstring."""
    tree, filename, first_line = _function_tree(fn)
    args = tree.args
    info = KernelInfo(
        fn=fn,
        name=tree.name,
        filename=filename,
        first_line=first_line,
        params=[a.arg for a in args.args],
        body=tree.body,
    )
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
        raise kernel_error(
            info, tree, "kernel parameters must be plain positional names (no defaults, *args)"
        )
    namespace = _namespace(fn)
    local_names = _assigned_names(tree.body) | set(info.params)
    rewriter = _Rewriter(info, namespace, local_names, helper=False)
    body = [rewriter.visit(stmt) for stmt in tree.body]
    info.body = _extract_shared(info, body, namespace)
    _check_statements(info)
    _check_private(info)
    _param_usage(info)
    _resolve_globals(info, info.body, namespace, local_names, set())
    return info


def _extract_shared(info: KernelInfo, body: list[ast.stmt], namespace: dict) -> list[ast.stmt]:
    """``name = kg.shared(shape, dtype)`` at the top level of the body: recorded and kept
    in place (each device form decides what it becomes). Anywhere else: an error."""
    top_level = set()
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and _is_call_to(stmt.value, "shared")
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            shape, dtype_node = _shape_argument(info, stmt.value, stmt, namespace, "kg.shared")
            if not (isinstance(shape, tuple) and all(isinstance(s, int) and s > 0 for s in shape)):
                raise kernel_error(
                    info, stmt, f"kg.shared needs a tuple of positive ints, got {shape!r}"
                )
            if isinstance(dtype_node, ast.Attribute) and isinstance(dtype_node.value, ast.Name):
                if dtype_node.value.id == "np":  # already rewritten from a kg dtype
                    dtype = np.dtype(getattr(np, dtype_node.attr))
                else:
                    dtype = _numpy_dtype(
                        info, stmt, _constant(info, dtype_node, namespace, "dtype")
                    )
            else:
                dtype = _numpy_dtype(info, stmt, _constant(info, dtype_node, namespace, "dtype"))
            name = stmt.targets[0].id
            if any(d.name == name for d in info.shared):
                raise kernel_error(info, stmt, f"shared array {name!r} is declared twice")
            info.shared.append(SharedDecl(name, shape, dtype, stmt.lineno))
            top_level.add(id(stmt.value))
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if _is_call_to(node, "shared") and id(node) not in top_level:
            raise kernel_error(
                info,
                node,
                "kg.shared(...) must be assigned to a name at the top level of the kernel "
                "body (`tile = kg.shared((16, 16), kg.float32)`), not inside a branch, loop "
                "or expression",
            )
    shared_names = {d.name for d in info.shared}
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Store)
            and node.id in shared_names
            and not _is_shared_target(node, body)
        ):
            raise kernel_error(
                info, node, f"the shared array {node.id!r} cannot be assigned a new value"
            )
    return body


def _is_shared_target(name_node: ast.Name, body: list[ast.stmt]) -> bool:
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and _is_call_to(stmt.value, "shared")
            and stmt.targets[0] is name_node
        ):
            return True
    return False


def _check_private(info: KernelInfo) -> None:
    """The CPU form runs a kernel with barriers in phases, one loop over the group's work
    items per phase, so an array created in the kernel body would be shared by all of
    them: refused there (a helper function's arrays live within one phase)."""
    if not info.uses_barrier:
        return
    for node in ast.walk(ast.Module(body=info.body, type_ignores=[])):
        if _is_call_to(node, "private"):
            raise kernel_error(
                info,
                node,
                "kg.private cannot be used in the body of a kernel with kg.barrier(); use "
                "kg.shared with one row per work item, or call kg.private in a helper "
                "function that does the work between two barriers",
            )


def _check_statements(info: KernelInfo) -> None:
    for node in ast.walk(ast.Module(body=info.body, type_ignores=[])):
        if isinstance(node, ast.Return):
            info.has_return = True
            if node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None
            ):
                raise kernel_error(
                    info,
                    node,
                    "a kernel cannot return a value; write results into an output argument",
                )
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            raise kernel_error(info, node, "nested functions and classes are not supported")
        elif isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await, ast.Try, ast.With)):
            raise kernel_error(info, node, f"{type(node).__name__} is not supported in kernels")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            raise kernel_error(info, node, "global/nonlocal statements are not supported")


def _reads_metadata(parent: ast.AST | None, node: ast.Name) -> bool:
    """Whether ``node`` (an array) is only asked for its shape, size, ... or ``len``."""
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return parent.attr in _META_ATTRIBUTES
    return (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Name)
        and parent.func.id in _SAFE_CALLS
    )


def _param_usage(info: KernelInfo) -> None:
    """Which parameters may be written, and which are only ever indexed with one index
    (those see their tensor flattened: linear indexing)."""
    params = set(info.params)
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(ast.Module(body=info.body, type_ignores=[])):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    escaped: set[str] = set()
    multi_index: set[str] = set()
    # Local names bound to a slice of a parameter (``row = x[a:b]``): views of it. A
    # parameter is written when it, or one of its views, is written or escapes.
    views: dict[str, set[str]] = {}
    for node in ast.walk(ast.Module(body=info.body, type_ignores=[])):
        if not (isinstance(node, ast.Name) and node.id in params):
            continue
        parent = parents.get(id(node))
        if isinstance(node.ctx, ast.Store):
            escaped.add(node.id)  # rebinding a parameter: be conservative
            continue
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(parent.ctx, (ast.Store, ast.Del)):
                info.written.add(node.id)
            if isinstance(parent.slice, (ast.Tuple, ast.Slice)):
                multi_index.add(node.id)
            if isinstance(parent.ctx, ast.Load) and _makes_view(parent.slice):
                assign = parents.get(id(parent))
                if (
                    isinstance(assign, ast.Assign)
                    and assign.value is parent
                    and len(assign.targets) == 1
                    and isinstance(assign.targets[0], ast.Name)
                    and assign.targets[0].id not in params
                ):
                    views.setdefault(assign.targets[0].id, set()).add(node.id)
                else:
                    escaped.add(node.id)  # a slice is a view that may be written
            continue
        if _reads_metadata(parent, node):
            continue
        escaped.add(node.id)
    for node in ast.walk(ast.Module(body=info.body, type_ignores=[])):
        if not (isinstance(node, ast.Name) and node.id in views):
            continue
        parent = parents.get(id(node))
        if isinstance(node.ctx, ast.Store):
            continue  # binding the view itself
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(parent.ctx, ast.Load) and not isinstance(parent.slice, ast.Slice):
                continue  # reading an element of the view
        elif _reads_metadata(parent, node):
            continue
        escaped |= views[node.id]  # written through the view, or the view escapes
    info.written |= escaped
    info.linear = params - escaped - multi_index


def _shape_argument(
    info: KernelInfo, call: ast.Call, where: ast.AST, namespace: dict[str, Any], what: str
) -> tuple[Any, ast.AST]:
    """The constant shape of ``kg.shared(shape, dtype)`` / ``kg.private(shape, dtype)``
    (an int becomes a 1-tuple) and the dtype's node, positional or keyword."""
    arguments = list(call.args)
    keywords = {k.arg: k.value for k in call.keywords}
    if len(arguments) < 2:
        arguments += [keywords.pop(k) for k in ("shape", "dtype") if k in keywords]
    if len(arguments) != 2 or keywords:
        raise kernel_error(info, where, f"{what} takes (shape, dtype)")
    shape = _constant(info, arguments[0], namespace, f"the shape of {what}")
    return ((shape,) if isinstance(shape, int) else shape), arguments[1]


def _makes_view(index: ast.AST) -> bool:
    """Whether subscripting with ``index`` gives an array view (``a[1:]``, ``a[i, :]``)
    rather than one element."""
    if isinstance(index, ast.Slice):
        return True
    return isinstance(index, ast.Tuple) and any(isinstance(e, ast.Slice) for e in index.elts)


def _literal(value: Any) -> bool:
    if isinstance(value, (bool, int, float, complex, str, type(None))):
        return True
    if isinstance(value, tuple):
        return all(_literal(v) for v in value)
    return False


def _literal_source(value: Any) -> str:
    """Python source for a literal constant; ``repr`` except for infinities and NaN
    (``inf`` is not a name in the generated module), also inside tuples."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({repr(value)!r})"
    if isinstance(value, complex) and not (math.isfinite(value.real) and math.isfinite(value.imag)):
        return f"complex({repr(value)!r})"
    if isinstance(value, tuple):
        items = ", ".join(_literal_source(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    return repr(value)


def _free_names(body: list[ast.stmt], local_names: set[str]) -> list[ast.Name]:
    found = []
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id not in local_names
            and not node.id.startswith(PREFIX)
        ):
            found.append(node)
    return found


def _resolve_globals(
    info: KernelInfo,
    body: list[ast.stmt],
    namespace: dict[str, Any],
    local_names: set[str],
    visiting: set[str],
) -> None:
    """Make every free name of ``body`` available in the generated module."""
    for node in _free_names(body, local_names):
        name = node.id
        if name in ("np", "math") and name not in namespace:
            continue  # introduced by the rewriting; imported by every generated module
        if name not in namespace:
            if hasattr(builtins, name):
                continue
            raise kernel_error(info, node, f"name {name!r} is not defined")
        value = namespace[name]
        if isinstance(value, types.ModuleType):
            line = f"import {value.__name__} as {name}"
            if value.__name__ == "kernelgrad" or value.__name__.startswith("kernelgrad."):
                raise kernel_error(
                    info,
                    node,
                    f"'{name}.{_attribute_after(node, body)}' cannot be used inside a kernel "
                    "(only kg.index, kg.local_index, kg.group_index, kg.shared, kg.barrier, "
                    "kg dtypes and the math functions kg.exp, kg.log, kg.sqrt, ... are "
                    "understood); use math or numpy functions instead",
                )
            _add_header(info, node, name, line)
        elif _literal(value):
            _add_header(info, node, name, f"{name} = {_literal_source(value)}")
            info.global_types[name] = constant_type(value) or "?"
        elif isinstance(value, type) and issubclass(value, np.generic):
            _add_header(info, node, name, f"{name} = np.{value.__name__}")
        elif isinstance(value, DType):
            _add_header(info, node, name, f"{name} = np.{value.numpy.type.__name__}")
        elif isinstance(value, types.FunctionType):
            if name in visiting or name in info.helpers:
                continue
            _add_helper(info, node, name, value, visiting)
        elif _is_numba_function(value) or isinstance(value, np.ndarray):
            info.injected[name] = value
        else:
            raise kernel_error(
                info,
                node,
                f"the kernel uses {name!r}, a {type(value).__name__}; kernels can use numbers, "
                "tuples, math/numpy functions, NumPy arrays of constants, numba functions "
                "and plain Python helper functions. Pass tensors as arguments instead.",
            )


def _attribute_after(node: ast.Name, body: list[ast.stmt]) -> str:
    for candidate in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(candidate, ast.Attribute) and candidate.value is node:
            return candidate.attr
    return "..."


def _is_numba_function(value: Any) -> bool:
    module = type(value).__module__ or ""
    return module.startswith("numba") and callable(value)


def _add_header(info: KernelInfo, node: ast.AST, name: str, line: str) -> None:
    existing = info.header.get(name)
    if existing is not None and existing != line:
        raise kernel_error(
            info, node, f"the name {name!r} means different things in the kernel and a helper"
        )
    info.header[name] = line


def _add_helper(
    info: KernelInfo, node: ast.AST, name: str, fn: types.FunctionType, visiting: set[str]
) -> None:
    tree, _, _ = _function_tree(fn)
    tree.name = name
    namespace = _namespace(fn)
    local_names = _assigned_names(tree.body) | {a.arg for a in tree.args.args}
    rewriter = _Rewriter(info, namespace, local_names, helper=True)
    tree.body = [rewriter.visit(stmt) for stmt in tree.body]
    info.helpers[name] = tree
    _resolve_globals(info, tree.body, namespace, local_names, visiting | {name})
