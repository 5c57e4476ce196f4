"""PyTorch's remaining ``torch.nn`` surface: ``F.multilabel_margin_loss``,
``F.triplet_margin_with_distance_loss``, ``F.linear_cross_entropy``,
``F.channel_shuffle``, ``F.upsample_nearest`` / ``upsample_bilinear`` and their modules;
``nn.AdaptiveLogSoftmaxWithLoss``, ``nn.CrossMapLRN2d``, ``nn.NLLLoss2d``,
``nn.Buffer``, ``nn.Container``; ``nn.SyncBatchNorm`` in one process (its multi-rank
case is in tests/distributed/test_collectives_mpi.py).

Values and gradients against NumPy references (central differences) on every backend
(tiny shapes under the simulator) and against PyTorch on the CPU."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, ShapeError
from tests.helpers import as_numpy, assert_close
from tests.nn.reference import compare, cross_entropy

RNG = np.random.default_rng(14)


def _reduce(loss, reduction):
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


# --- multilabel_margin_loss -------------------------------------------------------------------
TARGETS = np.array([[3, 0, -1, 1], [1, 2, 3, -1], [0, 0, -1, 2]])  # -1 ends; a repeat counts twice


def _multilabel_margin(x, target, reduction):
    """PyTorch's loops: each listed class j against each unlisted class i."""
    rows, classes = x.reshape(-1, x.shape[-1]), x.shape[-1]
    losses = []
    for row, labels in zip(rows, target.reshape(rows.shape)):
        listed = []
        for label in labels:
            if label < 0:
                break
            listed.append(label)
        total = 0.0
        for j in listed:
            for i in range(classes):
                if i not in listed:
                    total += max(0.0, 1.0 - row[j] + row[i])
        losses.append(total / classes)
    loss = np.array(losses).reshape(x.shape[:-1])
    return _reduce(loss, reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_matches_references(reduction, device, simulated, reference):
    rows = 2 if simulated else 3
    x = RNG.standard_normal((rows, 4))
    target = TARGETS[:rows]
    compare(
        reference,
        lambda a: F.multilabel_margin_loss(
            a, kg.tensor(target, device=device), reduction=reduction
        ),
        lambda a: _multilabel_margin(a, target, reduction),
        lambda torch, a: torch.nn.functional.multilabel_margin_loss(
            a, torch.tensor(target), reduction=reduction
        ),
        [x],
        device,
        rtol=1e-6,
        atol=1e-8,
    )


def test_multilabel_margin_loss_of_one_sample_and_its_module(reference):
    x, target = RNG.standard_normal(5), np.array([4, 1, -1, 0, 9])  # values after -1 unused
    target[4] = 2
    compare(
        reference,
        lambda a: kg.nn.MultiLabelMarginLoss()(a, kg.tensor(target)),
        lambda a: _multilabel_margin(a[None], target[None], "mean"),
        lambda torch, a: torch.nn.MultiLabelMarginLoss()(a, torch.tensor(target)),
        [x],
        "cpu",
        rtol=1e-6,
    )


def test_multilabel_margin_loss_refuses_what_pytorch_refuses():
    x = kg.zeros(2, 4)
    with pytest.raises(RuntimeError, match="flat position 2 is out of range"):
        F.multilabel_margin_loss(x, kg.tensor([[0, -1, 4, 1], [0, 1, 2, 3]]))  # even after -1
    with pytest.raises(IndexError, match="out of range"):
        F.multilabel_margin_loss(x, kg.tensor([[-2, 0, 0, 0], [0, 1, 2, 3]]))
    with pytest.raises(ShapeError, match="must have the input's shape"):
        F.multilabel_margin_loss(x, kg.tensor([[0, 1, -1]]))
    with pytest.raises(ShapeError, match=r"\(C,\) or \(N, C\)"):
        F.multilabel_margin_loss(kg.zeros(2, 3, 4), kg.zeros(2, 3, 4, dtype=kg.int64))
    with pytest.raises(TypeError, match="integer class indices"):
        F.multilabel_margin_loss(x, kg.zeros(2, 4))


def test_legacy_size_average_and_reduce_decide_the_reduction_with_a_warning():
    x, target = kg.tensor(RNG.standard_normal((3, 4))), kg.tensor(TARGETS)
    per_sample = F.multilabel_margin_loss(x, target, reduction="none")
    with pytest.warns(UserWarning, match="reduction='sum'"):
        summed = F.multilabel_margin_loss(x, target, size_average=False)
    with pytest.warns(UserWarning, match="reduction='none'"):
        module = kg.nn.MultiLabelMarginLoss(reduce=False)
    assert_close(summed, per_sample.sum().item(), rtol=1e-6)
    assert_close(module(x, target), per_sample.numpy())


# --- triplet_margin_with_distance_loss --------------------------------------------------------
def _l1(a, b):
    return abs(a - b).sum(-1)


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_triplet_margin_with_distance_loss_matches_references(swap, reduction, device, reference):
    arrays = [RNG.standard_normal((3, 4)) for _ in range(3)]

    def numpy_fn(a, p, n):
        negative = np.minimum(_l1(a, n), _l1(p, n)) if swap else _l1(a, n)
        return _reduce(np.maximum(0.0, 0.5 + _l1(a, p) - negative), reduction)

    options = {"margin": 0.5, "swap": swap, "reduction": reduction}
    compare(
        reference,
        lambda a, p, n: F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=_l1, **options
        ),
        numpy_fn,
        lambda torch, a, p, n: torch.nn.functional.triplet_margin_with_distance_loss(
            a, p, n, distance_function=_l1, **options
        ),
        arrays,
        device,
        rtol=1e-6,
        atol=1e-8,
    )


