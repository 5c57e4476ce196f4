"""What kernelgrad sees on this machine: versions, devices, caches and datasets.

``python -m kernelgrad info`` (or ``kernelgrad info``) prints :func:`collect` as text;
``--json`` prints it as JSON. Nothing here compiles a kernel or touches a GPU beyond
asking whether one is there.

>>> from kernelgrad.info import collect
>>> report = collect()
>>> report["kernelgrad"]["version"] == __import__("kernelgrad").__version__
True
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from pathlib import Path
from typing import Any

__all__ = ["collect", "cuda_status", "format_report"]


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_blas() -> str:
    """Which BLAS computes the CPU backend's matrix products."""
    from .backends.cpu import blas

    return blas.describe()


def cuda_status() -> dict[str, Any]:
    """``{"available": bool, "devices": [...], "reason": str, "libraries": {...}}``
    without failing when the CUDA backend, numba-cuda or a driver is missing;
    ``libraries`` says which vendor libraries (CuPy, cuBLAS) load."""
    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
    try:
        from . import cuda
    except ImportError as error:
        return {"available": False, "devices": [], "simulator": simulated, "reason": str(error)}
    try:
        available = bool(cuda.is_available())
    except Exception as error:  # a broken driver must not break `info`
        return {"available": False, "devices": [], "simulator": simulated, "reason": str(error)}
    devices: list[str] = []
    reason = ""
    try:
        libraries = cuda.vendor_libraries()
    except Exception as error:  # a broken CuPy install must not break `info`
        libraries = {"cupy": f"unknown ({type(error).__name__}: {error})"}
    if available:
        simulated = bool(cuda.is_simulated())
        for index in range(cuda.device_count()):
            try:
                name = cuda.get_device_name(index)
            except Exception:  # the name is a nicety; never fail `info` for it
                name = "simulator" if simulated else "unknown"
            devices.append(f"cuda:{index} ({name})")
    else:
        reason = "no CUDA GPU or driver was found"
    return {
        "available": available,
        "devices": devices,
        "simulator": simulated,
        "reason": reason,
        "libraries": libraries,
    }


def _folder_summary(folder: Path) -> dict[str, Any]:
    files = 0
    size = 0
    if folder.is_dir():
        for entry in folder.rglob("*"):
            if entry.is_file():
                files += 1
                size += entry.stat().st_size
    return {"path": str(folder), "files": files, "bytes": size}


def _kernel_cache_folder() -> Path:
    """The kernel cache folder, computed as the code cache does, without creating it."""
    configured = os.environ.get("KERNELGRAD_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelgrad"


def collect(data_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Everything ``kernelgrad info`` reports, as a dictionary."""
    import kernelgrad

    from .data import available_datasets, dataset_cache_dir

    numba_cuda = {"version": _version("numba-cuda"), "implementation": None}
    if numba_cuda["version"] and "numba" in sys.modules and "numba.cuda" in sys.modules:
        numba_cuda["implementation"] = getattr(sys.modules["numba.cuda"], "implementation", None)
    datasets = []
    for name, location, reason in available_datasets(data_dir):
        entry: dict[str, Any] = {"name": name, "found": location is not None}
        if location is not None:
            entry["path"] = str(location.folder)
            entry["source"] = location.source
        else:
            entry["how_to_get"] = reason.split("To get it:", 1)[-1].strip()
        datasets.append(entry)
    cuda = cuda_status()
    devices = ["cpu"] + cuda["devices"]
    if _version("matplotlib"):
        plots = f"matplotlib {_version('matplotlib')}"
    else:
        plots = "built-in PNG writer (install matplotlib for nicer plots)"
    return {
        "kernelgrad": {
            "version": kernelgrad.__version__,
            "path": str(Path(kernelgrad.__file__).parent),
        },
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "versions": {
            "numpy": _version("numpy"),
            "numba": _version("numba"),
            "numba-cuda": numba_cuda["version"],
            "cupy": _version("cupy-cuda13x") or _version("cupy-cuda12x") or _version("cupy"),
            "matplotlib": _version("matplotlib"),
        },
        "backends": {
            "cpu": {
                "available": True,
                "engine": "Numba (njit, parallel)",
                "libraries": {"BLAS": _cpu_blas()},
            },
            "cuda": {
                "available": cuda["available"],
                "engine": "numba-cuda",
                "simulator": cuda["simulator"],
                "reason": cuda["reason"],
                "libraries": cuda.get("libraries", {}),
            },
        },
        "devices": devices,
        "default_device": "cuda" if cuda["available"] and not cuda["simulator"] else "cpu",
        "kernel_cache": _folder_summary(_kernel_cache_folder()),
        "dataset_cache": str(dataset_cache_dir()),
        "datasets": datasets,
        "plots": plots,
    }


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count} B"


def format_report(report: dict[str, Any]) -> str:
    """The text ``kernelgrad info`` prints."""
    versions = report["versions"]
    lines = [
        f"kernelgrad {report['kernelgrad']['version']} ({report['kernelgrad']['path']})",
        f"Python     {report['python']['version']} ({report['python']['executable']})",
        f"Platform   {report['platform']}, {report['cpu_count']} CPU cores",
        "Versions   "
        + ", ".join(f"{name} {value or 'not installed'}" for name, value in versions.items()),
        "Backends",
    ]
    for name, backend in report["backends"].items():
        state = "available" if backend["available"] else "not available"
        extra = ""
        if name == "cuda" and backend.get("simulator"):
            extra = " (NUMBA_ENABLE_CUDASIM=1: the simulator)"
        if not backend["available"] and backend.get("reason"):
            extra += f" ({backend['reason']})"
        lines.append(f"  {name:<5} {state}: {backend['engine']}{extra}")
        for library, status in backend.get("libraries", {}).items():
            lines.append(f"        {library}: {status}")
    lines.append(f"Devices    {', '.join(report['devices'])} (default: {report['default_device']})")
    cache = report["kernel_cache"]
    lines.append(
        f"Kernel cache   {cache['path']} ({cache['files']} files, {_size(cache['bytes'])}; "
        "set KERNELGRAD_CACHE_DIR to move it)"
    )
    lines.append(f"Dataset cache  {report['dataset_cache']}")
    lines.append("Datasets")
    for entry in report["datasets"]:
        if entry["found"]:
            lines.append(f"  {entry['name']:<14} {entry['path']} ({entry['source']})")
        else:
            lines.append(f"  {entry['name']:<14} not found; to get it:")
            for way in entry["how_to_get"].splitlines():
                lines.append(f"    {way.strip()}")
    lines.append(f"Plots      {report['plots']}")
    return "\n".join(lines)
