"""Multi-head attention on small heads as one compiled call (the ``attention_heads`` layer's
``numba`` tactic): per batch and head, the scores ``Q_h K_h^T``, ``softmax(S / c + mask)``
(:func:`.rows.softmax_rows_biased`, torch's order; rows of up to :data:`BLOCK_KEYS` keys as one
block, :func:`.rows.softmax_block_biased`) and ``P V_h`` written into the head's columns.

For BERT-sized heads on short sequences (bert_pooler: 2 x 4 heads of 12 x 8) each BLAS call costs
more than its arithmetic (the numpy tactic: 36 us a layer, ~4.5 us per head); here the whole layer
is a few thousand multiply-adds in one call. Long sequences stay with BLAS by timing.
"""
from __future__ import annotations

import numba
import numpy as np

from .jit import ROWS_JIT
from .rows import softmax_block_biased, softmax_rows_biased
from .simd import vfma, vload_lanes, vsplat, vstore_lanes, vzero

f32 = np.float32
#: the longest score rows exponentiated as one block: the per-row kernel's vector loops and scalar
#: tails cost more below this (Sapphire Rapids, CPU time, one (L, S) head: 20 keys 1.5 vs 3.9 us,
#: 32 keys 2.2 vs 5.8, 49 keys 4.6 vs 9.2, 64 keys 7.2 vs 11.4; the same results bit for bit)
BLOCK_KEYS = 64


@numba.njit(**ROWS_JIT)
def attention_heads(qf, q0, qs, kf, k0, ks, vf, v0, vs, B, L, S, mask, step, c, divide, safe, heads, kt, s, p,
                    mxs, out):
    """``out[b, :, h*D:(h+1)*D] = softmax(q_h k_h^T / c + mask) v_h`` (``divide``; else ``* c``) for
    every batch ``b`` and head ``h``, on flat projections: query row (b, i) at ``qf[q0 + (b * L + i)
    * qs:]``, key and value rows (b, j) at ``kf[k0 + (b * S + j) * ks:]`` and ``vf[v0 + (b * S + j) *
    vs:]`` (three (B, L, E) / (B, S, E) tensors, or the column blocks of one packed qkv); ``out``
    (B, L, E) contiguous. ``mask`` is (Bm, Hm, Lm, S) with Bm, Hm in (1, B / H) and ``step`` its
    row step (0: Lm == 1); ``kt`` (D, S), ``s`` and ``p`` (L, S) and ``mxs`` (L) are scratch;
    ``safe``: fully masked rows give zeros (``scaled_dot_product_attention``), else NaN
    (``softmax``). Explicit 16-lane vectors: score rows over keys (against ``kt``, K_h^T), output
    rows over the head's columns (ViT's 17 keys and heads of 8 or 16: the plain loops ran near
    scalar speed, 19.5 vs 9.0 us for its 2 x 4 heads of 8)."""
    E = out.shape[2]
    D = E // heads
    ktf, sf, pf, of = kt.ravel(), s.ravel(), p.ravel(), out.ravel()
    for b in range(B):
        mb = b if mask.shape[0] > 1 else 0
        for h in range(heads):
            c0 = h * D
            for j in range(S):
                kr = k0 + (b * S + j) * ks + c0
                for d in range(D):
                    ktf[d * S + j] = kf[kr + d]
            for i in range(L):
                qr = q0 + (b * L + i) * qs + c0
                for j0 in range(0, S, 16):
                    m = min(16, S - j0)
                    acc = vzero()
                    for d in range(D):
                        acc = vfma(vsplat(qf, qr + d), vload_lanes(ktf, d * S + j0, m), acc)
                    vstore_lanes(sf, i * S + j0, acc, m)
            mh = mask[mb, h if mask.shape[1] > 1 else 0]
            if S <= BLOCK_KEYS:
                softmax_block_biased(s, p, c, divide, mh, step, mxs, safe)
            else:
                softmax_rows_biased(s, p, c, divide, mh, step, safe)
            for i in range(L):
                orow = (b * L + i) * E + c0
                for d0 in range(0, D, 16):
                    m = min(16, D - d0)
                    acc = vzero()
                    for j in range(S):
                        acc = vfma(vsplat(pf, i * S + j), vload_lanes(vf, v0 + (b * S + j) * vs + c0 + d0, m), acc)
                    vstore_lanes(of, orow + d0, acc, m)
