"""numpy implementations of every layer kind: always-available tactics, and the reference the
compiled tactics are tested against.

Each factory takes ``(layer, net)`` and returns ``fn(*inputs, *outputs)`` writing its outputs.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..builder.network import Layer, Network
from ..kernels import activation as _activation
from ..kernels.scratch import SCRATCH
from ..pointwise.reference import eval_ops


def fused_pointwise(layer: Layer, net: Network):
    ops, results = layer.attrs["ops"], layer.attrs["results"]
    n_in = len(layer.inputs)

    def run(*arrays):
        vals = eval_ops(ops, arrays[:n_in])
        for r, out in zip(results, arrays[n_in:]):
            np.copyto(out, vals[r])
    return run


def gemm(layer: Layer, net: Network):
    """``x @ W.T`` over the last dim, with W laid out (K, N) C-contiguous once (the fastest
    OpenBLAS layout for ``np.dot`` into ``out=``)."""
    wt = np.ascontiguousarray(layer.attrs["weight"].T)
    K, N = wt.shape

    def run(x, out):
        o = out.reshape(-1, N)
        np.dot(x.reshape(o.shape[0], K), wt, out=o)   # rows from out: x.reshape(-1, 0) is ambiguous when K == 0
    return run


def matmul(layer: Layer, net: Network):
    def run(a, b, out):
        np.matmul(a, b, out=out)
    return run


def permute(layer: Layer, net: Network):
    perm = layer.attrs["perm"]

    def run(x, out):
        np.copyto(out, x.transpose(perm))
    return run


def strided(layer: Layer, net: Network):
    """``out[...] = x[key]``; the view ``x[key]`` kept for the array it was taken of: an engine passes
    its arena buffer again each call, and making the view was a third of the layer (res2net's
    channel slices at batch 2: ~0.3 of ~1 us, Sapphire Rapids). One (array, view) pair, replaced
    whole: a thread that reads another thread's pair sees it is of another array and takes its own."""
    key = layer.attrs["key"]
    last = [(None, None)]

    def run(x, out):
        base, view = last[0]
        if base is not x:
            view = x[key]
            last[0] = (x, view)
        np.copyto(out, view)
    return run


def roll(layer: Layer, net: Network):
    """``torch.roll``: per rolled dim two slices, so 2^dims slice copies."""
    shape = net.shape(layer.inputs[0])
    shift = dict(zip(layer.attrs["dims"], layer.attrs["shifts"]))
    pieces = [((), ())]
    for d, n in enumerate(shape):
        k = shift.get(d, 0)
        cuts = [(slice(None), slice(None))] if k == 0 else [(slice(0, n - k), slice(k, n)), (slice(n - k, n), slice(0, k))]
        pieces = [(s + (a,), t + (b,)) for s, t in pieces for a, b in cuts]

    def run(x, out):
        for src, dst in pieces:
            out[dst] = x[src]
    return run


def softmax(layer: Layer, net: Network):
    dim, log, safe = layer.attrs["dim"], layer.kind == "log_softmax", layer.attrs.get("safe", False)

    def run(x, out):
        m = np.max(x, axis=dim, keepdims=True)
        np.subtract(x, m, out=out)
        if log:
            out -= np.log(np.sum(np.exp(out), axis=dim, keepdims=True))
        else:
            np.exp(out, out=out)
            out /= np.sum(out, axis=dim, keepdims=True)
            if safe:   # scaled_dot_product_attention: a row of -inf gives zeros, not NaN
                np.putmask(out, np.broadcast_to(np.isneginf(m), out.shape), 0.0)
    return run


def rms_norm(layer: Layer, net: Network):
    n, eps, w = layer.attrs["size"], np.float32(layer.attrs["eps"]), layer.attrs["weight"]

    def run(x, out):
        x2, o2 = x.reshape(-1, n), out.reshape(-1, n)
        ms = np.mean(np.square(x2), axis=1, keepdims=True)
        np.multiply(x2, np.float32(1.0) / np.sqrt(ms + eps), out=o2)
        if w is not None:
            o2 *= w
    return run


