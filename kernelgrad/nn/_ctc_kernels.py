"""The CTC loss (``F.ctc_loss``) as two ``@kg.kernel`` kernels: the forward (alpha)
recursion and the backward (beta) recursion with the gradient, one work item per batch
element with the loops over time and alignment states inside.

Notation (Graves et al. 2006, and PyTorch's ``LossCTC.cpp``, whose order of operations
these kernels keep): a target ``l`` of length S is extended with blanks to ``l'`` of
2S + 1 states (``l'[s]`` is the blank for even s, ``l[s // 2]`` for odd s). In log space,

    alpha[0, 0] = lp[0, blank],  alpha[0, 1] = lp[0, l'[1]]  (other states -inf)
    alpha[t, s] = logsumexp(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2]) + lp[t, l'[s]]

where the s-2 term counts only when ``l'[s] != l'[s-2]`` (a label may not follow itself
without a blank between), and the loss is
``-logsumexp(alpha[T-1, 2S], alpha[T-1, 2S-1])``. Beta runs the same recursion backwards
from the last step, and the gradient with respect to the log-probabilities is PyTorch's:

    grad[t, c] = (exp(lp[t, c]) - exp(lcab[t, c] + nll - lp[t, c])) * grad_loss

with ``lcab[t, c] = logsumexp over s with l'[s] == c of alpha[t, s] + beta[t, s]``, and 0
for t at or past the sequence's input length. The second term alone is the derivative of
the loss with respect to ``lp``; the ``exp(lp)`` term makes it the gradient with respect
to the logits when ``lp`` is ``log_softmax(logits)`` (whose backward then subtracts
``exp(lp) * sum_c grad = exp(lp)``, the sum of the second term being 1 per step). PyTorch
returns this sum for any input, normalised or not; so do these kernels.

Every array is flat and contiguous: ``lp`` (T, N, C), ``log_alpha`` (N, T, width),
``log_beta`` (N, 2, width) (two rows, used alternately), ``grad`` (T, N, C); ``targets``
holds each sequence's labels from ``offsets[n]`` on (padded rows or concatenated
targets alike). Both compute in the log-probabilities' precision (module constants are
float32 in a float32 kernel, ``docs/kernels.md``).
"""

from __future__ import annotations

import math

import kernelgrad as kg

NEG_INF = -math.inf
INF = math.inf


