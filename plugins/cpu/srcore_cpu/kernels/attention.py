"""Attention: ``scaled_dot_product_attention`` and torch's fused transformer fast paths
(``_native_multi_head_attention``, ``_transformer_encoder_layer_fwd``) that a traced and
frozen ``nn.TransformerEncoderLayer`` / ``nn.MultiheadAttention`` emits in eval mode.

A query whose keys are all masked gives zeros in ``scaled_dot_product_attention`` and NaN in the
fused fast paths, as torch's CPU kernels do.
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError

from .workspace import SharedWorkspace

# per-thread scratch shared by every attention node of the process (see workspace.py)
SHARED_WS = SharedWorkspace()


def _masked_softmax(scores, keep=None, dead_rows_zero=True):
    """Softmax over the last dim in place; ``keep`` (bool, broadcastable) marks attended keys. A row
    with every key masked gives zeros, or NaN without ``dead_rows_zero``."""
    if keep is not None:
        np.putmask(scores, ~np.broadcast_to(keep, scores.shape), -np.inf)
    m = np.max(scores, axis=-1, keepdims=True)
    dead = ~np.isfinite(m)           # every key masked (or an -inf float mask)
    zero_dead = dead_rows_zero and dead.any()
    if zero_dead:
        m = np.where(dead, 0, m)
    with np.errstate(invalid="ignore"):   # a dead row left to NaN: -inf - -inf
        np.subtract(scores, m, out=scores)
    np.exp(scores, out=scores)
    s = np.sum(scores, axis=-1, keepdims=True)
    if zero_dead:
        s = np.where(dead & (s == 0), 1, s)
    np.divide(scores, s, out=scores)
    return scores


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *,
                                 scale=None, enable_gqa=False, out=None):
    """``aten::scaled_dot_product_attention``: softmax(q k^T * scale + mask) v (bool mask: True attends)."""
    if dropout_p:
        raise KernelError(f"scaled_dot_product_attention: dropout_p={dropout_p} is not supported at inference")
    L, E = query.shape[-2:]
    S = key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = np.repeat(key, rep, axis=-3)
        value = np.repeat(value, rep, axis=-3)
    sc = 1.0 / math.sqrt(E) if scale is None else scale
    scores = np.matmul(query, np.swapaxes(key, -1, -2))
    np.multiply(scores, np.asarray(sc, scores.dtype), out=scores)
    keep = None
    if is_causal:
        keep = np.tril(np.ones((L, S), bool))
    if attn_mask is not None:
        if attn_mask.dtype == np.bool_:
            keep = attn_mask if keep is None else keep & attn_mask
        else:
            scores = np.add(scores, attn_mask, out=scores if scores.shape == np.broadcast_shapes(
                scores.shape, attn_mask.shape) else None)
    probs = _masked_softmax(scores, keep)
    return np.matmul(probs, value, out=out)


def scaled_dot_product_attention_matcher(node):
    """:func:`scaled_dot_product_attention` with numpy's BLAS on the calling thread alone at more than
    one intra-op thread (:func:`_held`): its two products otherwise ran OpenBLAS's threaded GEMM,
    whose worker then spins beside the part pool's (the plugin's one-team policy)."""
    return _held(scaled_dot_product_attention)


def _mha_mask(mask, mask_type, B, H, L, S):
    """torch's masked_softmax convention: True (or nonzero) masks a key out; returns keep or None."""
    if mask is None:
        return None
    masked = mask.astype(bool)
    if mask_type == 1 or (mask_type is None and masked.ndim == 2 and masked.shape == (B, S) and (B, S) != (L, S)):
        masked = masked.reshape(B, 1, 1, S)
    elif masked.ndim == 3:
        masked = masked.reshape(B, masked.shape[0] // B if B else 1, L, S)   # (B or B*H, L, S); B may be 0
    return ~masked


def _heads(x, B, T, H, D):
    return x.reshape(B, T, H, D).transpose(0, 2, 1, 3)


def native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                                proj_bias, mask=None, need_weights=True, average_attn_weights=True,
                                mask_type=None):
    """``aten::_native_multi_head_attention`` (batch-first): (output, weights or an empty tensor)."""
    if query.ndim != 3:
        raise KernelError(f"_native_multi_head_attention expects batched (B, L, E) inputs, got {query.shape}")
    B, L, E = query.shape
    S = key.shape[1]
    H = num_head
    D = E // H
    if query is key and key is value:
        qkv = np.matmul(query, qkv_weight.T)
        np.add(qkv, qkv_bias, out=qkv)
        q, k, v = qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]
    else:
        ws, bs = np.split(qkv_weight, 3), np.split(qkv_bias, 3)
        q, k, v = (np.matmul(t, w.T) + b for t, w, b in zip((query, key, value), ws, bs))
    q, k, v = _heads(q, B, L, H, D), _heads(k, B, S, H, D), _heads(v, B, S, H, D)
    scores = np.matmul(q, np.swapaxes(k, -1, -2))
    np.multiply(scores, np.asarray(1.0 / math.sqrt(D), scores.dtype), out=scores)
    probs = _masked_softmax(scores, _mha_mask(mask, mask_type, B, H, L, S), dead_rows_zero=False)
    attn = np.matmul(probs, v).transpose(0, 2, 1, 3).reshape(B, L, E)
    out = np.matmul(attn, proj_weight.T)
    np.add(out, proj_bias, out=out)
    if not need_weights:
        return out, np.empty((0,), query.dtype)
    return out, (probs.mean(axis=1) if average_attn_weights else probs)


