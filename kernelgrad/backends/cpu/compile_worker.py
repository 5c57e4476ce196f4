"""A compile worker (``python -m kernelgrad.backends.cpu.compile_worker``), started by
:mod:`.compile_ahead`: it reads requests ``(module name, file, function, argument
types)`` from standard input, each as 8 bytes of length then a pickle, compiles the
function of the generated module for those types (Numba saves the machine code in its
disk cache, where the requesting process loads it) and answers ``(error or None,
seconds)`` the same way on standard output."""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys
import time
import warnings
from types import ModuleType


def _module(name: str, path: str) -> ModuleType:
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def _read(stream) -> object | None:
    header = stream.read(8)
    if len(header) < 8:
        return None
    return pickle.loads(stream.read(int.from_bytes(header, "little")))


def main() -> None:
    warnings.simplefilter("ignore")  # the requesting process reports what matters
    requests = sys.stdin.buffer
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by compiled code's imports stays off the pipe
    while (request := _read(requests)) is not None:
        name, path, function, types = request  # type: ignore[misc]
        start = time.perf_counter()
        try:
            getattr(_module(name, path), function).compile(tuple(types))
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        data = pickle.dumps((error, time.perf_counter() - start))
        answers.write(len(data).to_bytes(8, "little") + data)
        answers.flush()


if __name__ == "__main__":
    main()