@kg.kernel(parallel=True)
def ctc_alpha(
    log_alpha, nll, error, lp, targets, offsets, input_lengths, target_lengths, steps, batch,
    classes, width, blank,
):  # fmt: skip
    """Sequence n's forward variables (``log_alpha[n]``) and its loss ``nll[n]``. A label
    outside [0, classes) is reported in ``error`` (its value, and a 1)."""
    n = kg.index()
    length = input_lengths[n]
    target_length = target_lengths[n]
    first = offsets[n]
    states = 2 * target_length + 1
    base = n * steps * width
    bad = False
    for k in range(target_length):
        label = targets[first + k]
        if label < 0 or label >= classes:
            error[0] = label
            error[1] = 1
            bad = True
    if bad:
        nll[n] = 0.0
    elif length == 0:
        nll[n] = 0.0 if target_length == 0 else INF
    else:
        for s in range(states):
            log_alpha[base + s] = NEG_INF
        log_alpha[base] = lp[n * classes + blank]
        if target_length > 0:
            log_alpha[base + 1] = lp[n * classes + targets[first]]
        for t in range(1, length):
            row = base + t * width
            previous = row - width
            at = (t * batch + n) * classes
            for s in range(states):
                label = blank
                if s % 2 == 1:
                    label = targets[first + s // 2]
                la1 = log_alpha[previous + s]
                peak = la1
                la2 = NEG_INF
                la3 = NEG_INF
                if s > 0:
                    la2 = log_alpha[previous + s - 1]
                    if la2 > peak:
                        peak = la2
                if s > 1 and s % 2 == 1 and targets[first + s // 2 - 1] != label:
                    la3 = log_alpha[previous + s - 2]
                    if la3 > peak:
                        peak = la3
                if peak == NEG_INF:  # cannot do -inf - -inf
                    peak = 0.0
                total = kg.exp(la1 - peak) + kg.exp(la2 - peak) + kg.exp(la3 - peak)
                log_alpha[row + s] = kg.log(total) + peak + lp[at + label]
        last = base + (length - 1) * width
        l1 = log_alpha[last + states - 1]
        l2 = NEG_INF
        if target_length > 0:
            l2 = log_alpha[last + states - 2]
        peak = max(l1, l2)
        if peak == NEG_INF:
            peak = 0.0
        nll[n] = -(kg.log(kg.exp(l1 - peak) + kg.exp(l2 - peak)) + peak)


@kg.kernel(parallel=True)
def ctc_gradient(
    grad, log_beta, lp, targets, offsets, input_lengths, target_lengths, log_alpha, nll,
    upstream, steps, batch, classes, width, blank, zero_infinity,
):  # fmt: skip
    """Sequence n's gradient ``grad[:, n, :]`` (see the module docstring), scaled by
    ``upstream[n]``; all zero when ``zero_infinity`` and the loss is infinite."""
    n = kg.index()
    length = input_lengths[n]
    target_length = target_lengths[n]
    first = offsets[n]
    states = 2 * target_length + 1
    loss = nll[n]
    scale = upstream[n]
    alphas = n * steps * width
    betas = n * 2 * width
    zeroed = zero_infinity and loss == INF
    for t in range(steps):
        at = (t * batch + n) * classes
        for c in range(classes):
            # lcab starts at -inf (log 0) on the steps the sequence has
            grad[at + c] = NEG_INF if t < length and not zeroed else 0.0
    if not zeroed:
        for step in range(length):
            t = length - 1 - step
            at = (t * batch + n) * classes
            row = betas + (t % 2) * width
            following = betas + ((t + 1) % 2) * width
            if step == 0:
                for s in range(states):
                    log_beta[row + s] = NEG_INF
                log_beta[row + states - 1] = lp[at + blank]
                if target_length > 0:
                    log_beta[row + states - 2] = lp[at + targets[first + target_length - 1]]
            else:
                for s in range(states):
                    label = blank
                    if s % 2 == 1:
                        label = targets[first + s // 2]
                    lb1 = log_beta[following + s]
                    peak = lb1
                    lb2 = NEG_INF
                    lb3 = NEG_INF
                    if s < states - 1:
                        lb2 = log_beta[following + s + 1]
                        if lb2 > peak:
                            peak = lb2
                    if s < states - 2 and s % 2 == 1 and targets[first + s // 2 + 1] != label:
                        lb3 = log_beta[following + s + 2]
                        if lb3 > peak:
                            peak = lb3
                    if peak == NEG_INF:
                        peak = 0.0
                    total = kg.exp(lb1 - peak) + kg.exp(lb2 - peak) + kg.exp(lb3 - peak)
                    log_beta[row + s] = kg.log(total) + peak + lp[at + label]
            # lcab[t, l'[s]] "log+=" alpha[t, s] + beta[t, s]
            for s in range(states):
                label = blank
                if s % 2 == 1:
                    label = targets[first + s // 2]
                both = log_alpha[alphas + t * width + s] + log_beta[row + s]
                collected = grad[at + label]
                if collected == NEG_INF:
                    grad[at + label] = both
                else:
                    peak = max(collected, both)
                    grad[at + label] = kg.log(kg.exp(collected - peak) + kg.exp(both - peak)) + peak
        for t in range(length):
            at = (t * batch + n) * classes
            for c in range(classes):
                value = lp[at + c]
                grad[at + c] = (kg.exp(value) - kg.exp(grad[at + c] + loss - value)) * scale