def _layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    c = x - mean
    var = np.mean(np.square(c), -1, keepdims=True)
    c *= 1.0 / np.sqrt(var + eps)
    c *= w
    c += b
    return c


def _ffn(x, w1, b1, w2, b2, use_gelu):
    h = np.matmul(x, w1.T)
    h += b1
    if use_gelu:
        from .activation_fast import gelu_erf_
        gelu_erf_(h)
    else:
        np.maximum(h, 0, out=h)
    y = np.matmul(h, w2.T)
    y += b2
    return y


def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                  use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                                  norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                                  mask_type=None):
    """``aten::_transformer_encoder_layer_fwd``: torch's fused eval ``TransformerEncoderLayer``."""
    x = _layer_norm(src, norm_weight_1, norm_bias_1, eps) if norm_first else src
    x = native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                    mask, False, True, mask_type)[0]
    x += src
    if not norm_first:
        x = _layer_norm(x, norm_weight_1, norm_bias_1, eps)
    res = x
    h = _layer_norm(x, norm_weight_2, norm_bias_2, eps) if norm_first else x
    x = _ffn(h, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, use_gelu)
    x += res
    if not norm_first:
        x = _layer_norm(x, norm_weight_2, norm_bias_2, eps)
    return x


# --- constant-weight encoder layer: weights pre-transposed at load, scratch shared per thread

def _ln_(x, w, b, eps, tmp, stat):
    """Layer norm of the rows of 2-D ``x`` in place (``tmp`` like ``x``, ``stat`` (rows, 1))."""
    np.mean(x, axis=1, keepdims=True, out=stat)
    np.subtract(x, stat, out=x)
    np.square(x, out=tmp)
    np.mean(tmp, axis=1, keepdims=True, out=stat)
    np.add(stat, eps, out=stat)
    np.sqrt(stat, out=stat)
    np.divide(x, stat, out=x)
    np.multiply(x, w, out=x)
    np.add(x, b, out=x)
    return x


def _softmax_(s, stat):
    """Softmax over the last dim of ``s`` in place; ``stat`` is ``s.shape[:-1] + (1,)`` scratch. A row
    of -inf gives NaN, as torch's fused kernels."""
    np.max(s, axis=-1, keepdims=True, out=stat)
    with np.errstate(invalid="ignore"):
        np.subtract(s, stat, out=s)
    np.exp(s, out=s)
    np.sum(s, axis=-1, keepdims=True, out=stat)
    np.divide(s, stat, out=s)
    return s


def _mask_bias(mask, mask_type, B, H, L, S, dt):
    """The mask of torch's fused ops as an additive bias broadcasting to the (B, H, L, S) scores:
    -inf where the mask is True or nonzero, 0 elsewhere."""
    keep = _mha_mask(mask, mask_type, B, H, L, S)
    return np.where(keep, dt.type(0), dt.type(-np.inf))


