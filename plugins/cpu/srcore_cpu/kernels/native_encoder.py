"""torch's fused encoder layer (``aten::_transformer_encoder_layer_fwd``, constant weights) with its
products split over :mod:`.native_team` at more than one intra-op thread.

The layer's other forms (:func:`.attention.make_encoder_layer`) run its products on one thread or on
the part pool, whose worker must be woken and then take the GIL: on the 2-vCPU AMD EPYC, transformer_block
(two such layers, 128 tokens, d 256, 4 heads, feed-forward 1024) took 5.8 ms at 2 threads against torch
eager's 5.1, while the same layers written out as separate ops, whose linears and attention products
run on the native team, took 3.5 (docs/performance-log.md, "the fused encoder layer on the native team").
Here the layer's four linears (their bias add and the feed-forward's activation in each part) and its
two attention products per head are native splits (each part one ``cblas_sgemm`` called from compiled
code without the GIL); the softmax (and the mask), the residual adds and the layer norms run on the
caller, compiled, between them. Each linear's split (rows or 16-column blocks) is the faster one timed
alone at load; the whole layer is kept only where it times faster than the layer's other forms
(:func:`.attention.make_encoder_layer`), never by vendor. ``SRCORE_CPU_NATIVE_SPLIT=0`` turns it off
with every native split, ``SRCORE_CPU_NATIVE_LAYER=0`` this one alone (``families_ab``'s
``+nonativelayer``).
"""
from __future__ import annotations

import os

import numpy as np

_ENV = "SRCORE_CPU_NATIVE_LAYER"
#: a layer under this many multiply-adds a call is not built (nor timed): its products are a few
#: microseconds each, under a hand-over
MIN_MACS = 1 << 22


def _linear(wT, b, rows: int, threads: int, act: str | None, team, fn_addr, key):
    """The native split of ``x (rows, k) @ wT + b`` then ``act`` (a :data:`.native_team.EPILOGUES` key)
    that timed faster alone, by blocks of rows or of output columns: a :class:`.native_team.Gemm`
    called ``gemm(x_addr, 0, out_addr)``, or None when neither splits."""
    from . import linear_split as LS
    from . import native_team as NT
    from . import parallel as _par
    from . import tactic

    k, n = wT.shape
    epi, w_addr = NT.epilogue(act), wT.ctypes.data
    b_addr = 0 if b is None else b.ctypes.data
    cands = {}
    if rows >= 2 * threads:
        cands["rows"] = [(lo * k * 4, w_addr, lo * n * 4, b_addr, hi - lo, n, k, k, n, n, NT.NO_TRANS, NT.NO_TRANS, epi)
                         for lo, hi in _par.split(rows, threads)]
    cols = LS._col_blocks(n, threads)
    if len(cols) > 1:
        cands["cols"] = [(0, w_addr + lo * 4, lo * 4, b_addr and b_addr + lo * 4, rows, hi - lo, k, k, n, n,
                          NT.NO_TRANS, NT.NO_TRANS, epi) for lo, hi in cols]
    gemms = {name: NT.Gemm(parts, fn_addr, team) for name, parts in cands.items()}
    if not gemms:
        return None
    if len(gemms) == 1:
        return next(iter(gemms.values()))
    x, y = np.random.default_rng(0).standard_normal((rows, k), dtype=np.float32), np.empty((rows, n), np.float32)
    timed = {name: (lambda x, y, g=g: g(x.ctypes.data, 0, y.ctypes.data)) for name, g in gemms.items()}
    best = tactic.fastest({nm: _par.on_caller(f) for nm, f in timed.items()}, (x, y),
                          key=("native_layer_linear", key, rows, k, n, b is not None, act or "", threads))
    return gemms[best or "rows"]


