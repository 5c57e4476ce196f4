"""``kg.autograd.profiler``: PyTorch's older profiler path (``torch.autograd.profiler``),
over :mod:`kernelgrad.profiler`: ``profile(enabled=True, use_cuda=False, ...)`` and
``record_function``."""

from __future__ import annotations

from typing import Any

from .. import profiler as _profiler
from ..profiler import record_function

__all__ = ["profile", "record_function"]


class profile(_profiler.profile):
    """``torch.autograd.profiler.profile``: :class:`kernelgrad.profiler.profile` with the
    older arguments (``enabled=False`` records nothing; ``use_cuda`` / ``use_device``
    add the CUDA activity)."""

    def __init__(
        self,
        enabled: bool = True,
        *,
        use_cuda: bool = False,
        use_device: str | None = None,
        record_shapes: bool = False,
        with_flops: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_modules: bool = False,
        use_kineto: bool = False,
        use_cpu: bool = True,
        **kwargs: Any,
    ) -> None:
        activities = {_profiler.ProfilerActivity.CPU}
        if use_cuda or (use_device or "").startswith("cuda"):
            activities.add(_profiler.ProfilerActivity.CUDA)
        super().__init__(
            activities=activities,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
        )
        self.enabled = enabled

    def start(self) -> None:
        if self.enabled:
            super().start()

    def table(self, **kwargs: Any) -> str:
        return self.key_averages().table(**kwargs)