def _head_blocks(B: int, H: int, parts: int) -> list[list[tuple[slice, slice]]]:
    """The (batch, head) pairs of a (B, H, ...) attention in ``parts`` contiguous runs of the
    flattened index, each run as ``(batch slice, head slice)`` segments whose (B, H, L, S) score
    slices are C-contiguous: a run of whole batch entries is one segment, a run part-way through
    an entry's heads one per entry it touches (the compiled softmax works on contiguous rows)."""
    out = []
    for lo, hi in _split(B * H, parts):
        segs, j = [], lo
        while j < hi:
            b, h = divmod(j, H)
            if h == 0 and hi - j >= H:             # whole entries
                nb = (hi - j) // H
                segs.append((slice(b, b + nb), slice(0, H)))
                j += nb * H
            else:                                  # heads h.. of entry b, up to the run's end
                h1 = min(H, h + hi - j)
                segs.append((slice(b, b + 1), slice(h, h1)))
                j += h1 - h
        out.append(segs)
    return out


def _split(n, parts):
    from .parallel import split

    return split(n, parts)


#: below this many multiply-adds of the two score products a split attention is not built (nor timed):
#: the part pool's hand-over costs tens of microseconds
_SPLIT_MIN_MACS = 1 << 20


class _SelfAttention:
    """Constant-weight self-attention of torch's fused ops, weights prepared at load.

    ``attend(h, B, L, bias, y)``: ``y`` (T, E) = out_proj(attention(h)) for ``h`` (T = B * L, E)
    C-contiguous rows; ``bias`` (additive, broadcasting to (B, H, L, L)) or None. Weights are
    transposed to C-contiguous (K, N) once (``np.dot`` into ``out=`` then hits BLAS without a copy)
    and the 1/sqrt(head_dim) score scale is folded into the query projection; each projection's
    GEMM is MKL's where it timed faster for ``rows`` (:mod:`.mkl_gemm`). Intermediates live in the
    per-thread :data:`SHARED_WS`; heads are strided views of the qkv buffer (no split copies), the
    head outputs are written straight into the (tokens, embed) layout the projection reads.

    **Threads.** At more than one intra-op thread the (batch, head) pairs' scores, softmax and
    weighted sum (independent per pair) run in blocks on the plugin's part pool when ``shape``
    ((B, L), known at load) is large enough and the split timed faster than one thread here
    (:func:`.row_split.split_pays`, never by vendor; ``split_timer`` injects the choice in tests).
    Each pair is computed by the same calls either way, so results do not depend on the split.
    """

    def __init__(self, E, H, qkv_weight, qkv_bias, proj_weight, proj_bias, rows, softmax_, shape=None,
                 split_timer=None):
        from .linalg import transposed
        from .mkl_gemm import gemm_for

        self.E, self.H, self.D = E, H, E // H
        dt = self.dt = qkv_weight.dtype
        wqkv = qkv_weight.astype(np.float64).T.copy()
        bqkv = qkv_bias.astype(np.float64).copy()
        wqkv[:, :E] *= 1.0 / math.sqrt(self.D)
        bqkv[:E] *= 1.0 / math.sqrt(self.D)
        self.wqkv, self.bqkv = np.ascontiguousarray(wqkv, dt), bqkv.astype(dt)
        self.wo, self.bo = transposed(proj_weight), proj_bias
        self.dot_qkv, self.dot_o = (gemm_for(rows, w) or np.dot for w in (self.wqkv, self.wo))
        self.softmax_ = softmax_
        self.split = None   # (B, L, threads, blocks) of the chosen split
        if shape is not None:
            self._choose_split(*shape, split_timer)

    def _choose_split(self, B, L, timer=None):
        from . import parallel as _par
        from . import row_split

        H, D = self.H, self.D
        if not (isinstance(B, int) and isinstance(L, int)) or B * H < 2 or 2 * B * H * L * L * D < _SPLIT_MIN_MACS:
            return
        threads = _par.intra_op_threads()
        if threads <= 1:
            return
        blocks = _head_blocks(B, H, min(threads, B * H))
        rng = np.random.default_rng(0)
        qkv = rng.standard_normal((B * L, 3 * self.E)).astype(self.dt)
        attn = np.empty((B, L, H, D), self.dt)
        scores, stat = np.empty((B, H, L, L), self.dt), np.empty((B, H, L, 1), self.dt)
        one_segs = [(slice(0, B), slice(0, H))]

        def one(qkv, attn):
            self._core(qkv, B, L, None, attn, scores, stat, one_segs)

        def split(qkv, attn):
            _par.run_parts(lambda i: self._core(qkv, B, L, None, attn, scores, stat, blocks[i]), len(blocks), threads)
        split.what = f"attention_heads:{B}x{H}x{L}x{D}"
        # (one: numpy's BLAS on the caller alone, as the layer runs it, parallel.blas_on_caller)
        one_ = _par.on_caller(one) if _par.blas_on_caller() else one
        if row_split.split_pays(one_, split, (qkv, attn), timer=timer):
            self.split = (B, L, threads, blocks)

    def _core(self, qkv, B, L, bias, attn, scores, stat, segs):
        """Scores, softmax and weighted sum of the (batch, head) ``segs`` of :func:`_head_blocks`
        into ``attn`` (B, L, H, D), from the (B * L, 3E) ``qkv`` rows; ``scores`` (B, H, L, L) and
        ``stat`` (B, H, L, 1) scratch (the calling thread's: the parts write disjoint slices)."""
        H, D = self.H, self.D
        q, k, v = (qkv[:, i * self.E:(i + 1) * self.E].reshape(B, L, H, D).transpose(0, 2, 1, 3) for i in range(3))
        bias4 = None if bias is None else np.broadcast_to(bias, (B, H, L, L))
        out4 = attn.transpose(0, 2, 1, 3)
        for bs, hs in segs:
            s = scores[bs, hs]
            np.matmul(q[bs, hs], k[bs, hs].transpose(0, 1, 3, 2), out=s)
            if bias4 is not None:
                np.add(s, bias4[bs, hs], out=s)
            self.softmax_(s, stat[bs, hs])
            np.matmul(s, v[bs, hs], out=out4[bs, hs])

    def __call__(self, h, B, L, bias, y):
        self.dot_o(self.heads(h, B, L, bias), self.wo, out=y)
        np.add(y, self.bo, out=y)
        return y

    def heads(self, h, B, L, bias):
        """The (T, E) head outputs the out-projection reads (the calling thread's scratch)."""
        ws, dt, E, H, D = SHARED_WS, self.dt, self.E, self.H, self.D
        T = B * L
        qkv = ws.get(None, "qkv", (T, 3 * E), dt)
        self.dot_qkv(h, self.wqkv, out=qkv)
        np.add(qkv, self.bqkv, out=qkv)
        attn = ws.get(None, "attn", (B, L, H, D), dt)
        scores = ws.get(None, "scores", (B, H, L, L), dt)
        stat = ws.get(None, "sstat", (B, H, L, 1), dt)
        sp = self.split
        if sp is not None and sp[0] == B and sp[1] == L:
            from .parallel import run_parts

            blocks = sp[3]
            run_parts(lambda i: self._core(qkv, B, L, bias, attn, scores, stat, blocks[i]), len(blocks), sp[2])
        else:
            self._core(qkv, B, L, bias, attn, scores, stat, [(slice(0, B), slice(0, H))])
        return attn.reshape(T, E)


