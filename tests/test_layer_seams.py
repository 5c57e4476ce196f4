"""The layer seams: nn and optim neither import the compile layer (above them) nor
branch on a device's type; they ask ``kernelgrad.tracing`` whether a trace records and
the backend what it can do (``backends.base.backend_capability``). The compile layer
imports no device's backend and branches on no device: it reaches them through the
Backend protocol (``backend.fused_reduce`` for fused reductions)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import kernelgrad as kg
from kernelgrad import tracing
from kernelgrad.backends.base import backend_capability
from kernelgrad.backends.cpu import CPUBackend

PACKAGE = Path(kg.__file__).resolve().parent


def _layer_files() -> list[Path]:
    layers = ("nn", "optim", "distributions")
    return sorted(path for layer in layers for path in (PACKAGE / layer).rglob("*.py"))


def _imports_compile(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        names = [alias.name for alias in node.names]
        return "compile" in module.split(".") or (not module and "compile" in names)
    if isinstance(node, ast.Import):
        return any("compile" in alias.name.split(".") for alias in node.names)
    return False


def _is_device_type(node: ast.AST) -> bool:
    """``<anything>.device.type``."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "type"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "device"
    )


def test_nn_and_optim_do_not_import_compile_or_branch_on_device_types() -> None:
    found = []
    for path in _layer_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', '?')}"
            if _imports_compile(node):
                found.append(f"{where} imports the compile layer")
            if _is_device_type(node):
                found.append(f"{where} reads .device.type")
    assert not found, "\n".join(found)


def test_the_seam_checks_themselves_find_what_they_look_for() -> None:
    source = "from ..compile.trace import active_recorder\nif x.device.type == 'cpu': pass\n"
    nodes = list(ast.walk(ast.parse(source)))
    assert any(_imports_compile(node) for node in nodes)
    assert any(_is_device_type(node) for node in nodes)


def _imports_a_device_backend(node: ast.AST) -> bool:
    """An import of ``backends.cpu`` or ``backends.cuda`` (or anything inside them)."""
    if isinstance(node, ast.ImportFrom):
        parts = (node.module or "").split(".")
        if "backends" in parts:
            inside = parts[parts.index("backends") + 1 :]
            names = inside[:1] or [alias.name for alias in node.names]
            return any(name in DEVICE_BACKENDS for name in names)
        return False
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if "backends" in parts and parts[parts.index("backends") + 1 :][:1] in (
                [name] for name in DEVICE_BACKENDS
            ):
                return True
    return False


def _names_a_device(node: ast.AST) -> bool:
    """A comparison with a device's name: ``backend.name == "cuda"``, ``... in ("cpu",
    "cuda")``, ``device.type != "cpu"``."""
    if not isinstance(node, ast.Compare):
        return False
    for operand in [node.left, *node.comparators]:
        values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
        if any(isinstance(v, ast.Constant) and v.value in DEVICE_BACKENDS for v in values):
            return True
    return False


DEVICE_BACKENDS = ("cpu", "cuda")


def test_compile_reaches_devices_only_through_the_backend_protocol() -> None:
    """kg.compile neither imports a device's backend nor branches on a device: fused
    reductions come from ``backend.fused_reduce`` (backends/base.py)."""
    found = []
    for path in sorted((PACKAGE / "compile").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', '?')}"
            if _imports_a_device_backend(node):
                found.append(f"{where} imports a device's backend")
            if _is_device_type(node) or _names_a_device(node):
                found.append(f"{where} branches on a device")
    assert not found, "\n".join(found)


def test_the_compile_seam_check_finds_what_it_looks_for() -> None:
    caught = [
        "from ..backends.cuda.codegen import index_bits",
        "from ..backends import cpu",
        "import kernelgrad.backends.cuda.backend",
        "if getattr(backend, 'name', '') == 'cuda': pass",
        "ok = backend.name in ('cpu', 'cuda')",
    ]
    for source in caught:
        nodes = list(ast.walk(ast.parse(source)))
        assert any(_imports_a_device_backend(n) or _names_a_device(n) for n in nodes), source
    allowed = "from ..backends.base import View\nfrom ..backends import loaded_backends\n"
    allowed += "if kind == 'sum': pass\n"
    nodes = list(ast.walk(ast.parse(allowed)))
    assert not any(_imports_a_device_backend(n) or _names_a_device(n) for n in nodes)


def test_a_backend_without_fused_reduce_runs_compile_unfused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``fused_reduce`` is optional: without it kg.compile launches the prologue, the
    reduction and the epilogue one by one, with the same results."""

    def program(x: kg.Tensor, y: kg.Tensor) -> kg.Tensor:
        return ((x * y + 1.0).sum(dim=1) * 0.5).exp()

    x = kg.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    y = kg.tensor(np.linspace(0, 2, 12, dtype=np.float32).reshape(3, 4))
    expected = program(x, y).numpy()

    def run_compiled() -> tuple[np.ndarray, list[str]]:
        compiled = kg.compile(program)
        for _ in range(2):  # the first call runs eagerly; the second traces
            compiled(x, y)
        with kg.compile.count_launches() as counter:  # a replay
            result = compiled(x, y).numpy()
        return result, counter.names

    fused, fused_launches = run_compiled()
    monkeypatch.delattr(CPUBackend, "fused_reduce")
    unfused, unfused_launches = run_compiled()
    np.testing.assert_allclose(fused, expected, rtol=1e-6)
    np.testing.assert_allclose(unfused, expected, rtol=1e-6)
    assert len(fused_launches) == 1 and "reduce_sum" in fused_launches[0], fused_launches
    assert len(unfused_launches) == 3 and unfused_launches[1] == "reduce", unfused_launches


def test_the_tracing_hook_answers_while_compile_records() -> None:
    seen = []

    def traced(x: kg.Tensor) -> kg.Tensor:
        seen.append(tracing.active_recorder())
        return x * 2

    assert tracing.active_recorder() is None
    compiled = kg.compile(traced)
    for _ in range(3):  # the first call runs eagerly; a later one traces
        compiled(kg.ones(3))
    recorders = [recorder for recorder in seen if recorder is not None]
    assert recorders, "no call of the compiled function saw a recorder"
    assert callable(recorders[0].watch) and callable(recorders[0].before_replay)
    assert tracing.active_recorder() is None


def test_backend_capabilities_and_their_defaults() -> None:
    cpu = kg.zeros(1)._backend
    assert backend_capability(cpu, "host_memory") is True
    assert backend_capability(cpu, "work_groups") is False
    assert backend_capability(object(), "host_memory") is False  # undeclared: the default
    with pytest.raises(ValueError, match=r"unknown backend capability 'fast'.*host_memory"):
        backend_capability(cpu, "fast")


def _adam_steps() -> np.ndarray:
    kg.manual_seed(0)
    layer = kg.nn.Linear(4, 3)
    optimizer = kg.optim.Adam(layer.parameters(), lr=0.1, fused=True)
    x = kg.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    for _ in range(3):
        optimizer.zero_grad()
        layer(x).square().sum().backward()
        optimizer.step()
    return layer.weight.detach().numpy().copy()


def test_adam_gives_the_same_steps_with_and_without_host_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``host_memory`` the step counts advance in Python; without it, in a kernel
    per parameter (as on a GPU). Both paths must agree."""
    with_host_memory = _adam_steps()
    monkeypatch.setattr(CPUBackend, "host_memory", False)
    np.testing.assert_allclose(_adam_steps(), with_host_memory, rtol=1e-6)
