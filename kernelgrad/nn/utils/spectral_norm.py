"""Spectral normalisation with PyTorch's hook API (``torch.nn.utils.spectral_norm``;
Miyato et al., 2018): the parameter ``weight`` becomes ``weight_orig``, two buffers
``weight_u`` and ``weight_v`` hold the power iteration's singular vectors, and a forward
pre-hook sets ``weight = weight_orig / sigma`` with ``sigma = u . (W v)``, ``W`` the
weight as a matrix (``dim`` first, the other dims flattened). In training mode each call
first runs ``n_power_iterations`` steps of the iteration, updating ``u`` and ``v`` in
place; in eval mode the stored ``u`` and ``v`` are used. The state dict has PyTorch's
keys (``weight_orig``, ``weight_u``, ``weight_v``), so checkpoints load either way.

>>> import kernelgrad as kg
>>> m = kg.nn.utils.spectral_norm(kg.nn.Linear(20, 40))
>>> m.weight_u.shape, m.weight_v.shape, sorted(m.state_dict())
(kg.Size([40]), kg.Size([20]), ['bias', 'weight_orig', 'weight_u', 'weight_v'])
"""

from __future__ import annotations

from typing import Any, TypeVar

from ... import autograd
from ...errors import ArgumentError
from ...tensor import Tensor
from .. import functional as F

__all__ = [
    "SpectralNorm",
    "SpectralNormLoadStateDictPreHook",
    "SpectralNormStateDictHook",
    "spectral_norm",
    "remove_spectral_norm",
]

T = TypeVar("T")


def _to_matrix(weight: Tensor, dim: int) -> Tensor:
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.ndim) if d != dim])
    return weight.reshape(weight.shape[0], -1)


def _power_iteration(weight_mat: Tensor, u: Tensor, v: Tensor, steps: int, eps: float) -> None:
    """``steps`` rounds of v = normalize(W^T u), u = normalize(W v), written into ``u``
    and ``v`` in place (as PyTorch's ``out=``), without recording gradients."""
    with autograd.no_grad():
        for _ in range(steps):
            v.copy_(F.normalize(weight_mat.t().mv(u), dim=0, eps=eps))
            u.copy_(F.normalize(weight_mat.mv(v), dim=0, eps=eps))


class SpectralNorm:
    """The forward pre-hook (PyTorch's class of that name, version 1)."""

    _version: int = 1
    name: str
    dim: int
    n_power_iterations: int
    eps: float

    def __init__(
        self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ArgumentError(
                "Expected n_power_iterations to be positive, but "
                f"got n_power_iterations={n_power_iterations}"
            )
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return _to_matrix(weight, self.dim)

    def compute_weight(self, module: Any, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            _power_iteration(weight_mat, u, v, self.n_power_iterations, self.eps)
            # copies, so that a second forward's update does not change what the first
            # one's backward reads (loss = D(real) - D(fake))
            u = u.clone()
            v = v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    def remove(self, module: Any) -> None:
        from ..module import Parameter

        with autograd.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Any, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))

    def _solve_v_and_rescale(self, weight_mat: Tensor, u: Tensor, target_sigma: float) -> Tensor:
        # v with u = normalize(W v) and u . W v = sigma (least squares, on the host: this
        # only runs when loading a checkpoint of PyTorch's version 0)
        import numpy as np

        from ...ops.creation import tensor

        w = weight_mat.detach().cpu().numpy().astype(np.float64)
        uu = u.detach().cpu().numpy().astype(np.float64)
        v = np.linalg.pinv(w.T @ w) @ w.T @ uu
        v *= float(target_sigma) / float(uu @ (w @ v))
        return tensor(v, dtype=u.dtype).to(u.device)

    @staticmethod
    def apply(
        module: Any, name: str, n_power_iterations: int, dim: int, eps: float
    ) -> SpectralNorm:
        from ..lazy import UninitializedParameter
        from ..module import Parameter

        for hook in module.__dict__.get("_forward_pre_hooks", {}).values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise ArgumentError(
                    f"Cannot register two spectral_norm hooks on the same parameter {name}"
                )
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module.__dict__.get(name)
        if weight is None:
            raise ArgumentError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if isinstance(weight, UninitializedParameter):
            raise ArgumentError(
                "The module passed to `SpectralNorm` can't have uninitialized parameters. "
                "Make sure to run the dummy forward before applying spectral normalization"
            )
        if not isinstance(weight, Parameter):
            raise ArgumentError(
                f"spectral_norm: {type(module).__name__}.{name} is not a parameter; pass "
                "the name of one (name='weight')"
            )
        with autograd.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # `weight` stays an attribute (code that initialises weights reads it), not a
        # parameter: the pre-hook replaces it before every forward
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        module._register_state_dict_hook(SpectralNormStateDictHook(fn))
        module._register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))
        return fn