def _compiled_or_numpy(dt):
    """(layer norm, softmax) in place: compiled for float32 (jit_norm.py, jit_softmax.py), numpy else."""
    if dt != np.float32:
        return _ln_, _softmax_
    from .jit_norm import LayerNorm
    from .jit_softmax import Softmax

    compiled_ln, compiled_sm = LayerNorm(), Softmax()

    def softmax_(s, stat):
        if s.size:
            s2 = s.reshape(-1, s.shape[-1])   # the scores scratch: C-contiguous
            compiled_sm(s2, s2)
        return s

    def ln_(x, w, b, eps, tmp, stat):
        compiled_ln(x, w, b, x, eps)
        return x
    return ln_, softmax_


def make_encoder_layer(embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                       norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                       ffn_bias_1, ffn_weight_2, ffn_bias_2, rows=None, mask_type=None, shape=None):
    """``fn(src, mask=None)``: an encoder layer with constant weights (a mask of ``mask_type`` as
    torch's fused op reads it). ``rows``: batch x tokens when known at load; each GEMM is then MKL's
    where it timed faster (:mod:`.mkl_gemm`). The attention is :class:`_SelfAttention` (``shape``:
    (batch, tokens) when known at load, for its split over heads); softmax and layer norms work in
    place in per-thread scratch. Only the result is a fresh array.

    At more than one intra-op thread the layer runs numpy's BLAS on the calling thread alone
    (``parallel.on_caller``, the plugin's one-team policy, ``parallel.blas_on_caller``): its
    unsplit products (the score products, a projection MKL did not win) otherwise ran OpenBLAS's
    threaded GEMM, whose worker then spun beside the part pool's (MKL's split projections):
    transformer_block at 2 threads ran three busy threads on two cores (OpenBLAS's worker ~0.85x
    the caller's CPU time, docs/performance-log.md, "transformer_block at 2 threads").
    """
    from .activation_fast import gelu_erf_
    from .linalg import transposed
    from .mkl_gemm import gemm_for

    E, H = embed_dim, num_heads
    dt = qkv_weight.dtype
    ln_, softmax_ = _compiled_or_numpy(dt)
    if dt == np.float32:
        norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2 = (
            np.ascontiguousarray(a, dt).reshape(-1) for a in (norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2))
    attention = _SelfAttention(E, H, qkv_weight, qkv_bias, proj_weight, proj_bias, rows, softmax_, shape)
    w1, w2 = (transposed(w) for w in (ffn_weight_1, ffn_weight_2))
    Fh = w1.shape[1]
    dot_1, dot_2 = (gemm_for(rows, w) or np.dot for w in (w1, w2))

    def encoder_layer(src, mask=None):
        ws = SHARED_WS
        B, L, _ = src.shape
        T = B * L
        x = np.ascontiguousarray(src).reshape(T, E)
        tmp = ws.get(None, "tmp", (T, E), dt)
        stat = ws.get(None, "stat", (T, 1), dt)
        h0 = x
        if norm_first:
            h0 = ws.get(None, "ln", (T, E), dt)
            np.copyto(h0, x)
            ln_(h0, norm_weight_1, norm_bias_1, eps, tmp, stat)
        bias = None if mask is None else _mask_bias(mask, mask_type, B, H, L, L, dt)
        y = attention(h0, B, L, bias, ws.get(None, "y", (T, E), dt))
        np.add(y, x, out=y)
        if not norm_first:
            ln_(y, norm_weight_1, norm_bias_1, eps, tmp, stat)
        hin = y
        if norm_first:
            hin = ws.get(None, "ln", (T, E), dt)
            np.copyto(hin, y)
            ln_(hin, norm_weight_2, norm_bias_2, eps, tmp, stat)
        hid = ws.get(None, "hid", (T, Fh), dt)
        dot_1(hin, w1, out=hid)
        np.add(hid, ffn_bias_1, out=hid)
        if use_gelu:
            gelu_erf_(hid)
        else:
            np.maximum(hid, 0, out=hid)
        z = np.empty((T, E), dt)
        dot_2(hid, w2, out=z)
        np.add(z, ffn_bias_2, out=z)
        np.add(z, y, out=z)
        if not norm_first:
            ln_(z, norm_weight_2, norm_bias_2, eps, tmp, stat)
        return z.reshape(B, L, E)
    layer = _held(encoder_layer)
    if shape is None or dt != np.float32:
        return layer
    norms = (norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2)
    best = _split_tail(layer, attention, ln_, norms, eps, norm_first, use_gelu, w1, ffn_bias_1, w2, ffn_bias_2,
                       mask_type, shape)
    return _native_or(best, attention, ln_, norms, eps, norm_first, use_gelu, w1, ffn_bias_1, w2, ffn_bias_2,
                      mask_type, shape)