def layer_norm(layer: Layer, net: Network):
    n, eps = layer.attrs["size"], layer.attrs["eps"]
    w, b = layer.attrs["weight"], layer.attrs["bias"]

    def run(x, out):
        x2, o2 = x.reshape(-1, n), out.reshape(-1, n)
        mu = x2.mean(axis=1, keepdims=True)
        np.subtract(x2, mu, out=o2)
        var = np.mean(np.square(o2), axis=1, keepdims=True)
        o2 /= np.sqrt(var + np.float32(eps))
        if w is not None:
            o2 *= w
        if b is not None:
            o2 += b
    return run


def channel_norm(layer: Layer, net: Network):
    """Layer norm over dim 1 (``builder/channels_last.py``)."""
    C, eps = net.shape(layer.inputs[0])[1], np.float32(layer.attrs["eps"])
    w, b = layer.attrs["weight"], layer.attrs["bias"]

    def run(x, out):
        mu = x.mean(axis=1, keepdims=True)
        np.subtract(x, mu, out=out)
        out /= np.sqrt(np.mean(np.square(out), axis=1, keepdims=True) + eps)
        if w is not None:
            out *= w.reshape(C, 1, 1)
        if b is not None:
            out += b.reshape(C, 1, 1)
    return run


def group_norm(layer: Layer, net: Network):
    shape = net.shape(layer.inputs[0])
    N, C, G = shape[0], shape[1], layer.attrs["groups"]
    eps = np.float32(layer.attrs["eps"])
    w, b = layer.attrs["weight"], layer.attrs["bias"]
    bshape = (1, C) + (1,) * (len(shape) - 2)
    w = None if w is None else np.asarray(w, np.float32).reshape(bshape)
    b = None if b is None else np.asarray(b, np.float32).reshape(bshape)
    act = _activation.in_place(layer.attrs.get("activation", "none"), layer.attrs.get("negative_slope", 0.01))

    def run(x, out):
        x3, o3 = x.reshape(N, G, -1), out.reshape(N, G, -1)
        mu = x3.mean(axis=2, keepdims=True)
        np.subtract(x3, mu, out=o3)
        var = np.mean(np.square(o3), axis=2, keepdims=True)
        o3 /= np.sqrt(var + eps)
        if w is not None:
            out *= w
        if b is not None:
            out += b
        if act is not None:
            act(out)
    return run


def mean(layer: Layer, net: Network):
    dims = layer.attrs["dims"]

    count = 1
    for d in dims:
        count *= net.shape(layer.inputs[0])[d]
    keep = len(net.shape(layer.outputs[0])) == len(net.shape(layer.inputs[0]))

    def run(x, out):
        # np.mean's arithmetic (a float32 sum, then a division by the count) without its ~4 us of Python
        np.add.reduce(x, axis=dims, keepdims=keep, out=out)
        np.true_divide(out, count, out=out)
    return run


def attention(layer: Layer, net: Network):
    """Unmasked multi-head attention on a packed (B, L, 3E) qkv tensor -> (B, L, E)."""
    H, scale = layer.attrs["heads"], np.float32(layer.attrs["scale"])

    def run(qkv, out):
        B, L, E3 = qkv.shape
        E = E3 // 3
        D = E // H
        q = qkv[..., :E].reshape(B, L, H, D).transpose(0, 2, 1, 3)
        k = qkv[..., E:2 * E].reshape(B, L, H, D).transpose(0, 2, 3, 1)
        v = qkv[..., 2 * E:].reshape(B, L, H, D).transpose(0, 2, 1, 3)
        s = np.matmul(q, k) * scale
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        np.copyto(out.reshape(B, L, H, D), np.matmul(s, v).transpose(0, 2, 1, 3))
    return run


