"""Convolution kernels written with ``@kg.kernel`` (one source for the CPU and CUDA).

Layout. Convolution works on images stored *batch innermost*: a tensor of logical shape
(N, C, H, W) lies in memory as (C, H, W, N) ("CHWN"). Then the batch values of one
pixel are contiguous, and so is a whole image row of all images: row h of channel c is
the ``W * N`` values starting at ``(c * H + h) * W * N``, and shifting it by j pixels
is shifting the start by ``j * N``. Every kernel below works on such runs:

* direct convolution (stride 1): output row (o, oh) is
  ``bias[o] + sum over (c, i, j) of weight[o, c, i, j] * x[c, oh + i, j : j + OW, :]``,
  each term one contiguous multiply-add over ``OW * N`` values;
* its weight gradient: one dot product of two such runs per output row and tap;
* its input gradient, and col2im for the patch-matrix path: each input row gathers the
  shifted output-gradient rows that read it.

Every tensor argument is a flat (1-D, contiguous) tensor; kernels index it with explicit
offsets. Runs are taken as slices (``row = x[a:b]``): with a zero-based loop index the
compiler knows that every index is non-negative and vectorises the loop.

The filter width, dilation and channel pairing are static arguments (``static=`` of
``@kg.kernel``): a launch compiles only the branch for its filter (5x5, 3x3 or general),
which took LeNet-5's first step from 2.9 s to ~1 s of compiling these three kernels.
"""

from __future__ import annotations

import numpy as np

import kernelgrad as kg