def _native_or(layer, attention, ln_, norms, eps, norm_first, use_gelu, w1, b1, w2, b2, mask_type, shape):
    """``layer``, or the layer with its products on the native team (:mod:`.native_encoder`) where
    that is built (more than one intra-op thread) and times faster at load (never by vendor)."""
    from . import native_encoder
    from . import tactic

    native = native_encoder.make(attention, ln_, norms, eps, norm_first, use_gelu, w1, b1, w2, b2, mask_type,
                                 shape, layer)
    if native is None:
        return layer
    B, L = shape
    src = np.random.default_rng(0).standard_normal((B, L, attention.E)).astype(np.float32)
    best = tactic.fastest({"layer": layer, "native": native}, (src,),
                          key=("encoder_native", B, L, attention.E, w1.shape[1], int(norm_first), int(use_gelu),
                               getattr(layer, "what", "")))
    return native if best == "native" else layer


#: an encoder layer's tail (out-projection, feed-forward) under this many multiply-adds is not split
_TAIL_MIN_MACS = 1 << 22


def _split_tail(layer, attention, ln_, norms, eps, norm_first, use_gelu, w1, b1, w2, b2, mask_type, shape):
    """``layer``, or at more than one intra-op thread the same layer with everything after the heads
    (out-projection, residual adds, both layer norms, the feed-forward and its activation: each row
    on its own) in blocks of rows on the part pool, one hand-over a layer, where that times faster
    at load (:func:`.row_split.split_pays`, never by vendor). On one thread those ran serially after
    the heads, only MKL's column-split products on both cores (transformer_block at 2 threads:
    docs/performance-log.md, "the cpu plugin at 2 threads on an AMD EPYC"). Each part's products are
    numpy's BLAS on one thread (the pool holds it there). ``SRCORE_CPU_LINEAR_ROWS=0`` turns it off
    (as :mod:`.linear_split`'s row splits)."""
    import os

    from . import parallel as _par
    from . import row_split
    from .activation_fast import gelu_erf_

    B, L = shape
    if os.environ.get("SRCORE_CPU_LINEAR_ROWS", "1") == "0" or not (isinstance(B, int) and isinstance(L, int)):
        return layer
    E, Fh, T = attention.E, w1.shape[1], B * L
    if T * (E * E + 2 * E * Fh) < _TAIL_MIN_MACS:
        return layer
    threads = _par.intra_op_threads()
    if threads <= 1 or T < 2 * threads:
        return layer
    pieces = _par.split(T, threads)
    nw1, nb1, nw2, nb2 = norms
    dt, H, wo, bo = attention.dt, attention.H, attention.wo, attention.bo

    def tail(a, x, y, hid, z, lnb, tmp, stat, lo, hi):
        yr, ts, ss = y[lo:hi], tmp[lo:hi], stat[lo:hi]
        np.dot(a[lo:hi], wo, out=yr)
        np.add(yr, bo, out=yr)
        np.add(yr, x[lo:hi], out=yr)
        if not norm_first:
            ln_(yr, nw1, nb1, eps, ts, ss)
        hin = yr
        if norm_first:
            hin = lnb[lo:hi]
            np.copyto(hin, yr)
            ln_(hin, nw2, nb2, eps, ts, ss)
        hr = hid[lo:hi]
        np.dot(hin, w1, out=hr)
        np.add(hr, b1, out=hr)
        if use_gelu:
            gelu_erf_(hr)
        else:
            np.maximum(hr, 0, out=hr)
        zr = z[lo:hi]
        np.dot(hr, w2, out=zr)
        np.add(zr, b2, out=zr)
        np.add(zr, yr, out=zr)
        if not norm_first:
            ln_(zr, nw2, nb2, eps, ts, ss)

    def encoder_layer_split(src, mask=None):
        if src.shape != (B, L, E):
            return layer(src, mask)
        ws = SHARED_WS
        x = np.ascontiguousarray(src).reshape(T, E)
        tmp, stat = ws.get(None, "tmp", (T, E), dt), ws.get(None, "stat", (T, 1), dt)
        h0 = x
        if norm_first:
            h0 = ws.get(None, "ln", (T, E), dt)
            np.copyto(h0, x)
            ln_(h0, nw1, nb1, eps, tmp, stat)
        bias = None if mask is None else _mask_bias(mask, mask_type, B, H, L, L, dt)
        a = attention.heads(h0, B, L, bias)
        y, hid = ws.get(None, "y", (T, E), dt), ws.get(None, "hid", (T, Fh), dt)
        lnb = ws.get(None, "ln", (T, E), dt) if norm_first else None
        z = np.empty((T, E), dt)
        _par.run_parts(lambda i: tail(a, x, y, hid, z, lnb, tmp, stat, *pieces[i]), len(pieces), threads)
        return z.reshape(B, L, E)
    split = _held(encoder_layer_split)
    split.what = f"encoder_tail:{B}x{L}x{E}x{Fh}:{int(norm_first)}:{int(use_gelu)}"
    src = np.random.default_rng(0).standard_normal((B, L, E)).astype(dt)
    return split if row_split.split_pays(layer, split, (src,)) else layer