def make(attention, ln_, norms, eps, norm_first: bool, use_gelu: bool, w1, b1, w2, b2, mask_type, shape, fallback):
    """``fn(src, mask=None)``: the encoder layer of :func:`.attention.make_encoder_layer`'s parts
    (``attention`` its :class:`.attention._SelfAttention`; ``w1``, ``w2`` the feed-forward's
    C-contiguous (k, n) weights) with its products on the native team, for float32 inputs of
    ``shape`` (batch, tokens) and anything else to ``fallback``; None at one intra-op thread, without
    the team (turned off, no ILP64 OpenBLAS), or for a layer too small to split."""
    from . import native_team as NT
    from . import parallel as _par
    from .attention import SHARED_WS, _mask_bias

    if os.environ.get(_ENV, "1") == "0" or attention.dt != np.float32:
        return None
    B, L = shape
    E, H, D, Fh = attention.E, attention.H, attention.D, w1.shape[1]
    T = B * L
    if T * (4 * E * E + 2 * E * Fh) + 2 * B * H * L * L * D < MIN_MACS:
        return None
    threads = _par.intra_op_threads()
    team, fn_addr = (NT.team(threads), NT.sgemm_address()) if threads > 1 else (None, None)
    if team is None or fn_addr is None:
        return None
    f32 = np.dtype(np.float32)
    c = lambda a: None if a is None else np.ascontiguousarray(a, f32).reshape(-1)   # noqa: E731
    wqkv, wo, w1, w2 = (np.ascontiguousarray(w, f32) for w in (attention.wqkv, attention.wo, w1, w2))
    bqkv, bo, b1, b2 = c(attention.bqkv), c(attention.bo), c(b1), c(b2)
    key = (B, L, E, H, Fh)
    act = "gelu:none" if use_gelu else "relu"
    lin = [_linear(w, b, T, threads, a, team, fn_addr, key) for w, b, a in
           ((wqkv, bqkv, None), (wo, bo, None), (w1, b1, act), (w2, b2, None))]
    # the heads: q, k, v are strided views of the (T, 3E) qkv rows; scores (B, H, L, L) C-contiguous;
    # the head outputs written straight into the (T, E) = (B, L, H, D) rows the out-projection reads
    qkv = np.empty((T, 3 * E), f32)
    q, k, v = (qkv[:, i * E:(i + 1) * E].reshape(B, L, H, D).transpose(0, 2, 1, 3) for i in range(3))
    kt = k.transpose(0, 1, 3, 2)
    attn4 = np.empty((B, L, H, D), f32).transpose(0, 2, 1, 3)
    qk = NT.batched_parts(q.shape, kt.shape, q.strides, kt.strides, threads)
    pv = NT.batched_parts((B, H, L, L), v.shape, (H * L * L * 4, L * L * 4, L * 4, 4), v.strides, threads,
                          c_strides=attn4.strides)
    if any(g is None for g in lin) or not qk or not pv or len(qk) < 2 or len(pv) < 2:
        return None
    g_qkv, g_o, g_1, g_2 = lin
    g_qk, g_pv = NT.Gemm(qk, fn_addr, team), NT.Gemm(pv, fn_addr, team)
    nw1, nb1, nw2, nb2 = norms
    softmax_ = attention.softmax_
    k_off, v_off = E * 4, 2 * E * 4

    def encoder_layer_native(src, mask=None):
        if src.shape != (B, L, E) or src.dtype != f32:
            return fallback(src, mask)
        ws = SHARED_WS
        x = np.ascontiguousarray(src).reshape(T, E)
        tmp, stat = ws.get(None, "tmp", (T, E), f32), ws.get(None, "stat", (T, 1), f32)
        h0 = x
        if norm_first:
            h0 = ws.get(None, "ln", (T, E), f32)
            np.copyto(h0, x)
            ln_(h0, nw1, nb1, eps, tmp, stat)
        qkv = ws.get(None, "qkv", (T, 3 * E), f32)
        g_qkv(h0.ctypes.data, 0, qkv.ctypes.data)
        scores = ws.get(None, "scores", (B, H, L, L), f32)
        base = qkv.ctypes.data
        g_qk(base, base + k_off, scores.ctypes.data)
        if mask is not None:
            np.add(scores, _mask_bias(mask, mask_type, B, H, L, L, f32), out=scores)
        softmax_(scores, ws.get(None, "sstat", (B, H, L, 1), f32))
        attn = ws.get(None, "attn", (T, E), f32)
        g_pv(scores.ctypes.data, base + v_off, attn.ctypes.data)
        y = ws.get(None, "y", (T, E), f32)
        g_o(attn.ctypes.data, 0, y.ctypes.data)
        np.add(y, x, out=y)
        if not norm_first:
            ln_(y, nw1, nb1, eps, tmp, stat)
        hin = y
        if norm_first:
            hin = ws.get(None, "ln", (T, E), f32)
            np.copyto(hin, y)
            ln_(hin, nw2, nb2, eps, tmp, stat)
        hid = ws.get(None, "hid", (T, Fh), f32)
        g_1(hin.ctypes.data, 0, hid.ctypes.data)
        z = np.empty((T, E), f32)
        g_2(hid.ctypes.data, 0, z.ctypes.data)
        np.add(z, y, out=z)
        if not norm_first:
            ln_(z, nw2, nb2, eps, tmp, stat)
        return z.reshape(B, L, E)
    encoder_layer_native.keep = (wqkv, wo, w1, w2, bqkv, bo, b1, b2)   # (the parts hold their addresses)
    encoder_layer_native.what = f"encoder_native:{B}x{L}x{E}x{H}x{Fh}:{int(norm_first)}:{int(use_gelu)}"
    return _par.on_caller(encoder_layer_native)
