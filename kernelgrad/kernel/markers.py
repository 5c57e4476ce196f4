"""The names a ``@kg.kernel`` body uses to ask where it is in the launch.

These functions only have meaning inside a kernel: the kernel compiler finds the calls
in the function's source and replaces them with the loop variables of the CPU form or
the thread and block indices of the CUDA form. Called anywhere else, they raise.

* ``kg.index()``: the linear global index of this work item (row-major over
  ``ndrange``); ``kg.index(k)`` the ``k`` coordinates ``(i, j, ...)``.
* ``kg.local_index()`` / ``kg.local_index(k)``: the position inside the workgroup.
* ``kg.group_index()`` / ``kg.group_index(k)``: the position of the workgroup.
* ``kg.shared(shape, dtype)``: an array shared by the work items of one workgroup
  (CUDA shared memory); ``shape`` and ``dtype`` must be constants.
* ``kg.barrier()``: wait until every work item of the workgroup has arrived here
  (``cuda.syncthreads()``); shared-memory writes before it are visible after it.
* ``kg.private(shape, dtype)``: a small array owned by the running work item (registers
  or local memory on a GPU, the stack on a CPU); ``shape`` and ``dtype`` must be
  constants. Unlike the others it may also be used in helper functions a kernel calls.
"""

from __future__ import annotations

from typing import Any

from ..errors import KernelError

__all__ = ["index", "local_index", "group_index", "shared", "private", "barrier", "MARKERS"]


def _outside(name: str) -> KernelError:
    return KernelError(
        f"kg.{name}() only has a meaning inside a function decorated with @kg.kernel, "
        "where it is replaced by the position of the running work item; it cannot be "
        "called from ordinary Python code"
    )


def index(ndim: int | None = None) -> Any:
    """Global index of the running work item: linear, or ``ndim`` coordinates.

    Only valid inside a ``@kg.kernel`` function."""
    raise _outside("index")


def local_index(ndim: int | None = None) -> Any:
    """Index of the running work item inside its workgroup (linear or ``ndim``
    coordinates). Only valid inside a ``@kg.kernel`` launched with ``workgroup=``."""
    raise _outside("local_index")


def group_index(ndim: int | None = None) -> Any:
    """Index of the running workgroup (linear or ``ndim`` coordinates). Only valid
    inside a ``@kg.kernel`` launched with ``workgroup=``."""
    raise _outside("group_index")


def shared(shape: Any, dtype: Any) -> Any:
    """An array of constant ``shape`` and ``dtype`` shared by one workgroup. Only valid
    inside a ``@kg.kernel`` launched with ``workgroup=``."""
    raise _outside("shared")


def private(shape: Any, dtype: Any) -> Any:
    """An array of constant ``shape`` and ``dtype`` owned by the running work item, with
    undefined contents. Only valid inside a ``@kg.kernel`` function or a helper function
    it calls; never return it from a helper."""
    raise _outside("private")


def barrier() -> None:
    """Wait for every work item of the workgroup. Only valid inside a ``@kg.kernel``
    launched with ``workgroup=``."""
    raise _outside("barrier")


# marker function -> its name in the kernel compiler
MARKERS = {
    index: "index",
    local_index: "local_index",
    group_index: "group_index",
    shared: "shared",
    private: "private",
    barrier: "barrier",
}
