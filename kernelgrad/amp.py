"""``kg.amp``: PyTorch's automatic mixed precision API, for programs that use it.

kernelgrad computes in float32 and float64 only, so there is no lower precision to
switch to:

* ``autocast(device_type, dtype=None, enabled=True)`` (also ``kg.autocast``,
  ``kg.cuda.amp.autocast``) is a context manager and decorator that leaves the block
  in its own precision. With ``enabled=False`` (how programs turn mixed precision off)
  that is what PyTorch does too; with ``enabled=True`` it warns, as PyTorch's
  autocast does for a dtype the device does not support, and runs the block in float32.
* ``GradScaler`` (also ``kg.cuda.amp.GradScaler``) is PyTorch's loss scaler: ``scale``
  multiplies the loss, ``unscale_`` divides the gradients and records whether any is
  infinite or NaN, ``step`` skips the optimizer step in that case, ``update`` halves the
  scale after such a step and doubles it after ``growth_interval`` clean ones. In
  float32 the scaling changes nothing but the rounding of the gradients, and steps with
  non-finite gradients are skipped as in PyTorch. ``enabled=False`` passes everything
  through. As in PyTorch, a scaler for ``"cuda"`` disables itself (with a warning) when
  CUDA is not available.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

__all__ = ["GradScaler", "autocast", "is_autocast_available"]


def is_autocast_available(device_type: str) -> bool:
    """Whether ``autocast`` accepts ``device_type`` (it never lowers the precision here)."""
    return device_type in ("cpu", "cuda")


class autocast:
    """``torch.autocast``: accepted, and the block keeps its precision (see the module
    docstring). ``with kg.autocast("cuda", enabled=False):`` or as a decorator."""

    def __init__(
        self,
        device_type: str,
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if not is_autocast_available(device_type):
            raise ValueError(
                f"User specified an unsupported autocast device_type '{device_type}': "
                "kernelgrad's devices are 'cpu' and 'cuda'"
            )
        self.device = device_type
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        if self._enabled:
            warnings.warn(
                "kernelgrad has no float16 or bfloat16: autocast(enabled=True) runs the "
                "block in float32 (pass enabled=False to silence this)",
                UserWarning,
                stacklevel=2,
            )

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper


class _Stage(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """``torch.amp.GradScaler``: loss scaling with PyTorch's arguments, checks and
    state (see the module docstring)."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and device == "cuda":
            from . import cuda

            if not cuda.is_available():
                warnings.warn(
                    "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                    UserWarning,
                    stacklevel=2,
                )
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer_states: dict[int, dict[str, Any]] = {}

    # --- scaling ----------------------------------------------------------------------
    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or an iterable of them) times the scale factor."""
        if not self._enabled:
            return outputs
        from .tensor import Tensor

        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, Iterable):
            scaled = [self.scale(output) for output in outputs]
            return type(outputs)(scaled) if isinstance(outputs, list | tuple) else iter(scaled)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer: Any) -> dict[str, Any]:
        return self._per_optimizer_states.setdefault(
            id(optimizer), {"stage": _Stage.READY, "found_inf": None}
        )

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and record whether any
        of them holds an infinity or a NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        import numpy as np

        from . import autograd
        from .ops.composite import isfinite

        inv_scale = float(np.float32(1.0 / self._scale))
        found = None  # one flag for all the gradients: a single read to the host
        with autograd.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    param.grad.mul_(inv_scale)
                    bad = (~isfinite(param.grad)).any()
                    found = bad if found is None else found | bad
        state["found_inf"] = bool(found.item()) if found is not None else False
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step(*args, **kwargs)`` on unscaled gradients, skipped when one of
        them is not finite."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        result = None
        if not state["found_inf"]:
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return result

    def update(self, new_scale: Any = None) -> None:
        """Back off after a skipped step, grow after ``growth_interval`` good ones (or
        set ``new_scale``); then get ready for the next iteration."""
        if not self._enabled:
            return
        if new_scale is not None:
            if hasattr(new_scale, "numel") and new_scale.numel() != 1:
                raise ValueError("new_scale should be a float or a 1-element tensor.")
            self._scale = float(new_scale)
        else:
            found = [s["found_inf"] for s in self._per_optimizer_states.values()]
            found = [f for f in found if f is not None]
            if not found:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if any(found):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer_states = {}

    # --- settings and state -----------------------------------------------------------
    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved "
                "from a disabled instance of GradScaler."
            )
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


class _CudaAmp:
    """``torch.cuda.amp``: the deprecated spellings ``GradScaler(init_scale=..., ...)``
    (for ``"cuda"``) and ``autocast(enabled=True, dtype=..., cache_enabled=True)``."""

    @staticmethod
    def GradScaler(
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> GradScaler:
        return GradScaler(
            "cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )

    @staticmethod
    def autocast(enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> autocast:
        return autocast("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


cuda_amp = _CudaAmp()