class SpectralNormLoadStateDictPreHook:
    """Loads PyTorch's version-0 checkpoints (``weight`` stored, no ``weight_v``) by
    solving for ``v``; a state dict with ``weight_orig``, ``weight_u`` and ``weight_v``
    (what kernelgrad and PyTorch save now) loads as it is."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        fn = self.fn
        version = local_metadata.get("spectral_norm", {}).get(fn.name + ".version", None)
        if version is not None and version >= 1:
            return
        key = prefix + fn.name
        if (
            version is None
            and all(key + suffix in state_dict for suffix in ("_orig", "_u", "_v"))
            and key not in state_dict
        ):
            return
        missing = False
        for suffix in ("_orig", "", "_u"):
            if key + suffix not in state_dict:
                missing = True
                if strict:
                    missing_keys.append(key + suffix)
        if missing:
            return
        with autograd.no_grad():
            weight_orig = state_dict[key + "_orig"]
            weight = state_dict.pop(key)
            sigma = (weight_orig / weight).mean().item()
            weight_mat = fn.reshape_weight_to_matrix(weight_orig)
            state_dict[key + "_v"] = fn._solve_v_and_rescale(
                weight_mat, state_dict[key + "_u"], sigma
            )


class SpectralNormStateDictHook:
    """Records the format's version in the state dict's metadata (PyTorch's hook;
    kernelgrad's state dicts carry no metadata, so this only checks for a duplicate)."""

    def __init__(self, fn: SpectralNorm) -> None:
        self.fn = fn

    def __call__(self, module: Any, state_dict: dict, prefix: str, local_metadata: dict) -> None:
        table = local_metadata.setdefault("spectral_norm", {})
        key = self.fn.name + ".version"
        if key in table:
            raise ArgumentError(f"Unexpected key in metadata['spectral_norm']: {key}")
        table[key] = self.fn._version


def _default_dim(module: Any) -> int:
    from ..conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0


def spectral_norm(
    module: T,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> T:
    """Apply spectral normalisation to ``module.<name>`` (``dim``: the output dim, 0
    except for the transposed convolutions, where it is 1). ``u`` and ``v`` start as
    normalised N(0, 1) samples from kernelgrad's generator."""
    if dim is None:
        dim = _default_dim(module)
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: T, name: str = "weight") -> T:
    """Put ``weight_orig / sigma`` (with the stored ``u``, ``v``) back as a parameter."""
    hooks = module.__dict__.get("_forward_pre_hooks", {})
    for key, hook in list(hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del hooks[key]
            break
    else:
        raise ArgumentError(f"spectral_norm of '{name}' not found in {module}")
    for table_name, kind in (
        ("_state_dict_hooks", SpectralNormStateDictHook),
        ("_load_state_dict_pre_hooks", SpectralNormLoadStateDictPreHook),
    ):
        table = module.__dict__.get(table_name, {})
        for key, hook in list(table.items()):
            hook = hook[0] if isinstance(hook, tuple) else hook
            if isinstance(hook, kind) and hook.fn.name == name:
                del table[key]
                break
    return module
