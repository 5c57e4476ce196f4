"""F.ctc_loss / nn.CTCLoss / kg.ctc_loss: the per-sequence losses and their gradient
against a NumPy alpha-beta reference (every backend; tiny under the CUDA simulator),
the gradient through log_softmax against central differences, and values and gradients
against PyTorch (every reduction, both target layouts, repeated labels, impossible
alignments with and without zero_infinity, a blank other than 0, unbatched input,
non-normalised log-probabilities), and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

import kernelgrad as kg
import kernelgrad.nn.functional as F
from kernelgrad.errors import ArgumentError, BackwardError, DTypeError, IndexValueError, ShapeError
from tests.helpers import assert_close, check_grad

RNG = np.random.default_rng(14)


def _logsum(values):
    values = [v for v in values if v != -np.inf]
    return np.logaddexp.reduce(values) if values else -np.inf


def _reference(lp, labels, input_lengths, blank):
    """(losses (N,), PyTorch's gradient (T, N, C) of their sum) in float64, written from
    the definitions: alpha/beta over the blank-extended labels."""
    lp = lp.astype(np.float64)
    _, batch, classes = lp.shape
    losses = np.zeros(batch)
    grad = np.zeros_like(lp)
    for n in range(batch):
        ext = [blank if s % 2 == 0 else labels[n][s // 2] for s in range(2 * len(labels[n]) + 1)]
        states, length = len(ext), input_lengths[n]
        if length == 0:
            losses[n] = 0.0 if states == 1 else np.inf
            continue

        def skip(s, ext=ext):
            return s > 1 and ext[s] != ext[s - 2]

        alpha = np.full((length, states), -np.inf)
        alpha[0, : min(2, states)] = lp[0, n, ext[: min(2, states)]]
        for t in range(1, length):
            for s in range(states):
                terms = [alpha[t - 1, s]] + ([alpha[t - 1, s - 1]] if s else [])
                terms += [alpha[t - 1, s - 2]] if skip(s) else []
                alpha[t, s] = _logsum(terms) + lp[t, n, ext[s]]
        beta = np.full((length, states), -np.inf)
        beta[-1, max(states - 2, 0) :] = lp[length - 1, n, ext[max(states - 2, 0) :]]
        for t in range(length - 2, -1, -1):
            for s in range(states):
                terms = [beta[t + 1, s]] + ([beta[t + 1, s + 1]] if s + 1 < states else [])
                terms += [beta[t + 1, s + 2]] if s + 2 < states and skip(s + 2) else []
                beta[t, s] = _logsum(terms) + lp[t, n, ext[s]]
        losses[n] = -_logsum(alpha[-1, max(states - 2, 0) :])
        for t in range(length):
            for c in range(classes):
                both = _logsum([alpha[t, s] + beta[t, s] for s in range(states) if ext[s] == c])
                with np.errstate(invalid="ignore"):
                    grad[t, n, c] = np.exp(lp[t, n, c]) - np.exp(both + losses[n] - lp[t, n, c])
    return losses, grad


def _padded(labels, width=None):
    width = width or max(1, max(len(row) for row in labels))
    return np.array([row + [0] * (width - len(row)) for row in labels], dtype=np.int64)


# (labels, input lengths, blank, classes): repeated labels, a target that cannot fit its
# input (needs 3 steps, has 2), an empty target, a blank other than 0
CASES = [
    ([[1, 1], [2]], [4, 3], 0, 3),
    ([[1, 1], [2, 1], []], [2, 4, 3], 0, 3),
    ([[0, 2, 2], [1]], [4, 4], 3, 4),
]


@pytest.mark.parametrize("labels, lengths, blank, classes", CASES)
def test_losses_and_gradient_match_the_alpha_beta_reference(
    labels, lengths, blank, classes, device, simulated
):
    dtypes = (kg.float32,) if simulated else (kg.float32, kg.float64)
    for dtype in dtypes:
        steps = max(lengths)
        lp = RNG.standard_normal((steps, len(labels), classes))  # not normalised
        x = kg.tensor(lp, dtype=dtype, device=device, requires_grad=True)
        targets = kg.tensor(_padded(labels), device=device)
        target_lengths = [len(row) for row in labels]
        losses = F.ctc_loss(x, targets, lengths, target_lengths, blank, reduction="none")
        upstream = RNG.standard_normal(len(labels))
        upstream[~np.isfinite(losses.detach().cpu().numpy())] = 1.0
        (losses * kg.tensor(upstream, dtype=dtype, device=device)).sum().backward()
        expected, grad = _reference(lp, labels, lengths, blank)
        tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == kg.float32 else {}
        assert losses.dtype == dtype
        assert_close(losses, expected, **tolerance)
        assert_close(x.grad, grad * upstream[None, :, None], **tolerance)


def test_gradient_through_log_softmax_matches_central_differences():
    """PyTorch's gradient rule (the exp(lp) term) is the true gradient once the
    log-probabilities come from log_softmax. (CPU only: the kernels' CUDA form is checked
    against the reference above, and central differences take many launches.)"""
    steps, classes = 5, 4
    logits = RNG.standard_normal((steps, 2, classes))

    def loss(z):
        lp = z.log_softmax(2)
        return F.ctc_loss(lp, kg.tensor([[1, 2], [2, 0]], device=z.device), [steps, steps - 1],
                          [2, 1], reduction="none")  # fmt: skip

    check_grad(loss, logits)


def test_concatenated_targets_and_length_tensors(device):
    lp = RNG.standard_normal((4, 2, 3))
    x = kg.tensor(lp, device=device).log_softmax(2)
    padded = F.ctc_loss(
        x, kg.tensor([[1, 2], [2, 0]], device=device), [4, 3], [2, 1], reduction="none"
    )
    flat = F.ctc_loss(
        x, kg.tensor([1, 2, 2], device=device), kg.tensor([4, 3], dtype=kg.int32, device=device),
        kg.tensor([2, 1], device=device), reduction="none",
    )  # fmt: skip
    assert_close(flat, padded.cpu().numpy())
    unbatched = F.ctc_loss(
        x[:, 0], kg.tensor([1, 2], device=device), 4, kg.tensor(2), reduction="none"
    )
    assert unbatched.shape == ()
    assert_close(unbatched, padded.cpu().numpy()[0])


def _torch_pair(torch, lp, dtype, requires_grad=True):
    ours = kg.tensor(lp, dtype=dtype, requires_grad=requires_grad)
    theirs = torch.tensor(lp, dtype=torch.float32 if dtype == kg.float32 else torch.float64)
    return ours, theirs.requires_grad_(requires_grad)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", [kg.float32, kg.float64])
def test_values_and_gradients_match_pytorch(dtype):
    torch = pytest.importorskip("torch")
    labels = [[1, 1, 2], [3], [2, 3, 3, 1], [], [1, 2, 1]]
    input_lengths = [7, 5, 3, 4, 6]  # sequence 2 cannot fit its target: an infinite loss
    target_lengths = [len(row) for row in labels]
    concatenated = np.array([label for row in labels for label in row], dtype=np.int64)
    normalised = RNG.standard_normal((7, 5, 5))
    normalised -= np.log(np.exp(normalised).sum(-1, keepdims=True))
    tolerance = {"rtol": 2e-5, "atol": 2e-6} if dtype == kg.float32 else {"rtol": 1e-10}
    raw = RNG.standard_normal((7, 5, 5))
    padded = _padded(labels, 5)
    for lp, targets, blank in (
        (normalised, padded, 0), (normalised, concatenated, 4), (raw, padded, 4),
        (raw, concatenated, 0),
    ):  # fmt: skip
        for reduction in ("none", "mean", "sum"):
            for zero_infinity in (False, True):
                ours, theirs = _torch_pair(torch, lp, dtype)
                options = {"blank": blank, "reduction": reduction, "zero_infinity": zero_infinity}
                got = F.ctc_loss(ours, kg.tensor(targets), input_lengths, target_lengths, **options)
                want = torch.nn.functional.ctc_loss(
                    theirs, torch.tensor(targets), input_lengths, target_lengths, **options
                )
                assert_close(got, want.detach().numpy(), **tolerance)
                weights = RNG.standard_normal(got.shape)
                (got * kg.tensor(weights, dtype=dtype)).sum().backward()
                (want * torch.tensor(weights, dtype=want.dtype)).sum().backward()
                assert_close(ours.grad, theirs.grad.numpy(), **tolerance)


@pytest.mark.torch
def test_module_top_level_function_and_unbatched_input_match_pytorch():
    torch = pytest.importorskip("torch")
    lp = RNG.standard_normal((6, 4))
    ours, theirs = _torch_pair(torch, lp, kg.float64)
    got = kg.nn.CTCLoss(blank=3, zero_infinity=True)(ours, kg.tensor([1, 1, 2]), kg.tensor(6),
                                                      kg.tensor(3))  # fmt: skip
    want = torch.nn.CTCLoss(blank=3, zero_infinity=True)(
        theirs, torch.tensor([1, 1, 2]), torch.tensor(6), torch.tensor(3)
    )
    assert_close(got, want.detach().numpy(), rtol=1e-12)
    got.backward()
    want.backward()
    assert_close(ours.grad, theirs.grad.numpy(), rtol=1e-10)
    assert repr(kg.nn.CTCLoss(blank=2)) == repr(torch.nn.CTCLoss(blank=2)) == "CTCLoss()"
    # torch.ctc_loss takes the reduction as an enum: 0 none, 1 mean, 2 sum
    batched = kg.tensor(lp[:, None])
    for code in (0, 1, 2):
        assert_close(
            kg.ctc_loss(batched, kg.tensor([[1, 2]]), [6], [2], 0, code, False),
            torch.ctc_loss(
                torch.tensor(lp[:, None]), torch.tensor([[1, 2]]), [6], [2], 0, code, False
            ).numpy(),
            rtol=1e-12,
        )


def test_refusals():
    x = kg.randn(5, 2, 4).log_softmax(2)
    targets = kg.tensor([[1, 2], [3, 1]])
    with pytest.raises(IndexValueError, match="target label 4 is out of range"):
        F.ctc_loss(x, kg.tensor([[1, 4], [3, 1]]), [5, 5], [2, 2])
    with pytest.raises(ArgumentError, match="blank must be in label range"):
        F.ctc_loss(x, targets, [5, 5], [2, 2], blank=4)
    with pytest.raises(ArgumentError, match="at most 5"):
        F.ctc_loss(x, targets, [6, 5], [2, 2])
    with pytest.raises(ArgumentError, match="at least 0"):
        F.ctc_loss(x, targets, [5, 5], [-1, 2])
    with pytest.raises(ShapeError, match="batch_size"):
        F.ctc_loss(x, targets, [5, 5, 5], [2, 2])
    with pytest.raises(ShapeError, match="does not fit"):
        F.ctc_loss(x, targets, [5, 5], [3, 2])
    with pytest.raises(ShapeError, match="sum\\(target_lengths\\) = 4"):
        F.ctc_loss(x, kg.tensor([1, 2, 3]), [5, 5], [2, 2])
    with pytest.raises(ShapeError, match="must not be empty"):
        F.ctc_loss(x[:0], targets, [0, 0], [0, 0])
    with pytest.raises(DTypeError, match="integral"):
        F.ctc_loss(x, targets, kg.tensor([5.0, 5.0]), [2, 2])
    with pytest.raises(DTypeError, match="float32 or float64"):
        F.ctc_loss(kg.zeros(5, 2, 4, dtype=kg.int64), targets, [5, 5], [2, 2])
    with pytest.raises(ArgumentError, match="reduction"):
        F.ctc_loss(x, targets, [5, 5], [2, 2], reduction="batchmean")
    leaf = x.detach().requires_grad_()
    with pytest.raises(BackwardError, match="second-order"):
        F.ctc_loss(leaf, targets, [5, 5], [2, 2]).backward(create_graph=True)