def _held(fn):
    """``fn`` with numpy's BLAS on the calling thread alone where the plugin's one-team policy holds
    (more than one intra-op thread, ``parallel.blas_on_caller``), else ``fn``."""
    from . import parallel as _par

    return _par.on_caller(fn) if _par.blas_on_caller() else fn


_LAYER_ARGS = ("embed_dim", "num_heads", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "use_gelu",
               "norm_first", "eps", "norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2",
               "ffn_weight_1", "ffn_bias_1", "ffn_weight_2", "ffn_bias_2")


def _const_weights(node, names):
    """The constant float32 / float64 weights ``names`` of one dtype, else None."""
    if not all(node.is_const(n) for n in names):
        return None
    vals = [node.const(n) for n in names]
    arrays = [v for v in vals if isinstance(v, np.ndarray)]
    if len({a.dtype for a in arrays}) != 1 or arrays[0].dtype not in (np.float32, np.float64):
        return None
    return vals, arrays[0].dtype


def _mask_args(node, pos: int):
    """How the specialized call gets ``mask`` (schema position ``pos``): None when the node
    leaves it out or it is a None constant; its ``mask_type`` if constant (else KeyError)."""
    names = [a.name for a in node.args]
    mask_type = node.const("mask_type", KeyError) if "mask_type" in names else None
    if "mask" not in names or (node.is_const("mask") and node.const("mask") is None):
        return None, mask_type
    return pos, mask_type


