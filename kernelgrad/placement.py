"""``kg.on``: run a function on another device, with its inputs moved in and its results
moved back.

>>> import kernelgrad as kg
>>> x = kg.tensor([1.0, 2.0])
>>> y = kg.on("cpu", lambda t: t * 2, x)   # with "cuda": runs on the GPU, y on the CPU
>>> y.tolist()
[2.0, 4.0]

As a decorator::

    @kg.on("cuda")
    def step(batch, labels): ...

    loss = step(batch, labels)   # batch, labels: CPU tensors; loss comes back to the CPU

What happens, in order:

1. **Inputs in.** Every tensor among the positional and keyword arguments, also inside
   lists, tuples (named tuples included) and dicts, nested to any depth, is moved to
   the device with ``.to(device)``. Tensors already there are passed as they are; a
   tensor passed twice is copied once. (Two different views of one storage become two
   separate copies.) Other objects (modules, numbers, strings) are passed unchanged:
   move a model with its own ``.to(device)``.
2. **Run.** The function runs inside ``with kg.device(device):``, so tensors it creates
   without a ``device=`` argument are created there too.
3. **Results back.** Every tensor in the result (same containers) is moved to the
   *home device* (below). Non-tensor results are returned unchanged.
4. **In-place writes back.** An input that was copied in and then modified in place by
   the function (its storage version changed) is copied back into the caller's tensor,
   so ``kg.on("cuda", lambda t: t.mul_(2), x)`` doubles ``x`` as it would without
   ``kg.on``. (Inputs already on the device are the caller's own tensors: nothing to do.)
   An input that the function returns as it is comes back as the caller's tensor
   itself, so that call also returns ``x``.

The **home device** is where the inputs came from:

* all tensor inputs on one device: that device;
* no tensor inputs, or tensors on several devices: the default device at the call
  (``kg.default_device()``: the CPU, unless inside ``with kg.device(...)``), which is
  where the results would have been created without ``kg.on``.

Moves are ``Tensor.to``, which autograd records: gradients flow back through them, so
``kg.on("cuda", loss_fn, x).backward()`` puts ``x.grad`` on ``x``'s own device. Nested
calls compose: an inner ``kg.on("cpu", ...)`` inside a CUDA block returns its results to
CUDA, the inner block's home.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .autograd import no_grad
from .device import Device, as_device, default_device
from .device import device as device_context
from .tensor import Tensor

__all__ = ["on"]


def on(device: Any, fn: Callable[..., Any] | None = None, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` on ``device`` and return its results to the home device.

    With only a device, returns a decorator: ``@kg.on("cuda")``. See the module
    docstring for what is moved, where results go, and how gradients flow."""
    target = as_device(device)
    if fn is None:
        if args or kwargs:
            raise TypeError("kg.on(device) without a function takes no further arguments")

        def decorator(function: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(function)
            def wrapper(*call_args: Any, **call_kwargs: Any) -> Any:
                return _run(target, function, call_args, call_kwargs)

            return wrapper

        return decorator
    if not callable(fn):
        raise TypeError(
            f"kg.on(device, fn, *args): fn must be callable, got {type(fn).__name__}; "
            "for a decorator write @kg.on(device)"
        )
    return _run(target, fn, args, kwargs)


def home_device(tensors: list[Tensor]) -> Device:
    """Where results go back to: the inputs' device, or the default device when the
    inputs are on several devices or there are none."""
    devices = {t.device for t in tensors}
    if len(devices) == 1:
        return next(iter(devices))
    return default_device()


def _run(target: Device, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    found: list[Tensor] = []
    _map_tensors((args, kwargs), found.append)
    home = home_device(found)

    # id(original) -> (original, copy, version after the copy); a tensor passed twice is
    # copied once, so the function sees one tensor as the caller did.
    moved: dict[int, tuple[Tensor, Tensor, int]] = {}

    def move_in(t: Tensor) -> Tensor:
        if t.device == target:
            return t
        if id(t) not in moved:
            copy = t.to(target)
            moved[id(t)] = (t, copy, copy._storage.version)
        return moved[id(t)][1]

    device_args, device_kwargs = _map_tensors((args, kwargs), move_in)
    with device_context(target):
        result = fn(*device_args, **device_kwargs)
    originals = {}
    for original, copy, version in moved.values():
        if copy._storage.version != version:
            with no_grad():
                original.copy_(copy.detach())
        originals[id(copy)] = original

    def move_out(t: Tensor) -> Tensor:
        # An input returned as it is comes back as the caller's own tensor.
        original = originals.get(id(t))
        return original if original is not None else t.to(home)

    return _map_tensors(result, move_out)


def _map_tensors(value: Any, fn: Callable[[Tensor], Any]) -> Any:
    """``value`` with ``fn`` applied to every tensor inside lists, tuples and dicts."""
    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, list):
        return [_map_tensors(v, fn) for v in value]
    if isinstance(value, tuple):
        mapped = [_map_tensors(v, fn) for v in value]
        if hasattr(value, "_fields"):  # a named tuple
            return type(value)(*mapped)
        return tuple(mapped)
    if isinstance(value, dict):
        mapped_dict = {k: _map_tensors(v, fn) for k, v in value.items()}
        if type(value) is dict:
            return mapped_dict
        try:  # OrderedDict and other dict types that take items
            return type(value)(mapped_dict)
        except TypeError:
            return mapped_dict
    return value