@pytest.mark.torch
def test_triplet_margin_with_distance_loss_module_defaults_to_pairwise_distance():
    import torch

    arrays = [RNG.standard_normal((4, 3)) for _ in range(3)]
    mine = kg.nn.TripletMarginWithDistanceLoss(swap=True)
    theirs = torch.nn.TripletMarginWithDistanceLoss(swap=True)
    assert repr(mine) == repr(theirs)
    compare("torch", mine, None, lambda torch, *t: theirs(*t), arrays, "cpu", rtol=1e-6)
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        kg.nn.TripletMarginWithDistanceLoss(margin=0)
    with pytest.raises(ShapeError, match="same number of dims"):
        F.triplet_margin_with_distance_loss(kg.zeros(2, 3), kg.zeros(2, 3), kg.zeros(3))


# --- linear_cross_entropy ---------------------------------------------------------------------
LINEAR_CE_CASES = {
    "batched": ((4, 5), (3, 5), None, lambda: RNG.integers(0, 3, 4), {}),
    "unbatched": ((5,), (3, 5), (3,), lambda: np.array(2), {"label_smoothing": 0.2}),
    "k-dim with bias": ((4, 5), (3, 2, 5), (3, 2), lambda: RNG.integers(0, 3, (4, 2)), {}),
    "ignore index": ((4, 5), (3, 5), None, lambda: np.array([0, 7, 2, 7]), {"ignore_index": 7}),
    "probabilities": ((4, 5), (3, 5), (3,), lambda: RNG.dirichlet(np.ones(3), 4), {}),
    "weighted sum": ((4, 5), (3, 5), None, lambda: RNG.integers(0, 3, 4), {"reduction": "sum"}),
}


@pytest.mark.parametrize("case", list(LINEAR_CE_CASES))
def test_linear_cross_entropy_is_linear_then_cross_entropy(case, device, simulated, reference):
    if simulated and case not in ("batched", "k-dim with bias"):
        pytest.skip("the CPU pass covers the options; two cases on the simulator")
    input_shape, weight_shape, bias_shape, make_target, options = LINEAR_CE_CASES[case]
    target = make_target()
    arrays = [RNG.standard_normal(input_shape), RNG.standard_normal(weight_shape)]
    if bias_shape is not None:
        arrays.append(RNG.standard_normal(bias_shape))
    class_weight = RNG.random(3) + 0.5 if case == "weighted sum" else None

    def numpy_fn(x, w, b=None):
        logits = x @ w.reshape(-1, x.shape[-1]).T + (0 if b is None else b.reshape(-1))
        logits = logits.reshape(x.shape[:-1] + w.shape[:-1])
        ignore = options.get("ignore_index", -100)
        return cross_entropy(
            logits,
            target,
            class_weight,
            ignore,
            options.get("reduction", "mean"),
            options.get("label_smoothing", 0.0),
        )

    def kg_fn(x, w, b=None):
        weight = None if class_weight is None else kg.tensor(class_weight, device=device)
        return F.linear_cross_entropy(
            x, w, kg.tensor(target, device=device), linear_bias=b, weight=weight, **options
        )

    def torch_fn(torch, x, w, b=None):
        weight = None if class_weight is None else torch.tensor(class_weight)
        return torch.nn.functional.linear_cross_entropy(
            x, w, torch.tensor(target), linear_bias=b, weight=weight, **options
        )

    compare(reference, kg_fn, numpy_fn, torch_fn, arrays, device, rtol=1e-6, atol=1e-8)