@kg.kernel(parallel=True, fastmath=True, static=("kw", "dw", "pairs"))
def conv_forward_direct(
    out, x, weight, bias, group_in, group_out, kh, kw, hp, wp, dh, dw, out_rows, batch, run,
    pairs,
):  # fmt: skip
    """out[o, oh, :, :] = bias[o] + sum over (c, i, j) of weight[o, c, i, j] times the
    input row (c, oh + i * dh) shifted by j * dw pixels.

    One work item per output row (o, oh), or with ``pairs`` (an even number of output
    channels per group) per two rows (o, oh) and (o + 1, oh), which share the loads of
    the input. ``out`` is (O, OH, OW, N), ``x`` the padded input (C, hp, wp, N),
    ``weight`` (O, C / groups, kh, kw), ``bias`` (O,); ``run = OW * N``."""
    item = kg.index()
    block = item // out_rows
    oh = item % out_rows
    o = 2 * block if pairs else block
    first_channel = (o // group_out) * group_in
    row = o * out_rows + oh
    acc = out[row * run : row * run + run]
    start = bias[o]
    for p in range(run):
        acc[p] = start
    if pairs:
        row_b = row + out_rows
        acc_b = out[row_b * run : row_b * run + run]
        start_b = bias[o + 1]
        for p in range(run):
            acc_b[p] = start_b
    filter_size = group_in * kh * kw
    for c in range(group_in):
        for i in range(kh):
            s = ((first_channel + c) * hp + oh + i * dh) * wp * batch
            w_row = ((o * group_in + c) * kh + i) * kw
            if kw == 5 and dw == 1:
                w0 = weight[w_row]
                w1 = weight[w_row + 1]
                w2 = weight[w_row + 2]
                w3 = weight[w_row + 3]
                w4 = weight[w_row + 4]
                x0 = x[s : s + run]
                x1 = x[s + batch : s + batch + run]
                x2 = x[s + 2 * batch : s + 2 * batch + run]
                x3 = x[s + 3 * batch : s + 3 * batch + run]
                x4 = x[s + 4 * batch : s + 4 * batch + run]
                if pairs:
                    v0 = weight[w_row + filter_size]
                    v1 = weight[w_row + filter_size + 1]
                    v2 = weight[w_row + filter_size + 2]
                    v3 = weight[w_row + filter_size + 3]
                    v4 = weight[w_row + filter_size + 4]
                    for p in range(run):
                        a0 = x0[p]
                        a1 = x1[p]
                        a2 = x2[p]
                        a3 = x3[p]
                        a4 = x4[p]
                        acc[p] += w0 * a0 + w1 * a1 + w2 * a2 + w3 * a3 + w4 * a4
                        acc_b[p] += v0 * a0 + v1 * a1 + v2 * a2 + v3 * a3 + v4 * a4
                else:
                    for p in range(run):
                        acc[p] += w0 * x0[p] + w1 * x1[p] + w2 * x2[p] + w3 * x3[p] + w4 * x4[p]
            elif kw == 3 and dw == 1:
                w0 = weight[w_row]
                w1 = weight[w_row + 1]
                w2 = weight[w_row + 2]
                x0 = x[s : s + run]
                x1 = x[s + batch : s + batch + run]
                x2 = x[s + 2 * batch : s + 2 * batch + run]
                if pairs:
                    v0 = weight[w_row + filter_size]
                    v1 = weight[w_row + filter_size + 1]
                    v2 = weight[w_row + filter_size + 2]
                    for p in range(run):
                        a0 = x0[p]
                        a1 = x1[p]
                        a2 = x2[p]
                        acc[p] += w0 * a0 + w1 * a1 + w2 * a2
                        acc_b[p] += v0 * a0 + v1 * a1 + v2 * a2
                else:
                    for p in range(run):
                        acc[p] += w0 * x0[p] + w1 * x1[p] + w2 * x2[p]
            else:
                for j in range(kw):
                    wv = weight[w_row + j]
                    shift = s + j * dw * batch
                    xs = x[shift : shift + run]
                    for p in range(run):
                        acc[p] += wv * xs[p]
                    if pairs:
                        wv_b = weight[w_row + filter_size + j]
                        for p in range(run):
                            acc_b[p] += wv_b * xs[p]


@kg.kernel(parallel=True, fastmath=True, static=("kw", "dw", "pairs"))
def conv_weight_grad_direct(
    grad_weight, grad_bias, grad_out, x, zero, group_in, group_out, kh, kw, hp, wp, dh, dw,
    out_rows, batch, run, pairs,
):  # fmt: skip
    """grad_weight[o, c, i, j] = sum over output rows oh of the dot product of
    grad_out[o, oh] with the input row (c, oh + i * dh) shifted by j * dw pixels, and
    grad_bias[o] = the sum of grad_out[o].

    One work item per (o, c, i): the kw dot products of a filter row share the loads of
    ``grad_out``; the items with c = i = 0 also write the bias gradient. With ``pairs``
    (an even number of output channels per group; 5-wide rows) an item does (o, c, i)
    and (o + 1, c, i), which share the loads of the input. Each row's sum is taken in
    the tensor's dtype (``zero`` is 0 of that dtype; fastmath vectorises it) and added
    to a float64 total."""
    item = kg.index()
    i = item % kh
    rest = item // kh
    c = rest % group_in
    o = rest // group_in
    if pairs:
        o = 2 * o
    channel = (o // group_out) * group_in + c
    w_row = ((o * group_in + c) * kh + i) * kw
    bias_item = i == 0 and c == 0
    tb = np.float64(0.0)
    if kw == 5 and dw == 1 and pairs:
        filter_size = group_in * kh * kw
        t0 = np.float64(0.0)
        t1 = np.float64(0.0)
        t2 = np.float64(0.0)
        t3 = np.float64(0.0)
        t4 = np.float64(0.0)
        u0 = np.float64(0.0)
        u1 = np.float64(0.0)
        u2 = np.float64(0.0)
        u3 = np.float64(0.0)
        u4 = np.float64(0.0)
        ub = np.float64(0.0)
        for oh in range(out_rows):
            g_start = (o * out_rows + oh) * run
            g = grad_out[g_start : g_start + run]
            g_start_b = g_start + out_rows * run
            g_b = grad_out[g_start_b : g_start_b + run]
            s = (channel * hp + oh + i * dh) * wp * batch
            x0 = x[s : s + run]
            x1 = x[s + batch : s + batch + run]
            x2 = x[s + 2 * batch : s + 2 * batch + run]
            x3 = x[s + 3 * batch : s + 3 * batch + run]
            x4 = x[s + 4 * batch : s + 4 * batch + run]
            s0 = zero
            s1 = zero
            s2 = zero
            s3 = zero
            s4 = zero
            sb = zero
            r0 = zero
            r1 = zero
            r2 = zero
            r3 = zero
            r4 = zero
            rb = zero
            for p in range(run):
                gv = g[p]
                hv = g_b[p]
                a0 = x0[p]
                a1 = x1[p]
                a2 = x2[p]
                a3 = x3[p]
                a4 = x4[p]
                s0 += gv * a0
                s1 += gv * a1
                s2 += gv * a2
                s3 += gv * a3
                s4 += gv * a4
                sb += gv
                r0 += hv * a0
                r1 += hv * a1
                r2 += hv * a2
                r3 += hv * a3
                r4 += hv * a4
                rb += hv
            t0 += s0
            t1 += s1
            t2 += s2
            t3 += s3
            t4 += s4
            tb += sb
            u0 += r0
            u1 += r1
            u2 += r2
            u3 += r3
            u4 += r4
            ub += rb
        grad_weight[w_row] = t0
        grad_weight[w_row + 1] = t1
        grad_weight[w_row + 2] = t2
        grad_weight[w_row + 3] = t3
        grad_weight[w_row + 4] = t4
        w_row_b = w_row + filter_size
        grad_weight[w_row_b] = u0
        grad_weight[w_row_b + 1] = u1
        grad_weight[w_row_b + 2] = u2
        grad_weight[w_row_b + 3] = u3
        grad_weight[w_row_b + 4] = u4
        if bias_item:
            grad_bias[o] = tb
            grad_bias[o + 1] = ub
    else:
        # One filter row (or two, with pairs) at a time; sums as above.
        filter_size = group_in * kh * kw
        for half in range(2 if pairs else 1):
            oo = o + half
            row_start = w_row + half * filter_size
            tb = np.float64(0.0)
            if kw == 5 and dw == 1:
                t0 = np.float64(0.0)
                t1 = np.float64(0.0)
                t2 = np.float64(0.0)
                t3 = np.float64(0.0)
                t4 = np.float64(0.0)
                for oh in range(out_rows):
                    g_start = (oo * out_rows + oh) * run
                    g = grad_out[g_start : g_start + run]
                    s = (channel * hp + oh + i * dh) * wp * batch
                    x0 = x[s : s + run]
                    x1 = x[s + batch : s + batch + run]
                    x2 = x[s + 2 * batch : s + 2 * batch + run]
                    x3 = x[s + 3 * batch : s + 3 * batch + run]
                    x4 = x[s + 4 * batch : s + 4 * batch + run]
                    s0 = zero
                    s1 = zero
                    s2 = zero
                    s3 = zero
                    s4 = zero
                    sb = zero
                    for p in range(run):
                        gv = g[p]
                        s0 += gv * x0[p]
                        s1 += gv * x1[p]
                        s2 += gv * x2[p]
                        s3 += gv * x3[p]
                        s4 += gv * x4[p]
                        sb += gv
                    t0 += s0
                    t1 += s1
                    t2 += s2
                    t3 += s3
                    t4 += s4
                    tb += sb
                grad_weight[row_start] = t0
                grad_weight[row_start + 1] = t1
                grad_weight[row_start + 2] = t2
                grad_weight[row_start + 3] = t3
                grad_weight[row_start + 4] = t4
            elif kw == 3 and dw == 1:
                t0 = np.float64(0.0)
                t1 = np.float64(0.0)
                t2 = np.float64(0.0)
                for oh in range(out_rows):
                    g_start = (oo * out_rows + oh) * run
                    g = grad_out[g_start : g_start + run]
                    s = (channel * hp + oh + i * dh) * wp * batch
                    x0 = x[s : s + run]
                    x1 = x[s + batch : s + batch + run]
                    x2 = x[s + 2 * batch : s + 2 * batch + run]
                    s0 = zero
                    s1 = zero
                    s2 = zero
                    sb = zero
                    for p in range(run):
                        gv = g[p]
                        s0 += gv * x0[p]
                        s1 += gv * x1[p]
                        s2 += gv * x2[p]
                        sb += gv
                    t0 += s0
                    t1 += s1
                    t2 += s2
                    tb += sb
                grad_weight[row_start] = t0
                grad_weight[row_start + 1] = t1
                grad_weight[row_start + 2] = t2
            else:
                for j in range(kw):
                    total = np.float64(0.0)
                    for oh in range(out_rows):
                        g_start = (oo * out_rows + oh) * run
                        g = grad_out[g_start : g_start + run]
                        s = ((channel * hp + oh + i * dh) * wp + j * dw) * batch
                        xs = x[s : s + run]
                        partial = zero
                        for p in range(run):
                            partial += g[p] * xs[p]
                        total += partial
                    grad_weight[row_start + j] = total
                if bias_item:
                    for oh in range(out_rows):
                        g_start = (oo * out_rows + oh) * run
                        g = grad_out[g_start : g_start + run]
                        sb = zero
                        for p in range(run):
                            sb += g[p]
                        tb += sb
            if bias_item:
                grad_bias[oo] = tb


@kg.kernel(parallel=True, fastmath=True, static=("kw", "dw"))
def conv_input_grad_direct(
    grad_x, grad_out, weight, group_in, group_out, kh, kw, hp, wp, dh, dw, out_rows, batch,
    run,
):  # fmt: skip
    """grad_x[c, h] (a padded input row) = sum over (o, i, j) of weight[o, c, i, j] times
    grad_out[o, h - i * dh] shifted right by j * dw pixels (the transposed convolution).

    One work item per padded input row (c, h); ``grad_x`` is (C, hp, wp, N). For rows of
    5 or 3 taps (dw = 1), the columns that every tap reaches gather all taps in one pass
    (one load and store of the row per filter row instead of one per tap); the few
    columns at either end take one pass per tap."""
    item = kg.index()
    channel = item // hp
    h = item % hp
    group = channel // group_in
    c = channel % group_in
    row = wp * batch
    acc_row = grad_x[item * row : item * row + row]
    for q in range(row):
        acc_row[q] = 0.0
    # columns [kw - 1, out_cols) receive every tap of a filter row
    out_cols = run // batch
    inner = (out_cols - (kw - 1)) * batch
    gathered = dw == 1 and (kw == 5 or kw == 3) and inner > 0
    edge = (kw - 1) * batch
    for k in range(group_out):
        o = group * group_out + k
        for i in range(kh):
            oh = h - i * dh
            if oh >= 0 and oh < out_rows:
                g_start = (o * out_rows + oh) * run
                g = grad_out[g_start : g_start + run]
                w_row = ((o * group_in + c) * kh + i) * kw
                if gathered and kw == 5:
                    w0 = weight[w_row]
                    w1 = weight[w_row + 1]
                    w2 = weight[w_row + 2]
                    w3 = weight[w_row + 3]
                    w4 = weight[w_row + 4]
                    acc = acc_row[edge : edge + inner]
                    g0 = g[edge : edge + inner]
                    g1 = g[edge - batch : edge - batch + inner]
                    g2 = g[edge - 2 * batch : edge - 2 * batch + inner]
                    g3 = g[edge - 3 * batch : edge - 3 * batch + inner]
                    g4 = g[0:inner]
                    for p in range(inner):
                        acc[p] += w0 * g0[p] + w1 * g1[p] + w2 * g2[p] + w3 * g3[p] + w4 * g4[p]
                elif gathered and kw == 3:
                    w0 = weight[w_row]
                    w1 = weight[w_row + 1]
                    w2 = weight[w_row + 2]
                    acc = acc_row[edge : edge + inner]
                    g0 = g[edge : edge + inner]
                    g1 = g[edge - batch : edge - batch + inner]
                    g2 = g[0:inner]
                    for p in range(inner):
                        acc[p] += w0 * g0[p] + w1 * g1[p] + w2 * g2[p]
                for j in range(kw):
                    wv = weight[w_row + j]
                    shift = j * dw * batch
                    if gathered:
                        # tap j covers columns [j, j + out_cols); the middle is done
                        left = acc_row[shift:edge]
                        for p in range(edge - shift):
                            left[p] += wv * g[p]
                        right = acc_row[edge + inner : shift + run]
                        g_right = g[edge + inner - shift : run]
                        for p in range(shift + run - edge - inner):
                            right[p] += wv * g_right[p]
                    else:
                        acc = acc_row[shift : shift + run]
                        for p in range(run):
                            acc[p] += wv * g[p]


@kg.kernel(parallel=True)
def col2im(
    grad_x, grad_cols, kh, kw, hp, wp, sh, sw, dh, dw, out_rows, out_cols, batch,
):  # fmt: skip
    """Sum a patch-matrix gradient back onto the padded input: grad_x[c, h, w, :] gets
    grad_cols[c, i, j, oh, ow, :] for every tap with h = oh * sh + i * dh and
    w = ow * sw + j * dw.

    One work item per padded input row (c, h), which gathers every tap that read it (no
    two items write the same memory). ``grad_cols`` is (C, kh, kw, OH, OW, N),
    ``grad_x`` (C, hp, wp, N)."""
    item = kg.index()
    c = item // hp
    h = item % hp
    row = wp * batch
    acc_row = grad_x[item * row : item * row + row]
    for q in range(row):
        acc_row[q] = 0.0
    run = out_cols * batch
    tap_size = out_rows * run
    for i in range(kh):
        top = h - i * dh
        if top >= 0 and top % sh == 0 and top // sh < out_rows:
            oh = top // sh
            for j in range(kw):
                start = ((c * kh + i) * kw + j) * tap_size + oh * run
                if sw == 1:
                    g = grad_cols[start : start + run]
                    shift = j * dw * batch
                    acc = acc_row[shift : shift + run]
                    for p in range(run):
                        acc[p] += g[p]
                else:
                    for ow in range(out_cols):
                        g = grad_cols[start + ow * batch : start + ow * batch + batch]
                        shift = (ow * sw + j * dw) * batch
                        acc = acc_row[shift : shift + batch]
                        for p in range(batch):
                            acc[p] += g[p]


@kg.kernel(parallel=True)
def pad_batch_innermost(out, x, hp, wp, top, left):
    """out (C, hp, wp, N), flat, = x (N, C, H, W), any strides, zero-padded with ``top``
    rows above and ``left`` columns on the left (the rest below and on the right).

    One work item per padded row (c, h); it reads that row of every image."""
    item = kg.index()
    batch = x.shape[0]
    c = item // hp
    h = item % hp - top
    run = wp * batch
    row = out[item * run : item * run + run]
    if h < 0 or h >= x.shape[2]:
        for q in range(run):
            row[q] = 0.0
    else:
        for col in range(wp):
            seg = row[col * batch : col * batch + batch]
            src = col - left
            if src < 0 or src >= x.shape[3]:
                for n in range(batch):
                    seg[n] = 0.0
            else:
                for n in range(batch):
                    seg[n] = x[n, c, h, src]