def _pool_geometry(size, k, s, p, d, ceil_mode):
    eff = d * (k - 1) + 1
    num = size + 2 * p - eff
    o = (num + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o


def max_pool2d(layer: Layer, net: Network):
    (kh, kw), (sh, sw) = layer.attrs["kernel"], layer.attrs["stride"]
    (ph, pw), (dh, dw) = layer.attrs["padding"], layer.attrs["dilation"]

    def run(x, out):
        H, W = x.shape[2:]
        Ho, Wo = out.shape[2:]
        need_h = max((Ho - 1) * sh + dh * (kh - 1) + 1 - H - ph, 0)
        need_w = max((Wo - 1) * sw + dw * (kw - 1) + 1 - W - pw, 0)
        xp = np.pad(x, ((0, 0), (0, 0), (ph, need_h), (pw, need_w)), constant_values=-np.inf)
        out.fill(-np.inf)
        for i in range(kh):
            for j in range(kw):
                tap = xp[:, :, i * dh:i * dh + sh * (Ho - 1) + 1:sh, j * dw:j * dw + sw * (Wo - 1) + 1:sw]
                np.maximum(out, tap, out=out)
    return run


def avg_pool2d(layer: Layer, net: Network):
    (kh, kw), (sh, sw) = layer.attrs["kernel"], layer.attrs["stride"]
    (ph, pw) = layer.attrs["padding"]
    include_pad, div = layer.attrs["count_include_pad"], layer.attrs["divisor_override"]

    def run(x, out):
        H, W = x.shape[2:]
        Ho, Wo = out.shape[2:]
        eh, ew = max((Ho - 1) * sh + kh - H - ph, 0), max((Wo - 1) * sw + kw - W - pw, 0)
        xp = np.pad(x, ((0, 0), (0, 0), (ph, eh), (pw, ew)))
        ones = np.pad(np.ones((H, W), np.float32), ((ph, eh), (pw, ew)))
        acc = np.zeros(out.shape, np.float32)
        cnt = np.zeros((Ho, Wo), np.float32)
        for i in range(kh):
            for j in range(kw):
                acc += xp[:, :, i:i + sh * (Ho - 1) + 1:sh, j:j + sw * (Wo - 1) + 1:sw]
                cnt += ones[i:i + sh * (Ho - 1) + 1:sh, j:j + sw * (Wo - 1) + 1:sw]
        if div:
            np.divide(acc, np.float32(div), out=out)
            return
        if include_pad:  # the window clipped to the padded input (torch's rule)
            hs = np.minimum(np.arange(Ho) * sh - ph + kh, H + ph) - (np.arange(Ho) * sh - ph)
            ws = np.minimum(np.arange(Wo) * sw - pw + kw, W + pw) - (np.arange(Wo) * sw - pw)
            cnt = np.outer(hs, ws).astype(np.float32)
        np.divide(acc, cnt, out=out)
    return run


def adaptive_avg_pool2d(layer: Layer, net: Network):
    oh, ow = layer.attrs["output_size"]

    def run(x, out):
        H, W = x.shape[2:]
        for i in range(oh):
            h0, h1 = (i * H) // oh, -((-(i + 1) * H) // oh)
            for j in range(ow):
                w0, w1 = (j * W) // ow, -((-(j + 1) * W) // ow)
                out[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return run


def conv(layer: Layer, net: Network):
    """im2col + one GEMM per group, then bias, residual and relu (the reference tactic)."""
    w, b = layer.attrs["weight"], layer.attrs["bias"]
    (sh, sw), (ph, pw), (dh, dw) = layer.attrs["stride"], layer.attrs["padding"], layer.attrs["dilation"]
    G, relu, residual = layer.attrs["groups"], layer.attrs["relu"], layer.attrs["residual"]
    act = _activation.in_place(layer.attrs.get("activation", "none"), layer.attrs.get("negative_slope", 0.01))
    O, Cg, kh, kw = w.shape
    wg = w.reshape(G, O // G, Cg * kh * kw)

    def run(x, *rest):
        out = rest[-1]
        N, _, H, W = x.shape
        Ho, Wo = out.shape[2:]
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        cols = np.empty((N, G, Cg, kh, kw, Ho, Wo), np.float32)
        xg = xp.reshape(N, G, Cg, H + 2 * ph, W + 2 * pw)
        for i in range(kh):
            for j in range(kw):
                cols[:, :, :, i, j] = xg[:, :, :, i * dh:i * dh + sh * (Ho - 1) + 1:sh,
                                         j * dw:j * dw + sw * (Wo - 1) + 1:sw]
        cols = cols.reshape(N, G, Cg * kh * kw, Ho * Wo)
        res = np.matmul(wg, cols).reshape(N, O, Ho, Wo)
        if b is not None:
            res += b.reshape(1, O, 1, 1)
        if residual:
            res += rest[0]
        if relu:
            np.maximum(res, 0, out=res)
        np.copyto(out, res)
        if act is not None:
            act(out)
    if "nchwc" in layer.attrs:
        return _nchwc(run, layer.attrs["nchwc"], layer.attrs["x_shape"][1], O)
    return run


def conv_transpose(layer: Layer, net: Network):
    """A transposed conv of any rank: one GEMM of the weight's (O/g * taps, C/g) columns by the input's
    pixels, then each tap's columns added into the output at the stride (col2im), the bias, the
    crop of the padding, the fused activation. Taps that never overlap (stride == kernel, no padding,
    dilation or output padding: a U-Net's 2x2/2 up-sampling) are one strided copy with the bias."""
    w, b = layer.attrs["weight"], layer.attrs["bias"]
    stride, pad, dil = layer.attrs["stride"], layer.attrs["padding"], layer.attrs["dilation"]
    out_pad, g = layer.attrs["output_padding"], layer.attrs["groups"]
    C, Og, *ks = w.shape
    nd = len(ks)
    O, Cig, KK = Og * g, C // g, Og * math.prod(ks)
    N, _, *sp = net.shape(layer.inputs[0])
    osz = net.shape(layer.outputs[0])[2:]
    L = math.prod(sp)
    full = [(n - 1) * s + d * (k - 1) + 1 + op for n, s, d, k, op in zip(sp, stride, dil, ks, out_pad)]
    wt = np.ascontiguousarray(np.asarray(w, np.float32).reshape(g, Cig, KK).transpose(0, 2, 1))
    bias = np.zeros(O, np.float32) if b is None else np.asarray(b, np.float32)
    apart = tuple(stride) == tuple(ks) and not any(pad) and not any(out_pad) and all(d == 1 for d in dil)
    taps = [(t, (slice(None), slice(None)) + tuple(slice(k * d, k * d + s * (n - 1) + 1, s)
                                                     for k, d, s, n in zip(t, dil, stride, sp)))
            for t in itertools.product(*[range(k) for k in ks])]
    crop = (slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(pad, osz))
    b_out = bias.reshape((1, O) + (1,) * nd)
    act = _activation.in_place(layer.attrs.get("activation", "none"), layer.attrs.get("negative_slope", 0.01))
    # apart: out[n, o, (i0, k0), (i1, k1), ...] = colv[n, o, k0, k1, ..., i0, i1, ...] + b[o]
    interleave = (0, 1) + tuple(a for i in range(nd) for a in (2 + nd + i, 2 + i))
    split = (N, O) + tuple(a for n, k in zip(sp, ks) for a in (n, k))

    def run(x, out):
        cols = SCRATCH.get("convt_cols", (N, g, KK, L))
        np.matmul(wt, x.reshape(N, g, Cig, L), out=cols)
        colv = cols.reshape((N, O) + tuple(ks) + tuple(sp))
        if apart:
            np.add(colv.transpose(interleave), bias.reshape((1, O) + (1,) * 2 * nd), out=out.reshape(split))
        else:
            acc = SCRATCH.get("convt_acc", (N, O) + tuple(full))
            acc.fill(0.0)
            for t, at in taps:
                dst = acc[at]
                np.add(dst, colv[(slice(None), slice(None)) + t], out=dst)
            np.add(acc[crop], b_out, out=out)
        if act is not None:
            act(out)
    return run


def _nchwc(run, blocked: tuple[bool, bool], in_channels: int, channels: int):
    """``run`` (NCHW) on a layer with NCHW16c sides (``builder/layout.py``): reordered around it."""
    from srcore.plugin import nchwc

    x_in, y_in = blocked

    def wrapped(x, *rest):
        x = nchwc.from_blocked(x, in_channels) if x_in else x
        if not y_in:
            return run(x, *rest)
        res = [nchwc.from_blocked(r, channels) for r in rest[:-1]]
        N, _, H, W, _ = rest[-1].shape
        out = np.empty((N, channels, H, W), np.float32)
        run(x, *res, out)
        np.copyto(rest[-1], nchwc.to_blocked(out, rest[-1].shape[4]))
    return wrapped