@pytest.mark.torch
def test_linear_cross_entropy_loss_loads_pytorch_state_dicts():
    import torch

    theirs = torch.nn.LinearCrossEntropyLoss(5, 3, out_features=(2,), bias=True).double()
    mine = kg.nn.LinearCrossEntropyLoss(5, 3, out_features=(2,), bias=True, dtype=kg.float64)
    assert repr(mine) == repr(theirs)
    mine.load_state_dict({k: kg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x, target = RNG.standard_normal((4, 5)), RNG.integers(0, 3, (4, 2))
    expected = theirs(torch.tensor(x), torch.tensor(target))
    expected.backward()
    got = mine(kg.tensor(x), kg.tensor(target))
    got.backward()
    assert_close(got, expected.item(), rtol=1e-10)
    assert_close(mine.linear.weight.grad, theirs.linear.weight.grad.numpy(), rtol=1e-10)
    assert_close(mine.linear.bias.grad, theirs.linear.bias.grad.numpy(), rtol=1e-10)


@pytest.mark.torch
def test_linear_cross_entropy_options_are_accepted_and_change_nothing():
    import torch

    x, w, target = RNG.standard_normal((6, 4)), RNG.standard_normal((5, 4)), RNG.integers(0, 5, 6)
    mine = kg.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    theirs = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=2)
    assert repr(mine) == repr(theirs)
    got = F.linear_cross_entropy(kg.tensor(x), kg.tensor(w), kg.tensor(target), options=mine)
    expected = torch.nn.functional.linear_cross_entropy(
        torch.tensor(x), torch.tensor(w), torch.tensor(target), options=theirs
    )
    assert_close(got, expected.item(), rtol=1e-10)


def test_linear_cross_entropy_refuses_what_pytorch_refuses():
    x, w = kg.zeros(2, 4), kg.zeros(3, 4)
    with pytest.raises(ShapeError, match="in_features"):
        F.linear_cross_entropy(x, kg.zeros(3, 5), kg.tensor([0, 1]))
    with pytest.raises(ShapeError, match="linear_bias of shape"):
        F.linear_cross_entropy(x, w, kg.tensor([0, 1]), linear_bias=kg.zeros(2))
    with pytest.raises(ShapeError, match="batched"):
        F.linear_cross_entropy(kg.zeros(4), kg.zeros(3, 2, 4), kg.tensor(0))
    with pytest.raises(RuntimeError, match="ignore_index cannot be given"):
        F.linear_cross_entropy(x, w, kg.zeros(2, 3), ignore_index=1)
    with pytest.raises(ShapeError, match="1-d or 2-d input"):
        F.linear_cross_entropy(kg.zeros(2, 2, 4), w, kg.tensor([0, 1]))
    with pytest.raises(ArgumentError, match="label_smoothing"):
        kg.nn.LinearCrossEntropyLoss(4, 3, label_smoothing=1.5)


# --- AdaptiveLogSoftmaxWithLoss ----------------------------------------------------------------
@pytest.mark.torch
@pytest.mark.parametrize("head_bias", [False, True])
def test_adaptive_log_softmax_matches_pytorch_with_its_weights(head_bias):
    import torch

    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=head_bias)
    theirs = theirs.double()
    mine = kg.nn.AdaptiveLogSoftmaxWithLoss(
        8, 10, [3, 6], div_value=2.0, head_bias=head_bias, dtype=kg.float64
    )
    assert repr(mine) == repr(theirs)
    state = {k: kg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    assert list(state) == list(mine.state_dict())
    mine.load_state_dict(state)
    x, target = RNG.standard_normal((7, 8)), np.array([0, 9, 4, 2, 6, 5, 3])
    xt = torch.tensor(x, requires_grad=True)
    expected = theirs(xt, torch.tensor(target))
    xk = kg.tensor(x, requires_grad=True)
    got = mine(xk, kg.tensor(target))
    assert got._fields == ("output", "loss")
    assert_close(got.output, expected.output.detach().numpy(), rtol=1e-10)
    assert_close(got.loss, expected.loss.item(), rtol=1e-10)
    upstream = RNG.standard_normal(7)
    (expected.output * torch.tensor(upstream)).sum().add(expected.loss).backward()
    (got.output * kg.tensor(upstream)).sum().add(got.loss).backward()
    assert_close(xk.grad, xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    named = dict(theirs.named_parameters())
    for name, parameter in mine.named_parameters():
        assert_close(parameter.grad, named[name].grad.numpy(), rtol=1e-9, atol=1e-12)
    assert_close(mine.log_prob(kg.tensor(x)), theirs.log_prob(torch.tensor(x)).detach().numpy())
    # predict: all in the shortlist, none, and mixed rows, as PyTorch
    for rows in (x, x * 0 + state["head.weight"].numpy()[0], x[:3]):
        assert mine.predict(kg.tensor(rows)).tolist() == theirs.predict(torch.tensor(rows)).tolist()
    one = mine(kg.tensor(x[0]), kg.tensor(target[0]))
    assert one.output.shape == () and abs(one.output.item() - got.output[0].item()) < 1e-12


def test_adaptive_log_softmax_sums_to_one_and_checks_its_arguments(device, simulated):
    asm = kg.nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2, 4], div_value=2.0).to(device)
    x = kg.tensor(RNG.standard_normal((2 if simulated else 5, 4)), dtype=kg.float32, device=device)
    log_prob = asm.log_prob(x)
    assert_close(log_prob.exp().sum(1), np.ones(x.shape[0]), rtol=1e-5)
    target = np.array([0, 5, 3, 1, 4])[: x.shape[0]]
    out = asm(x, kg.tensor(target, device=device))
    assert_close(out.output, as_numpy(log_prob)[np.arange(x.shape[0]), target], rtol=1e-5)
    with pytest.raises(RuntimeError, match=r"should be in \[0, 5\]"):
        asm(x, kg.tensor([6] * x.shape[0], device=device))
    for cutoffs in ([], [4, 2], [0, 3], [2, 6], [2, 2]):
        with pytest.raises(ValueError, match="cutoffs"):
            kg.nn.AdaptiveLogSoftmaxWithLoss(4, 6, cutoffs)
    with pytest.raises(ShapeError, match="same size in the batch"):
        asm(x, kg.tensor([0, 1, 2], device=device))


