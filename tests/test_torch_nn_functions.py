"""torch's top-level nn operations (``kg.conv2d``, ``kg.dropout``, ``kg.layer_norm``,
``kg.relu_``, ...: kernelgrad/torch_nn_functions.py), each called as a program calls
``torch.xxx`` (torch's positional signatures) and compared with PyTorch: values, and the
gradient of every floating point input."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.torch_nn_functions as functions
from kernelgrad.errors import ArgumentError
from tests.helpers import as_numpy, assert_close

RNG = np.random.default_rng(21)


def _f(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape)


class Grad(np.ndarray):
    """A float array that the case passes as a tensor requiring grad."""


def _g(*shape, low=-2.0, high=2.0):
    return _f(*shape, low=low, high=high).view(Grad)


_IDX = np.array([0, 2, 1, 4, 3, 1])
_OFF = np.array([0, 2, 2])  # the middle bag is empty
_THETA = np.array([[[0.9, 0.2, 0.1], [-0.1, 1.1, 0.05]]])

# name -> the arguments of torch.<name>, positionally (Grad arrays get gradients)
CASES = {
    "conv1d": lambda: [_g(2, 3, 7), _g(4, 3, 3), _g(4), 2, 1],
    "conv2d": lambda: [_g(1, 2, 5, 5), _g(4, 1, 3, 3), None, 1, "same", 1, 2],
    "conv3d": lambda: [_g(1, 2, 4, 4, 4), _g(2, 2, 2, 2, 2)],
    "conv_transpose1d": lambda: [_g(1, 2, 4), _g(2, 3, 3), _g(3), 2, 1, 1],
    "conv_transpose2d": lambda: [_g(1, 2, 3, 3), _g(2, 2, 2, 2), None, 2],
    "conv_transpose3d": lambda: [_g(1, 2, 2, 2, 2), _g(2, 1, 2, 2, 2)],
    "max_pool1d": lambda: [_g(2, 3, 8), 3, [], 1],
    "max_pool2d": lambda: [_g(1, 2, 5, 5), 2, 1, 0, 1, True],
    "max_pool3d": lambda: [_g(1, 1, 4, 4, 4), 2],
    "max_pool1d_with_indices": lambda: [_g(2, 2, 7), 2, 2, 1],
    "avg_pool1d": lambda: [_g(2, 2, 7), 3, 2, 1, True, False],
    "adaptive_avg_pool1d": lambda: [_g(2, 3, 7), 3],
    "adaptive_max_pool1d": lambda: [_g(2, 3, 7), 3],
    "batch_norm": lambda: [_g(4, 3, 2), _g(3), _g(3), _f(3), _f(3, low=0.5), True, 0.2, 1e-5, True],
    "layer_norm": lambda: [_g(2, 3, 4), [3, 4], _g(3, 4), _g(3, 4), 1e-5, True],
    "group_norm": lambda: [_g(2, 4, 3), 2, _g(4), _g(4), 1e-5, True],
    "instance_norm": lambda: [_g(2, 3, 4), _g(3), _g(3), None, None, True, 0.1, 1e-5, True],
    "rms_norm": lambda: [_g(2, 3, 4), [4], _g(4), 1e-6],
    "dropout": lambda: [_g(3, 4), 0.5, False],
    "alpha_dropout": lambda: [_g(3, 4), 0.5, False],
    "feature_dropout": lambda: [_g(2, 3, 4), 0.3, False],
    "feature_alpha_dropout": lambda: [_g(2, 3, 4), 0.3, False],
    "embedding": lambda: [_g(5, 3), _IDX.reshape(2, 3), 1],
    "embedding_bag": lambda: [_g(5, 3), _IDX, _OFF, False, 1],
    "pixel_shuffle": lambda: [_g(1, 8, 2, 3), 2],
    "pixel_unshuffle": lambda: [_g(1, 2, 4, 6), 2],
    "channel_shuffle": lambda: [_g(2, 6, 3), 3],
    "cosine_similarity": lambda: [_g(3, 4), _g(3, 4), 1, 1e-8],
    "pairwise_distance": lambda: [_g(3, 4), _g(3, 4), 3.0, 1e-6, True],
    "pdist": lambda: [_g(4, 3), 1.0],
    "prelu": lambda: [_g(2, 3, 4), _g(3)],
    "rrelu": lambda: [_g(3, 4), 0.1, 0.3, False],
    "selu": lambda: [_g(3, 4)],
    "celu": lambda: [_g(3, 4), 0.7],
    "threshold": lambda: [_g(3, 4), 0.1, -5.0],
    "hardshrink": lambda: [_g(3, 4), 0.6],
    "bilinear": lambda: [_g(3, 2), _g(3, 4), _g(5, 2, 4), _g(5)],
    "kl_div": lambda: [_g(3, 4), _f(3, 4, low=0.1, high=1.0), 1],
    "margin_ranking_loss": lambda: [_g(5), _g(5), np.sign(_f(5)), 0.3, 2],
    "hinge_embedding_loss": lambda: [_g(5), np.sign(_f(5)), 0.8, 0],
    "cosine_embedding_loss": lambda: [_g(4, 3), _g(4, 3), np.sign(_f(4)), 0.1, 1],
    "poisson_nll_loss": lambda: [_g(5), _f(5, low=0, high=3), True, True, 1e-8, 1],
    "triplet_margin_loss": lambda: [_g(4, 3), _g(4, 3), _g(4, 3), 1.5, 1.0, 1e-6, True, 2],
    "binary_cross_entropy_with_logits": lambda: [
        _g(3, 4),
        _f(3, 4, low=0, high=1),
        _f(4, low=0.5),
        _f(4, low=0.5),
        1,
    ],
    "grid_sampler": lambda: [_g(1, 2, 4, 5), _g(1, 3, 3, 2, low=-1.1, high=1.1), 0, 2, False],
    "affine_grid_generator": lambda: [_THETA.copy().view(Grad), [1, 1, 3, 4], True],
}
IN_PLACE = {
    "dropout_": lambda: [_f(3, 4), 0.5, False],
    "alpha_dropout_": lambda: [_f(3, 4), 0.5, False],
    "feature_dropout_": lambda: [_f(2, 3, 4), 0.0, True],
    "feature_alpha_dropout_": lambda: [_f(2, 3, 4), 0.5, False],
    "rrelu_": lambda: [_f(3, 4), 0.2, 0.2, True],  # lower == upper: no randomness
    "selu_": lambda: [_f(3, 4)],
    "celu_": lambda: [_f(3, 4), 2.0],
    "threshold_": lambda: [_f(3, 4), 0.0, 9.0],
    "relu_": lambda: [_f(3, 4)],
    "sigmoid_": lambda: [_f(3, 4)],
    "tanh_": lambda: [_f(3, 4)],
}


def test_every_name_is_exported_and_has_a_case():
    lazy = [name for name, module in kg._LAZY_ATTRIBUTES.items() if module == "torch_nn_functions"]
    assert sorted(lazy) == sorted(functions.__all__)
    assert set(functions.__all__) == set(CASES) | set(IN_PLACE)
    for name in functions.__all__:
        assert getattr(kg, name) is getattr(functions, name)


def _convert(lib, args):
    out = []
    for a in args:
        if isinstance(a, Grad):
            a = np.asarray(a)
            out.append(
                lib.tensor(a, requires_grad=True)
                if lib is not kg
                else kg.tensor(a, requires_grad=True)
            )
        elif isinstance(a, np.ndarray):
            out.append(lib.tensor(a))
        else:
            out.append(a)
    return out


def _outputs(result):
    return list(result) if isinstance(result, tuple) else [result]


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torchs_top_level_call(name):
    import torch

    args = CASES[name]()
    mine_args, their_args = _convert(kg, args), _convert(torch, args)
    mine = _outputs(getattr(kg, name)(*mine_args))
    theirs = _outputs(getattr(torch, name)(*their_args))
    if name == "embedding_bag":  # PyTorch's max_indices outside max mode is workspace
        mine, theirs = mine[:3], theirs[:3]
    assert len(mine) == len(theirs)
    for got, want in zip(mine, theirs, strict=True):
        assert got.shape == tuple(want.shape), name
        assert got.dtype.is_floating_point == want.dtype.is_floating_point, name
        assert_close(got, want.detach().numpy(), rtol=1e-9, atol=1e-12)
    upstream = RNG.standard_normal(tuple(theirs[0].shape))
    (mine[0] * kg.tensor(upstream)).sum().backward()
    (theirs[0] * torch.tensor(upstream)).sum().backward()
    for k, (a, b) in enumerate(zip(mine_args, their_args, strict=True)):
        if isinstance(args[k], Grad):
            assert a.grad is not None, f"{name}: argument {k} got no gradient"
            assert_close(a.grad, b.grad.numpy(), rtol=1e-7, atol=1e-10)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_forms_write_what_torch_writes(name):
    import torch

    args = IN_PLACE[name]()
    mine, theirs = _convert(kg, args), _convert(torch, args)
    result = getattr(kg, name)(*mine)
    getattr(torch, name)(*theirs)
    assert result is mine[0]
    assert_close(mine[0], theirs[0].numpy(), rtol=1e-12)


@pytest.mark.torch
def test_embedding_bag_max_mode_returns_the_indices_of_the_maxima():
    import torch

    weight, offsets = _f(6, 3), np.array([0, 3, 3, 4])
    indices = np.array([5, 0, 2, 1, 3, 4, 0])
    mine = kg.embedding_bag(kg.tensor(weight), kg.tensor(indices), kg.tensor(offsets), False, 2)
    theirs = torch.embedding_bag(
        torch.tensor(weight), torch.tensor(indices), torch.tensor(offsets), False, 2
    )
    for got, want in zip(mine, theirs, strict=True):
        assert_close(got, want.numpy())


def test_dropout_in_training_keeps_or_drops_whole_features():
    x = kg.ones(40, 30, 2)
    y = kg.feature_dropout(x, 0.5, True)
    values = y.numpy()
    assert set(np.unique(values)) <= {0.0, 2.0}
    assert (values[:, :, 0] == values[:, :, 1]).all()  # one draw per (sample, channel)
    assert 0.3 < (values == 0).mean() < 0.7
    dropped = kg.dropout(x, 0.5, True).numpy()
    assert not (dropped[:, :, 0] == dropped[:, :, 1]).all()


def test_int_arguments_outside_torchs_codes_are_refused():
    x = kg.zeros(3)
    with pytest.raises(ArgumentError, match="reduction is an int"):
        kg.margin_ranking_loss(x, x, x, 0.0, "mean")
    with pytest.raises(ArgumentError, match="mode is 0"):
        kg.embedding_bag(kg.zeros(4, 2), kg.tensor([0, 1]), kg.tensor([0]), False, 3)
    with pytest.raises(ArgumentError, match="interpolation_mode"):
        kg.grid_sampler(kg.zeros(1, 1, 2, 2), kg.zeros(1, 2, 2, 2), 5, 0, False)
    with pytest.raises(ArgumentError, match="at least 2 dims"):
        kg.feature_dropout(x, 0.5, True)


def test_top_level_functions_run_on_the_device(device):
    """A few of them on this backend, against the same call on the CPU."""
    x = _f(1, 2, 4, 4)
    w = _f(2, 2, 3, 3)
    grid = _f(1, 2, 3, 2, low=-1, high=1)
    table = _f(5, 3)
    for name, args in (
        ("conv2d", [x, w, None, 1, 1]),
        ("layer_norm", [x, [4], None, None, 1e-5, True]),
        ("grid_sampler", [x, grid, 1, 1, True]),
        ("kl_div", [x, np.abs(x), 2]),
    ):
        on_device = getattr(kg, name)(
            *[kg.tensor(a, device=device) if isinstance(a, np.ndarray) else a for a in args]
        )
        on_cpu = getattr(kg, name)(
            *[kg.tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        )
        assert_close(as_numpy(on_device), on_cpu.numpy(), rtol=1e-9, atol=1e-12)
    bags = kg.embedding_bag(
        kg.tensor(table, device=device),
        kg.tensor(_IDX, device=device),
        kg.tensor(_OFF, device=device),
        False,
        2,
    )
    expected = kg.embedding_bag(kg.tensor(table), kg.tensor(_IDX), kg.tensor(_OFF), False, 2)
    for got, want in zip(bags, expected, strict=True):
        assert_close(as_numpy(got), want.numpy())
