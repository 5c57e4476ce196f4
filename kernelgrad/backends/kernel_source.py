"""What a backend needs to generate the module of a ``@kg.kernel``: the kernel layer's
analysis of the function (:class:`KernelInfo`) and the source helpers every device form
shares.

The kernel layer (``kernel/transform.py``) parses the user's function once and fills a
:class:`KernelInfo`: the body as Python syntax trees in which the markers are plain names
(``kg.index()`` -> ``_kg_lin``, ``kg.index(2)`` -> ``(_kg_g0, _kg_g1)``,
``kg.local_index()`` -> ``_kg_llin``, ``kg.group_index()`` -> ``_kg_glin``; ``_kg_t<d>``
and ``_kg_b<d>`` are the local and group coordinates), ``_kg_barrier()`` and
``_kg_shared(shape, dtype)`` placeholders, ``_kg_private(shape, dtype)`` calls, the
helper functions it calls, and the constants it reads. A backend's generator
(``backends/<device>/kernel_module.py``, reached through ``Backend.launch_kernel``)
defines those names for its device and wraps the body in its loops or grid.

Nothing here knows a device.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import KernelError

PREFIX = "_kg_"


@dataclass
class SharedDecl:
    """``name = kg.shared(shape, dtype)`` at the top level of a kernel body."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    lineno: int


@dataclass
class KernelInfo:
    """Everything the code generators need to know about a kernel function."""

    fn: Any
    name: str
    filename: str
    first_line: int
    params: list[str]
    body: list[ast.stmt]
    index_dims: set[int] = field(default_factory=set)
    uses_workgroup: bool = False
    uses_barrier: bool = False
    shared: list[SharedDecl] = field(default_factory=list)
    written: set[str] = field(default_factory=set)
    linear: set[str] = field(default_factory=set)
    header: dict[str, str] = field(default_factory=dict)  # name -> source line
    helpers: dict[str, ast.FunctionDef] = field(default_factory=dict)
    injected: dict[str, Any] = field(default_factory=dict)
    global_types: dict[str, str] = field(default_factory=dict)
    has_return: bool = False
    uses_private: bool = False
    has_loops: bool | None = None  # filled on first use by kernel_work.work_per_item


# --- errors ------------------------------------------------------------------------------
def _where(info: Any, node: ast.AST | None) -> str:
    line = getattr(node, "lineno", None)
    if line is None:
        return f"in kernel '{info.name}'"
    return f"in kernel '{info.name}' ({info.filename}, line {info.first_line + line - 1})"


def kernel_error(info: Any, node: ast.AST | None, message: str) -> KernelError:
    """A :class:`KernelError` naming the kernel and the user's source line of ``node``."""
    return KernelError(f"{_where(info, node)}: {message}")