# --- channel_shuffle, CrossMapLRN2d, upsampling aliases, NLLLoss2d ----------------------------
def test_channel_shuffle_matches_references(device, reference):
    x = RNG.standard_normal((2, 6, 3))

    def numpy_fn(a):
        return a.reshape(2, 3, 2, 3).transpose(0, 2, 1, 3).reshape(2, 6, 3)

    compare(
        reference,
        lambda a: kg.nn.ChannelShuffle(3)(a),
        numpy_fn,
        lambda torch, a: torch.nn.functional.channel_shuffle(a, 3),
        [x],
        device,
    )


def test_channel_shuffle_refuses_what_pytorch_refuses():
    with pytest.raises(ShapeError, match="divisible by groups = 4"):
        F.channel_shuffle(kg.zeros(1, 6, 2), 4)
    with pytest.raises(ShapeError, match="more than 2 dims"):
        F.channel_shuffle(kg.zeros(2, 6), 3)
    with pytest.raises(ArgumentError, match="positive int"):
        F.channel_shuffle(kg.zeros(1, 6, 2), 0)
    assert repr(kg.nn.ChannelShuffle(2)) == "ChannelShuffle(groups=2)"


def _cross_map_lrn(x, size, alpha, beta, k):
    """PyTorch's loop: the window of channel c runs from channel 0 (never dropped) and
    from c - p + 1 to c + p - 1, p = (size - 1) // 2 + 1."""
    channels = x.shape[1]
    reach = int((size - 1) / 2 + 1)
    out = np.empty_like(x)
    for c in range(channels):
        picked = {0} | set(range(max(1, c - reach + 1), min(c + reach - 1, channels - 1) + 1))
        sums = sum(x[:, j] ** 2 for j in sorted(picked))
        out[:, c] = x[:, c] * (k + alpha / size * sums) ** -beta
    return out


