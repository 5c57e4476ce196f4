"""``kg.use_deterministic_algorithms``: the switch, and the check a nondeterministic kernel
calls. It sits below the backends (which call :func:`check_deterministic`) and the ops
(which re-export the switch), as ``tracing.py`` does for kg.compile."""

from __future__ import annotations

import warnings


class _Settings:
    deterministic = False
    warn_only = False


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms (PyTorch's ``torch.use_deterministic_algorithms``).
    kernelgrad's CPU kernels give the same results from run to run at a fixed thread
    count; its one nondeterministic kernel is the CUDA scatter-add (``index_add``, the
    backward of gathers and embeddings), whose floating-point atomics add in any order:
    with ``mode`` it raises a ``RuntimeError`` naming it (``warn_only``: a warning)."""
    _Settings.deterministic = bool(mode)
    _Settings.warn_only = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _Settings.deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _Settings.warn_only


def check_deterministic(what: str) -> None:
    """Called by a kernel that is not deterministic: raise or warn when the user asked
    for deterministic algorithms."""
    if not _Settings.deterministic:
        return
    message = (
        f"{what} does not have a deterministic implementation, but you set "
        "'kg.use_deterministic_algorithms(True)'. You can turn off determinism just for "
        "this operation, or use the 'warn_only=True' option, if that's acceptable for your "
        "application."
    )
    if _Settings.warn_only:
        warnings.warn(message, UserWarning, stacklevel=3)
        return
    raise RuntimeError(message)