def _rows(node, arg: str):
    shape = _batch_tokens(node, arg)
    return None if shape is None else shape[0] * shape[1]


def _batch_tokens(node, arg: str):
    """(batch, tokens) of a (B, L, E) argument of static leading dims, else None."""
    shape = getattr(node.arg(arg).type, "shape", None)
    return tuple(shape[:2]) if shape and len(shape) == 3 and all(isinstance(d, int) for d in shape[:2]) else None


def transformer_encoder_layer_matcher(node):
    """Constant weights (a mask or none, its type constant): :func:`make_encoder_layer` for
    float32/64 batched inputs of the weights' dtype (others go to the generic kernel)."""
    from srcore.plugin import Const, Specialized

    generic = _held(transformer_encoder_layer_fwd)
    weights = _const_weights(node, _LAYER_ARGS)
    if weights is None or len([v for v in weights[0] if isinstance(v, np.ndarray)]) != 12:
        return generic
    vals, dt = weights
    try:
        mask_pos, mask_type = _mask_args(node, len(_LAYER_ARGS) + 1)
    except KeyError:
        return generic
    fast = make_encoder_layer(*vals, rows=_rows(node, "src"), mask_type=mask_type, shape=_batch_tokens(node, "src"))
    E = vals[0]

    def encoder_layer_const(src, mask):
        if src.ndim == 3 and src.dtype == dt and src.shape[2] == E:
            return fast(src, mask)
        return generic(src, *vals, mask, mask_type)
    return Specialized(encoder_layer_const, args=(0, Const(None) if mask_pos is None else mask_pos))


_MHA_ARGS = ("embed_dim", "num_head", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias")


def native_multi_head_attention_matcher(node):
    """Constant weights, the weights output not asked for (``need_weights`` False), ``mask_type``
    constant: self-attention (one array as query, key and value) runs :class:`_SelfAttention`, the
    mask an additive bias; any other call the generic kernel."""
    from srcore.plugin import Const, Specialized

    generic = _held(native_multi_head_attention)
    weights = _const_weights(node, _MHA_ARGS)
    names = [a.name for a in node.args]
    if weights is None or "need_weights" not in names or not node.is_const("need_weights") \
            or node.const("need_weights") is not False:
        return generic
    vals, dt = weights
    try:
        mask_pos, mask_type = _mask_args(node, 9)
    except KeyError:
        return generic
    E, H = int(vals[0]), int(vals[1])
    avg = node.const("average_attn_weights", True) if "average_attn_weights" in names else True
    _, softmax_ = _compiled_or_numpy(dt)
    attention = _held(_SelfAttention(E, H, *vals[2:], _rows(node, "query"), softmax_, _batch_tokens(node, "query")))

    def mha_const(query, key, value, mask):
        if query is key and key is value and query.ndim == 3 and query.dtype == dt and query.shape[2] == E:
            B, L, _ = query.shape
            bias = None if mask is None else _mask_bias(mask, mask_type, B, H, L, L, dt)
            out = np.empty((B * L, E), dt)
            attention(np.ascontiguousarray(query).reshape(B * L, E), B, L, bias, out)
            return out.reshape(B, L, E), np.empty((0,), dt)
        return generic(query, key, value, *vals, mask, False, avg, mask_type)
    return Specialized(mha_const, args=(0, 1, 2, Const(None) if mask_pos is None else mask_pos))