@pytest.mark.parametrize(("size", "channels"), [(3, 5), (4, 2), (1, 3)])
def test_cross_map_lrn2d_gives_pytorch_values_and_their_exact_gradient(
    size, channels, device, simulated, reference
):
    if simulated and size != 3:
        pytest.skip("one window on the simulator")
    x = RNG.standard_normal((2, channels, 2, 2))
    layer = kg.nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=1.5)
    if reference == "torch":
        import torch

        expected = torch.nn.CrossMapLRN2d(size, alpha=0.5, beta=0.75, k=1.5)(torch.tensor(x))
        assert_close(layer(kg.tensor(x)), expected.numpy(), rtol=1e-10)
        assert repr(layer) == f"CrossMapLRN2d({size}, alpha=0.5, beta=0.75, k=1.5)"
        return  # PyTorch's backward is not the derivative of its forward (gradcheck fails)
    compare(
        reference,
        layer,
        lambda a: _cross_map_lrn(a, size, 0.5, 0.75, 1.5),
        None,
        [x],
        device,
        rtol=1e-5,
    )


def test_cross_map_lrn2d_takes_only_4d_input():
    with pytest.raises(ShapeError, match="4-d"):
        kg.nn.CrossMapLRN2d(3)(kg.zeros(2, 3, 4))


@pytest.mark.parametrize(
    ("name", "options", "mode"),
    [
        ("upsample_nearest", {"scale_factor": 2}, {"mode": "nearest"}),
        ("upsample_bilinear", {"size": (3, 5)}, {"mode": "bilinear", "align_corners": True}),
    ],
)
def test_deprecated_upsampling_warns_and_interpolates(name, options, mode, reference):
    x = RNG.standard_normal((1, 2, 2, 3))
    with pytest.warns(UserWarning, match=f"`nn.functional.{name}` is deprecated"):
        got = getattr(F, name)(kg.tensor(x), **options)
    assert_close(got, F.interpolate(kg.tensor(x), **options, **mode).numpy())
    if reference == "torch":
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = getattr(torch.nn.functional, name)(torch.tensor(x), **options)
        assert_close(got, expected.numpy(), rtol=1e-6)


@pytest.mark.torch
def test_nll_loss_2d_is_nll_loss_with_pytorch_arguments_and_warning():
    import torch

    log_p = np.log(RNG.dirichlet(np.ones(3), (2, 2, 2))).transpose(0, 3, 1, 2).copy()
    target = RNG.integers(0, 3, (2, 2, 2))
    weight = RNG.random(3) + 0.5
    with pytest.warns(UserWarning, match="NLLLoss2d has been deprecated"):
        mine = kg.nn.NLLLoss2d(kg.tensor(weight), None, 1, None, "sum")  # PyTorch's order
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.NLLLoss2d(torch.tensor(weight), None, 1, None, "sum")
    assert isinstance(mine, kg.nn.NLLLoss)
    compare(
        "torch",
        lambda a: mine(a, kg.tensor(target)),
        None,
        lambda torch, a: theirs(a, torch.tensor(target)),
        [log_p],
        "cpu",
        rtol=1e-10,
    )