def is_call_to(node: ast.AST, name: str) -> bool:
    """Whether ``node`` calls the placeholder ``_kg_<name>``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == PREFIX + name
    )


# --- index arithmetic ----------------------------------------------------------------------
def unravel(index: str, sizes: list[str], names: list[str], indent: str) -> list[str]:
    """Lines that split a linear ``index`` into row-major coordinates ``names``."""
    k = len(names)
    if k == 1:
        return [f"{indent}{names[0]} = {index}"]
    lines = []
    rest = index
    for d in range(k - 1):
        inner = " * ".join(sizes[d + 1 :])
        lines.append(f"{indent}{names[d]} = {rest} // ({inner})")
        remainder = f"{PREFIX}rest{d}"
        lines.append(f"{indent}{remainder} = {rest} - {names[d]} * ({inner})")
        rest = remainder
    lines.append(f"{indent}{names[k - 1]} = {rest}")
    return lines


def linearize(coords: list[str], sizes: list[str]) -> str:
    """The row-major linear index of ``coords`` in a range of ``sizes`` (source text)."""
    expr = coords[0]
    for d in range(1, len(coords)):
        expr = f"({expr}) * {sizes[d]} + {coords[d]}"
    return expr


# --- the float32 rule ------------------------------------------------------------------------
# NumPy's names for scalar types: a float literal that is the argument of one of these
# casts (``np.float64(0.1)``) states its precision and is left alone.
_NUMPY_SCALAR_CASTS = {"float16", "float32", "float64", "double", "single", "longdouble"}


class _NarrowFloats(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> Any:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "np"
            and func.attr in _NUMPY_SCALAR_CASTS
        ) or (isinstance(func, ast.Name) and func.id == "float"):
            return node  # an explicit precision
        self.generic_visit(node)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is not float:
            return node
        call = ast.Call(
            ast.Attribute(ast.Name("np", ast.Load()), "float32", ast.Load()), [node], []
        )
        return ast.copy_location(call, node)


def narrow_floats(tree: Any) -> Any:
    """A copy of ``tree`` with every float literal ``x`` as ``np.float32(x)``, except
    inside explicit casts (``np.float64(0.1)``): the float32 rule of user kernels (a
    kernel whose floating-point arrays are all float32 computes in float32, as the
    backends' own kernels do; integer literals follow NumPy: ``2 * x`` is float64, write
    ``2.0 * x``)."""
    return ast.fix_missing_locations(_NarrowFloats().visit(copy.deepcopy(tree)))


def body_statements(info: KernelInfo, narrow: bool) -> list[ast.stmt]:
    """The kernel body, with float32 literals when ``narrow``."""
    return [narrow_floats(stmt) for stmt in info.body] if narrow else info.body


def module_constants(info: KernelInfo, narrow: bool) -> list[str]:
    """The lines that define the module constants the kernel reads (float ones as float32
    when ``narrow``) and the names kernelgrad sets after loading (numba functions, arrays)."""
    header = dict(info.header)
    if narrow:  # float constants read from the module are float32 too
        for name, type_code in info.global_types.items():
            if type_code == "f64":
                header[name] = f"{name} = np.float32({header[name].split(' = ', 1)[1]})"
    lines = sorted(header.values())
    lines += [f"{name} = None  # set by kernelgrad before the first call" for name in info.injected]
    return lines


def helper_lines(info: KernelInfo, narrow: bool, decorator: str, rewrite: Any = None) -> list[str]:
    """The helper functions the kernel calls, each under ``decorator`` (the device's
    compile decorator), with float32 literals when ``narrow`` and ``rewrite`` (a function
    of the syntax tree) applied."""
    lines = []
    for tree in info.helpers.values():
        if narrow:
            tree = narrow_floats(tree)
        if rewrite is not None:
            tree = rewrite(tree)
        lines += [decorator, ast.unparse(tree), ""]
    return lines


def source_lines(body: list[ast.stmt], indent: str) -> list[str]:
    """``body`` as source lines indented by ``indent`` (``pass`` when empty)."""
    text = "\n".join(ast.unparse(stmt) for stmt in body) or "pass"
    return [indent + line if line else line for line in text.splitlines()]


# --- markers ---------------------------------------------------------------------------------
class _ReplaceMarkers(ast.NodeTransformer):
    """Final replacement of the ``_kg_barrier()`` / ``_kg_shared()`` placeholders."""

    def __init__(self, barrier: str | None, shared: dict[str, str | None]):
        self.barrier = barrier
        self.shared = shared

    def visit_Expr(self, node: ast.Expr) -> Any:
        if is_call_to(node.value, "barrier"):
            if self.barrier is None:
                return None
            return ast.Expr(ast.parse(self.barrier, mode="eval").body)
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> Any:
        if is_call_to(node.value, "shared"):
            name = node.targets[0].id
            replacement = self.shared.get(name)
            if replacement is None:
                return None
            node.value = ast.parse(replacement, mode="eval").body
            return node
        return self.generic_visit(node)


def replace_markers(
    body: list[ast.stmt], barrier: str | None, shared: dict[str, str | None]
) -> list[ast.stmt]:
    """A copy of ``body`` with ``_kg_barrier()`` as ``barrier`` (removed when None) and
    each ``name = _kg_shared(...)`` as ``name = shared[name]`` (removed when None)."""
    transformer = _ReplaceMarkers(barrier, shared)
    result = []
    for stmt in copy.deepcopy(body):
        new = transformer.visit(stmt)
        if new is not None:
            result.append(new)
    return [ast.fix_missing_locations(s) for s in result]


class _RenameCalls(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old = old
        self.new = new

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if is_call_to(node, self.old):
            node.func = ast.parse(self.new, mode="eval").body
        return node


def rename_calls(tree: Any, old: str, new: str) -> Any:
    """A copy of ``tree`` with calls of the placeholder ``_kg_<old>`` calling ``new``."""
    return ast.fix_missing_locations(_RenameCalls(old, new).visit(copy.deepcopy(tree)))