# --- Buffer, Container -------------------------------------------------------------------------
def _scaled(lib):
    class Scaled(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = lib.nn.Buffer(lib.ones(2) * 3)
            self.cache = lib.nn.Buffer(lib.zeros(1), persistent=False)
            self.plain = lib.ones(1)  # a tensor attribute is not a buffer

    return Scaled()


def test_assigning_a_buffer_registers_it_as_pytorch_does(reference):
    if reference == "torch":
        import torch as lib
    else:
        lib = kg
    module = _scaled(lib)
    assert [name for name, _ in module.named_buffers()] == ["scale", "cache"]
    assert list(module.state_dict()) == ["scale"]
    assert module.scale.tolist() == [3.0, 3.0] and not module.scale.requires_grad
    assert isinstance(module.scale, lib.nn.Buffer)


def test_buffer_shares_memory_and_moves_with_the_module():
    data = kg.zeros(3)
    module = kg.nn.Module()
    module.stats = kg.nn.Buffer(data)
    data.add_(1.0)
    assert module.stats.tolist() == [1.0, 1.0, 1.0]
    module.to(kg.float64)
    assert module.stats.dtype == kg.float64 and "stats" in module.state_dict()
    weight = kg.nn.Buffer(kg.ones(2, requires_grad=True))
    assert weight.requires_grad and weight.is_leaf


def test_container_warns_and_holds_its_keyword_modules():
    with pytest.warns(FutureWarning, match="`nn.Container` is deprecated"):
        box = kg.nn.Container(first=kg.nn.Linear(2, 3), second=kg.nn.ReLU())
    assert [name for name, _ in box.named_children()] == ["first", "second"]


# --- SyncBatchNorm in one process --------------------------------------------------------------
@pytest.mark.torch
def test_sync_batch_norm_alone_is_pytorchs_batch_norm():
    """Without a process group PyTorch's SyncBatchNorm is BatchNorm, and so is this one:
    two training steps (values, gradients, running statistics), then eval mode."""
    import torch

    mine = kg.nn.SyncBatchNorm(3, momentum=0.3, dtype=kg.float64)
    theirs = torch.nn.SyncBatchNorm(3, momentum=0.3).double()
    assert repr(mine) == repr(theirs)
    for step in range(2):
        x = RNG.standard_normal((4, 3, 2, 2)) + step
        compare("torch", mine, None, lambda torch, a: theirs(a), [x], "cpu", rtol=1e-10)
    assert_close(mine.running_var, theirs.running_var.numpy(), rtol=1e-10)
    mine.eval(), theirs.eval()
    x = RNG.standard_normal((2, 3, 5))
    assert_close(mine(kg.tensor(x)), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="at least 2D"):
        mine(kg.zeros(3))


def test_sync_batch_norm_statistics_of_a_group_of_one_are_batch_norms(device, simulated):
    """The synchronised path (per-rank mean and M2 gathered, combined by counts) run on a
    group of one process gives BatchNorm's values, gradients and running statistics."""
    dist = pytest.importorskip("kernelgrad.distributed")
    pytest.importorskip("mpi4py")
    shape = (3, 2, 2) if simulated else (5, 3, 4)
    x = RNG.standard_normal(shape) * 3 + 2
    sync = kg.nn.SyncBatchNorm(shape[1], momentum=None, dtype=kg.float64).to(device)
    plain = kg.nn.BatchNorm1d(shape[1], momentum=None, dtype=kg.float64).to(device)
    with kg.no_grad():
        for layer in (sync, plain):
            layer.weight.copy_(kg.tensor([1.5, -0.5, 2.0][: shape[1]], device=device))
    upstream = kg.tensor(RNG.standard_normal(shape), device=device)
    group = dist.init_process_group("mpi")
    try:
        xs = kg.tensor(x, device=device, requires_grad=True)
        sync.num_batches_tracked.add_(1)
        ys = sync._synchronised(xs, group, 1.0)
        (ys * upstream).sum().backward()  # all-reduces the statistics' gradients
    finally:
        dist.destroy_process_group()
    xp = kg.tensor(x, device=device, requires_grad=True)
    yp = plain(xp)
    (yp * upstream).sum().backward()
    assert_close(ys, as_numpy(yp.detach()), rtol=1e-10, atol=1e-12)
    assert_close(xs.grad, as_numpy(xp.grad), rtol=1e-9, atol=1e-12)
    assert_close(sync.weight.grad, as_numpy(plain.weight.grad), rtol=1e-9, atol=1e-12)
    assert_close(sync.running_mean, as_numpy(plain.running_mean), rtol=1e-10)
    assert_close(sync.running_var, as_numpy(plain.running_var), rtol=1e-10)


@pytest.mark.torch
def test_convert_sync_batchnorm_replaces_batch_norms_as_pytorch_does():
    import torch

    def build(nn):
        return nn.Sequential(
            nn.Conv2d(1, 2, 3),
            nn.BatchNorm2d(2, bias=False),
            nn.Sequential(nn.BatchNorm1d(4, affine=False), nn.InstanceNorm1d(4)),
        )

    kg.manual_seed(0)
    model = build(kg.nn)
    model[1].eval()
    weight = model[1].weight
    converted = kg.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    theirs = torch.nn.SyncBatchNorm.convert_sync_batchnorm(build(torch.nn))
    assert repr(converted) == repr(theirs)
    assert list(converted.state_dict()) == list(theirs.state_dict())
    assert converted[1].weight is weight and not converted[1].training
    assert converted[2][0].training and converted[1].bias is None
    single = kg.nn.SyncBatchNorm.convert_sync_batchnorm(kg.nn.BatchNorm3d(2))
    assert type(single) is kg.nn.SyncBatchNorm
    features = converted[0](kg.randn(2, 1, 5, 5))
    layer = converted[1]  # eval mode: the running statistics it took over
    expected = F.batch_norm(features, layer.running_mean, layer.running_var, weight, None, False)
    assert_close(layer(features), expected.numpy())
